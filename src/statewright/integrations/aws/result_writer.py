"""A distributed Map's ResultWriter: a closing map run's results written to S3 through botocore, then the run told
(``MapRunWritten``), which closes it and completes its parent's Map.

What is written, as AWS's ResultWriter (Map) page lays it out: under ``<Prefix>/<map run id>/``, the children
that succeeded in ``SUCCEEDED_<n>.json``, those that failed, timed out or were aborted in ``FAILED_<n>.json``,
those never started in ``PENDING_<n>.json`` (each file at most 5 GB, then the next ``n``; a status with no child
has no file), as a JSON array or as JSON Lines (WriterConfig OutputType), and ``manifest.json`` naming them with
their sizes. Inferred: the files keep the .json name whatever the OutputType, and a PENDING record holds the
child's input only (AWS documents neither).

A write may repeat (the dispatch stays in the outbox until the run records it): it writes the same objects again.
A bucket that does not exist or refuses the write fails the run with States.ResultWriterFailed and S3's message;
S3 out of reach is tried again with a growing pause.
"""

from __future__ import annotations

from typing import Any

from ...asl.jsonio import dumps
from ...decider.map_runs import RESULT_WRITER_FAILED
from ...engine.commands import MapRunWritten
from ...store.base import Dispatch
from ..dispatcher import Dispatcher
from .clients import AwsClients
from .s3 import REPORT_S, S3Refused, until_answered

FILE_BYTES_MAX = 5 * 1024 ** 3  # one result file's size, at most (AWS's ResultWriter (Map) page)
STATUSES = ("FAILED", "PENDING", "SUCCEEDED")


class ResultWriter:
    def __init__(self, dispatcher: Dispatcher, clients: AwsClients) -> None:
        self.dispatcher = dispatcher
        self.clients = clients
        dispatcher.register("mapwrite", self.run)

    async def run(self, dispatch: Dispatch) -> None:
        payload = dispatch.payload
        try:
            await until_answered(self.clients, payload["run"].split(":")[3],
                                 f"writing the results of {payload['run']}", lambda client: write(client, payload))
            written = MapRunWritten(payload["run"])
        except S3Refused as error:
            written = MapRunWritten(payload["run"], RESULT_WRITER_FAILED, str(error))
        await self.dispatcher.report(written, REPORT_S)


def write(client: Any, payload: dict[str, Any], file_bytes_max: int = FILE_BYTES_MAX) -> None:
    """Every result file, then the manifest. Blocks: on a pool thread."""
    bucket, prefix = payload["bucket"], payload["prefix"]
    files: dict[str, list[dict[str, Any]]] = {}
    for status in STATUSES:
        files[status] = []
        for number, body in enumerate(_parts(payload[status], payload["output_type"], file_bytes_max)):
            key = f"{prefix}{status}_{number}.json"
            client.put_object(Bucket=bucket, Key=key, Body=body)
            files[status].append({"Key": key, "Size": len(body)})
    manifest = {"DestinationBucket": bucket, "MapRunArn": payload["run"], "ResultFiles": files}
    client.put_object(Bucket=bucket, Key=f"{prefix}manifest.json", Body=dumps(manifest).encode())


def _parts(records: list[str], output_type: str, file_bytes_max: int) -> list[bytes]:
    """The records as files of at most ``file_bytes_max`` each (one record larger than that is a file alone): a
    JSON array, or a line each (JSONL)."""
    parts: list[bytes] = []
    current: list[bytes] = []
    size = 0
    for record in records:
        encoded = record.encode()
        if current and size + len(encoded) + 2 > file_bytes_max:
            parts.append(_joined(current, output_type))
            current, size = [], 0
        current.append(encoded)
        size += len(encoded) + 1
    if current:
        parts.append(_joined(current, output_type))
    return parts


def _joined(records: list[bytes], output_type: str) -> bytes:
    if output_type == "JSONL":
        return b"\n".join(records) + b"\n"
    return b"[" + b",".join(records) + b"]"
