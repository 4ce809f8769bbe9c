"""The AWS JSON 1.0 protocol edges: bad bodies, unknown operations, wrong types, oversized payloads."""

import json

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from server import raw_call


def test_malformed_json_is_a_serialization_error(server):
    status, body = raw_call(server, "AWSStepFunctions.ListStateMachines", b"{not json")
    assert status == 400
    assert body["__type"].endswith("#SerializationException")


def test_unknown_operation_is_rejected_by_name(server):
    status, body = raw_call(server, "AWSStepFunctions.MakeCoffee", b"{}")
    assert status == 400
    assert body["__type"].endswith("UnknownOperationException")
    assert "MakeCoffee" in body["message"]


def test_missing_target_header_is_a_client_error(server):
    status, body = raw_call(server, None, b"{}")
    assert status == 400
    assert "X-Amz-Target" in body["message"]


def test_get_is_not_an_operation(server):
    status, _ = raw_call(server, None, None, method="GET")
    assert 400 <= status < 500


def test_wrong_member_type_is_a_client_error_not_500(server):
    status, body = raw_call(server, "AWSStepFunctions.ListExecutions",
                            json.dumps({"stateMachineArn": 5}).encode())
    assert status == 400
    assert body["__type"].endswith("#SerializationException")


def test_body_that_is_not_an_object_is_rejected(server):
    status, _ = raw_call(server, "AWSStepFunctions.ListStateMachines", b"[1, 2]")
    assert status == 400


def test_oversized_body_is_rejected_with_4xx(server):
    status, _ = raw_call(server, "AWSStepFunctions.StartExecution", b"{" + b" " * (3 * 1024 * 1024) + b"}")
    assert 400 <= status < 500


def test_missing_required_member_is_a_validation_exception(server):
    status, body = raw_call(server, "AWSStepFunctions.DescribeExecution", b"{}")
    assert status == 400
    assert body["__type"].endswith("#ValidationException")
    assert body["message"] == ("1 validation error detected: Value null at 'executionArn' failed to satisfy "
                               "constraint: Member must not be null")


def test_boto3_validates_before_sending(sfn):
    with pytest.raises(ParamValidationError):
        sfn.describe_execution()


def test_max_results_above_limit_is_a_validation_exception(server):
    status, body = raw_call(server, "AWSStepFunctions.ListStateMachines", b'{"maxResults": 1001}')
    assert status == 400
    assert "less than or equal to 1000" in body["message"]


def test_region_of_the_signature_goes_into_arns(server, make_machine):
    client = server.client(region="ap-southeast-2")
    arn = client.create_state_machine(
        name="regional", roleArn="arn:aws:iam::123456789012:role/r",
        definition=json.dumps({"StartAt": "A", "States": {"A": {"Type": "Succeed"}}}))["stateMachineArn"]
    assert arn == "arn:aws:states:ap-southeast-2:123456789012:stateMachine:regional"


def test_not_yet_implemented_operation_says_so(sfn):
    with pytest.raises(ClientError) as raised:
        sfn.list_map_runs(executionArn="arn:aws:states:us-east-1:123456789012:execution:a:b")
    assert "does not implement ListMapRuns" in str(raised.value)


def test_a_much_larger_body_still_gets_a_readable_413(server):
    status, body = raw_call(server, "AWSStepFunctions.StartExecution", b"{" + b" " * (12 * 1024 * 1024) + b"}")
    assert status == 413
    assert body["__type"].endswith("#ValidationException")
