"""The AWS CLI drives statewright with --endpoint-url, as a user would."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from server import ROLE_ARN, wait_closed

pytestmark = pytest.mark.slow  # the AWS CLI against a real server: not in the fast tier

AWS = Path(sys.executable).parent / "aws"


def aws(server, *args: str, **more_env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "eu-central-1", "AWS_PAGER": "", **more_env}
    return subprocess.run([str(AWS), "--endpoint-url", server.endpoint, "stepfunctions", *args],
                          capture_output=True, text=True, env=env, timeout=60)


def test_cli_creates_starts_and_reads_history(server, tmp_path):
    definition = tmp_path / "machine.json"
    definition.write_text(json.dumps({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}}))
    created = aws(server, "create-state-machine", "--name", "cli-machine", "--role-arn", ROLE_ARN,
                  "--definition", f"file://{definition}")
    assert created.returncode == 0, created.stderr
    machine_arn = json.loads(created.stdout)["stateMachineArn"]
    assert machine_arn == "arn:aws:states:eu-central-1:123456789012:stateMachine:cli-machine"
    started = aws(server, "start-execution", "--state-machine-arn", machine_arn, "--input", '{"x": 1}')
    execution_arn = json.loads(started.stdout)["executionArn"]
    wait_closed(server.client(region="eu-central-1"), execution_arn)
    events = json.loads(aws(server, "get-execution-history", "--execution-arn", execution_arn).stdout)["events"]
    assert [e["type"] for e in events] == ["ExecutionStarted", "PassStateEntered", "PassStateExited",
                                           "ExecutionSucceeded"]


def test_cli_shows_aws_errors(server):
    result = aws(server, "describe-execution", "--execution-arn", "bogus")
    assert result.returncode != 0
    assert "InvalidArn" in result.stderr


def test_cli_reaches_start_sync_execution_without_the_host_prefix(server, tmp_path):
    """The README's way: AWS_DISABLE_HOST_PREFIX_INJECTION (or disable_host_prefix_injection in the profile)."""
    definition = tmp_path / "express.json"
    definition.write_text(json.dumps({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}}))
    created = aws(server, "create-state-machine", "--name", "cli-express", "--role-arn", ROLE_ARN, "--type",
                  "EXPRESS", "--definition", f"file://{definition}")
    machine_arn = json.loads(created.stdout)["stateMachineArn"]
    ran = aws(server, "start-sync-execution", "--state-machine-arn", machine_arn, "--input", '{"x": 1}',
              AWS_DISABLE_HOST_PREFIX_INJECTION="true")
    assert ran.returncode == 0, ran.stderr
    assert (json.loads(ran.stdout)["status"], json.loads(ran.stdout)["output"]) == ("SUCCEEDED", '{"x": 1}')
