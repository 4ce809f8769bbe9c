"""What the SQLite and PostgreSQL stores share: how batches split into write groups, row tuples, key ranges, the
blobs of state machines, versions and aliases, and the rules of publishing."""

from __future__ import annotations

from typing import Any

import orjson

from .base import (
    ActivityRecord,
    AliasRecord,
    ExecutionWrite,
    NoSuchVersions,
    QuotaExceeded,
    RevisionChanged,
    StateMachineRecord,
    VersionRecord,
)


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


def record_blob(record: StateMachineRecord) -> bytes:
    return orjson.dumps(_fields(record))


def record_of(blob: bytes) -> StateMachineRecord:
    return StateMachineRecord(**orjson.loads(blob))


def with_initial_revision(blob: bytes) -> bytes:
    """Schema 3: a state machine record written before records knew their first revision. One never updated is
    at it; for one updated, which was first is unknown, and its revisions keep showing their ids, as they did."""
    raw = orjson.loads(blob)
    raw.setdefault("initial_revision_id", raw["revision_id"] if raw["updated_ms"] == raw["created_ms"] else "")
    return orjson.dumps(raw)


def version_blob(version: VersionRecord) -> bytes:
    return orjson.dumps({"machine": _fields(version.machine), "number": version.number,
                         "description": version.description, "created_ms": version.created_ms})


def version_of(blob: bytes) -> VersionRecord:
    raw = orjson.loads(blob)
    return VersionRecord(StateMachineRecord(**raw["machine"]), raw["number"], raw["description"], raw["created_ms"])


def alias_blob(alias: AliasRecord) -> bytes:
    return orjson.dumps(_fields(alias))


def alias_of(blob: bytes) -> AliasRecord:
    raw = orjson.loads(blob)
    raw["routing"] = tuple(tuple(route) for route in raw["routing"])
    return AliasRecord(**raw)


def _fields(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}


def check_revision(machine: StateMachineRecord, revision_id: str | None) -> None:
    """Publishing conditional on ``revision_id`` (None: on nothing): RevisionChanged unless it is the current one."""
    if revision_id is not None and revision_id not in (machine.revision_id, _shown_revision(machine)):
        raise RevisionChanged(revision_id, _shown_revision(machine))


def next_version(last_number: int, versions: int, versions_max: int) -> int:
    """The number of a new version, given the last one used and how many the state machine has; QuotaExceeded."""
    if versions >= versions_max:
        raise QuotaExceeded(versions_max)
    return last_number + 1


def _shown_revision(machine: StateMachineRecord) -> str:
    """The id a client compares with: AWS names a state machine's first revision INITIAL."""
    return machine.revision_id if machine.revised else "INITIAL"


def check_routes(alias: AliasRecord, existing: set[int]) -> None:
    missing = [number for number, _ in alias.routing if number not in existing]
    if missing:
        raise NoSuchVersions(missing)


def routed_by(aliases: list[AliasRecord], number: int) -> list[str]:
    """The names of the aliases that route to version ``number``."""
    return [alias.name for alias in aliases if any(routed == number for routed, _ in alias.routing)]


def prefix_range(arn_prefix: str, cursor: str | None) -> tuple[str, str]:
    """Bounds (exclusive) of the ARNs after ``cursor`` that start with ``arn_prefix``. Within one prefix ARN order
    is name order, and the bounds keep the scan on the primary key."""
    return max(cursor or "", arn_prefix), arn_prefix[:-1] + chr(ord(arn_prefix[-1]) + 1)


def activity_row(row: tuple) -> ActivityRecord:
    """An activity from its row (arn, name, created_ms, encryption)."""
    arn, name, created_ms, encryption = row
    return ActivityRecord(arn, name, created_ms, None if encryption is None else orjson.loads(encryption))


def activity_of(payload: dict[str, Any]) -> str | None:
    """The activity ARN of a dispatch's payload if it is an activity task (kept in its own column, to claim by)."""
    if payload.get("kind") != "activity" or "mocked" in payload:  # a mocked task is answered by its mock only
        return None
    return payload.get("resource")
