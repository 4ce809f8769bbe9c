"""An execution's mutable state: the one row the engine rewrites on every commit.

It holds what the engine needs to take the next step (where the execution is waiting, its pending timers, the
next event id) and what DescribeExecution shows. History events live elsewhere, append-only.
"""

from __future__ import annotations

import operator
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
    # When the last event is a Map iteration's Succeeded/Failed/Aborted marker, the event that marker points
    # at: AWS points the next iteration's start and the Map's Failed/Started events past such markers.
    marker_prev: int | None = None
    version: int = 0  # committed version of this row; 0 before the first commit
    # Running flows: the top level (id "") and the branches and iterations of Parallel and Map states, each
    # with where it waits. See decider.py for the record's fields.
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    # For a child started by a .sync Task: {"token", "pattern"} of the parent attempt waiting on it.
    parent: dict[str, Any] | None = None
    # Pending timers: timer id -> fire time. Their rows are written and deleted in the same commits.
    timers: dict[str, int] = field(default_factory=dict)

    @property
    def is_open(self) -> bool:
        return self.status == RUNNING

    def to_blob(self) -> bytes:
        return orjson.dumps(self)  # orjson writes a slotted dataclass field by field, natively

    @classmethod
    def from_blob(cls, blob: bytes) -> ExecutionState:
        return cls(**orjson.loads(blob))

    def copy(self) -> ExecutionState:
        """A deep copy, so a decision never changes the committed state it started from. Only the nested
        containers need copying (the rest are immutable values); orjson does that faster than copy.deepcopy."""
        clone = ExecutionState(*_ALL_FIELDS(self))
        clone.timers = dict(self.timers)
        clone.flows = orjson.loads(orjson.dumps(self.flows)) if self.flows else {}
        if self.parent is not None:
            clone.parent = dict(self.parent)
        return clone


_ALL_FIELDS = operator.attrgetter(*(f.name for f in fields(ExecutionState)))  # in constructor order

