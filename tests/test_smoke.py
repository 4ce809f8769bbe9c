import json


def test_pass_chain_runs_to_success_through_boto3(sfn, make_machine):
    arn = make_machine({"StartAt": "A", "States": {"A": {"Type": "Pass", "Result": 1, "End": True}}})
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps({}))
    described = sfn.describe_execution(executionArn=execution["executionArn"])
    assert described["status"] == "SUCCEEDED"
    assert described["output"] == "1"
