"""EXPRESS state machines through boto3 against a real server: AWS's rules and errors, StartSyncExecution, and the
operations AWS does not serve for Express executions."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from botocore.exceptions import ClientError

from server import ROLE_ARN, raw_call

ACTIVITY = "arn:aws:states:us-east-1:123456789012:activity:any"
CHAIN = {"StartAt": "A", "States": {
    "A": {"Type": "Pass", "Parameters": {"doubled.$": "States.MathAdd($.n, $.n)"}, "Next": "B"},
    "B": {"Type": "Choice", "Choices": [{"Variable": "$.doubled", "NumericGreaterThan": 10, "Next": "Big"}],
          "Default": "Small"},
    "Big": {"Type": "Succeed"},
    "Small": {"Type": "Fail", "Error": "TooSmall", "Cause": "n must exceed 5"}}}


def task(resource: str) -> dict:
    return {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": resource, "End": True}}}


def express(sfn, definition: dict, **options) -> str:
    return sfn.create_state_machine(name=f"ex-{uuid.uuid4().hex[:10]}", definition=json.dumps(definition),
                                    roleArn=ROLE_ARN, type="EXPRESS", **options)["stateMachineArn"]


def error_of(call) -> tuple[str, str]:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"], caught.value.response["Error"]["Message"]


@pytest.mark.parametrize(("resource", "message"), [
    (ACTIVITY, "Express state machine does not support Activity ARN"),
    ("arn:aws:states:::states:startExecution.sync", "Express state machine does not support '.sync' service "
                                                    "integration."),
    ("arn:aws:states:::states:startExecution.sync:2", "Express state machine does not support '.sync:2' service "
                                                      "integration."),
    ("arn:aws:states:::states:startExecution.waitForTaskToken", "Express state machine does not support "
                                                                "'.waitForTaskToken' service integration."),
])
def test_express_refuses_what_it_cannot_wait_for(sfn, resource, message):
    definition = task(resource)
    assert error_of(lambda: express(sfn, definition)) == (
        "InvalidDefinition", f"Invalid State Machine Definition: 'SCHEMA_VALIDATION_FAILED: {message} at "
                             f"/States/T/Resource'")
    checked = sfn.validate_state_machine_definition(definition=json.dumps(definition), type="EXPRESS")
    assert (checked["result"], checked["diagnostics"]) == ("FAIL", [
        {"severity": "ERROR", "code": "SCHEMA_VALIDATION_FAILED", "message": message,
         "location": "/States/T/Resource"}])
    assert sfn.validate_state_machine_definition(definition=json.dumps(definition), type="STANDARD")["result"] == "OK"


def test_the_rules_hold_inside_parallel_branches_and_on_update(sfn):
    nested = {"StartAt": "P", "States": {"P": {"Type": "Parallel", "End": True, "Branches": [task(ACTIVITY)]}}}
    assert "at /States/P/Branches[0]/States/T/Resource" in error_of(lambda: express(sfn, nested))[1]
    arn = express(sfn, CHAIN)
    assert error_of(lambda: sfn.update_state_machine(stateMachineArn=arn, definition=json.dumps(task(ACTIVITY))))[
        0] == "InvalidDefinition"
    described = sfn.describe_state_machine(stateMachineArn=arn)
    assert described["type"] == "EXPRESS"
    listed = [m for m in sfn.list_state_machines()["stateMachines"] if m["stateMachineArn"] == arn]
    assert listed[0]["type"] == "EXPRESS"


def test_start_sync_execution_answers_with_the_result(sfn):
    arn = express(sfn, CHAIN)
    done = sfn.start_sync_execution(stateMachineArn=arn, name="big", input='{"n": 6}')
    assert re.fullmatch(r"arn:aws:states:us-east-1:123456789012:express:" + arn.rsplit(":", 1)[1] +
                        r":big:[0-9a-f-]{36}", done["executionArn"])
    assert {key: done[key] for key in ("stateMachineArn", "name", "status", "input", "inputDetails", "output",
                                       "outputDetails")} == {
        "stateMachineArn": arn, "name": "big", "status": "SUCCEEDED", "input": '{"n": 6}',
        "inputDetails": {"included": True}, "output": '{"doubled":12}', "outputDetails": {"included": True}}
    assert done["billingDetails"]["billedMemoryUsedInMB"] == 64
    assert done["billingDetails"]["billedDurationInMilliseconds"] % 100 == 0
    assert "traceHeader" not in done


def test_start_sync_execution_hands_back_the_trace_header_it_was_given(sfn):
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"
    done = sfn.start_sync_execution(stateMachineArn=express(sfn, CHAIN), input='{"n": 1}', traceHeader=header)
    assert done["traceHeader"] == header
    with pytest.raises(ClientError, match="ValidationException"):
        sfn.start_sync_execution(stateMachineArn=express(sfn, CHAIN), traceHeader="x" * 257)
    assert done["stopDate"] >= done["startDate"]


def test_a_failed_sync_execution_is_still_http_200(sfn, server):
    arn = express(sfn, CHAIN)
    status, body = raw_call(server, "AWSStepFunctions.StartSyncExecution",
                            json.dumps({"stateMachineArn": arn, "input": '{"n": 1}'}).encode())
    assert status == 200
    assert (body["status"], body["error"], body["cause"]) == ("FAILED", "TooSmall", "n must exceed 5")
    assert "output" not in body


def test_a_sync_execution_past_its_timeout_is_timed_out(sfn):
    waits = {"TimeoutSeconds": 1, "StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 30, "End": True}}}
    done = sfn.start_sync_execution(stateMachineArn=express(sfn, waits))
    assert (done["status"], done["error"]) == ("TIMED_OUT", "States.Timeout")


def test_start_sync_execution_is_for_express_machines_only(sfn, make_machine):
    standard = make_machine(CHAIN)
    assert error_of(lambda: sfn.start_sync_execution(stateMachineArn=standard)) == (
        "StateMachineTypeNotSupported", "This operation is not supported by this type of state machine")


def test_the_server_does_not_care_for_the_sync_host_prefix(sfn, server):
    """botocore sends StartSyncExecution to ``sync-<host>``; a proxy or /etc/hosts entry that reaches the server
    that way must get the same answer."""
    arn = express(sfn, CHAIN)
    status, body = raw_call(server, "AWSStepFunctions.StartSyncExecution",
                            json.dumps({"stateMachineArn": arn, "input": '{"n": 9}'}).encode(),
                            headers={"Host": f"sync-127.0.0.1:{server.port}"})
    assert (status, body["status"]) == (200, "SUCCEEDED")


def test_async_express_executions_are_not_described_listed_stopped_or_read(sfn):
    arn = express(sfn, CHAIN)
    started = sfn.start_execution(stateMachineArn=arn, name="quiet", input='{"n": 9}')
    execution = started["executionArn"]
    assert re.fullmatch(r"arn:aws:states:us-east-1:123456789012:express:[\w-]+:quiet:[0-9a-f-]{36}", execution)
    assert sfn.start_execution(stateMachineArn=arn, name="quiet", input='{"n": 9}')["executionArn"] != execution
    refused = ("InvalidArn", "Invalid Arn: 'Resource type not valid in this context: express'")
    assert error_of(lambda: sfn.describe_execution(executionArn=execution)) == refused
    assert error_of(lambda: sfn.get_execution_history(executionArn=execution)) == refused
    assert error_of(lambda: sfn.stop_execution(executionArn=execution)) == refused
    assert error_of(lambda: sfn.describe_state_machine_for_execution(executionArn=execution)) == refused
    assert error_of(lambda: sfn.list_executions(stateMachineArn=arn)) == (
        "StateMachineTypeNotSupported", "This operation is not supported by this type of state machine")


def test_express_runs_through_versions_and_aliases(sfn):
    arn = express(sfn, CHAIN, publish=True)
    sfn.create_state_machine_alias(name="live", routingConfiguration=[
        {"stateMachineVersionArn": f"{arn}:1", "weight": 100}])
    for target in (f"{arn}:1", f"{arn}:live"):
        assert sfn.start_sync_execution(stateMachineArn=target, input='{"n": 7}')["status"] == "SUCCEEDED"
        assert ":express:" in sfn.start_execution(stateMachineArn=target)["executionArn"]
