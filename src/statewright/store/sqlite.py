"""The embedded store: one SQLite database in WAL mode with synchronous=FULL, so a commit survives kill -9.

Each thread gets its own connection. The engine's commits arrive as batches (group commit): one
``BEGIN IMMEDIATE`` ... ``COMMIT`` and one fsync for many executions' transitions. What it runs as PostgreSQL does
(the catalogue, listing, retention) is shared (sql_catalogue.py, shared.py); here is only what differs: opening and
connections, the commit, shards and nodes, outbox seqs, activity claims. Must not import the PostgreSQL store or
anything above the store.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import orjson

from .base import COUNT_OPEN_BY_LISTING, CommitResult, Dispatch, ExecutionWrite, OpenCount, Store, open_by_scope
from .dialect import SQLITE
from .errors import CommitFailed, CommitOutcomeUnknown, StoreUnavailable
from .payloads import DirectoryPayloads, PayloadStore
from .retention import ClosedExecution
from .schema import migrate, settle_shard_count
from .shards import NodeRecord, ShardLease
from .shared import (
    EXECUTION_COLUMNS,
    ROW_FIELD_COLUMNS,
    SqlExecutions,
    activity_of,
    due_timer_queries,
    groups,
    insert_row,
    stage_changes,
    update_row,
    with_row_fields,
)
from .sql_catalogue import SqlCatalogue
from .sqlite_schema import MIGRATIONS


class SqliteStore(SqlCatalogue, SqlExecutions, Store):
    """History and timer rows name their execution by its integer id (the executions table's rowid, handed out in
    start order), not its ARN: the rows are smaller, and one tick's rows land together in the trees instead of on
    pages as random as the ARNs' names."""

    _dialect = SQLITE
    rows_hold_fields = True  # no earlier release reads a file at schema 9
    _KEY = "id"
    _KEY_TYPE = int
    _ROW_KEY = "execution_id"
    _DUE_AFTER_MS, _DUE_AFTER_KEY = due_timer_queries("execution_id", "id")

    def __init__(self, path: str | Path, shard_count: int | None) -> None:
        """Open (or create) the database; ``shard_count`` None opens an existing one with whatever count it has."""
        self.path = self.location = str(path)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._outbox_seqs: dict[int, int] = {}
        self._exclusive_range_ids: dict[int, int] = {}  # shards taken without a lease, by the only server on the file
        self._open(shard_count)

    def _initialize(self, shard_count: int | None) -> None:
        with self._transaction() as db:
            migrate(db, SQLITE, MIGRATIONS, self.path)
            self._shard_count = settle_shard_count(
                db, SQLITE, shard_count, self.path, instead="a new data directory", missing=FileNotFoundError(
                    f"{self.path} holds no statewright data yet; start `statewright serve` on it"))
            db.executemany("INSERT OR IGNORE INTO shards (shard_id, range_id) VALUES (?, 0)",
                           [(shard,) for shard in range(self._shard_count)])

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=OFF")
            self._local.db = db
            with self._lock:
                self._connections.append(db)
        return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            with suppress(sqlite3.Error):  # a failed COMMIT (disk full) leaves the transaction open: end it
                db.execute("ROLLBACK")
            raise

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with _unavailable():
            return self._db().execute(sql, params).fetchall()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with _unavailable(), self._transaction() as db:
            yield db

    @contextmanager
    def _metadata_write(self) -> Iterator[sqlite3.Connection]:
        """A transaction writing state machines, activities, tags or settings. A database that cannot write (disk
        full) raises StoreUnavailable, nothing written. Once another process has taken the shards this store took
        as the only server on the file, it writes nothing more: the check the engine's commits make, on the same
        range ids."""
        with self._write() as db:
            if self._exclusive_range_ids:
                current = dict(db.execute("SELECT shard_id, range_id FROM shards").fetchall())
                if any(current.get(shard) != range_id for shard, range_id in self._exclusive_range_ids.items()):
                    raise StoreUnavailable(f"another statewright server took over {self.path}; this one no longer "
                                           f"writes")
            yield db

    def close(self) -> None:
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()

    def use_storage_format(self, storage_format: int) -> None:
        """Nothing to follow: every reader of a file at schema 9 reads format 2 (a cluster on one file is the
        simulator's)."""

    # -- shards

    def shard_count(self) -> int:
        return self._shard_count

    def acquire_shard(self, shard_id: int, owner: str, lease_until_ms: int, now_ms: int | None = None) -> int | None:
        with self._transaction() as db:
            free = "" if now_ms is None else " AND (owner IS NULL OR owner = ? OR lease_until_ms <= ?)"
            taken = db.execute(f"UPDATE shards SET range_id = range_id + 1, owner = ?, lease_until_ms = ? "
                               f"WHERE shard_id = ?{free}",
                               (owner, lease_until_ms, shard_id, *(() if now_ms is None else (owner, now_ms))))
            if not taken.rowcount:
                return None
            # Counted from the rows there now, before this owner reads or removes any: a row removed later must
            # not let a new one take a seq at or below what this owner's reader has passed (another owner may
            # have written since this process last counted).
            in_rows = db.execute("SELECT COALESCE(MAX(seq), 0) FROM outbox WHERE shard_id = ?",
                                 (shard_id,)).fetchone()[0]
            self._outbox_seqs[shard_id] = max(in_rows, self._outbox_seqs.get(shard_id, 0))
            range_id = db.execute("SELECT range_id FROM shards WHERE shard_id = ?", (shard_id,)).fetchone()[0]
        if now_ms is None:
            self._exclusive_range_ids[shard_id] = range_id
        return range_id

    def renew_leases(self, owner: str, range_ids: Mapping[int, int], lease_until_ms: int) -> set[int]:
        renewed: set[int] = set()
        with self._transaction() as db:
            for shard_id, range_id in range_ids.items():
                if db.execute("UPDATE shards SET lease_until_ms = ? WHERE shard_id = ? AND range_id = ? "
                              "AND owner = ?", (lease_until_ms, shard_id, range_id, owner)).rowcount:
                    renewed.add(shard_id)
        return renewed

    def release_shards(self, owner: str, range_ids: Mapping[int, int]) -> None:
        with self._transaction() as db:
            db.executemany("UPDATE shards SET owner = NULL, lease_until_ms = 0 WHERE shard_id = ? AND range_id = ? "
                           "AND owner = ?", [(shard, range_id, owner) for shard, range_id in range_ids.items()])

    def shard_leases(self) -> list[ShardLease]:
        rows = self._db().execute("SELECT shard_id, range_id, owner, COALESCE(lease_until_ms, 0) FROM shards "
                                  "ORDER BY shard_id").fetchall()
        return [ShardLease(*row) for row in rows]

    # -- nodes

    def register_node(self, node_id: str, address: str, lease_until_ms: int, rule: int = 1, weight: int = 1,
                      storage_format: int = 1) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO nodes (node_id, address, lease_until_ms, assignment_rule, weight, "
                       "storage_format) VALUES (?, ?, ?, ?, ?, ?)",
                       (node_id, address, lease_until_ms, rule, weight, storage_format))

    def remove_node(self, node_id: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM nodes WHERE node_id = ?", (node_id,))

    def nodes(self) -> list[NodeRecord]:
        rows = self._db().execute("SELECT node_id, address, lease_until_ms, assignment_rule, weight, storage_format "
                                  "FROM nodes ORDER BY node_id").fetchall()
        return [NodeRecord(*row) for row in rows]

    # -- executions

    def commit(self, writes: Sequence[ExecutionWrite], range_ids: Mapping[int, int]) -> CommitResult:
        db = self._db()
        result = CommitResult()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise CommitFailed(str(exc)) from exc  # busy, or the disk is gone: nothing was written
        try:
            shards = sorted({write.shard_id for write in writes})
            placeholders = ",".join("?" * len(shards))
            current = dict(db.execute(f"SELECT shard_id, range_id FROM shards WHERE shard_id IN ({placeholders})",
                                      shards).fetchall())
            result.lost_shards = {shard for shard in shards if current.get(shard) != range_ids.get(shard)}
            history: list[tuple[int, int, int, bytes]] = []
            dispatches: dict[tuple[int, str, str], tuple[bytes, str | None]] = {}  # ordered: rows to insert
            undispatched: list[tuple[int, str, str]] = []
            removed: list[tuple[int, int, int, str]] = []
            added: dict[tuple[int, int, int, str], None] = {}  # ordered set: a later write's removal cancels it
            # A group with a member on a lost shard does not land at all (its members are reported as conflicts).
            lost_groups = {write.group for write in writes if write.group and write.shard_id in result.lost_shards}
            orphans = [index for index, write in enumerate(writes)
                       if write.group in lost_groups and write.shard_id not in result.lost_shards]
            live = [(index, write) for index, write in enumerate(writes)
                    if write.shard_id not in result.lost_shards and write.group not in lost_groups]
            result.conflicts = orphans + self._write_executions(db, live)
            conflicts = set(result.conflicts)
            landed = [write for index, write in live if index not in conflicts]
            ids = _ids(db, [write.arn for write in landed])
            for write in landed:
                key = ids[write.arn]
                if write.effects.events:
                    history.append((key, write.effects.events[0]["id"], write.effects.events[-1]["id"],
                                    orjson.dumps(write.effects.events)))
                stage_changes(write, key, removed, added, undispatched, dispatches)  # deletes run before inserts below
                for dispatch_id, payload in write.effects.dispatches_added:
                    dispatches[(write.shard_id, write.arn, dispatch_id)] = orjson.dumps(payload), activity_of(payload)
            db.executemany("INSERT OR REPLACE INTO history VALUES (?, ?, ?, ?)", history)
            db.executemany("DELETE FROM timers WHERE shard_id = ? AND fire_at_ms = ? AND execution_id = ? "
                           "AND timer_id = ?", removed)
            db.executemany("INSERT OR REPLACE INTO timers VALUES (?, ?, ?, ?)", list(added))
            db.executemany("DELETE FROM outbox WHERE shard_id = ? AND execution_arn = ? AND dispatch_id = ?",
                           undispatched)
            db.executemany(_INSERT_DISPATCH, [(*key, payload, self._next_seq(db, key[0]), activity)
                                              for key, (payload, activity) in dispatches.items()])
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            with suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise CommitOutcomeUnknown(str(exc)) from exc
        except BaseException:  # e.g. an event that is not JSON: nothing was written; never leave the lock held
            with suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        return result

    def _next_seq(self, db: sqlite3.Connection, shard_id: int) -> int:
        """The next outbox seq of a shard: above every seq it ever used in this process, even once its rows are
        gone, so a reader paging by seq never misses a row written behind its cursor. (Commits come from one
        thread; a seq skipped by a rolled-back commit is a harmless gap.)"""
        seq = self._outbox_seqs.get(shard_id)
        if seq is None:
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) FROM outbox WHERE shard_id = ?", (shard_id,)).fetchone()[0]
        self._outbox_seqs[shard_id] = seq + 1
        return seq + 1

    @staticmethod
    def _write_executions(db: sqlite3.Connection, live: list[tuple[int, ExecutionWrite]]) -> list[int]:
        """Write the execution rows; returns the indexes whose condition failed. All rows go in two statements;
        only if some condition failed (never, with one owner per shard) are they redone one by one to find which."""
        inserts = [insert_row(write) for _, write in live if write.expected_version == 0]
        updates = [update_row(write) for _, write in live if write.expected_version != 0]
        db.execute("SAVEPOINT executions")
        changed = (db.executemany(_INSERT_EXECUTION, inserts).rowcount
                   + db.executemany(_UPDATE_EXECUTION, updates).rowcount)
        if changed == len(live):
            db.execute("RELEASE executions")
            return []
        db.execute("ROLLBACK TO executions")
        db.execute("RELEASE executions")
        conflicts: list[int] = []
        for members in groups(live):  # a group's writes land together or not at all
            db.execute("SAVEPOINT write_group")
            failed = False
            for _, write in members:
                if write.expected_version == 0:
                    cursor = db.execute(_INSERT_EXECUTION, insert_row(write))
                else:
                    cursor = db.execute(_UPDATE_EXECUTION, update_row(write))
                failed = failed or cursor.rowcount != 1
            if failed:
                db.execute("ROLLBACK TO write_group")
                conflicts += [index for index, _ in members]
            db.execute("RELEASE write_group")
        return conflicts

    def load_execution(self, arn: str) -> bytes | None:
        with _unavailable():
            row = self._db().execute(f"SELECT state, {ROW_FIELD_COLUMNS} FROM executions WHERE arn = ?",
                                     (arn,)).fetchone()
        return with_row_fields(*row) if row else None

    def load_executions(self, arns: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        with _unavailable():
            for at in range(0, len(arns), _VARIABLES_MAX):
                chunk = arns[at:at + _VARIABLES_MAX]
                for row in self._db().execute(f"SELECT state, {ROW_FIELD_COLUMNS} FROM executions WHERE arn IN "
                                              f"({','.join('?' * len(chunk))})", chunk):
                    found[row[1]] = with_row_fields(*row)
        return found

    def count_open_executions(self) -> int:
        with _unavailable():
            return self._db().execute("SELECT COUNT(*) FROM executions WHERE status = 'RUNNING'").fetchone()[0]

    def open_count(self) -> OpenCount:
        return _SqliteOpenCount(self.path)

    def read_history(self, arn: str, after_event_id: int, limit: int, reverse: bool) -> list[dict[str, Any]]:
        db = self._db()
        if reverse:
            bound = after_event_id or 1 << 62
            rows = db.execute(f"SELECT events FROM history WHERE execution_id = {_ID_OF_ARN} AND first_event_id < ? "
                              "ORDER BY first_event_id DESC", (arn, bound))
            events: list[dict[str, Any]] = []
            for (blob,) in rows:
                events += [event for event in reversed(orjson.loads(blob)) if event["id"] < bound]
                if len(events) >= limit:
                    break
            return events[:limit]
        rows = db.execute(f"SELECT events FROM history WHERE execution_id = {_ID_OF_ARN} AND last_event_id > ? "
                          "ORDER BY first_event_id", (arn, after_event_id))
        events = []
        for (blob,) in rows:
            events += [event for event in orjson.loads(blob) if event["id"] > after_event_id]
            if len(events) >= limit:
                break
        return events[:limit]

    def _closed(self, where: str, args: list[Any], shard_ids: Sequence[int], limit: int) -> list[ClosedExecution]:
        shards = sorted(shard_ids)[:_VARIABLES_MAX]  # SQLite serves one node: every shard, well under the bound
        with _unavailable():
            rows = self._db().execute(
                f"SELECT arn, shard_id, version, history_location FROM executions WHERE {where} AND shard_id IN "
                f"({','.join('?' * len(shards))}) ORDER BY stop_ms LIMIT ?", [*args, *shards, limit]).fetchall()
        return [ClosedExecution(*row) for row in rows]

    def payloads(self) -> PayloadStore:
        return DirectoryPayloads(Path(self.path).parent / "payloads")

    def write_express_starts(self, added: Sequence[tuple[int, str, bytes]], removed: Sequence[tuple[int, str]],
                             range_ids: Mapping[int, int]) -> set[int]:
        shards = sorted({row[0] for row in added} | {row[0] for row in removed})
        with self._write() as db:
            placeholders = ",".join("?" * len(shards))
            current = dict(db.execute(f"SELECT shard_id, range_id FROM shards WHERE shard_id IN ({placeholders})",
                                      shards).fetchall())
            lost = {shard for shard in shards if current.get(shard) != range_ids.get(shard)}
            db.executemany("INSERT OR REPLACE INTO express_starts VALUES (?, ?, ?)",
                           [row for row in added if row[0] not in lost])
            db.executemany("DELETE FROM express_starts WHERE shard_id = ? AND execution_arn = ?",
                           [row for row in removed if row[0] not in lost])
        return lost

    def pending_dispatches(self, shard_id: int, after_seq: int = 0, limit: int = 1 << 62) -> list[Dispatch]:
        with _unavailable():
            rows = self._db().execute(
                "SELECT shard_id, execution_arn, dispatch_id, payload, seq FROM outbox WHERE shard_id = ? "
                "AND seq > ? ORDER BY seq LIMIT ?", (shard_id, after_seq, limit)).fetchall()
        return [Dispatch(shard, arn, dispatch_id, orjson.loads(payload), seq)
                for shard, arn, dispatch_id, payload, seq in rows]

    def claim_activity_task(self, activity_arn: str, now_ms: int, until_ms: int,
                            skip_shards: Sequence[int] = ()) -> Dispatch | None:
        skipped = ",".join("?" * len(skip_shards))
        with self._write() as db:  # BEGIN IMMEDIATE: one claimer at a time
            row = db.execute(f"SELECT shard_id, execution_arn, dispatch_id, payload, seq FROM outbox "
                             f"WHERE activity_arn = ? AND claimed_until_ms <= ? AND shard_id NOT IN ({skipped}) "
                             f"LIMIT 1", (activity_arn, now_ms, *skip_shards)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE outbox SET claimed_until_ms = ? WHERE shard_id = ? AND execution_arn = ? "
                       "AND dispatch_id = ?", (until_ms, *row[:3]))
        shard, arn, dispatch_id, payload, seq = row
        return Dispatch(shard, arn, dispatch_id, orjson.loads(payload), seq)


class _SqliteOpenCount(OpenCount):
    """The count in a read transaction of a connection of its own: its first read fixes the WAL snapshot, and
    the count later sees exactly the commits before it."""

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)

    def snapshot(self) -> None:
        with _unavailable():
            self._db.execute("BEGIN")
            self._db.execute("SELECT count(*) FROM shards").fetchone()

    def count(self) -> dict[tuple[str, str], int]:
        try:
            with _unavailable():
                return open_by_scope(self._db.execute(COUNT_OPEN_BY_LISTING).fetchall())
        finally:
            self.close()

    def close(self) -> None:
        self._db.close()


def _ids(db: sqlite3.Connection, arns: Sequence[str]) -> dict[str, int]:
    """The ids of these executions (rows the caller's transaction holds), read in a statement per 500: the rows'
    index pages are the ones the writes just touched."""
    found: dict[str, int] = {}
    for at in range(0, len(arns), _VARIABLES_MAX):
        chunk = arns[at:at + _VARIABLES_MAX]
        found.update(db.execute(f"SELECT arn, id FROM executions WHERE arn IN ({','.join('?' * len(chunk))})",
                                chunk).fetchall())
    return found


@contextmanager
def _unavailable() -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as exc:  # busy, locked, disk I/O: the database cannot answer now
        raise StoreUnavailable(str(exc)) from exc


_VARIABLES_MAX = 500  # bound parameters per statement, well under SQLite's limit
_ID_OF_ARN = "(SELECT id FROM executions WHERE arn = ?)"
_INSERT_DISPATCH = ("INSERT OR REPLACE INTO outbox (shard_id, execution_arn, dispatch_id, payload, seq, activity_arn) "
                    "VALUES (?, ?, ?, ?, ?, ?)")
_INSERT_EXECUTION = f"INSERT OR IGNORE INTO executions ({EXECUTION_COLUMNS}) VALUES ({', '.join('?' * 13)})"
_UPDATE_EXECUTION = ("UPDATE executions SET status = ?, stop_ms = ?, version = ?, state = ?, redrive_count = ?, "
                     "redrive_ms = ? WHERE arn = ? AND version = ?")

