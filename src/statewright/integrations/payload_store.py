"""A payload store in an S3-compatible bucket (``--payload-store s3://bucket/prefix``), through botocore, found as
``AwsClients`` finds every client (``AWS_ENDPOINT_URL_S3`` points it at MinIO, moto or another S3); and opening the
payload store a server is configured with (store/payloads.py holds the protocol and the other kinds).
"""

from __future__ import annotations

from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from ..store.base import Store, StoreUnavailable
from ..store.payloads import DirectoryPayloads, PayloadStore
from .aws.clients import AwsClients

READ_TIMEOUT_S = 10.0  # an object is at most a few MB; a redrive may wait on it on the engine thread


class S3Payloads:
    def __init__(self, clients: AwsClients, region: str, bucket: str, prefix: str) -> None:
        self._client = clients.client("s3", region, read_timeout_s=READ_TIMEOUT_S)
        self._bucket = bucket
        self._prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.location = f"s3://{bucket}/{self._prefix}"

    def put(self, key: str, body: bytes) -> None:
        try:
            self._client.put_object(Bucket=self._bucket, Key=self._prefix + key, Body=body,
                                    ContentType="application/json", ContentEncoding="gzip")
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailable(f"cannot write {self.location}{key}: {exc}") from exc

    def get(self, key: str) -> bytes | None:
        try:
            return self._client.get_object(Bucket=self._bucket, Key=self._prefix + key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchKey":
                return None
            raise StoreUnavailable(f"cannot read {self.location}{key}: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailable(f"cannot read {self.location}{key}: {exc}") from exc

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self._bucket, Key=self._prefix + key)
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailable(f"cannot delete {self.location}{key}: {exc}") from exc


def check_target(target: str) -> str:
    """``--payload-store``'s value, checked: ValueError saying what is wrong."""
    if target.startswith("s3://") and not target.removeprefix("s3://").partition("/")[0]:
        raise ValueError(f"{target} names no bucket: pass s3://BUCKET/PREFIX")
    return target


def open_payload_store(target: str | None, store: Store, clients: AwsClients, region: str) -> PayloadStore:
    """``target`` (checked): an ``s3://bucket/prefix`` URL, a directory, or None (the store's own: a directory
    beside SQLite's file, a table in PostgreSQL's database)."""
    if target is None:
        return store.payloads()
    if target.startswith("s3://"):
        bucket, _, prefix = target.removeprefix("s3://").partition("/")
        return S3Payloads(clients, region, bucket, prefix)
    return DirectoryPayloads(Path(target).expanduser())
