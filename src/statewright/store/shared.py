"""What the SQLite and PostgreSQL stores share: how batches split into write groups, row tuples, key ranges."""

from __future__ import annotations

from typing import Any

import orjson

from .base import ExecutionWrite, StateMachineRecord


def groups(live: list[tuple[int, ExecutionWrite]]) -> list[list[tuple[int, ExecutionWrite]]]:
    """Consecutive writes sharing a nonzero group, each other write alone."""
    found: list[list[tuple[int, ExecutionWrite]]] = []
    for index, write in live:
        if write.group and found and found[-1][-1][1].group == write.group:
            found[-1].append((index, write))
        else:
            found.append([(index, write)])
    return found


def insert_row(write: ExecutionWrite) -> tuple:
    """The execution row's columns, in table order."""
    return (write.arn, write.state_machine_arn, write.name, write.shard_id, write.status, write.start_ms,
            write.stop_ms, write.version, write.state)


def update_row(write: ExecutionWrite) -> tuple:
    """(status, stop_ms, version, state) to set, then (arn, expected version) to match."""
    return write.status, write.stop_ms, write.version, write.state, write.arn, write.expected_version


def record_blob(record: StateMachineRecord) -> bytes:
    return orjson.dumps({name: getattr(record, name) for name in record.__dataclass_fields__})


def prefix_range(arn_prefix: str, cursor: str | None) -> tuple[str, str]:
    """Bounds (exclusive) of the ARNs after ``cursor`` that start with ``arn_prefix``. Within one prefix ARN order
    is name order, and the bounds keep the scan on the primary key."""
    return max(cursor or "", arn_prefix), arn_prefix[:-1] + chr(ord(arn_prefix[-1]) + 1)


def activity_of(payload: dict[str, Any]) -> str | None:
    """The activity ARN of a dispatch's payload if it is an activity task (kept in its own column, to claim by)."""
    return payload.get("resource") if payload.get("kind") == "activity" else None
