"""A distributed Map's ItemReader: the S3 object (``s3:getObject``) or listing (``s3:listObjectsV2``) its items
come from, read through botocore and handed to the parent's Map as its read (``decider/map_runs.py`` parses it
with ``distributed_map``, as TestState parses mapItemReaderData). The binary or indirect kinds become a JSON array
of their items here: PARQUET's rows (through pyarrow, an optional extra), and MANIFEST's (an S3 Inventory
manifest) rows of the CSV files it lists.

A read may repeat (the dispatch stays in the outbox until the parent records the read): it changes nothing. A
bucket or key that does not exist, or a refusal, fails the Map with States.ItemReaderFailed and S3's message; S3
out of reach is tried again with a growing pause until it answers, so the run goes on when S3 is back.

The listing's items as AWS shapes them, ``{"Etag", "Key", "LastModified", "Size", "StorageClass"}``, LastModified
in epoch seconds (AWS's ItemReader (Map) page, and the keys in LocalStack's AWS-validated snapshots). Inferred: the
cause's wording.
"""

from __future__ import annotations

import csv
import gzip
import io
from typing import Any

from ...asl.jsonio import dumps, loads
from ...decider.distributed_map import READER_FAILED
from ...decider.outcomes import AttemptFailed, AttemptSubmitted
from ...engine.commands import CompleteAttempt
from ...store.base import Dispatch
from ..dispatcher import Dispatcher
from .clients import AwsClients
from .s3 import REPORT_S, S3Refused, until_answered


class ItemReader:
    def __init__(self, dispatcher: Dispatcher, clients: AwsClients) -> None:
        self.dispatcher = dispatcher
        self.clients = clients
        dispatcher.register("mapread", self.run)

    async def run(self, dispatch: Dispatch) -> None:
        payload = dispatch.payload
        region = dispatch.execution_arn.split(":")[3]
        try:
            text = await until_answered(self.clients, region, f"reading the items of {dispatch.execution_arn}",
                                        lambda client: read(client, payload["action"], payload["parameters"],
                                                            payload.get("input_type", "")))
            outcome: AttemptSubmitted | AttemptFailed = AttemptSubmitted({"read": text})
        except (S3Refused, UnreadableItems) as error:
            outcome = AttemptFailed(READER_FAILED, str(error))
        except UnicodeDecodeError as error:
            outcome = AttemptFailed(READER_FAILED, f"The object is not UTF-8 text: {error}")
        await self.dispatcher.report(CompleteAttempt(dispatch.execution_arn, payload["scheduled_id"], outcome),
                                     REPORT_S)


class UnreadableItems(Exception):
    """The object is not what its InputType says (or cannot be read here): the Map fails with its message."""


def read(client: Any, action: str, parameters: Any, input_type: str) -> str:
    """The object's text (PARQUET and MANIFEST: their items as a JSON array), or the listing's objects as a JSON
    array (every page). Blocks: on a pool thread."""
    where = parameters if isinstance(parameters, dict) else {}
    if action == "getObject":
        body = _get(client, where.get("Bucket"), where.get("Key"), where.get("VersionId"))
        if input_type == "PARQUET":
            return dumps(_parquet_rows(body))
        if input_type == "MANIFEST":
            return dumps(_inventory_items(client, body))
        return body.decode("utf-8")
    arguments = {key: value for key, value in where.items() if key in _LIST_PARAMETERS}
    items = []
    for page in client.get_paginator("list_objects_v2").paginate(**arguments):
        for found in page.get("Contents", []):
            items.append({"Etag": found.get("ETag"), "Key": found["Key"],
                          "LastModified": int(found["LastModified"].timestamp()),
                          "Size": found.get("Size"), "StorageClass": found.get("StorageClass")})
    return dumps(items)


def _get(client: Any, bucket: Any, key: Any, version: Any = None) -> bytes:
    arguments = {"Bucket": bucket, "Key": key, **({"VersionId": version} if version is not None else {})}
    return client.get_object(**arguments)["Body"].read()


def _parquet_rows(body: bytes) -> list[dict[str, Any]]:
    """Each row of a Parquet file, an object of its columns (through Apache Arrow; values JSON cannot hold, such as
    dates and decimals, as their text: inferred)."""
    try:
        import pyarrow.parquet
    except ImportError:
        raise UnreadableItems("Reading PARQUET items needs pyarrow: pip install 'statewright[parquet]'") from None
    try:
        rows = pyarrow.parquet.read_table(io.BytesIO(body)).to_pylist()
    except Exception as error:  # pyarrow's errors for a file that is not Parquet are of several kinds
        raise UnreadableItems(f"The object is not a Parquet file: {error}") from None
    return [{key: _json_value(value) for key, value in row.items()} for row in rows]


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _inventory_items(client: Any, body: bytes) -> list[dict[str, str]]:
    """An S3 Inventory manifest's objects: each row of each CSV file it lists (gzipped or not, in its destination
    bucket), an object of the fields its fileSchema names, as strings (AWS's ItemReader (Map) page; the
    manifest's layout is S3 Inventory's)."""
    try:
        manifest = loads(body)
        columns = [name.strip() for name in manifest["fileSchema"].split(",")]
        bucket = manifest["destinationBucket"].removeprefix("arn:aws:s3:::")
        files = [entry["key"] for entry in manifest["files"]]
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise UnreadableItems(f"The object is not an S3 Inventory manifest: {error!r}") from None
    if manifest.get("fileFormat", "CSV") != "CSV":
        raise UnreadableItems(f"statewright reads S3 Inventory files of format CSV, not {manifest['fileFormat']}")
    items = []
    for key in files:
        data = _get(client, bucket, key)
        if key.endswith(".gz") or data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        for row in csv.reader(io.StringIO(data.decode("utf-8"))):
            if row:
                items.append(dict(zip(columns, row, strict=False)))
    return items


_LIST_PARAMETERS = {"Bucket", "Prefix", "Delimiter", "EncodingType", "FetchOwner", "StartAfter", "RequestPayer",
                    "ExpectedBucketOwner"}
