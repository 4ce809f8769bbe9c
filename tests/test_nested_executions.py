"""arn:aws:states:::states:startExecution and its .sync, .sync:2 and .waitForTaskToken forms, through boto3."""

import json
import time

import pytest

from server import history, wait_closed

CHILD = {"StartAt": "W", "States": {
    "W": {"Type": "Wait", "Seconds": 1, "Next": "Check"},
    "Check": {"Type": "Choice", "Choices": [{"Variable": "$.fail", "BooleanEquals": True, "Next": "Broke"}],
              "Default": "Double"},
    "Broke": {"Type": "Fail", "Error": "ChildBroke", "Cause": "asked to"},
    "Double": {"Type": "Pass", "Parameters": {"doubled.$": "States.MathAdd($.n, $.n)"}, "End": True}}}


@pytest.fixture
def child(make_machine):
    return make_machine(CHILD)


def start_task(child_arn: str, suffix: str) -> dict:
    return {"Type": "Task", "Resource": f"arn:aws:states:::states:startExecution{suffix}", "End": True,
            "Parameters": {"StateMachineArn": child_arn, "Input": {
                "n.$": "$.n", "fail.$": "$.fail", "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$": "$$.Execution.Id"}}}


def parent(make_machine, child_arn: str, suffix: str) -> str:
    return make_machine({"StartAt": "Start", "States": {"Start": start_task(child_arn, suffix)}})


def run(sfn, machine_arn: str, n: int = 4, fail: bool = False) -> tuple[dict, list[str]]:
    execution = sfn.start_execution(stateMachineArn=machine_arn, input=json.dumps({"n": n, "fail": fail}))
    described = wait_closed(sfn, execution["executionArn"])
    return described, [event["type"] for event in history(sfn, execution["executionArn"])]


def test_request_response_returns_the_child_arn_at_once(sfn, make_machine, child):
    described, types = run(sfn, parent(make_machine, child, ""))
    output = json.loads(described["output"])
    assert set(output) == {"ExecutionArn", "StartDate"}
    assert types == ["ExecutionStarted", "TaskStateEntered", "TaskScheduled", "TaskStarted", "TaskSucceeded",
                     "TaskStateExited", "ExecutionSucceeded"]
    child_input = json.loads(sfn.describe_execution(executionArn=output["ExecutionArn"])["input"])
    assert child_input["AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID"] == described["executionArn"]


def test_sync_waits_for_the_child_and_returns_its_output_as_text(sfn, make_machine, child):
    described, types = run(sfn, parent(make_machine, child, ".sync"))
    output = json.loads(described["output"])
    assert output["Status"] == "SUCCEEDED"
    assert json.loads(output["Output"]) == {"doubled": 8}
    assert types == ["ExecutionStarted", "TaskStateEntered", "TaskScheduled", "TaskStarted", "TaskSubmitted",
                     "TaskSucceeded", "TaskStateExited", "ExecutionSucceeded"]


def test_sync2_returns_the_child_output_as_json(sfn, make_machine, child):
    described, _ = run(sfn, parent(make_machine, child, ".sync:2"))
    assert json.loads(described["output"])["Output"] == {"doubled": 8}


def test_a_failed_child_fails_the_task_with_states_task_failed(sfn, make_machine, child):
    described, types = run(sfn, parent(make_machine, child, ".sync"), fail=True)
    assert described["error"] == "States.TaskFailed"
    cause = json.loads(described["cause"])
    assert (cause["Status"], cause["Error"], cause["Cause"]) == ("FAILED", "ChildBroke", "asked to")
    assert types[-2:] == ["TaskFailed", "ExecutionFailed"]


def test_a_failed_child_can_be_caught(sfn, make_machine, child):
    task = start_task(child, ".sync:2")
    task["Catch"] = [{"ErrorEquals": ["States.TaskFailed"], "ResultPath": "$.err", "Next": "Handled"}]
    machine = make_machine({"StartAt": "Start", "States": {"Start": task, "Handled": {"Type": "Pass", "End": True}}})
    described, _ = run(sfn, machine, fail=True)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["err"]["Error"] == "States.TaskFailed"


def test_stopping_the_parent_stops_the_child_it_waits_on(sfn, make_machine):
    slow_child = make_machine({"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 600, "End": True}}})
    machine = make_machine({"StartAt": "Start", "States": {"Start": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync", "End": True,
        "Parameters": {"StateMachineArn": slow_child, "Name": "waited-on", "Input": {}}}}})
    execution = sfn.start_execution(stateMachineArn=machine)["executionArn"]
    child_arn = slow_child.replace(":stateMachine:", ":execution:") + ":waited-on"
    wait_for_submitted(sfn, execution)
    sfn.stop_execution(executionArn=execution)
    assert wait_closed(sfn, child_arn)["status"] == "ABORTED"


def test_wait_for_task_token_resumes_with_the_token_reply(sfn, make_machine):
    holder = make_machine({"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 600, "End": True}}})
    machine = make_machine({"StartAt": "Start", "States": {"Start": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.waitForTaskToken", "End": True,
        "TimeoutSeconds": 300, "ResultPath": "$.reply",
        "Parameters": {"StateMachineArn": holder, "Name": "token-holder", "Input": {"token.$": "$$.Task.Token"}}}}})
    execution = sfn.start_execution(stateMachineArn=machine, input='{"k": 1}')["executionArn"]
    child_arn = holder.replace(":stateMachine:", ":execution:") + ":token-holder"
    wait_for_submitted(sfn, execution)
    token = json.loads(sfn.describe_execution(executionArn=child_arn)["input"])["token"]
    sfn.send_task_success(taskToken=token, output='{"approved": true}')
    described = wait_closed(sfn, execution)
    assert json.loads(described["output"]) == {"k": 1, "reply": {"approved": True}}
    with pytest.raises(sfn.exceptions.TaskTimedOut):
        sfn.send_task_success(taskToken=token, output="{}")
    sfn.stop_execution(executionArn=child_arn)


def test_missing_child_state_machine_fails_the_task(sfn, make_machine):
    machine = parent(make_machine, "arn:aws:states:us-east-1:123456789012:stateMachine:nope", ".sync")
    described, _ = run(sfn, machine)
    assert described["error"] == "StepFunctions.StateMachineDoesNotExistException"


def test_a_child_starts_on_a_version_or_through_an_alias_as_start_execution_does(sfn, make_machine, child):
    version = sfn.publish_state_machine_version(stateMachineArn=child)["stateMachineVersionArn"]
    sfn.update_state_machine(stateMachineArn=child, definition=json.dumps(
        {"StartAt": "Changed", "States": {"Changed": {"Type": "Pass", "Result": "later", "End": True}}}))
    alias = sfn.create_state_machine_alias(name="live", routingConfiguration=[
        {"stateMachineVersionArn": version, "weight": 100}])["stateMachineAliasArn"]
    for target, expected in ((version, (version, None)), (alias, (version, alias))):
        described, _ = run(sfn, parent(make_machine, target, ".sync:2"))
        output = json.loads(described["output"])
        assert output["Output"] == {"doubled": 8}  # the version's definition, not the state machine's latest
        started = sfn.describe_execution(executionArn=output["ExecutionArn"])
        assert (started.get("stateMachineVersionArn"), started.get("stateMachineAliasArn")) == expected
    for missing in (f"{child}:9", f"{child}:nobody"):
        described, _ = run(sfn, parent(make_machine, missing, ".sync"))
        assert described["error"] == "StepFunctions.StateMachineDoesNotExistException"


def wait_for_submitted(sfn, execution_arn: str) -> None:
    deadline = time.monotonic() + 30
    while "TaskSubmitted" not in [e["type"] for e in history(sfn, execution_arn)]:
        assert time.monotonic() < deadline, "the task was never submitted"
        time.sleep(0.05)



def test_a_sync_child_can_answer_its_parent_with_the_parents_task_token(sfn, make_machine):
    """LocalStack's AWS-validated SFN_START_EXECUTION_SYNC_WITH_TASK_TOKEN: $$.Task.Token is there in a
    startExecution.sync Task, and SendTaskSuccess with it ends the parent's task before its child ends."""
    sleeper = make_machine({"StartAt": "Sleep", "States": {"Sleep": {"Type": "Wait", "Seconds": 3600, "End": True}}})
    machine = make_machine({"StartAt": "Start", "States": {"Start": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync", "End": True,
        "Parameters": {"StateMachineArn": sleeper, "Input": {"TaskToken.$": "$$.Task.Token"}}}}})
    started = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
    deadline = time.monotonic() + 20
    children = []
    while not children and time.monotonic() < deadline:
        children = sfn.list_executions(stateMachineArn=sleeper)["executions"]
        time.sleep(0.05)
    child = sfn.describe_execution(executionArn=children[0]["executionArn"])
    sfn.send_task_success(taskToken=json.loads(child["input"])["TaskToken"], output='{"answered": "early"}')
    described = wait_closed(sfn, started)
    assert described["status"] == "SUCCEEDED" and json.loads(described["output"]) == {"answered": "early"}
    assert sfn.describe_execution(executionArn=child["executionArn"])["status"] == "RUNNING"
    sfn.stop_execution(executionArn=child["executionArn"])
