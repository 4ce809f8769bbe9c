"""The AWS JSON 1.0 protocol edges: bad bodies, unknown operations, wrong types, oversized payloads."""

import json

import pytest
from botocore.exceptions import ParamValidationError

from server import raw_call
from statewright.api.app import HANDLERS
from statewright.api.model import operation_names


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
    status, body = raw_call(server, None, None, method="GET", path="/no-such-page")
    assert 400 <= status < 500 and body["__type"].endswith("UnknownOperationException")


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


def test_every_operation_of_the_service_model_is_implemented():
    """A botocore that models a newer operation gets UnknownOperationException saying statewright does not
    implement it yet; the one this build pins has none left."""
    assert sorted(operation_names()) == sorted(HANDLERS)


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


_ENUM = "[RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED, PENDING_REDRIVE]"
_ALIAS_NAME = r"^(?=.*[a-zA-Z_\-\.])[a-zA-Z0-9_\-\.]+$"


@pytest.mark.parametrize(("operation", "params", "message"), [
    ("ListExecutions", {"statusFilter": "DONE", "maxResults": 1001, "nextToken": "t" * 3097},
     "3 validation errors detected: "
     f"Value 'DONE' at 'statusFilter' failed to satisfy constraint: Member must satisfy enum value set: {_ENUM}; "
     "Value '1001' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 1000; "
     f"Value '{'t' * 3097}' at 'nextToken' failed to satisfy constraint: Member must have length less than or "
     "equal to 3096"),
    ("StartExecution", {"stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:m", "traceHeader": "é"},
     "1 validation error detected: Value 'é' at 'traceHeader' failed to satisfy constraint: Member must satisfy "
     r"regular expression pattern: \p{ASCII}*"),
    ("CreateStateMachineAlias", {"name": ""},
     "3 validation errors detected: "
     "Value '' at 'name' failed to satisfy constraint: Member must have length greater than or equal to 1; "
     f"Value '' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: {_ALIAS_NAME}; "
     "Value null at 'routingConfiguration' failed to satisfy constraint: Member must not be null"),
    ("TagResource", {"resourceArn": "arn", "tags": [{"key": "k" * 129}, None]},
     "2 validation errors detected: "
     f"Value '{'k' * 129}' at 'tags.1.member.key' failed to satisfy constraint: Member must have length less than "
     "or equal to 128; Value null at 'tags.2.member' failed to satisfy constraint: Member must not be null"),
])
def test_every_broken_constraint_is_listed_in_aws_words(server, operation, params, message):
    # AWS's front end checks every member against the model and lists what each breaks, in the model's order.
    status, body = raw_call(server, f"AWSStepFunctions.{operation}", json.dumps(params).encode())
    assert (status, body["__type"].rsplit("#", 1)[-1]) == (400, "ValidationException")
    assert body["message"] == message
