"""A complete test of a workflow with statewright's pytest plugin (pip install statewright[testing]): an order
waits a day for approval, a Lambda function charges it (mocked: throttled once, so Retry runs it again), and a
worker ships it (an activity). It runs in about a second: the test moves the server's clock instead of waiting.

pytest.ini beside it names the mock configuration: ``statewright_mock_config = MockConfigFile.json``."""

import json
import time

WORKFLOW = {
    "StartAt": "WaitForApproval",
    "States": {
        "WaitForApproval": {"Type": "Wait", "Seconds": 86400, "Next": "Charge"},
        "Charge": {
            "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": "charge", "Payload.$": "$"},
            "Retry": [{"ErrorEquals": ["Lambda.TooManyRequestsException"], "IntervalSeconds": 60, "MaxAttempts": 2}],
            "ResultSelector": {"charged.$": "$.Payload.charged"}, "ResultPath": "$.payment", "Next": "Ship",
        },
        "Ship": {"Type": "Task", "Resource": "ACTIVITY_ARN", "ResultPath": "$.shipment", "End": True},
    },
}


def eventually(check, what):
    """The server acts on an advance in milliseconds, but not before the next call: wait until it has."""
    deadline = time.monotonic() + 30
    while not (seen := check()):
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.02)
    return seen


def event_types(sfn, execution_arn):
    return [event["type"] for event in sfn.get_execution_history(executionArn=execution_arn)["events"]]


def test_an_order_is_charged_and_shipped_a_day_after_it_is_placed(statewright_sfn, statewright_clock):
    sfn = statewright_sfn
    activity = sfn.create_activity(name="ship")["activityArn"]
    machine = sfn.create_state_machine(
        name="orders", definition=json.dumps(WORKFLOW).replace("ACTIVITY_ARN", activity),
        roleArn="arn:aws:iam::123456789012:role/orders")["stateMachineArn"]
    run = sfn.start_execution(stateMachineArn=f"{machine}#BusyThenCharged",  # the mocked test case
                              input=json.dumps({"order": 7}))["executionArn"]

    statewright_clock.advance("1d")  # approved: the charge is throttled once...
    eventually(lambda: "TaskFailed" in event_types(sfn, run), "the throttled charge")
    statewright_clock.advance("1m")  # ...and retried after its backoff
    task = sfn.get_activity_task(activityArn=activity, workerName="test")  # a real worker ships it
    assert json.loads(task["input"]) == {"order": 7, "payment": {"charged": 42}}
    sfn.send_task_success(taskToken=task["taskToken"], output=json.dumps({"tracking": "T-1"}))

    described = eventually(lambda: (d := sfn.describe_execution(executionArn=run))["status"] != "RUNNING" and d,
                           "the end of the execution")
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["shipment"] == {"tracking": "T-1"}
    assert event_types(sfn, run).count("TaskFailed") == 1
