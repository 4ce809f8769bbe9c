"""The virtual clock and the wait scale: `serve --clock virtual`, moved by `statewright clock advance` (or
Statewright.AdvanceClock), fires every timer in the span durably and in due order, and histories follow it;
`serve --wait-scale 0` skips Waits and Retry backoffs. Real server processes, boto3."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import pytest

from server import ROLE_ARN, ServerProcess, history, raw_call, wait_closed

pytestmark = pytest.mark.slow  # real server processes: not in the fast tier

DAY_S = 86_400


@pytest.fixture
def server(tmp_path):
    server = ServerProcess(tmp_path / "data", extra_args=("--clock", "virtual")).start()
    yield server
    server.stop()


def clock(server: ServerProcess, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "statewright", "clock", *args, "--endpoint-url", server.endpoint],
                          capture_output=True, text=True, timeout=60)


def machine(sfn, definition: dict) -> str:
    return sfn.create_state_machine(name=f"m-{uuid.uuid4().hex[:10]}", definition=json.dumps(definition),
                                    roleArn=ROLE_ARN)["stateMachineArn"]


def started(sfn, arn: str, data: dict | None = None) -> str:
    return sfn.start_execution(stateMachineArn=arn, input=json.dumps(data or {}))["executionArn"]


def test_a_thirty_day_wait_passes_when_the_clock_is_advanced_and_the_history_reads_thirty_days(server):
    sfn = server.client()
    arn = machine(sfn, {"StartAt": "Approve", "States": {
        "Approve": {"Type": "Wait", "Seconds": 30 * DAY_S, "Next": "Done"},
        "Done": {"Type": "Pass", "End": True}}})
    run = started(sfn, arn)
    assert sfn.describe_execution(executionArn=run)["status"] == "RUNNING"
    advanced = clock(server, "advance", "30d")
    assert advanced.returncode == 0, advanced.stderr
    described = wait_closed(sfn, run)
    assert described["status"] == "SUCCEEDED"
    assert described["stopDate"] - described["startDate"] >= timedelta(days=30)
    types = [event["type"] for event in history(sfn, run)]
    assert types.count("WaitStateExited") == 1


def test_retry_backoff_and_task_timeout_fire_only_when_their_time_comes(server):
    sfn = server.client()
    activity = sfn.create_activity(name=f"a-{uuid.uuid4().hex[:10]}")["activityArn"]
    arn = machine(sfn, {"StartAt": "Work", "States": {"Work": {
        "Type": "Task", "Resource": activity, "TimeoutSeconds": DAY_S,
        "Retry": [{"ErrorEquals": ["States.Timeout"], "IntervalSeconds": 3600, "MaxAttempts": 1}],
        "End": True}}})
    run = started(sfn, arn)
    assert clock(server, "advance", "23h").returncode == 0
    assert [e["type"] for e in history(sfn, run)].count("ActivityTimedOut") == 0
    assert clock(server, "advance", "1h").returncode == 0  # the attempt's day is over: it times out
    assert _eventually(lambda: [e["type"] for e in history(sfn, run)].count("ActivityTimedOut") == 1)
    assert [e["type"] for e in history(sfn, run)].count("ActivityScheduled") == 1  # the retry waits an hour
    assert clock(server, "advance", "1h").returncode == 0
    assert _eventually(lambda: [e["type"] for e in history(sfn, run)].count("ActivityScheduled") == 2)
    assert clock(server, "advance", "1d").returncode == 0  # the second attempt times out too: no retry left
    described = wait_closed(sfn, run)
    assert described["status"] == "FAILED" and described["error"] == "States.Timeout"


def test_an_advance_survives_sigkill_and_no_timer_fires_twice(server):
    sfn = server.client()
    arn = machine(sfn, {"StartAt": "Sleep", "States": {"Sleep": {"Type": "Wait", "Seconds": 7 * DAY_S,
                                                                  "End": True}}})
    run = started(sfn, arn)
    before = clock(server, "now").stdout.strip()
    assert clock(server, "advance", "10d").returncode == 0
    after = clock(server, "now").stdout.strip()
    server.kill()
    server.start()
    assert clock(server, "now").stdout.strip() >= after > before  # ISO 8601 in UTC sorts as time does
    sfn = server.client()
    assert wait_closed(sfn, run)["status"] == "SUCCEEDED"
    assert [e["type"] for e in history(sfn, run)].count("WaitStateExited") == 1


def test_an_advance_moves_the_clock_by_exactly_the_span_asked_with_or_without_timers_in_it(server):
    def offset_after(body: dict) -> int:
        status, answer = raw_call(server, "Statewright.AdvanceClock", json.dumps(body).encode())
        assert status == 200, answer
        return answer["offsetMs"]

    start = raw_call(server, "Statewright.GetClock", b"{}")[1]["offsetMs"]
    assert offset_after({"milliseconds": 1000}) == start + 1000
    assert offset_after({"by": "1s"}) == start + 2000
    sfn = server.client()
    run = started(sfn, machine(sfn, {"StartAt": "W", "States": {  # timers inside the span: it moves in steps
        "W": {"Type": "Wait", "Seconds": 5, "Next": "X"}, "X": {"Type": "Wait", "Seconds": 7, "End": True}}}))
    assert offset_after({"by": "1m"}) == start + 62_000
    assert wait_closed(sfn, run)["status"] == "SUCCEEDED"


def test_bad_durations_and_a_wall_clock_server_are_refused_with_what_to_do(server, tmp_path):
    refused = clock(server, "advance", "tomorrow")
    assert refused.returncode != 0 and "such as 90d" in refused.stderr
    status, body = raw_call(server, "Statewright.AdvanceClock", json.dumps({"by": "2w"}).encode())
    assert status == 400 and body["__type"].endswith("ValidationException") and "such as 90d" in body["message"]
    status, body = raw_call(server, "Statewright.AdvanceClock", json.dumps({"milliseconds": -5}).encode())
    assert status == 400 and body["__type"].endswith("ValidationException")
    status, body = raw_call(server, "Statewright.RewindClock", b"{}")
    assert status == 400 and body["__type"].endswith("UnknownOperationException")
    wall = ServerProcess(tmp_path / "wall").start()
    try:
        refused = clock(wall, "now")
        assert refused.returncode == 1 and "--clock virtual" in refused.stderr
    finally:
        wall.stop()


def test_the_virtual_clock_refuses_postgresql(tmp_path, postgres_schema):
    run = subprocess.run([sys.executable, "-m", "statewright", "serve", "--clock", "virtual", "--store",
                          postgres_schema, "--cluster-secret", "s", "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "drop --store" in run.stderr


def _eventually(check, deadline_s: float = 20) -> bool:
    """A bounded wait for the engine to act on an advance (not a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_wait_scale_zero_skips_waits_and_retry_backoffs_but_keeps_timeouts(tmp_path):
    server = ServerProcess(tmp_path / "scaled", extra_args=("--wait-scale", "0")).start()
    try:
        sfn = server.client()
        activity = sfn.create_activity(name=f"a-{uuid.uuid4().hex[:10]}")["activityArn"]
        arn = machine(sfn, {"StartAt": "Sleep", "States": {
            "Sleep": {"Type": "Wait", "Seconds": 30 * DAY_S, "Next": "Work"},
            "Work": {"Type": "Task", "Resource": activity, "TimeoutSeconds": 1,
                     "Retry": [{"ErrorEquals": ["States.Timeout"], "IntervalSeconds": 3600, "MaxAttempts": 1}],
                     "End": True}}})
        run = started(sfn, arn)
        described = wait_closed(sfn, run)
        assert described["status"] == "FAILED" and described["error"] == "States.Timeout"
        types = [event["type"] for event in history(sfn, run)]
        assert types.count("ActivityTimedOut") == 2  # each attempt kept its one-second timeout
    finally:
        server.stop()


def test_wait_scale_must_be_a_number_from_zero(tmp_path):
    run = subprocess.run([sys.executable, "-m", "statewright", "serve", "--wait-scale", "-1", "--data-dir",
                          str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "--wait-scale" in run.stderr


def test_one_advance_fires_the_timers_set_within_its_span_at_their_due_times_before_it_answers(server):
    sfn = server.client()
    arn = machine(sfn, {"StartAt": "Day", "States": {
        "Day": {"Type": "Wait", "Seconds": DAY_S, "Next": "Hour"},
        "Hour": {"Type": "Wait", "Seconds": 3600, "Next": "Done"},
        "Done": {"Type": "Pass", "End": True}}})
    run = started(sfn, arn)
    assert clock(server, "advance", "2d").returncode == 0
    described = sfn.describe_execution(executionArn=run)  # at once: the advance answers once they have fired
    assert described["status"] == "SUCCEEDED"
    events = {event["type"] + ":" + (event.get("stateExitedEventDetails") or {}).get("name", ""): event["timestamp"]
              for event in history(sfn, run)}
    slack = timedelta(seconds=1)  # the wall clock runs on meanwhile (the virtual clock is it plus an offset)
    assert timedelta(days=1) <= events["WaitStateExited:Day"] - described["startDate"] < timedelta(days=1) + slack
    assert timedelta(hours=1) <= events["WaitStateExited:Hour"] - events["WaitStateExited:Day"] < timedelta(
        hours=1) + slack
