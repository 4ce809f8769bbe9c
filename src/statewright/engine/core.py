"""The engine core: applies commands one execution at a time through the decider, and commits before acting.

``tick(now_ms)`` is the whole engine step, synchronous and bounded (``Limits``): take what other threads handed in
(the inbox), read back outbox rows of shards that need it, gather the tick's work (due timers, transfers, the lane's
answers, queued commands), apply each through the pure decider into one batch, commit the batch in one store
transaction (group commit), then (only then) reply to callers, cache the new states, offer new timers to the timer
windows and hand new dispatches out. A commit that fails, whose outcome is unknown, or whose version check is lost
has one handling path: the shards it touched are re-read (timer window reloaded from the rows, outbox read back)
before they serve again, so nothing waits for a restart.

The parts: ``shards`` (what this engine serves), ``caches`` and ``reads`` (hot executions, parsed definitions, and
reading through them), ``inbox`` (what other threads hand in), ``edges`` (how it reaches the world),
``transfer_runner`` (engine-to-engine work), ``heavy_routing`` (what the heavy lane decides), ``express``
(executions run in memory), ``outbox`` and ``timers`` (the bounded caches of the outbox and timer rows).
``Engine`` (engine.py) runs ticks on a thread and is what other threads call. Must not import the API, the
integrations, the cluster or sim.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import orjson

from .. import decider
from ..asl.budget import SliceSpent
from ..asl.definition import ResourceCheck
from ..decider import map_runs
from ..decider.execution import REDRIVABLE_MS, ExecutionState, not_redrivable, redriven_by_its_map_run
from ..decider.mocks import MockConfig
from ..logs import event
from ..logs import shards as shard_list
from ..metrics import Metrics
from ..store.base import CommitOutcomeUnknown, CommitResult, Dispatch, ExecutionWrite, Store, StoreUnavailable
from ..store.payloads import Histories
from .batch import EXPRESS_ROWS, HELD, Batch, Reply
from .caches import Definitions, Executions
from .commands import (
    AckDispatch,
    Command,
    CompleteAttempt,
    EngineUnavailable,
    ExecutionAlreadyExists,
    ExecutionDoesNotExist,
    ExecutionNotRedrivable,
    FireTimer,
    Heartbeat,
    InboxFull,
    MapRunChildClosed,
    MapRunWritten,
    RedriveExecution,
    ShardNotOwned,
    StartAttempt,
    StartExecution,
    StartMapRun,
    StopExecution,
    TaskNotPending,
    UpdateMapRun,
    encode_commands,
)
from .edges import Edges, answer
from .express import ASYNC, DURATION_MS_MAX, SYNC, ExpressRun, ExpressRuns, is_express
from .heavy_lane import Decided, Evaluating, Job, LaneFactory, decide
from .heavy_routing import STALE, HeavyRouting
from .inbox import Inbox
from .limits import Limits
from .outbox import OutboxWindow
from .reads import ExecutionReads
from .scheduler import InTurn, Taker, TickBudget, take_fairly
from .shards import Shards
from .timers import TimerWindow, pop_due
from .tokens import TaskTokens
from .transfer_runner import HeldStage, Transfer, TransferRunner
from .transfers import KINDS as TRANSFER_KINDS
from .transfers import TransferContext
from .transitions import Rate, TransitionBudgets

log = logging.getLogger("statewright.engine")

STORE_RETRY_MS = 100  # the pause after the store failed to serve a timer or outbox read
Work = tuple[Command | Transfer, Reply]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Core:
    """What runs on the engine thread: ``tick`` and everything it calls. ``Engine`` (engine.py) adds the thread and
    what other threads call."""

    def __init__(self, store: Store, *, node_id: str = "local", clock: Callable[[], int] = wall_clock_ms,
                 limits: Limits | None = None, tokens: TaskTokens | None = None, edges: Edges | None = None,
                 wait_scale: float = 1.0, evaluation_clock: Callable[[], float] | None = time.perf_counter,
                 mocks: MockConfig | None = None, resource_check: ResourceCheck | None = None,
                 redrivable_ms: int = REDRIVABLE_MS, status_events: bool = False,
                 heavy_lane: LaneFactory | None = None, histories: Histories | None = None,
                 transition_rate: Callable[[str, str], Rate | None] | None = None) -> None:
        """``edges``: how the engine reaches the world (edges.py; the default reaches nothing but reply futures);
        ``evaluation_clock``: bounds each step's evaluation in wall time (the simulator passes None: its runs stay
        deterministic, bounded by steps and items alone); ``resource_check``: how definitions' aws-sdk resources are
        checked; ``redrivable_ms``: how long after it closed an execution can be redriven; ``status_events``:
        dispatch a status change event from each commit that changes an execution's status; ``heavy_lane``: where
        the steps past the engine thread's slice of evaluation are decided (None: on the engine thread, whole);
        ``histories``: where a redrive reads a history, compacted or not (None: the store's own payloads);
        ``transition_rate``: each account's StateTransition bucket and refill per second, by (region, account)
        (transitions.py; None: no budget)."""
        self.store = store
        self.node_id = node_id
        self.clock = clock
        self.limits = limits = limits or Limits()
        self.edges = edges or Edges()
        # Where a redrive reads its history from, compacted or not (a node's: with its payload store).
        self.histories = histories or Histories(store, store.payloads())
        self.redrivable_ms = redrivable_ms
        self.tokens = tokens or TaskTokens.load(store)
        # The ARNs of the activities that exist, kept current by ``note_activity``: the decider reads no store.
        self.activities: set[str] = _activity_arns(store)
        self.services = decider.Services(
            self.tokens.mint, self.activities, limits.budgets(evaluation_clock), limits.apply_states_max,
            limits.apply_steps_max, limits.heavy_pause_ms, wait_scale=wait_scale, mocks=mocks,
            resource_check=resource_check, status_events=status_events, redrivable_ms=redrivable_ms)
        self.budgets = TransitionBudgets(transition_rate)
        # The engine thread's first try of a step: on a slice of the budget when a lane can take the rest.
        self._sliced = self.services if heavy_lane is None else \
            replace(self.services, budget=limits.budgets(evaluation_clock, sliced=True))
        # The simulator's: told of every timer whose firing committed (timer_applied), of how many of each kind
        # of work each tick took (gathered: API commands, results, continuations, transfers, timers), of every
        # decision staged (staged: its execution and events), and of every command whose application raised
        # (raised: a bug).
        self.probe: Any = None
        self.shard_count = store.shard_count()
        self.shards = Shards(self.shard_count, limits)
        self.range_ids, self.windows, self.serve_until_ms = (self.shards.range_ids, self.shards.windows,
                                                             self.shards.serve_until_ms)
        self.outbox = OutboxWindow(limits)
        self.inbox = Inbox(limits.inbox_commands_max)
        self.express = ExpressRuns()
        self._executions = Executions(limits.cached_executions_max)
        self._definitions = Definitions(store, limits.cached_definitions_max)
        self.reads = ExecutionReads(store, self._executions, self.shards, self.express)
        self.transfers = TransferRunner(
            TransferContext(store.get_state_machine, store.get_version, store.get_alias, self.reads.load, self.tokens),
            self.outbox, self.shards, self.inbox, self.edges)
        self.metrics = Metrics(lambda: self.windows, clock, lambda: len(self.outbox))
        # Ticks are timed on the evaluation clock; with none (the simulator) the budget stays tick_commands_max.
        self._tick_clock = evaluation_clock
        self.tick_budget = TickBudget(limits.tick_commands_min, limits.tick_commands_max,
                                      None if evaluation_clock is None else limits.tick_ms_target / 1000)
        self._burst = False  # the last ordinary tick took at least half its budget
        self.metrics.tick_budget.set_function(lambda: self.tick_budget.items)
        self.heavy = HeavyRouting(None if heavy_lane is None else heavy_lane(self.services, limits, self.inbox.decided),
                                  self.metrics)
        self._store_retry_at_ms = 0  # after a failed read of the timers or the outbox, not before this
        self._timers_in_turn = InTurn()  # the accounts whose timers are due, served in turn

    def _serve(self, shard: int, range_id: int, serve_until_ms: int | None, now_ms: int) -> None:
        self._executions.forget_shard(shard)  # another node may have changed them since this one last served it
        self.shards.serve(shard, range_id, serve_until_ms)
        self.express.unread.add(shard)
        self.outbox.reread(shard)
        self.metrics.shards_owned.set(len(self.range_ids))

    def _unserve_all(self, shards: Iterable[int], why: str, level: int = logging.INFO) -> None:
        """Stop serving these shards, said in one line."""
        shards = sorted(shards)
        if not shards:
            return
        event(log, "shards_unserved", "no longer serving %s: %s", shard_list(shards), why, level=level,
              shards=shards, cause=why)
        for shard in shards:
            self._unserve(shard)

    def _unserve(self, shard: int) -> None:
        """Forget everything of a shard this engine no longer serves; its next owner reads the rows."""
        self.shards.unserve(shard)
        self.outbox.forget(shard)
        self._executions.forget_shard(shard)
        self.express.unread.discard(shard)
        gone = [(run.reply, EngineUnavailable(f"this node stopped serving shard {shard} while the execution ran"))
                for run in self.express.drop_shard(shard) if run.reply is not None]
        if gone:
            self.edges.replies(gone)
        self.transfers.drop({shard})
        self.heavy.forget_shard(shard, self.shards.of)
        self.metrics.shards_owned.set(len(self.range_ids))

    def tick(self, now_ms: int) -> int:
        """One bounded engine step at time ``now_ms``; returns how many commands and transfers it handled."""
        self.metrics.at_tick()
        started_s = 0.0 if self._tick_clock is None else self._tick_clock()
        self._take_changes(now_ms)
        self._unserve_all(self.shards.expired(now_ms), "its lease was not renewed in time", logging.WARNING)
        store_ok = now_ms >= self._store_retry_at_ms
        reruns: list[StartExecution] = []
        if store_ok:
            self._read_outboxes(now_ms)
            reruns = self._read_express_starts(now_ms)
        budget = self.tick_budget.items
        calls = self.inbox.calls_submitted  # the API's commands submitted after this join the tick late (below)
        # Behind a tick at least half full of other work, a caller waiting gets a small tick of the API's commands
        # alone, committed at once; the tick after it is an ordinary one, so a burst loses at most every other tick
        # and those ticks are small.
        callers_first = self._burst and self.inbox.calls_waiting()
        self._burst = False
        work = self._gather(now_ms, store_ok, max(budget // 4, 1) if callers_first else budget, callers_first)
        # The API's own queues still hold commands after the gather: the API is the burst, and its callers wait
        # their turn in its queues (per account), so no more join this tick late, nor get a tick of their own.
        api_backlogged = self.inbox.calls_waiting()
        if not work and not reruns and not self.express.finished:
            return 0
        batch = Batch()
        for command in reruns:
            self._rerun_express(command, batch, now_ms)
        self.reads.prefetch([item.arn for item, _ in work if not isinstance(item, Transfer)], batch)
        # The API's commands that arrive while the tick applies join it (up to a quarter of its budget more), so a
        # caller behind a burst waits for the rest of one tick, not for it and the next. Not while the store fails
        # reads: each late group would try it again on the engine thread.
        late_room = 0 if api_backlogged or not store_ok or batch.unread else budget // 4
        index = 0
        while index < len(work):
            item, reply = work[index]
            index += 1
            started = time.perf_counter()
            if isinstance(item, Transfer):
                self.transfers.advance(item, batch, lambda command, held: self._attempt(command, batch, now_ms, held),
                                       lambda what, exc: self._store_failed(now_ms, what, exc))
            else:
                result = self._attempt(item, batch, now_ms, reply)
                if reply is not None and result is not HELD:  # it answers once the last write of its execution
                    # so far has landed
                    batch.replies.append((reply, result, batch.last_write.get(item.arn, -1)))
            self.metrics.apply_seconds.observe(time.perf_counter() - started)
            if late_room and self.inbox.calls_submitted != calls:  # after each item, the last one's included
                calls = self.inbox.calls_submitted
                late_room = 0 if batch.unread else late_room - self._take_late(work, late_room, batch, now_ms)
        self._applied(batch)
        try:
            failed = self._commit(batch, now_ms) if batch.writes else {}
        except Exception:  # a bug after the commit: what it set in motion comes back with the re-read shards
            log.exception("acting on a commit failed; re-reading its shards")
            self._reread({write.shard_id for write in batch.writes} & self.range_ids.keys(), batch.states)
            failed = {index: EngineUnavailable("the engine failed after the commit; retry the request")
                      for index in range(len(batch.writes))}
        unstarted = self._commit_express(batch, now_ms)
        answers = [(reply, failed.get(index, result) if index >= 0 else
                    unstarted.get(batch.express_starting[EXPRESS_ROWS - index].arn, result)
                    if index <= EXPRESS_ROWS else result) for reply, result, index in batch.replies]
        callers: list[tuple[Reply, object]] = []
        held: list[tuple[Reply, object]] = []  # transfers waiting on the heavy lane's decision: they go on next tick
        for pair in answers:
            (held if isinstance(pair[0], HeldStage) else callers).append(pair)
        if held:
            answer(held)
        if callers:
            self.edges.replies(callers)
        if batch.logged and self.edges.history is not None:
            self.edges.history(batch.logged)
        self.transfers.after_commit(batch, failed)
        if not callers_first:  # a callers-first tick says nothing of the burst's items
            if self._tick_clock is not None:
                self.tick_budget.observe(len(work), self._tick_clock() - started_s)
            self._burst = len(work) >= budget // 2 and not api_backlogged
        return len(work) + len(reruns)

    def _take_late(self, work: list[Work], room: int, batch: Batch, now_ms: int) -> int:
        """The API's commands that arrived while the tick applies, at most ``room``, onto the end of ``work``
        (``batch``, ``now_ms``: the tick's, a seam for the simulator); returns how many."""
        first = len(work)
        late = take_fairly(room, self._api_takers(work))
        self.reads.prefetch([item.arn for item, _ in work[first:] if item.arn not in batch.fetched], batch)
        if self.probe is not None:
            self.probe.late(self, late)
        return sum(late)

    def _applied(self, batch: Batch) -> None:
        """Every command of the tick is in the batch, which is about to commit (a seam for the simulator)."""

    def _gather(self, now_ms: int, store_ok: bool, budget: int, callers_only: bool) -> list[Work]:
        """This tick's work, within its ``budget`` (``tick_budget``), each kind of work in turn (scheduler.py): the
        API's commands, the integrations' results, the lane's continuations, transfers, and the due timers (the
        shards' earliest first, beside the express runs': ``_timers``). ``callers_only``: the API's commands alone (a
        callers-first tick)."""
        work: list[Work] = []
        if self.heavy.redo:  # taken whatever the budget: timers popped already, callers waiting
            work.extend(self.heavy.redo)
            self.heavy.redo.clear()
        inbox = self.inbox
        takers = self._api_takers(work)
        if not callers_only:
            takers += [lambda n: inbox.take_results(work, n), lambda n: inbox.take_decided(work, n),
                       lambda n: self.transfers.take(work, n, now_ms), self._timers(work, now_ms, store_ok)]
        kinds: list[list[Work]] = [[] for _ in range(6)]
        if self.probe is not None:  # what each kind took, for the probe
            takers = [_recorded(taker, work, kinds[kind]) for kind, taker in enumerate(takers)]
        taken = self._share(max(budget - len(work), 0), takers)
        taken += [0] * (6 - len(taken))  # every kind counted, for the probe
        if self.probe is not None:
            self.probe.gathered(self, taken, callers_only, kinds)
        return work

    def _api_takers(self, work: list[Work]) -> list[Taker]:
        """The API's two kinds of work, calls on executions and task answers, as takers onto ``work``."""
        return [lambda n: self.inbox.take_commands(work, n), lambda n: self.inbox.take_answers(work, n)]

    def _timers(self, work: list[Work], now_ms: int, store_ok: bool) -> Taker:
        """The due timers' taker: the shards' windows (every one refilled first), the earliest due first whichever
        shard holds it (timers.pop_due), in turn with the express runs' timers."""
        windows = list(self.windows.values())
        for window in windows:
            self._refill(window, now_ms, store_ok)

        def fire(due: list[tuple[int, str, str]]) -> int:
            work.extend((FireTimer(arn, timer_id, due_ms), None) for due_ms, arn, timer_id in due)
            return len(due)
        return lambda n: sum(take_fairly(n, [lambda n: fire(self._due_timers(windows, now_ms, n)),
                                             lambda n: fire(self.express.pop_due(now_ms, n))]))

    def _due_timers(self, windows: list[TimerWindow], now_ms: int, limit: int) -> list[tuple[int, str, str]]:
        """(due time, execution ARN, timer id) of at most ``limit`` of the windows' timers due by ``now_ms``."""
        return pop_due(windows, now_ms, limit, self._timers_in_turn)

    def _share(self, budget: int, takers: list[Taker]) -> list[int]:
        """Divide the tick's budget between the kinds of work (a seam for the simulator's planted bugs)."""
        return take_fairly(budget, takers)

    def _refill(self, window: TimerWindow, now_ms: int, store_ok: bool) -> None:
        """Load the window's next page of timer rows when it needs one (TimerWindow.refill)."""
        if store_ok:
            try:
                window.refill(now_ms, self.store.due_timers)
            except StoreUnavailable as exc:  # the window is as it was; try again after a pause
                self._store_failed(now_ms, f"loading timers of shard {window.shard_id}", exc)

    def _store_failed(self, now_ms: int, what: str, exc: Exception) -> None:
        # (The store says once that it is out of reach, and once that it is back: store/reachability.py.)
        log.debug("store unavailable %s: %s", what, exc)
        self._store_retry_at_ms = now_ms + STORE_RETRY_MS

    def _take_changes(self, now_ms: int) -> None:
        changes = self.inbox.take_changes()
        for change in changes.ownership:
            change(now_ms)
        if changes.forwarded:
            self.transfers.take_back(changes.forwarded, now_ms)
        for dispatch in changes.given_back:
            self.outbox.spill(dispatch)
        if changes.room_again:  # after the spills: room that came after a refusal covers it
            self.outbox.room_again()

    # -- applying commands

    def _attempt(self, command: Command, batch: Batch, now_ms: int, reply: Reply = None, *,
                 rerun: bool = False) -> object:
        """Apply one command to the batch; returns its reply (an exception for a refusal or a bug), or HELD when an
        express run holds ``reply`` until it closes. ``rerun``: an express start read back from its row."""
        try:
            result = self._apply(command, batch, now_ms, reply, rerun)
        except StoreUnavailable as exc:  # a read failed: a popped timer or a held dispatch must not be lost
            log.error("store unavailable applying %s: %s", type(command).__name__, exc)
            self._reread({self.shards.of(command.arn)} & self.range_ids.keys(), [])
            return EngineUnavailable("the store is unavailable; retry the request")
        except Exception as exc:
            log.exception("applying %s failed", type(command).__name__)
            if self.probe is not None:
                self.probe.raised(command, exc)
            return exc
        if isinstance(result, TaskNotPending) and isinstance(command, StartAttempt):
            return self._stale_start(command, result)
        return result

    def _stale_start(self, command: StartAttempt, refusal: TaskNotPending) -> object:
        """A dispatch whose attempt is no longer pending: let it go."""
        self.outbox.release(command.arn, str(command.scheduled_id))
        return refusal

    def _apply(self, command: Command, batch: Batch, now_ms: int, reply: Reply = None,
               rerun: bool = False) -> object:
        if isinstance(command, Decided):
            self.heavy.back(command)
        shard = self.shards.of(command.arn)
        if not self.shards.serves(shard):
            return ShardNotOwned(shard)
        current = batch.staged.get(command.arn) or self.reads.load(command.arn, batch)
        if isinstance(command, StartMapRun | MapRunChildClosed | MapRunWritten | UpdateMapRun) or (
                current is not None and current.run is not None and not isinstance(command, AckDispatch)):
            return self._apply_to_map_run(command, current, batch, now_ms)
        if isinstance(command, StartExecution):
            return self._start(command, current, batch, now_ms, reply, rerun)
        if isinstance(command, Decided):
            return self._landed(command, current, batch, now_ms, reply)
        if isinstance(command, StopExecution):
            if current is None:
                return ExecutionDoesNotExist(command.arn)
            decision = decider.stop(current, command.error, command.cause, now_ms, self.services)
            if decision is None:
                return current.stop_ms
            self._stage(batch, decision, current.version, now_ms)
            return now_ms
        if isinstance(command, RedriveExecution):
            return self._redrive(command, current, batch, now_ms, reply)
        if isinstance(command, AckDispatch):
            if current is not None:
                self._stage(batch, decider.ack_dispatch(current, command.dispatch_id), current.version, now_ms)
            return True
        if current is None:
            return self._answer(command, None)
        if isinstance(command, FireTimer) and command.due_ms not in (None, current.timers.get(command.timer_id)):
            return None  # set again since it was taken (or gone): its own row fires it
        if isinstance(command, FireTimer | CompleteAttempt):
            return self._evaluate(command, current, batch, now_ms, reply)
        definition = self._definitions.of(current)
        if isinstance(command, StartAttempt):
            decision = decider.start_attempt(current, definition, command.scheduled_id, command.worker_name, now_ms)
        elif isinstance(command, Heartbeat):
            decision = decider.heartbeat(current, definition, command.scheduled_id, now_ms)
        else:
            raise AssertionError(f"unknown command {command!r}")
        if decision is None:
            return TaskNotPending(command.arn)
        self._stage(batch, decision, current.version, now_ms)
        return True

    def _apply_to_map_run(self, command: Command, current: ExecutionState | None, batch: Batch,
                          now_ms: int) -> object:
        """A command of a map run (decider/map_runs.py): its creation, its items read, or its redrive, a child's
        close, its results written, UpdateMapRun, a stop."""
        if isinstance(command, StartMapRun):
            if current is None and command.request.get("redrive"):  # gone since (retention)
                return ExecutionDoesNotExist(command.arn)
            if current is not None and command.request.get("redrive"):
                refused = map_runs.not_redrivable(current, command.request["scheduled_id"])
                if refused is not None:
                    return ExecutionNotRedrivable(command.arn, refused)
            if current is None:
                self._stage(batch, map_runs.create(command.arn, self.shards.of(command.arn), command.request,
                                                   now_ms), 0, now_ms)
            else:
                refill = map_runs.redrive if command.request.get("redrive") else map_runs.filled
                decision = refill(current, command.request, now_ms)
                if decision is not None:
                    self._stage(batch, decision, current.version, now_ms)
            return True
        if current is None:
            return True if isinstance(command, MapRunChildClosed | MapRunWritten) else ExecutionDoesNotExist(
                command.arn)
        if isinstance(command, MapRunChildClosed):
            decision = map_runs.child_closed(current, command.index, command.described, command.round, now_ms)
        elif isinstance(command, MapRunWritten):
            decision = map_runs.written(current, command.error, command.cause, now_ms)
        elif isinstance(command, UpdateMapRun):
            decision = map_runs.update(current, command.max_concurrency, command.tolerated_count,
                                       command.tolerated_percentage, now_ms)
        elif isinstance(command, StopExecution):
            decision = map_runs.stop(current, command.error, command.cause, now_ms)
        else:
            return ExecutionDoesNotExist(command.arn)  # no execution's command applies to a map run
        if decision is not None:
            self._stage(batch, decision, current.version, now_ms)
        return now_ms if isinstance(command, StopExecution) else True

    def _evaluate(self, command: Evaluating, current: ExecutionState, batch: Batch, now_ms: int, reply: Reply,
                  inputs: dict[int, str] | None = None) -> object:
        """A step that evaluates states: decided here on a slice of the budget, or in the heavy lane (then HELD:
        its reply comes with the lane's answer). A transfer's stage (``batch.group``) is decided here, whole, unless
        it passed a reply to wait on (transfer_runner.py: a stage of one task result)."""
        if batch.group and reply is None:
            return self._decided(command, current, decide(command, current, self._definitions.of(current), now_ms,
                                                          self._budgeted(current.arn, self.services, now_ms), inputs),
                                 batch, now_ms)
        staged = command.arn in batch.staged

        def job() -> Job:
            key = (current.state_machine_arn, current.revision_id)
            self._definitions.of(current)  # the revision exists (and is cached) before its text is read for the lane
            return Job(command, current, key, lambda: self._definitions.text(key), now_ms, self.tokens,
                       self.activities, inputs,
                       None if is_express(current.arn) else self.budgets.budget_for(current.arn, self.services, now_ms))
        if self.heavy.route(command, reply, staged, job):
            return HELD
        definition = self._definitions.of(current)
        try:
            decision = decide(command, current, definition, now_ms, self._budgeted(current.arn, self._sliced, now_ms),
                              inputs)
        except SliceSpent:
            self.metrics.heavy_lane_steps.labels("sliced").inc()
            if self.heavy.send(command, reply, staged, job):
                return HELD
            decision = decide(command, current, definition, now_ms, self._budgeted(current.arn, self.services, now_ms),
                              inputs)
        return self._decided(command, current, decision, batch, now_ms)

    def _landed(self, decided: Decided, current: ExecutionState | None, batch: Batch, now_ms: int,
                reply: Reply) -> object:
        """The lane's answer: applied if the execution is still the one it was decided for (heavy_routing.py)."""
        command = decided.command
        if current is None:  # deleted meanwhile (retention)
            return self._answer(command, None)

        def decide_here() -> decider.Decision | None:
            return decide(command, current, self._definitions.of(current), now_ms,
                          self._budgeted(current.arn, self.services, now_ms), decided.inputs)
        decision = self.heavy.decision(decided, reply, current, command.arn in batch.staged, decide_here)
        if decision is STALE:
            return HELD
        return self._decided(command, current, decision, batch, now_ms)

    def _decided(self, command: Evaluating, current: ExecutionState, decision: decider.Decision | None,
                 batch: Batch, now_ms: int) -> object:
        """Stage an evaluating step's decision; returns the command's reply."""
        self.heavy.settled(command.arn, decision)
        if decision is not None:
            if isinstance(command, FireTimer):
                due_ms = current.timers.get(command.timer_id, now_ms)
                self.metrics.timer_fired(due_ms, now_ms)
                batch.fired.setdefault(batch.last_write.get(command.arn, len(batch.writes)), []).append(
                    (command.arn, command.timer_id, due_ms, now_ms))
            self._stage(batch, decision, current.version, now_ms)
        return self._answer(command, decision)

    @staticmethod
    def _answer(command: Command, decision: decider.Decision | None) -> object:
        """The reply to an evaluating command (or a Decided's) from its decision (None: it changed nothing)."""
        if isinstance(command, Decided):
            command = command.command
        if isinstance(command, FireTimer):
            return None
        if isinstance(command, RedriveExecution):
            return ExecutionDoesNotExist(command.arn) if decision is None else decision.state.redrive_ms
        return TaskNotPending(command.arn) if decision is None else True

    def _start(self, command: StartExecution, current: ExecutionState | None, batch: Batch, now_ms: int,
               reply: Reply, rerun: bool) -> object:
        if current is not None:
            earlier_ms = decider.started_again(current, command.token, command.input, command.parent,
                                               command.test_case, command.express == SYNC)
            return ExecutionAlreadyExists(command.arn) if earlier_ms is None else earlier_ms
        if (command.express is not None and not rerun
                and len(self.express.runs) + len(batch.express_starting) >= self.limits.express_runs_max):
            return InboxFull(f"{len(self.express.runs)} express executions are running")
        if command.express == ASYNC and not rerun:  # durable first: it runs once its row has landed
            batch.last_write[command.arn] = EXPRESS_ROWS - len(batch.express_starting)
            batch.express_rows.append((self.shards.of(command.arn), command.arn, encode_commands([command])))
            batch.express_starting.append(command)
            return now_ms
        fresh = ExecutionState(command.arn, command.state_machine_arn, command.name, command.revision_id,
                               command.role_arn, command.input, now_ms, self.shards.of(command.arn),
                               parent=command.parent, version_arn=command.version_arn, alias_arn=command.alias_arn,
                               test_case=command.test_case, start_token=command.token,
                               processor=command.processor, trace=command.trace)
        definition = self._definitions.of(fresh)  # first: a start whose definition cannot be read leaves no run
        limit_ms = None
        if command.express is not None:
            self.express.runs[command.arn] = ExpressRun(fresh, reply, durable=command.express == ASYNC)
            limit_ms = DURATION_MS_MAX
        try:
            decision = decider.start(fresh, definition, now_ms, self._budgeted(fresh.arn, self._sliced, now_ms),
                                     limit_ms)
        except SliceSpent:  # its first state waits on a continuation (the lane's): the caller is answered now
            self.metrics.heavy_lane_steps.labels("sliced").inc()
            decision = decider.start(fresh, definition, now_ms, self.services, limit_ms, defer=True)
        self._stage(batch, decision, 0, now_ms)
        return HELD if command.express == SYNC else now_ms

    def _redrive(self, command: RedriveExecution, current: ExecutionState | None, batch: Batch, now_ms: int,
                 reply: Reply = None) -> object:
        if current is None:
            return ExecutionDoesNotExist(command.arn)
        earlier_ms = decider.redriven_by(current, command.client_token, now_ms)
        if earlier_ms is not None:  # the same request again: answered as it was
            return earlier_ms
        reason = not_redrivable(current, now_ms, self.redrivable_ms)
        if reason is None and not command.by_map_run:
            reason = redriven_by_its_map_run(current)
        if reason is not None:
            return ExecutionNotRedrivable(command.arn, reason)
        # A compacted history is read from its object, on this thread as rows are (rarely: only a Wait that was
        # waiting needs its Entered event).
        inputs = {event_id: event["stateEnteredEventDetails"]["input"] for event_id, event in
                  self.histories.events(command.arn, decider.redrive_reads(current)).items()}
        return self._evaluate(command, current, batch, now_ms, reply, inputs)

    def _budgeted(self, arn: str, services: decider.Services, now_ms: int) -> decider.Services:
        """``services`` for a step of ``arn`` within its account's StateTransition budget (Express: none)."""
        return services if is_express(arn) else self.budgets.services_for(arn, services, now_ms)

    def _stage(self, batch: Batch, decision: decider.Decision, expected_version: int, now_ms: int) -> None:
        state = decision.state
        state.version = expected_version + 1
        if is_express(state.arn):
            dispatches, closed = self.express.step(batch, decision)
            for dispatch in dispatches:
                self._hand_out(dispatch)
            if closed is not None:
                self.metrics.express_closed.labels("async" if closed.durable else "sync").inc()
            return
        self.budgets.spent(state.arn, decision, now_ms)
        self.heavy.staged(decision)
        if self.probe is not None:
            self.probe.staged(state.arn, decision.effects.events)
        self._check_dispatches(decision, now_ms)
        if state.arn in batch.last_write:
            self._merge(batch, decision)
            return
        try:
            blob = state.to_blob(self.store.rows_hold_fields)
        except TypeError as exc:  # orjson cannot write the data (nested too deeply): that execution fails, alone
            decider.fail_unstorable(decision, now_ms, str(exc), self.services)
            blob = state.to_blob(self.store.rows_hold_fields)
        batch.staged[state.arn] = state
        batch.last_write[state.arn] = len(batch.writes)
        batch.states.append(state)
        batch.writes.append(_write(state, blob, expected_version, decision.effects, batch.group))

    def _check_dispatches(self, decision: decider.Decision, now_ms: int) -> None:
        """The store writes dispatch payloads with orjson too: one it cannot write fails its execution, alone."""
        try:
            for _, payload in decision.effects.dispatches_added:
                orjson.dumps(payload)
        except TypeError as exc:
            decider.fail_unstorable(decision, now_ms, str(exc), self.services)

    def _merge(self, batch: Batch, decision: decider.Decision) -> None:
        """Fold a decision on an execution written earlier in this tick into that write instead of a write of its
        own: a parent hearing of a hundred children's closes in one tick (or a map run of a thousand) serializes
        and writes its row once, not a hundred times. The write is serialized again just before the commit
        (``Batch.unserialized``); the decision takes the write's effects as its own, so a state that cannot be
        stored then fails with all of them. A transfer stage folded in goes on only if that write lands
        (``Batch.merged_at``)."""
        index = batch.last_write[decision.state.arn]
        effects = batch.writes[index].effects
        effects.fold(decision.effects)
        decision.effects = effects
        batch.staged[decision.state.arn] = batch.states[index] = decision.state
        batch.unserialized[index] = decision
        if batch.group:
            batch.merged_at = index if batch.merged_at is None else min(batch.merged_at, index)

    # -- express starts

    def _read_express_starts(self, now_ms: int) -> list[StartExecution]:
        """The express starts of shards just taken: each runs again from the start (at-least-once)."""
        reruns: list[StartExecution] = []
        for shard in sorted(self.express.unread & self.range_ids.keys()):
            try:
                reruns += self.express.read_starts(self.store, shard)
            except StoreUnavailable as exc:
                self._store_failed(now_ms, f"reading the express starts of shard {shard}", exc)
                break
        return reruns

    def _rerun_express(self, command: StartExecution, batch: Batch, now_ms: int) -> None:
        if isinstance(self._attempt(command, batch, now_ms, rerun=True), EngineUnavailable):
            # its definition could not be read (the store failed): its row is read again after the pause
            self.express.unread.add(self.shards.of(command.arn))

    def _commit_express(self, batch: Batch, now_ms: int) -> dict[str, Exception]:
        """Write the batch's asynchronous express starts and delete the rows of those that closed, then run the
        starts that landed. Returns the starts that did not, by ARN."""
        try:
            lost = self.express.commit(self.store, batch, self.range_ids)
        except Exception as exc:  # nothing landed, or unknown: callers retry (an unknown row runs at the restart)
            log.error("writing express starts failed: %s", exc)
            return {command.arn: EngineUnavailable("the start could not be recorded; retry the request")
                    for command in batch.express_starting}
        self._unserve_all(lost & self.range_ids.keys(), "another node took it", logging.ERROR)
        unstarted: dict[str, Exception] = {}
        for command in batch.express_starting:
            if self.shards.of(command.arn) in lost:
                unstarted[command.arn] = EngineUnavailable("this node no longer serves the execution's shard")
            else:
                self._rerun_express(command, batch, now_ms)
        return unstarted

    # -- committing, then acting

    def _store_commit(self, writes: list[ExecutionWrite]) -> CommitResult:
        return self.store.commit(writes, self.range_ids)

    def _commit(self, batch: Batch, now_ms: int) -> dict[int, Exception]:
        """Commit the batch; act on what landed. Returns the writes that did not land, by index."""
        for index, decision in batch.unserialized.items():  # rows that later decisions of the tick were folded into
            state = decision.state
            try:
                blob = state.to_blob(self.store.rows_hold_fields)
            except TypeError as exc:
                decider.fail_unstorable(decision, now_ms, str(exc), self.services)
                blob = state.to_blob(self.store.rows_hold_fields)
            earlier = batch.writes[index]
            batch.writes[index] = _write(state, blob, earlier.expected_version, decision.effects, earlier.group)
        started = time.perf_counter()
        try:
            result = self._store_commit(batch.writes)
        except Exception as exc:  # refused before writing, outcome unknown, or a bug: one path for all
            log.error("commit failed (%s); re-reading %d shards", exc, len({w.shard_id for w in batch.writes}))
            self._reread({write.shard_id for write in batch.writes}, batch.states)
            return self._landed_anyway(batch, isinstance(exc, CommitOutcomeUnknown), now_ms)
        self.metrics.committed(batch.writes, result, time.perf_counter() - started)
        lost = result.lost_shards & self.range_ids.keys()
        if lost:
            fenced = sum(1 for write in batch.writes if write.shard_id in lost)
            event(log, "fenced", "%d writes refused by the range id: another node took %s", fenced,
                  shard_list(lost), level=logging.ERROR, writes=fenced, shards=sorted(lost))
            self.metrics.fenced_writes.inc(fenced)
            self._unserve_all(lost, "another node took it", logging.ERROR)
        failures: dict[int, Exception] = {}
        removed: list[tuple[str, str]] | None = None if self.edges.removed is None else []
        for index, (write, state) in enumerate(zip(batch.writes, batch.states, strict=True)):
            if not result.committed(index, write):
                failures[index] = EngineUnavailable("the execution changed concurrently; retry")
                if self.shards.serves(write.shard_id):
                    self._reread({write.shard_id}, [state])
                continue
            self._executions.remember(state)
            if write.effects.events and self.edges.history is not None:
                batch.logged.append((state.root_machine_arn, write.arn, state.redrive_count, write.effects.events,
                                     state.trace))
            if self.probe is not None:
                for fired in batch.fired.get(index, ()):
                    self.probe.timer_applied(*fired)
            window = self.windows[state.shard_id]
            for timer_id, fire_at_ms in write.effects.timers_added:
                window.offer(fire_at_ms, state.arn, timer_id, state.start_ms)
            for dispatch_id in write.effects.dispatches_removed:
                self.outbox.release(state.arn, dispatch_id)
                if removed is not None:
                    removed.append((state.arn, dispatch_id))
            for dispatch_id, payload in write.effects.dispatches_added:
                dispatch = Dispatch(state.shard_id, state.arn, dispatch_id, payload)
                if self.outbox.committed(dispatch):
                    self._hand_out(dispatch)
        if removed:
            self.edges.removed(removed)
        return failures

    def _landed_anyway(self, batch: Batch, unknown: bool, now_ms: int) -> dict[int, Exception]:
        """After a failed commit, which writes landed all the same: none if the store said nothing was written;
        if the outcome is unknown, those whose row now holds their version (as Temporal re-reads after an unknown
        write). Their callers hear of success; what they set in motion comes back with the re-read shards."""
        failed = {index: EngineUnavailable("the commit did not complete; retry the request")
                  for index in range(len(batch.writes))}
        if not unknown:
            return failed
        try:
            for index, write in enumerate(batch.writes):
                blob = self.store.load_execution(write.arn)
                if blob is not None and ExecutionState.from_blob(blob).version >= write.version:
                    del failed[index]
                    if self.probe is not None:
                        for fired in batch.fired.get(index, ()):
                            self.probe.timer_applied(*fired)
        except StoreUnavailable as exc:  # still unknown: every caller retries
            self._store_failed(now_ms, "reading back an unknown commit", exc)
            return {index: EngineUnavailable("the commit's outcome is unknown; retry the request")
                    for index in range(len(batch.writes))}
        return failed

    def _reread(self, shards: set[int], states: list[ExecutionState]) -> None:
        """What memory says of these shards may be wrong: drop it, and read the rows again before serving."""
        for state in states:
            self._executions.forget(state.arn)
        self.transfers.reread_now |= shards
        for shard in shards:
            self.windows[shard].forget()
            self.outbox.reread(shard)
        self.transfers.drop(shards)

    def _hand_out(self, dispatch: Dispatch) -> None:
        if dispatch.payload["kind"] in TRANSFER_KINDS and "mocked" not in dispatch.payload:
            self.transfers.start(dispatch)
            return
        try:
            self.edges.dispatch(dispatch)
        except Exception:  # the integration could not take it: it stays in the outbox, read back later
            log.exception("handing out a %s dispatch failed", dispatch.payload["kind"])
            self.outbox.read_again(dispatch)

    def _read_outboxes(self, now_ms: int) -> None:
        """Read back a page of each shard whose outbox memory cannot say everything (start, re-read, full)."""
        for shard in self.outbox.behind():
            if self.shards.serves(shard):
                try:
                    for dispatch in self.outbox.read(shard, self.store.pending_dispatches):
                        self._hand_out(dispatch)
                except StoreUnavailable as exc:  # the cursor did not move; try again after a pause
                    self._store_failed(now_ms, f"reading the outbox of shard {shard}", exc)
                    return


def _write(state: ExecutionState, blob: bytes, expected_version: int, effects: Any, group: int) -> ExecutionWrite:
    """The row write of ``state`` (its blob given), with the decision's effects."""
    return ExecutionWrite(state.shard_id, state.arn, state.listed_under, state.name, state.status, state.start_ms,
                          state.stop_ms, expected_version, state.version, blob, effects, group, state.version_arn,
                          state.alias_arn, state.redrive_count, state.redrive_ms)


def _activity_arns(store: Store) -> set[str]:
    arns: set[str] = set()
    cursor: str | None = None
    while True:
        page = store.list_activities("arn:aws:states:", 1_000, cursor)
        arns.update(record.arn for record in page.items)
        cursor = page.next_cursor
        if cursor is None:
            return arns


def _recorded(taker: Taker, work: list[Work], into: list[Work]) -> Taker:
    """``taker``, noting in ``into`` what it appends to ``work``."""
    def take(n: int) -> int:
        first = len(work)
        got = taker(n)
        into.extend(work[first:])
        return got
    return take
