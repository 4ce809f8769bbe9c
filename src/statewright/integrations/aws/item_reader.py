"""A distributed Map's ItemReader: the S3 object (``s3:getObject``) or listing (``s3:listObjectsV2``) its items
come from, read through botocore a page at a time and handed to the parent's Map page by page (``decider/map_runs.py``
parses each with ``distributed_map``, as TestState parses mapItemReaderData), each with the cursor of the next.

Pages: a listing's (``item_reader_page_items`` objects, ListObjectsV2's continuation token the cursor); a JSONL or
CSV object's (``item_reader_page_bytes`` bytes, cut after the last whole row: ranged GETs at the object's ETag, so
a page of an object changed since the first fails the Map instead of mixing two objects); a manifest's (one CSV
file it lists each). A JSON or Parquet object is one page, read whole. The binary or indirect kinds become a JSON
array of their items here: PARQUET's rows (through pyarrow, an optional extra), and MANIFEST's (an S3 Inventory
manifest) rows of the CSV files it lists.

A read may repeat (the dispatch stays in the outbox until the parent records the page): it changes nothing. A
bucket or key that does not exist, or a refusal, fails the Map with States.ItemReaderFailed and S3's message; S3
out of reach is tried again with a growing pause until it answers, so the run goes on when S3 is back.

The listing's items as AWS shapes them, ``{"Etag", "Key", "LastModified", "Size", "StorageClass"}``, LastModified
in epoch seconds (AWS's ItemReader (Map) page, and the keys in LocalStack's AWS-validated snapshots). Inferred: the
cause's wording, and the pages (AWS does not say how it reads).
"""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ...asl.jsonio import dumps, loads
from ...decider.distributed_map import READER_FAILED
from ...decider.outcomes import AttemptFailed, AttemptSubmitted
from ...engine.commands import CompleteAttempt
from ...engine.limits import Limits
from ...store.base import Dispatch
from ..dispatcher import Dispatcher
from .clients import AwsClients
from .s3 import REPORT_S, S3Refused, until_answered


class ItemReader:
    def __init__(self, dispatcher: Dispatcher, clients: AwsClients, limits: Limits) -> None:
        self.dispatcher = dispatcher
        self.clients = clients
        self.page = Page(limits.item_reader_page_bytes, limits.item_reader_page_items)
        dispatcher.register("mapread", self.run)

    async def run(self, dispatch: Dispatch) -> None:
        payload = dispatch.payload
        region = dispatch.execution_arn.split(":")[3]
        try:
            text, cursor = await until_answered(
                self.clients, region, f"reading the items of {dispatch.execution_arn}",
                lambda client: read(client, payload["action"], payload["parameters"], payload.get("input_type", ""),
                                    payload.get("cursor"), self.page))
            outcome: AttemptSubmitted | AttemptFailed = AttemptSubmitted(
                {"read": text, "page": payload.get("page", 0), "next": cursor})
        except (S3Refused, UnreadableItems) as error:
            outcome = AttemptFailed(READER_FAILED, str(error))
        except UnicodeDecodeError as error:
            outcome = AttemptFailed(READER_FAILED, f"The object is not UTF-8 text: {error}")
        await self.dispatcher.report(CompleteAttempt(dispatch.execution_arn, payload["scheduled_id"], outcome),
                                     REPORT_S)


class UnreadableItems(Exception):
    """The object is not what its InputType says (or cannot be read here): the Map fails with its message."""


@dataclass(frozen=True, slots=True)
class Page:
    """How much one read takes (engine/limits.py)."""

    bytes: int
    items: int


def read(client: Any, action: str, parameters: Any, input_type: str, cursor: dict[str, Any] | None,
         page: Page) -> tuple[str, dict[str, Any] | None]:
    """A page of the source from ``cursor`` (None: its start) and the cursor of the next (None: it was the last):
    the object's text (PARQUET and MANIFEST: their items as a JSON array) or the listing's objects as a JSON array.
    Blocks: on a pool thread."""
    where = parameters if isinstance(parameters, dict) else {}
    cursor = cursor or {}
    if action != "getObject":
        return _listing(client, where, cursor.get("token"), page.items)
    bucket, key, version = where.get("Bucket"), where.get("Key"), where.get("VersionId")
    if input_type == "MANIFEST":
        return _inventory_page(client, _get(client, bucket, key, version), cursor.get("file", 0))
    if input_type in ("JSONL", "CSV"):
        return _rows(client, {"Bucket": bucket, "Key": key, **({"VersionId": version} if version else {})},
                     cursor, page.bytes, quoted=input_type == "CSV")
    body = _get(client, bucket, key, version)
    return (dumps(_parquet_rows(body)) if input_type == "PARQUET" else body.decode("utf-8")), None


def _listing(client: Any, where: dict[str, Any], token: str | None,
             items_max: int) -> tuple[str, dict[str, Any] | None]:
    arguments = {key: value for key, value in where.items() if key in _LIST_PARAMETERS}
    items: list[dict[str, Any]] = []
    while True:
        listed = client.list_objects_v2(**arguments, MaxKeys=min(1000, items_max - len(items)),
                                        **({"ContinuationToken": token} if token else {}))
        for found in listed.get("Contents", []):
            items.append({"Etag": found.get("ETag"), "Key": found["Key"],
                          "LastModified": int(found["LastModified"].timestamp()),
                          "Size": found.get("Size"), "StorageClass": found.get("StorageClass")})
        token = listed.get("NextContinuationToken") if listed.get("IsTruncated") else None
        if token is None or len(items) >= items_max:
            return dumps(items), None if token is None else {"token": token}


def _rows(client: Any, where: dict[str, Any], cursor: dict[str, Any], page_bytes: int,
          quoted: bool) -> tuple[str, dict[str, Any] | None]:
    """Whole rows (lines; a CSV row's quoted line breaks kept in it) from the cursor's offset, about
    ``page_bytes`` of them; a row longer than that is read whole."""
    offset, etag = cursor.get("offset", 0), cursor.get("etag")
    chunk, size = b"", None
    while True:
        start = offset + len(chunk)
        try:
            answer = client.get_object(**where, Range=f"bytes={start}-{start + page_bytes - 1}",
                                       **({"IfMatch": etag} if etag else {}))
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code == "InvalidRange" and start == 0:  # an empty object
                return "", None
            if code == "PreconditionFailed":
                raise UnreadableItems("The object changed while its items were read") from None
            raise
        etag = etag or answer.get("ETag")
        size = _object_size(answer.get("ContentRange"), start + answer.get("ContentLength", 0))
        chunk += answer["Body"].read()
        if offset + len(chunk) >= size:
            return chunk.decode("utf-8"), None
        cut = _last_row_end(chunk, quoted)
        if cut is not None:
            return chunk[:cut].decode("utf-8"), {"offset": offset + cut, "etag": etag}


def _object_size(content_range: str | None, fallback: int) -> int:
    """The object's size from a ranged GET's Content-Range (``bytes 0-99/1234``)."""
    if content_range and "/" in content_range:
        total = content_range.rsplit("/", 1)[1]
        if total.isdigit():
            return int(total)
    return fallback


def _last_row_end(chunk: bytes, quoted: bool) -> int | None:
    """Just past the last line break of ``chunk`` that ends a row (for CSV, one outside quotes: a doubled quote
    inside a field counts twice, so the parity holds); None: no row ends in it."""
    cut = chunk.rfind(b"\n")
    while cut >= 0 and quoted and chunk.count(b'"', 0, cut) % 2:
        cut = chunk.rfind(b"\n", 0, cut)
    return None if cut < 0 else cut + 1


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


def _inventory_page(client: Any, body: bytes, file: int) -> tuple[str, dict[str, Any] | None]:
    """The objects of one CSV file an S3 Inventory manifest lists: each row (gzipped or not, in its destination
    bucket), an object of the fields its fileSchema names, as strings (AWS's ItemReader (Map) page; the
    manifest's layout is S3 Inventory's); and the cursor of the next file."""
    try:
        manifest = loads(body)
        columns = [name.strip() for name in manifest["fileSchema"].split(",")]
        bucket = manifest["destinationBucket"].removeprefix("arn:aws:s3:::")
        files = [entry["key"] for entry in manifest["files"]]
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise UnreadableItems(f"The object is not an S3 Inventory manifest: {error!r}") from None
    if manifest.get("fileFormat", "CSV") != "CSV":
        raise UnreadableItems(f"statewright reads S3 Inventory files of format CSV, not {manifest['fileFormat']}")
    if file >= len(files):
        return "[]", None
    key = files[file]
    data = _get(client, bucket, key)
    if key.endswith(".gz") or data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    items = [dict(zip(columns, row, strict=False)) for row in csv.reader(io.StringIO(data.decode("utf-8"))) if row]
    return dumps(items), {"file": file + 1} if file + 1 < len(files) else None


_LIST_PARAMETERS = {"Bucket", "Prefix", "Delimiter", "EncodingType", "FetchOwner", "StartAfter", "RequestPayer",
                    "ExpectedBucketOwner"}
