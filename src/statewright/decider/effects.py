"""What a decision does besides changing the mutable state: its ``Effects``, and the kinds of its timers and
dispatches.

``Effects`` is one record, made by the decider and taken as it is by the store's commit (``ExecutionWrite.effects``):
the history events to append, the timer rows to write and delete, the outbox rows (dispatches) to write and
delete. The commit writes them all with the mutable-state row, and nothing acts on any of them before it lands.

A timer's id names its kind and what it belongs to (``"wait-7"``: the Wait entered at event 7). Ids are stored
(timer rows, the execution's state), so their text never changes; ``TimerKind`` makes and reads them, and nothing
else looks inside. A dispatch's payload names its kind: a Task attempt's is its integration
(``TaskState.integration``: "lambda", "activity", "http", ...); the others are ``DispatchKind``. Pure: imports
nothing of statewright.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class TimerKind(StrEnum):
    """A timer's kind; ``kind.id(key)`` is the stored id of the timer of that kind for ``key``, and
    ``TimerKind.of(stored_id)`` the kind of a stored id."""

    EXECUTION_TIMEOUT = "execution-timeout"  # the definition's TimeoutSeconds (or Express's limit): one per execution
    WAIT = "wait"  # a Wait state: wait-<its Entered event id>
    RETRY = "retry"  # a Retry backoff: retry-<the state's Entered event id>-<the retry's number>
    CONTINUE = "continue"  # a flow stopped for fairness: continue-<the Entered event id of its last state>
    TIMEOUT = "timeout"  # a task attempt's TimeoutSeconds: timeout-<its scheduled event id>
    HEARTBEAT = "heartbeat"  # a task attempt's HeartbeatSeconds: heartbeat-<its scheduled event id>
    CALL = "call"  # the integration's own limit on one call: call-<its scheduled event id>
    POLL = "poll"  # the next poll of a .sync job: poll-<its scheduled event id>

    def id(self, *key: int | str) -> str:
        """The stored id of this kind's timer for ``key`` (no key: the execution's one timer of this kind)."""
        return "-".join((self.value, *map(str, key)))

    @classmethod
    def of(cls, stored_id: str) -> TimerKind:
        """The kind of a stored timer id (ValueError: no timer of statewright's has this id)."""
        kind = _KINDS.get(stored_id) or _KINDS.get(stored_id.partition("-")[0])
        if kind is None:
            raise ValueError(f"not a timer id: {stored_id!r}")
        return kind


_KINDS = {kind.value: kind for kind in TimerKind}


class DispatchKind(StrEnum):
    """The dispatches that are not a Task attempt's call."""

    STATUS = "status"  # an execution's status change event (integrations/status_events.py)
    PARENT = "parent"  # a closing .sync child tells its parent (engine/transfers.py)
    STOP = "stop"  # a closing parent stops the nested execution (or map run) it waits on (engine/transfers.py)
    MAP_READ = "mapread"  # a distributed Map's ItemReader reads its items (integrations/aws/item_reader.py)
    MAP_RUN = "maprun"  # a distributed Map entered: create its map run (decider/map_runs.py)
    MAP_ITEMS = "mapitems"  # its ItemReader's items reached the parent: hand them to the run (or its failure)
    MAP_CHILD = "mapchild"  # a map run starts a child
    MAP_RUN_DONE = "maprundone"  # a map run closed: complete its parent's Map
    MAP_WRITE = "mapwrite"  # a map run's ResultWriter writes its results (integrations/aws/result_writer.py)


@dataclass(slots=True)
class Effects:
    """Everything one decision asks the commit to write besides the mutable-state row."""

    events: list[dict[str, Any]] = field(default_factory=list)  # history events, in id order
    timers_added: list[tuple[str, int]] = field(default_factory=list)  # (timer id, fire_at_ms)
    timers_removed: list[tuple[str, int]] = field(default_factory=list)  # (timer id, fire_at_ms)
    dispatches_added: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (dispatch id, payload)
    dispatches_removed: list[str] = field(default_factory=list)  # dispatch ids

    def fold(self, later: Effects) -> None:
        """Take in the effects of the next decision on the same execution, so that one write carries both (the
        engine writes an execution's row once a tick). A timer or dispatch ``later`` removes that this one added is
        never written: the store runs a write's deletes before its inserts."""
        self.events.extend(later.events)
        if later.timers_removed:
            gone = set(later.timers_removed)
            self.timers_added = [timer for timer in self.timers_added if timer not in gone]
            self.timers_removed.extend(later.timers_removed)
        self.timers_added.extend(later.timers_added)
        if later.dispatches_removed:
            acked = set(later.dispatches_removed)
            self.dispatches_added = [added for added in self.dispatches_added if added[0] not in acked]
            self.dispatches_removed.extend(later.dispatches_removed)
        self.dispatches_added.extend(later.dispatches_added)
