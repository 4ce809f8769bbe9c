"""Crashes around activity tasks, with real processes: a worker SIGKILLed mid-task, and the server SIGKILLed while
attempts are in flight.

Workers run ``python -m statewright.worker`` with the handler below, which appends one line per attempt it receives
(and one when its handler finishes) to its own record file. The assertions on "who got what" come from those
records and from the histories, never from the server's word alone.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from server import ROLE_ARN, ServerProcess, history, wait_closed

pytestmark = pytest.mark.slow  # real servers and workers killed: not in the fast tier

TESTS = Path(__file__).resolve().parent


def attempt_handler(payload: dict) -> dict:
    """The workers' handler: record the attempt, sleep as the input says for this retry, record the end."""
    sleeps = payload["sleeps"]
    attempt = f"{payload['execution']} {payload['retry']}"
    _record(f"got {attempt} {os.environ['WORKER_NAME']}")
    time.sleep(sleeps[min(payload["retry"], len(sleeps) - 1)])
    _record(f"done {attempt} {os.environ['WORKER_NAME']}")
    return {"retry": payload["retry"], "by": os.environ["WORKER_NAME"]}


def _record(line: str) -> None:
    with open(os.environ["WORKER_RECORD"], "a") as record:  # one short append per line: whole lines only
        record.write(line + "\n")


def machine_definition(activity: str, heartbeat_s: int) -> dict:
    return {"StartAt": "Work", "States": {"Work": {
        "Type": "Task", "Resource": activity, "HeartbeatSeconds": heartbeat_s, "TimeoutSeconds": 60,
        "Parameters": {"execution.$": "$$.Execution.Name", "retry.$": "$$.State.RetryCount", "sleeps.$": "$.sleeps"},
        "Retry": [{"ErrorEquals": ["States.HeartbeatTimeout"], "IntervalSeconds": 1, "BackoffRate": 1,
                   "MaxAttempts": 3}],
        "End": True}}}


class WorkerProcess:
    def __init__(self, server: ServerProcess, activity: str, name: str, directory: Path, concurrency: int) -> None:
        self.name = name
        self.record = directory / f"{name}.record"
        log = open(directory / f"{name}.log", "ab")  # noqa: SIM115 - the child process owns it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
               "WORKER_RECORD": str(self.record), "WORKER_NAME": name, "AWS_ACCESS_KEY_ID": "test",
               "AWS_SECRET_ACCESS_KEY": "test", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "statewright.worker", activity, "test_task_crash:attempt_handler",
             "--endpoint-url", server.endpoint, "--concurrency", str(concurrency), "--heartbeat-seconds", "0.5",
             "--worker-name", name], env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def lines(self, kind: str) -> list[tuple[str, int, str]]:
        """(execution name, retry count, worker name) of each recorded line of ``kind`` ("got" or "done")."""
        text = self.record.read_text() if self.record.exists() else ""
        return [(execution, int(retry), worker) for what, execution, retry, worker in
                (line.split() for line in text.splitlines()) if what == kind]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def terminate(self) -> None:
        """SIGTERM; its abandoned polls are not waited for, so it exits at once when idle."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(condition, deadline_s: float = 20) -> None:
    """Poll ``condition`` until true (a bounded wait, not a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def attempts(events: list[dict]) -> list[dict]:
    """One Task state's attempts in order: {retry, started_by, scheduled, started, end, end_event} each."""
    found: list[dict] = []
    for event in events:
        kind = event["type"]
        if kind == "ActivityScheduled":
            given = json.loads(event["activityScheduledEventDetails"]["input"])
            found.append({"retry": given["retry"], "scheduled": event["timestamp"], "started_by": None,
                          "started": None, "end": None, "end_event": None})
        elif kind == "ActivityStarted":
            found[-1]["started_by"] = event["activityStartedEventDetails"].get("workerName")
            found[-1]["started"] = event["timestamp"]
        elif kind in ("ActivitySucceeded", "ActivityFailed", "ActivityTimedOut", "ActivityScheduleFailed"):
            found[-1]["end"] = kind
            found[-1]["end_event"] = event
    return found


@pytest.fixture
def crash_server(tmp_path):
    process = ServerProcess(tmp_path / "data", shards=4).start()
    yield process
    process.kill()


def test_a_worker_killed_mid_task_times_out_and_the_retry_goes_to_another(crash_server, tmp_path):
    sfn = crash_server.client()
    activity = sfn.create_activity(name="crashy")["activityArn"]
    machine = sfn.create_state_machine(name="crashy", roleArn=ROLE_ARN,
                                       definition=json.dumps(machine_definition(activity, 2)))["stateMachineArn"]
    first = WorkerProcess(crash_server, activity, "first", tmp_path, concurrency=1)  # no idle slot left polling
    second = None
    try:
        run = sfn.start_execution(stateMachineArn=machine, name="victim", input='{"sleeps": [60, 0]}')
        wait_for(lambda: first.lines("got"))
        first.kill()  # SIGKILL mid-task: no report, no more heartbeats
        second = WorkerProcess(crash_server, activity, "second", tmp_path, concurrency=1)
        described = wait_closed(sfn, run["executionArn"], deadline_s=30)
    finally:
        first.kill()
        if second is not None:
            second.terminate()
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"retry": 1, "by": "second"}
    assert first.lines("got") == [("victim", 0, "first")] and first.lines("done") == []
    assert second.lines("got") == [("victim", 1, "second")]
    tries = attempts(history(sfn, run["executionArn"]))
    assert [(t["started_by"], t["end"]) for t in tries] == [("first", "ActivityTimedOut"),
                                                             ("second", "ActivitySucceeded")]
    timed_out = tries[0]["end_event"]
    assert timed_out["activityTimedOutEventDetails"]["error"] == "States.Timeout"
    assert (timed_out["timestamp"] - tries[0]["started"]).total_seconds() >= 2  # at least one HeartbeatSeconds
    backoff_s = (tries[1]["scheduled"] - timed_out["timestamp"]).total_seconds()
    assert 1 <= backoff_s < 6  # IntervalSeconds 1, generous bound


def test_server_killed_with_attempts_in_flight(crash_server, tmp_path, crash_seed):
    rng = random.Random(crash_seed)  # a failure prints the seed, and how to run the test again on it (conftest.py)
    heartbeat_s = 2
    sfn = crash_server.client()
    activity = sfn.create_activity(name="busy")["activityArn"]
    machine = sfn.create_state_machine(name="busy", roleArn=ROLE_ARN,
                                       definition=json.dumps(machine_definition(activity, heartbeat_s)))[
        "stateMachineArn"]
    workers = [WorkerProcess(crash_server, activity, f"w{i}", tmp_path, concurrency=2) for i in range(3)]
    try:
        runs = {}
        for i in range(12):
            # Some handlers outlast the outage (their heartbeats then learn the attempt is gone), some end in it.
            sleeps = [rng.choice([0.3, 1.0, 4.0]), 0.2]
            runs[f"e{i}"] = sfn.start_execution(stateMachineArn=machine, name=f"e{i}",
                                                input=json.dumps({"sleeps": sleeps}))["executionArn"]
        wait_for(lambda: sum(len(w.lines("got")) for w in workers) >= 4)
        crash_server.kill()
        killed_at = time.time()
        time.sleep(heartbeat_s + 1)  # down for longer than HeartbeatSeconds: attempts in flight time out
        crash_server.start()
        sfn = crash_server.client()
        closed = {name: wait_closed(sfn, arn, deadline_s=40) for name, arn in runs.items()}
    finally:
        for worker in workers:
            worker.terminate()
    log_path = crash_server.log_path

    # Every execution closes, and succeeds: each attempt either completed or timed out and was retried.
    assert {name: d["status"] for name, d in closed.items()} == dict.fromkeys(runs, "SUCCEEDED"), log_path

    # No attempt reached two workers (from the workers' own records).
    got = [line for worker in workers for line in worker.lines("got")]
    counts = Counter((execution, retry) for execution, retry, _ in got)
    assert [key for key, n in counts.items() if n > 1] == []
    done = {(execution, retry): worker for worker in workers for execution, retry, _ in worker.lines("done")}
    received = {(execution, retry): worker for execution, retry, worker in got}

    timed_out_count = 0
    for name, arn in runs.items():
        tries = attempts(history(sfn, arn))
        assert [t["retry"] for t in tries] == list(range(len(tries)))
        for t in tries:
            key = (name, t["retry"])
            assert t["end"] in ("ActivitySucceeded", "ActivityTimedOut"), (key, t)
            if key in received:  # a worker's record matches the history's ActivityStarted
                assert t["started_by"] == received[key], (key, t)
            if t["end"] == "ActivitySucceeded":  # only a worker that got the attempt and ran it can complete it
                assert received.get(key) == t["started_by"] and key in done, (key, t)
            else:
                timed_out_count += 1
                details = t["end_event"]["activityTimedOutEventDetails"]
                assert details["error"] == "States.Timeout", (key, details)
                # Only attempts in flight at the crash time out, and never before HeartbeatSeconds passed.
                assert t["started"] is not None and t["started"].timestamp() <= killed_at + 0.5, (key, t)
                assert (t["end_event"]["timestamp"] - t["started"]).total_seconds() >= heartbeat_s, (key, t)
        assert tries[-1]["end"] == "ActivitySucceeded"
    # Every attempt a worker received is in some history.
    assert set(received) <= {(name, t["retry"]) for name, arn in runs.items() for t in attempts(history(sfn, arn))}
    assert timed_out_count >= 1  # the crash did catch attempts in flight
