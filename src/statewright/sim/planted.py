"""Bugs planted on purpose, so the simulator's tests can show that each fault's checker catches what it guards.

``simulate --plant NAME,...`` (and ``SimConfig.planted``) runs ``PlantedEngine`` and ``PlantedSweep`` instead of
the real ones: subclasses that break one rule each through the engine's seams (``Engine._due_timers``, ``_refill``,
``_store_commit``, ``_stale_start``, ``_applied``, ...), so the engine itself carries no test-only switch. Each
bug names the invariant it breaks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from .. import decider
from ..decider import Decision
from ..decider.effects import DispatchKind, TimerKind
from ..decider.execution import ExecutionState, Flow
from ..decider.map_runs import CONCURRENCY_MAX
from ..engine.batch import Batch, Reply
from ..engine.commands import (
    Command,
    CompleteAttempt,
    MapRunChildClosed,
    RedriveExecution,
    StartAttempt,
    StartMapRun,
    TaskNotPending,
)
from ..engine.engine import Engine
from ..engine.heavy_routing import HeavyRouting
from ..engine.inbox import AccountQueues
from ..engine.limits import Limits
from ..engine.retention import Sweep
from ..engine.scheduler import Taker
from ..engine.timers import WINDOW_MS, TimerWindow
from ..engine.transfer_runner import HeldStage, Transfer, TransferRunner
from ..store.base import ClosedExecution, CommitResult, Dispatch, ExecutionWrite

PLANTED = frozenset({
    "reply-before-commit",  # callers hear of a transition before its commit landed
    "no-reread",  # after a failed commit, memory is trusted as it is
    "no-outbox-read-at-start",  # a shard taken over never hands out what its outbox rows hold
    "start-attempt-twice",  # a dispatch whose attempt started already starts it again
    "refill-skips-overdue",  # after a clock jump past the window's horizon, overdue timer rows are skipped
    "lose-timeouts",  # task timeouts never fire
    "results-for-any-attempt",  # a result for an attempt no longer pending completes the pending one
    "skip-timers-at-start",  # a shard taken over starts its timer window past the rows due now
    "timers-fire-early",  # timers fire 5 s before they are due
    "act-on-fenced-writes",  # writes a new owner fenced out are acted on as if they landed
    "commit-without-fencing",  # commits carry the range ids the store has now, not the ones this engine holds
    "forward-once",  # a stage another node could not take is never sent again
    "run-unbounded",  # one step runs an execution's states without bound
    "drop-job-stops",  # AWS jobs abandoned by a closing execution are never stopped
    "redrive-from-start",  # a redrive reruns what had succeeded
    "status-before-commit",  # status events go out before their commit
    "lane-ignores-version",  # the lane's decisions commit even when the execution moved on
    "lane-drops-failures",  # a continuation the lane failed to decide is never decided
    "expire-early",  # retention deletes executions at half their retention
    "compact-rows-only",  # compaction drops what an earlier compacted object held
    "timers-first",  # a tick serves due timers before any command, as long as timers are due
    "map-run-unbounded",  # a map run starts every child at once, whatever its MaxConcurrency
    "map-run-counts-any-round",  # a map run counts a child's close told from before the run's redrive
    "late-calls-answered-early",  # a call that joins a tick late is answered as it is applied, before the commit
    "accounts-in-order",  # the per-account queues serve the account that came first as long as it has work
})


def check(planted: frozenset[str]) -> None:
    unknown = planted - PLANTED
    if unknown:
        raise ValueError(f"unknown planted bug(s) {sorted(unknown)}; known: {', '.join(sorted(PLANTED))}")


class PlantedEngine(Engine):
    def __init__(self, *args: Any, planted: frozenset[str], **kwargs: Any) -> None:
        check(planted)
        self.planted = planted
        if "run-unbounded" in planted:
            kwargs["limits"] = dataclasses.replace(kwargs.get("limits") or Limits(), apply_states_max=10**9,
                                                   apply_steps_max=10**9)
        super().__init__(*args, **kwargs)
        # The parts carry their own plants: swapped for subclasses that differ only in one method.
        if "forward-once" in planted:
            self.transfers.__class__ = _ForwardOnce
        if "accounts-in-order" in planted:
            inbox = self.inbox
            for queues in (inbox._commands, inbox._answers, inbox._results, inbox._decided, self.transfers.ready):
                queues.__class__ = _InOrder
        if {"lane-ignores-version", "lane-drops-failures"} & planted:
            self.heavy.__class__ = _PlantedRouting
            self.heavy.planted = planted

    def _serve(self, shard: int, range_id: int, serve_until_ms: int | None, now_ms: int) -> None:
        super()._serve(shard, range_id, serve_until_ms, now_ms)
        if "skip-timers-at-start" in self.planted:
            self.windows[shard].planted_lose_rows(now_ms + WINDOW_MS)
        if "no-outbox-read-at-start" in self.planted:
            self.outbox.forget(shard)

    def _reread(self, shards: set[int], states: list[ExecutionState]) -> None:
        if "no-reread" in self.planted:  # trusts what memory says of the shards
            for state in states:
                self._executions.forget(state.arn)
            return
        super()._reread(shards, states)

    def _applied(self, batch: Batch) -> None:
        if "reply-before-commit" in self.planted:  # the callers' (a held transfer stage's stays the engine's)
            self.edges.replies([(reply, result) for reply, result, _ in batch.replies
                                if not isinstance(reply, HeldStage)])
            batch.replies[:] = [entry for entry in batch.replies if isinstance(entry[0], HeldStage)]

    def _take_late(self, work: list, room: int, batch: Batch, now_ms: int) -> int:
        if "late-calls-answered-early" not in self.planted:
            return super()._take_late(work, room, batch, now_ms)
        late: list = []
        taken = super()._take_late(late, room, batch, now_ms)
        self.edges.replies([(reply, self._attempt(command, batch, now_ms, reply)) for command, reply in late])
        return taken

    def _refill(self, window: TimerWindow, now_ms: int, store_ok: bool) -> None:
        if "refill-skips-overdue" in self.planted and window.loaded and window.horizon_ms < now_ms:
            window.planted_lose_rows(now_ms)  # after a clock jump past the horizon, start afresh from now
        super()._refill(window, now_ms, store_ok)

    def _due_timers(self, windows: list[TimerWindow], now_ms: int, limit: int) -> list[tuple[int, str, str]]:
        early_ms = 5_000 if "timers-fire-early" in self.planted else 0
        due = super()._due_timers(windows, now_ms + early_ms, limit)
        if "lose-timeouts" in self.planted:
            due = [timer for timer in due if TimerKind.of(timer[2]) is not TimerKind.TIMEOUT]
        return due

    def _share(self, budget: int, takers: list[Taker]) -> list[int]:
        if "timers-first" not in self.planted:
            return super()._share(budget, takers)
        taken = [0] * len(takers)
        for index in reversed(range(len(takers))):  # the timers are the last kind: served first, greedily
            taken[index] = takers[index](budget - sum(taken))
        return taken

    def _stale_start(self, command: StartAttempt, refusal: TaskNotPending) -> object:
        if "start-attempt-twice" in self.planted:
            return True
        return super()._stale_start(command, refusal)

    def _apply(self, command: Command, batch: Batch, now_ms: int, reply: Reply = None,
               rerun: bool = False) -> object:
        if "results-for-any-attempt" in self.planted and isinstance(command, CompleteAttempt):
            current = batch.staged.get(command.arn) or self.reads.load(command.arn, batch)
            pending = {} if current is None else decider.pending_attempts(current)
            if command.scheduled_id not in pending and pending:
                command = CompleteAttempt(command.arn, max(pending), command.result)
        return super()._apply(command, batch, now_ms, reply, rerun)

    def _store_commit(self, writes: list[ExecutionWrite]) -> CommitResult:
        if "commit-without-fencing" in self.planted:  # "refreshes" its range ids: no fencing
            result = self.store.commit(writes, {lease.shard_id: lease.range_id for lease in self.store.shard_leases()})
        else:
            result = super()._store_commit(writes)
        if "act-on-fenced-writes" in self.planted:
            result = CommitResult(result.conflicts, set())
        return result

    def _stage(self, batch: Batch, decision: Decision, expected_version: int, now_ms: int) -> None:
        added = decision.effects.dispatches_added
        if "drop-job-stops" in self.planted:  # abandoned AWS jobs are never stopped
            added[:] = [(dispatch_id, payload) for dispatch_id, payload in added if "cancel" not in payload]
        if "status-before-commit" in self.planted:  # status events sent ahead of their commit
            for dispatch_id, payload in added:
                if payload["kind"] == DispatchKind.STATUS:
                    self.edges.dispatch(Dispatch(decision.state.shard_id, decision.state.arn, dispatch_id, payload,
                                                 0))
        super()._stage(batch, decision, expected_version, now_ms)

    def _apply_to_map_run(self, command: Command, current: ExecutionState | None, batch: Batch,
                          now_ms: int) -> object:
        if "map-run-unbounded" in self.planted and isinstance(command, StartMapRun):
            command = StartMapRun(command.arn, {**command.request, "max_concurrency": CONCURRENCY_MAX})
        if "map-run-counts-any-round" in self.planted and isinstance(command, MapRunChildClosed):
            command = dataclasses.replace(command, round=None)
        return super()._apply_to_map_run(command, current, batch, now_ms)

    def _redrive(self, command: RedriveExecution, current: ExecutionState | None, batch: Batch, now_ms: int,
                 reply: Reply = None) -> object:
        if "redrive-from-start" in self.planted and current is not None:  # reruns what had succeeded
            current = current.copy()
            current.halted = {"": Flow(0, None, 0, self._definitions.of(current).start_at,
                                       orjson.loads(current.input))}
        return super()._redrive(command, current, batch, now_ms, reply)


class _InOrder(AccountQueues):
    def take(self, work: list[Any], n: int) -> int:
        taken = 0
        for account, queue in list(self._queues.items()):
            while queue and taken < n:
                work.append(queue.popleft())
                taken += 1
            if not queue:
                del self._queues[account]
        return taken


class _ForwardOnce(TransferRunner):
    def _send_again(self, transfer: Transfer, now_ms: int) -> None:
        pass


class _PlantedRouting(HeavyRouting):
    planted: frozenset[str]

    def _current_enough(self, decided: Any, current: ExecutionState, staged: bool) -> bool:
        return "lane-ignores-version" in self.planted or super()._current_enough(decided, current, staged)

    def _decide_failed(self, decide_here: Any) -> Decision | None:
        return None if "lane-drops-failures" in self.planted else super()._decide_failed(decide_here)


class PlantedSweep(Sweep):
    def __init__(self, *args: Any, planted: frozenset[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.planted = planted

    def _retention_ms(self) -> int:
        retention_ms = super()._retention_ms()
        return retention_ms // 2 if "expire-early" in self.planted else retention_ms

    def _compacted_events(self, execution: ClosedExecution) -> list[dict[str, Any]]:
        if "compact-rows-only" in self.planted:  # drops what an earlier object held
            return self.histories.store.read_history(execution.arn, 0, 1 << 62, False)
        return super()._compacted_events(execution)
