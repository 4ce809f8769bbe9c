"""What the SQLite and PostgreSQL stores share outside the catalogue: how batches split into write groups and what a
batch's timer and outbox changes come to, the execution row's columns and tuples, which dispatches are activity
tasks; and ``SqlExecutions``, the reads and writes of executions, timers and retention that both run alike over
``dialect.SqlBackend``.

Invariant: what is here is SQL both backends run as it is (after ``Dialect.sql``); what one backend runs otherwise
stays in it (its commit, leases, activity claims, retention's shard filter). Must not import a backend or anything
above the store."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .base import ClosedExecution, ExecutionSummary, ExecutionWrite, Page, TimerRow
from .dialect import Connection, SqlBackend


def groups(live: list[tuple[int, ExecutionWrite]]) -> list[list[tuple[int, ExecutionWrite]]]:
    """Consecutive writes sharing a nonzero group, each other write alone."""
    found: list[list[tuple[int, ExecutionWrite]]] = []
    for index, write in live:
        if write.group and found and found[-1][-1][1].group == write.group:
            found[-1].append((index, write))
        else:
            found.append([(index, write)])
    return found


# An execution row's columns, as both stores insert them (named: a migrated table may hold them in another order).
EXECUTION_COLUMNS = ("arn, state_machine_arn, name, shard_id, status, start_ms, stop_ms, version, state, version_arn, "
                     "alias_arn, redrive_count, redrive_ms")


def stage_changes(write: ExecutionWrite, key: Any, timers_removed: list[tuple[int, int, Any, str]],
                  timers_added: dict[tuple[int, int, Any, str], None], undispatched: list[tuple[int, str, str]],
                  dispatches: dict[tuple[int, str, str], Any]) -> None:
    """Add a landed write's timer changes and removed dispatches to its batch's: deletes run before inserts, so a
    timer (or dispatch) added by an earlier write of the batch and removed by a later one drops its pending insert
    and must not come back. ``key`` names the execution in its timer rows (the store's key); ``timers_added`` is an
    ordered set; ``dispatches`` maps the rows to insert to what the caller stores with them (it adds those of
    ``write`` after this)."""
    for timer_id, fire_at in write.effects.timers_removed:
        row = (write.shard_id, fire_at, key, timer_id)
        timers_added.pop(row, None)
        timers_removed.append(row)
    for timer_id, fire_at in write.effects.timers_added:
        timers_added[(write.shard_id, fire_at, key, timer_id)] = None
    for dispatch_id in write.effects.dispatches_removed:
        key = (write.shard_id, write.arn, dispatch_id)
        dispatches.pop(key, None)
        undispatched.append(key)


def insert_row(write: ExecutionWrite) -> tuple:
    """The execution row's columns, in EXECUTION_COLUMNS' order."""
    return (write.arn, write.state_machine_arn, write.name, write.shard_id, write.status, write.start_ms,
            write.stop_ms, write.version, write.state, write.version_arn, write.alias_arn, write.redrive_count,
            write.redrive_ms)


def update_row(write: ExecutionWrite) -> tuple:
    """(status, stop_ms, version, state, redrive_count, redrive_ms) to set, then (arn, expected version) to match."""
    return (write.status, write.stop_ms, write.version, write.state, write.redrive_count, write.redrive_ms, write.arn,
            write.expected_version)


# What a row holds of its execution's state in columns of their own (decider's ROW_FIELDS, and what it is listed
# under): a blob written beside them leaves them out (Store.rows_hold_fields), and a read puts them back.
ROW_FIELD_COLUMNS = "arn, state_machine_arn, name, start_ms, shard_id, status, version"


def with_row_fields(blob: bytes, arn: str, listed_under: str, name: str, start_ms: int, shard_id: int, status: str,
                    version: int) -> bytes:
    """A state blob with its row's fields (ROW_FIELD_COLUMNS' values) in front: where the blob holds one too (it
    was written whole, or its state machine is not what the row is listed under) the blob's own comes later and
    wins, as a JSON reader keeps a name's last value."""
    head = orjson.dumps({"arn": arn, "state_machine_arn": listed_under, "name": name, "start_ms": start_ms,
                         "shard_id": shard_id, "status": status, "version": version})
    return head[:-1] + b"," + blob[1:]


# ExecutionSummary's fields, as both stores select them.
SUMMARY_COLUMNS = ("arn, state_machine_arn, name, status, start_ms, stop_ms, version_arn, alias_arn, redrive_count, "
                   "redrive_ms")


def redriven_clause(redriven: bool | None) -> str:
    """ListExecutions' redriveFilter as SQL (both stores spell it alike)."""
    if redriven is None:
        return ""
    return " AND redrive_count > 0" if redriven else " AND redrive_count = 0"


# Retention's conditions, as both stores spell them: a closed row, and one with nothing of its own left in the
# outbox (a status event or a job's stop still going out must find its execution, whose commit removes its row).
CLOSED = "stop_ms IS NOT NULL AND status <> 'RUNNING'"


def uncompacted(distinct: str) -> str:
    """Retention's condition of a closed row not compacted since it closed (never, or before a redrive): the row
    records the close it compacted. Spelled as each backend's partial index is (the planner matches it by text)."""
    return f"compacted_stop_ms {distinct} stop_ms"

UNDISPATCHED = ("NOT EXISTS (SELECT 1 FROM outbox WHERE outbox.shard_id = executions.shard_id "
                "AND outbox.execution_arn = executions.arn)")


def activity_of(payload: dict[str, Any]) -> str | None:
    """The activity ARN of a dispatch's payload if it is an activity task (kept in its own column, to claim by)."""
    if payload.get("kind") != "activity" or "mocked" in payload:  # a mocked task is answered by its mock only
        return None
    return payload.get("resource")


def due_timer_queries(key: str, names: str) -> tuple[str, str]:
    """A page of due timers, from after a time or after a row at that time (see Store.due_timers), each row
    (shard, fire at, execution ARN, timer id, the execution's key, its start): ``key`` is the timer rows' column
    naming their execution, ``names`` the executions' column it names."""
    page = (f"SELECT timers.shard_id, timers.fire_at_ms, executions.arn, timers.timer_id, timers.{key}, "
            f"executions.start_ms FROM timers JOIN executions ON executions.{names} = timers.{key} "
            f"WHERE timers.shard_id = ? AND {{}} AND timers.fire_at_ms <= ? "
            f"ORDER BY timers.fire_at_ms, timers.{key}, timers.timer_id LIMIT ?")
    return (page.format("timers.fire_at_ms > ?"),
            page.format(f"(timers.fire_at_ms, timers.{key}, timers.timer_id) > (?, ?, ?)"))


class SqlExecutions(SqlBackend):
    """Listing executions, due timers, express starts and retention, as both stores run them, over the backend's
    keys: ``_KEY`` is the executions' column that history and timer rows name their execution by (``_ROW_KEY``
    there), of Python type ``_KEY_TYPE``."""

    _KEY = "arn"
    _KEY_TYPE: type = str
    _ROW_KEY = "execution_arn"
    _DUE_AFTER_MS, _DUE_AFTER_KEY = due_timer_queries("execution_arn", "arn")

    @abstractmethod
    def _closed(self, where: str, args: list[Any], shard_ids: Sequence[int], limit: int) -> list[ClosedExecution]:
        """The closed executions of these shards that ``where`` (in this dialect, parameters ``args``) selects,
        oldest first."""

    def due_timers(self, shard_id: int, after_ms: int, until_ms: int, limit: int = 1 << 62,
                   after_key: tuple[Any, str] | None = None) -> list[TimerRow]:
        if after_key is None:
            rows = self._rows(self._dialect.sql(self._DUE_AFTER_MS), (shard_id, after_ms, until_ms, limit))
        else:
            rows = self._rows(self._dialect.sql(self._DUE_AFTER_KEY), (shard_id, after_ms, *after_key, until_ms, limit))
        return [TimerRow(shard, fire_at, arn, timer_id, (key, timer_id), start_ms)
                for shard, fire_at, arn, timer_id, key, start_ms in rows]

    def express_starts(self, shard_id: int) -> list[bytes]:
        rows = self._read("SELECT command FROM express_starts WHERE shard_id = ? ORDER BY execution_arn", (shard_id,))
        return [row[0] for row in rows]

    def list_executions(self, state_machine_arn: str, status: str | None, limit: int, cursor: str | None,
                        version_arn: str | None = None, alias_arn: str | None = None,
                        redriven: bool | None = None) -> Page:
        column, arn = ("version_arn", version_arn) if version_arn is not None else (
            ("alias_arn", alias_arn) if alias_arn is not None else ("state_machine_arn", state_machine_arn))
        sql = f"SELECT {SUMMARY_COLUMNS}, {self._KEY} FROM executions WHERE {column} = ?{redriven_clause(redriven)}"
        args: list[Any] = [arn]
        if status:
            sql += " AND status = ?"
            args.append(status)
        if cursor:  # the last row's start and key: ties of a millisecond go by key
            try:
                start_ms, key = orjson.loads(cursor)
                if isinstance(key, str) and self._KEY_TYPE is not str:  # a cursor of a release that keyed by ARN
                    found = self._read(f"SELECT {self._KEY} FROM executions WHERE arn = ?", (key,))
                    key = found[0][0] if found else None
                if not isinstance(key, self._KEY_TYPE):
                    raise TypeError(key)
                args += [int(start_ms), key]
            except (ValueError, TypeError):
                raise ValueError(f"not a cursor of list_executions: {cursor!r}") from None
            sql += f" AND (start_ms, {self._KEY}) < (?, ?)"  # a range of the listing index, not a scan of it
        sql += f" ORDER BY start_ms DESC, {self._KEY} DESC LIMIT ?"
        rows = self._read(sql, [*args, limit + 1])
        items = [ExecutionSummary(*row[:-1]) for row in rows[:limit]]
        more = len(rows) > limit
        return Page(items, orjson.dumps([items[-1].start_ms, rows[limit - 1][-1]]).decode() if more else None)

    def history_location(self, arn: str) -> str | None:
        rows = self._read("SELECT history_location FROM executions WHERE arn = ?", (arn,))
        return rows[0][0] if rows else None

    def expired_executions(self, shard_ids: Sequence[int], stopped_before_ms: int,
                           limit: int) -> list[ClosedExecution]:
        return self._closed(self._dialect.sql(f"{CLOSED} AND stop_ms <= ? AND {UNDISPATCHED}"), [stopped_before_ms],
                            shard_ids, limit)

    def executions_to_compact(self, shard_ids: Sequence[int], stopped_before_ms: int,
                              limit: int) -> list[ClosedExecution]:
        return self._closed(self._dialect.sql(f"{CLOSED} AND {uncompacted(self._dialect.distinct)} AND stop_ms <= ?"),
                            [stopped_before_ms], shard_ids, limit)

    def compact_histories(self, compacted: Sequence[tuple[ClosedExecution, str]],
                          range_ids: Mapping[int, int]) -> list[ClosedExecution]:
        done = []
        with self._write() as db:
            for execution, location in compacted:
                if self._holds(db, execution.shard_id, range_ids) and self._run(
                        db, f"UPDATE executions SET history_location = ?, compacted_stop_ms = stop_ms WHERE arn = ? "
                        f"AND version = ? AND {CLOSED} AND {uncompacted(self._dialect.distinct)}",
                        (location, execution.arn, execution.version)).rowcount:
                    self._delete_history(db, execution.arn)
                    done.append(execution)
        return done

    def delete_executions(self, executions: Sequence[ClosedExecution],
                          range_ids: Mapping[int, int]) -> list[ClosedExecution]:
        deleted = []
        with self._write() as db:
            for execution in executions:
                # The row locked under its condition, its history deleted while the row still names its key
                if self._holds(db, execution.shard_id, range_ids) and self._run(
                        db, f"SELECT 1 FROM executions WHERE arn = ? AND version = ? AND {CLOSED}"
                        f"{self._dialect.lock_row}", (execution.arn, execution.version)).fetchone() is not None:
                    self._delete_history(db, execution.arn)
                    self._run(db, "DELETE FROM executions WHERE arn = ?", (execution.arn,))
                    deleted.append(execution)
        return deleted

    def _delete_history(self, db: Connection, arn: str) -> None:
        self._run(db, f"DELETE FROM history WHERE {self._ROW_KEY} = (SELECT {self._KEY} FROM executions WHERE arn = ?)",
                  (arn,))

    def _holds(self, db: Connection, shard_id: int, range_ids: Mapping[int, int]) -> bool:
        """Whether the shard is at the caller's range id; the row stays locked (shared), as a commit locks it, so an
        acquisition waits for this transaction."""
        row = self._run(db, f"SELECT range_id FROM shards WHERE shard_id = ?{self._dialect.share_row}",
                        (shard_id,)).fetchone()
        return row is not None and row[0] == range_ids.get(shard_id)
