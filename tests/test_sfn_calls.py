"""A workflow's Step Functions calls (aws-sdk:sfn:*) reach the statewright that runs it, even when
AWS_ENDPOINT_URL points every other service at moto (issue 32, deliverable 2)."""

import json
import time

from server import ROLE_ARN, wait_closed


def test_aws_sdk_sfn_calls_reach_this_server_not_the_other_services_endpoint(aws_server):
    sfn = aws_server.client()  # a server whose AWS_ENDPOINT_URL is moto's, which has none of these machines
    name = f"answerer-{time.monotonic_ns()}"
    answerer = sfn.create_state_machine(name=name, roleArn=ROLE_ARN, definition=json.dumps(
        {"StartAt": "Look", "States": {
            "Look": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:sfn:describeStateMachine",
                     "Parameters": {"StateMachineArn.$": "$$.StateMachine.Id"},
                     "ResultSelector": {"name.$": "$.Name"}, "ResultPath": "$.described", "Next": "Answer"},
            "Answer": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:sfn:sendTaskSuccess",
                       "Parameters": {"TaskToken.$": "$.token", "Output.$": "States.JsonToString($.described)"},
                       "End": True}}}))["stateMachineArn"]
    asker = sfn.create_state_machine(name=f"asker-{time.monotonic_ns()}", roleArn=ROLE_ARN, definition=json.dumps(
        {"StartAt": "Ask", "States": {"Ask": {
            "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.waitForTaskToken",
            "Parameters": {"StateMachineArn": answerer, "Input": {"token.$": "$$.Task.Token"}},
            "End": True}}}))["stateMachineArn"]
    arn = sfn.start_execution(stateMachineArn=asker, input="{}")["executionArn"]
    closed = wait_closed(sfn, arn, 30)
    assert closed["status"] == "SUCCEEDED", closed
    assert json.loads(closed["output"]) == {"name": name}  # described here, and answered here
