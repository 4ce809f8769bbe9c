"""The networked store: PostgreSQL through psycopg 3, for one node or several sharing one database.

Each thread gets its own connection (autocommit; transactions are explicit), replaced once it breaks, so a call
after the server came back succeeds. The engine's batches arrive as one transaction each (group commit) whose
statements carry whole columns as arrays (``unnest``). In the usual case a commit is one statement, a call of a
function the schema defines (migration 8), so one round trip and no client-side work per table; a commit that finds
a shard moved or a row changed is made again in two round trips in pipeline mode, which find out which.

Fencing: a commit reads its shards' rows ``FOR SHARE`` in its own transaction; ``acquire_shard`` updates the row,
which waits for those commits and makes every later commit of an earlier owner see the new range id. Outbox
``seq`` is per shard, counted in memory from the shard's maximum, read once per acquisition: nothing orders one
shard's commits against another's. Connections live until ``close`` (one per thread that ever called the store:
the engine's and the API's store threads).

What it runs as SQLite does (the catalogue, listing, retention) is shared (sql_catalogue.py, shared.py); its schema
is postgresql_schema.py's. Must not import the SQLite store or anything above the store.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import orjson
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .base import COUNT_OPEN_BY_LISTING, CommitResult, Dispatch, ExecutionWrite, OpenCount, Store, open_by_scope
from .dialect import POSTGRESQL
from .errors import CommitFailed, CommitOutcomeUnknown, StoreUnavailable
from .postgresql_schema import MIGRATIONS
from .reachability import Reachability
from .retention import ClosedExecution
from .schema import migrate, settle_shard_count
from .shards import NodeRecord, ShardLease
from .shared import (
    EXECUTION_COLUMNS,
    ROW_FIELD_COLUMNS,
    SqlExecutions,
    activity_of,
    groups,
    insert_row,
    stage_changes,
    update_row,
    with_row_fields,
)
from .sql_catalogue import SqlCatalogue

log = logging.getLogger("statewright.store")
_MIGRATION_LOCK = 0x5354_5754_5343_4831  # the advisory lock nodes starting at once take in turn to migrate
ACTIVITY_CHANNEL = "statewright_activity_tasks"  # NOTIFY'd with an activity's ARN by a commit adding its tasks
WATCH_WAIT_S = 1.0  # how often a watcher checks it was stopped
WATCH_RETRY_S = 1.0  # the pause before a watcher whose connection broke connects again


IDLE_IN_TRANSACTION_MS = 1_000  # a commit holds its transaction for milliseconds; see _connect
LEASE_LOCK_WAIT_MS = 500  # how long a lease operation waits for a shard row another node holds locked


class PostgresStore(SqlCatalogue, SqlExecutions, Store):
    _dialect = POSTGRESQL

    def __init__(self, dsn: str, shard_count: int | None, node_id: str | None = None) -> None:
        """Open the database at ``dsn`` (a libpq URL or key=value string), migrating its schema first;
        ``shard_count`` None opens an existing one with whatever count it has. ``node_id``: the cluster node
        using it, whose sessions another node may end once the node's leases have run out (acquire_shard)."""
        params = conninfo_to_dict(dsn)
        params.setdefault("connect_timeout", "10")  # an unreachable host fails the call instead of hanging it
        params.setdefault("application_name", "statewright")
        self._conninfo = make_conninfo(**params)
        # Where the data is, for messages: no password, it is printed.
        self.location = (f"postgresql://{params.get('user', '')}@{params.get('host', '')}:"
                         f"{params.get('port', 5432)}/{params.get('dbname', '')}")
        self._local = threading.local()
        self.reachability = Reachability(self.location)
        self._connections: set[psycopg.Connection] = set()
        # The server processes of those connections: a notification one of them sent is this store's own commit.
        self._backends: set[int] = set()
        self._lock = threading.Lock()  # guards _connections, _backends and _outbox_seqs
        self._node_id = node_id
        # shard -> (the range id it was counted under, the last seq used): a new acquisition (another range id)
        # reads the maximum again, since another owner may have written since, whichever thread acquired.
        self._outbox_seqs: dict[int, tuple[int, int]] = {}
        self._open(shard_count)

    def _initialize(self, shard_count: int | None) -> None:
        with self._transaction() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            migrate(db, POSTGRESQL, MIGRATIONS, self.location)
            self._shard_count = settle_shard_count(
                db, POSTGRESQL, shard_count, self.location, instead="a new database", missing=LookupError(
                    f"{self.location} holds no statewright data yet; start `statewright serve --store` on it"))
            db.execute("INSERT INTO shards (shard_id, range_id) SELECT generate_series(0, %s - 1), 0 "
                       "ON CONFLICT DO NOTHING", (self._shard_count,))

    # -- connections

    def _connect(self) -> psycopg.Connection:
        db = psycopg.connect(self._conninfo, autocommit=True)
        # A node paused in the middle of a commit holds its shard rows FOR SHARE; the node taking the shard over
        # would wait on that lock, its lease renewals with it. The server ends such a transaction well within a
        # lease's margin, so the lock goes and the paused node's commit fails when it wakes. (A node paused inside
        # a pipeline is not idle to the server: acquire_shard ends its sessions, by their application_name.)
        db.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}")
        if self._node_id is not None:
            db.execute("SELECT set_config('application_name', %s, false)", (session_name(self._node_id),))
        with self._lock:
            self._connections.add(db)
            self._backends.add(db.info.backend_pid)
        return db

    def _release(self, db: psycopg.Connection) -> None:
        with self._lock:
            self._connections.discard(db)
            self._backends.discard(db.info.backend_pid)
        db.close()

    def _db(self) -> psycopg.Connection:
        """This thread's connection; a new one if there is none or the last one broke (the server went away)."""
        db: psycopg.Connection | None = getattr(self._local, "db", None)
        if db is None or db.closed:
            if db is not None:
                self._release(db)
            db = self._local.db = self._connect()
        return db

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection]:
        with _unavailable(self.reachability):
            db = self._db()
            with db.transaction():
                yield db

    _write = _transaction

    def _rows(self, sql: str, params: Sequence[Any] = (), *, prepare: bool | None = None) -> list[tuple]:
        """``prepare``: psycopg's (None: prepared once run often; False: planned at every call)."""
        with _unavailable(self.reachability):
            return self._db().execute(sql, params, binary=True, prepare=prepare).fetchall()

    def _execute(self, sql: str, params: Sequence[Any]) -> None:
        with _unavailable(self.reachability):
            self._db().execute(sql, params)

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, set()
            self._backends = set()
        for db in connections:
            db.close()
        self._local = threading.local()

    # -- shards

    def shard_count(self) -> int:
        return self._shard_count

    def acquire_shard(self, shard_id: int, owner: str, lease_until_ms: int, now_ms: int | None = None) -> int | None:
        free = "" if now_ms is None else " AND (owner IS NULL OR owner = %s OR lease_until_ms <= %s)"
        # The UPDATE locks the row: it waits for the commits holding it FOR SHARE, and later ones see the new id.
        try:
            with self._transaction() as db:
                if now_ms is not None:
                    db.execute(f"SET LOCAL lock_timeout = {LEASE_LOCK_WAIT_MS}")
                rows = db.execute(f"UPDATE shards SET range_id = range_id + 1, owner = %s, lease_until_ms = %s "
                                  f"WHERE shard_id = %s{free} RETURNING range_id",
                                  (owner, lease_until_ms, shard_id,
                                   *(() if now_ms is None else (owner, now_ms)))).fetchall()
                if rows:  # counted now, under the row lock, before this owner reads or removes any row (see
                    # _next_seq): a row removed later must not let a new one take a seq its reader has passed
                    top = db.execute("SELECT COALESCE(MAX(seq), 0) FROM outbox WHERE shard_id = %s",
                                     (shard_id,)).fetchone()[0]
                    with self._lock:
                        self._outbox_seqs[shard_id] = (rows[0][0], top)
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, psycopg.errors.LockNotAvailable):
                raise
            self._end_sessions_of_expired_holder(shard_id, owner, now_ms)
            return None  # taken at a later step, once the holder's sessions are gone
        return rows[0][0] if rows else None

    def acquire_shards(self, shard_ids: Sequence[int], owner: str, lease_until_ms: int, now_ms: int) -> dict[int, int]:
        """In one transaction (a node taking over a leaver's shards takes a third of them at once). If a row stays
        locked, by a paused holder's commit, one shard at a time instead: that finds the holder and ends it."""
        try:
            with self._transaction() as db:
                db.execute(f"SET LOCAL lock_timeout = {LEASE_LOCK_WAIT_MS}")
                _lock_in_order(db, sorted(shard_ids))
                taken = dict(db.execute(
                    "UPDATE shards SET range_id = range_id + 1, owner = %s, lease_until_ms = %s "
                    "WHERE shard_id = ANY(%s) AND (owner IS NULL OR owner = %s OR lease_until_ms <= %s) "
                    "RETURNING shard_id, range_id", (owner, lease_until_ms, list(shard_ids), owner, now_ms)).fetchall())
                tops = dict(db.execute(  # under the row locks, as in acquire_shard
                    "SELECT shard_id, MAX(seq) FROM outbox WHERE shard_id = ANY(%s) GROUP BY shard_id",
                    (list(taken),)).fetchall())
                with self._lock:
                    for shard_id, range_id in taken.items():
                        self._outbox_seqs[shard_id] = (range_id, tops.get(shard_id, 0))
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected)):
                raise
            return super().acquire_shards(shard_ids, owner, lease_until_ms, now_ms)
        return taken

    def _end_sessions_of_expired_holder(self, shard_id: int, owner: str, now_ms: int | None) -> None:
        """The shard's row stays locked by a holder whose lease is over: a node paused in the middle of a commit.
        Its sessions are ended (fencing it out for good: its commit fails when it wakes), so the row comes free."""
        rows = self._rows("SELECT owner, lease_until_ms FROM shards WHERE shard_id = %s", (shard_id,))
        holder, until_ms = rows[0] if rows else (None, 0)
        if holder is None or holder == owner or now_ms is None or until_ms > now_ms:
            return
        log.warning("shard %d is still locked by %s, whose lease ended: ending its database sessions", shard_id,
                    holder)
        # (A node of another cluster, in another database on the same server, may have the same name.)
        self._rows("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s "
                   "AND datname = current_database()", (session_name(holder),))

    def renew_leases(self, owner: str, range_ids: Mapping[int, int], lease_until_ms: int) -> set[int]:
        shards = sorted(range_ids)
        with self._transaction() as db:
            db.execute(f"SET LOCAL lock_timeout = {LEASE_LOCK_WAIT_MS}")  # never held up by another node's lock
            _lock_in_order(db, shards)
            rows = db.execute("UPDATE shards s SET lease_until_ms = %s FROM unnest(%s::integer[], %s::bigint[]) "
                              "AS u(shard_id, range_id) WHERE s.shard_id = u.shard_id AND s.range_id = u.range_id "
                              "AND s.owner = %s RETURNING s.shard_id",
                              (lease_until_ms, shards, [range_ids[shard] for shard in shards], owner)).fetchall()
        return {row[0] for row in rows}

    def release_shards(self, owner: str, range_ids: Mapping[int, int]) -> None:
        shards = sorted(range_ids)
        with self._transaction() as db:
            _lock_in_order(db, shards)
            db.execute("UPDATE shards s SET owner = NULL, lease_until_ms = 0 FROM unnest(%s::integer[], "
                       "%s::bigint[]) AS u(shard_id, range_id) WHERE s.shard_id = u.shard_id "
                       "AND s.range_id = u.range_id AND s.owner = %s",
                       (shards, [range_ids[shard] for shard in shards], owner))

    def shard_leases(self) -> list[ShardLease]:
        rows = self._rows("SELECT shard_id, range_id, owner, COALESCE(lease_until_ms, 0) FROM shards "
                          "ORDER BY shard_id")
        return [ShardLease(*row) for row in rows]

    # -- nodes

    def register_node(self, node_id: str, address: str, lease_until_ms: int, rule: int = 1, weight: int = 1,
                      storage_format: int = 1) -> None:
        self._execute("INSERT INTO nodes (node_id, address, lease_until_ms, assignment_rule, weight, storage_format) "
                      "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (node_id) DO UPDATE "
                      "SET address = EXCLUDED.address, lease_until_ms = EXCLUDED.lease_until_ms, "
                      "assignment_rule = EXCLUDED.assignment_rule, weight = EXCLUDED.weight, "
                      "storage_format = EXCLUDED.storage_format",
                      (node_id, address, lease_until_ms, rule, weight, storage_format))

    def remove_node(self, node_id: str) -> None:
        self._execute("DELETE FROM nodes WHERE node_id = %s", (node_id,))

    def nodes(self) -> list[NodeRecord]:
        return [NodeRecord(*row) for row in self._rows("SELECT node_id, address, lease_until_ms, assignment_rule, "
                                                       "weight, storage_format FROM nodes ORDER BY node_id")]

    def adopt_cluster_secret(self, check: str, node_id: str, now_ms: int) -> bool:
        with self._transaction() as db:
            db.execute("LOCK TABLE nodes IN SHARE ROW EXCLUSIVE MODE")  # two nodes starting at once take turns
            row = db.execute("SELECT value FROM meta WHERE key = 'cluster_secret_check'").fetchone()
            if row is not None and row[0] != check and db.execute(
                    "SELECT 1 FROM nodes WHERE node_id <> %s AND lease_until_ms > %s LIMIT 1",
                    (node_id, now_ms)).fetchone() is not None:
                return False
            db.execute("INSERT INTO meta VALUES ('cluster_secret_check', %s) ON CONFLICT (key) DO UPDATE "
                       "SET value = EXCLUDED.value", (check,))
            return True

    # -- executions

    def commit(self, writes: Sequence[ExecutionWrite], range_ids: Mapping[int, int]) -> CommitResult:
        """One transaction. Usually one statement, ``statewright_commit``, in a transaction of its own: every shard
        still the caller's and every row's condition met. When it finds otherwise it raises, having written
        nothing, and the commit is made again with what still holds: round trip 1, BEGIN, the shard rows FOR
        SHARE, the execution rows written as if every shard were still ours (under a savepoint, undone when one is
        not or a row's check fails); round trip 2, history, timers, outbox and COMMIT. Anything failing before
        COMMIT was sent wrote nothing (PostgreSQL commits a transaction only on COMMIT): CommitFailed; from then
        on the outcome is unknown."""
        if not writes:
            return CommitResult()
        # Serialized before anything is sent: an event that is not JSON raises here and nothing is written.
        histories = [orjson.dumps(write.effects.events) if write.effects.events else None for write in writes]
        payloads = [[(dispatch_id, orjson.dumps(payload), activity_of(payload))
                     for dispatch_id, payload in write.effects.dispatches_added] for write in writes]
        shards = sorted({write.shard_id for write in writes})
        with self._lock:
            unsequenced = sorted({write.shard_id for write, added in zip(writes, payloads, strict=True)
                                  if added and self._counted_under(write.shard_id) != range_ids.get(write.shard_id)})
        rows = _row_columns(list(enumerate(writes)))
        if rows is not None and not unsequenced and self._commit_at_once(
                shards, range_ids, rows, self._rest_columns(list(zip(writes, histories, payloads, strict=True)))):
            return CommitResult()
        return self._commit_carefully(writes, range_ids, histories, payloads, shards, unsequenced)

    def _commit_at_once(self, shards: list[int], range_ids: Mapping[int, int], rows: _Rows,
                        rest: list[list[Any]]) -> bool:
        """The whole commit as one statement; False if it found a shard moved or a row changed (nothing written)."""
        columns, expected = rows
        try:
            self._db().execute(_COMMIT, (shards, [range_ids.get(shard) for shard in shards], expected, *columns,
                                         *rest, ACTIVITY_CHANNEL))
        except psycopg.Error as exc:
            if exc.sqlstate in (_SHARD_MOVED, _ROW_CHANGED):
                return False
            # An error while the function ran, or one the server gave the statement, rolled the transaction back;
            # the connection or the server going away otherwise may have come after it committed.
            if "statewright_commit" in (exc.diag.context or "") or (
                    exc.sqlstate is not None and exc.sqlstate[:2] not in ("08", "57")):
                raise CommitFailed(str(exc)) from exc
            self.reachability.failed(exc)
            raise CommitOutcomeUnknown(str(exc)) from exc
        self.reachability.answered()
        return True

    def _commit_carefully(self, writes: Sequence[ExecutionWrite], range_ids: Mapping[int, int],
                          histories: list[bytes | None], payloads: list[list[tuple[str, bytes, str | None]]],
                          shards: list[int], unsequenced: list[int]) -> CommitResult:
        """The commit in two round trips, which finds the shards lost and the rows whose condition failed."""
        result = CommitResult()
        db: psycopg.Connection | None = None
        try:
            db = self._db()
            with db.pipeline():
                db.execute("BEGIN")
                owners = db.execute("SELECT shard_id, range_id FROM shards WHERE shard_id = ANY(%s) "
                                    "ORDER BY shard_id FOR SHARE", (shards,))
                maxima = db.execute("SELECT shard_id, MAX(seq) FROM outbox WHERE shard_id = ANY(%s) "
                                    "GROUP BY shard_id", (unsequenced,)) if unsequenced else None
                db.execute("SAVEPOINT executions")
                optimistic = _queue_rows(db, list(enumerate(writes)))
            current = dict(owners.fetchall())
            result.lost_shards = {shard for shard in shards if current.get(shard) != range_ids.get(shard)}
            # A group with a member on a lost shard does not land at all (its members are reported as conflicts).
            lost_groups = {write.group for write in writes if write.group and write.shard_id in result.lost_shards}
            orphans = [index for index, write in enumerate(writes)
                       if write.group in lost_groups and write.shard_id not in result.lost_shards]
            live = [(index, write) for index, write in enumerate(writes)
                    if write.shard_id not in result.lost_shards and write.group not in lost_groups]
            if len(live) < len(writes) or not _landed(optimistic):
                db.execute("ROLLBACK TO SAVEPOINT executions")
                result.conflicts = orphans + self._write_rows(db, live)
            if maxima is not None:
                found = dict(maxima.fetchall())
                with self._lock:
                    for shard in unsequenced:
                        if shard not in result.lost_shards and self._counted_under(shard) != range_ids[shard]:
                            self._outbox_seqs[shard] = (range_ids[shard], found.get(shard) or 0)
        except psycopg.Error as exc:
            _roll_back(db)
            raise CommitFailed(str(exc)) from exc
        except BaseException:  # a bug: nothing was committed; never leave the transaction (and its locks) open
            _roll_back(db)
            raise
        conflicts = set(result.conflicts)
        rest = self._rest_columns([(write, histories[index], payloads[index]) for index, write in live
                                   if index not in conflicts])
        try:
            with db.pipeline():
                db.execute(_REST, (*rest, ACTIVITY_CHANNEL))
                db.execute("COMMIT")
        except psycopg.Error as exc:
            _roll_back(db)
            raise CommitOutcomeUnknown(str(exc)) from exc
        except BaseException:
            _roll_back(db)
            raise
        return result

    def _write_rows(self, db: psycopg.Connection, live: list[tuple[int, ExecutionWrite]]) -> list[int]:
        """Write the execution rows of ``live`` (after a rollback to the savepoint); returns the indexes whose
        condition failed. In bulk first; only if some condition failed are the rows redone one by one, in batch
        order, to find which (a write group together or not at all)."""
        with db.pipeline():
            bulk = _queue_rows(db, live)
        if _landed(bulk):
            return []
        db.execute("ROLLBACK TO SAVEPOINT executions")
        conflicts: list[int] = []
        for members in groups(live):
            if len(members) > 1:
                db.execute("SAVEPOINT write_group")
            for _, write in members:
                if write.expected_version == 0:
                    written = db.execute(_INSERT_EXECUTION, insert_row(write)).rowcount
                else:
                    written = db.execute(_UPDATE_EXECUTION, update_row(write)).rowcount
                if written != 1:
                    if len(members) > 1:
                        db.execute("ROLLBACK TO SAVEPOINT write_group")
                    conflicts += [index for index, _ in members]
                    break
            if len(members) > 1:
                db.execute("RELEASE SAVEPOINT write_group")
        return conflicts

    def _rest_columns(self, landed: list[tuple[ExecutionWrite, bytes | None, list[tuple[str, bytes, str | None]]]]
                      ) -> list[list[Any]]:
        """statewright_rest's arguments for the writes that landed, in batch order: history, timers removed and
        added, dispatches removed and added (with their seqs, drawn here), the activities given tasks."""
        history: dict[tuple[str, int], tuple[int, bytes]] = {}  # a later row of the same key replaces it
        removed: list[tuple[int, int, str, str]] = []
        added: dict[tuple[int, int, str, str], None] = {}  # ordered set: a later write's removal cancels it
        undispatched: list[tuple[int, str, str]] = []
        dispatches: dict[tuple[int, str, str], tuple[bytes, str | None]] = {}
        for write, events, payloads in landed:
            if events is not None:
                history[(write.arn, write.effects.events[0]["id"])] = (write.effects.events[-1]["id"], events)
            stage_changes(write, write.arn, removed, added, undispatched, dispatches)  # deletes run before inserts
            for dispatch_id, payload, activity in payloads:
                dispatches[(write.shard_id, write.arn, dispatch_id)] = payload, activity
        with self._lock:  # seqs are unique even if two threads commit; commits come from one thread, though
            seqs = [self._next_seq(shard) for shard, _, _ in dispatches]
        payload_column, activity_column = _columns(list(dispatches.values()), 2)
        return [[arn for arn, _ in history], [first for _, first in history], *_columns(list(history.values()), 2),
                *_columns(removed, 4), *_columns(list(added), 4), *_columns(undispatched, 3),
                *_columns(list(dispatches), 3), payload_column, seqs, activity_column,
                sorted({activity for activity in activity_column if activity is not None})]

    def _counted_under(self, shard_id: int) -> int | None:
        counted = self._outbox_seqs.get(shard_id)
        return None if counted is None else counted[0]

    def _next_seq(self, shard_id: int) -> int:
        """The next outbox seq of a shard: above every seq it used since this store took it, even once those
        rows are gone, so a reader paging by seq never misses a row written behind its cursor. (A seq skipped by
        a rolled-back commit is a harmless gap.)"""
        range_id, seq = self._outbox_seqs[shard_id]
        self._outbox_seqs[shard_id] = (range_id, seq + 1)
        return seq + 1

    def load_execution(self, arn: str) -> bytes | None:
        rows = self._rows(f"SELECT state, {ROW_FIELD_COLUMNS} FROM executions WHERE arn = %s", (arn,))
        return with_row_fields(*rows[0]) if rows else None

    def load_executions(self, arns: Sequence[str]) -> dict[str, bytes]:
        return {row[1]: with_row_fields(*row) for row in
                self._rows(f"SELECT state, {ROW_FIELD_COLUMNS} FROM executions WHERE arn = ANY(%s)", (list(arns),))}

    def count_open_executions(self) -> int:
        return self._rows(_COUNT_OPEN)[0][0]

    def open_count(self) -> OpenCount:
        with _unavailable(self.reachability):
            return _PostgresOpenCount(self)

    def read_history(self, arn: str, after_event_id: int, limit: int, reverse: bool) -> list[dict[str, Any]]:
        # Every row read holds at least one wanted event, so ``limit`` rows are enough.
        if reverse:
            bound = after_event_id or 1 << 62
            rows = self._rows("SELECT events FROM history WHERE execution_arn = %s AND first_event_id < %s "
                              "ORDER BY first_event_id DESC LIMIT %s", (arn, bound, limit))
            events: list[dict[str, Any]] = []
            for (blob,) in rows:
                events += [event for event in reversed(orjson.loads(blob)) if event["id"] < bound]
            return events[:limit]
        rows = self._rows("SELECT events FROM history WHERE execution_arn = %s AND last_event_id > %s "
                          "ORDER BY first_event_id LIMIT %s", (arn, after_event_id, limit))
        events = []
        for (blob,) in rows:
            events += [event for event in orjson.loads(blob) if event["id"] > after_event_id]
        return events[:limit]

    def _closed(self, where: str, args: list[Any], shard_ids: Sequence[int], limit: int) -> list[ClosedExecution]:
        rows = self._rows(f"SELECT arn, shard_id, version, history_location FROM executions WHERE {where} AND "
                          f"shard_id = ANY(%s) ORDER BY stop_ms LIMIT %s", [*args, list(shard_ids), limit])
        return [ClosedExecution(*row) for row in rows]

    def payloads(self) -> TablePayloads:
        return TablePayloads(self)

    def write_express_starts(self, added: Sequence[tuple[int, str, bytes]], removed: Sequence[tuple[int, str]],
                             range_ids: Mapping[int, int]) -> set[int]:
        shards = sorted({row[0] for row in added} | {row[0] for row in removed})
        with self._transaction() as db:
            current = dict(db.execute("SELECT shard_id, range_id FROM shards WHERE shard_id = ANY(%s) "
                                      "ORDER BY shard_id FOR SHARE", (shards,)).fetchall())
            lost = {shard for shard in shards if current.get(shard) != range_ids.get(shard)}
            cursor = db.cursor()
            live = [row for row in added if row[0] not in lost]
            if live:
                cursor.executemany("INSERT INTO express_starts VALUES (%s, %s, %s) ON CONFLICT (shard_id, "
                                   "execution_arn) DO UPDATE SET command = EXCLUDED.command", live)
            gone = [row for row in removed if row[0] not in lost]
            if gone:
                cursor.executemany("DELETE FROM express_starts WHERE shard_id = %s AND execution_arn = %s", gone)
        return lost

    def pending_dispatches(self, shard_id: int, after_seq: int = 0, limit: int = 1 << 62) -> list[Dispatch]:
        rows = self._rows("SELECT shard_id, execution_arn, dispatch_id, payload, seq FROM outbox WHERE shard_id = %s "
                          "AND seq > %s ORDER BY seq LIMIT %s", (shard_id, after_seq, limit))
        return [Dispatch(shard, arn, dispatch_id, orjson.loads(payload), seq)
                for shard, arn, dispatch_id, payload, seq in rows]

    def advice(self) -> list[str]:
        if self._rows("SELECT current_setting('autovacuum')")[0][0] == "on":
            return []
        return ["PostgreSQL's autovacuum is off: the outbox and timer rows, rewritten at every task, leave dead "
                "rows that slow every claim and commit as they pile up; turn it on (ALTER SYSTEM SET autovacuum = "
                "on, then SELECT pg_reload_conf()) or VACUUM the database now and then"]

    def claim_activity_task(self, activity_arn: str, now_ms: int, until_ms: int,
                            skip_shards: Sequence[int] = ()) -> Dispatch | None:
        rows = self._rows(_CLAIM_ACTIVITY_TASK, (until_ms, activity_arn, now_ms, list(skip_shards)), prepare=False)
        if not rows:
            return None
        shard, arn, dispatch_id, payload, seq = rows[0]
        return Dispatch(shard, arn, dispatch_id, orjson.loads(payload), seq)

    def watch_activity_tasks(self, seen: Callable[[str], None]) -> Callable[[], None]:
        """LISTEN on a connection of the watcher's own, on a thread of its own. Notifications sent while it was
        reconnecting are lost: the pollers' periodic look covers them. Those of this store's own commits are
        left out (by the sending server process): their tasks reach this node's pollers from its engine."""
        stopped = threading.Event()
        thread = threading.Thread(target=self._watch, args=(seen, stopped), name="statewright-activity-watch",
                                  daemon=True)
        thread.start()

        def stop() -> None:
            stopped.set()
            thread.join()
        return stop

    def _watch(self, seen: Callable[[str], None], stopped: threading.Event) -> None:
        while not stopped.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as db:
                    db.execute(f"LISTEN {ACTIVITY_CHANNEL}")
                    while not stopped.is_set():
                        for notice in db.notifies(timeout=WATCH_WAIT_S):
                            if notice.pid not in self._backends:
                                seen(notice.payload)
            except psycopg.Error as exc:  # the store says it is out of reach once, for all its callers
                log.debug("watching for activity tasks failed (retrying): %s", exc)
                if isinstance(exc, psycopg.OperationalError):
                    self.reachability.failed(exc)
                stopped.wait(WATCH_RETRY_S)


class TablePayloads:
    """The payload store of a PostgreSQL store when none is configured: the objects in a table of the same database,
    which every node of a cluster reads, so compaction needs nothing more. A put commits on its own (durable once it
    returns), before the compaction's transaction that points at it."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self.location = f"{store.location} (table payloads)"

    def put(self, key: str, body: bytes) -> None:
        self._store._execute("INSERT INTO payloads VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                             "SET body = EXCLUDED.body", (key, body))

    def get(self, key: str) -> bytes | None:
        rows = self._store._rows("SELECT body FROM payloads WHERE key = %s", (key,))
        return rows[0][0] if rows else None

    def delete(self, key: str) -> None:
        self._store._execute("DELETE FROM payloads WHERE key = %s", (key,))


class _PostgresOpenCount(OpenCount):
    """The count in a REPEATABLE READ transaction of a connection of its own: its first statement fixes the
    snapshot, and the count later sees exactly the commits before it."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._db = store._connect()

    def snapshot(self) -> None:
        # Its transaction waits idle between the snapshot (the engine thread) and the count (another thread), and
        # holds no row lock: the idle-in-transaction limit of the other connections does not apply to it.
        with _unavailable(self._store.reachability):
            self._db.execute("SET idle_in_transaction_session_timeout = 0; "
                             "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1")  # one round trip

    def count(self) -> dict[tuple[str, str], int]:
        try:
            with _unavailable(self._store.reachability):
                return open_by_scope(self._db.execute(COUNT_OPEN_BY_LISTING).fetchall())
        finally:
            self.close()

    def close(self) -> None:
        self._store._release(self._db)


@contextmanager
def _unavailable(reachability: Reachability) -> Iterator[None]:
    try:
        yield
    # Refused, gone, shut down, a lost connection, or a session the server ended (an InternalError, by its
    # SQLSTATE class): the database cannot answer now; the next call reconnects.
    except (psycopg.OperationalError, psycopg.errors.IdleInTransactionSessionTimeout) as exc:
        reachability.failed(exc)
        raise StoreUnavailable(str(exc)) from exc
    reachability.answered()


def _lock_in_order(db: psycopg.Connection, shards: list[int]) -> None:
    """Lock shard rows in shard order, the order commits take them FOR SHARE, so the two cannot deadlock."""
    db.execute("SELECT 1 FROM shards WHERE shard_id = ANY(%s) ORDER BY shard_id FOR UPDATE", (shards,))


def _roll_back(db: psycopg.Connection | None) -> None:
    if db is not None and not db.closed:
        with suppress(psycopg.Error):
            db.execute("ROLLBACK")


_Rows = tuple[list[list[Any]], int]  # statewright_rows' arguments, and how many rows they must change


def _row_columns(live: list[tuple[int, ExecutionWrite]]) -> _Rows | None:
    """The execution rows of ``live`` as statewright_rows' columns (the new rows, then the updated ones) and how
    many rows they must change. The writes of one execution become one row change: the first one's condition, the
    last one's values. None if a write does not follow on from the one before it: then only writing the rows one by
    one, in order, tells which land."""
    first: dict[str, ExecutionWrite] = {}
    last: dict[str, ExecutionWrite] = {}
    for _, write in live:
        previous = last.get(write.arn)
        if previous is None:
            first[write.arn] = write
        elif write.expected_version != previous.version:
            return None
        last[write.arn] = write
    inserts = [(first[arn], last[arn]) for arn in first if first[arn].expected_version == 0]
    updates = [(first[arn], last[arn]) for arn in first if first[arn].expected_version != 0]
    return [
        [one.arn for one, _ in inserts], [one.state_machine_arn for one, _ in inserts],
        [one.name for one, _ in inserts], [one.shard_id for one, _ in inserts],
        [end.status for _, end in inserts], [one.start_ms for one, _ in inserts],
        [end.stop_ms for _, end in inserts], [end.version for _, end in inserts],
        [end.state for _, end in inserts], [one.version_arn for one, _ in inserts],
        [one.alias_arn for one, _ in inserts], [end.redrive_count for _, end in inserts],
        [end.redrive_ms for _, end in inserts],
        [one.arn for one, _ in updates], [one.expected_version for one, _ in updates],
        [end.status for _, end in updates], [end.stop_ms for _, end in updates],
        [end.version for _, end in updates], [end.state for _, end in updates],
        [end.redrive_count for _, end in updates], [end.redrive_ms for _, end in updates],
    ], len(first)


_Queued = tuple[psycopg.Cursor, int] | None


def _queue_rows(db: psycopg.Connection, live: list[tuple[int, ExecutionWrite]]) -> _Queued:
    """Queue the execution rows of ``live`` in bulk (statewright_rows); None (nothing queued) if only writing them
    one by one tells which land."""
    rows = _row_columns(live)
    if rows is None:
        return None
    columns, expected = rows
    return db.execute(_ROWS, columns), expected


def _landed(queued: _Queued) -> bool:
    if queued is None:
        return False
    cursor, expected = queued
    return cursor.fetchone()[0] == expected


def _columns(rows: list[tuple], width: int) -> list[list[Any]]:
    return [[row[column] for row in rows] for column in range(width)]


def _call(function: str, types: str) -> str:
    """A call of one of migration 8's functions with these argument types, each sent as a binary parameter: a
    bytea array in text would be hex-escaped, several times slower to send."""
    return f"SELECT {function}({', '.join(f'%b::{kind}' for kind in types.split())})"


# The argument types of migration 8's functions, in order.
_ROWS_TYPES = ("text[] text[] text[] integer[] text[] bigint[] bigint[] bigint[] bytea[] text[] text[] integer[] "
               "bigint[] text[] bigint[] text[] bigint[] bigint[] bytea[] integer[] bigint[]")
_REST_TYPES = ("text[] bigint[] bigint[] bytea[] integer[] bigint[] text[] text[] integer[] bigint[] text[] text[] "
               "integer[] text[] text[] integer[] text[] text[] bytea[] bigint[] text[] text[] text")
_ROWS = _call("statewright_rows", _ROWS_TYPES)
_REST = _call("statewright_rest", _REST_TYPES)
_COMMIT = _call("statewright_commit", f"integer[] bigint[] bigint {_ROWS_TYPES} {_REST_TYPES}")
_SHARD_MOVED, _ROW_CHANGED = "SW001", "SW002"  # what statewright_commit raises, having written nothing


_INSERT_EXECUTION = (f"INSERT INTO executions ({EXECUTION_COLUMNS}) VALUES ({', '.join(['%s'] * 13)}) "
                     "ON CONFLICT DO NOTHING")
_UPDATE_EXECUTION = ("UPDATE executions SET status = %s, stop_ms = %s, version = %s, state = %s, redrive_count = %s, "
                     "redrive_ms = %s WHERE arn = %s AND version = %s")
# The first unclaimed task of an activity on the partial index, locked with SKIP LOCKED so that two nodes claiming
# at once take two rows (or one of them none) instead of waiting for each other. The locking subquery is a row
# comparison, run once whatever the plan: joined (UPDATE ... FROM), a plan made while the outbox was empty re-ran it
# for each row of a scan of the table, which claimed nothing once the outbox filled, at the cost of its size
# squared. And it is planned at each call (not prepared), so its plan follows the outbox's size.
_CLAIM_ACTIVITY_TASK = (
    "UPDATE outbox SET claimed_until_ms = %s WHERE (shard_id, execution_arn, dispatch_id) = ("
    "SELECT shard_id, execution_arn, dispatch_id FROM outbox "
    "WHERE activity_arn = %s AND claimed_until_ms <= %s AND shard_id <> ALL(%s::integer[]) "
    "ORDER BY claimed_until_ms LIMIT 1 FOR UPDATE SKIP LOCKED) "
    "RETURNING shard_id, execution_arn, dispatch_id, payload, seq")
_COUNT_OPEN = "SELECT count(*) FROM executions WHERE status = 'RUNNING'"


def session_name(node_id: str) -> str:
    """The application_name of a node's database sessions (at most 63 bytes are kept)."""
    return "statewright " + hashlib.blake2b(node_id.encode(), digest_size=8).hexdigest()
