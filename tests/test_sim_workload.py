"""The simulator's workload generator: valid definitions, deterministic from the seed, covering the States Language
the engine runs; inputs the definitions can read; worker plans that mean what their behaviour says."""

from __future__ import annotations

import ast
import hashlib
import heapq
import json
import os
import random
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from itertools import count, pairwise
from pathlib import Path
from typing import Any

import pytest

from server import ROLE_ARN
from statewright.asl.definition import parse_definition
from statewright.decider.execution import ExecutionState
from statewright.decider.outcomes import AttemptFailed, AttemptSucceeded
from statewright.engine.commands import CompleteAttempt, Heartbeat, StartAttempt, StartExecution
from statewright.engine.engine import Engine
from statewright.engine.timers import REFILL_MARGIN_MS, WINDOW_MS
from statewright.sim import workload
from statewright.sim.workload import (
    DEPTH_MAX,
    FAIL_ERRORS,
    ITEMS_MAX,
    STATES_MAX,
    TASK_TIMEOUT_SECONDS,
    TOP_FIELDS,
    UNNAMED_ERROR,
    WAIT_SECONDS_MAX,
    WORKER_ERRORS,
    SendTaskFailure,
    SendTaskHeartbeat,
    SendTaskSuccess,
    generate,
    generate_input,
    worker_plan,
)
from statewright.store.base import ActivityRecord, Dispatch, StateMachineRecord
from statewright.store.sqlite import SqliteStore

SEEDS = range(500)
ACTIVITIES = tuple(f"arn:aws:states:us-east-1:123456789012:activity:sim-{i}" for i in range(3))
CHILDREN = tuple(f"arn:aws:states:us-east-1:123456789012:stateMachine:sim-child-{i}" for i in range(2))
TERMINAL = ("Succeed", "Fail")


def spec_for(seed: int) -> workload.MachineSpec:
    """Odd seeds may start child executions; even ones run activities only."""
    return generate(random.Random(seed), ACTIVITIES, CHILDREN if seed % 2 else ())


# -- walking a definition


def machines(definition: dict, depth: int = 0) -> Iterator[tuple[dict, int]]:
    """Every States collection with its nesting depth (0 at the top level)."""
    yield definition, depth
    for state in definition["States"].values():
        for inner in state.get("Branches", []) + ([state["ItemProcessor"]] if "ItemProcessor" in state else []):
            yield from machines(inner, depth + 1)


def all_states(definition: dict) -> Iterator[tuple[str, dict]]:
    for machine, _ in machines(definition):
        yield from machine["States"].items()


def transitions(state: dict) -> list[str]:
    found = [state["Next"]] if "Next" in state else []
    found += [rule["Next"] for rule in state.get("Choices", [])]
    found += [state["Default"]] if "Default" in state else []
    return found + [catcher["Next"] for catcher in state.get("Catch", [])]


def rule_features(rule: dict) -> Iterator[str]:
    for key, value in rule.items():
        if key in ("And", "Or"):
            yield key
            for inner in value:
                yield from rule_features(inner)
        elif key == "Not":
            yield key
            yield from rule_features(value)
        elif key not in ("Variable", "Next", "Assign"):
            yield f"Choice:{key}"
            if key != "Condition" and rule["Variable"].startswith("$") and not rule["Variable"].startswith("$."):
                yield "Choice:variable"


def state_features(state: dict) -> Iterator[str]:
    kind = state["Type"]
    yield kind
    if state.get("QueryLanguage") == "JSONata":
        yield f"JSONata:{kind}"
    for key in ("Result", "Parameters", "InputPath", "OutputPath", "ResultPath", "ResultSelector", "Assign",
                "Seconds", "SecondsPath", "TimeoutSeconds", "HeartbeatSeconds", "ItemSelector", "ItemsPath",
                "Default", "CausePath", "Output"):
        if key in state:
            yield f"{kind}.{key}"
    resource = state.get("Resource", "")
    if resource.startswith("arn:aws:states:::states:startExecution"):
        yield f"startExecution{resource.removeprefix('arn:aws:states:::states:startExecution')}"
    elif resource:
        yield "activity"
    if "$$.Task.Token" in json.dumps(state.get("Parameters", {})):
        yield "token in child input"
    if kind == "Parallel":
        yield f"Parallel:{len(state['Branches'])} branches"
    if kind == "Map":
        yield f"Map:MaxConcurrency {state['MaxConcurrency']}"
    for rule in state.get("Choices", []):
        yield from rule_features(rule)
    yield from handling_features(state)


def handling_features(state: dict) -> Iterator[str]:
    for retrier in state.get("Retry", []):
        yield "Retry"
        yield from (f"Retry:{name}" for name in retrier["ErrorEquals"])
        yield from (f"Retry.{key}" for key in retrier if key != "ErrorEquals")
        if retrier.get("JitterStrategy") == "FULL":
            yield "Retry:jitter FULL"
    for catcher in state.get("Catch", []):
        yield "Catch"
        yield from (f"Catch:{name}" for name in catcher["ErrorEquals"])
        yield from (f"Catch.{key}" for key in catcher if key not in ("ErrorEquals", "Next"))


def intrinsic_names(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from intrinsic_names(item)
    elif isinstance(value, list):
        for item in value:
            yield from intrinsic_names(item)
    elif isinstance(value, str) and value.startswith("States."):
        yield value.split("(", 1)[0]


def features(definition: dict) -> set[str]:
    found = {"definition.TimeoutSeconds"} if "TimeoutSeconds" in definition else set()
    for _, state in all_states(definition):
        found.update(state_features(state))
    found.update(intrinsic_names(definition))
    return found


# -- definitions


@pytest.mark.parametrize("seed", SEEDS)
def test_definition_is_valid_and_round_trips_through_json(seed):
    spec = spec_for(seed)
    text = json.dumps(spec.definition)
    assert json.loads(text) == spec.definition
    parse_definition(text)  # raises InvalidDefinition with every diagnostic


def test_same_seed_same_workload():
    for seed in range(50):
        first, again = random.Random(seed), random.Random(seed)
        spec = generate(first, ACTIVITIES, CHILDREN)
        assert spec == generate(again, ACTIVITIES, CHILDREN)
        assert generate_input(first, spec) == generate_input(again, spec)
        assert worker_plan(first, 30, 10) == worker_plan(again, 30, 10)


def digest(seeds: range) -> str:
    """What the workload of these seeds is, in one hash."""
    parts = []
    for seed in seeds:
        rng = random.Random(seed)
        spec = generate(rng, ACTIVITIES, CHILDREN)
        parts.append([spec.definition, generate_input(rng, spec), repr(worker_plan(rng, 20, 8))])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


@pytest.mark.slow  # seconds of examples: not in the fast tier
def test_the_workload_does_not_depend_on_the_process():
    """Hash randomization changes set order between processes; no draw may depend on it."""
    code = "import sys, test_sim_workload as t; print(t.digest(range(40)))"
    tests = str(Path(__file__).parent)
    results = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(hash_seed), "PYTHONPATH": tests}).stdout
               for hash_seed in (1, 2)}
    assert results == {digest(range(40)) + "\n"}


def test_every_feature_appears_over_the_seeds():
    found: set[str] = set()
    for seed in SEEDS:
        found |= features(spec_for(seed).definition)
    expected = {
        "Pass", "Choice", "Wait", "Succeed", "Fail", "Task", "Parallel", "Map",
        "Pass.Result", "Pass.Parameters", "Pass.InputPath", "Pass.OutputPath", "Pass.ResultPath", "Pass.Assign",
        "Task.OutputPath", "Succeed.OutputPath", "Choice.Default", "Choice.Assign", "Fail.CausePath",
        "Choice:NumericEquals", "Choice:NumericLessThan", "Choice:NumericGreaterThan",
        "Choice:NumericLessThanEquals", "Choice:NumericGreaterThanEquals", "Choice:NumericLessThanPath",
        "Choice:StringEquals", "Choice:StringMatches", "Choice:StringLessThan", "Choice:BooleanEquals",
        "Choice:IsNumeric", "Choice:IsString", "Choice:IsNull", "Choice:IsTimestamp", "Choice:IsPresent",
        "Choice:variable", "And", "Or", "Not",
        "Wait.Seconds", "Wait.SecondsPath",
        "JSONata:Pass", "Pass.Output", "JSONata:Choice", "Choice:Condition", "JSONata:Wait",
        "activity", "Task.TimeoutSeconds", "Task.HeartbeatSeconds", "Task.Parameters", "Task.ResultSelector",
        "startExecution", "startExecution.sync", "startExecution.sync:2", "startExecution.waitForTaskToken",
        "token in child input",
        "Retry", "Retry:States.ALL", "Retry:States.Timeout", "Retry:States.TaskFailed",
        "Retry:States.HeartbeatTimeout", *(f"Retry:{name}" for name in WORKER_ERRORS),
        "Retry.IntervalSeconds", "Retry.BackoffRate", "Retry.MaxAttempts", "Retry.MaxDelaySeconds",
        "Retry:jitter FULL",
        "Catch", "Catch:States.ALL", "Catch.ResultPath", "Catch.Assign", *(f"Catch:{name}" for name in FAIL_ERRORS),
        "Parallel:2 branches", "Parallel:3 branches", "Parallel.Parameters", "Parallel.ResultSelector",
        "Map.ItemsPath", "Map.ItemSelector", "Map.ResultSelector",
        *(f"Map:MaxConcurrency {n}" for n in range(4)),
        "definition.TimeoutSeconds",
        "States.Format", "States.MathAdd", "States.UUID", "States.Array", "States.Hash", "States.ArrayLength",
        "States.JsonToString", "States.ArrayPartition", "States.Base64Encode", "States.MathRandom",
    }
    assert expected - found == set()


@pytest.mark.parametrize("states_max", [1, 3, STATES_MAX, 30])
def test_size_depth_and_forward_only_transitions(states_max):
    for seed in range(200):
        spec = generate(random.Random(seed), ACTIVITIES, CHILDREN, states_max=states_max)
        assert len(list(all_states(spec.definition))) <= states_max
        assert max(depth for _, depth in machines(spec.definition)) <= DEPTH_MAX
        for machine, _ in machines(spec.definition):
            assert_acyclic(machine["States"])


def assert_acyclic(states: dict) -> None:
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"a loop through {path}"
        if name not in done:
            for target in transitions(states[name]):
                visit(target, (*path, name))
            done.add(name)

    for name in states:
        visit(name, ())


def test_every_attempt_has_a_deadline_or_ends_on_its_own():
    """Activity Tasks and task tokens time out; HeartbeatSeconds stays below TimeoutSeconds."""
    for seed in SEEDS:
        for _, state in all_states(spec_for(seed).definition):
            resource = state.get("Resource", "")
            if state["Type"] != "Task" or resource.endswith((":startExecution", ".sync", ".sync:2")):
                continue
            low, high = TASK_TIMEOUT_SECONDS
            assert low <= state["TimeoutSeconds"] <= high
            assert state.get("HeartbeatSeconds", 0) < state["TimeoutSeconds"]


def test_spec_names_what_the_definition_calls():
    for seed in SEEDS:
        spec = spec_for(seed)
        resources = [state["Resource"] for _, state in all_states(spec.definition) if "Resource" in state]
        activities = [resource for resource in resources if ":activity:" in resource]
        assert sorted(spec.activity_arns) == sorted(set(activities))
        children = [state["Parameters"]["StateMachineArn"] for _, state in all_states(spec.definition)
                    if state.get("Resource", "").startswith(workload.START_EXECUTION)]
        assert sorted(spec.child_machine_arns) == sorted(set(children))
        patterns = {resource.removeprefix(workload.START_EXECUTION).lstrip(".") for resource in resources
                    if resource.startswith(workload.START_EXECUTION)}
        assert spec.nested_patterns == patterns
        assert spec.uses_task_tokens == ("waitForTaskToken" in patterns)
        assert set(spec.input_fields) <= set(TOP_FIELDS)
        if seed % 2 == 0:
            assert not spec.child_machine_arns


def test_without_activities_or_children_there_are_no_tasks():
    for seed in range(100):
        spec = generate(random.Random(seed), ())
        assert all(state["Type"] != "Task" for _, state in all_states(spec.definition))


def test_worker_errors_are_the_ones_rules_name():
    named: Counter[str] = Counter()
    for seed in SEEDS:
        for _, state in all_states(spec_for(seed).definition):
            for rule in state.get("Retry", []) + state.get("Catch", []):
                named.update(rule["ErrorEquals"])
    assert set(WORKER_ERRORS) <= set(named)
    assert UNNAMED_ERROR not in named


# -- inputs


def test_inputs_have_the_fields_the_paths_read():
    dropped = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        spec = spec_for(seed)
        data = generate_input(rng, spec)
        missing = set(TOP_FIELDS) - set(data)
        assert len(missing) <= 1 and missing <= spec.input_fields
        dropped += bool(missing)
        for item in [data, *data.get("items", [])]:
            assert 0 <= item.get("wait_s", 0) <= WAIT_SECONDS_MAX
        assert len(data.get("items", [])) <= ITEMS_MAX
        json.dumps(data)
    assert dropped < len(SEEDS) * 0.05  # a path that does not resolve (States.Runtime) stays rare


@pytest.mark.slow  # seconds of examples: not in the fast tier
@pytest.mark.parametrize("answered", [False, True], ids=["unanswered", "workers"])
def test_generated_executions_close_and_rarely_on_a_runtime_error(tmp_path, answered):
    """Without workers every attempt times out; with them each attempt goes as a worker plan says. Either way
    every execution must close (the definitions are DAGs with deadlines), and few may fail on a path that does
    not resolve. The real engine on SQLite, on a virtual clock."""
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=4)
    for arn in ACTIVITIES:
        store.create_activity(ActivityRecord(arn, arn.rsplit(":", 1)[1], 0))
    clock = [1_700_000_000_000]
    engine = Engine(store, clock=lambda: clock[0])
    engine.acquire_all_shards()
    workers = Workers(engine, store, clock) if answered else None
    executions = [start_generated(store, engine, seed) for seed in range(200)]
    run_until_closed(engine, store, clock, executions, workers)
    closed = [ExecutionState.from_blob(store.load_execution(arn)) for arn in executions]
    store.close()
    assert [state.arn for state in closed if state.is_open] == []
    runtime = [state.arn for state in closed if state.error in ("States.Runtime", "States.QueryEvaluationError")]
    assert len(runtime) < len(closed) * 0.05
    if workers is not None:
        assert sum(state.status == "SUCCEEDED" for state in closed) > len(closed) / 3
        assert set(workers.behaviours) == {"succeed", "fail", "duplicate", "overrun", "late", "die", "stall"}


class Workers:
    """Simulated activity workers: an attempt is started when it is dispatched, then answered as its plan says."""

    def __init__(self, engine: Engine, store: SqliteStore, clock: list[int]) -> None:
        self.engine, self.store, self.clock = engine, store, clock
        self.rng = random.Random(0)
        self.queue: list[tuple[int, int, Heartbeat | CompleteAttempt]] = []  # (due_ms, order, command)
        self.order = count()
        self.behaviours: Counter[str] = Counter()
        engine.edges.dispatch = self.receive

    def receive(self, dispatch: Dispatch) -> None:
        arn, scheduled_id = dispatch.execution_arn, dispatch.payload["scheduled_id"]
        details = self.store.read_history(arn, scheduled_id - 1, 1, False)[0]["activityScheduledEventDetails"]
        plan = worker_plan(self.rng, details["timeoutInSeconds"], details.get("heartbeatInSeconds"))
        self.behaviours[plan.behaviour] += 1
        self.engine.submit(StartAttempt(arn, scheduled_id))
        for action in plan.actions:
            if isinstance(action, SendTaskHeartbeat):
                command: Heartbeat | CompleteAttempt = Heartbeat(arn, scheduled_id)
            elif isinstance(action, SendTaskSuccess):
                command = CompleteAttempt(arn, scheduled_id, AttemptSucceeded(json.dumps(action.output)))
            else:
                command = CompleteAttempt(arn, scheduled_id, AttemptFailed(action.error, action.cause))
            heapq.heappush(self.queue, (self.clock[0] + action.at_ms, next(self.order), command))

    def submit_due(self) -> int | None:
        """Hand the engine what is due now; the time of the next action, if any."""
        while self.queue and self.queue[0][0] <= self.clock[0]:
            self.engine.submit(heapq.heappop(self.queue)[2])
        return self.queue[0][0] if self.queue else None


def run_until_closed(engine: Engine, store: SqliteStore, clock: list[int], executions: list[str],
                     workers: Workers | None, virtual_ms_max: int = 7 * 24 * 3600 * 1000) -> None:
    """Tick, jumping the virtual clock to the next due timer or worker action, or past the loaded timer window
    while executions are open, for at most ``virtual_ms_max``."""
    end_ms = clock[0] + virtual_ms_max
    while clock[0] < end_ms:
        next_action_ms = workers.submit_due() if workers else None
        if engine.tick(clock[0]):
            continue
        due = [window.next_due_ms() for window in engine.windows.values() if window.next_due_ms() is not None]
        due += [next_action_ms] if next_action_ms is not None else []
        if due:
            clock[0] = max(clock[0], min(due))
        elif any(ExecutionState.from_blob(store.load_execution(arn)).is_open for arn in executions):
            clock[0] += WINDOW_MS - REFILL_MARGIN_MS  # the window loads the next stretch of timer rows
        else:
            return


def start_generated(store: SqliteStore, engine: Engine, seed: int) -> str:
    rng = random.Random(seed)
    spec = generate(rng, ACTIVITIES)
    machine_arn = f"arn:aws:states:us-east-1:123456789012:stateMachine:sim-{seed}"
    store.create_state_machine(StateMachineRecord(machine_arn, f"sim-{seed}", "STANDARD", json.dumps(spec.definition),
                                                  ROLE_ARN, "r1", 0, 0, {}, {}))
    arn = machine_arn.replace(":stateMachine:", ":execution:") + ":run"
    engine.submit(StartExecution(arn, machine_arn, "run", "r1", ROLE_ARN, json.dumps(generate_input(rng, spec))))
    return arn


# -- worker plans


def answers(plan: workload.WorkerPlan) -> list[SendTaskSuccess | SendTaskFailure]:
    return [action for action in plan.actions if not isinstance(action, SendTaskHeartbeat)]


def heartbeat_gaps_ms(plan: workload.WorkerPlan, until_ms: int) -> list[int]:
    """The silences between receiving the attempt, its heartbeats and ``until_ms``."""
    times = [0, *(a.at_ms for a in plan.actions if isinstance(a, SendTaskHeartbeat) and a.at_ms < until_ms), until_ms]
    return [b - a for a, b in pairwise(times)]


@pytest.mark.parametrize("heartbeat", [None, "some"])
def test_worker_plans_do_what_their_behaviour_says(heartbeat):
    seen: Counter[str] = Counter()
    for seed in range(1000):
        rng = random.Random(seed)
        timeout_s = rng.randint(*TASK_TIMEOUT_SECONDS)
        heartbeat_s = rng.randint(max(1, timeout_s // 4), timeout_s - 1) if heartbeat else None
        plan = worker_plan(rng, timeout_s, heartbeat_s)
        seen[plan.behaviour] += 1
        check_plan(plan, timeout_s * 1000, heartbeat_s)
    behaviours = {"succeed", "fail", "duplicate", "overrun", "late", "die"} | ({"stall"} if heartbeat else set())
    assert set(seen) == behaviours


def check_plan(plan: workload.WorkerPlan, timeout_ms: int, heartbeat_s: int | None) -> None:
    times = [action.at_ms for action in plan.actions]
    assert times == sorted(times) and all(t >= 0 for t in times)
    assert sum(isinstance(a, SendTaskHeartbeat) for a in plan.actions) <= workload.HEARTBEATS_MAX
    replies = answers(plan)
    heartbeat_ms = heartbeat_s * 1000 if heartbeat_s else timeout_ms
    for reply in replies:
        if isinstance(reply, SendTaskFailure):
            assert reply.error in (*WORKER_ERRORS, UNNAMED_ERROR)
        else:
            assert "value" in reply.output
    if plan.behaviour in ("succeed", "fail", "duplicate"):
        assert len(replies) == (2 if plan.behaviour == "duplicate" else 1)
        assert replies[0].at_ms < timeout_ms
        assert max(heartbeat_gaps_ms(plan, replies[0].at_ms)) < heartbeat_ms  # kept alive until it answers
        assert isinstance(replies[0], SendTaskFailure) == (plan.behaviour == "fail")
    elif plan.behaviour == "overrun":
        assert len(replies) == 1 and replies[0].at_ms > timeout_ms
        assert max(heartbeat_gaps_ms(plan, timeout_ms)) < heartbeat_ms  # alive up to the timeout itself
    elif plan.behaviour == "late":
        assert [type(a) for a in plan.actions] == [SendTaskSuccess] and replies[0].at_ms > timeout_ms
    elif plan.behaviour == "stall":
        assert len(replies) == 1 and max(heartbeat_gaps_ms(plan, replies[0].at_ms)) > heartbeat_ms
    else:
        assert plan.behaviour == "die" and plan.actions == ()


# -- purity


def test_workload_module_is_pure():
    """No clock, I/O or global random: the only thing used from `random` is the type of the generator passed in."""
    tree = ast.parse(Path(workload.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert imported <= {"__future__", "random", "re", "collections.abc", "dataclasses", "typing",
                        "statewright.asl.errors", "statewright.asl.handling"}
    uses = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "random"}
    assert uses == {"Random"}


# -- through a real server


def test_a_real_server_accepts_the_definitions(sfn):
    """CreateActivity, then child machines (activities only), then parents that start those children."""
    suffix = uuid.uuid4().hex[:8]
    activities = [sfn.create_activity(name=f"sim-{suffix}-{i}")["activityArn"] for i in range(3)]
    children = []
    for seed in range(4):
        spec = generate(random.Random(seed), activities)
        children.append(create(sfn, spec, f"sim-child-{suffix}-{seed}"))
    for seed in range(4, 24):
        spec = generate(random.Random(seed), activities, children)
        validated = sfn.validate_state_machine_definition(definition=json.dumps(spec.definition))
        assert (validated["result"], validated["diagnostics"]) == ("OK", [])
        create(sfn, spec, f"sim-{suffix}-{seed}")


def create(sfn, spec: workload.MachineSpec, name: str) -> str:
    return sfn.create_state_machine(name=name, definition=json.dumps(spec.definition), roleArn=ROLE_ARN)[
        "stateMachineArn"]
