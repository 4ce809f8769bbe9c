"""Express executions: the decider's transitions applied in memory, with no commit per step.

An EXPRESS execution runs on the same decider as a STANDARD one, but its state, timers and history stay in the
engine's memory until it closes; all it leaves is its log (the execution logs of its state machine, if any). Its
start is made durable only when it was asynchronous (StartExecution): a row of its shard's *express starts* is
written before the caller's 200 and deleted once the execution closed, so the shard's next owner runs again every
execution that was still in memory when the engine stopped (at-least-once, as AWS documents). A synchronous start
(StartSyncExecution) writes nothing: its caller waits for the result, and nothing runs it again (at-most-once).

The engine owns one ``ExpressRuns`` and uses it on its own thread only: ``step`` applies a decision, ``commit``
writes the batch's start rows and deletes those of runs that closed, ``read_starts`` reads back the rows of shards
just taken. Bounded: an execution lasts five minutes at most (``DURATION_MS_MAX``), so its timers and its run
leave memory by then. It does no I/O of its own: the store is passed in.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from ..asl.definition import EXPRESS_SECONDS_MAX
from ..decider import Decision
from ..decider.execution import TIMED_OUT, ExecutionState
from ..store.base import Dispatch, Store
from .batch import Batch
from .commands import StartExecution, decode_commands

DURATION_MS_MAX = EXPRESS_SECONDS_MAX * 1000  # AWS's maximum duration of an Express execution
ASYNC, SYNC = "async", "sync"  # StartExecution.express: how the execution was started
TIMEOUT_ERROR = "States.Timeout"


def is_express(execution_arn: str) -> bool:
    """Express execution ARNs name their resource type ``express`` (no state machine or execution name may hold a
    colon, so the segment cannot appear anywhere else)."""
    return ":express:" in execution_arn


@dataclass(slots=True)
class ExpressRun:
    state: ExecutionState
    reply: Any = None  # a synchronous start's reply handle, answered with ``result`` once it closes
    durable: bool = False  # started asynchronously: its express start row is deleted once it closes


@dataclass(slots=True)
class ExpressRuns:
    runs: dict[str, ExpressRun] = field(default_factory=dict)
    timers: list[tuple[int, str, str]] = field(default_factory=list)  # heap of (fire_at_ms, execution ARN, timer id)
    finished: list[tuple[int, str]] = field(default_factory=list)  # (shard, ARN) of closed durable runs: rows to delete
    unread: set[int] = field(default_factory=set)  # shards whose express start rows are still to run again

    def add_timers(self, arn: str, timers: list[tuple[str, int]]) -> None:
        for timer_id, fire_at_ms in timers:
            heapq.heappush(self.timers, (fire_at_ms, arn, timer_id))

    def pop_due(self, now_ms: int, limit: int) -> list[tuple[int, str, str]]:
        """(due time, ARN, timer id) of the timers due by ``now_ms``, at most ``limit``. A timer the execution no
        longer expects (removed, set again, or its run closed) is dropped when it fires: the heap is never
        searched."""
        due = []
        while self.timers and self.timers[0][0] <= now_ms and len(due) < limit:
            entry = heapq.heappop(self.timers)
            if entry[1] in self.runs:
                due.append(entry)
        return due

    def next_due_ms(self) -> int | None:
        return self.timers[0][0] if self.timers else None

    def close(self, run: ExpressRun) -> None:
        del self.runs[run.state.arn]
        if run.durable:
            self.finished.append((run.state.shard_id, run.state.arn))

    def step(self, batch: Batch, decision: Decision) -> tuple[list[Dispatch], ExpressRun | None]:
        """A step takes effect at once, in memory: nothing is committed for it. Returns its dispatches, to hand
        out now (outside the outbox window: there is no row to read back), and its run if it closed."""
        state = decision.state
        run = self.runs[state.arn]
        run.state = batch.staged[state.arn] = state
        effects = decision.effects
        if effects.events:
            batch.logged.append((state.root_machine_arn, state.arn, state.redrive_count, effects.events, state.trace))
        self.add_timers(state.arn, effects.timers_added)
        dispatches = [Dispatch(state.shard_id, state.arn, dispatch_id, payload)
                      for dispatch_id, payload in effects.dispatches_added]
        if state.is_open:
            return dispatches, None
        self.close(run)
        if run.reply is not None:
            batch.replies.append((run.reply, result(state), -1))
        return dispatches, run

    def commit(self, store: Store, batch: Batch, range_ids: dict[int, int]) -> set[int]:
        """Write the batch's asynchronous starts and delete the rows of the runs that closed, in one store
        transaction; returns the shards another node took meanwhile. Raises as the store does: then nothing
        landed, or the outcome is unknown (a row that did land runs at the next restart)."""
        finished, self.finished = self.finished, []
        if not batch.express_rows and not finished:
            return set()
        try:
            return store.write_express_starts(batch.express_rows, finished, range_ids)
        except Exception:
            self.finished = finished + self.finished
            raise

    def read_starts(self, store: Store, shard_id: int) -> list[StartExecution]:
        """The express starts of a shard just taken that are not running here: each runs again from the start
        (at-least-once). Raises StoreUnavailable, leaving the shard unread."""
        rows = store.express_starts(shard_id)
        self.unread.discard(shard_id)
        commands = [decode_commands(row)[0][0] for row in rows]
        return [command for command in commands if command.arn not in self.runs]

    def drop_shard(self, shard_id: int) -> list[ExpressRun]:
        """The engine no longer serves the shard: its runs leave memory (the next owner runs the durable ones again
        from their rows); returns them, so synchronous callers hear that theirs is gone."""
        dropped = [run for run in self.runs.values() if run.state.shard_id == shard_id]
        for run in dropped:
            del self.runs[run.state.arn]
        self.finished = [(shard, arn) for shard, arn in self.finished if shard != shard_id]
        return dropped


def result(state: ExecutionState) -> dict[str, Any]:
    """What StartSyncExecution answers of a closed execution (plain data: it may cross to another node). A timeout
    of the five-minute limit or of TimeoutSeconds is reported as States.Timeout."""
    error = state.error
    if state.status == TIMED_OUT and error is None:
        error = TIMEOUT_ERROR
    return {"status": state.status, "start_ms": state.start_ms, "stop_ms": state.stop_ms, "input": state.input,
            "output": state.output, "error": error, "cause": state.cause}
