"""Parallel and inline Map in the engine, driven with a virtual clock against a real SQLite store."""

from __future__ import annotations

import itertools
import json

import pytest

from statewright.decider.execution import ExecutionState
from statewright.engine.commands import StartExecution
from statewright.engine.engine import Engine
from statewright.store.base import StateMachineRecord
from statewright.store.sqlite import SqliteStore

ACCOUNT_PREFIX = "arn:aws:states:us-east-1:123456789012"


def machine(store, name: str, definition: dict) -> str:
    arn = f"{ACCOUNT_PREFIX}:stateMachine:{name}"
    store.create_state_machine(StateMachineRecord(arn, name, "STANDARD", json.dumps(definition), "role", "r1", 0, 0,
                                                  {}, {}))
    return arn


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=2)
    yield store
    store.close()


def run_to_end(engine: Engine, clock: list[int], limit_ms: int = 10_000_000) -> None:
    """Tick, jumping the virtual clock to the next due timer whenever the engine is idle."""
    end = clock[0] + limit_ms
    while clock[0] < end:
        if engine.tick(clock[0]):
            continue
        due = [w.next_due_ms() for w in engine.windows.values() if w.next_due_ms() is not None]
        if not due:
            return
        clock[0] = max(clock[0], min(due))


def start(engine: Engine, machine_arn: str, name: str, payload: object) -> str:
    arn = machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"
    engine.submit(StartExecution(arn, machine_arn, name, "r1", "role", json.dumps(payload)))
    return arn


def test_inline_map_over_1000_items_with_concurrency_40_keeps_at_most_40_iterations_open(store):
    arn = machine(store, "big-map", {"StartAt": "M", "States": {"M": {
        "Type": "Map", "MaxConcurrency": 40, "End": True,
        "ItemProcessor": {"StartAt": "W", "States": {
            "W": {"Type": "Wait", "Seconds": 1, "Next": "Double"},
            "Double": {"Type": "Pass", "Parameters": {"n.$": "$.n"}, "End": True}}}}}})
    clock = [1_700_000_000_000]
    engine = Engine(store, clock=lambda: clock[0])
    engine.acquire_all_shards()
    execution = start(engine, arn, "run", [{"n": i} for i in range(1000)])
    widest = 0
    while True:
        engine.tick(clock[0])
        state = ExecutionState.from_blob(store.load_execution(execution))
        widest = max(widest, len(state.flows))
        if not state.is_open:
            break
        clock[0] += 1_000
    assert state.status == "SUCCEEDED"
    assert json.loads(state.output) == [{"n": i} for i in range(1000)]
    assert widest <= 41  # the top-level flow and at most 40 iterations


def test_parallel_branch_waiting_across_a_restart_joins_in_order(store):
    arn = machine(store, "par", {"StartAt": "P", "States": {"P": {
        "Type": "Parallel", "End": True, "Branches": [
            {"StartAt": "Slow", "States": {"Slow": {"Type": "Wait", "Seconds": 30, "Next": "S"},
                                           "S": {"Type": "Pass", "Result": "slow", "End": True}}},
            {"StartAt": "Fast", "States": {"Fast": {"Type": "Pass", "Result": "fast", "End": True}}}]}}})
    clock = [1_700_000_000_000]
    first = Engine(store, clock=lambda: clock[0])
    first.acquire_all_shards()
    execution = start(first, arn, "p", {})
    first.tick(clock[0])
    clock[0] += 60_000
    second = Engine(store, clock=lambda: clock[0])  # a new process: nothing but the store survives
    second.acquire_all_shards()
    run_to_end(second, clock)
    state = ExecutionState.from_blob(store.load_execution(execution))
    assert (state.status, json.loads(state.output)) == ("SUCCEEDED", ["slow", "fast"])


def test_map_iteration_failure_aborts_the_others_and_catch_routes(store):
    arn = machine(store, "catching", {"StartAt": "M", "States": {
        "M": {"Type": "Map", "ItemsPath": "$.items", "ResultPath": "$.results", "Next": "Done",
              "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Recover"}],
              "ItemProcessor": {"StartAt": "Check", "States": {
                  "Check": {"Type": "Choice", "Choices": [{"Variable": "$", "NumericEquals": 3, "Next": "Bad"}],
                            "Default": "Sleep"},
                  "Sleep": {"Type": "Wait", "Seconds": 100, "End": True},
                  "Bad": {"Type": "Fail", "Error": "Three", "Cause": "no threes"}}}},
        "Done": {"Type": "Succeed"},
        "Recover": {"Type": "Pass", "OutputPath": "$.error", "End": True}}})
    clock = [1_700_000_000_000]
    engine = Engine(store, clock=lambda: clock[0])
    engine.acquire_all_shards()
    execution = start(engine, arn, "m", {"items": [1, 2, 3, 4]})
    run_to_end(engine, clock)
    state = ExecutionState.from_blob(store.load_execution(execution))
    assert (state.status, json.loads(state.output)) == ("SUCCEEDED", {"Error": "Three", "Cause": "no threes"})
    assert state.timers == {}
    types = [event["type"] for event in store.read_history(execution, 0, 1000, False)]
    assert types.count("MapIterationAborted") == 2
    assert types.count("MapIterationFailed") == 1
    assert "MapStateFailed" in types


def test_a_failing_branch_drops_a_sibling_whose_map_is_still_running(store):
    """Found by the simulator's workload generator: the sibling's flow was dropped before its iterations."""
    arn = machine(store, "nested-drop", {"StartAt": "P", "States": {"P": {
        "Type": "Parallel", "End": True, "Branches": [
            {"StartAt": "M", "States": {"M": {"Type": "Map", "End": True, "ItemProcessor": {
                "StartAt": "Sleep", "States": {"Sleep": {"Type": "Wait", "Seconds": 100, "End": True}}}}}},
            {"StartAt": "Bad", "States": {"Bad": {"Type": "Fail", "Error": "Boom", "Cause": "a branch failed"}}}]}}})
    clock = [1_700_000_000_000]
    engine = Engine(store, clock=lambda: clock[0])
    engine.acquire_all_shards()
    execution = start(engine, arn, "p", [1, 2])
    run_to_end(engine, clock)
    state = ExecutionState.from_blob(store.load_execution(execution))
    assert (state.status, state.error, state.timers) == ("FAILED", "Boom", {})


def test_retry_on_parallel_waits_its_backoff_then_runs_again(store):
    arn = machine(store, "retrying", {"StartAt": "P", "States": {"P": {
        "Type": "Parallel", "End": True,
        "Retry": [{"ErrorEquals": ["Oops"], "IntervalSeconds": 2, "MaxAttempts": 2, "BackoffRate": 3}],
        "Branches": [{"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Oops"}}}]}}})
    clock = [1_700_000_000_000]
    engine = Engine(store, clock=lambda: clock[0])
    engine.acquire_all_shards()
    execution = start(engine, arn, "r", {})
    run_to_end(engine, clock)
    events = store.read_history(execution, 0, 1000, False)
    starts = [event["timestamp"] for event in events if event["type"] == "ParallelStateStarted"]
    assert [b - a for a, b in itertools.pairwise(starts)] == [2_000, 6_000]
    assert events[-1]["type"] == "ExecutionFailed"
    assert events[-1]["executionFailedEventDetails"] == {"error": "Oops"}
