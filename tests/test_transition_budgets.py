"""Each account's StateTransition budget (engine/transitions.py): a loop of pure states over its account's bucket
waits on continuation timers in its shard, at the bucket's rate, and still runs to its end; other accounts and
Express executions go on unthrottled. The engine is driven on a virtual clock, with a real SQLite store."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from statewright.asl.definition import parse_definition
from statewright.decider import Services
from statewright.decider.execution import ExecutionState
from statewright.engine.commands import StartExecution
from statewright.engine.engine import Engine
from statewright.engine.heavy_lane import Decided
from statewright.engine.heavy_lane import decide as lane_decide
from statewright.engine.limits import Limits
from statewright.engine.transitions import TransitionBudgets, within
from statewright.store.base import StateMachineRecord
from statewright.store.sqlite import SqliteStore

SLOW, FAST = "111111111111", "222222222222"
# 200 passes of a counter: 400 states (Pass and Choice), then Done
LOOP = {"StartAt": "Count", "States": {
    "Count": {"Type": "Pass", "Parameters": {"n.$": "States.MathAdd($.n, 1)"}, "Next": "More"},
    "More": {"Type": "Choice", "Choices": [{"Variable": "$.n", "NumericLessThan": 200, "Next": "Count"}],
             "Default": "Done"},
    "Done": {"Type": "Succeed"}}}


def _machine(account: str) -> str:
    return f"arn:aws:states:us-east-1:{account}:stateMachine:loop"


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=4)
    for account in (SLOW, FAST):
        store.create_state_machine(StateMachineRecord(_machine(account), "loop", "STANDARD", json.dumps(LOOP),
                                                      "role", "r1", 0, 0, {}, {}))
    yield store
    store.close()


def _start(engine: Engine, account: str, name: str) -> str:
    arn = _machine(account).replace(":stateMachine:", ":execution:") + ":" + name
    engine.submit(StartExecution(arn, _machine(account), name, "r1", "role", '{"n": 0}'))
    return arn


def _run(store, rates: dict[str, tuple[float, float]], seconds: float, step_ms: int = 10) -> dict[str, str]:
    """Start one loop per account and tick the engine for ``seconds`` of virtual time; the two executions' ARNs."""
    clock = [1_700_000_000_000]
    engine = Engine(store, clock=lambda: clock[0], limits=Limits(), evaluation_clock=None,
                    transition_rate=lambda region, account: rates.get(account))
    engine.acquire_all_shards()
    arns = {account: _start(engine, account, "run") for account in (SLOW, FAST)}
    end = clock[0] + int(seconds * 1000)
    while clock[0] < end:
        engine.tick(clock[0])
        clock[0] += step_ms
    return arns


def _entered(store, arn: str) -> int:
    events = store.read_history(arn, 0, 100_000, False)
    return sum(1 for event in events if event["type"].endswith("StateEntered"))


def test_a_loop_over_its_accounts_budget_goes_at_the_buckets_rate_and_others_do_not_wait(store):
    arns = _run(store, {SLOW: (20.0, 50.0)}, seconds=2.0)
    fast = json.loads(store.load_execution(arns[FAST]))
    assert fast["status"] == "SUCCEEDED"  # 401 states: no budget, so in a few ticks
    entered = _entered(store, arns[SLOW])
    # A full bucket (20), then 50 a second for 2 s, and one step's first state over it at most
    assert 100 <= entered <= 20 + 50 * 2 + 2, entered
    assert json.loads(store.load_execution(arns[SLOW]))["status"] == "RUNNING"


def test_a_throttled_loop_waits_as_timer_rows_and_survives_a_crash(store):
    rates = {SLOW: (20.0, 400.0)}
    arns = _run(store, rates, seconds=0.5)
    assert json.loads(store.load_execution(arns[SLOW]))["status"] == "RUNNING"
    # The engine is gone (no stop, nothing flushed); another takes its shards and finds the loop's continuation
    clock = [1_700_000_000_000 + 500]
    again = Engine(store, clock=lambda: clock[0], limits=Limits(), evaluation_clock=None,
                   transition_rate=lambda region, account: rates.get(account))
    again.acquire_all_shards()
    while clock[0] < 1_700_000_000_000 + 3_000:
        again.tick(clock[0])
        clock[0] += 10
    assert json.loads(store.load_execution(arns[SLOW]))["status"] == "SUCCEEDED"
    assert _entered(store, arns[SLOW]) == 401  # every state once: none lost, none entered twice


def test_a_budget_leaves_a_whole_share_while_the_bucket_holds_one_and_shortens_it_after():
    services = Services(mint_token=lambda *args: "", activities=set(), apply_states_max=100)
    budgets = TransitionBudgets(lambda region, account: (150.0, 100.0) if account == SLOW else None)
    arn = _machine(SLOW).replace(":stateMachine:", ":execution:") + ":x"
    assert budgets.services_for(arn, services, 0) is services  # a full bucket: the usual share

    entered = SimpleNamespace(effects=SimpleNamespace(events=[{"type": "PassStateEntered"}] * 140))  # a Decision's

    budgets.spent(arn, entered, 0)
    shortened = budgets.services_for(arn, services, 0)
    assert (shortened.apply_states_max, shortened.continue_after_ms) == (10, 10)  # 10 left; then 1 more in 10 ms
    budgets.spent(arn, entered, 0)  # deep in debt: the one state every step enters, and a wait for the debt
    indebted = budgets.services_for(arn, services, 0)
    assert indebted.apply_states_max == 1 and indebted.continue_after_ms == 1_320  # (1 + 1 + 130) / 100 s
    other = _machine(FAST).replace(":stateMachine:", ":execution:") + ":y"
    assert budgets.services_for(other, services, 0) is services


class _LaneHere:
    """The heavy lane, deciding each job at once on the engine's thread (the real one is a process of its own)."""

    def __init__(self, services: Services, limits: Limits, landed) -> None:
        self.services, self.landed, self.steps = services, landed, 0

    def submit(self, job, reply) -> bool:
        self.steps += 1
        state = ExecutionState.from_blob(job.state.to_blob())
        result = lane_decide(job.command, state, parse_definition(job.text()), job.now_ms,
                             within(self.services, job.budget), job.inputs)
        self.landed(Decided.of(job, result), reply)
        return True

    def close(self) -> None:
        pass


HEAVY_LOOP = {"QueryLanguage": "JSONata", "StartAt": "Heavy", "States": {
    "Heavy": {"Type": "Pass", "Output": "{% {'n': 0, 's': $sum([1..150000])} %}", "Next": "Count"},
    "Count": {"Type": "Pass", "Output": "{% {'n': $states.input.n + 1} %}", "Next": "More"},
    "More": {"Type": "Choice", "Choices": [{"Condition": "{% $states.input.n < 2000 %}", "Next": "Count"}],
             "Default": "Done"},
    "Done": {"Type": "Succeed"}}}


def test_steps_decided_in_the_heavy_lane_keep_to_the_budget_too(store):
    machine = _machine(SLOW).replace(":loop", ":heavy")
    store.create_state_machine(StateMachineRecord(machine, "heavy", "STANDARD", json.dumps(HEAVY_LOOP), "role", "r1",
                                                  0, 0, {}, {}))
    clock = [1_700_000_000_000]
    lanes: list[_LaneHere] = []
    engine = Engine(store, clock=lambda: clock[0], limits=Limits(), evaluation_clock=None,
                    transition_rate=lambda region, account: (20.0, 50.0),
                    heavy_lane=lambda services, limits, landed: lanes.append(_LaneHere(services, limits, landed))
                    or lanes[-1])
    engine.acquire_all_shards()
    arn = machine.replace(":stateMachine:", ":execution:") + ":run"
    engine.submit(StartExecution(arn, machine, "run", "r1", "role", "{}"))
    for _ in range(200):  # 2 s
        engine.tick(clock[0])
        clock[0] += 10
    assert lanes[0].steps > 0, "its steps went to the lane"
    assert _entered(store, arn) <= 20 + 50 * 2 + 2  # without the budget in the lane: 4,000 in the same time
