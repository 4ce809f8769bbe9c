"""The payload store: where closed executions' histories go once compacted, one compressed object per execution.

A directory under the data directory by default; an S3-compatible bucket (``--payload-store s3://bucket/prefix``)
through botocore, found as ``AwsClients`` finds every client (``AWS_ENDPOINT_URL_S3`` points it at MinIO, moto or
another S3). Calls block: they run on the API's store threads, never on the event loop or the engine thread.

Invariant: ``put`` returns only once the object is durable (the directory fsyncs the file and its directory), so
the store may delete the history rows it holds. An object is named by its execution's ARN alone: compacting again
after a crash overwrites it with the same history.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path
from typing import Any, Protocol

import orjson

from .aws.clients import AwsClients

COMPRESS_LEVEL = 6  # gzip's default: histories are repetitive JSON; higher levels gain little for their time


class PayloadStore(Protocol):
    location: str  # where the objects are, for messages

    def put(self, key: str, body: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def delete(self, key: str) -> None:
        """Remove the object; nothing if there is none."""


def history_key(execution_arn: str) -> str:
    """An execution's history object: spread over 256 prefixes, a safe file name whatever the ARN holds."""
    digest = hashlib.sha256(execution_arn.encode()).hexdigest()
    return f"history/{digest[:2]}/{digest}.json.gz"


def encode_history(events: list[dict[str, Any]]) -> bytes:
    return gzip.compress(orjson.dumps(events), COMPRESS_LEVEL, mtime=0)


def decode_history(body: bytes) -> list[dict[str, Any]]:
    return orjson.loads(gzip.decompress(body))


class DirectoryPayloads:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def put(self, key: str, body: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".partial")
        with open(temporary, "wb") as file:
            file.write(body)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)  # readers see the whole object or none
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def get(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def delete(self, key: str) -> None:
        (self.root / key).unlink(missing_ok=True)


class S3Payloads:
    def __init__(self, clients: AwsClients, region: str, bucket: str, prefix: str) -> None:
        self._client = clients.client("s3", region)
        self._bucket = bucket
        self._prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.location = f"s3://{bucket}/{self._prefix}"

    def put(self, key: str, body: bytes) -> None:
        self._client.put_object(Bucket=self._bucket, Key=self._prefix + key, Body=body,
                                ContentType="application/json", ContentEncoding="gzip")

    def get(self, key: str) -> bytes:
        return self._client.get_object(Bucket=self._bucket, Key=self._prefix + key)["Body"].read()

    def delete(self, key: str) -> None:
        self._client.delete_object(Bucket=self._bucket, Key=self._prefix + key)


def check_target(target: str) -> str:
    """``--payload-store``'s value, checked: ValueError saying what is wrong."""
    if target.startswith("s3://") and not target.removeprefix("s3://").partition("/")[0]:
        raise ValueError(f"{target} names no bucket: pass s3://BUCKET/PREFIX")
    return target


def open_payload_store(target: str | None, data_dir: Path, clients: AwsClients, region: str) -> PayloadStore:
    """``target`` (checked): an ``s3://bucket/prefix`` URL, a directory, or None (``payloads`` in the data
    directory)."""
    if target is None:
        return DirectoryPayloads(data_dir / "payloads")
    if target.startswith("s3://"):
        bucket, _, prefix = target.removeprefix("s3://").partition("/")
        return S3Payloads(clients, region, bucket, prefix)
    return DirectoryPayloads(Path(target).expanduser())
