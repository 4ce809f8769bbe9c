"""The engine core: owns shards, applies commands one execution at a time, and commits before acting.

``tick(now_ms)`` is the whole engine step, synchronous and bounded (``Limits``): hand out dispatches of shards whose
outbox is being read back, fire due timers, apply engine-to-engine transfers and queued commands through the
decider, commit every resulting write in one store transaction (group commit), then (only then) reply to callers,
cache the new states, offer new timers to the timer windows and hand new dispatches out. A commit that fails, whose
outcome is unknown, or whose version check is lost has one handling path: the shards it touched are re-read (timer
window reloaded from the rows, outbox read back) before they serve again, so nothing waits for a restart.
``Engine.start`` runs ticks on one thread; the API's async handlers submit commands and await their replies.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import decider
from ..asl.definition import Definition, ResourceCheck, parse_definition
from ..decider.effects import TimerKind
from ..decider.execution import REDRIVABLE_MS, ExecutionState, Flow, not_redrivable
from ..decider.mocks import MockConfig
from ..metrics import Metrics
from ..store.base import CommitOutcomeUnknown, CommitResult, Dispatch, ExecutionWrite, Store, StoreUnavailable
from ..store.payloads import Histories
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
    RedriveExecution,
    ShardNotOwned,
    StartAttempt,
    StartExecution,
    StopExecution,
    TaskNotPending,
    decode_commands,
    encode_commands,
)
from .express import ASYNC, DURATION_MS_MAX, SYNC, ExpressRun, ExpressRuns, is_express
from .express import result as express_result
from .heavy_lane import Decided, LaneFactory
from .limits import Limits
from .outbox import OutboxWindow
from .timers import WINDOW_MS, TimerWindow
from .tokens import TaskTokens
from .transfers import KINDS as TRANSFER_KINDS
from .transfers import Stages, TransferContext, stages

log = logging.getLogger("statewright.engine")

LEASE_MS = 10_000
STORE_RETRY_MS = 100  # the pause after the store failed to serve a timer or outbox read
FORWARD_RETRY_MS = 500  # the pause before a transfer stage another node could not take is sent again
# Bugs the simulator's own tests plant (Engine(planted=...)) to show each fault's checker catches them.
PLANTED = frozenset({"reply-before-commit", "no-reread", "no-outbox-read-at-start", "start-attempt-twice",
                     "refill-skips-overdue", "lose-timeouts", "results-for-any-attempt", "skip-timers-at-start",
                     "timers-fire-early", "act-on-fenced-writes", "commit-without-fencing",
                     "forward-once", "run-unbounded", "drop-job-stops", "redrive-from-start",
                     "status-before-commit", "lane-ignores-version", "lane-drops-failures", "expire-early",
                     "compact-rows-only"})
Reply = Any  # whatever the submitter passed with its command; only deliver_replies looks inside
HELD = object()  # what _apply returns for a command whose reply an express run holds until it closes
# A reply's write index at or below this waits for the tick's express start rows instead: index EXPRESS_ROWS - i
# for the i-th asynchronous express start of the batch.
EXPRESS_ROWS = -2
# (state machine ARN, execution ARN, history events) of one transition step, for the execution logs
Logged = tuple[str, str, int, list[dict[str, Any]]]  # (state machine ARN, execution ARN, redrive count, events)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def shard_for(execution_arn: str, shard_count: int) -> int:
    """The shard an execution lives on: a stable hash of its ARN (account, state machine and name)."""
    return zlib.crc32(execution_arn.encode()) % shard_count


@dataclass(slots=True)
class _Batch:
    writes: list[ExecutionWrite] = field(default_factory=list)
    states: list[ExecutionState] = field(default_factory=list)
    staged: dict[str, ExecutionState] = field(default_factory=dict)  # each execution's latest state in the batch
    # (reply, result, index of the write the result depends on, or -1): answered after the commit
    replies: list[tuple[Reply, object, int]] = field(default_factory=list)
    fired: dict[int, tuple[str, str, int, int]] = field(default_factory=dict)  # write index -> the timer it fired
    fetched: dict[str, ExecutionState | None] = field(default_factory=dict)  # read by the prefetch (None: new)
    unread: dict[str, Exception] = field(default_factory=dict)  # the prefetch failed for these: each fails alike
    # (transfer, its stage's replies, first write index, end write index): goes on only if those writes land
    transfers: list[tuple[_Transfer, list[object], int, int]] = field(default_factory=list)
    group: int = 0  # the write group being staged (0: none): a transfer stage's writes land together or not at all
    last_write: dict[str, int] = field(default_factory=dict)  # each execution's last write in the batch, by index
    # Asynchronous express starts: their rows (shard, ARN, the command), and the commands to run once they landed
    express_rows: list[tuple[int, str, bytes]] = field(default_factory=list)
    express_starting: list[StartExecution] = field(default_factory=list)
    logged: list[Logged] = field(default_factory=list)  # committed (or express) history, for the execution logs


@dataclass(slots=True)
class _Transfer:
    """Engine-to-engine work in progress (see transfers.py): its dispatch, its stages, the last stage's replies."""

    dispatch: Dispatch
    stages: Stages
    replies: list[object] | None = None
    remote: list[Command] | None = None  # a stage sent to the node that owns its execution, awaiting replies


class Engine:
    def __init__(self, store: Store, *, node_id: str = "local", clock: Callable[[], int] = wall_clock_ms,
                 limits: Limits | None = None, tokens: TaskTokens | None = None,
                 planted: frozenset[str] = frozenset(), wait_scale: float = 1.0,
                 evaluation_clock: Callable[[], float] | None = time.perf_counter,
                 mocks: MockConfig | None = None, resource_check: ResourceCheck | None = None,
                 redrivable_ms: int = REDRIVABLE_MS, status_events: bool = False,
                 heavy_lane: LaneFactory | None = None) -> None:
        """``resource_check``: how definitions' aws-sdk resources are checked (the API's catalogue of AWS services);
        ``redrivable_ms``: how long after it closed an execution can be redriven; ``status_events``: dispatch a
        status change event from each commit that changes an execution's status; ``heavy_lane``: where the
        continuations of executions whose evaluation is heavy are decided (heavy_lane.py: HeavyLane, a process of
        their own; the simulator passes its own; None: on the engine thread)."""
        self.store = store
        # Where a redrive reads its history from, compacted or not; the server points it at its payload store.
        self.histories = Histories(store, store.payloads())
        self.redrivable_ms = redrivable_ms
        # Test-only: bugs planted on purpose so the simulator's tests can show its checkers catch them (PLANTED).
        unknown = planted - PLANTED
        if unknown:
            raise ValueError(f"unknown planted bug(s) {sorted(unknown)}; known: {', '.join(sorted(PLANTED))}")
        self.planted = planted
        # The simulator's probe: told of every timer whose firing committed (timer_applied(arn, id, due, now)).
        self.probe: Any = None
        self.limits = limits or Limits()
        self.tokens = tokens or TaskTokens.load(store)
        # The ARNs of the activities that exist, kept current by ``note_activity``: the decider reads no store.
        self.activities: set[str] = _activity_arns(store)
        # ``evaluation_clock`` bounds each step's evaluation in wall time (the simulator passes None: its runs stay
        # deterministic, bounded by steps and items alone).
        unbounded = "run-unbounded" in planted
        states_max = 10**9 if unbounded else self.limits.apply_states_max
        steps_max = 10**9 if unbounded else self.limits.apply_steps_max
        self.services = decider.Services(self.tokens.mint, self.activities, self.limits.budgets(
            evaluation_clock), states_max, steps_max, self.limits.heavy_pause_ms,
            wait_scale=wait_scale, mocks=mocks, resource_check=resource_check, status_events=status_events,
            redrivable_ms=redrivable_ms)
        # Called, on the engine thread, with every dispatch for outside I/O (activities, HTTP) once its commit has
        # landed or its row is read back; it must hand it on without blocking. One it cannot take goes back
        # through ``give_back``.
        self.on_dispatch: Callable[[Dispatch], None] = lambda dispatch: None
        # Several nodes: called on the engine thread, once per commit, with the (execution ARN, dispatch id) of
        # the dispatches it removed, so the activity matcher drops copies that a worker at another node started.
        self.on_removed: Callable[[list[tuple[str, str]]], None] | None = None
        # Called on the engine thread once per tick with every (reply, result) whose commit landed (or that needed
        # none). The default resolves concurrent futures; an event loop passes its own replies back in one hop.
        self.deliver_replies: Callable[[list[tuple[Reply, object]]], None] = answer
        # Called on the engine thread once per tick with the history events its commit landed and its express
        # executions recorded (the execution logs); it must hand them on without blocking. None: no logs.
        self.on_history: Callable[[list[Logged]], None] | None = None
        self.express = ExpressRuns()
        self.node_id = node_id
        self.clock = clock
        self.shard_count = store.shard_count()
        self.range_ids: dict[int, int] = {}
        # Shards held by a lease (several nodes): served until then, unless renewed (cluster/membership.py).
        self.serve_until_ms: dict[int, int] = {}
        self.windows: dict[int, TimerWindow] = {}
        # Several nodes: sends a stage of engine-to-engine work to the node owning its execution (see _forward).
        self.forward: Callable[[list[Command]], Future] | None = None
        self.outbox = OutboxWindow(self.limits)
        self._cache: OrderedDict[str, ExecutionState] = OrderedDict()
        self._definitions: OrderedDict[tuple[str, str], Definition] = OrderedDict()
        self._inbox: deque[tuple[Command, Reply]] = deque()
        self._transfers: deque[_Transfer] = deque()  # their dispatches are held in the outbox window: bounded
        self._transfer_context = TransferContext(store.get_state_machine, store.get_version, store.get_alias,
                                                 self._load, self.tokens)
        self._given_back: list[Dispatch] = []
        self._room_again = False
        self._ownership: list[Callable[[int], None]] = []  # shard changes asked for from other threads
        self._forwarded: list[tuple[_Transfer, Future]] = []  # remote stages answered (or failed), to take back
        self._remote: dict[int, _Transfer] = {}  # id -> transfers whose stage another node is applying
        self._forward_retries: list[tuple[int, _Transfer]] = []  # (not before ms, transfer) to send again
        self._store_retry_at_ms = 0  # after a failed read of the timers or the outbox, not before this
        self._reread_now: set[int] = set()  # shards re-read during this tick (their transfers start over)
        self._wakeup = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.metrics = Metrics(lambda: self.windows, clock, lambda: len(self.outbox))
        self.lane = None if heavy_lane is None else heavy_lane(self.services, self.limits, self._lane_landed)
        # Open executions whose last step stopped on its evaluation share: their continuations go to the lane.
        self.heavy: set[str] = set()
        self._in_lane: set[str] = set()  # executions with a continuation in the lane
        # Their other continuations, held until the lane's answer lands (else that answer would always be stale)
        self._held: dict[str, list[FireTimer]] = {}
        self._redo: list[FireTimer] = []  # held continuations released, and stale ones, for the next tick
        self._decided: deque[Decided] = deque()  # continuations back from the lane (under _wakeup)

    def note_activity(self, arn: str, exists: bool) -> None:
        """CreateActivity or DeleteActivity committed: Task states see the change from the next command on."""
        if exists:
            self.activities.add(arn)
        else:
            self.activities.discard(arn)

    # -- ownership

    def acquire_all_shards(self) -> None:
        """Single node: take every shard, fencing out any earlier owner; its timers and outbox load as it serves."""
        now_ms = self.clock()
        for shard in range(self.shard_count):
            self._serve(shard, self.store.acquire_shard(shard, self.node_id, now_ms + LEASE_MS), None, now_ms)

    def owns(self, shard_id: int) -> bool:
        """Whether this engine serves the shard now (thread-safe; it may change at the next tick)."""
        return shard_id in self.range_ids

    def gain_shard(self, shard_id: int, range_id: int, serve_until_ms: int | None) -> None:
        """Serve a shard just acquired at ``range_id`` (until ``serve_until_ms``, None: for good). Thread-safe:
        applied at the start of the next tick."""
        self._change_ownership(lambda now_ms: self._serve(shard_id, range_id, serve_until_ms, now_ms))

    def renewed(self, shards: set[int], serve_until_ms: int) -> None:
        """The leases of these shards were renewed: serve them until ``serve_until_ms``. Thread-safe."""
        def extend(now_ms: int) -> None:
            for shard in shards & self.serve_until_ms.keys():
                self.serve_until_ms[shard] = max(self.serve_until_ms[shard], serve_until_ms)
        self._change_ownership(extend)

    def drop_shards(self, shards: set[int]) -> Future:
        """Stop serving these shards. Thread-safe; the future resolves on the engine thread once no commit for
        them is in flight, so the caller may then release their leases."""
        done: Future = Future()

        def drop(now_ms: int) -> None:
            for shard in shards & self.range_ids.keys():
                self._unserve(shard, "handed over")
            done.set_result(None)
        self._change_ownership(drop)
        return done

    def _change_ownership(self, change: Callable[[int], None]) -> None:
        with self._wakeup:
            self._ownership.append(change)
            self._wakeup.notify()

    def _serve(self, shard: int, range_id: int, serve_until_ms: int | None, now_ms: int) -> None:
        for arn in [arn for arn, state in self._cache.items() if state.shard_id == shard]:
            del self._cache[arn]  # another node may have changed them since this one last served the shard
        self.range_ids[shard] = range_id
        if serve_until_ms is None:
            self.serve_until_ms.pop(shard, None)
        else:
            self.serve_until_ms[shard] = serve_until_ms
        self.windows[shard] = TimerWindow(shard, self.limits)
        self.express.unread.add(shard)
        if "skip-timers-at-start" in self.planted:
            self.windows[shard].planted_lose_rows(now_ms + WINDOW_MS)
        if "no-outbox-read-at-start" not in self.planted:
            self.outbox.reread(shard)
        self.metrics.shards_owned.set(len(self.range_ids))

    def _unserve(self, shard: int, why: str) -> None:
        """Forget everything of a shard this engine no longer serves; its next owner reads the rows."""
        log.info("no longer serving shard %d: %s", shard, why)
        self.range_ids.pop(shard, None)
        self.serve_until_ms.pop(shard, None)
        window = self.windows.pop(shard, None)
        if window is not None:
            window.forget()
        self.outbox.forget(shard)
        for arn in [arn for arn, state in self._cache.items() if state.shard_id == shard]:
            del self._cache[arn]
        self.express.unread.discard(shard)
        gone = [(run.reply, EngineUnavailable(f"this node stopped serving shard {shard} while the execution ran"))
                for run in self.express.drop_shard(shard) if run.reply is not None]
        if gone:
            self.deliver_replies(gone)
        self._drop_transfers({shard})
        for arns in (self.heavy, self._in_lane):  # a lane's answer that lands for it is dropped
            arns.difference_update([arn for arn in arns if shard_for(arn, self.shard_count) == shard])
        for arn in [arn for arn in self._held if shard_for(arn, self.shard_count) == shard]:
            del self._held[arn]
        self.metrics.shards_owned.set(len(self.range_ids))

    def _check_leases(self, now_ms: int) -> None:
        """Stop serving a shard whose lease was not renewed in time (some margin before it ends)."""
        for shard, until_ms in list(self.serve_until_ms.items()):
            if now_ms >= until_ms:
                self._unserve(shard, "its lease was not renewed in time")

    # -- running

    def start(self, *, all_shards: bool = True) -> None:
        """Run ticks on a thread of the engine's own. ``all_shards``: a single node takes every shard first; in a
        cluster the membership hands shards to the engine as it acquires them."""
        if all_shards:
            self.acquire_all_shards()
        self._thread = threading.Thread(target=self._run, name="statewright-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._wakeup:
            self._stopping = True
            self._wakeup.notify()
        if self._thread is not None:
            self._thread.join()
        if self.lane is not None:
            self.lane.close()

    def submit(self, command: Command, reply: Reply = None, *, throttle: bool = True) -> Reply:
        """Queue a command; returns its reply handle (a new Future when none is given). With ``throttle`` a full
        inbox raises InboxFull: the API's callers back off. Integrations pass False for work tied to a dispatch
        they hold, which the outbox window already bounds."""
        if reply is None:
            reply = Future()
        with self._wakeup:
            if throttle and len(self._inbox) >= self.limits.inbox_commands_max:
                raise InboxFull(f"the engine has {len(self._inbox)} commands waiting")
            self._inbox.append((command, reply))
            self._wakeup.notify()
        return reply

    def wake(self) -> None:
        """Tick now rather than at the next timer (the clock moved forward). Thread-safe."""
        with self._wakeup:
            self._wakeup.notify()

    def give_back(self, dispatch: Dispatch) -> None:
        """An integration could not take a dispatch (its memory is full): it stays in the outbox, read back later.
        Thread-safe."""
        with self._wakeup:
            self._given_back.append(dispatch)
            self._wakeup.notify()

    def room_again(self) -> None:
        """The integrations have room again for dispatches they gave back. Thread-safe."""
        with self._wakeup:
            self._room_again = True
            self._wakeup.notify()

    def _run(self) -> None:
        while True:
            with self._wakeup:
                if self._stopping:
                    return
                if not (self._inbox or self._given_back or self._room_again or self._ownership
                        or self._forwarded or self._decided or self._redo):
                    self._wakeup.wait(self.idle_wait_s(self.clock()))
                if self._stopping:
                    return
            try:
                self.tick(self.clock())
            except Exception:  # a bug must not stop the engine, nor strand what memory held: read it all again
                log.exception("engine tick failed; re-reading every shard")
                self._reread(set(self.range_ids), list(self._cache.values()))

    def idle_wait_s(self, now_ms: int) -> float:
        """How long the engine thread may sleep when its inbox is empty: until the next timer, at most a second."""
        if now_ms < self._store_retry_at_ms:  # the store failed a read: back off before trying again
            return (self._store_retry_at_ms - now_ms) / 1000
        if self._transfers or (self.outbox.has_room() and any(s in self.range_ids for s in self.outbox.behind())):
            return 0
        wait_ms = 1_000
        for until_ms in self.serve_until_ms.values():
            wait_ms = min(wait_ms, until_ms - now_ms)
        for retry_at_ms, _ in self._forward_retries:
            wait_ms = min(wait_ms, retry_at_ms - now_ms)
        for due in [window.next_due_ms() for window in self.windows.values()] + [self.express.next_due_ms()]:
            if due is not None:
                wait_ms = min(wait_ms, due - now_ms)
        return max(wait_ms, 0) / 1000

    def tick(self, now_ms: int) -> int:
        """One bounded engine step at time ``now_ms``; returns how many commands and transfers it handled."""
        self.metrics.at_tick()
        self._take_back(now_ms)
        self._check_leases(now_ms)
        store_ok = now_ms >= self._store_retry_at_ms
        reruns: list[StartExecution] = []
        if store_ok:
            self._read_outboxes(now_ms)
            reruns = self._read_express_starts(now_ms)
        work = self._gather(now_ms, store_ok)
        if not work and not reruns and not self.express.finished:
            return 0
        batch = _Batch()
        for command in reruns:
            if isinstance(self._attempt(command, batch, now_ms, rerun=True), EngineUnavailable):
                # its definition could not be read (the store failed): its row is read again after the pause
                self.express.unread.add(shard_for(command.arn, self.shard_count))
        self._prefetch(work, batch)
        for item, reply in work:
            started = time.perf_counter()
            if isinstance(item, _Transfer):
                self._advance(item, batch, now_ms)
            else:
                result = self._attempt(item, batch, now_ms, reply)
                if reply is not None and result is not HELD:  # it answers once the last write of its execution
                    # so far has landed
                    batch.replies.append((reply, result, batch.last_write.get(item.arn, -1)))
            self.metrics.apply_seconds.observe(time.perf_counter() - started)
        if "reply-before-commit" in self.planted:
            self.deliver_replies([(reply, result) for reply, result, _ in batch.replies])
            batch.replies.clear()
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
        if answers:
            self.deliver_replies(answers)
        if batch.logged and self.on_history is not None:
            self.on_history(batch.logged)
        self._after_stages(batch, failed)
        return len(work) + len(reruns)

    def _gather(self, now_ms: int, store_ok: bool) -> list[tuple[Command | _Transfer, Reply]]:
        """This tick's work, within ``tick_commands_max``: due timers first, then transfers, then the inbox."""
        budget = self.limits.tick_commands_max
        work: list[tuple[Command | _Transfer, Reply]] = []
        for window in self.windows.values():
            if self.planted and "refill-skips-overdue" in self.planted and window.loaded \
                    and window.horizon_ms < now_ms:
                window.planted_lose_rows(now_ms)  # after a clock jump past the horizon, start afresh from now
            if store_ok:
                try:
                    window.refill(now_ms, self.store.due_timers)
                except StoreUnavailable as exc:  # the window is as it was; try again after a pause
                    self._store_failed(now_ms, f"loading timers of shard {window.shard_id}", exc)
            early_ms = 5_000 if self.planted and "timers-fire-early" in self.planted else 0
            for _, arn, timer_id in window.pop_due(now_ms + early_ms, budget - len(work)):
                if self.planted and "lose-timeouts" in self.planted and TimerKind.of(timer_id) is TimerKind.TIMEOUT:
                    continue
                work.append((FireTimer(arn, timer_id), None))
        for arn, timer_id in self.express.pop_due(now_ms, budget - len(work)):
            work.append((FireTimer(arn, timer_id), None))
        if self._forward_retries:
            due = [transfer for at_ms, transfer in self._forward_retries if at_ms <= now_ms]
            self._forward_retries = [(at_ms, t) for at_ms, t in self._forward_retries if at_ms > now_ms]
            for transfer in due:
                self._send_remote(transfer)
        if self._redo:  # timers popped already: taken whatever the budget, or they would be lost
            work.extend((command, None) for command in self._redo)
            self._redo.clear()
        while self._transfers and len(work) < budget:
            work.append((self._transfers.popleft(), None))
        with self._wakeup:
            while self._decided and len(work) < budget:
                work.append((self._decided.popleft(), None))
            while self._inbox and len(work) < budget:
                work.append(self._inbox.popleft())
        return work

    def _store_failed(self, now_ms: int, what: str, exc: Exception) -> None:
        log.error("store unavailable %s: %s", what, exc)
        self._store_retry_at_ms = now_ms + STORE_RETRY_MS

    # -- applying commands

    def _attempt(self, command: Command, batch: _Batch, now_ms: int, reply: Reply = None, *,
                 rerun: bool = False) -> object:
        """Apply one command to the batch; returns its reply (an exception for a refusal or a bug), or HELD when an
        express run holds ``reply`` until it closes. ``rerun``: an express start read back from its row."""
        try:
            result = self._apply(command, batch, now_ms, reply, rerun)
        except StoreUnavailable as exc:  # a read failed: a popped timer or a held dispatch must not be lost
            log.error("store unavailable applying %s: %s", type(command).__name__, exc)
            self._reread({shard_for(command.arn, self.shard_count)} & self.range_ids.keys(), [])
            return EngineUnavailable("the store is unavailable; retry the request")
        except Exception as exc:
            log.exception("applying %s failed", type(command).__name__)
            return exc
        if isinstance(result, TaskNotPending) and isinstance(command, StartAttempt):
            if self.planted and "start-attempt-twice" in self.planted:
                return True
            self.outbox.release(command.arn, str(command.scheduled_id))  # its dispatch is stale: let it go
        return result

    def _apply(self, command: Command, batch: _Batch, now_ms: int, reply: Reply = None,
               rerun: bool = False) -> object:
        if isinstance(command, Decided):  # whatever becomes of it, the lane's hands are free of this execution
            self._in_lane.discard(command.arn)
            self._redo.extend(self._held.pop(command.arn, ()))
        shard = shard_for(command.arn, self.shard_count)
        if shard not in self.range_ids:
            return ShardNotOwned(shard)
        current = batch.staged.get(command.arn) or self._load(command.arn, batch)
        if isinstance(command, StartExecution):
            if current is not None:
                earlier_ms = decider.started_again(current, command.token, command.input, command.parent,
                                                   command.test_case, command.express == SYNC)
                return ExecutionAlreadyExists(command.arn) if earlier_ms is None else earlier_ms
            if (command.express is not None and not rerun
                    and len(self.express.runs) + len(batch.express_starting) >= self.limits.express_runs_max):
                return InboxFull(f"{len(self.express.runs)} express executions are running")
            if command.express == ASYNC and not rerun:  # durable first: it runs once its row has landed
                batch.last_write[command.arn] = EXPRESS_ROWS - len(batch.express_starting)
                batch.express_rows.append((shard, command.arn, encode_commands([command])))
                batch.express_starting.append(command)
                return now_ms
            fresh = ExecutionState(command.arn, command.state_machine_arn, command.name, command.revision_id,
                                   command.role_arn, command.input, now_ms, shard, parent=command.parent,
                                   version_arn=command.version_arn, alias_arn=command.alias_arn,
                                   test_case=command.test_case, start_token=command.token)
            definition = self._definition(fresh)  # first: a start whose definition cannot be read leaves no run
            limit_ms = None
            if command.express is not None:
                self.express.runs[command.arn] = ExpressRun(fresh, reply, durable=command.express == ASYNC)
                limit_ms = DURATION_MS_MAX
            self._stage(batch, decider.start(fresh, definition, now_ms, self.services, limit_ms), 0, now_ms)
            return HELD if command.express == SYNC else now_ms
        if isinstance(command, FireTimer):
            if current is None:
                return None
            if isinstance(command, Decided):
                decision = self._lane_decision(command, current, batch, now_ms)
            elif self._to_lane(command, current, batch, now_ms):
                return None
            else:
                decision = decider.fire_timer(current, self._definition(current), command.timer_id, now_ms,
                                              self.services)
            if decision is not None and not decision.heavy and _continues(command.timer_id) \
                    and not any(_continues(timer_id) for timer_id in decision.state.timers):
                self.heavy.discard(command.arn)  # its loops went on lightly, or ended
            if decision is not None:
                due_ms = current.timers.get(command.timer_id, now_ms)
                self.metrics.timer_fired(due_ms, now_ms)
                batch.fired[len(batch.writes)] = (command.arn, command.timer_id, due_ms, now_ms)
                self._stage(batch, decision, current.version, now_ms)
            return None
        if isinstance(command, StopExecution):
            if current is None:
                return ExecutionDoesNotExist(command.arn)
            decision = decider.stop(current, command.error, command.cause, now_ms, self.services)
            if decision is None:
                return current.stop_ms
            self._stage(batch, decision, current.version, now_ms)
            return now_ms
        if isinstance(command, RedriveExecution):
            return self._redrive(command, current, batch, now_ms)
        if isinstance(command, AckDispatch):
            if current is not None:
                self._stage(batch, decider.ack_dispatch(current, command.dispatch_id), current.version, now_ms)
            return True
        decision = None
        if current is not None:
            definition = self._definition(current)
            if isinstance(command, StartAttempt):
                decision = decider.start_attempt(current, definition, command.scheduled_id, command.worker_name,
                                                 now_ms)
            elif isinstance(command, CompleteAttempt):
                if "results-for-any-attempt" in self.planted:
                    pending = decider.pending_attempts(current)
                    if command.scheduled_id not in pending and pending:
                        command = CompleteAttempt(command.arn, max(pending), command.result)
                decision = decider.complete_attempt(current, definition, command.scheduled_id, command.result,
                                                    now_ms, self.services)
            elif isinstance(command, Heartbeat):
                decision = decider.heartbeat(current, definition, command.scheduled_id, now_ms)
            else:
                raise AssertionError(f"unknown command {command!r}")
        if decision is None:
            return TaskNotPending(command.arn)
        self._stage(batch, decision, current.version, now_ms)
        return True

    def _to_lane(self, command: FireTimer, current: ExecutionState, batch: _Batch, now_ms: int) -> bool:
        """Send a heavy execution's continuation to the heavy lane (heavy_lane.py); False: decide it here."""
        arn = command.arn
        if self.lane is None or arn not in self.heavy or not _continues(command.timer_id):
            return False
        if arn in self._in_lane:  # another of its continuations (a branch's, an iteration's) is in the lane
            self._held.setdefault(arn, []).append(command)
            return True
        if command.timer_id not in current.timers or arn in batch.staged:
            return False
        key = (current.state_machine_arn, current.revision_id)
        self._definition(current)  # the revision exists (and is cached) before its text is read for the lane
        try:
            if not self.lane.submit(current, key, lambda: self._revision_text(key), self.services.mocks is not None,
                                    command.timer_id, now_ms, self.tokens, self.activities):
                return False  # the lane has its hands full: decided here
        except Exception:  # a state the lane cannot take (it would be a bug): decided here, as without a lane
            log.exception("the heavy lane refused a step of %s", arn)
            return False
        self._in_lane.add(arn)
        self.metrics.heavy_lane_steps.labels("sent").inc()
        return True

    def _lane_decision(self, decided: Decided, current: ExecutionState, batch: _Batch,
                       now_ms: int) -> decider.Decision | None:
        """The lane's decision, if the execution is still the one it was decided for (same start, same redrive) at
        the same version. One it outgrew goes back to the lane, decided on the state as it is now; one the lane
        failed (its process died) is decided here."""
        result = decided.result
        current_enough = (current.version, current.start_ms, current.redrive_count) == decided.identity \
            and decided.arn not in batch.staged
        if "lane-ignores-version" in self.planted:  # commits decisions the execution outgrew, for the simulator
            current_enough = True
        if not isinstance(result, BaseException) and current_enough:
            self.metrics.heavy_lane_steps.labels("applied").inc()
            return result
        if not isinstance(result, BaseException):
            self.metrics.heavy_lane_steps.labels("stale").inc()
            self._redo.append(FireTimer(decided.arn, decided.timer_id))
            return None
        self.metrics.heavy_lane_steps.labels("failed").inc()
        if "lane-drops-failures" in self.planted:  # its timer never fires
            return None
        return decider.fire_timer(current, self._definition(current), decided.timer_id, now_ms, self.services)

    def _lane_landed(self, decided: Decided) -> None:
        """On a thread of the lane: a decision is back for the engine thread."""
        with self._wakeup:
            self._decided.append(decided)
            self._wakeup.notify()

    def _redrive(self, command: RedriveExecution, current: ExecutionState | None, batch: _Batch, now_ms: int) -> object:
        if current is None:
            return ExecutionDoesNotExist(command.arn)
        earlier_ms = decider.redriven_by(current, command.client_token, now_ms)
        if earlier_ms is not None:  # the same request again: answered as it was
            return earlier_ms
        reason = not_redrivable(current, now_ms, self.redrivable_ms)
        if reason is not None:
            return ExecutionNotRedrivable(command.arn, reason)
        # A compacted history is read from its object, on this thread as rows are (rarely: only a Wait that was
        # waiting needs its Entered event).
        inputs = {event_id: event["stateEnteredEventDetails"]["input"] for event_id, event in
                  self.histories.events(command.arn, decider.redrive_reads(current)).items()}
        definition = self._definition(current)
        if "redrive-from-start" in self.planted:  # reruns what had succeeded, for the simulator's checker to catch
            current = current.copy()
            current.halted = {"": Flow(0, None, 0, definition.start_at, orjson.loads(current.input))}
        self._stage(batch, decider.redrive(current, definition, now_ms, command.client_token, inputs, self.services),
                    current.version, now_ms)
        return now_ms

    def _advance(self, transfer: _Transfer, batch: _Batch, now_ms: int) -> None:
        """Apply a transfer's next stage in this batch (see transfers.py)."""
        try:
            if transfer.replies is None:
                commands = next(transfer.stages)
            else:
                commands = transfer.stages.send(transfer.replies)
        except StopIteration:
            return  # done: its last stage removed the dispatch's row
        except StoreUnavailable as exc:  # read back and tried again once the store answers
            self._store_failed(now_ms, f"applying a {transfer.dispatch.payload['kind']} transfer", exc)
            self.outbox.read_again(transfer.dispatch)
            return
        except Exception:  # a bug: trying again would only repeat it; the execution's deadlines settle it
            log.exception("a %s transfer failed", transfer.dispatch.payload["kind"])
            self.outbox.release(transfer.dispatch.execution_arn, transfer.dispatch.dispatch_id)
            return
        target = shard_for(commands[0].arn, self.shard_count) if commands else None
        if target is not None and target not in self.range_ids and self.forward is not None:
            transfer.remote = commands  # another node owns the execution this stage is for
            self._send_remote(transfer)
            return
        first = len(batch.writes)
        batch.group = len(batch.transfers) + 1
        try:
            replies = [self._attempt(command, batch, now_ms) for command in commands]
        finally:
            batch.group = 0
        batch.transfers.append((transfer, replies, first, len(batch.writes)))

    def _after_stages(self, batch: _Batch, failed: dict[int, Exception]) -> None:
        """Transfers whose stage landed go on, in the order they ran, ahead of the ones their stage caused (a child
        that closed at once), so a parent records its attempt started before the child's result reaches it."""
        going_on: list[_Transfer] = []
        for transfer, replies, first, end in batch.transfers:
            dispatch = transfer.dispatch
            if dispatch.shard_id not in self.range_ids:
                continue  # the shard was lost: its next owner reads the dispatch back
            landed = not any(index in failed for index in range(first, end)) and not any(
                isinstance(reply, EngineUnavailable) for reply in replies)  # e.g. a read failed: nothing staged
            if not landed:  # start over from the outbox row: every stage is safe to repeat
                self.outbox.read_again(dispatch)
            elif dispatch.shard_id not in self._reread_now:  # else its row is read back, and it starts again
                transfer.replies = replies
                going_on.append(transfer)
        self._transfers.extendleft(reversed(going_on))
        self._reread_now.clear()

    def _stage(self, batch: _Batch, decision: decider.Decision, expected_version: int, now_ms: int) -> None:
        state = decision.state
        state.version = expected_version + 1
        if is_express(state.arn):
            self._run_express(batch, decision)
            return
        if decision.heavy and self.lane is not None:  # its next continuation goes to the lane
            self.heavy.add(state.arn)
        elif not state.is_open:
            self.heavy.discard(state.arn)
        try:
            blob = state.to_blob()
            for _, payload in decision.effects.dispatches_added:  # written by the store with orjson too
                orjson.dumps(payload)
        except TypeError as exc:  # orjson cannot write the data (nested too deeply): that execution fails, alone
            decider.fail_unstorable(decision, now_ms, str(exc), self.services)
            blob = state.to_blob()
        if self.planted and "drop-job-stops" in self.planted:  # abandoned AWS jobs are never stopped
            added = decision.effects.dispatches_added
            added[:] = [(dispatch_id, payload) for dispatch_id, payload in added if "cancel" not in payload]
        if self.planted and "status-before-commit" in self.planted:  # status events sent ahead of their commit
            for dispatch_id, payload in decision.effects.dispatches_added:
                if payload["kind"] == "status":
                    self.on_dispatch(Dispatch(state.shard_id, state.arn, dispatch_id, payload, 0))
        effects = decision.effects
        batch.staged[state.arn] = state
        batch.last_write[state.arn] = len(batch.writes)
        batch.states.append(state)
        batch.writes.append(ExecutionWrite(
            state.shard_id, state.arn, state.state_machine_arn, state.name, state.status, state.start_ms,
            state.stop_ms, expected_version, state.version, blob, effects.events, effects.timers_added,
            effects.timers_removed, effects.dispatches_added, effects.dispatches_removed,
            batch.group, state.version_arn, state.alias_arn, state.redrive_count, state.redrive_ms))

    def _run_express(self, batch: _Batch, decision: decider.Decision) -> None:
        """An express execution's step takes effect at once, in memory: nothing is committed for it."""
        state = decision.state
        run = self.express.runs[state.arn]
        run.state = batch.staged[state.arn] = state
        if decision.effects.events:
            batch.logged.append((state.state_machine_arn, state.arn, state.redrive_count, decision.effects.events))
        self.express.add_timers(state.arn, decision.effects.timers_added)
        for dispatch_id, payload in decision.effects.dispatches_added:  # outside the outbox window: no row to read back
            self._hand_out(Dispatch(state.shard_id, state.arn, dispatch_id, payload))
        if not state.is_open:
            self.express.close(run)
            self.metrics.express_closed.labels("async" if run.durable else "sync").inc()
            if run.reply is not None:
                batch.replies.append((run.reply, express_result(state), -1))

    def _commit_express(self, batch: _Batch, now_ms: int) -> dict[str, Exception]:
        """Write the batch's asynchronous express starts and delete the rows of those that closed, in one store
        transaction, then run the starts that landed. Returns the starts that did not, by ARN."""
        finished, self.express.finished = self.express.finished, []
        if not batch.express_rows and not finished:
            return {}
        try:
            lost = self.store.write_express_starts(batch.express_rows, finished, self.range_ids)
        except Exception as exc:  # nothing landed, or unknown: callers retry (an unknown row runs at the restart)
            log.error("writing express starts failed: %s", exc)
            self.express.finished = finished + self.express.finished
            return {command.arn: EngineUnavailable("the start could not be recorded; retry the request")
                    for command in batch.express_starting}
        for shard in lost & self.range_ids.keys():
            self._unserve(shard, "another node took it")
        unstarted: dict[str, Exception] = {}
        for command in batch.express_starting:
            if shard_for(command.arn, self.shard_count) in lost:
                unstarted[command.arn] = EngineUnavailable("this node no longer serves the execution's shard")
            elif isinstance(self._attempt(command, batch, now_ms, rerun=True), EngineUnavailable):
                # its definition could not be read (the store failed): its row is read again after the pause
                self.express.unread.add(shard_for(command.arn, self.shard_count))
        return unstarted

    def _read_express_starts(self, now_ms: int) -> list[StartExecution]:
        """The express starts of shards just taken: each runs again from the start (at-least-once)."""
        reruns: list[StartExecution] = []
        for shard in sorted(self.express.unread & self.range_ids.keys()):
            try:
                rows = self.store.express_starts(shard)
            except StoreUnavailable as exc:
                self._store_failed(now_ms, f"reading the express starts of shard {shard}", exc)
                break
            self.express.unread.discard(shard)
            for row in rows:
                command = decode_commands(row)[0][0]
                if command.arn not in self.express.runs:
                    reruns.append(command)
        return reruns

    # -- committing, then acting

    def _commit(self, batch: _Batch, now_ms: int) -> dict[int, Exception]:
        """Commit the batch; act on what landed. Returns the writes that did not land, by index."""
        started = time.perf_counter()
        range_ids = self.range_ids
        if self.planted and "commit-without-fencing" in self.planted:  # "refreshes" its range ids: no fencing
            range_ids = {lease.shard_id: lease.range_id for lease in self.store.shard_leases()}
        try:
            result = self.store.commit(batch.writes, range_ids)
            if self.planted and "act-on-fenced-writes" in self.planted:
                result = CommitResult(result.conflicts, set())
        except Exception as exc:  # refused before writing, outcome unknown, or a bug: one path for all
            log.error("commit failed (%s); re-reading %d shards", exc, len({w.shard_id for w in batch.writes}))
            self._reread({write.shard_id for write in batch.writes}, batch.states)
            return self._landed_anyway(batch, isinstance(exc, CommitOutcomeUnknown), now_ms)
        self.metrics.committed(batch.writes, result, time.perf_counter() - started)
        for shard in result.lost_shards & self.range_ids.keys():
            log.error("shard %d was taken by another node", shard)
            self.metrics.fenced_writes.inc(sum(1 for write in batch.writes if write.shard_id == shard))
            self._unserve(shard, "another node took it")
        failures: dict[int, Exception] = {}
        removed: list[tuple[str, str]] | None = None if self.on_removed is None else []
        for index, (write, state) in enumerate(zip(batch.writes, batch.states, strict=True)):
            if not result.committed(index, write):
                failures[index] = EngineUnavailable("the execution changed concurrently; retry")
                if write.shard_id in self.range_ids:
                    self._reread({write.shard_id}, [state])
                continue
            self._remember(state)
            if write.events and self.on_history is not None:
                batch.logged.append((write.state_machine_arn, write.arn, state.redrive_count, write.events))
            if self.probe is not None and index in batch.fired:
                self.probe.timer_applied(*batch.fired[index])
            window = self.windows[state.shard_id]
            for timer_id, fire_at_ms in write.timers_added:
                window.offer(fire_at_ms, state.arn, timer_id)
            for dispatch_id in write.dispatches_removed:
                self.outbox.release(state.arn, dispatch_id)
                if removed is not None:
                    removed.append((state.arn, dispatch_id))
            for dispatch_id, payload in write.dispatches_added:
                dispatch = Dispatch(state.shard_id, state.arn, dispatch_id, payload)
                if self.outbox.committed(dispatch):
                    self._hand_out(dispatch)
        if removed:
            self.on_removed(removed)
        return failures

    def _landed_anyway(self, batch: _Batch, unknown: bool, now_ms: int) -> dict[int, Exception]:
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
                    if self.probe is not None and index in batch.fired:
                        self.probe.timer_applied(*batch.fired[index])
        except StoreUnavailable as exc:  # still unknown: every caller retries
            self._store_failed(now_ms, "reading back an unknown commit", exc)
            return {index: EngineUnavailable("the commit's outcome is unknown; retry the request")
                    for index in range(len(batch.writes))}
        return failed

    def _reread(self, shards: set[int], states: list[ExecutionState]) -> None:
        """What memory says of these shards may be wrong: drop it, and read the rows again before serving."""
        for state in states:
            self._cache.pop(state.arn, None)
        if self.planted and "no-reread" in self.planted:
            return
        self._reread_now |= shards
        for shard in shards:
            self.windows[shard].forget()
            self.outbox.reread(shard)
        self._drop_transfers(shards)

    def _drop_transfers(self, shards: set[int]) -> None:
        """Transfers of these shards come back with their rows; kept as well, they would apply twice."""
        if self._transfers:
            self._transfers = deque(t for t in self._transfers if t.dispatch.shard_id not in shards)
        for key in [key for key, transfer in self._remote.items() if transfer.dispatch.shard_id in shards]:
            del self._remote[key]  # its replies, when they come, are dropped
        self._forward_retries = [(at, t) for at, t in self._forward_retries if t.dispatch.shard_id not in shards]

    # -- engine-to-engine work for executions another node owns

    def _send_remote(self, transfer: _Transfer) -> None:
        self._remote[id(transfer)] = transfer
        try:
            future = self.forward(transfer.remote)
        except Exception as exc:  # the forwarder refused at once (shutting down, say): try again later
            future = Future()
            future.set_exception(exc)
        future.add_done_callback(lambda done: self._forward_done(transfer, done))

    def _forward_done(self, transfer: _Transfer, done: Future) -> None:
        """Any thread: a remote stage was answered or failed; the engine takes it back at its next tick."""
        with self._wakeup:
            self._forwarded.append((transfer, done))
            self._wakeup.notify()

    def _take_back_forwarded(self, forwarded: list[tuple[_Transfer, Future]], now_ms: int) -> None:
        for transfer, done in forwarded:
            if self._remote.pop(id(transfer), None) is None:
                continue  # its shard was lost or re-read meanwhile: the row brings the transfer back
            replies = None if done.exception() is not None else done.result()
            if replies is None or any(isinstance(reply, EngineUnavailable) for reply in replies):
                if self.planted and "forward-once" in self.planted:
                    continue
                log.warning("a %s stage for %s did not reach its node; sending it again",
                            transfer.dispatch.payload["kind"], transfer.remote[0].arn)
                self._forward_retries.append((now_ms + FORWARD_RETRY_MS, transfer))
                continue
            transfer.remote = None
            transfer.replies = list(replies)
            self._transfers.append(transfer)

    def _hand_out(self, dispatch: Dispatch) -> None:
        if dispatch.payload["kind"] in TRANSFER_KINDS and "mocked" not in dispatch.payload:
            self._transfers.append(_Transfer(dispatch, stages(dispatch, self._transfer_context)))
            return
        try:
            self.on_dispatch(dispatch)
        except Exception:  # the integration could not take it: it stays in the outbox, read back later
            log.exception("handing out a %s dispatch failed", dispatch.payload["kind"])
            self.outbox.read_again(dispatch)

    def _read_outboxes(self, now_ms: int) -> None:
        """Read back a page of each shard whose outbox memory cannot say everything (start, re-read, full)."""
        for shard in self.outbox.behind():
            if shard in self.range_ids:
                try:
                    for dispatch in self.outbox.read(shard, self.store.pending_dispatches):
                        self._hand_out(dispatch)
                except StoreUnavailable as exc:  # the cursor did not move; try again after a pause
                    self._store_failed(now_ms, f"reading the outbox of shard {shard}", exc)
                    return

    def _take_back(self, now_ms: int) -> None:
        with self._wakeup:
            given_back, self._given_back = self._given_back, []
            room_again, self._room_again = self._room_again, False
            ownership, self._ownership = self._ownership, []
            forwarded, self._forwarded = self._forwarded, []
        for change in ownership:
            change(now_ms)
        if forwarded:
            self._take_back_forwarded(forwarded, now_ms)
        for dispatch in given_back:
            self.outbox.spill(dispatch)
        if room_again:  # after the spills: room that came after a refusal covers it
            self.outbox.room_again()

    # -- caches

    def _prefetch(self, work: list[tuple[Command | _Transfer, Reply]], batch: _Batch) -> None:
        """Read the tick's commands' executions this engine does not hold in one store call (a networked store
        would otherwise take a round trip per new execution on this thread); those not found are new."""
        wanted = list({item.arn for item, _ in work if not isinstance(item, _Transfer) and item.arn not in self._cache
                       and not is_express(item.arn) and shard_for(item.arn, self.shard_count) in self.range_ids})
        if not wanted:
            return
        try:
            found = self.store.load_executions(wanted)
        except Exception as exc:  # as if each had failed to load: their commands fail (and come again, if retried)
            batch.unread = dict.fromkeys(wanted, exc)
            return
        for arn in wanted:
            blob = found.get(arn)
            try:
                batch.fetched[arn] = None if blob is None else self._keep(ExecutionState.from_blob(blob))
            except Exception as exc:  # a row this build cannot read fails its own commands, not the tick
                batch.unread[arn] = exc

    def _load(self, arn: str, batch: _Batch | None = None) -> ExecutionState | None:
        if is_express(arn):  # in memory only, while it runs
            run = self.express.runs.get(arn)
            return None if run is None else run.state
        state = self._cache.get(arn)
        if state is not None:
            self._cache.move_to_end(arn)
            return state
        if batch is not None and arn in batch.fetched:
            return batch.fetched[arn]
        if batch is not None and arn in batch.unread:
            raise batch.unread[arn]
        blob = self.store.load_execution(arn)
        return None if blob is None else self._keep(ExecutionState.from_blob(blob))

    def _keep(self, state: ExecutionState) -> ExecutionState:
        if state.shard_id in self.range_ids:  # another node's executions change behind this one's back
            self._remember(state)
        return state

    def _remember(self, state: ExecutionState) -> None:
        """Keep open executions hot (bounded LRU); closed ones leave memory at once."""
        if not state.is_open:
            self._cache.pop(state.arn, None)
            return
        self._cache[state.arn] = state
        self._cache.move_to_end(state.arn)
        while len(self._cache) > self.limits.cached_executions_max:
            self._cache.popitem(last=False)

    def cached_executions(self) -> int:
        return len(self._cache)

    def _revision_text(self, key: tuple[str, str]) -> str:
        revision = self.store.get_revision(*key)
        if revision is None:
            raise LookupError(f"definition revision {key} is missing")
        return revision[0]

    def _definition(self, state: ExecutionState) -> Definition:
        key = (state.state_machine_arn, state.revision_id)
        definition = self._definitions.get(key)
        if definition is None:
            revision = self.store.get_revision(*key)
            if revision is None:
                raise LookupError(f"definition revision {key} is missing")
            definition = parse_definition(revision[0], mockable=self.services.mocks is not None)
            self._definitions[key] = definition
            while len(self._definitions) > self.limits.cached_definitions_max:
                self._definitions.popitem(last=False)
        return definition


def _continues(timer_id: str) -> bool:
    return TimerKind.of(timer_id) is TimerKind.CONTINUE


def _activity_arns(store: Store) -> set[str]:
    arns: set[str] = set()
    cursor: str | None = None
    while True:
        page = store.list_activities("arn:aws:states:", 1_000, cursor)
        arns.update(record.arn for record in page.items)
        cursor = page.next_cursor
        if cursor is None:
            return arns


def answer(replies: list[tuple[Reply, object]]) -> None:
    """Resolve each reply future with its result (an exception is raised to the waiter)."""
    for reply, result in replies:
        if reply.done():  # the waiter gave up (its client went away)
            continue
        if isinstance(result, BaseException):
            reply.set_exception(result)
        else:
            reply.set_result(result)
