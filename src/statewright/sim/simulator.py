"""The deterministic simulator: one seed drives a virtual clock, the real engine over a real SQLite store behind named
faults, random state machines and the clients and workers that drive them; checkers then judge the run.

A run has two phases. While *active*, executions start, workers take attempts and answer them (in time, late,
twice, never), task tokens are answered, some executions are stopped, bursts of executions whose Waits end in the
same millisecond come with a client's call made just then (the "burst" fault: each tick must give waiting commands
their share, ``Ledger.gathered``), and the enabled faults fire. Then every
fault stops and time runs on (the *liveness* phase) until every acknowledged execution has closed or a bound of
virtual time has passed. ``check_all`` runs at the end. Everything random comes from ``random.Random(seed)`` and
the engine's time from the virtual clock, so a seed replays exactly; ``replay_command`` prints how.

The simulated world is an event heap ordered by virtual time: client actions and worker actions are events; the
engine ticks until it is idle after each one; when nothing is due the clock jumps to the next event or timer.

With ``nodes`` > 1, that many engines share the store, each with its own store handle and its shard membership
(cluster/membership.py) stepped on the virtual clock. A client calls a random node, which routes the command to
the shard's owner as it last read it (a stale view sends it to the wrong node, which refuses it); engine-to-engine
stages cross nodes through ``Engine.forward`` the same way. Half of the activity tasks are also claimed from the
store by a worker polling a random node (``Store.claim_activity_task``), racing the owner's own worker: the owner's
StartAttempt must give the attempt to one of them. The cluster faults pause a node past its lease (it
wakes in the middle of a tick, with its old clock reading, and commits), steal a lease mid-tick, cut one node off
from the store, make a node leave gracefully and come back, and lose or duplicate forwarded calls. After the
liveness phase every shard must have exactly one owner.

Each node also runs the retention sweep (engine/retention.py) every ``SWEEP_MS`` of virtual time, with retention,
compaction and the redrive window shortened to fit a run (``RETENTION``, ``REDRIVABLE_MS``), through its faulty
store: a compacted history must read back exactly as it was committed (checked after every compaction and at the
end), no execution may be deleted before its retention ended, and redrives of compacted executions are checked as
every redrive is.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import random
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from .. import decider
from ..asl.handling import TASK_FAILED
from ..cluster.membership import ASSIGNMENT_RULE, EngineHooks, Membership, assignment, rule_in_use
from ..decider.execution import ExecutionState
from ..decider.outcomes import AttemptFailed, AttemptPolled, AttemptSubmitted, AttemptSucceeded
from ..engine.commands import (
    AckDispatch,
    Command,
    CompleteAttempt,
    EngineUnavailable,
    Heartbeat,
    InboxFull,
    RedriveExecution,
    StartAttempt,
    StartExecution,
    StopExecution,
)
from ..engine.edges import Edges
from ..engine.engine import Engine
from ..engine.limits import Limits
from ..engine.retention import Sweep
from ..engine.shards import shard_for
from ..engine.timers import WINDOW_MS
from ..engine.tokens import InvalidToken, TaskTokens
from ..store.base import STORAGE_FORMAT, ActivityRecord, Dispatch, StateMachineRecord, StoreUnavailable
from ..store.payloads import Histories
from ..store.sqlite import SqliteStore
from . import workload
from .checkers import CLOSED, Ledger, all_executions, check_all, read_history, readback_problems
from .config import (
    ACCOUNT,
    ACK_RETRY_MS,
    ACTIVITIES,
    BURST_ACCOUNT,
    BURST_DEFINITION,
    BURST_EXECUTIONS,
    BURST_WAIT_S,
    BURSTS_MAX,
    CLAIM_MS,
    CLAIMED_ELSEWHERE,
    FORWARD_TIMEOUT_MS,
    LEASES,
    LIVENESS_MS,
    MACHINES,
    REDRIVABLE,
    REDRIVABLE_MS,
    REGION,
    RETENTION,
    ROLE,
    SETTLE_MS,
    SHARDS,
    SIM_LIMITS,
    START_MS,
    SWEEP_MS,
    SWEEPS_PER_STEP_MAX,
    TICKS_PER_STEP_MAX,
    TRANSITION_BUDGET,
    SimConfig,
    SimResult,
    replay_command,
)
from .faults import Crash, Faults, FaultyStore
from .lane import SimulatedLane
from .nodes import Collected, SimNode
from .planted import PlantedEngine, PlantedSweep


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
    if config.nodes < 1:
        raise ValueError(f"nodes must be at least 1, not {config.nodes}")
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


class _Run:
    def __init__(self, config: SimConfig, path: Path) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.faults = Faults(random.Random(config.seed ^ 0x5EED), config.faults, config.fault_rate)
        # A rolling upgrade: a node's first process may be of the release before (the oldest assignment rule), and
        # so may each process started after one of those (half the time: a restart rather than an upgrade); once
        # upgraded it stays so. Weights vary. Drawn apart from ``rng``: the seeds' workloads stay as they were.
        self.releases = random.Random(config.seed ^ 0x0AB6)
        self._older: dict[int, bool] = {}  # node index -> whether its latest process is of the release before
        self.path = path
        self.now_ms = START_MS
        self.ledger = Ledger()
        self._mid_tick: list[tuple[SimNode, Command, object]] = []  # client calls held for the middle of a tick
        self.ledger.mid_tick = self._arrive_mid_tick
        self._events: list[tuple[int, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._incarnation = 0
        self.active = True
        self.started = 0
        self.redrives = 0  # asked for
        self.redrives_done = 0
        self.compacted_redrives_done = 0
        self.compacted_asked: set[RedriveExecution] = set()  # redrives asked of executions with compacted histories
        self.laned = 0  # steps sent to the heavy lane
        self.tokens_answered: set[str] = set()
        self.children_seen: set[str] = set()  # children whose input was looked at for a token
        self.machines: list[tuple[str, workload.MachineSpec]] = []
        self.burst_machine = f"arn:aws:states:{REGION}:{BURST_ACCOUNT}:stateMachine:sim-burst"
        self.bursts = 0
        # A key drawn from the seed, so replays sign the same tokens (a real store draws a random one).
        self.tokens = TaskTokens({"k1": self.rng.randbytes(32)}, "k1")
        self.cluster = config.nodes > 1
        self.reader = SqliteStore(path, SHARDS)  # the checkers' and clients' view of the store (never faulty)
        self.histories = Histories(self.reader, self.reader.payloads())  # the payload store every node shares
        self.ledger.retention_ms = RETENTION.retention_ms
        self.nodes = [self._boot(index) for index in range(config.nodes)]
        self._create_machines()

    # -- the world

    def _boot(self, index: int) -> SimNode:
        """A new engine process over the same database (after a crash nothing but the store survives)."""
        self._incarnation += 1
        owner = f"node-{index}.{self._incarnation}"
        inner = SqliteStore(self.path, SHARDS)
        limits = SIM_LIMITS if self.config.limits == "small" else Limits()
        holder: list[SimNode] = []
        store = FaultyStore(inner, self.faults, owner, self.ledger, cut_off=lambda: self._cut_off(holder[0]),
                            clock=lambda: self.now_ms, cluster=self.cluster)
        self.ledger.states_max = limits.apply_states_max
        self.ledger.status_events = True
        planted = self.config.planted
        edges = Edges()  # its edges lead to the node, made once the engine is
        settings = dict(node_id=owner, edges=edges, clock=lambda: self.now_ms, limits=limits, tokens=self.tokens,
                        evaluation_clock=None, status_events=True, redrivable_ms=REDRIVABLE_MS,
                        transition_rate=(lambda region, account: TRANSITION_BUDGET) if self.config.seed % 2 else None,
                        heavy_lane=lambda services, _, landed: SimulatedLane(self, services, landed))
        engine = PlantedEngine(store, planted=planted, **settings) if planted else Engine(store, **settings)
        sweep = PlantedSweep(engine.histories, RETENTION, planted=planted) if planted else \
            Sweep(engine.histories, RETENTION)
        node = SimNode(index, engine, store, sweep=sweep, next_sweep_ms=self.now_ms + SWEEP_MS)
        holder.append(node)
        edges.replies = self._replied(node)
        edges.dispatch = lambda dispatch: self._dispatched(node, dispatch)
        engine.probe = self.ledger
        if not self.cluster:
            engine.acquire_all_shards()
            return node
        edges.forward = lambda commands: self._forward(node, commands)
        older = self._older.setdefault(index, True) and self.releases.random() < 0.5
        self._older[index] = older
        node.membership = Membership(store, node.name, f"sim://{node.name}",
                                     EngineHooks(engine.gain_shard, engine.renewed, engine.drop_shards), LEASES,
                                     weight=self.releases.choice((1, 1, 2, 3)), rule=1 if older else ASSIGNMENT_RULE,
                                     storage_format=1 if older else STORAGE_FORMAT)
        node.next_step_ms = self.now_ms
        return node

    def _cut_off(self, node: SimNode) -> bool:
        return self.now_ms < node.cut_off_until_ms

    def _crash(self, node: SimNode) -> None:
        node.store.inner.close()
        self.ledger.waiting.pop(node.engine, None)  # what its inbox held is gone
        self.ledger.waiting_at_tick.pop(node.engine, None)
        fresh = self._boot(node.index)
        self.nodes[node.index] = fresh

    def _create_machines(self) -> None:
        store = self.reader
        store.create_state_machine(StateMachineRecord(self.burst_machine, "sim-burst", "STANDARD",
                                                      json.dumps(BURST_DEFINITION), ROLE, "r1", START_MS, START_MS,
                                                      {}, {}))
        activities = [f"arn:aws:states:{REGION}:{ACCOUNT}:activity:sim-{i}" for i in range(ACTIVITIES)]
        for arn in activities:
            store.create_activity(ActivityRecord(arn, arn.rsplit(":", 1)[1], START_MS))
            for node in self.nodes:
                node.engine.note_activity(arn, exists=True)
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

    def submit(self, command: Command, on_reply: Callable[[object], None] | None = None, *, api: bool = True) -> None:
        """A client's call (``api``) or an integration's: to the one node, or to a random node that routes it to the
        shard's owner."""
        reply = (command, self._committed(command.arn), on_reply)
        if not self.cluster:
            self._hand(self.nodes[0], command, reply, api)
            return
        entry = self.rng.choice([node for node in self.nodes if node.up(self.now_ms)] or self.nodes)
        target = self._route(entry, command.arn)
        if target is None or self.faults.fire("forward-lost"):
            return  # the caller times out (and a worker's attempt times out in the engine)
        self._hand(target, command, reply, api)
        if self.faults.fire("forward-duplicated"):
            self._hand(target, command, (command, reply[1], None), api)

    def _hand(self, node: SimNode, command: Command, reply: object, api: bool) -> None:
        """Submit to the node's engine as the API does (throttled) or an integration (not); the ledger counts what
        waits for the fairness checker. A client's call may be held for the middle of the node's next tick
        ("call-mid-tick"), as a caller arriving while the engine thread applies."""
        if api and self.faults.fire("call-mid-tick"):
            self._mid_tick.append((node, command, reply))
            return
        self._submit(node, command, reply, api)

    def _submit(self, node: SimNode, command: Command, reply: object, api: bool) -> None:
        try:
            node.engine.submit(command, reply, throttle=api)
        except InboxFull:
            return  # throttled: the caller gives up (and a worker's attempt times out in the engine)
        kind = (0 if isinstance(command, StartExecution | StopExecution | RedriveExecution) else 1) if api else 2
        self.ledger.waiting.setdefault(node.engine, [0, 0, 0])[kind] += 1

    def _arrive_mid_tick(self) -> None:
        """The calls held for the middle of a tick arrive (while one applies, or after one when none had work), each
        with the committed state it is checked against read as it arrives. A call for a node that crashed since is
        lost, as its caller's connection was."""
        held, self._mid_tick = self._mid_tick, []
        for node, command, (_, before, on_reply) in held:
            if self.nodes[node.index] is not node:
                continue
            self._submit(node, command, (command, None if before is None else self._committed(command.arn),
                                         on_reply), api=True)

    def _route(self, entry: SimNode, arn: str) -> SimNode | None:
        """Where ``entry`` sends a command for ``arn``: itself if it serves the shard, else the owner it last read
        (a stale view picks a node that refuses). None: it knows no owner, or that node does not answer."""
        shard = shard_for(arn, SHARDS)
        if entry.engine.owns(shard) or entry.membership is None:
            return entry
        address = entry.membership.owner_address(shard)
        target = next((node for node in self.nodes if f"sim://{node.name}" == address), None)
        return target if target is not None and target.up(self.now_ms) else None

    def _forward(self, origin: SimNode, commands: list[Command]) -> Future:
        """``Engine.forward`` of a node: the stage goes to its execution's owner; the future resolves with the
        replies once that node committed them (or fails later, when the call was lost)."""
        future: Future = Future()
        target = self._route(origin, commands[0].arn)
        if target is None or self.faults.fire("forward-lost"):
            self.at(FORWARD_TIMEOUT_MS, lambda: future.set_exception(EngineUnavailable("the call timed out")))
            return future
        collected = Collected(future, [None] * len(commands), len(commands))
        for index, command in enumerate(commands):
            self._hand(target, command, (command, None, (collected, index)), api=False)
        if self.faults.fire("forward-duplicated"):  # a retry of a call that did land: its replies go nowhere
            for command in commands:
                self._hand(target, command, (command, None, None), api=False)
        return future

    # -- running

    def run(self) -> SimResult:
        violations: list[str] = []
        try:
            self._drive()
            violations += self._quiescence()
            machines = [arn for arn, _ in self.machines] + [self.burst_machine]
            violations += check_all(self.histories, self.ledger, machines, liveness=True)
            if self.cluster:
                violations += self._one_owner_per_shard()
            violations += self._age(machines)
        except Exception as exc:  # the run itself broke: a finding too, with the seed that replays it
            violations.append(f"the simulation raised {type(exc).__name__}: {exc}")
        ledger = self.ledger
        closed = sum(1 for arn in ledger.acknowledged if arn in ledger.expired or self._status(arn) in CLOSED)
        for node in self.nodes:
            node.store.inner.close()
        self.reader.close()
        return SimResult(self.config, dict(self.faults.injected), violations, len(ledger.acknowledged), closed,
                         self.now_ms - START_MS, len(ledger.attempts_started), len(self.tokens_answered),
                         self.redrives_done, ledger.compactions, len(ledger.expired.keys() & ledger.acknowledged),
                         self.compacted_redrives_done, self.laned, ledger.map_runs, ledger.callers_first_ticks,
                         ledger.late_calls)

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
                if self._all_closed() and self._outbox_empty():
                    break
            if not self._step(deadline):
                break
        if self.cluster:  # the membership settles once nothing fails any more
            settle = self.now_ms + SETTLE_MS
            while self._step(settle, keep_going=True):
                pass

    def _age(self, machines: list[str]) -> list[str]:
        """Everything closed and was checked: time runs on past retention, so the sweep compacts every history left
        (each read back as committed), then deletes every execution, none before its retention ended."""
        ledger = self.ledger
        seen = len(ledger.compaction_problems), len(ledger.early_expiries)
        deadline = self.now_ms + RETENTION.retention_ms + WINDOW_MS
        while self._step(deadline, keep_going=True):
            pass
        left = [arn for machine in machines for arn in all_executions(self.reader, machine)]
        return [*ledger.compaction_problems[seen[0]:], *ledger.early_expiries[seen[1]:],
                *(f"{arn}: still in the store after its retention ended" for arn in left)]

    def _quiescence(self) -> list[str]:
        """With nothing left to do, each engine must go idle: no tick finds work, and it would sleep."""
        for node in self.nodes:
            engine = node.engine
            for _ in range(TICKS_PER_STEP_MAX):
                if not engine.tick(self.now_ms):
                    break
            else:
                return [f"{node.name} still finds work after {TICKS_PER_STEP_MAX} ticks with nothing left to do"]
            if engine.idle_wait_s(self.now_ms) <= 0:
                return [f"{node.name} would spin: nothing to do, yet it would not sleep"]
        return []

    def _one_owner_per_shard(self) -> list[str]:
        """Once the faults stopped and the membership settled, each shard is served by exactly one node, the one
        its lease names, at the lease's range id, and the one the assignment rule in use (the oldest a live node
        speaks) gives it, with the live nodes' weights."""
        problems = []
        leases = {lease.shard_id: lease for lease in self.reader.shard_leases()}
        live = [node for node in self.reader.nodes() if node.lease_until_ms > self.now_ms]
        owners = assignment(SHARDS, [node.node_id for node in live], {node.node_id: node.weight for node in live},
                            rule_in_use(node.rule for node in live))
        problems += [f"shard {shard}: leased to {leases[shard].owner}, assigned to {owner} by rule "
                     f"{rule_in_use(node.rule for node in live)}" for shard, owner in enumerate(owners)
                     if leases[shard].owner != owner]
        for shard in range(SHARDS):
            serving = [node for node in self.nodes if node.engine.owns(shard)]
            lease = leases[shard]
            if len(serving) != 1:
                problems.append(f"shard {shard}: served by {[node.name for node in serving]} after the faults stopped")
            elif serving[0].name != lease.owner or serving[0].engine.range_ids[shard] != lease.range_id:
                problems.append(f"shard {shard}: served by {serving[0].name} at range id "
                                f"{serving[0].engine.range_ids[shard]}, leased to {lease.owner} at {lease.range_id}")
        return problems

    def _step(self, deadline_ms: int | None = None, keep_going: bool = False) -> bool:
        """Run the next event (jumping the clock to it, or to the next timer), then tick until idle."""
        next_ms = self._next_due_ms(keep_going)
        if next_ms is None:
            return False
        if deadline_ms is not None and next_ms > deadline_ms:
            return False
        self.now_ms = max(self.now_ms, next_ms)
        if self.faults.fire("clock-jump", self.config.fault_rate / 5):  # a paused VM, a stepped clock
            self.now_ms += self.rng.randint(1_000, 1_800_000)
        for node in list(self.nodes):  # as a server sweeps while time passes, before what happens at its end
            self._sweep(node)
        while self._events and self._events[0][0] <= self.now_ms:
            heapq.heappop(self._events)[2]()
        if self.faults.fire("restart", self.config.fault_rate / 5):
            self._crash(self.rng.choice(self.nodes))
        if self.cluster:
            self._cluster_faults()
            self._step_memberships()
        for _ in range(TICKS_PER_STEP_MAX):
            worked = False
            for node in list(self.nodes):
                worked = self._tick(node) or worked
            if not worked:
                break
        return True

    def _sweep(self, node: SimNode) -> None:
        """The node's retention sweep, when due, over the shards it serves; then every history it compacted must
        read back as committed."""
        if not node.running(self.now_ms) or node.paused_at_ms is not None or self.now_ms < node.next_sweep_ms:
            return
        node.next_sweep_ms = self.now_ms + SWEEP_MS
        assert node.sweep is not None
        for _ in range(SWEEPS_PER_STEP_MAX):
            try:
                swept = node.sweep(node.engine.range_ids.copy(), self.now_ms)
            except StoreUnavailable:
                return
            except Crash:
                self._crash(node)
                return
            for execution in swept.compacted:
                self.ledger.compaction_problems += readback_problems(f"{execution.arn} (compacted)", read_history(
                    self.histories, execution.arn), self.ledger.committed[execution.arn])
            if not swept.busy:
                return

    def _tick(self, node: SimNode) -> bool:
        if not node.running(self.now_ms):
            return False
        now_ms = self.now_ms
        if node.paused_at_ms is not None:  # woken in the middle of the tick it was paused in: its clock is old
            now_ms, node.paused_at_ms = node.paused_at_ms, None
        try:
            self.ledger.tick_begins(node.engine, now_ms)
            worked = bool(node.engine.tick(now_ms))
        except Crash:
            self._crash(node)
            return True
        if node.leaving is not None and node.leaving.done():
            self._finish_leaving(node)
        self._deliver(node)
        self._arrive_mid_tick()
        return worked

    # -- the cluster

    def _cluster_faults(self) -> None:
        faults, rate = self.faults, self.config.fault_rate / 5
        node = self.rng.choice(self.nodes)
        if not node.up(self.now_ms):
            return
        # One fault at most per chance, each as likely as the others (a chain of draws would starve the last).
        fault = self.rng.choice(("node-paused", "store-cut-off", "node-leaves"))
        if fault == "node-paused" and faults.fire(fault, rate * 3):  # a GC pause, a stopped VM: past its lease
            node.paused_until_ms = self.now_ms + self.rng.randint(LEASES.lease_ms, 3 * LEASES.lease_ms)
            node.paused_at_ms = self.now_ms
        elif fault == "store-cut-off" and faults.fire(fault, rate * 3):
            node.cut_off_until_ms = self.now_ms + self.rng.randint(500, 2 * LEASES.lease_ms)  # often within a lease
        elif fault == "node-leaves" and faults.fire(fault, rate * 3) and node.membership is not None:  # SIGTERM
            try:
                node.leaving = node.membership.leave()
            except StoreUnavailable:
                self._crash(node)  # it could not even say goodbye: as if it died

    def _finish_leaving(self, node: SimNode) -> None:
        with contextlib.suppress(StoreUnavailable):  # else its leases run out instead
            node.membership.release_all()
        node.store.inner.close()
        fresh = self._boot(node.index)
        fresh.down_until_ms = fresh.next_step_ms = self.now_ms + self.rng.randint(0, 30_000)
        self.nodes[node.index] = fresh

    def _step_memberships(self) -> None:
        for node in self.nodes:
            if node.running(self.now_ms) and node.next_step_ms <= self.now_ms and node.paused_at_ms is None:
                node.next_step_ms = self.now_ms + node.membership.step(self.now_ms)

    def _next_due_ms(self, keep_going: bool = False) -> int | None:
        candidates = [self._events[0][0]] if self._events else []
        for node in self.nodes:
            if not node.running(self.now_ms):  # a paused or departed node does nothing until it is back
                candidates.append(max(node.paused_until_ms, node.down_until_ms, self.now_ms))
                continue
            engine = node.engine
            candidates += [due for window in engine.windows.values() if (due := window.next_due_ms()) is not None]
            if self.cluster:  # only ahead: what is due now, this step's ticks and membership steps handle
                ahead = [node.next_step_ms, *engine.serve_until_ms.values(),
                         *(at_ms for at_ms, _ in engine.transfers.retries)]
                candidates += [due for due in ahead if due > self.now_ms]
        if candidates:
            return min(candidates)
        # Nothing in memory: timers beyond the windows' horizon load as time moves; step most of a window.
        return self.now_ms + WINDOW_MS // 2 if keep_going or not self._all_closed() else None

    def _replied(self, node: SimNode) -> Callable[[list[tuple[object, object]]], None]:
        """The node's reply edge: each reply is checked against the store as the engine hands it over (a reply
        ahead of its commit is caught then, whether or not the commit lands after), and delivered after the tick."""
        def replied(replies: list[tuple[object, object]]) -> None:
            for (command, before, _), result in replies:
                if before is not None:  # (None: a forwarded stage's, or a duplicate's nobody waits for)
                    self._check_committed(command, before, result)
            node.replies.extend(replies)
        return replied

    def _deliver(self, node: SimNode) -> None:
        replies, node.replies[:] = list(node.replies), []
        for (command, before, on_reply), result in replies:
            if isinstance(on_reply, tuple):  # a forwarded stage's reply
                collected, index = on_reply
                collected.replies[index] = result
                collected.missing -= 1
                if collected.missing == 0 and not collected.future.done():
                    collected.future.set_result(collected.replies)
                continue
            if before is None:
                continue  # a duplicate whose replies nobody waits for
            if isinstance(command, StartExecution) and isinstance(result, int):
                self.ledger.acknowledged.setdefault(command.arn, result)
            if isinstance(command, RedriveExecution) and result == self.now_ms:
                self.redrives_done += 1
                self.compacted_redrives_done += command in self.compacted_asked
            if on_reply is not None:
                on_reply(result)

    def _check_committed(self, command: Command, before: tuple[int, dict[int, bool]], result: object) -> None:
        """A reply that says a transition happened must find it committed (DESIGN.md invariant 1), and a result
        may be accepted only for an attempt that was pending (invariant 3)."""
        version, pending = before
        changed = (isinstance(command, StartExecution) and isinstance(result, int) and version == 0) or (
            isinstance(command, StartAttempt | CompleteAttempt | Heartbeat) and result is True) or (
            isinstance(command, RedriveExecution) and isinstance(result, int) and result == self.now_ms)
        if changed and self._committed(command.arn)[0] <= version:
            self.ledger.bad_replies.append(f"{command.arn}: {type(command).__name__} answered {result!r} before "
                                             "its commit was visible")
        if isinstance(command, CompleteAttempt) and result is True and command.scheduled_id not in pending:
            self.ledger.bad_replies.append(f"{command.arn}: a result for attempt {command.scheduled_id}, which was "
                                             "not pending, was accepted")

    # -- clients

    def _client_action(self) -> None:
        if self.bursts < BURSTS_MAX and self.ledger.acknowledged and self.faults.fire("burst"):
            self._burst()
            return
        roll = self.rng.random()
        if roll < 0.6 or not self.ledger.acknowledged:
            self._start_execution()
        elif roll < 0.68:
            self._stop_execution()
        elif roll < 0.76:
            self._redrive_execution()
        else:
            self._start_execution(again=True)

    def _burst(self) -> None:
        """``BURST_EXECUTIONS`` executions of another account whose Waits end in the same millisecond, with a call of
        the workload's account as they start and another just as their Waits end."""
        self.bursts += 1
        due_ms = (self.now_ms // 1000 + BURST_WAIT_S) * 1000
        at = datetime.fromtimestamp(due_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for index in range(BURST_EXECUTIONS):
            name = f"b{self.bursts}-{index}"
            arn = self.burst_machine.replace(":stateMachine:", ":execution:") + f":{name}"
            self.submit(StartExecution(arn, self.burst_machine, name, "r1", ROLE, json.dumps({"at": at})))
        self._client_action()
        self.at(due_ms - self.now_ms, self._client_action)

    def _start_execution(self, again: bool = False) -> None:
        arn_machine, spec = self.rng.choice(self.machines[2:])
        if again and self.ledger.acknowledged:  # the same name again: idempotent or ExecutionAlreadyExists
            arn = self._acknowledged()
            blob = self.reader.load_execution(arn)
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

    def _acknowledged(self) -> str:
        """One of the executions whose start was acknowledged, the bursts' aside (clients stop and redrive these)."""
        return self.rng.choice(sorted(arn for arn in self.ledger.acknowledged if ":sim-burst:" not in arn))

    def _stop_execution(self) -> None:
        arn = self._acknowledged()
        self.submit(StopExecution(arn, "Sim.Stopped", "stopped by the simulated client"))

    def _redrive_execution(self) -> None:
        """Redrive an execution that closed unsuccessfully (now and then with a token used before: answered as it
        was, no second redrive)."""
        arn = self._acknowledged()
        if self._status(arn) not in REDRIVABLE:
            return
        self.redrives += 1
        token = f"t{self.rng.randrange(self.redrives)}" if self.rng.random() < 0.2 else f"t{self.redrives}"
        self.ledger.redriven[arn].append(read_history(self.histories, arn))
        command = RedriveExecution(arn, token)
        if self.reader.history_location(arn) is not None:
            self.compacted_asked.add(command)
        self.submit(command)

    def _answer_tokens(self) -> None:
        """Task tokens travel in the input of waitForTaskToken children: an approver answers each once found."""
        for machine_arn, _ in self.machines[:2]:
            for arn in all_executions(self.reader, machine_arn):
                if arn in self.children_seen:
                    continue
                self.children_seen.add(arn)
                data = orjson.loads(orjson.loads(self.reader.load_execution(arn))["input"])
                token = data.get("token") if isinstance(data, dict) else None
                if not isinstance(token, str):
                    continue
                self.tokens_answered.add(arn)
                try:
                    claims = self.tokens.verify(token)
                except InvalidToken:
                    self.ledger.bad_replies.append(f"{arn}: carries a token that does not verify")
                    continue
                self._follow(_Attempt(claims.execution_arn, claims.scheduled_id), 300, None)

    # -- workers

    def _dispatched(self, node: SimNode, dispatch: Dispatch) -> None:
        """An activity task reached matching (engine thread): a worker polls for it soon. A job's start, poll or
        stop reached its integration: the simulated service answers soon."""
        if dispatch.payload["kind"] == "glue":
            self.at(self.rng.choice((0, 50, 1000)), lambda: self._job(node, dispatch))
            return
        if dispatch.payload["kind"] == "status":
            self.at(self.rng.choice((0, 50, 1000)), lambda: self._status_event(node, dispatch))
            return
        if dispatch.payload["kind"] != "activity":
            return
        self.at(self.rng.choice((0, 0, 50, 1000)), lambda: self._take(node, dispatch))
        if self.cluster and self.rng.random() < CLAIMED_ELSEWHERE:  # a worker polls another node at once
            self.at(self.rng.choice((0, 50, 1000)), lambda: self._claim(dispatch.payload["resource"]))

    def _claim(self, activity_arn: str) -> None:
        """A poll at some node that claims a task of another node's shard from the store, as the API's matcher
        does; the owner's StartAttempt still decides which of the two pollers gets the attempt."""
        claimer = self.rng.choice(self.nodes)
        if not claimer.up(self.now_ms):
            return
        served = [shard for shard in range(SHARDS) if claimer.engine.owns(shard)]
        try:
            dispatch = claimer.store.claim_activity_task(activity_arn, self.now_ms, self.now_ms + CLAIM_MS, served)
        except StoreUnavailable:
            return
        if dispatch is not None:
            self._start(dispatch, "sim-claimer")

    def _take(self, node: SimNode, dispatch: Dispatch) -> None:
        if self.nodes[node.index] is not node:
            return  # the task was in the memory of a process that died: only the outbox row brings it back
        self._start(dispatch, "sim-worker")

    def _start(self, dispatch: Dispatch, worker: str) -> None:
        attempt = _Attempt(dispatch.execution_arn, dispatch.payload["scheduled_id"])

        def started(result: object) -> None:
            if result is True:
                self.ledger.started_attempt(attempt.arn, attempt.scheduled_id)
                timeout_s, heartbeat_s = self._deadlines(attempt)
                self._follow(attempt, timeout_s, heartbeat_s)

        self.submit(StartAttempt(attempt.arn, attempt.scheduled_id, worker), started, api=False)
        if self.faults.fire("duplicate-result"):  # the same task reached two pollers
            self.submit(StartAttempt(attempt.arn, attempt.scheduled_id, "sim-worker-2"), started, api=False)

    def _job(self, node: SimNode, dispatch: Dispatch) -> None:
        """The simulated AWS job service: a start submits the attempt with the job's handle; a poll finds the job
        running, or ended (SUCCEEDED or FAILED); a stop is recorded, then acknowledged."""
        if self.nodes[node.index] is not node:
            return  # held by a process that died: only the outbox row brings it back
        payload = dispatch.payload
        key = (dispatch.execution_arn, payload["scheduled_id"])
        if "cancel" in payload:
            self.ledger.jobs_stopped[key] += 1
            self._acknowledge(AckDispatch(dispatch.execution_arn, dispatch.dispatch_id))
            return
        if "poll" in payload:
            roll = self.rng.random()
            run_id = payload["job"]["RunId"]  # the checker finds the attempt an ending belongs to by it
            result = (AttemptPolled(payload["poll"]) if roll < 0.6 else
                      AttemptSucceeded(json.dumps({"JobRunState": "SUCCEEDED", "RunId": run_id})) if roll < 0.9 else
                      AttemptFailed(TASK_FAILED, json.dumps({"JobRunState": "FAILED", "RunId": run_id})))
            self.submit(CompleteAttempt(*key, result), api=False)
            return

        def started(reply: object) -> None:
            if reply is True:
                self.ledger.started_attempt(*key)
                run_id = f"jr-{key[1]}"
                answer = AttemptSubmitted({"JobRunId": run_id}, {"JobName": "sim", "RunId": run_id})
                self.at(self.rng.choice((0, 10, 500)), lambda: self.submit(CompleteAttempt(*key, answer), api=False))

        self.submit(StartAttempt(*key, "sim-glue"), started, api=False)

    def _status_event(self, node: SimNode, dispatch: Dispatch) -> None:
        """A status change event reached its destination, which records it; then it is acknowledged."""
        if self.nodes[node.index] is not node:
            return  # held by a process that died: only the outbox row brings it back
        self.ledger.statuses_sent[dispatch.execution_arn].add(dispatch.payload["detail"]["status"])
        self._acknowledge(AckDispatch(dispatch.execution_arn, dispatch.dispatch_id))

    def _acknowledge(self, ack: AckDispatch) -> None:
        """Send the acknowledgement until it lands, as the integration's Dispatcher.report does."""
        replied: list[object] = []
        self.submit(ack, replied.append, api=False)
        self.at(ACK_RETRY_MS, lambda: None if True in replied else self._acknowledge(ack))

    def _deadlines(self, attempt: _Attempt) -> tuple[int, int | None]:
        (event,) = self.histories.read(attempt.arn, attempt.scheduled_id - 1, 1, False)
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
        blob = self.reader.load_execution(arn)
        if blob is None:
            return 0, {}
        state = ExecutionState.from_blob(blob)
        return state.version, decider.pending_attempts(state)

    def _status(self, arn: str) -> str | None:
        blob = self.reader.load_execution(arn)
        return None if blob is None else orjson.loads(blob)["status"]

    def _outbox_empty(self) -> bool:
        """Nothing committed waits for delivery (status events and job stops go out after their execution closed)."""
        return not any(self.reader.pending_dispatches(shard, 0, 1) for shard in range(SHARDS))

    def _all_closed(self) -> bool:
        """No execution is RUNNING (children and starts whose reply was lost included)."""
        inner = self.reader
        return not any(inner.list_executions(arn, "RUNNING", 1, None).items
                       for arn in [*(arn for arn, _ in self.machines), self.burst_machine])
