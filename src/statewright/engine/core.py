"""The engine core: owns shards, applies commands one execution at a time, and commits before acting.

``tick(now_ms)`` is the whole engine step, synchronous and bounded: fire due timers, take queued commands, run
each through the decider, commit every resulting write in one store transaction (group commit), then (only
then) reply to callers, cache the new states and hand new timers to the timer windows. ``Engine.start`` runs
ticks on one thread; the API's async handlers submit commands and await their reply futures.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..asl.definition import Definition, parse_definition
from ..metrics import Metrics
from ..store.base import CommitOutcomeUnknown, Dispatch, ExecutionWrite, Store
from . import decider
from .commands import (
    AckDispatch,
    Command,
    CompleteAttempt,
    EngineUnavailable,
    ExecutionAlreadyExists,
    ExecutionDoesNotExist,
    FireTimer,
    Heartbeat,
    StartAttempt,
    StartExecution,
    StopExecution,
    TaskNotPending,
)
from .execution import ExecutionState
from .timers import TimerWindow
from .tokens import TaskTokens

log = logging.getLogger("statewright.engine")

MAX_COMMANDS_PER_TICK = 2_000
LEASE_MS = 10_000


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def shard_for(execution_arn: str, shard_count: int) -> int:
    """The shard an execution lives on: a stable hash of its ARN (account, state machine and name)."""
    return zlib.crc32(execution_arn.encode()) % shard_count


@dataclass(slots=True)
class _Batch:
    commands: list[Command] = field(default_factory=list)
    writes: list[ExecutionWrite] = field(default_factory=list)
    states: list[ExecutionState] = field(default_factory=list)
    replies: list[tuple[Command, object]] = field(default_factory=list)  # (command, result) after the commit
    touched: set[str] = field(default_factory=set)


class Engine:
    def __init__(self, store: Store, *, node_id: str = "local", clock: Callable[[], int] = wall_clock_ms,
                 cache_size: int = 10_000, tokens: TaskTokens | None = None) -> None:
        self.store = store
        self.tokens = tokens or TaskTokens.load(store)
        # The ARNs of the activities that exist, kept current by ``note_activity``: the decider reads no store.
        self.activities: set[str] = _activity_arns(store)
        self.services = decider.Services(self.tokens.mint, self.activities)
        # Called, on the engine thread, with every dispatch once its commit has landed (and with the outbox's
        # pending dispatches when the engine starts); it must hand them on without blocking.
        self.on_dispatch: Callable[[Dispatch], None] = lambda dispatch: None
        # Called on the engine thread once per tick with every (command, result) whose commit landed (or that
        # needed none). The default resolves thread-safe futures; an event loop passes its own replies back
        # in one hop instead of one per command.
        self.deliver_replies: Callable[[list[tuple[Command, object]]], None] = answer
        self.node_id = node_id
        self.clock = clock
        self.shard_count = store.shard_count()
        self.range_ids: dict[int, int] = {}
        self.windows: dict[int, TimerWindow] = {}
        self._cache: OrderedDict[str, ExecutionState] = OrderedDict()
        self._cache_size = cache_size
        self._definitions: OrderedDict[tuple[str, str], Definition] = OrderedDict()
        self._inbox: deque[Command] = deque()
        self._wakeup = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.metrics = Metrics(lambda: self.windows, clock)

    def note_activity(self, arn: str, exists: bool) -> None:
        """CreateActivity or DeleteActivity committed: Task states see the change from the next command on."""
        if exists:
            self.activities.add(arn)
        else:
            self.activities.discard(arn)

    # -- ownership

    def acquire_all_shards(self) -> None:
        """Single node: take every shard, fencing out any earlier owner, and load their timer windows."""
        now_ms = self.clock()
        for shard in range(self.shard_count):
            self.range_ids[shard] = self.store.acquire_shard(shard, self.node_id, now_ms + LEASE_MS)
            self.windows[shard] = TimerWindow(shard)

    # -- running

    def start(self) -> None:
        self.acquire_all_shards()
        for shard in self.range_ids:
            pending = self.store.pending_dispatches(shard)
            self.metrics.outbox.inc(len(pending))
            for dispatch in pending:
                self.on_dispatch(dispatch)
        self._thread = threading.Thread(target=self._run, name="statewright-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._wakeup:
            self._stopping = True
            self._wakeup.notify()
        if self._thread is not None:
            self._thread.join()

    def submit(self, command: Command) -> None:
        with self._wakeup:
            self._inbox.append(command)
            self._wakeup.notify()

    def _run(self) -> None:
        while True:
            with self._wakeup:
                if self._stopping:
                    return
                if not self._inbox:
                    self._wakeup.wait(self._idle_wait_s(self.clock()))
                if self._stopping:
                    return
            try:
                self.tick(self.clock())
            except Exception:  # a bug must not stop the engine; the failed commands were answered
                log.exception("engine tick failed")

    def _idle_wait_s(self, now_ms: int) -> float:
        wait_ms = 1_000
        for window in self.windows.values():
            due = window.next_due_ms()
            if due is not None:
                wait_ms = min(wait_ms, due - now_ms)
        return max(wait_ms, 0) / 1000

    def tick(self, now_ms: int) -> int:
        """One bounded engine step at time ``now_ms``; returns how many commands it handled."""
        self.metrics.at_tick()
        commands: list[Command] = []
        for window in self.windows.values():
            window.refill(now_ms, self.store.due_timers)
            for _, arn, timer_id in window.pop_due(now_ms, MAX_COMMANDS_PER_TICK - len(commands)):
                commands.append(FireTimer(arn, timer_id))
        with self._wakeup:
            while self._inbox and len(commands) < MAX_COMMANDS_PER_TICK:
                commands.append(self._inbox.popleft())
        if not commands:
            return 0
        batch = _Batch()
        deferred: list[Command] = []
        for command in commands:
            if command.arn in batch.touched:
                deferred.append(command)  # one transition per execution per commit keeps them in order
                continue
            started = time.perf_counter()
            try:
                self._apply(command, batch, now_ms)
            except Exception as exc:
                log.exception("applying %s failed", type(command).__name__)
                batch.replies.append((command, exc))
            self.metrics.apply_seconds.observe(time.perf_counter() - started)
        if batch.writes:
            self._commit(batch)
        answers = [(command, result) for command, result in batch.replies if command.reply is not None]
        if answers:
            self.deliver_replies(answers)
        if deferred:
            with self._wakeup:
                self._inbox.extendleft(reversed(deferred))
        return len(commands)

    # -- applying one command

    def _apply(self, command: Command, batch: _Batch, now_ms: int) -> None:
        shard = shard_for(command.arn, self.shard_count)
        if shard not in self.range_ids:
            raise EngineUnavailable(f"this node does not own shard {shard}")
        current = self._load(command.arn)
        if isinstance(command, StartExecution):
            if current is not None:
                if current.is_open and current.input == command.input:
                    batch.replies.append((command, current.start_ms))  # idempotent start
                else:
                    batch.replies.append((command, ExecutionAlreadyExists(command.arn)))
                return
            fresh = ExecutionState(command.arn, command.state_machine_arn, command.name, command.revision_id,
                                   command.role_arn, command.input, now_ms, shard, parent=command.parent)
            decision = decider.start(fresh, self._definition(fresh), now_ms, self.services)
            self._stage(batch, command, decision, 0, now_ms)
        elif isinstance(command, StartAttempt | CompleteAttempt | Heartbeat):
            decision = None
            if current is not None:
                definition = self._definition(current)
                if isinstance(command, StartAttempt):
                    decision = decider.start_attempt(current, definition, command.scheduled_id, command.worker_name,
                                                     now_ms)
                elif isinstance(command, CompleteAttempt):
                    decision = decider.complete_attempt(current, definition, command.scheduled_id, command.result,
                                                        now_ms, self.services)
                else:
                    decision = decider.heartbeat(current, definition, command.scheduled_id, now_ms)
            if decision is None:
                batch.replies.append((command, TaskNotPending(command.arn)))
                return
            self._stage(batch, command, decision, current.version, now_ms)
        elif isinstance(command, AckDispatch):
            if current is not None:
                self._stage(batch, command, decider.ack_dispatch(current, command.dispatch_id), current.version,
                            now_ms)
            else:
                batch.replies.append((command, True))
        elif isinstance(command, StopExecution):
            if current is None:
                batch.replies.append((command, ExecutionDoesNotExist(command.arn)))
                return
            decision = decider.stop(current, command.error, command.cause, now_ms)
            if decision is None:
                batch.replies.append((command, current.stop_ms))
                return
            self._stage(batch, command, decision, current.version, now_ms)
        else:
            if current is None:
                return
            decision = decider.fire_timer(current, self._definition(current), command.timer_id, now_ms,
                                          self.services)
            if decision is not None:
                self.metrics.timer_fired(current.timers.get(command.timer_id, now_ms), now_ms)
                self._stage(batch, command, decision, current.version, now_ms)

    def _stage(self, batch: _Batch, command: Command, decision: decider.Decision, expected_version: int,
               now_ms: int) -> None:
        state = decision.state
        state.version = expected_version + 1
        batch.touched.add(state.arn)
        batch.commands.append(command)
        batch.states.append(state)
        batch.writes.append(ExecutionWrite(
            state.shard_id, state.arn, state.state_machine_arn, state.name, state.status, state.start_ms,
            state.stop_ms, expected_version, state.version, state.to_blob(), decision.events,
            decision.timers_added, decision.timers_removed, decision.dispatches_added, decision.dispatches_removed))
        if isinstance(command, StartExecution):
            reply: object = state.start_ms
        elif isinstance(command, StopExecution):
            reply = now_ms
        else:
            reply = True
        batch.replies.append((command, reply))

    def _commit(self, batch: _Batch) -> None:
        started = time.perf_counter()
        try:
            result = self.store.commit(batch.writes, self.range_ids)
        except CommitOutcomeUnknown as exc:
            log.error("commit outcome unknown (%s); dropping cached state of %d executions", exc, len(batch.writes))
            failed = EngineUnavailable("the commit did not complete; retry the request")
            for state in batch.states:
                self._cache.pop(state.arn, None)
            staged = {id(command) for command in batch.commands}
            batch.replies = [(command, failed if id(command) in staged else reply)
                             for command, reply in batch.replies]
            return
        self.metrics.committed(batch.writes, result, time.perf_counter() - started)
        for shard in result.lost_shards:
            log.error("shard %d was taken by another node; no longer serving it", shard)
            self.range_ids.pop(shard, None)
            self.windows.pop(shard).forget()
        failures: dict[int, Exception] = {}
        for index, (write, state) in enumerate(zip(batch.writes, batch.states, strict=True)):
            if not result.committed(index, write):
                self._cache.pop(state.arn, None)
                failures[id(batch.commands[index])] = EngineUnavailable("the execution changed concurrently; retry")
                continue
            self._remember(state)
            window = self.windows[state.shard_id]
            for timer_id, fire_at_ms in write.timers_added:
                window.offer(fire_at_ms, state.arn, timer_id)
            for dispatch_id, payload in write.dispatches_added:
                self.on_dispatch(Dispatch(state.shard_id, state.arn, dispatch_id, payload))
        if failures:
            batch.replies = [(command, failures.get(id(command), reply)) for command, reply in batch.replies]

    # -- caches

    def _load(self, arn: str) -> ExecutionState | None:
        state = self._cache.get(arn)
        if state is not None:
            self._cache.move_to_end(arn)
            return state
        blob = self.store.load_execution(arn)
        if blob is None:
            return None
        state = ExecutionState.from_blob(blob)
        self._remember(state)
        return state

    def _remember(self, state: ExecutionState) -> None:
        """Keep open executions hot (bounded LRU); closed ones leave memory at once."""
        if not state.is_open:
            self._cache.pop(state.arn, None)
            return
        self._cache[state.arn] = state
        self._cache.move_to_end(state.arn)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def cached_executions(self) -> int:
        return len(self._cache)

    def _definition(self, state: ExecutionState) -> Definition:
        key = (state.state_machine_arn, state.revision_id)
        definition = self._definitions.get(key)
        if definition is None:
            revision = self.store.get_revision(*key)
            if revision is None:
                raise LookupError(f"definition revision {key} is missing")
            definition = parse_definition(revision[0])
            self._definitions[key] = definition
            while len(self._definitions) > 1_000:
                self._definitions.popitem(last=False)
        return definition


def _activity_arns(store: Store) -> set[str]:
    arns: set[str] = set()
    cursor: str | None = None
    while True:
        page = store.list_activities("arn:aws:states:", 1_000, cursor)
        arns.update(record.arn for record in page.items)
        cursor = page.next_cursor
        if cursor is None:
            return arns


def answer(replies: list[tuple[Command, object]]) -> None:
    """Resolve each command's reply future with its result (an exception is raised to the waiter)."""
    for command, result in replies:
        reply = command.reply
        if reply.done():  # the waiter gave up (its client went away)
            continue
        if isinstance(result, BaseException):
            reply.set_exception(result)
        else:
            reply.set_result(result)
