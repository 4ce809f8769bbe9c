"""Execution operations through boto3 against a real server."""

import json

import pytest

from server import history, wait_closed

CHAIN = {
    "StartAt": "Prepare",
    "States": {
        "Prepare": {"Type": "Pass", "Parameters": {"value.$": "$.n", "name.$": "$$.Execution.Name"},
                    "ResultPath": "$.prepared", "Next": "Route"},
        "Route": {"Type": "Choice", "Choices": [{"Variable": "$.n", "NumericGreaterThan": 10, "Next": "Big"}],
                  "Default": "Small"},
        "Big": {"Type": "Pass", "Result": "big", "ResultPath": "$.size", "End": True},
        "Small": {"Type": "Fail", "Error": "TooSmall", "Cause": "n must exceed 10"},
    },
}
WAIT = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 600, "End": True}}}


def test_chain_succeeds_with_output_and_aws_history(sfn, make_machine):
    arn = make_machine(CHAIN)
    started = sfn.start_execution(stateMachineArn=arn, name="run-big", input='{"n": 42}')
    described = wait_closed(sfn, started["executionArn"])
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"n": 42, "prepared": {"value": 42, "name": "run-big"},
                                               "size": "big"}
    assert described["startDate"] == started["startDate"]
    events = history(sfn, started["executionArn"])
    assert [(e["type"], e["id"], e["previousEventId"]) for e in events] == [
        ("ExecutionStarted", 1, 0), ("PassStateEntered", 2, 0), ("PassStateExited", 3, 2),
        ("ChoiceStateEntered", 4, 3), ("ChoiceStateExited", 5, 4), ("PassStateEntered", 6, 5),
        ("PassStateExited", 7, 6), ("ExecutionSucceeded", 8, 7)]
    assert events[0]["executionStartedEventDetails"] == {
        "input": '{"n": 42}', "inputDetails": {"truncated": False}, "roleArn": "arn:aws:iam::123456789012:role/"
        "statewright-test"}
    assert events[2]["stateExitedEventDetails"]["output"] == '{"n":42,"prepared":{"value":42,"name":"run-big"}}'


def test_fail_state_fails_the_execution_with_error_and_cause(sfn, make_machine):
    arn = make_machine(CHAIN)
    execution = sfn.start_execution(stateMachineArn=arn, input='{"n": 1}')["executionArn"]
    described = wait_closed(sfn, execution)
    assert (described["status"], described["error"], described["cause"]) == ("FAILED", "TooSmall",
                                                                              "n must exceed 10")
    assert "output" not in described
    last = history(sfn, execution)[-1]
    assert last["type"] == "ExecutionFailed"
    assert last["executionFailedEventDetails"] == {"error": "TooSmall", "cause": "n must exceed 10"}


def test_start_is_idempotent_for_same_name_and_input_while_running(sfn, make_machine):
    arn = make_machine(WAIT)
    first = sfn.start_execution(stateMachineArn=arn, name="same", input="{}")
    again = sfn.start_execution(stateMachineArn=arn, name="same", input="{}")
    assert (again["executionArn"], again["startDate"]) == (first["executionArn"], first["startDate"])
    with pytest.raises(sfn.exceptions.ExecutionAlreadyExists) as raised:
        sfn.start_execution(stateMachineArn=arn, name="same", input='{"other": true}')
    assert raised.value.response["Error"]["Message"] == f"Execution Already Exists: '{first['executionArn']}'"
    sfn.stop_execution(executionArn=first["executionArn"])


def test_same_name_after_close_is_already_exists(sfn, make_machine):
    arn = make_machine(CHAIN)
    execution = sfn.start_execution(stateMachineArn=arn, name="once", input='{"n": 11}')["executionArn"]
    wait_closed(sfn, execution)
    with pytest.raises(sfn.exceptions.ExecutionAlreadyExists):
        sfn.start_execution(stateMachineArn=arn, name="once", input='{"n": 11}')


def test_start_without_name_gets_a_uuid_name(sfn, make_machine):
    arn = make_machine(CHAIN)
    execution = sfn.start_execution(stateMachineArn=arn, input='{"n": 11}')["executionArn"]
    assert len(execution.rsplit(":", 1)[1]) == 36


def test_start_on_missing_state_machine(sfn):
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:ghost"
    with pytest.raises(sfn.exceptions.StateMachineDoesNotExist):
        sfn.start_execution(stateMachineArn=arn)


@pytest.mark.parametrize("text", ["not json", "{'a': 1}", "", "{"])
def test_input_that_is_not_json_is_invalid_execution_input(sfn, make_machine, text):
    arn = make_machine(CHAIN)
    with pytest.raises(sfn.exceptions.InvalidExecutionInput) as raised:
        sfn.start_execution(stateMachineArn=arn, input=text)
    assert raised.value.response["Error"]["Message"].startswith("Invalid State Machine Execution Input: '")


@pytest.mark.parametrize(("text", "problem"), [
    ("not json", "Unrecognized token 'not': was expecting (JSON String, Number, Array, Object or token 'null', "
                 "'true' or 'false')"),
    ('{"a" 1}', "Unexpected character ('1' (code 49)): was expecting a colon to separate field name and value"),
    ("[1,]", "Unexpected character (']' (code 93)): expected a valid value (JSON String, Number, Array, Object or "
             "token 'null', 'true' or 'false')"),
])
def test_input_that_is_not_json_is_refused_in_jacksons_words(sfn, make_machine, text, problem):
    arn = make_machine(CHAIN)
    with pytest.raises(sfn.exceptions.InvalidExecutionInput) as raised:
        sfn.start_execution(stateMachineArn=arn, input=text)
    assert raised.value.response["Error"]["Message"] == f"Invalid State Machine Execution Input: '{problem}'"


def test_next_token_over_1024_characters_is_refused_in_aws_words(sfn):
    token = "t" * 1025
    with pytest.raises(sfn.exceptions.ValidationException) as raised:
        sfn.list_state_machines(nextToken=token)
    assert raised.value.response["Error"]["Message"] == (
        f"1 validation error detected: Value '{token}' at 'nextToken' failed to satisfy constraint: Member must have "
        "length less than or equal to 1024")


def test_input_over_256_kib_is_a_validation_exception(sfn, make_machine):
    arn = make_machine(CHAIN)
    with pytest.raises(sfn.exceptions.ValidationException) as raised:
        sfn.start_execution(stateMachineArn=arn, input=json.dumps({"x": "a" * 262_144}))
    assert "262144 bytes" in raised.value.response["Error"]["Message"]


def test_bad_execution_name_is_invalid_name(sfn, make_machine):
    arn = make_machine(CHAIN)
    with pytest.raises(sfn.exceptions.InvalidName):
        sfn.start_execution(stateMachineArn=arn, name="has/slash")


def test_stop_aborts_a_waiting_execution(sfn, make_machine):
    arn = make_machine(WAIT)
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    stopped = sfn.stop_execution(executionArn=execution, error="Manual", cause="operator said so")
    described = sfn.describe_execution(executionArn=execution)
    assert described["status"] == "ABORTED"
    assert described["stopDate"] == stopped["stopDate"]
    assert (described["error"], described["cause"]) == ("Manual", "operator said so")
    events = history(sfn, execution)
    assert [e["type"] for e in events] == ["ExecutionStarted", "WaitStateEntered", "ExecutionAborted"]
    assert events[-1]["previousEventId"] == 0
    assert events[-1]["executionAbortedEventDetails"] == {"error": "Manual", "cause": "operator said so"}
    again = sfn.stop_execution(executionArn=execution)
    assert again["stopDate"] == stopped["stopDate"]


def test_stop_missing_execution(sfn):
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.stop_execution(executionArn="arn:aws:states:us-east-1:123456789012:execution:ghost:none")


def test_describe_missing_execution(sfn):
    arn = "arn:aws:states:us-east-1:123456789012:execution:ghost:none"
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist) as raised:
        sfn.describe_execution(executionArn=arn)
    assert raised.value.response["Error"]["Message"] == f"Execution Does Not Exist: '{arn}'"


def test_running_execution_is_described_without_stop_date(sfn, make_machine):
    arn = make_machine(WAIT)
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    described = sfn.describe_execution(executionArn=execution)
    assert described["status"] == "RUNNING"
    assert "stopDate" not in described
    sfn.stop_execution(executionArn=execution)


def test_list_executions_newest_first_with_filter_and_pages(sfn, make_machine):
    arn = make_machine(CHAIN)
    arns = [sfn.start_execution(stateMachineArn=arn, name=f"e{i}", input=json.dumps({"n": 5 + i * 5}))[
        "executionArn"] for i in range(4)]
    for execution in arns:
        wait_closed(sfn, execution)
    listed, token = [], None
    while True:
        page = sfn.list_executions(stateMachineArn=arn, maxResults=3, **({"nextToken": token} if token else {}))
        listed += page["executions"]
        token = page.get("nextToken")
        if not token:
            break
    assert [e["executionArn"] for e in listed] == list(reversed(arns))
    failed = sfn.list_executions(stateMachineArn=arn, statusFilter="FAILED")["executions"]
    assert [e["name"] for e in failed] == ["e1", "e0"]


def test_list_executions_rejects_unknown_status(sfn, make_machine):
    arn = make_machine(CHAIN)
    with pytest.raises(sfn.exceptions.ValidationException):
        sfn.list_executions(stateMachineArn=arn, statusFilter="DONE")


def test_history_pages_forward_and_backward(sfn, make_machine):
    arn = make_machine(CHAIN)
    execution = sfn.start_execution(stateMachineArn=arn, input='{"n": 50}')["executionArn"]
    wait_closed(sfn, execution)
    forward = history(sfn, execution, maxResults=3)
    backward = history(sfn, execution, maxResults=3, reverseOrder=True)
    assert [e["id"] for e in forward] == list(range(1, 9))
    assert [e["id"] for e in backward] == list(range(8, 0, -1))


def test_history_without_execution_data_omits_payloads(sfn, make_machine):
    arn = make_machine(CHAIN)
    execution = sfn.start_execution(stateMachineArn=arn, input='{"n": 50}')["executionArn"]
    wait_closed(sfn, execution)
    events = history(sfn, execution, includeExecutionData=False)
    assert events[0]["executionStartedEventDetails"] == {"roleArn": "arn:aws:iam::123456789012:role/statewright-test"}
    assert events[1]["stateEnteredEventDetails"] == {"name": "Prepare"}


def test_definition_timeout_times_the_execution_out(sfn, make_machine):
    arn = make_machine({"TimeoutSeconds": 1, **WAIT})
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    described = wait_closed(sfn, execution)
    assert described["status"] == "TIMED_OUT"
    assert [e["type"] for e in history(sfn, execution)] == ["ExecutionStarted", "WaitStateEntered",
                                                           "ExecutionTimedOut"]


def test_wait_state_fires_its_timer(sfn, make_machine):
    arn = make_machine({"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 1, "Next": "Done"},
                                                   "Done": {"Type": "Succeed"}}})
    execution = sfn.start_execution(stateMachineArn=arn, input='{"k": 1}')["executionArn"]
    described = wait_closed(sfn, execution)
    assert described["status"] == "SUCCEEDED"
    events = history(sfn, execution)
    entered = next(e for e in events if e["type"] == "WaitStateEntered")
    exited = next(e for e in events if e["type"] == "WaitStateExited")
    assert (exited["timestamp"] - entered["timestamp"]).total_seconds() >= 1


def test_list_executions_with_a_foreign_token_is_invalid_token(sfn, make_machine):
    import base64

    arn = make_machine(CHAIN)
    token = base64.urlsafe_b64encode(b"42").decode()
    with pytest.raises(sfn.exceptions.InvalidToken):
        sfn.list_executions(stateMachineArn=arn, nextToken=token)
