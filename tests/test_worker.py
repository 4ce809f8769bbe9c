"""The worker library (``statewright.worker``) against a real server: results, named errors, heartbeats,
concurrency, and graceful shutdown on SIGTERM in a process of its own.

The module has its own server, SIGKILLed at the end: a stopped worker may leave a long poll behind, which would
otherwise hold up a graceful server shutdown for up to 60 s.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from server import ServerProcess, history, wait_closed
from statewright.worker import Worker, error_of

pytestmark = pytest.mark.slow  # a real server, worker processes: not in the fast tier

TESTS = Path(__file__).resolve().parent
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = ServerProcess(tmp_path_factory.mktemp("worker-server") / "data").start()
    yield process
    process.kill()


@pytest.fixture
def activity(sfn):
    return sfn.create_activity(name=f"act-{uuid.uuid4().hex[:12]}")["activityArn"]


@contextlib.contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """Run a worker on a thread for the block; stop it and wait for the tasks in hand at the end."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            worker.run(handle_signals=False)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run, name="test-worker")
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive(), "the worker did not stop within 30 s"
    assert not failures, failures


def new_worker(server: ServerProcess, activity: str, handler, **options) -> Worker:
    return Worker(activity, handler, endpoint_url=server.endpoint, **CREDENTIALS, **options)


def task_machine(activity: str, **task: object) -> dict:
    return {"StartAt": "Work", "States": {"Work": {"Type": "Task", "Resource": activity, "End": True, **task}}}


def count_calls(worker: Worker, operation: str) -> list[int]:
    """Count the worker's own calls of one operation (a botocore event hook on its real client)."""
    calls: list[int] = []
    worker.client.meta.events.register(f"before-call.sfn.{operation}", lambda **kwargs: calls.append(1))
    return calls


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [event for event in events if event["type"] == kind]


def seconds_between(earlier: dict, later: dict) -> float:
    return (later["timestamp"] - earlier["timestamp"]).total_seconds()


class PaymentDeclined(Exception):
    pass


class CardError(Exception):
    error = "Card.Expired"


def test_success_goes_to_the_result(server, sfn, make_machine, activity):
    machine = make_machine(task_machine(activity, ResultPath="$.result"))
    with running(new_worker(server, activity, lambda order: {"total": order["qty"] * 3}, worker_name="w-ok")):
        run = sfn.start_execution(stateMachineArn=machine, input='{"qty": 5}')
        described = wait_closed(sfn, run["executionArn"])
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"qty": 5, "result": {"total": 15}}
    started = of_type(history(sfn, run["executionArn"]), "ActivityStarted")
    assert [e["activityStartedEventDetails"]["workerName"] for e in started] == ["w-ok"]


def raise_for(order: dict) -> dict:
    kind = order["kind"]
    if kind == "declined":
        raise PaymentDeclined(f"order {order['id']} declined")
    if kind == "expired":
        raise CardError("the card expired in 2019")
    if kind == "not-json":
        return {"when": object()}
    return order


def test_exceptions_become_named_failures(server, sfn, make_machine, activity):
    machine = make_machine({"StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": activity, "End": True,
                 "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}]},
        "Caught": {"Type": "Pass", "OutputPath": "$.error", "End": True}}})
    with running(new_worker(server, activity, raise_for)):
        runs = {kind: sfn.start_execution(stateMachineArn=machine, input=json.dumps({"kind": kind, "id": 7}))
                for kind in ("declined", "expired", "not-json")}
        outputs = {kind: json.loads(wait_closed(sfn, run["executionArn"])["output"]) for kind, run in runs.items()}
    assert outputs["declined"] == {"Error": "PaymentDeclined", "Cause": "order 7 declined"}
    assert outputs["expired"] == {"Error": "Card.Expired", "Cause": "the card expired in 2019"}
    assert outputs["not-json"]["Error"] == "TypeError"
    failed = of_type(history(sfn, runs["declined"]["executionArn"]), "ActivityFailed")
    assert [e["activityFailedEventDetails"] for e in failed] == [
        {"error": "PaymentDeclined", "cause": "order 7 declined"}]


def test_error_of_limits_and_attributes():
    assert error_of(ValueError("bad")) == ("ValueError", "bad")
    assert error_of(CardError("x")) == ("Card.Expired", "x")
    long = PaymentDeclined("c" * 40_000)
    long.error = "e" * 300
    error, cause = error_of(long)
    assert (len(error), len(cause)) == (256, 32_768)


def sleep_then_echo(payload: dict) -> dict:
    time.sleep(payload["sleep"])
    return payload


def test_automatic_heartbeats_keep_a_task_alive(server, sfn, make_machine, activity):
    machine = make_machine(task_machine(activity, HeartbeatSeconds=1))
    worker = new_worker(server, activity, sleep_then_echo, heartbeat_seconds=0.25)
    beats = count_calls(worker, "SendTaskHeartbeat")
    with running(worker):
        run = sfn.start_execution(stateMachineArn=machine, input='{"sleep": 2.5}')
        described = wait_closed(sfn, run["executionArn"])
    assert described["status"] == "SUCCEEDED", described
    events = history(sfn, run["executionArn"])
    assert seconds_between(of_type(events, "ActivityStarted")[0], of_type(events, "ActivitySucceeded")[0]) >= 2.5
    assert len(beats) >= 4  # 2.5 s at one every 0.25 s, with plenty of slack


def test_without_heartbeats_the_same_task_times_out(server, sfn, make_machine, activity, caplog):
    machine = make_machine(task_machine(activity, HeartbeatSeconds=1))
    worker = new_worker(server, activity, sleep_then_echo)
    successes = count_calls(worker, "SendTaskSuccess")
    with caplog.at_level(logging.WARNING, "statewright.worker"), running(worker):
        run = sfn.start_execution(stateMachineArn=machine, input='{"sleep": 2.5}')
        described = wait_closed(sfn, run["executionArn"])
    assert (described["status"], described["error"]) == ("FAILED", "States.Timeout")
    # The worker found out when it reported: TaskTimedOut, logged, not raised.
    assert len(successes) == 1
    assert any("TaskTimedOut" in record.getMessage() for record in caplog.records)


def test_a_heartbeat_answered_task_timed_out_stops_the_task_reporting(server, sfn, make_machine, activity, caplog):
    machine = make_machine(task_machine(activity, TimeoutSeconds=2))
    worker = new_worker(server, activity, sleep_then_echo, heartbeat_seconds=0.25)
    successes = count_calls(worker, "SendTaskSuccess")
    failures = count_calls(worker, "SendTaskFailure")
    with caplog.at_level(logging.WARNING, "statewright.worker"), running(worker):
        run = sfn.start_execution(stateMachineArn=machine, input='{"sleep": 3.5}')
        described = wait_closed(sfn, run["executionArn"])
        assert (described["status"], described["error"]) == ("FAILED", "States.Timeout")
    # running() waited for the handler to finish: it did, and nothing was reported for the dead attempt.
    assert successes == [] and failures == []
    messages = [record.getMessage() for record in caplog.records]
    assert any("heartbeat refused with TaskTimedOut" in message for message in messages), messages
    assert any("not reported" in message for message in messages), messages


def test_concurrency_limit_is_respected(server, sfn, make_machine, activity):
    lock = threading.Lock()
    now_running, most = [0], [0]

    def busy(payload: dict) -> int:
        with lock:
            now_running[0] += 1
            most[0] = max(most[0], now_running[0])
        time.sleep(0.3)
        with lock:
            now_running[0] -= 1
        return payload["i"]

    machine = make_machine(task_machine(activity))
    with running(new_worker(server, activity, busy, concurrency=2)):
        runs = [sfn.start_execution(stateMachineArn=machine, input=json.dumps({"i": i}))["executionArn"]
                for i in range(6)]
        outputs = [wait_closed(sfn, run)["output"] for run in runs]
    assert outputs == [str(i) for i in range(6)]
    assert most[0] == 2
    # The server's view agrees: never more than two attempts started and unfinished at once.
    edges = []
    for run in runs:
        events = history(sfn, run)
        edges += [(of_type(events, "ActivityStarted")[0]["timestamp"], 1),
                  (of_type(events, "ActivitySucceeded")[0]["timestamp"], -1)]
    held = 0
    for _, step in sorted(edges):  # at equal times the end (-1) sorts first
        held += step
        assert held <= 2


def test_run_raises_when_the_activity_does_not_exist(server):
    worker = new_worker(server, "arn:aws:states:us-east-1:123456789012:activity:missing", sleep_then_echo)
    with pytest.raises(ClientError) as excinfo:
        worker.run(handle_signals=False)
    assert excinfo.value.response["Error"]["Code"] == "ActivityDoesNotExist"


# -- a worker in its own process, stopped with SIGTERM

def record_and_sleep(payload: dict) -> dict:
    """Handler for the worker subprocess: notes start and end of each task in $WORKER_RECORD."""
    with open(os.environ["WORKER_RECORD"], "a") as record:
        record.write(f"start {payload['i']}\n")
    time.sleep(payload["sleep"])
    with open(os.environ["WORKER_RECORD"], "a") as record:
        record.write(f"end {payload['i']}\n")
    return {"done": payload["i"]}


def start_worker_process(server: ServerProcess, activity: str, record: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
           "WORKER_RECORD": str(record), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "PYTHONUNBUFFERED": "1"}
    log = open(record.with_suffix(".log"), "ab")  # noqa: SIM115 - the child process owns it
    process = subprocess.Popen([sys.executable, "-m", "statewright.worker", activity, "test_worker:record_and_sleep",
                                "--endpoint-url", server.endpoint, *args], env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    log.close()
    return process


def wait_for(condition, deadline_s: float = 20) -> None:
    """Poll ``condition`` until true (a bounded wait, not a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_sigterm_lets_running_tasks_finish_then_exits(server, sfn, make_machine, activity, tmp_path):
    record = tmp_path / "record.txt"
    worker = start_worker_process(server, activity, record, "--concurrency", "2", "--worker-name", "sub")
    try:
        machine = make_machine(task_machine(activity))
        runs = [sfn.start_execution(stateMachineArn=machine, input=json.dumps({"i": i, "sleep": 2}))[
            "executionArn"] for i in range(2)]
        wait_for(lambda: len(lines(record)) == 2)  # both tasks running, no slot left polling
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert sorted(lines(record)) == ["end 0", "end 1", "start 0", "start 1"]
    for i, run in enumerate(runs):
        described = wait_closed(sfn, run)
        assert (described["status"], json.loads(described["output"])) == ("SUCCEEDED", {"done": i}), described
    # It stopped polling: a new task waits for whoever polls next, here the test.
    later = sfn.start_execution(stateMachineArn=machine, input=json.dumps({"i": 9, "sleep": 0}))["executionArn"]
    task = server.client(read_timeout=10).get_activity_task(activityArn=activity, workerName="test")
    assert json.loads(task["input"])["i"] == 9
    sfn.send_task_success(taskToken=task["taskToken"], output="{}")
    assert wait_closed(sfn, later)["status"] == "SUCCEEDED"


def test_sigterm_on_an_idle_worker_exits_promptly(server, activity, tmp_path):
    record = tmp_path / "record.txt"
    worker = start_worker_process(server, activity, record, "--concurrency", "3")
    try:
        wait_for(lambda: "polling" in record.with_suffix(".log").read_text())
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(10) == 0  # the polls in flight (up to 60 s each) are not waited for
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert "stopped" in record.with_suffix(".log").read_text()
