"""A complete test of a workflow with statewright's pytest plugin (pip install statewright[testing]): an order
waits a day for approval, then a worker charges it (an activity, retried once after a decline). It runs in about
a second: the test moves the server's clock instead of waiting."""

import json
import time

WORKFLOW = {
    "StartAt": "WaitForApproval",
    "States": {
        "WaitForApproval": {"Type": "Wait", "Seconds": 86400, "Next": "Charge"},
        "Charge": {
            "Type": "Task", "Resource": "ACTIVITY_ARN", "TimeoutSeconds": 300,
            "Retry": [{"ErrorEquals": ["CardDeclined"], "IntervalSeconds": 60, "MaxAttempts": 1}],
            "End": True,
        },
    },
}


def closed(sfn, execution_arn):
    deadline = time.monotonic() + 30
    while (described := sfn.describe_execution(executionArn=execution_arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the execution did not close"
        time.sleep(0.05)
    return described


def test_an_order_is_charged_a_day_after_it_is_placed(statewright_sfn, statewright_clock):
    sfn = statewright_sfn
    activity = sfn.create_activity(name="charge")["activityArn"]
    machine = sfn.create_state_machine(
        name="orders", definition=json.dumps(WORKFLOW).replace("ACTIVITY_ARN", activity),
        roleArn="arn:aws:iam::123456789012:role/orders")["stateMachineArn"]
    run = sfn.start_execution(stateMachineArn=machine, input=json.dumps({"amount": 42}))["executionArn"]

    statewright_clock.advance("1d")  # the approval wait is over: the charge is scheduled
    task = sfn.get_activity_task(activityArn=activity, workerName="test")
    sfn.send_task_failure(taskToken=task["taskToken"], error="CardDeclined", cause="try again")
    statewright_clock.advance("1m")  # the retry's backoff
    task = sfn.get_activity_task(activityArn=activity, workerName="test")
    assert json.loads(task["input"]) == {"amount": 42}
    sfn.send_task_success(taskToken=task["taskToken"], output=json.dumps({"charged": 42}))

    described = closed(sfn, run)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"charged": 42}
    history = sfn.get_execution_history(executionArn=run)["events"]
    assert [event["type"] for event in history].count("ActivityFailed") == 1
