"""The deterministic simulator: one seed drives a virtual clock, the real engine over a real SQLite store behind named
faults, random state machines and the clients and workers that drive them; checkers then judge the run.

A run has two phases. While *active*, executions start, workers take attempts and answer them (in time, late,
twice, never), task tokens are answered, some executions are stopped, and the enabled faults fire. Then every
fault stops and time runs on (the *liveness* phase) until every acknowledged execution has closed or a bound of
virtual time has passed. ``check_all`` runs at the end. Everything random comes from ``random.Random(seed)`` and
the engine's time from the virtual clock, so a seed replays exactly; ``replay_command`` prints how.

The simulated world is an event heap ordered by virtual time: client actions and worker actions are events; the
engine ticks until it is idle after each one; when nothing is due the clock jumps to the next event or timer.
"""

from __future__ import annotations

import heapq
import itertools
import json
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..engine import decider
from ..engine.commands import (
    Command,
    CompleteAttempt,
    Heartbeat,
    StartAttempt,
    StartExecution,
    StopExecution,
)
from ..engine.core import Engine
from ..engine.execution import ExecutionState
from ..engine.limits import Limits
from ..engine.outcomes import AttemptFailed, AttemptSucceeded
from ..engine.timers import WINDOW_MS
from ..engine.tokens import InvalidToken, TaskTokens
from ..store.base import ActivityRecord, Dispatch, StateMachineRecord
from ..store.sqlite import SqliteStore
from . import workload
from .checkers import CLOSED, Ledger, all_executions, check_all
from .faults import ALL_FAULTS, Crash, Faults, FaultyStore

ACCOUNT = "123456789012"
REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/simulated"
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the virtual clock's origin
SHARDS = 4
ACTIVITIES = 3
MACHINES = 6  # the first two are children only (no nested starts of their own)
LIVENESS_MS = 6 * 3600 * 1000  # virtual time the run may take to close everything once the faults stop
TICKS_PER_STEP_MAX = 64
STEPS_DEFAULT = 400
FAULT_RATE_DEFAULT = 0.05
# Small limits, so that paging, full windows and read-backs run in every simulation.
SIM_LIMITS = Limits(tick_commands_max=64, refill_rows_max=16, timer_window_max=4096, outbox_window_max=24,
                    outbox_page_rows_max=8, inbox_commands_max=10_000, cached_executions_max=16)


@dataclass(frozen=True, slots=True)
class SimConfig:
    seed: int
    faults: frozenset[str] = frozenset(ALL_FAULTS)
    steps: int = STEPS_DEFAULT
    nodes: int = 1
    fault_rate: float = FAULT_RATE_DEFAULT
    planted: frozenset[str] = frozenset()  # test-only bugs in the engine (see Engine.planted)
    limits: str = "small"  # "small" (SIM_LIMITS: paging, full windows and re-reads in every run) or "default"


@dataclass
class SimResult:
    config: SimConfig
    injected: dict[str, int]
    violations: list[str]
    executions: int
    closed: int
    virtual_ms: int
    attempts: int = 0  # activity attempts handed to simulated workers
    tokens: int = 0  # task tokens answered from children's inputs

    def line(self) -> str:
        faults = sum(self.injected.values())
        verdict = "ok" if not self.violations else f"{len(self.violations)} VIOLATIONS"
        return (f"seed {self.config.seed}: {self.executions} executions ({self.closed} closed), {self.attempts} "
                f"attempts, {self.tokens} tokens, {faults} faults injected, {self.virtual_ms // 1000} s virtual: "
                f"{verdict}")


def replay_command(config: SimConfig) -> str:
    parts = [f"statewright simulate --seed {config.seed} --steps {config.steps}",
             f"--faults {','.join(sorted(config.faults)) or 'none'}"]
    if config.fault_rate != FAULT_RATE_DEFAULT:
        parts.append(f"--fault-rate {config.fault_rate}")
    if config.limits != "small":
        parts.append(f"--limits {config.limits}")
    if config.planted:
        parts.append(f"--plant {','.join(sorted(config.planted))}")
    return " ".join(parts)


def simulate_and_print(config: SimConfig) -> SimResult:
    """Run one seed and print its line; a violation also prints each problem and the replay command."""
    result = simulate(config)
    print(result.line(), flush=True)
    for violation in result.violations[:20]:
        print(f"  {violation}")
    if len(result.violations) > 20:
        print(f"  ... and {len(result.violations) - 20} more")
    if result.violations:
        print(f"  replay: {replay_command(config)}", flush=True)
    return result


def simulate(config: SimConfig) -> SimResult:
    if config.nodes != 1:
        raise ValueError("one node for now: several nodes come with the PostgreSQL store")
    root = Path(tempfile.mkdtemp(prefix="statewright-sim-", dir=_fast_tmp()))
    try:
        return _Run(config, root / "statewright.db").run()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _fast_tmp() -> str | None:
    """tmpfs when there is one: an fsync there is free, and the simulator's crashes are in-process anyway."""
    return "/dev/shm" if Path("/dev/shm").is_dir() else None


@dataclass
class _Attempt:
    """An activity attempt a simulated worker holds (or a task token a simulated approver holds)."""

    arn: str
    scheduled_id: int


@dataclass
class _Node:
    engine: Engine
    store: FaultyStore
    replies: list[tuple[Any, object]] = field(default_factory=list)


class _Run:
    def __init__(self, config: SimConfig, path: Path) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.faults = Faults(random.Random(config.seed ^ 0x5EED), config.faults, config.fault_rate)
        self.path = path
        self.now_ms = START_MS
        self.ledger = Ledger()
        self._events: list[tuple[int, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._incarnation = 0
        self.active = True
        self.started = 0
        self.tokens_answered: set[str] = set()
        self.children_seen: set[str] = set()  # children whose input was looked at for a token
        self.machines: list[tuple[str, workload.MachineSpec]] = []
        # A key drawn from the seed, so replays sign the same tokens (a real store draws a random one).
        self.tokens = TaskTokens({"k1": self.rng.randbytes(32)}, "k1")
        self.node = self._boot()
        self._create_machines()

    # -- the world

    def _boot(self) -> _Node:
        """A new engine process over the same database (after a crash nothing but the store survives)."""
        self._incarnation += 1
        owner = f"node-0.{self._incarnation}"
        inner = SqliteStore(self.path, SHARDS)
        store = FaultyStore(inner, self.faults, owner, self.ledger)
        limits = SIM_LIMITS if self.config.limits == "small" else Limits()
        engine = Engine(store, node_id=owner, clock=lambda: self.now_ms, limits=limits, tokens=self.tokens,
                        planted=self.config.planted)
        node = _Node(engine, store)
        engine.deliver_replies = node.replies.extend
        engine.on_dispatch = self._dispatched
        engine.probe = self.ledger
        engine.acquire_all_shards()
        return node

    def _crash(self) -> None:
        self.node.store.inner.close()
        self.node = self._boot()

    def _create_machines(self) -> None:
        store = self.node.store
        activities = [f"arn:aws:states:{REGION}:{ACCOUNT}:activity:sim-{i}" for i in range(ACTIVITIES)]
        for arn in activities:
            store.create_activity(ActivityRecord(arn, arn.rsplit(":", 1)[1], START_MS))
            self.node.engine.note_activity(arn, exists=True)
        children: list[str] = []
        for index in range(MACHINES):
            spec = workload.generate(self.rng, activities, children if index >= 2 else ())
            arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:sim-{index}"
            store.create_state_machine(StateMachineRecord(arn, f"sim-{index}", "STANDARD",
                                                          json.dumps(spec.definition), ROLE, "r1", START_MS,
                                                          START_MS, {}, {}))
            self.machines.append((arn, spec))
            if index < 2:
                children.append(arn)

    def at(self, delay_ms: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._events, (self.now_ms + max(delay_ms, 0), next(self._order), action))

    def submit(self, command: Command, on_reply: Callable[[object], None] | None = None) -> None:
        self.node.engine.submit(command, (command, self._committed(command.arn), on_reply), throttle=False)

    # -- running

    def run(self) -> SimResult:
        violations: list[str] = []
        try:
            self._drive()
            violations += self._quiescence()
            machines = [arn for arn, _ in self.machines]
            violations += check_all(self.node.store.inner, self.ledger, machines, liveness=True)
        except Exception as exc:  # the run itself broke: a finding too, with the seed that replays it
            violations.append(f"the simulation raised {type(exc).__name__}: {exc}")
        closed = sum(1 for arn in self.ledger.acknowledged if self._status(arn) in CLOSED)
        self.node.store.inner.close()
        return SimResult(self.config, dict(self.faults.injected), violations, len(self.ledger.acknowledged),
                         closed, self.now_ms - START_MS, len(self.ledger.attempts_started), len(self.tokens_answered))

    def _drive(self) -> None:
        """The active phase, then the faults stop and time runs on until every execution closed (or the bound)."""
        for step in range(self.config.steps):
            self.at(self.rng.choice((0, 10, 100, 500, 1000, 3000)), self._client_action)
            if step % 10 == 0:
                self._answer_tokens()
            self._step()
        self.active = False
        self.faults.quiet()
        deadline = self.now_ms + LIVENESS_MS
        for step in itertools.count():
            if step % 10 == 0:
                self._answer_tokens()
                if self._all_closed():
                    return
            if not self._step(deadline):
                return

    def _quiescence(self) -> list[str]:
        """With nothing left to do, the engine must go idle: no tick finds work, and it would sleep."""
        engine = self.node.engine
        for _ in range(TICKS_PER_STEP_MAX):
            if not engine.tick(self.now_ms):
                break
        else:
            return [f"the engine still finds work after {TICKS_PER_STEP_MAX} ticks with nothing left to do"]
        if engine.idle_wait_s(self.now_ms) <= 0:
            return ["the engine would spin: nothing to do, yet it would not sleep"]
        return []

    def _step(self, deadline_ms: int | None = None) -> bool:
        """Run the next event (jumping the clock to it, or to the next timer), then tick until idle."""
        next_ms = self._next_due_ms()
        if next_ms is None:
            return False
        if deadline_ms is not None and next_ms > deadline_ms:
            return False
        self.now_ms = max(self.now_ms, next_ms)
        if self.faults.fire("clock-jump", self.config.fault_rate / 5):  # a paused VM, a stepped clock
            self.now_ms += self.rng.randint(1_000, 1_800_000)
        while self._events and self._events[0][0] <= self.now_ms:
            heapq.heappop(self._events)[2]()
        if self.faults.fire("restart", self.config.fault_rate / 5):
            self._crash()
        for _ in range(TICKS_PER_STEP_MAX):
            try:
                worked = self.node.engine.tick(self.now_ms)
            except Crash:
                self._crash()
                continue
            self._deliver()
            if not worked:
                break
        return True

    def _next_due_ms(self) -> int | None:
        candidates = [self._events[0][0]] if self._events else []
        candidates += [due for window in self.node.engine.windows.values()
                       if (due := window.next_due_ms()) is not None]
        if candidates:
            return min(candidates)
        # Nothing in memory: timers beyond the windows' horizon load as time moves; step most of a window.
        return self.now_ms + WINDOW_MS // 2 if not self._all_closed() else None

    def _deliver(self) -> None:
        replies, self.node.replies[:] = list(self.node.replies), []
        for (command, before, on_reply), result in replies:
            self._check_committed(command, before, result)
            if isinstance(command, StartExecution) and isinstance(result, int):
                self.ledger.acknowledged.setdefault(command.arn, result)
            if on_reply is not None:
                on_reply(result)

    def _check_committed(self, command: Command, before: tuple[int, dict[int, bool]], result: object) -> None:
        """A reply that says a transition happened must find it committed (DESIGN.md invariant 1), and a result
        may be accepted only for an attempt that was pending (invariant 3)."""
        version, pending = before
        changed = (isinstance(command, StartExecution) and isinstance(result, int) and version == 0) or (
            isinstance(command, StartAttempt | CompleteAttempt | Heartbeat) and result is True)
        if changed and self._committed(command.arn)[0] <= version:
            self.ledger.bad_replies.append(f"{command.arn}: {type(command).__name__} answered {result!r} before "
                                             "its commit was visible")
        if isinstance(command, CompleteAttempt) and result is True and command.scheduled_id not in pending:
            self.ledger.bad_replies.append(f"{command.arn}: a result for attempt {command.scheduled_id}, which was "
                                             "not pending, was accepted")

    # -- clients

    def _client_action(self) -> None:
        roll = self.rng.random()
        if roll < 0.6 or not self.ledger.acknowledged:
            self._start_execution()
        elif roll < 0.68:
            self._stop_execution()
        else:
            self._start_execution(again=True)

    def _start_execution(self, again: bool = False) -> None:
        arn_machine, spec = self.rng.choice(self.machines[2:])
        if again and self.ledger.acknowledged:  # the same name again: idempotent or ExecutionAlreadyExists
            arn = self.rng.choice(sorted(self.ledger.acknowledged))
            blob = self.node.store.inner.load_execution(arn)
            if blob is None:
                return  # acknowledged but missing: the checkers report it
            text = orjson.loads(blob)["input"]
            name = arn.rsplit(":", 1)[1]
            arn_machine = arn.rsplit(":", 1)[0].replace(":execution:", ":stateMachine:")
        else:
            self.started += 1
            name = f"e{self.started}"
            arn = arn_machine.replace(":stateMachine:", ":execution:") + f":{name}"
            text = json.dumps(workload.generate_input(self.rng, spec))
        self.submit(StartExecution(arn, arn_machine, name, "r1", ROLE, text))

    def _stop_execution(self) -> None:
        arn = self.rng.choice(sorted(self.ledger.acknowledged))
        self.submit(StopExecution(arn, "Sim.Stopped", "stopped by the simulated client"))

    def _answer_tokens(self) -> None:
        """Task tokens travel in the input of waitForTaskToken children: an approver answers each once found."""
        for machine_arn, _ in self.machines[:2]:
            for arn in all_executions(self.node.store.inner, machine_arn):
                if arn in self.children_seen:
                    continue
                self.children_seen.add(arn)
                data = orjson.loads(orjson.loads(self.node.store.inner.load_execution(arn))["input"])
                token = data.get("token") if isinstance(data, dict) else None
                if not isinstance(token, str):
                    continue
                self.tokens_answered.add(arn)
                try:
                    claims = self.node.engine.tokens.verify(token)
                except InvalidToken:
                    self.ledger.bad_replies.append(f"{arn}: carries a token that does not verify")
                    continue
                self._follow(_Attempt(claims.execution_arn, claims.scheduled_id), 300, None)

    # -- workers

    def _dispatched(self, dispatch: Dispatch) -> None:
        """An activity task reached matching (engine thread): a worker polls for it soon."""
        if dispatch.payload["kind"] != "activity":
            return
        incarnation = self._incarnation
        self.at(self.rng.choice((0, 0, 50, 1000)), lambda: self._take(dispatch, incarnation))

    def _take(self, dispatch: Dispatch, incarnation: int) -> None:
        if incarnation != self._incarnation:
            return  # the task was in the memory of a process that died: only the outbox row brings it back
        attempt = _Attempt(dispatch.execution_arn, dispatch.payload["scheduled_id"])

        def started(result: object) -> None:
            if result is True:
                self.ledger.started_attempt(attempt.arn, attempt.scheduled_id)
                timeout_s, heartbeat_s = self._deadlines(attempt)
                self._follow(attempt, timeout_s, heartbeat_s)

        self.submit(StartAttempt(attempt.arn, attempt.scheduled_id, "sim-worker"), started)
        if self.faults.fire("duplicate-result"):  # the same task reached two pollers
            self.submit(StartAttempt(attempt.arn, attempt.scheduled_id, "sim-worker-2"), started)

    def _deadlines(self, attempt: _Attempt) -> tuple[int, int | None]:
        (event,) = self.node.store.inner.read_history(attempt.arn, attempt.scheduled_id - 1, 1, False)
        details = event.get("activityScheduledEventDetails") or event.get("taskScheduledEventDetails") or {}
        return details.get("timeoutInSeconds", 300), details.get("heartbeatInSeconds")

    def _follow(self, attempt: _Attempt, timeout_s: int, heartbeat_s: int | None) -> None:
        """Replay one worker plan against the attempt, with the client faults on its messages."""
        plan = workload.worker_plan(self.rng, timeout_s, heartbeat_s)
        if self.faults.fire("worker-dies"):
            plan = workload.WorkerPlan("die", ())
        for action in plan.actions:
            delay = action.at_ms
            if self.faults.fire("late-result"):
                delay += self.rng.randint(1_000, 600_000)
            if self.faults.fire("reordered-results"):
                delay = max(0, delay - self.rng.randint(0, 5_000))
            self.at(delay, lambda action=action: self._send(attempt, action))
            if self.faults.fire("duplicate-result"):
                self.at(delay + self.rng.randint(0, 2_000), lambda action=action: self._send(attempt, action))

    def _send(self, attempt: _Attempt, action: workload.WorkerAction) -> None:
        if isinstance(action, workload.SendTaskHeartbeat):
            self.submit(Heartbeat(attempt.arn, attempt.scheduled_id))
        elif isinstance(action, workload.SendTaskSuccess):
            self.submit(CompleteAttempt(attempt.arn, attempt.scheduled_id, AttemptSucceeded(json.dumps(action.output))))
        else:
            self.submit(CompleteAttempt(attempt.arn, attempt.scheduled_id,
                                        AttemptFailed(action.error, action.cause)))

    # -- reading the store

    def _committed(self, arn: str) -> tuple[int, dict[int, bool]]:
        """The execution's committed version and pending attempts (0 and none before it exists)."""
        blob = self.node.store.inner.load_execution(arn)
        if blob is None:
            return 0, {}
        state = ExecutionState.from_blob(blob)
        return state.version, decider.pending_attempts(state)

    def _status(self, arn: str) -> str | None:
        blob = self.node.store.inner.load_execution(arn)
        return None if blob is None else orjson.loads(blob)["status"]

    def _all_closed(self) -> bool:
        """No execution is RUNNING (children and starts whose reply was lost included)."""
        inner = self.node.store.inner
        return not any(inner.list_executions(arn, "RUNNING", 1, None).items for arn, _ in self.machines)
