"""Invariant checkers over what a run left in the store and what its participants saw (DESIGN.md's invariants).

Each checker returns a list of violations (strings that say what and where); an empty list means it holds. The
``Ledger`` is what the simulated clients, workers and the engine's probe recorded while the run went on; the
checkers compare it with the store at the end. The simulator and the test suite both use these.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ..asl.definition import raw_state
from ..decider import map_runs
from ..decider.execution import ExecutionState
from ..store.base import ClosedExecution, Store

if TYPE_CHECKING:
    from ..store.payloads import Histories

TERMINAL_EVENTS = frozenset({"ExecutionSucceeded", "ExecutionFailed", "ExecutionAborted", "ExecutionTimedOut"})
CLOSED = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
_HISTORY_PAGE = 1_000
_SCHEDULED = frozenset({"ActivityScheduled", "TaskScheduled"})
_STARTED = frozenset({"ActivityStarted", "TaskStarted"})
_ANSWERED = frozenset({"ActivitySucceeded", "ActivityFailed", "TaskSucceeded", "TaskFailed"})
_FAN_OUT_STARTS = frozenset({"ParallelStateStarted", "MapStateStarted", "MapIterationStarted"})
REDRIVEN = "ExecutionRedriven"


_JOB_RUN = re.compile(r'"jr-(\d+)"')


def history_problems(where: str, events: list[dict[str, Any]], closed: bool) -> list[str]:
    """Ids 1..n with no gap or repeat, ExecutionStarted first and once, previousEventId pointing backwards, and one
    terminal event per attempt: each but the last followed at once by ExecutionRedriven, and (when the execution
    closed) the last event."""
    problems = []
    ids = [event["id"] for event in events]
    if ids != list(range(1, len(ids) + 1)):
        repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
        problems.append(f"{where}: event ids are not 1..{len(ids)} (repeated: {repeated})")
    types = [event["type"] for event in events]
    if types.count("ExecutionStarted") != 1 or types[:1] != ["ExecutionStarted"]:
        problems.append(f"{where}: ExecutionStarted is not first and once: {types[:3]}...")
    ends = [index for index, kind in enumerate(types) if kind in TERMINAL_EVENTS]
    redrives = [index for index, kind in enumerate(types) if kind == REDRIVEN]
    if [index + 1 for index in ends[:len(redrives)]] != redrives or len(ends) - len(redrives) != int(closed):
        problems.append(f"{where}: terminal events at {ends} and redrives at {redrives} do not alternate "
                        f"({'closed' if closed else 'running'})")
    elif closed and ends[-1] != len(types) - 1:
        problems.append(f"{where}: the last terminal event is not the last event: {types[-1:]}")
    for event in events:
        if not 0 <= event["previousEventId"] < event["id"]:
            problems.append(f"{where}: event {event['id']} has previousEventId {event['previousEventId']}")
    return problems + _attempt_order_problems(where, types)


def _attempt_order_problems(where: str, types: list[str]) -> list[str]:
    """Every attempt is scheduled, then started, then answered: at no point of a history have more attempts
    started than were scheduled, or been answered (succeeded or failed) than started. Counted, not paired,
    since Parallel branches and Map iterations interleave their events."""
    scheduled = started = answered = 0
    for index, kind in enumerate(types, 1):
        scheduled += kind in _SCHEDULED
        started += kind in _STARTED
        answered += kind in _ANSWERED
        if started > scheduled or answered > started:
            return [f"{where}: event {index} ({kind}) leaves {scheduled} scheduled, {started} started, "
                    f"{answered} answered"]
    return []


def redrive_problems(where: str, events: list[dict[str, Any]], definition: dict[str, Any]) -> list[str]:
    """A redrive's invariant, over each attempt after the first: it begins with ExecutionRedriven (counting
    redrives from 1) right after the attempt before closed, and it enters no state that had succeeded (exited)
    before unless that state is downstream of one the attempt before left unfinished (entered, not exited); a Map
    left unfinished starts none of the iterations that had succeeded (Maps entered once in each attempt)."""
    problems: list[str] = []
    starts = [index for index, event in enumerate(events) if event["type"] == REDRIVEN]
    graph = _Graph(definition)
    for count, start in enumerate(starts, 1):
        redriven = events[start]
        if redriven.get("executionRedrivenEventDetails") != {"redriveCount": count}:
            problems.append(f"{where}: redrive {count} records {redriven.get('executionRedrivenEventDetails')}")
        if events[start - 1]["type"] not in TERMINAL_EVENTS or redriven["previousEventId"] != redriven["id"] - 1:
            problems.append(f"{where}: redrive {count} (event {redriven['id']}) does not follow a closed attempt")
        before = events[(starts[count - 2] if count > 1 else 0):start]
        after = events[start:(starts[count] if count < len(starts) else len(events))]
        succeeded = {_name(event, "stateExitedEventDetails") for event in events[:start] if event["type"]
                     .endswith("StateExited")}
        entered = Counter(_name(event, "stateEnteredEventDetails") for event in before
                          if event["type"].endswith("StateEntered"))
        exited = Counter(_name(event, "stateExitedEventDetails") for event in before
                         if event["type"].endswith("StateExited"))
        unfinished = {name for name, times in entered.items() if times > exited[name]}
        allowed = graph.downstream(unfinished)
        for event in after:
            name = _name(event, "stateEnteredEventDetails") if event["type"].endswith("StateEntered") else None
            if name in succeeded and name not in allowed:
                problems.append(f"{where}: redrive {count} entered {name} again (event {event['id']}), which had "
                                f"succeeded and is not downstream of {sorted(unfinished)}")
        problems += _map_reruns(where, count, before, after, unfinished)
    return problems


def _name(event: dict[str, Any], key: str) -> str:
    return event[key]["name"]


def _map_reruns(where: str, count: int, before: list[dict[str, Any]], after: list[dict[str, Any]],
                unfinished: set[str]) -> list[str]:
    def once(events: list[dict[str, Any]]) -> set[str]:
        times = Counter(_name(event, "stateEnteredEventDetails") for event in events
                        if event["type"] == "MapStateEntered")
        return {name for name, n in times.items() if n == 1}

    def indexes(events: list[dict[str, Any]], kind: str, key: str, name: str) -> set[int]:
        return {event[key]["index"] for event in events if event["type"] == kind and event[key]["name"] == name}

    problems = []
    for name in once(before) & once(after) & unfinished:
        done = indexes(before, "MapIterationSucceeded", "mapIterationSucceededEventDetails", name)
        # Until an iteration fails in this attempt: a Retry of the Map then runs every iteration again, rightly.
        failed = next((position for position, event in enumerate(after) if event["type"] == "MapIterationFailed"
                       and event["mapIterationFailedEventDetails"]["name"] == name), len(after))
        again = indexes(after[:failed], "MapIterationStarted", "mapIterationStartedEventDetails", name)
        if done & again:
            problems.append(f"{where}: redrive {count} ran iterations {sorted(done & again)} of {name} again, "
                            "which had succeeded")
    return problems


class _Graph:
    """Which states follow which in a definition: Next, Default, Choices and Catch within a States collection,
    and into every state of a Parallel's branches or a Map's processor once that state is entered afresh."""

    def __init__(self, definition: dict[str, Any]) -> None:
        self.edges: dict[str, set[str]] = defaultdict(set)
        self.inside: dict[str, set[str]] = defaultdict(set)  # a fan-out state -> every state of its children
        self.enclosing: dict[str, str] = {}  # a state -> the fan-out state whose child it is in
        self.maps: set[str] = set()
        self.retried: set[str] = set()  # fan-out states with a Retry: one reruns every child
        self._collect(definition)

    def _collect(self, machine: dict[str, Any], enclosing: str | None = None) -> set[str]:
        names = set(machine["States"])
        for name, state in machine["States"].items():
            if enclosing is not None:
                self.enclosing[name] = enclosing
            targets = {state.get("Next"), state.get("Default"), *(c.get("Next") for c in state.get("Choices", ())),
                       *(c.get("Next") for c in state.get("Catch", ()))}
            self.edges[name] |= {target for target in targets if target}
            for child in [*state.get("Branches", ()), *filter(None, [state.get("ItemProcessor") or
                                                                      state.get("Iterator")])]:
                self.inside[name] |= self._collect(child, name)
            names |= self.inside[name]
            if state["Type"] == "Map":
                self.maps.add(name)
            if state.get("Retry") and self.inside[name]:
                self.retried.add(name)
        return names

    def downstream(self, starts: set[str]) -> set[str]:
        """The states reachable from ``starts``: a fan-out's children entered afresh are reachable from the states
        after it; those of an unfinished Parallel only from its unfinished children, and any of an unfinished Map,
        whose iterations not started yet begin afresh (``_map_reruns`` checks those that had succeeded); and a
        failure inside a fan-out with a Retry reruns all of its children."""
        seen: set[str] = set()
        todo = [*starts, *(inner for name in starts & self.maps for inner in self.inside[name])]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += self.edges[name]
            todo += [inner for target in self.edges[name] for inner in self.inside[target]]
            fan_out = self.enclosing.get(name)
            while fan_out is not None:
                if fan_out in self.retried:
                    todo += self.inside[fan_out]
                fan_out = self.enclosing.get(fan_out)
        return seen


def read_history(histories: Histories, arn: str) -> list[dict[str, Any]]:
    """The whole history, in pages, wherever it is (compacted or not)."""
    events: list[dict[str, Any]] = []
    while True:
        page = histories.read(arn, events[-1]["id"] if events else 0, _HISTORY_PAGE, False)
        events += page
        if len(page) < _HISTORY_PAGE:
            return events


def readback_problems(where: str, events: list[dict[str, Any]], committed: list[dict[str, Any]]) -> list[str]:
    """A history reads back exactly as its events were committed: the same events, ids and order."""
    if events == committed:
        return []
    at = next((index for index, (read, wrote) in enumerate(zip(events, committed, strict=False)) if read != wrote),
              min(len(events), len(committed)))
    return [f"{where}: reads back {len(events)} events where {len(committed)} were committed, differing from "
            f"position {at + 1} on"]


@dataclass
class Ledger:
    """What the run's participants recorded."""

    acknowledged: dict[str, int] = field(default_factory=dict)  # execution ARN -> start time its caller was told
    attempts_started: Counter[tuple[str, int]] = field(default_factory=Counter)  # (arn, scheduled id) handed out
    timer_fires: Counter[tuple[str, str, int]] = field(default_factory=Counter)  # (arn, timer id, due ms) applied
    range_owners: dict[tuple[int, int], set[str]] = field(default_factory=lambda: defaultdict(set))
    bad_replies: list[str] = field(default_factory=list)  # replies ahead of their commit, results for no attempt
    fence_problems: list[str] = field(default_factory=list)  # writes of a fenced node that the store let through
    fenced_writes: int = 0  # writes sent with a range id that had moved (each must have been rejected)

    early_timers: list[str] = field(default_factory=list)
    # Redrives asked for: each execution's history as it stood just before (it must stay a prefix).
    redriven: dict[str, list[list[dict[str, Any]]]] = field(default_factory=lambda: defaultdict(list))
    # The engine's bound on states one transition step enters (Limits.apply_states_max), and the writes past it.
    states_max: int | None = None
    oversized_steps: list[str] = field(default_factory=list)

    # Every history event that landed, by execution, in commit order, as FaultyStore saw the commits (empty: no one
    # recorded them): what each history must read back as, compacted or not. Cleared when the execution is deleted.
    committed: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    # The retention sweep: how long a closed execution must be kept, the executions it deleted (by when), its
    # deletions before their time, the compactions it made and compacted histories that did not read back whole.
    retention_ms: int | None = None
    expired: dict[str, int] = field(default_factory=dict)
    early_expiries: list[str] = field(default_factory=list)
    compactions: int = 0
    map_runs: int = 0  # map runs checked at the end (map_run_problems)
    compaction_problems: list[str] = field(default_factory=list)

    # The scheduler's fairness: commands handed to each engine and not yet taken by a tick, by kind (the API's, the
    # integrations' results), and the ticks that served other work while one kind waited and got nothing.
    waiting: dict[Any, list[int]] = field(default_factory=dict)
    waiting_at_tick: dict[Any, list[int]] = field(default_factory=dict)  # as each engine's last tick began
    # ... and what each account had waiting of each kind then (the timers: by shard)
    accounts_at_tick: dict[Any, list[Any]] = field(default_factory=dict)
    unfair_ticks: list[str] = field(default_factory=list)
    callers_first: dict[Any, bool] = field(default_factory=dict)  # whether each engine's last tick was one
    callers_first_ticks: int = 0
    late_calls: int = 0  # the API's commands that joined a tick while it applied
    mid_tick: Callable[[], None] | None = None  # the simulator's calls held for the middle of a tick
    bugs: list[str] = field(default_factory=list)  # commands whose application raised (a bug, not a refusal)

    # Stops of the AWS jobs of .sync tasks (workload.JOB) the simulated service received, by (arn, scheduled id).
    jobs_stopped: Counter[tuple[str, int]] = field(default_factory=Counter)
    # The status change events delivered, by execution ARN, when the engine sends them (``status_events``).
    status_events: bool = False
    statuses_sent: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def started_attempt(self, arn: str, scheduled_id: int) -> None:
        self.attempts_started[(arn, scheduled_id)] += 1

    def landed(self, writes: Sequence[Any], landed: Iterable[bool]) -> None:
        """A commit's writes, and which of them landed: their events are the histories' from now on."""
        for write, done in zip(writes, landed, strict=True):
            if done and write.effects.events:
                self.committed[write.arn] += orjson.loads(orjson.dumps(write.effects.events))

    def deleted(self, executions: Iterable[ClosedExecution], stops_ms: dict[str, int], now_ms: int) -> None:
        """The retention sweep deleted these executions (closed at ``stops_ms``) at ``now_ms``: none may go before
        its retention ended."""
        for execution in executions:
            kept_ms = now_ms - stops_ms[execution.arn]
            if self.retention_ms is not None and kept_ms < self.retention_ms:
                self.early_expiries.append(f"{execution.arn}: deleted {kept_ms} ms after it closed, before its "
                                           f"retention of {self.retention_ms} ms ended")
            self.expired[execution.arn] = now_ms
            self.committed.pop(execution.arn, None)
            self.redriven.pop(execution.arn, None)

    # -- the engine's probe (Engine.probe)

    def gathered(self, engine: Any, taken: list[int], callers_only: bool, kinds: list[list[Any]]) -> None:
        """A tick of ``engine`` took ``taken`` items of each kind (API commands, results, continuations, transfers,
        timers): a kind of command that was waiting must have had its share, so none went without while another
        kind took two or more (a budget smaller than the kinds waiting gives one each, the first ones first). A
        callers-first tick (``callers_only``: the API's commands alone, behind a full tick) is the exception, but
        never two in a row: the tick after one serves every kind. Within each kind (``kinds``: the items each
        took), each account is served in turn the same way (the timers across the node's shards)."""
        self._accounts_served(engine, kinds)
        waiting = self.waiting.setdefault(engine, [0, 0, 0])
        at_tick = self.waiting_at_tick.get(engine, [0, 0, 0])
        if callers_only and self.callers_first.get(engine):
            self.unfair_ticks.append(f"{engine.node_id}: two callers-first ticks in a row")
        self.callers_first[engine] = callers_only
        self.callers_first_ticks += callers_only
        for kind, name in enumerate(("API calls on executions", "API task answers", "integration results")):
            if at_tick[kind] and not taken[kind] and max(taken) >= 2 and not (callers_only and kind == 2):
                self.unfair_ticks.append(f"{engine.node_id}: {at_tick[kind]} {name} waited through a tick in which "
                                         f"another kind took {max(taken)} items")
            waiting[kind] -= taken[kind]

    def late(self, engine: Any, taken: list[int]) -> None:
        """A tick took the API's calls and task answers that arrived while it applied (``taken``: how many of each)."""
        waiting = self.waiting.setdefault(engine, [0, 0, 0])
        waiting[0] -= taken[0]
        waiting[1] -= taken[1]
        self.late_calls += taken[0] + taken[1]

    def tick_begins(self, engine: Any, now_ms: int) -> None:
        """What waits as a tick begins (a store call during the tick may run the simulator, which submits more),
        and each account's share of it."""
        self.waiting_at_tick[engine] = list(self.waiting.get(engine, [0, 0, 0]))
        self.accounts_at_tick[engine] = [*engine.inbox.counts(), engine.transfers.ready.counts(), {
            shard: window.due_counts(now_ms) for shard, window in engine.windows.items()}]

    def _accounts_served(self, engine: Any, kinds: list[list[Any]]) -> None:
        """No account with work of a kind waiting went without any while another account took two or more of it
        (the timers: across the node's shards' windows; express runs' timers aside)."""
        waiting = self.accounts_at_tick.get(engine)
        if waiting is None:
            return
        for kind, name in enumerate(_KIND_NAMES[:5]):
            self._accounts_fair(engine, name, waiting[kind], Counter(_account(item) for item in kinds[kind]))
        due: Counter[str] = Counter()
        for shard, counts in waiting[5].items():
            if shard in engine.windows:  # a shard lost as the tick began has no timers to give
                due.update(counts)
        windows = [command for command, _ in kinds[5] if command.arn not in engine.express.runs]
        self._accounts_fair(engine, "timers", due, Counter(_account((command, None)) for command in windows))
        self._timers_in_order(engine, windows)

    def _timers_in_order(self, engine: Any, fired: list[Any]) -> None:
        """Each account's timers fire earliest first, whichever of the node's shards holds them: none taken while
        one of the same account due earlier stays loaded."""
        latest: dict[str, int] = {}
        for command in fired:
            account = _account((command, None))
            latest[account] = max(latest.get(account, command.due_ms), command.due_ms)
        left: dict[str, int] = {}
        for window in engine.windows.values():
            for account, due_ms in window.earliest().items():
                left[account] = min(left.get(account, due_ms), due_ms)
        for account, due_ms in latest.items():
            if left.get(account, due_ms) < due_ms:
                self.unfair_ticks.append(f"{engine.node_id}: account {account}'s timer due at {due_ms} fired while "
                                         f"one due at {left[account]} waited")

    def _accounts_fair(self, engine: Any, name: str, waiting: dict[str, int], took: Counter[str]) -> None:
        most = max(took.values(), default=0)
        for account in waiting:
            if not took[account] and most >= 2:
                self.unfair_ticks.append(f"{engine.node_id}: account {account}'s {name} waited through a tick in "
                                         f"which another account took {most} of them")

    def staged(self, arn: str, events: list[dict[str, Any]]) -> None:
        """A decision staged: one without fan-out (where every child started runs its first state) enters at most
        ``states_max`` states, the rest waiting for a later tick. Calls held for the middle of a tick
        (``mid_tick``) arrive now."""
        if self.mid_tick is not None:
            self.mid_tick()
        if self.states_max is None:
            return
        types = [event["type"] for event in events]
        entered = sum(kind.endswith("StateEntered") for kind in types)
        if entered > self.states_max and not _FAN_OUT_STARTS.intersection(types):
            self.oversized_steps.append(f"{arn}: one transition step entered {entered} states, more than "
                                        f"{self.states_max}")

    def raised(self, command: Any, exc: BaseException) -> None:
        """Applying ``command`` raised: a bug in the engine or the decider, whatever the faults."""
        self.bugs.append(f"{command.arn}: applying {type(command).__name__} raised {type(exc).__name__}: {exc}")

    def timer_applied(self, arn: str, timer_id: str, due_ms: int, now_ms: int) -> None:
        self.timer_fires[(arn, timer_id, due_ms)] += 1
        if now_ms < due_ms:
            self.early_timers.append(f"{arn}: timer {timer_id} due at {due_ms} applied at {now_ms}")


_KIND_NAMES = ("API calls on executions", "API task answers", "integration results", "heavy lane decisions",
               "transfers", "timers")


def _account(item: tuple[Any, Any]) -> str:
    """The account a tick's item of work is for (a transfer's: its dispatch's execution's)."""
    work = item[0]
    arn = work.arn if hasattr(work, "arn") else work.dispatch.execution_arn
    return arn.split(":", 5)[4]


def check_all(histories: Histories, ledger: Ledger, machines: Iterable[str] = (), *, liveness: bool) -> list[str]:
    """Every invariant over every execution of ``machines`` (children and starts whose reply was lost included)
    and every acknowledged one not deleted at the end of its retention, their histories read wherever they are;
    with ``liveness`` also that all of them closed."""
    store = histories.store
    problems = [*ledger.bad_replies, *ledger.early_timers, *ledger.fence_problems, *ledger.oversized_steps,
                *ledger.early_expiries, *ledger.compaction_problems, *ledger.unfair_ticks[:10], *ledger.bugs[:10]]
    executions = {arn: None for arn in sorted(ledger.acknowledged) if arn not in ledger.expired}
    executions.update((arn, None) for machine in machines for arn in all_executions(store, machine))
    queue = list(executions)
    for arn in queue:  # a map run's children join the queue as their parent's run is checked
        blob = store.load_execution(arn)
        if blob is None:
            problems.append(f"{arn}: acknowledged at start but not in the store")
            continue
        status = _status(blob)
        if liveness and status not in CLOSED:
            problems.append(f"{arn}: still {status} after every fault stopped and time ran on")
        events = read_history(histories, arn)
        if ledger.committed:
            problems += readback_problems(arn, events, ledger.committed.get(arn, []))
        problems += history_problems(arn, events, status in CLOSED)
        problems += _job_problems(arn, events, ledger, liveness and status in CLOSED)
        if any(event["type"] == "MapRunStarted" for event in events):
            for run_arn in all_executions(store, arn):  # the map runs listed under it
                children = all_executions(store, run_arn)
                ledger.map_runs += 1
                problems += map_run_problems(histories, arn, events, run_arn, children, ledger.expired, liveness)
                queue += children
        if ledger.status_events:
            problems += _status_problems(arn, events, ledger.statuses_sent.get(arn, set()), liveness)
        problems += [f"{arn}: the history before a redrive ({len(before)} events) is not kept as it was"
                     for before in ledger.redriven.get(arn, ()) if events[:len(before)] != before]
        if any(event["type"] == REDRIVEN for event in events):
            problems += redrive_problems(arn, events, _definition(store, ExecutionState.from_blob(blob)))
    problems += [f"{arn}: attempt {sid} handed out {n} times" for (arn, sid), n in ledger.attempts_started.items()
                 if n > 1]
    problems += [f"{arn}: timer {timer_id} due at {due} applied {n} times"
                 for (arn, timer_id, due), n in ledger.timer_fires.items() if n > 1]
    problems += [f"shard {shard}: range id {range_id} committed by {sorted(owners)}"
                 for (shard, range_id), owners in ledger.range_owners.items() if len(owners) > 1]
    if liveness:
        problems += [f"{dispatch.execution_arn}: dispatch {dispatch.dispatch_id} left in the outbox after it closed"
                     for shard in range(store.shard_count()) for dispatch in store.pending_dispatches(shard)]
    return problems


_STATUSES = {"ExecutionStarted": ("RUNNING",), "ExecutionSucceeded": ("SUCCEEDED",), "ExecutionFailed": ("FAILED",),
             "ExecutionTimedOut": ("TIMED_OUT",), "ExecutionAborted": ("ABORTED",),
             "ExecutionRedriven": ("PENDING_REDRIVE", "RUNNING")}


def _status_problems(arn: str, events: list[dict[str, Any]], sent: set[str], liveness: bool) -> list[str]:
    """A status change event goes out for every status change the history holds, and for no other (none for a
    transition that did not commit); once everything closed, each was delivered."""
    expected = {status for event in events for status in _STATUSES.get(event["type"], ())}
    problems = [f"{arn}: a {status} event was sent for a change its history does not hold"
                for status in sorted(sent - expected)]
    if liveness:
        problems += [f"{arn}: no {status} event was sent for a committed change"
                     for status in sorted(expected - sent)]
    return problems


def _job_problems(arn: str, events: list[dict[str, Any]], ledger: Ledger, closed: bool) -> list[str]:
    """A .sync task's job that ended the task with its result (TaskSucceeded or TaskFailed) is never stopped;
    once the execution closed, every other job it submitted (its task timed out, or was stopped or dropped with
    the execution or a sibling) was stopped. The simulated service names each job ``jr-<scheduled id>`` in what
    it answers (the history's events do not carry the attempt they belong to)."""
    submitted, ended = set(), set()
    for event in events:
        details = event.get("taskSubmittedEventDetails") or event.get("taskSucceededEventDetails") or event.get(
            "taskFailedEventDetails")
        if details is None or details.get("resourceType") != "glue":
            continue
        found = _JOB_RUN.search(details.get("output") or details.get("cause") or "")
        if found:
            (submitted if event["type"] == "TaskSubmitted" else ended).add(int(found[1]))
    problems = [f"{arn}: the job of attempt {sid} ended with its result and was stopped too"
                for sid in sorted(ended) if ledger.jobs_stopped[(arn, sid)]]
    if closed:
        problems += [f"{arn}: the job of attempt {sid} was abandoned and never stopped"
                     for sid in sorted(submitted - ended) if not ledger.jobs_stopped[(arn, sid)]]
    return problems


def map_run_problems(histories: Histories, parent_arn: str, parent_events: list[dict[str, Any]], run_arn: str,
                     children: list[str], expired: Container[str], liveness: bool) -> list[str]:
    """A map run: its parent's history started it once and ended each run (or redrive of one) at most once; no
    child started twice (each is one of the run's own, named by its index); never more children running at once than
    MaxConcurrency (from the children's own histories); a run that succeeded counted each child's outcome once, as
    the child ended (while none of its children was deleted at the end of its retention: ``expired``); with
    ``liveness``, the run and its children closed."""
    store = histories.store
    where = f"{parent_arn} (map run {run_arn})"
    run_state = ExecutionState.from_blob(store.load_execution(run_arn))
    run = run_state.run
    types = [event["type"] for event in parent_events]
    problems = []
    started = [event for event in parent_events if event["type"] == "MapRunStarted"
               and event["mapRunStartedEventDetails"]["mapRunArn"] == run_arn]
    if len(started) != 1:
        problems.append(f"{where}: started {len(started)} times in the parent's history")
    if types.count("MapRunSucceeded") + types.count("MapRunFailed") > types.count("MapRunStarted") + types.count(
            "MapRunRedriven"):
        problems.append(f"{where}: more map runs ended than started (or redriven) in the parent's history")
    names = {map_runs.child_name(run_arn, index) for index in range(run.total)}
    strays = [arn for arn in children if arn.rsplit(":", 1)[1] not in names]
    problems += [f"{where}: {arn} is no child of the run" for arn in strays]
    spans, statuses = [], Counter()
    for child in children:
        events = read_history(histories, child)
        child_status = _status(store.load_execution(child))
        statuses[child_status] += 1
        ends = [event["timestamp"] for event in events if event["type"] in TERMINAL_EVENTS]
        spans.append((events[0]["timestamp"], ends[-1] if ends else None))
        if liveness and child_status not in CLOSED:
            problems.append(f"{where}: its child {child} is still {child_status}")
    # At one instant, children that ended end first, then children start, then those that ended as they began.
    moments = sorted([(start, 1, 1) for start, _ in spans] + [(stop, 0 if start < stop else 2, -1)
                                                              for start, stop in spans if stop is not None])
    running = most = 0
    for _, _, change in moments:
        running += change
        most = max(most, running)
    limit = _declared_concurrency(store, run_state)
    if most > limit:
        problems.append(f"{where}: {most} children ran at once; MaxConcurrency is {limit}")
    gone = sum(1 for index in range(run.total)
               if f"{map_runs.child_arn(run_state, map_runs.child_name(run_arn, index))}" in expired)
    counted = {"SUCCEEDED": run.succeeded, "FAILED": run.failed, "TIMED_OUT": run.timed_out,
               "ABORTED": run.aborted}
    if run_state.status == "SUCCEEDED" and not gone:
        if run.next_index != run.total or run.running or len(children) != run.total or any(
                statuses[status] != count for status, count in counted.items()):
            problems.append(f"{where}: succeeded counting {counted} of {run.total} children, "
                            f"{run.next_index} started and {len(run.running)} running; its children: "
                            f"{dict(statuses)}")
    elif liveness and run_state.status in CLOSED and not gone and not run.stopped and not run.redo:
        # Closed otherwise, once every child it stopped told how it closed: each child counted as it ended (one
        # stopped before it started counts aborted)
        ended = Counter(statuses)
        ended["ABORTED"] += run.next_index - len(children)
        if run.running or any(ended[status] != count for status, count in counted.items()):
            problems.append(f"{where}: closed {run_state.status} counting {counted}, {len(run.running)} running; "
                            f"its children: {dict(ended)}")
    if liveness and run.stopped:
        problems.append(f"{where}: children it stopped never told how they closed: {run.stopped}")
    if liveness and run_state.status not in CLOSED:
        problems.append(f"{where}: still {run_state.status} after every fault stopped and time ran on")
    return problems


def _declared_concurrency(store: Store, run_state: ExecutionState) -> int:
    """The MaxConcurrency the run's Map declares in its definition (the workload writes a number; 0: no limit but
    AWS's), read from the definition, not from the run's books."""
    definition = orjson.loads(store.get_revision(run_state.root_machine_arn, run_state.revision_id)[0])
    return raw_state(definition, run_state.processor).get("MaxConcurrency") or map_runs.CONCURRENCY_MAX


def _definition(store: Store, execution: ExecutionState) -> dict[str, Any]:
    """The definition an execution runs: its revision's, or a map run's child's Map's ItemProcessor."""
    definition = orjson.loads(store.get_revision(execution.root_machine_arn, execution.revision_id)[0])
    if execution.processor is None:
        return definition
    state = raw_state(definition, execution.processor)
    return state.get("ItemProcessor", state.get("Iterator"))


def all_executions(store: Store, machine: str, status: str | None = None) -> list[str]:
    arns: list[str] = []
    cursor = None
    while True:
        page = store.list_executions(machine, status, _HISTORY_PAGE, cursor)
        arns += [summary.arn for summary in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return arns


def _status(blob: bytes) -> str:
    return orjson.loads(blob)["status"]
