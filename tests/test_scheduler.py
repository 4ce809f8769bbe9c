"""A tick's budget divided between the kinds of work in turn: the pure division (scheduler.take_fairly), and the
engine ticked by hand on a virtual clock, where a burst of one kind leaves every other kind its share of each tick."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statewright.decider.outcomes import AttemptSucceeded
from statewright.engine.commands import CompleteAttempt, FireTimer, InboxFull, StartExecution, TaskNotPending
from statewright.engine.engine import Engine
from statewright.engine.inbox import AccountQueues
from statewright.engine.limits import Limits
from statewright.engine.scheduler import InTurn, TickBudget, take_fairly
from statewright.engine.timers import TimerWindow, pop_due
from statewright.store.base import StateMachineRecord, TimerRow
from statewright.store.sqlite import SqliteStore

PREFIX = "arn:aws:states:us-east-1:123456789012"
OTHER = "arn:aws:states:us-east-1:210987654321"  # another account's resources
WAITER = f"{PREFIX}:stateMachine:waiter"
PASSER = f"{PREFIX}:stateMachine:passer"
DEFINITIONS = {
    WAITER: {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 60, "End": True}}},
    PASSER: {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}},
}
NOW_MS = 1_700_000_000_000


def queues(lengths: list[int]) -> tuple[list, list[int]]:
    """Takers over queues of the given lengths, and what is left in each."""
    left = list(lengths)

    def taker(index: int):
        def take(n: int) -> int:
            assert n > 0
            got = min(n, left[index])
            left[index] -= got
            return got
        return take
    return [taker(index) for index in range(len(lengths))], left


@given(st.integers(0, 500), st.lists(st.integers(0, 300), max_size=6))
def test_the_budget_is_shared_max_min_fairly(budget, lengths):
    takers, _ = queues(lengths)
    taken = take_fairly(budget, takers)
    assert sum(taken) == min(budget, sum(lengths))
    assert all(0 <= got <= length for got, length in zip(taken, lengths, strict=True))
    for got, length in zip(taken, lengths, strict=True):
        if got < length:  # a kind that did not get all it had got no less than any other kind, to the odd item
            assert max(taken) <= got + 1


def test_the_tick_budget_follows_the_time_of_full_ticks():
    budget = TickBudget(64, 2_000, 0.040)
    assert budget.items == 64  # small until full ticks show what an item costs
    budget.observe(64, 0.0128)  # 0.2 ms an item: 200 would take 40 ms; halfway there
    assert budget.items == 132
    budget.observe(10, 0.030)  # far from full and within its time: mostly the commit's fixed cost
    assert budget.items == 132
    budget.observe(10, 0.080)  # past its time, but too few items to say what one costs
    assert budget.items == 132
    budget.observe(40, 0.160)  # not half full but past its time, with enough items: costly items
    assert budget.items == 71
    for _ in range(20):
        budget.observe(budget.items, budget.items * 0.0002)
    assert abs(budget.items - 200) <= 1
    for _ in range(20):
        budget.observe(budget.items, budget.items * 0.000001)  # cheap items: up to the ceiling
    assert budget.items == 2_000
    budget.observe(2_000, 60.0)
    assert budget.items == 1_001  # one very slow tick halves it at most
    for _ in range(20):
        budget.observe(budget.items, 60.0)
    assert budget.items == 64
    assert TickBudget(64, 2_000, None).items == 2_000  # no clock: no time to follow


def test_a_kind_with_little_leaves_the_rest_to_the_others():
    takers, left = queues([3, 1000, 0, 1000])
    assert take_fairly(100, takers) == [3, 49, 0, 48]
    assert left == [0, 951, 0, 952]


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=4)
    for arn, definition in DEFINITIONS.items():
        store.create_state_machine(StateMachineRecord(arn, arn.rsplit(":", 1)[1], "STANDARD", json.dumps(definition),
                                                      "role", "r1", 0, 0, {}, {}))
    yield store
    store.close()


def started(engine: Engine, machine: str, name: str):
    arn = f"{machine.replace(':stateMachine:', ':execution:')}:{name}"
    return engine.submit(StartExecution(arn, machine, name, "r1", "role", "{}"))


def timed_engine_with_waits(store, limits: Limits, waits: int, engine_class=Engine) -> Engine:
    """An engine on a tick clock (each reading 1 us later) whose ``waits`` Waits all end at NOW_MS + 60 s."""
    readings = iter(range(10**9))
    engine = engine_class(store, clock=lambda: NOW_MS, limits=limits, evaluation_clock=lambda: next(readings) / 1e6)
    engine.acquire_all_shards()
    waiting = [started(engine, WAITER, f"w{i}") for i in range(waits)]
    while engine.tick(NOW_MS):
        pass
    assert all(reply.done() for reply in waiting)
    return engine


def test_a_start_is_applied_in_the_first_tick_of_a_burst_of_due_timers(store):
    engine = Engine(store, clock=lambda: NOW_MS, limits=Limits(tick_commands_max=50), evaluation_clock=None)
    engine.acquire_all_shards()
    waiting = [started(engine, WAITER, f"w{i}") for i in range(400)]
    while engine.tick(NOW_MS):
        pass
    assert all(reply.done() for reply in waiting)
    due_ms = NOW_MS + 60_000  # 400 Waits end now, 8 ticks' worth
    neighbour = started(engine, PASSER, "neighbour")
    engine.tick(due_ms)
    assert neighbour.result(timeout=0) == due_ms
    ticks = 1
    while engine.tick(due_ms):
        ticks += 1
    assert ticks == 9  # the burst itself drains at the full rate of the ticks: 400 timers, 50 a tick, less the start


def test_a_start_is_applied_in_the_first_tick_of_a_burst_of_task_results(store):
    engine = Engine(store, clock=lambda: NOW_MS, limits=Limits(tick_commands_max=50), evaluation_clock=None)
    engine.acquire_all_shards()
    arn = f"{PREFIX}:execution:waiter:gone"
    results = [engine.submit(CompleteAttempt(arn, 3, AttemptSucceeded("{}")), throttle=False) for _ in range(400)]
    neighbour = started(engine, PASSER, "neighbour")
    engine.tick(NOW_MS)
    assert neighbour.result(timeout=0) == NOW_MS
    assert sum(reply.done() for reply in results) == 49  # the rest of the tick went to the results
    while engine.tick(NOW_MS):
        pass
    assert all(isinstance(reply.exception(timeout=0), TaskNotPending) for reply in results)


def test_a_start_is_applied_in_the_first_tick_of_a_burst_of_continuations(store):
    """A wide inline Map goes on a slice per tick (apply_states_max), continuations beside the other work."""
    wide = f"{PREFIX}:stateMachine:wide"
    store.create_state_machine(StateMachineRecord(wide, "wide", "STANDARD", json.dumps({"StartAt": "M", "States": {
        "M": {"Type": "Map", "ItemsPath": "$.items", "ResultPath": None, "End": True,
              "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}}}}),
        "role", "r1", 0, 0, {}, {}))
    engine = Engine(store, clock=lambda: NOW_MS, limits=Limits(tick_commands_max=50), evaluation_clock=None)
    engine.acquire_all_shards()
    arn = f"{PREFIX}:execution:wide:w"
    engine.submit(StartExecution(arn, wide, "w", "r1", "role", json.dumps({"items": list(range(2_000))})))
    engine.tick(NOW_MS)
    neighbour = started(engine, PASSER, "neighbour")
    engine.tick(NOW_MS)
    assert neighbour.result(timeout=0) == NOW_MS
    assert json.loads(store.load_execution(arn))["status"] == "RUNNING"
    now_ms, ticks = NOW_MS, 2
    while json.loads(store.load_execution(arn))["status"] == "RUNNING":
        now_ms += 1  # each share of children starts a millisecond after the last
        engine.tick(now_ms)
        ticks += 1
    assert json.loads(store.load_execution(arn))["status"] == "SUCCEEDED"
    assert ticks >= 2_000 // 100  # a share (apply_states_max) per step


class HoldingLane:
    """A heavy lane that takes every step and answers none: what reaches it never ran on the engine thread."""

    def __init__(self, *_: object) -> None:
        self.jobs: list = []

    def submit(self, job, reply) -> bool:
        self.jobs.append(job)
        return True

    def close(self) -> None:
        pass


def test_runaway_first_states_cost_the_engine_thread_a_slice_each_and_their_callers_nothing(store):
    bomb = f"{PREFIX}:stateMachine:bomb"
    store.create_state_machine(StateMachineRecord(bomb, "bomb", "STANDARD", json.dumps({
        "QueryLanguage": "JSONata", "StartAt": "B", "States": {"B": {
            "Type": "Pass", "Output": "{% $count($map([1..900000], function($v) { $v * 2 })) %}", "End": True}}}),
        "role", "r1", 0, 0, {}, {}))
    engine = Engine(store, clock=lambda: NOW_MS, evaluation_clock=None, heavy_lane=HoldingLane)
    engine.acquire_all_shards()
    bombs = [started(engine, bomb, f"b{i}") for i in range(20)]
    neighbour = started(engine, PASSER, "neighbour")
    engine.tick(NOW_MS)
    assert neighbour.result(timeout=0) == NOW_MS
    assert all(reply.result(timeout=0) == NOW_MS for reply in bombs)  # answered before any state ran
    assert engine.metrics.heavy_lane_steps.labels("sliced")._value.get() == 20
    engine.tick(NOW_MS)  # their first states, on continuations due now: straight to the lane, no slice
    assert len(engine.heavy.lane.jobs) == 20
    assert engine.metrics.heavy_lane_steps.labels("sliced")._value.get() == 20
    assert not engine.tick(NOW_MS)  # nothing else to do: the lane has them


def test_a_start_is_applied_in_the_first_tick_of_a_flood_of_task_answers_from_the_api(store):
    """SendTaskSuccess calls wait in a queue of their own: the API's starts are not behind them."""
    engine = Engine(store, clock=lambda: NOW_MS, limits=Limits(tick_commands_max=50), evaluation_clock=None)
    engine.acquire_all_shards()
    arn = f"{PREFIX}:execution:waiter:gone"
    answers = [engine.submit(CompleteAttempt(arn, 3, AttemptSucceeded("{}"))) for _ in range(400)]
    neighbour = started(engine, PASSER, "neighbour")
    engine.tick(NOW_MS)
    assert neighbour.result(timeout=0) == NOW_MS
    assert sum(reply.done() for reply in answers) == 49
    while engine.tick(NOW_MS):
        pass
    assert all(isinstance(reply.exception(timeout=0), TaskNotPending) for reply in answers)


# -- the API's queues, per account


def _start(account: str, n: int) -> tuple[StartExecution, None]:
    arn = f"arn:aws:states:us-east-1:{account}:execution:m:run-{n}"
    return StartExecution(arn, arn.replace(":execution:", ":stateMachine:").rsplit(":", 1)[0], f"run-{n}", "r", "",
                          "{}"), None


def test_one_accounts_flood_of_starts_waits_behind_itself_not_in_front_of_another():
    queues = AccountQueues(each_max=10_000)
    for n in range(5_000):
        queues.append(_start("111111111111", n))
    queues.append(_start("222222222222", 0))
    work: list = []
    assert queues.take(work, 10) == 10
    accounts = [command.arn.split(":")[4] for command, _ in work]
    assert accounts.count("222222222222") == 1  # served in the first tick, not after 5,000 others
    assert [command.name for command, _ in work if command.arn.split(":")[4] == "111111111111"] == [
        f"run-{n}" for n in range(9)]  # each account's oldest first
    assert queues.take(work, 10_000) == 4_991 and not queues


def test_the_inbox_bound_is_per_account():
    queues = AccountQueues(each_max=3)
    for n in range(3):
        queues.append(_start("111111111111", n))
    with pytest.raises(InboxFull, match="for this account"):
        queues.append(_start("111111111111", 3))
    queues.append(_start("222222222222", 0))  # another account still has room


@given(st.lists(st.sampled_from(["111111111111", "222222222222", "333333333333"]), max_size=60),
       st.integers(min_value=1, max_value=20))
def test_accounts_are_served_max_min_fairly_and_nothing_is_lost_or_reordered(accounts, budget):
    queues = AccountQueues(each_max=1_000)
    for n, account in enumerate(accounts):
        queues.append(_start(account, n))
    left = {account: accounts.count(account) for account in set(accounts)}
    served: list = []
    while queues:
        tick: list = []
        assert queues.take(tick, budget) == min(budget, sum(left.values()))
        got = {account: sum(1 for c, _ in tick if c.arn.split(":")[4] == account) for account in left}
        for account in got:
            left[account] -= got[account]
        # Max-min: an account that still has work after the tick got at least as much as any other, less one
        most = max(got.values())
        assert all(got[account] >= most - 1 for account in left if left[account] > 0)
        served += tick
    assert sorted(int(c.name.split("-")[1]) for c, _ in served) == list(range(len(accounts)))
    for account in set(accounts):
        mine = [int(c.name.split("-")[1]) for c, _ in served if c.arn.split(":")[4] == account]
        assert mine == sorted(mine)


def test_items_put_back_go_ahead_of_their_accounts_queue_in_their_order_and_dropped_ones_go():
    queues = AccountQueues(each_max=None)
    for n in range(3):
        queues.append(_start("111111111111", n))
    queues.prepend([_start("111111111111", 10), _start("222222222222", 11), _start("111111111111", 12)])
    queues.keep(lambda item: item[0].name != "run-1")
    work: list = []
    queues.take(work, 10)
    names = [command.name for command, _ in work]
    assert sorted(names) == ["run-0", "run-10", "run-11", "run-12", "run-2"]
    assert [name for name in names if name != "run-11"] == ["run-10", "run-12", "run-0", "run-2"]


def test_a_window_serves_each_accounts_due_timers_in_turn_each_its_earliest_first():
    window = TimerWindow(0)
    window.refill(0, lambda *_: [])  # loaded: every timer due within the window is offered
    for n in range(100):
        window.offer(1_000 + n, f"arn:aws:states:us-east-1:111111111111:execution:m:e{n}", "wait", 0)
    window.offer(1_200, "arn:aws:states:us-east-1:222222222222:execution:m:late", "wait", 0)
    in_turn = InTurn()
    assert window.next_due_ms() == 1_000 and len(window) == 101
    due = pop_due([window], 2_000, 10, in_turn)
    assert [arn.rsplit(":", 1)[1] for _, arn, _ in due if "222222222222" in arn] == ["late"]
    assert [at for at, arn, _ in due if "111111111111" in arn] == list(range(1_000, 1_009))
    assert pop_due([window], 1_050, 100, in_turn) == [  # only what is due by then
        (1_000 + n, f"arn:aws:states:us-east-1:111111111111:execution:m:e{n}", "wait") for n in range(9, 51)]
    assert len(window) == 49 and window.next_due_ms() == 1_051


def test_due_timers_fire_earliest_first_across_shards_and_due_together_in_their_executions_start_order():
    def arn(n: int) -> str:
        return f"arn:aws:states:us-east-1:111111111111:execution:m:e{n:03}"
    early, late = TimerWindow(0), TimerWindow(1)
    # Shard 0's timers were due at 100, shard 1's at 200; each started in the reverse of its ARN's order.
    early.refill(1_000, lambda *_: [TimerRow(0, 100, arn(n), "wait", (n, "wait"), 50 - n) for n in range(40)])
    late.refill(1_000, lambda *_: [TimerRow(1, 200, arn(100 + n), "wait", (n, "wait"), 50 - n) for n in range(40)])
    late.offer(200, arn(999), "wait", 0)  # a commit's offer: it started first
    due = pop_due([late, early], 1_000, 64, InTurn())
    assert [at for at, _, _ in due] == [100] * 40 + [200] * 24
    assert [name for _, name, _ in due[:40]] == [arn(n) for n in reversed(range(40))]
    assert [name for _, name, _ in due[40:43]] == [arn(999), arn(139), arn(138)]
    assert len(early) == 0 and len(late) == 17


def test_one_accounts_burst_of_due_timers_leaves_another_accounts_timer_its_turn(store):
    neighbour_machine = f"{OTHER}:stateMachine:waiter"
    store.create_state_machine(StateMachineRecord(neighbour_machine, "waiter", "STANDARD",
                                                  json.dumps(DEFINITIONS[WAITER]), "role", "r1", 0, 0, {}, {}))
    engine = Engine(store, clock=lambda: NOW_MS, limits=Limits(tick_commands_max=50), evaluation_clock=None)
    engine.acquire_all_shards()
    burst = [started(engine, WAITER, f"w{i}") for i in range(400)]
    while engine.tick(NOW_MS):
        pass
    neighbour = started(engine, neighbour_machine, "n")  # its Wait ends after every one of the burst's
    while engine.tick(NOW_MS + 1):
        pass
    assert all(reply.done() for reply in burst) and neighbour.done()
    engine.tick(NOW_MS + 60_001)
    arn = f"{OTHER}:execution:waiter:n"
    assert json.loads(store.load_execution(arn))["status"] == "SUCCEEDED"  # in the burst's first tick
    closed = sum(json.loads(store.load_execution(f"{PREFIX}:execution:waiter:w{i}"))["status"] == "SUCCEEDED"
                 for i in range(400))
    assert closed == 49
    while engine.tick(NOW_MS + 60_001):
        pass


def test_one_accounts_burst_of_task_results_leaves_another_accounts_result_its_turn(store):
    engine = Engine(store, clock=lambda: NOW_MS, limits=Limits(tick_commands_max=50), evaluation_clock=None)
    engine.acquire_all_shards()
    results = [engine.submit(CompleteAttempt(f"{PREFIX}:execution:waiter:gone", 3, AttemptSucceeded("{}")),
                             throttle=False) for _ in range(400)]
    neighbour = engine.submit(CompleteAttempt(f"{OTHER}:execution:waiter:gone", 3, AttemptSucceeded("{}")),
                              throttle=False)
    engine.tick(NOW_MS)
    assert isinstance(neighbour.exception(timeout=0), TaskNotPending)  # applied in the first tick
    assert sum(reply.done() for reply in results) == 49


def test_one_accounts_burst_of_nested_starts_leaves_another_accounts_start_its_turn(store):
    """Engine-to-engine transfers (here a nested StartExecution each) wait per account too."""
    def machine(prefix: str, name: str, definition: dict) -> str:
        arn = f"{prefix}:stateMachine:{name}"
        store.create_state_machine(StateMachineRecord(arn, name, "STANDARD", json.dumps(definition), "role", "r1", 0,
                                                      0, {}, {}))
        return arn

    def nesting(prefix: str, name: str, items: int) -> str:
        child = machine(prefix, f"{name}-child", DEFINITIONS[PASSER])
        return machine(prefix, name, {"StartAt": "M", "States": {"M": {
            "Type": "Map", "ItemsPath": "$.items", "ResultPath": None, "End": True, "ItemProcessor": {
                "StartAt": "T", "States": {"T": {
                    "Type": "Task", "Resource": "arn:aws:states:::states:startExecution", "End": True,
                    "Parameters": {"StateMachineArn": child, "Name.$": "States.Format('c{}', $)"}}}}}}})

    burst, neighbour = nesting(PREFIX, "burst", 600), nesting(OTHER, "neighbour", 1)
    engine = Engine(store, clock=lambda: NOW_MS, limits=Limits(tick_commands_max=50), evaluation_clock=None)
    engine.acquire_all_shards()
    engine.submit(StartExecution(f"{PREFIX}:execution:burst:b", burst, "b", "r1", "role",
                                 json.dumps({"items": list(range(600))})))
    for _ in range(20):  # the Map's iterations schedule their starts: hundreds of transfers ready
        engine.tick(NOW_MS)
    engine.submit(StartExecution(f"{OTHER}:execution:neighbour:n", neighbour, "n", "r1", "role",
                                 json.dumps({"items": [0]})))
    engine.tick(NOW_MS)  # its Task schedules its start
    engine.tick(NOW_MS)  # ... which is served in the next tick's share of transfers
    assert store.load_execution(f"{OTHER}:execution:neighbour-child:c0") is not None
    started_children = sum(store.load_execution(f"{PREFIX}:execution:burst-child:c{i}") is not None
                           for i in range(600))
    assert started_children < 600  # the burst's transfers were still waiting


def test_a_bound_of_nothing_refuses_even_an_accounts_first_command():
    with pytest.raises(InboxFull):
        AccountQueues(each_max=0).append(_start("111111111111", 0))


def test_every_account_is_served_when_a_share_is_smaller_than_the_accounts_waiting():
    queues = AccountQueues(each_max=1_000)
    accounts = [f"{n:012d}" for n in range(12)]
    served = dict.fromkeys(accounts, 0)
    for tick in range(20):
        for account in accounts:  # each keeps its queue topped up
            queues.append(_start(account, tick))
        work: list = []
        queues.take(work, 10)
        for command, _ in work:
            served[command.arn.split(":")[4]] += 1
    assert min(served.values()) >= 15, served  # 200 items over 12 accounts: none is left out


def test_a_call_arriving_while_a_tick_applies_a_burst_is_committed_with_that_tick(store):
    """The caller waits for the rest of the tick in progress, not for it and the next one too."""
    late: list = []

    class CallerArrivesMidTick(Engine):
        def _attempt(self, command, batch, now_ms, reply=None, **kwargs):
            if not late and isinstance(command, FireTimer):  # the burst is being applied: a caller arrives
                late.append(started(self, PASSER, "neighbour"))
            return super()._attempt(command, batch, now_ms, reply, **kwargs)

    engine = timed_engine_with_waits(store, Limits(tick_commands_min=100), 300, CallerArrivesMidTick)
    due_ms = NOW_MS + 60_000
    engine.tick(due_ms)
    assert late and late[0].result(timeout=0) == due_ms  # answered by the tick it arrived in
    while engine.tick(due_ms):
        pass
    events = store.read_history(f"{PREFIX}:execution:passer:neighbour", 0, 10, False)
    assert [event["type"] for event in events][-1] == "ExecutionSucceeded"


def test_behind_a_full_tick_a_waiting_caller_gets_a_tick_of_its_own_and_the_burst_the_next(store):
    engine = timed_engine_with_waits(store, Limits(tick_commands_min=50, tick_commands_max=50), 400)
    due_ms = NOW_MS + 60_000
    assert engine.tick(due_ms) == 50  # a full tick of the burst
    handled = []
    for index in range(6):  # a caller arrives before every tick
        caller = started(engine, PASSER, f"caller-{index}")
        handled.append(engine.tick(due_ms))
        assert caller.result(timeout=0) == due_ms
    # callers-first ticks take the caller alone; the ticks between them are ordinary (the caller and 49 timers)
    assert handled == [1, 50, 1, 50, 1, 50]


def test_an_api_backlog_gets_no_callers_first_ticks_and_leaves_the_timers_their_share(store):
    class Gathered:
        def __init__(self):
            self.ticks = []

        def gathered(self, engine, taken, callers_only, kinds):
            self.ticks.append((list(taken), callers_only))

        def __getattr__(self, name):  # the probe's other calls: nothing to record here
            return lambda *args, **kwargs: None

    engine = timed_engine_with_waits(store, Limits(tick_commands_min=60, tick_commands_max=60), 300)
    engine.probe = Gathered()
    starts = [started(engine, PASSER, f"p{i}") for i in range(600)]  # the API is the burst, beside 300 timers due
    for _ in range(10):
        engine.tick(NOW_MS + 60_000)
    assert not any(callers_only for _, callers_only in engine.probe.ticks)
    assert [taken[0] for taken, _ in engine.probe.ticks] == [30] * 10  # half of every tick, the timers the rest
    assert [taken[5] for taken, _ in engine.probe.ticks] == [30] * 10
    assert sum(reply.done() for reply in starts) == 300
