"""Redrive is one durable transition: a server killed with SIGKILL while redrives are in flight loses none that it
answered, and a client that repeats an unanswered redrive with its clientToken after the restart gets exactly one
redrive. Real server process, boto3."""

from __future__ import annotations

import json
import random
import time

import pytest

from server import ROLE_ARN, ServerProcess, history, redrive_through_a_kill, wait_closed
from statewright.sim.checkers import history_problems

pytestmark = pytest.mark.slow  # a real server killed mid-redrive: not in the fast tier

EXECUTIONS = 24


def test_redrives_survive_sigkill_and_a_repeated_client_token_redrives_once(tmp_path, crash_seed):
    server = ServerProcess(tmp_path / "data", shards=4).start()
    try:
        sfn = server.client()
        activity = sfn.create_activity(name="work")["activityArn"]
        machine = sfn.create_state_machine(name="m", roleArn=ROLE_ARN, definition=json.dumps({
            "StartAt": "Prepare", "States": {
                "Prepare": {"Type": "Pass", "Result": 1, "ResultPath": "$.prepared", "Next": "Work"},
                "Work": {"Type": "Task", "Resource": activity, "End": True}}}))["stateMachineArn"]
        executions = [sfn.start_execution(stateMachineArn=machine, name=f"e{i}")["executionArn"]
                      for i in range(EXECUTIONS)]
        for _ in executions:
            task = sfn.get_activity_task(activityArn=activity)
            sfn.send_task_failure(taskToken=task["taskToken"], error="Broken")
        assert all(wait_closed(sfn, arn)["status"] == "FAILED" for arn in executions)

        # the kill's moment from the seed (a failure prints it, and how to run the test again on it: conftest.py)
        answered, tokens = redrive_through_a_kill(server, executions, random.Random(crash_seed).uniform(0.02, 0.2))
        sfn = server.client()
        for arn in executions:  # the client repeats what it did not hear back, with the same token
            again = sfn.redrive_execution(executionArn=arn, clientToken=tokens[arn])["redriveDate"]
            if arn in answered:
                assert again == answered[arn], f"{arn}: an answered redrive was lost or repeated"
        assert all(sfn.describe_execution(executionArn=arn)["redriveCount"] == 1 for arn in executions)

        for _ in executions:
            task = sfn.get_activity_task(activityArn=activity)
            assert json.loads(task["input"]) == {"prepared": 1}
            sfn.send_task_success(taskToken=task["taskToken"], output='"done"')
        deadline = time.monotonic() + 30
        for arn in executions:
            assert wait_closed(sfn, arn, max(deadline - time.monotonic(), 1))["status"] == "SUCCEEDED"
            events = history(sfn, arn)
            assert history_problems(arn, events, closed=True) == []
            types = [event["type"] for event in events]
            assert types.count("ExecutionRedriven") == 1 and types.count("PassStateEntered") == 1
    finally:
        server.stop()
