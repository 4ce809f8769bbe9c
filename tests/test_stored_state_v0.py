"""A data directory written by earlier code (tests/fixtures/state_v0, made by make_state_v0.py before the mutable
state carried a schema version) opens, and every execution paused in it runs to the end with the right result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from server import ServerProcess, history, wait_closed

pytestmark = pytest.mark.slow  # a real server process: not in the fast tier

FIXTURE = Path(__file__).parent / "fixtures" / "state_v0"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())


@pytest.fixture(scope="module")
def reopened(tmp_path_factory):
    data = tmp_path_factory.mktemp("v0") / "data"
    shutil.copytree(FIXTURE, data)
    process = ServerProcess(data, shards=8).start()
    yield process.client()
    process.stop()


def closed(sfn, key: str) -> dict:
    described = wait_closed(sfn, EXPECTED[key]["arn"])
    assert described["status"] == "SUCCEEDED", described
    return json.loads(described["output"])


def test_sleeping_executions_wake_with_their_variables_and_iterations(reopened):
    for key in ("wait", "map", "sync"):
        assert closed(reopened, key) == EXPECTED[key]["output"]


def test_a_retry_in_backoff_dispatches_its_next_attempt(reopened):
    task = reopened.get_activity_task(activityArn=EXPECTED["activity"], workerName="after")
    assert json.loads(task["input"]) == {"job": "retry"}
    reopened.send_task_success(taskToken=task["taskToken"], output='{"second": true}')
    assert closed(reopened, "retry") == {"second": True}


def test_started_attempts_take_the_tokens_issued_before(reopened):
    (branch,) = EXPECTED["handed_out"]
    reopened.send_task_success(taskToken=branch["token"], output='"answered"')
    assert closed(reopened, "parallel") == [{"job": "parallel"}, "answered"]
    reopened.send_task_heartbeat(taskToken=EXPECTED["started"]["token"])
    reopened.send_task_success(taskToken=EXPECTED["started"]["token"], output='{"late": "but fine"}')
    assert closed(reopened, "started") == {"late": "but fine"}


def test_a_callback_parent_resumes_with_the_token_its_child_carried(reopened):
    child = reopened.describe_execution(executionArn=EXPECTED["callback"]["child"])
    reopened.send_task_success(taskToken=json.loads(child["input"])["token"], output='{"called": "back"}')
    assert closed(reopened, "callback") == {"called": "back"}


def test_closed_executions_read_as_they_were(reopened):
    assert closed(reopened, "succeeded") == "fine"
    failed = reopened.describe_execution(executionArn=EXPECTED["failed"]["arn"])
    assert (failed["status"], failed["error"], failed["cause"]) == ("FAILED", "E", "c")


def test_histories_stay_gapless_across_the_upgrade(reopened):
    for key in ("wait", "retry", "parallel", "map", "started", "sync", "callback", "succeeded", "failed"):
        arn = EXPECTED[key]["arn"]
        wait_closed(reopened, arn)
        ids = [event["id"] for event in history(reopened, arn)]
        assert ids == list(range(1, len(ids) + 1)), key
