"""What the SQLite and PostgreSQL stores share of the commit path and retention: how batches split into write groups,
the execution row's columns and tuples, retention's conditions, and which dispatches are activity tasks.

Invariant: the constants here are SQL both backends run as they are. Must not import a backend or anything above
the store."""

from __future__ import annotations

from typing import Any

from .base import ExecutionWrite


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


def insert_row(write: ExecutionWrite) -> tuple:
    """The execution row's columns, in EXECUTION_COLUMNS' order."""
    return (write.arn, write.state_machine_arn, write.name, write.shard_id, write.status, write.start_ms,
            write.stop_ms, write.version, write.state, write.version_arn, write.alias_arn, write.redrive_count,
            write.redrive_ms)


def update_row(write: ExecutionWrite) -> tuple:
    """(status, stop_ms, version, state, redrive_count, redrive_ms) to set, then (arn, expected version) to match."""
    return (write.status, write.stop_ms, write.version, write.state, write.redrive_count, write.redrive_ms, write.arn,
            write.expected_version)


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
UNDISPATCHED = ("NOT EXISTS (SELECT 1 FROM outbox WHERE outbox.shard_id = executions.shard_id "
                "AND outbox.execution_arn = executions.arn)")


def activity_of(payload: dict[str, Any]) -> str | None:
    """The activity ARN of a dispatch's payload if it is an activity task (kept in its own column, to claim by)."""
    if payload.get("kind") != "activity" or "mocked" in payload:  # a mocked task is answered by its mock only
        return None
    return payload.get("resource")
