"""An execution's mutable state: the one row the engine rewrites on every commit.

It holds what the engine needs to take the next step (where the execution is waiting, its pending timers, the
next event id) and what DescribeExecution shows. History events live elsewhere, append-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import orjson

RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
TIMED_OUT = "TIMED_OUT"
ABORTED = "ABORTED"
CLOSED_STATUSES = frozenset({SUCCEEDED, FAILED, TIMED_OUT, ABORTED})


@dataclass(slots=True)
class ExecutionState:
    arn: str
    state_machine_arn: str
    name: str
    revision_id: str  # the definition revision this execution runs on, to the end
    role_arn: str
    input: str  # exactly as the caller sent it
    start_ms: int
    shard_id: int
    status: str = RUNNING
    stop_ms: int | None = None
    output: str | None = None
    error: str | None = None
    cause: str | None = None
    next_event_id: int = 1
    version: int = 0  # committed version of this row; 0 before the first commit
    # Where a running execution waits (a Wait state) and with which data.
    current_state: str | None = None
    current_data: Any = None
    entered_ms: int = 0
    # Pending timers: timer id -> fire time. Their rows are written and deleted in the same commits.
    timers: dict[str, int] = field(default_factory=dict)

    @property
    def is_open(self) -> bool:
        return self.status == RUNNING

    def to_blob(self) -> bytes:
        return orjson.dumps({name: getattr(self, name) for name in _FIELD_NAMES})

    @classmethod
    def from_blob(cls, blob: bytes) -> ExecutionState:
        return cls(**orjson.loads(blob))


_FIELD_NAMES = tuple(f.name for f in fields(ExecutionState))
