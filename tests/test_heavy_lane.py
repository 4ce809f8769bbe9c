"""The heavy lane (engine/heavy_lane.py): the steps of executions whose evaluation is heavy (past the engine thread's
slice, or of an execution known heavy: a first state, a continuation, a task's result, a retry, a redrive) are
decided in a process of their own, with the same result as on the engine thread; a decision the execution outgrew
meanwhile is applied again, and one a dead lane never sent back is decided on the engine thread. An engine on a real
SQLite store, its ticks driven by the test on a virtual clock; the lane is a real process."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from server import ROLE_ARN, ServerProcess, wait_closed
from statewright.decider.execution import ExecutionState
from statewright.decider.outcomes import AttemptFailed, AttemptSucceeded
from statewright.engine import heavy_lane
from statewright.engine.commands import CompleteAttempt, FireTimer, RedriveExecution, StartExecution, StopExecution
from statewright.engine.engine import Engine
from statewright.engine.heavy_lane import DEFINITIONS_MAX, HeavyLane
from statewright.engine.limits import Limits
from statewright.store.base import StateMachineRecord
from statewright.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow  # the heavy lane's real process: not in the fast tier

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:heavy"
# Sums a range in a JSONata Pass, five times over through a Choice: each Pass is more evaluation than one step's
# share (apply_steps_max below), so every step after the first is a heavy continuation.
HEAVY = {"QueryLanguage": "JSONata", "StartAt": "Sum", "States": {
    "Sum": {"Type": "Pass", "Assign": {"round": "{% ($round ? $round : 0) + 1 %}"},
            "Output": {"sum": "{% $reduce([1..300], function($a, $b) { $a + $b }) %}"}, "Next": "Again"},
    "Again": {"Type": "Choice", "Choices": [{"Condition": "{% $round < 5 %}", "Next": "Sum"}], "Default": "Done"},
    "Done": {"Type": "Succeed", "Output": {"sum": "{% $states.input.sum %}", "rounds": "{% $round %}"}}}}
START_MS = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now_ms = START_MS

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=2)
    store.create_state_machine(StateMachineRecord(MACHINE, "heavy", "STANDARD", json.dumps(HEAVY), "role", "r1",
                                                  0, 0, {}, {}))
    yield store
    store.close()


def make_engine(store, clock, heavy_lane: bool) -> Engine:
    engine = Engine(store, clock=clock, limits=Limits(apply_steps_max=50), heavy_lane=HeavyLane if heavy_lane else None)
    engine.acquire_all_shards()
    return engine


def execution_arn(name: str) -> str:
    return f"arn:aws:states:us-east-1:123456789012:execution:heavy:{name}"


def start(engine: Engine, name: str) -> str:
    arn = execution_arn(name)
    engine.submit(StartExecution(arn, MACHINE, name, "r1", "role", "{}"))
    return arn


def lane_steps(engine: Engine, outcome: str) -> float:
    return engine.metrics.heavy_lane_steps.labels(outcome)._value.get()


def run(engine: Engine, clock: Clock, arn: str, on_sent=None, timeout_s: float = 60) -> dict:
    """Tick until the execution closes: the clock moves past each heavy pause, and the test waits for what the
    lane has in hand to come back. ``on_sent`` is called once, after the first continuation went to the lane."""
    deadline = time.monotonic() + timeout_s
    while True:
        sent = lane_steps(engine, "sent")
        engine.tick(clock.now_ms)
        state = json.loads(engine.store.load_execution(arn))
        if state["status"] != "RUNNING":
            return state
        if on_sent is not None and lane_steps(engine, "sent") > sent:
            on_sent()
            on_sent = None
        if engine.heavy.in_lane:  # the next tick, at the same time, applies what comes back
            while not engine.inbox.decided_waiting():
                assert time.monotonic() < deadline, "the lane did not answer"
                time.sleep(0.01)
            continue
        clock.now_ms += 300


def history(store, arn: str) -> list[dict]:
    return store.read_history(arn, 0, 1_000, False)


def test_the_lane_decides_as_the_engine_thread_does(store):
    clock = Clock()
    inline = make_engine(store, clock, heavy_lane=False)
    inline_state = run(inline, clock, start(inline, "inline"))
    clock.now_ms = START_MS
    laned = make_engine(store, clock, heavy_lane=True)
    try:
        laned_state = run(laned, clock, start(laned, "laned"))
    finally:
        laned.stop()
    assert laned_state["status"] == inline_state["status"] == "SUCCEEDED"
    assert json.loads(laned_state["output"]) == {"sum": 45150, "rounds": 5}
    assert laned_state["output"] == inline_state["output"]
    inline_events, laned_events = history(store, execution_arn("inline")), history(store, execution_arn("laned"))
    # The same events; a laned step's time moves on by the while it waited in the lane (the process starting).
    pairs = zip(inline_events, laned_events, strict=True)
    assert all(laned["timestamp"] >= inline["timestamp"] for inline, laned in pairs)
    untimed = [json.dumps({**event, "timestamp": None}) for event in inline_events]
    assert [json.dumps({**event, "timestamp": None}) for event in laned_events] == \
        [text.replace(":inline", ":laned") for text in untimed]
    assert lane_steps(laned, "applied") == lane_steps(laned, "sent") >= 4  # every continuation after the start
    assert lane_steps(laned, "stale") == lane_steps(laned, "failed") == 0


def test_a_decision_the_execution_outgrew_is_decided_again(store):
    clock = Clock()
    engine = make_engine(store, clock, heavy_lane=True)
    try:
        arn = start(engine, "stopped")
        engine.tick(clock.now_ms)  # the start, and its first heavy Pass
        clock.now_ms += 300
        engine.tick(clock.now_ms)  # the continuation goes to the lane
        assert lane_steps(engine, "sent") == 1
        engine.submit(StopExecution(arn, "Halt", None))
        engine.tick(clock.now_ms)  # the stop lands (before the lane's answer, if it came already: commands first)
        while engine.heavy.in_lane:  # the continuation comes back for a state that moved on: it must change nothing
            time.sleep(0.01)
            engine.tick(clock.now_ms)
    finally:
        engine.stop()
    events = history(store, arn)
    assert [event["type"] for event in events][-2:] == ["PassStateExited", "ExecutionAborted"]
    assert json.loads(store.load_execution(arn))["status"] == "ABORTED"
    assert lane_steps(engine, "stale") == 1 and lane_steps(engine, "applied") == 0


def test_a_lane_that_dies_leaves_its_step_to_the_engine_thread(store):
    clock = Clock()
    engine = make_engine(store, clock, heavy_lane=True)

    def kill_lane() -> None:
        os.kill(engine.heavy.lane._child._process.pid, signal.SIGKILL)

    try:
        state = run(engine, clock, start(engine, "orphaned"), on_sent=kill_lane)
    finally:
        engine.stop()
    assert state["status"] == "SUCCEEDED"
    assert json.loads(state["output"]) == {"sum": 45150, "rounds": 5}
    assert lane_steps(engine, "failed") == 1  # the step in hand, decided again here; later ones in a new process
    assert lane_steps(engine, "applied") >= 1


# -- on a real server, through boto3


def lane_metric(endpoint: str, outcome: str) -> float:
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as response:
        for family in text_string_to_metric_families(response.read().decode()):
            for sample in family.samples:
                if sample.name == "statewright_heavy_lane_steps_total" and sample.labels["outcome"] == outcome:
                    return sample.value
    return 0.0


def children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.add(int(entry.name))
            except (OSError, IndexError):
                continue
    return found


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_runaway_runs_in_the_lane_beside_others_and_dies_with_the_server(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    try:
        sfn = server.client()
        runaway = sfn.create_state_machine(name="runaway", roleArn=ROLE_ARN, definition=json.dumps({
            "QueryLanguage": "JSONata", "StartAt": "Sum", "States": {
                "Sum": {"Type": "Pass", "Output": {"sum": "{% $reduce([1..3000], function($a, $b) { $a + $b }) %}"},
                        "Next": "Again"},
                "Again": {"Type": "Choice", "Choices": [{"Condition": "{% $states.input.sum > 0 %}", "Next": "Sum"}],
                          "Default": "Done"},
                "Done": {"Type": "Succeed"}}}))["stateMachineArn"]
        looping = sfn.start_execution(stateMachineArn=runaway)["executionArn"]
        plain = sfn.create_state_machine(name="plain", roleArn=ROLE_ARN, definition=json.dumps(
            {"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": "done", "End": True}}}))["stateMachineArn"]
        deadline = time.monotonic() + 60
        while lane_metric(server.endpoint, "applied") < 3:
            assert time.monotonic() < deadline, "no continuation came back from the heavy lane"
            time.sleep(0.2)
        beside = sfn.start_execution(stateMachineArn=plain)["executionArn"]
        assert wait_closed(sfn, beside)["output"] == '"done"'
        assert sfn.describe_execution(executionArn=looping)["status"] == "RUNNING"
        lanes = children(server.process.pid)
        assert lanes  # the lane's process
    finally:
        server.kill()
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in lanes):  # a SIGKILLed server leaves no process behind
        assert time.monotonic() < deadline, f"processes {lanes} outlived the server"
        time.sleep(0.2)


PARALLEL_MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:branches"
HEAVY_PASS = {"Type": "Pass", "QueryLanguage": "JSONata",
              "Output": {"sum": "{% $reduce([1..300], function($a, $b) { $a + $b }) %}"}}


def test_heavy_branches_take_turns_in_the_lane_instead_of_outdating_each_other(store):
    branches = [{"StartAt": f"{side}1", "States": {f"{side}1": {**HEAVY_PASS, "Next": f"{side}2"},
                                                   f"{side}2": {**HEAVY_PASS, "End": True}}} for side in "AB"]
    store.create_state_machine(StateMachineRecord(
        PARALLEL_MACHINE, "branches", "STANDARD", json.dumps({"StartAt": "Both", "States": {
            "Both": {"Type": "Parallel", "Branches": branches, "End": True}}}), "role", "r1", 0, 0, {}, {}))
    clock = Clock()
    engine = make_engine(store, clock, heavy_lane=True)
    try:
        arn = PARALLEL_MACHINE.replace(":stateMachine:", ":execution:") + ":both"
        engine.submit(StartExecution(arn, PARALLEL_MACHINE, "both", "r1", "role", "{}"))
        state = run(engine, clock, arn)
    finally:
        engine.stop()
    assert state["status"] == "SUCCEEDED"
    assert json.loads(state["output"]) == [{"sum": 45150}, {"sum": 45150}]
    assert lane_steps(engine, "applied") >= 2 and lane_steps(engine, "stale") == 0


def test_stopping_the_engine_stops_the_lane_process(store):
    clock = Clock()
    engine = make_engine(store, clock, heavy_lane=True)
    start(engine, "cut-short")
    engine.tick(clock.now_ms)
    clock.now_ms += 300
    engine.tick(clock.now_ms)  # the continuation goes to the lane, which starts its process
    process = engine.heavy.lane._child._process
    engine.stop()
    assert process.wait(timeout=30) is not None  # bounded: it is killed, not left deciding for nobody


def test_definitions_the_lane_process_dropped_are_sent_again(store):
    """The process keeps the last 100 definitions it parsed; the engine keeps the same list in the same order, so a
    definition the process dropped goes with its text again instead of failing every job of it."""
    clock = Clock()
    engine = make_engine(store, clock, heavy_lane=True)
    machines = [f"{MACHINE}-{index}" for index in range(DEFINITIONS_MAX + 2)]
    for machine in machines:
        store.create_state_machine(StateMachineRecord(machine, machine.rsplit(":", 1)[1], "STANDARD",
                                                      json.dumps(HEAVY), "role", "r1", 0, 0, {}, {}))
    try:
        for round_index, machine in enumerate([*machines, machines[0]]):
            name = f"run-{round_index}"
            arn = machine.replace(":stateMachine:", ":execution:") + f":{name}"
            engine.submit(StartExecution(arn, machine, name, "r1", "role", "{}"))
            assert run(engine, clock, arn)["status"] == "SUCCEEDED"
    finally:
        engine.stop()
    assert lane_steps(engine, "failed") == 0 and lane_steps(engine, "applied") >= len(machines) + 1


def test_a_lane_whose_stream_breaks_leaves_its_steps_to_the_engine_thread(store, monkeypatch):
    """Anything but the lane's own messages on its stdout (here, a print before it starts) ends that process; the
    steps it held are decided on the engine thread, so the execution still runs to its end."""
    monkeypatch.setattr(heavy_lane, "BOOT", "print('surprise'); " + heavy_lane.BOOT)
    clock = Clock()
    engine = make_engine(store, clock, heavy_lane=True)
    try:
        state = run(engine, clock, start(engine, "garbled"))
    finally:
        engine.stop()
    assert state["status"] == "SUCCEEDED"
    assert json.loads(state["output"]) == {"sum": 45150, "rounds": 5}
    # The step it took, if it broke after taking one (under load it may break before the engine hands it any)
    sent = lane_steps(engine, "sent")
    assert lane_steps(engine, "failed") >= sent and lane_steps(engine, "applied") == 0
    assert sent <= 1  # a lane that cannot run here is not started again for every step


# -- the engine thread's slice: every evaluating step past it goes to the lane

SLICE_MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:sliced"
ACTIVITY = "arn:aws:states:us-east-1:123456789012:activity:work"
SUM_5000 = "{% $reduce([1..5000], function($a, $b) { $a + $b }) %}"  # about 15,000 steps: past the slice (4,000)


def sliced_engine(store, clock, definition: dict, heavy_lane: bool = True) -> Engine:
    store.create_state_machine(StateMachineRecord(SLICE_MACHINE, "sliced", "STANDARD", json.dumps(definition),
                                                  "role", "r1", 0, 0, {}, {}))
    engine = Engine(store, clock=clock, heavy_lane=HeavyLane if heavy_lane else None)
    engine.acquire_all_shards()
    engine.note_activity(ACTIVITY, True)
    return engine


def start_sliced(engine: Engine, name: str):
    arn = SLICE_MACHINE.replace(":stateMachine:", ":execution:") + f":{name}"
    return arn, engine.submit(StartExecution(arn, SLICE_MACHINE, name, "r1", "role", "{}"))


def test_a_first_state_past_the_slice_is_entered_by_the_lane_and_the_caller_answered_at_once(store):
    definition = {"QueryLanguage": "JSONata", "StartAt": "Sum", "States": {
        "Sum": {"Type": "Pass", "Output": {"sum": SUM_5000}, "End": True}}}
    clock = Clock()
    engine = sliced_engine(store, clock, definition)
    try:
        arn, reply = start_sliced(engine, "first")
        engine.tick(clock.now_ms)
        assert reply.result(timeout=0) == clock.now_ms  # answered by the tick that committed the start
        assert [event["type"] for event in history(store, arn)] == ["ExecutionStarted"]
        state = run(engine, clock, arn)
    finally:
        engine.stop()
    assert state["status"] == "SUCCEEDED" and json.loads(state["output"]) == {"sum": 12502500}
    events = history(store, arn)
    assert [(event["type"], event["previousEventId"]) for event in events] == [
        ("ExecutionStarted", 0), ("PassStateEntered", 0), ("PassStateExited", 2), ("ExecutionSucceeded", 3)]
    assert lane_steps(engine, "sliced") == 1 and lane_steps(engine, "applied") == 1


def scheduled_id(store, arn: str) -> int:
    return next(event["id"] for event in reversed(history(store, arn)) if event["type"] == "ActivityScheduled")


def test_a_task_result_past_the_slice_is_decided_in_the_lane_and_answered_after_its_commit(store):
    definition = {"QueryLanguage": "JSONata", "StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": ACTIVITY, "Output": {"got": "{% $states.result %}", "sum": SUM_5000},
                 "End": True}}}
    clock = Clock()
    engine = sliced_engine(store, clock, definition)
    try:
        arn, _ = start_sliced(engine, "result")
        engine.tick(clock.now_ms)
        reply = engine.submit(CompleteAttempt(arn, scheduled_id(store, arn), AttemptSucceeded('"done"')))
        engine.tick(clock.now_ms)  # sliced: the lane has it, and the caller waits for its commit
        assert lane_steps(engine, "sliced") == 1 and not reply.done()
        state = run(engine, clock, arn)
        assert reply.result(timeout=10) is True
    finally:
        engine.stop()
    assert state["status"] == "SUCCEEDED" and json.loads(state["output"]) == {"got": "done", "sum": 12502500}


def test_a_heavy_task_retries_in_the_lane_after_its_first_slice(store):
    definition = {"QueryLanguage": "JSONata", "StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": ACTIVITY, "Arguments": {"sum": SUM_5000},
                 "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 3}], "End": True}}}
    clock = Clock()
    engine = sliced_engine(store, clock, definition)
    try:
        arn, reply = start_sliced(engine, "retries")
        engine.tick(clock.now_ms)
        assert reply.result(timeout=0) == clock.now_ms
        last = 0
        for _ in range(4):  # the first schedule, then three retries: each decided in the lane
            while not any(event["type"] == "ActivityScheduled" and event["id"] > last for event in history(store, arn)):
                run_once(engine, clock)
            last = scheduled_id(store, arn)
            engine.submit(CompleteAttempt(arn, last, AttemptFailed("Boom", "again")))
        state = run(engine, clock, arn)
    finally:
        engine.stop()
    assert state["status"] == "FAILED" and state["error"] == "Boom"
    assert lane_steps(engine, "sliced") == 1  # the engine thread tried one slice; the lane decided the rest
    assert lane_steps(engine, "applied") >= 7  # the first state, three results and three retry timers


def run_once(engine: Engine, clock: Clock) -> None:
    engine.tick(clock.now_ms)
    if engine.heavy.in_lane:
        deadline = time.monotonic() + 60
        while not engine.inbox.decided_waiting():
            assert time.monotonic() < deadline, "the lane did not answer"
            time.sleep(0.01)
    else:
        clock.now_ms += 300


def test_a_redrive_past_the_slice_is_decided_in_the_lane(store):
    definition = {"QueryLanguage": "JSONata", "StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": ACTIVITY, "End": True, "Output": {"sum": SUM_5000}}}}
    clock = Clock()
    engine = sliced_engine(store, clock, definition)
    try:
        arn, _ = start_sliced(engine, "redriven")
        engine.tick(clock.now_ms)
        engine.submit(CompleteAttempt(arn, scheduled_id(store, arn), AttemptFailed("Boom", None)))
        engine.tick(clock.now_ms)
        assert json.loads(store.load_execution(arn))["status"] == "FAILED"
        clock.now_ms += 1_000
        redriven = engine.submit(RedriveExecution(arn))
        engine.tick(clock.now_ms)  # the redrive schedules the Task again: light, decided here
        assert redriven.result(timeout=10) == clock.now_ms
        reply = engine.submit(CompleteAttempt(arn, scheduled_id(store, arn), AttemptSucceeded("{}")))
        state = run(engine, clock, arn)
        assert reply.result(timeout=10) is True
    finally:
        engine.stop()
    assert state["status"] == "SUCCEEDED" and json.loads(state["output"]) == {"sum": 12502500}
    assert lane_steps(engine, "sliced") == 1 and lane_steps(engine, "applied") == 1


def test_a_nested_childs_result_past_the_slice_is_decided_in_the_lane_and_acknowledged_after_its_commit(store):
    child = "arn:aws:states:us-east-1:123456789012:stateMachine:light-child"
    store.create_state_machine(StateMachineRecord(child, "light-child", "STANDARD", json.dumps(
        {"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": "done", "End": True}}}), "role", "r1", 0, 0,
        {}, {}))
    definition = {"QueryLanguage": "JSONata", "StartAt": "Nested", "States": {
        "Nested": {"Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2",
                   "Arguments": {"StateMachineArn": child, "Name": "kid"},
                   "Output": {"child": "{% $states.result.Output %}", "sum": SUM_5000}, "End": True}}}
    clock = Clock()
    engine = sliced_engine(store, clock, definition)
    try:
        arn, _ = start_sliced(engine, "parent")
        state = run(engine, clock, arn)
        kid = "arn:aws:states:us-east-1:123456789012:execution:light-child:kid"
        for _ in range(3):  # the transfer goes on after the lane's decision landed: it acknowledges its dispatch
            engine.tick(clock.now_ms)
    finally:
        engine.stop()
    assert state["status"] == "SUCCEEDED" and json.loads(state["output"]) == {"child": "done", "sum": 12502500}
    assert lane_steps(engine, "sliced") == 1  # the engine thread gave the child's result one slice
    assert [dispatch for shard in range(2) for dispatch in store.pending_dispatches(shard)
            if dispatch.execution_arn == kid] == []


def test_a_nested_start_whose_next_states_are_heavy_is_decided_in_the_lane(store):
    """A startExecution without .sync: the child's start is the task's result, and what follows it in the parent
    gets a slice of the engine thread, then the lane, as any task result does."""
    child = "arn:aws:states:us-east-1:123456789012:stateMachine:plain-child"
    store.create_state_machine(StateMachineRecord(child, "plain-child", "STANDARD", json.dumps(
        {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}), "role", "r1", 0, 0, {}, {}))
    definition = {"QueryLanguage": "JSONata", "StartAt": "Nested", "States": {
        "Nested": {"Type": "Task", "Resource": "arn:aws:states:::states:startExecution",
                   "Arguments": {"StateMachineArn": child, "Name": "kid"},
                   "Output": {"started": "{% $exists($states.result.ExecutionArn) %}", "sum": SUM_5000},
                   "End": True}}}
    clock = Clock()
    engine = sliced_engine(store, clock, definition)
    try:
        arn, _ = start_sliced(engine, "parent")
        state = run(engine, clock, arn)
    finally:
        engine.stop()
    assert state["status"] == "SUCCEEDED" and json.loads(state["output"]) == {"started": True, "sum": 12502500}
    assert lane_steps(engine, "sliced") == 1  # the engine thread gave the start's result one slice
    assert [event["type"] for event in history(store, arn)][2:5] == ["TaskScheduled", "TaskStarted", "TaskSucceeded"]


def test_one_accounts_heavy_steps_wait_behind_themselves_not_in_front_of_another_accounts(tmp_path):
    """The lane serves the accounts in turn: a step of another account waits for at most a step of each account
    before it, not for every step the first account sent ahead of it."""
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=2)
    waiting_then_heavy = {"QueryLanguage": "JSONata", "StartAt": "W", "States": {
        "W": {"Type": "Wait", "Seconds": 1, "Next": "Sum"},
        "Sum": {"Type": "Pass", "Output": "{% $reduce([1..3000], function($a, $b) { $a + $b }) %}", "End": True}}}
    machines = {account: f"arn:aws:states:us-east-1:{account}:stateMachine:heavy"
                for account in ("123456789012", "210987654321")}
    for machine in machines.values():
        store.create_state_machine(StateMachineRecord(machine, "heavy", "STANDARD", json.dumps(waiting_then_heavy),
                                                      "role", "r1", 0, 0, {}, {}))
    engine = Engine(store, clock=Clock(), heavy_lane=None)
    engine.acquire_all_shards()
    arns = [f"{machines['123456789012'].replace(':stateMachine:', ':execution:')}:burst-{n}" for n in range(6)]
    arns.append(f"{machines['210987654321'].replace(':stateMachine:', ':execution:')}:neighbour")
    for arn in arns:
        name = arn.rsplit(":", 1)[1]
        engine.submit(StartExecution(arn, arn.rsplit(":", 1)[0].replace(":execution:", ":stateMachine:"), name, "r1",
                                     "role", "{}"))
    while engine.tick(START_MS):
        pass
    landed: list[str] = []
    lane = HeavyLane(engine.services, Limits(), lambda decided, reply: landed.append(decided.arn))
    try:
        for arn in arns:  # the first account's six, then the other's one
            state = ExecutionState.from_blob(store.load_execution(arn))
            (timer_id, due_ms), = ((timer, due) for timer, due in state.timers.items() if timer.startswith("wait"))
            key = (state.state_machine_arn, state.revision_id)
            job = heavy_lane.Job(FireTimer(arn, timer_id, due_ms), state, key,
                                 lambda key=key: store.get_revision(*key)[0], due_ms, engine.tokens, set())
            assert lane.submit(job, None)
        deadline = time.monotonic() + 60
        while len(landed) < len(arns):
            assert time.monotonic() < deadline, "the lane did not answer"
            time.sleep(0.01)
    finally:
        lane.close()
        engine.stop()
        store.close()
    # Two were in the process already; the other account's comes within the next two, not after the other four
    assert landed.index(arns[-1]) <= 3, landed
    assert sorted(landed) == sorted(arns)
