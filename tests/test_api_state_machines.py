"""State machine operations through boto3 against a real server."""

import json
import uuid

import pytest

from server import ROLE_ARN, wait_closed

SIMPLE = {"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}}

def unique(prefix: str = "sm") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"

def test_create_then_describe_returns_the_definition_as_sent(sfn):
    text = '{"StartAt": "A",\n "States": {"A": {"Type": "Pass", "End": true}}}'
    name = unique()
    created = sfn.create_state_machine(name=name, definition=text, roleArn=ROLE_ARN)
    described = sfn.describe_state_machine(stateMachineArn=created["stateMachineArn"])
    assert described["definition"] == text
    assert described["name"] == name
    assert described["status"] == "ACTIVE"
    assert described["type"] == "STANDARD"
    assert described["roleArn"] == ROLE_ARN
    assert described["loggingConfiguration"] == {"level": "OFF", "includeExecutionData": False}
    assert described["tracingConfiguration"] == {"enabled": False}
    assert "revisionId" not in described
    assert described["creationDate"] == created["creationDate"]

def test_create_with_same_name_and_definition_is_idempotent(sfn):
    name = unique()
    first = sfn.create_state_machine(name=name, definition=json.dumps(SIMPLE), roleArn=ROLE_ARN)
    again = sfn.create_state_machine(name=name, definition=json.dumps(SIMPLE), roleArn=ROLE_ARN)
    assert again["stateMachineArn"] == first["stateMachineArn"]
    assert again["creationDate"] == first["creationDate"]

def test_create_with_same_name_and_other_definition_fails(sfn):
    name = unique()
    arn = sfn.create_state_machine(name=name, definition=json.dumps(SIMPLE), roleArn=ROLE_ARN)["stateMachineArn"]
    other = {"StartAt": "B", "States": {"B": {"Type": "Succeed"}}}
    with pytest.raises(sfn.exceptions.StateMachineAlreadyExists) as raised:
        sfn.create_state_machine(name=name, definition=json.dumps(other), roleArn=ROLE_ARN)
    assert raised.value.response["Error"]["Message"] == f"State Machine Already Exists: '{arn}'"

def test_invalid_definition_is_rejected_with_aws_diagnostics(sfn):
    definition = {"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "Missing"}}}
    with pytest.raises(sfn.exceptions.InvalidDefinition) as raised:
        sfn.create_state_machine(name=unique(), definition=json.dumps(definition), roleArn=ROLE_ARN)
    assert raised.value.response["Error"]["Message"] == (
        "Invalid State Machine Definition: 'MISSING_TRANSITION_TARGET: Missing 'Next' target: Missing "
        "at /States/A/Next'")

def test_definition_that_is_not_json_is_invalid(sfn):
    with pytest.raises(sfn.exceptions.InvalidDefinition):
        sfn.create_state_machine(name=unique(), definition="not json", roleArn=ROLE_ARN)

def test_bad_name_is_invalid_name(sfn):
    with pytest.raises(sfn.exceptions.InvalidName) as raised:
        sfn.create_state_machine(name="a b", definition=json.dumps(SIMPLE), roleArn=ROLE_ARN)
    assert raised.value.response["Error"]["Message"] == "Invalid Name: 'a b'"

def test_name_longer_than_80_is_a_validation_exception(sfn):
    with pytest.raises(sfn.exceptions.ValidationException):
        sfn.create_state_machine(name="n" * 81, definition=json.dumps(SIMPLE), roleArn=ROLE_ARN)

def test_describe_missing_state_machine(sfn):
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:nothing-here"
    with pytest.raises(sfn.exceptions.StateMachineDoesNotExist) as raised:
        sfn.describe_state_machine(stateMachineArn=arn)
    assert raised.value.response["Error"]["Message"] == f"State Machine Does Not Exist: '{arn}'"

def test_describe_with_malformed_arn_is_invalid_arn(sfn):
    with pytest.raises(sfn.exceptions.InvalidArn) as raised:
        sfn.describe_state_machine(stateMachineArn="not-an-arn")
    assert raised.value.response["Error"]["Message"] == "Invalid Arn: 'Invalid ARN prefix: not-an-arn'"

def test_execution_arn_where_a_state_machine_is_expected_is_invalid_arn(sfn):
    with pytest.raises(sfn.exceptions.InvalidArn) as raised:
        sfn.describe_state_machine(stateMachineArn="arn:aws:states:us-east-1:123456789012:execution:a:b")
    assert "Resource type not valid in this context: execution" in raised.value.response["Error"]["Message"]

def test_update_creates_a_revision_and_running_executions_keep_theirs(sfn):
    waiting = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 1, "Next": "Old"},
                                          "Old": {"Type": "Pass", "Result": "old", "End": True}}}
    arn = sfn.create_state_machine(name=unique(), definition=json.dumps(waiting), roleArn=ROLE_ARN)[
        "stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    newer = {"StartAt": "New", "States": {"New": {"Type": "Pass", "Result": "new", "End": True}}}
    update = sfn.update_state_machine(stateMachineArn=arn, definition=json.dumps(newer))
    assert sfn.describe_state_machine(stateMachineArn=arn)["revisionId"] == update["revisionId"]
    pinned = sfn.describe_state_machine_for_execution(executionArn=execution)
    assert json.loads(pinned["definition"]) == waiting

    assert wait_closed(sfn, execution)["output"] == '"old"'
    fresh = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    assert wait_closed(sfn, fresh)["output"] == '"new"'

def test_update_without_changes_is_rejected(sfn, make_machine):
    arn = make_machine(SIMPLE)
    with pytest.raises(sfn.exceptions.MissingRequiredParameter):
        sfn.update_state_machine(stateMachineArn=arn)

def test_update_with_invalid_definition_is_rejected(sfn, make_machine):
    arn = make_machine(SIMPLE)
    with pytest.raises(sfn.exceptions.InvalidDefinition):
        sfn.update_state_machine(stateMachineArn=arn, definition="{}")

def test_delete_then_describe_fails_and_delete_again_succeeds(sfn, make_machine):
    arn = make_machine(SIMPLE)
    sfn.delete_state_machine(stateMachineArn=arn)
    with pytest.raises(sfn.exceptions.StateMachineDoesNotExist):
        sfn.describe_state_machine(stateMachineArn=arn)
    sfn.delete_state_machine(stateMachineArn=arn)

def test_list_state_machines_pages_in_name_order(server):
    client = server.client(region="sa-east-1")  # its own region, so other tests' machines do not interleave
    names = [f"list-{i:02d}" for i in range(5)]
    for name in reversed(names):
        client.create_state_machine(name=name, definition=json.dumps(SIMPLE), roleArn=ROLE_ARN)
    seen, token = [], None
    while True:
        page = client.list_state_machines(maxResults=2, **({"nextToken": token} if token else {}))
        seen += [m["name"] for m in page["stateMachines"]]
        token = page.get("nextToken")
        if not token:
            break
    listed = [name for name in seen if name.startswith("list-")]
    assert listed == names

def test_bad_next_token_is_invalid_token(sfn):
    with pytest.raises(sfn.exceptions.InvalidToken):
        sfn.list_state_machines(nextToken="%%%")

def test_validate_definition_reports_ok_and_fail(sfn):
    assert sfn.validate_state_machine_definition(definition=json.dumps(SIMPLE))["result"] == "OK"
    result = sfn.validate_state_machine_definition(definition=json.dumps({"States": {}}))
    assert result["result"] == "FAIL"
    assert result["diagnostics"][0] == {"severity": "ERROR", "code": "SCHEMA_VALIDATION_FAILED",
                                        "message": "These fields are required: [StartAt]", "location": "/"}

def test_tags_round_trip(sfn, make_machine):
    arn = make_machine(SIMPLE)
    sfn.tag_resource(resourceArn=arn, tags=[{"key": "team", "value": "core"}, {"key": "env", "value": "dev"}])
    sfn.untag_resource(resourceArn=arn, tagKeys=["env"])
    assert sfn.list_tags_for_resource(resourceArn=arn)["tags"] == [{"key": "team", "value": "core"}]

def test_tags_given_at_creation_are_listed(sfn):
    arn = sfn.create_state_machine(name=unique(), definition=json.dumps(SIMPLE), roleArn=ROLE_ARN,
                                   tags=[{"key": "k", "value": "v"}])["stateMachineArn"]
    assert sfn.list_tags_for_resource(resourceArn=arn)["tags"] == [{"key": "k", "value": "v"}]

def test_tagging_a_missing_resource_is_resource_not_found(sfn):
    with pytest.raises(sfn.exceptions.ResourceNotFound):
        sfn.tag_resource(resourceArn="arn:aws:states:us-east-1:123456789012:stateMachine:none",
                         tags=[{"key": "a", "value": "b"}])

def test_list_state_machines_shows_only_the_callers_region(server):
    client = server.client(region="me-south-1")
    client.create_state_machine(name="only-here", definition=json.dumps(SIMPLE), roleArn=ROLE_ARN)
    listed = client.list_state_machines()["stateMachines"]
    assert [m["name"] for m in listed] == ["only-here"]


@pytest.mark.parametrize("role", ["notarole", "arn:aws:s3:::bucket"])
def test_a_role_that_is_not_an_iam_role_arn_is_invalid_arn(sfn, role):
    with pytest.raises(sfn.exceptions.InvalidArn):
        sfn.create_state_machine(name=unique(), definition=json.dumps(SIMPLE), roleArn=role)


@pytest.mark.parametrize("arn", ["arn:aws:states:nowhere:123456789012:stateMachine:typo",
                                 "arn:aws:states:US-EAST-1:123456789012:stateMachine:typo",
                                 "arn:aws:states:us-east-1:1234:stateMachine:typo",
                                 "arn:aws:states::123456789012:stateMachine:typo"])
def test_an_arn_whose_region_or_account_is_mistyped_is_invalid_arn_even_to_a_deletion(sfn, arn):
    for call in (lambda: sfn.describe_state_machine(stateMachineArn=arn),
                 lambda: sfn.delete_state_machine(stateMachineArn=arn),  # not a quiet deletion of nothing
                 lambda: sfn.start_execution(stateMachineArn=arn)):
        with pytest.raises(sfn.exceptions.InvalidArn):
            call()
