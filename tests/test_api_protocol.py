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


def signed_for(region: str) -> dict[str, str]:
    return {"Authorization": f"AWS4-HMAC-SHA256 Credential=AKID/20250101/{region}/states/aws4_request, "
                             "SignedHeaders=host;x-amz-date, Signature=0"}


@pytest.mark.parametrize("region", ["x:activity:y", "a" * 3000, "", "US-EAST-1", "us-east", "us_east_1", "local"])
def test_a_signature_scoped_to_no_valid_region_is_refused(server, region):
    status, body = raw_call(server, "AWSStepFunctions.CreateActivity", b'{"name": "victim"}',
                            headers=signed_for(region))
    assert status == 400
    assert body["__type"].endswith("#InvalidSignatureException")
    assert body["message"] == f"Credential should be scoped to a valid region, not '{region[:64]}'."


@pytest.mark.parametrize("region", ["us-gov-west-1", "ap-southeast-5", "cn-north-1", "il-central-1"])
def test_a_signature_scoped_to_a_region_name_is_served_there(server, region):
    status, body = raw_call(server, "AWSStepFunctions.ListActivities", b"{}", headers=signed_for(region))
    assert (status, body) == (200, {"activities": []})
