"""StartSyncExecution and TestState from the AWS SDK for JavaScript v3 (``disableHostPrefix: true``, as the README
says), against a real server. Node.js is required: a machine without it fails this test rather than skipping it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from server import ROLE_ARN

pytestmark = pytest.mark.slow  # Node.js against a real server: not in the fast tier

SCRIPT = Path(__file__).parent / "fixtures" / "javascript" / "sync_and_test_state.js"
CHAIN = {"StartAt": "Double", "States": {
    "Double": {"Type": "Pass", "Parameters": {"doubled.$": "States.MathAdd($.n, $.n)"}, "End": True}}}


@pytest.fixture(scope="module")
def sdk(tmp_path_factory) -> Path:
    """A directory with @aws-sdk/client-sfn installed by npm (once per run)."""
    assert shutil.which("node") and shutil.which("npm"), "Node.js and npm are needed for the JavaScript SDK test"
    where = tmp_path_factory.mktemp("javascript-sdk")
    subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "@aws-sdk/client-sfn"], cwd=where,
                   check=True, timeout=300)
    return where


def test_javascript_sdk_reaches_start_sync_execution_and_test_state(sdk, sfn, server):
    machine = sfn.create_state_machine(name="js-sync", definition=json.dumps(CHAIN), roleArn=ROLE_ARN,
                                       type="EXPRESS")["stateMachineArn"]
    ran = subprocess.run(["node", str(SCRIPT), server.endpoint, machine, ROLE_ARN], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "NODE_PATH": str(sdk / "node_modules")})
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    assert answer == {"status": "SUCCEEDED", "output": '{"doubled":18}',
                      "billingDetails": answer["billingDetails"], "testStatus": "SUCCEEDED",
                      "testOutput": '{"doubled":8}'}
    assert answer["billingDetails"]["billedMemoryUsedInMB"] == 64
