"""Metrics: GET /metrics on the real server after real boto3 traffic, and the engine's hooks on a virtual clock."""

from __future__ import annotations

import itertools
import json
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from server import ROLE_ARN, ServerProcess, wait_closed
from statewright.engine.commands import StartExecution, StopExecution
from statewright.engine.engine import Engine
from statewright.store.base import StateMachineRecord
from statewright.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow  # real server processes: not in the fast tier

CHAIN = {"StartAt": "A", "States": {
    "A": {"Type": "Pass", "Parameters": {"n.$": "$.n"}, "ResultPath": "$.p", "Next": "C"},
    "C": {"Type": "Choice", "InputPath": "$.p", "Choices": [{"Variable": "$.n", "NumericGreaterThan": 0, "Next": "B"}],
          "Default": "B"},
    "B": {"Type": "Pass", "End": True}}}
SLEEPER = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}
FAMILIES = {
    "statewright_transition_steps_committed": "counter",
    "statewright_state_transitions_committed": "counter",
    "statewright_account_state_transitions_committed": "counter",
    "statewright_commit_batch_writes": "histogram",
    "statewright_commit_seconds": "histogram",
    "statewright_engine_apply_seconds": "histogram",
    "statewright_timer_lateness_seconds": "histogram",
    "statewright_timer_lag_seconds": "gauge",
    "statewright_open_executions": "gauge",
    "statewright_account_open_executions": "gauge",
    "statewright_api_request_seconds": "histogram",
    "statewright_api_requests": "counter",
    "statewright_account_api_requests": "counter",
    "statewright_api_throttled_requests": "counter",
    "statewright_activity_backlog_tasks": "gauge",
    "statewright_outbox_dispatches": "gauge",
}


def scrape(endpoint: str) -> dict[str, dict[tuple, float]]:
    """family name -> {(sample name, sorted labels): value}; the family's type under the key "type"."""
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {family.name: {"type": family.type, **{(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                                                  for sample in family.samples}}
            for family in text_string_to_metric_families(text)}


def value(metrics: dict, family: str, sample: str, **labels: str) -> float:
    return metrics[family].get((sample, tuple(sorted(labels.items()))), 0.0)


def open_executions(endpoint: str, deadline_s: float = 30) -> float:
    """The gauge is absent until the start-up count finishes (a bounded wait, not a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while True:
        samples = scrape(endpoint)["statewright_open_executions"]
        if len(samples) > 1 or time.monotonic() > deadline:
            return samples[("statewright_open_executions", ())]
        time.sleep(0.05)


def test_metrics_families_exist_and_move(server, sfn, make_machine):
    before = scrape(server.endpoint)
    for family, kind in FAMILIES.items():
        assert before[family]["type"] == kind, family
    chain = make_machine(CHAIN)
    for n in range(3):
        run = sfn.start_execution(stateMachineArn=chain, input=json.dumps({"n": n}))
        assert wait_closed(sfn, run["executionArn"])["status"] == "SUCCEEDED"
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.describe_execution(executionArn=chain.replace(":stateMachine:", ":execution:") + ":missing")
    after = scrape(server.endpoint)

    def moved(family: str, sample: str, **labels: str) -> float:
        return value(after, family, sample, **labels) - value(before, family, sample, **labels)

    assert moved("statewright_transition_steps_committed", "statewright_transition_steps_committed_total") >= 3
    assert moved("statewright_state_transitions_committed", "statewright_state_transitions_committed_total") >= 9
    assert moved("statewright_account_state_transitions_committed",
                 "statewright_account_state_transitions_committed_total", account="123456789012",
                 region="us-east-1") >= 9
    assert moved("statewright_commit_seconds", "statewright_commit_seconds_count") >= 1
    assert moved("statewright_commit_batch_writes", "statewright_commit_batch_writes_sum") >= 3
    assert moved("statewright_engine_apply_seconds", "statewright_engine_apply_seconds_count") >= 3
    assert moved("statewright_api_requests", "statewright_api_requests_total", operation="StartExecution",
                 error="") == 3
    assert moved("statewright_api_requests", "statewright_api_requests_total", operation="DescribeExecution",
                 error="ExecutionDoesNotExist") == 1
    assert moved("statewright_api_request_seconds", "statewright_api_request_seconds_count",
                 operation="StartExecution") == 3
    assert value(after, "statewright_api_throttled_requests", "statewright_api_throttled_requests_total") == 0
    lags = [key for key in after["statewright_timer_lag_seconds"] if key != "type"]
    assert {dict(labels)["shard"] for _, labels in lags} == {str(shard) for shard in range(server.shards)}


def test_open_executions_follow_starts_stops_and_restarts(tmp_path):
    own = ServerProcess(tmp_path / "data", shards=2).start()  # its own server: no other test's executions
    try:
        sfn = own.client()
        sleeper = sfn.create_state_machine(name="sleeper", definition=json.dumps(SLEEPER),
                                           roleArn=ROLE_ARN)["stateMachineArn"]
        assert open_executions(own.endpoint) == 0
        runs = [sfn.start_execution(stateMachineArn=sleeper)["executionArn"] for _ in range(3)]
        assert open_executions(own.endpoint) == 3
        sfn.stop_execution(executionArn=runs[0])
        assert open_executions(own.endpoint) == 2
        activity = sfn.create_activity(name="idle")["activityArn"]
        task = sfn.create_state_machine(name="task", roleArn=ROLE_ARN, definition=json.dumps(
            {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": activity, "End": True}}}))
        sfn.start_execution(stateMachineArn=task["stateMachineArn"])  # no worker polls: its task waits
        backlog = scrape(own.endpoint)["statewright_activity_backlog_tasks"]
        assert backlog[("statewright_activity_backlog_tasks", ())] == 1
        assert open_executions(own.endpoint) == 3
        own.kill()
        own.start()  # counted again from the database
        assert open_executions(own.endpoint) == 3
        per_account = scrape(own.endpoint)["statewright_account_open_executions"]
        assert per_account[("statewright_account_open_executions",
                            (("account", "123456789012"), ("region", "us-east-1")))] == 3
    finally:
        own.stop()


# -- the engine's hooks, driven by a virtual clock

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:timed"
TIMED = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 5, "Next": "P"},
                                    "P": {"Type": "Pass", "End": True}}}


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=2)
    store.create_state_machine(StateMachineRecord(MACHINE, "timed", "STANDARD", json.dumps(TIMED), "role", "r1",
                                                  0, 0, {}, {}))
    yield store
    store.close()


def start(engine: Engine, name: str) -> StartExecution:
    command = StartExecution(f"arn:aws:states:us-east-1:123456789012:execution:timed:{name}", MACHINE, name, "r1",
                             "role", "{}")
    engine.submit(command)
    return command


def engine_value(engine: Engine, family: str, sample: str, **labels: str) -> float | None:
    for metric in engine.metrics.registry.collect():
        if metric.name == family:
            for found in metric.samples:
                if found.name == sample and found.labels == labels:
                    return found.value
    return None


def test_timer_lateness_lag_and_open_count(store):
    now = [1_700_000_000_000]
    engine = Engine(store, clock=lambda: now[0])
    engine.acquire_all_shards()
    start(engine, "early")
    engine.tick(now[0])
    # The count of RUNNING rows is taken in a snapshot opened by the engine thread between commits: an execution
    # started after the snapshot is counted once, by the engine, not twice.
    engine.metrics.open_executions.request(store.open_count)
    start(engine, "late")
    engine.tick(now[0])  # the snapshot is taken at the top of the tick, before this tick's commit
    assert engine.metrics.open_executions.pending is None
    engine.metrics.open_executions.finish()
    assert engine_value(engine, "statewright_open_executions", "statewright_open_executions") == 2

    now[0] += 5_250  # both waits were due 250 ms ago
    lags = {shard: engine_value(engine, "statewright_timer_lag_seconds", "statewright_timer_lag_seconds",
                                shard=str(shard)) for shard in range(2)}
    assert max(lags.values()) == 0.25
    engine.tick(now[0])
    assert engine_value(engine, "statewright_timer_lateness_seconds", "statewright_timer_lateness_seconds_count") == 2
    assert engine_value(engine, "statewright_timer_lateness_seconds", "statewright_timer_lateness_seconds_sum") == 0.5
    assert engine_value(engine, "statewright_open_executions", "statewright_open_executions") == 0
    assert engine_value(engine, "statewright_state_transitions_committed",
                        "statewright_state_transitions_committed_total") == 4  # W and P, twice
    assert engine_value(engine, "statewright_transition_steps_committed",
                        "statewright_transition_steps_committed_total") == 4  # two starts, two fired timers


def test_stop_closes_an_open_execution(store):
    now = [1_700_000_000_000]
    engine = Engine(store, clock=lambda: now[0])
    engine.acquire_all_shards()
    engine.metrics.open_executions.request(store.open_count)
    engine.tick(now[0])
    engine.metrics.open_executions.finish()
    command = start(engine, "stopped")
    engine.tick(now[0])
    assert engine_value(engine, "statewright_open_executions", "statewright_open_executions") == 1
    engine.submit(StopExecution(command.arn, None, None))
    engine.tick(now[0])
    assert engine_value(engine, "statewright_open_executions", "statewright_open_executions") == 0


def test_the_activity_backlog_counts_tasks_until_a_worker_takes_them(server, sfn, make_machine):
    activity = sfn.create_activity(name="metrics-outbox")["activityArn"]
    machine = make_machine({"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": activity, "End": True}}})
    gauge = "statewright_activity_backlog_tasks"
    before = value(scrape(server.endpoint), gauge, gauge)
    sfn.start_execution(stateMachineArn=machine)
    deadline = time.monotonic() + 10
    while value(scrape(server.endpoint), gauge, gauge) == before and time.monotonic() < deadline:
        time.sleep(0.01)  # the task crosses from the engine thread to the matcher just after the commit
    assert value(scrape(server.endpoint), gauge, gauge) == before + 1
    task = sfn.get_activity_task(activityArn=activity, workerName="metrics")
    assert value(scrape(server.endpoint), gauge, gauge) == before
    sfn.send_task_success(taskToken=task["taskToken"], output="{}")



def test_the_tick_budget_starts_small_and_grows_as_full_ticks_prove_cheap(store):
    readings = itertools.count()  # an evaluation clock whose every reading is a microsecond later: cheap ticks
    engine = Engine(store, clock=lambda: 1_700_000_000_000, evaluation_clock=lambda: next(readings) / 1e6)
    engine.acquire_all_shards()
    assert engine_value(engine, "statewright_engine_tick_budget", "statewright_engine_tick_budget") == 64
    for index in range(64):  # one full tick
        start(engine, f"s{index}")
    engine.tick(1_700_000_000_000)
    assert engine_value(engine, "statewright_engine_tick_budget", "statewright_engine_tick_budget") > 64
