"""The payload store, where compacted histories go, and ``Histories``, which reads an execution's history wherever
it is.

A payload store holds one gzip-compressed JSON object per compaction of an execution, named by its ARN and the
last event id it holds (``history_key``): a directory (SQLite's default, beside its file: ``DirectoryPayloads``), a
table of PostgreSQL's database (its default: ``postgresql.TablePayloads``), or an S3-compatible bucket
(``integrations/payload_store.py``). Its calls block: they run on the API's store threads, or on the engine thread
for a redrive's reads. Invariants: ``put`` returns only once the object is durable, so the store may delete the
rows it holds; an object is never changed once written, since its name says what it holds (a compaction killed
before its commit writes the same bytes again); a payload store that cannot answer raises StoreUnavailable.

Where a history is. Never compacted: all in the history table. Compacted: the object the execution's row names,
then the rows a redrive added since, in the table (a redrive reopens a compacted execution without bringing its
history back: its new events go to the table as every transition's do, with ids that continue the object's). The
next compaction writes one object of both and deletes those rows in the transaction that points the row at it;
the object it replaced is deleted after that commit.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from .errors import StoreUnavailable

COMPRESS_LEVEL = 6  # gzip's default: histories are repetitive JSON; higher levels gain little for their time
EVENTS_MAX = 1 << 62  # "all of them": a whole history is at most 25,000 events
RACES_MAX = 8  # reads of a history that a compaction moved meanwhile, before the reader gives up (retry later)


class PayloadStore(Protocol):
    location: str  # where the objects are, for messages

    def put(self, key: str, body: bytes) -> None: ...

    def get(self, key: str) -> bytes | None:
        """The object; None if there is none."""

    def delete(self, key: str) -> None:
        """Remove the object; nothing if there is none."""


def history_key(execution_arn: str, last_event_id: int) -> str:
    """The object of an execution's history up to ``last_event_id``: spread over 256 prefixes (no directory per
    execution), a safe file name whatever the ARN holds."""
    digest = hashlib.sha256(execution_arn.encode()).hexdigest()
    return f"history/{digest[:2]}/{digest}.{last_event_id}.json.gz"


def encode_history(events: list[dict[str, Any]]) -> bytes:
    return gzip.compress(orjson.dumps(events), COMPRESS_LEVEL, mtime=0)


def decode_history(body: bytes) -> list[dict[str, Any]]:
    return orjson.loads(gzip.decompress(body))


class HistoryRows(Protocol):
    """What ``Histories`` reads of a store (base.Store's calls of the same names)."""

    def read_history(self, arn: str, after_event_id: int, limit: int, reverse: bool) -> list[dict[str, Any]]: ...

    def history_location(self, arn: str) -> str | None: ...


class DirectoryPayloads:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def put(self, key: str, body: bytes) -> None:
        path = self.root / key
        try:
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
        except OSError as exc:  # a full or read-only disk: nothing pointed at it yet
            raise StoreUnavailable(f"cannot write {path}: {exc}") from exc

    def get(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {self.root / key}: {exc}") from exc

    def delete(self, key: str) -> None:
        try:
            (self.root / key).unlink(missing_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"cannot delete {self.root / key}: {exc}") from exc


class Histories:
    """Execution histories wherever they are (see the module's docstring), read consistently while the retention
    sweep compacts them: the row's location is read before and after the rows, and the reading starts again if a
    compaction moved the history in between (or deleted the object it replaced)."""

    def __init__(self, store: HistoryRows, payloads: PayloadStore | None) -> None:
        """``payloads`` None: no payload store (a compacted history cannot be read)."""
        self.store = store
        self.payloads = payloads

    def read(self, arn: str, after_event_id: int, limit: int, reverse: bool) -> list[dict[str, Any]]:
        """``Store.read_history``'s page, wherever the history is."""
        rows, whole = self._rows_or_whole(arn, lambda: self.store.read_history(arn, after_event_id, limit, reverse))
        if whole is None:
            return rows
        if reverse:
            bound = after_event_id or EVENTS_MAX
            return [event for event in reversed(whole) if event["id"] < bound][:limit]
        return [event for event in whole if event["id"] > after_event_id][:limit]

    def whole(self, arn: str) -> list[dict[str, Any]]:
        return self.read(arn, 0, EVENTS_MAX, False)

    def events(self, arn: str, event_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The events of these ids (a redrive's reads), by id: one read of the object if the history is compacted,
        none at all for no ids."""
        if not event_ids:
            return {}
        wanted = set(event_ids)
        rows, whole = self._rows_or_whole(arn, lambda: [event for event_id in sorted(wanted) for event in
                                                        self.store.read_history(arn, event_id - 1, 1, False)])
        return {event["id"]: event for event in (rows if whole is None else whole) if event["id"] in wanted}

    def _rows_or_whole(self, arn: str, read_rows: Callable[[], list[dict[str, Any]]]
                       ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """(what ``read_rows`` read, None) while the history is all in the table; else ([], the whole history)."""
        for _ in range(RACES_MAX):
            location = self.store.history_location(arn)
            rows = read_rows() if location is None else self.store.read_history(arn, 0, EVENTS_MAX, False)
            if self.store.history_location(arn) != location:
                continue  # compacted (again) between the two reads: the rows read may be gone
            if location is None:
                return rows, None
            if self.payloads is None:
                raise StoreUnavailable(f"the history of {arn} is in a payload store; start the server with it")
            body = self.payloads.get(location)
            if body is None:
                continue  # replaced by a later compaction since the location was read
            compacted = decode_history(body)
            last_id = compacted[-1]["id"] if compacted else 0
            return [], compacted + [event for event in rows if event["id"] > last_id]
        raise StoreUnavailable(f"the history of {arn} kept moving while it was read; retry")
