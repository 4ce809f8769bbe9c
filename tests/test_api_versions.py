"""State machine versions through boto3 against a real server: publishing, listing, deleting, starting on a
version, and the describe fields AWS returns today (encryption, logging, tracing, variable references)."""

import json
import uuid

import pytest
from botocore.exceptions import ClientError

from server import ROLE_ARN, wait_closed

ONE = {"Comment": "one", "StartAt": "A", "States": {"A": {"Type": "Pass", "Result": "one", "End": True}}}
TWO = {"Comment": "two", "StartAt": "A", "States": {"A": {"Type": "Pass", "Result": "two", "End": True}}}


def unique(prefix: str = "ver") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def error(excinfo: pytest.ExceptionInfo) -> tuple[str, str]:
    return excinfo.value.response["Error"]["Code"], excinfo.value.response["Error"]["Message"]


def create(sfn, definition: dict = ONE, **options) -> dict:
    return sfn.create_state_machine(name=unique(), definition=json.dumps(definition), roleArn=ROLE_ARN, **options)


def test_create_with_publish_makes_version_1_described_as_published(sfn):
    created = create(sfn, publish=True, versionDescription="first cut")
    machine = created["stateMachineArn"]
    assert created["stateMachineVersionArn"] == f"{machine}:1"
    version = sfn.describe_state_machine(stateMachineArn=f"{machine}:1")
    assert version["stateMachineArn"] == f"{machine}:1"
    assert json.loads(version["definition"]) == ONE
    assert version["description"] == "first cut"
    assert "revisionId" not in version  # the first revision has no id to show, as on AWS
    assert "description" not in sfn.describe_state_machine(stateMachineArn=machine)


def test_a_version_description_needs_publish(sfn):
    with pytest.raises(ClientError) as excinfo:
        create(sfn, versionDescription="orphan")
    assert error(excinfo) == ("ValidationException", "Version description can only be set when publish is true")


def test_publish_is_idempotent_and_an_update_with_publish_makes_the_next_version(sfn):
    machine = create(sfn)["stateMachineArn"]
    first = sfn.publish_state_machine_version(stateMachineArn=machine, description="v1")
    again = sfn.publish_state_machine_version(stateMachineArn=machine)
    assert again["stateMachineVersionArn"] == first["stateMachineVersionArn"] == f"{machine}:1"
    assert again["creationDate"] == first["creationDate"]
    updated = sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps(TWO), publish=True,
                                       versionDescription="v2")
    assert updated["stateMachineVersionArn"] == f"{machine}:2"
    described = sfn.describe_state_machine(stateMachineArn=f"{machine}:2")
    assert described["revisionId"] == updated["revisionId"]
    assert described["description"] == "v2"
    assert json.loads(sfn.describe_state_machine(stateMachineArn=f"{machine}:1")["definition"]) == ONE
    listed = sfn.list_state_machine_versions(stateMachineArn=machine)["stateMachineVersions"]
    assert [item["stateMachineVersionArn"] for item in listed] == [f"{machine}:2", f"{machine}:1"]
    page = sfn.list_state_machine_versions(stateMachineArn=machine, maxResults=1)
    rest = sfn.list_state_machine_versions(stateMachineArn=machine, maxResults=1, nextToken=page["nextToken"])
    assert [item["stateMachineVersionArn"] for item in page["stateMachineVersions"] + rest["stateMachineVersions"]
            ] == [f"{machine}:2", f"{machine}:1"]
    assert "nextToken" not in rest


def test_publish_on_a_revision_that_moved_is_a_conflict(sfn):
    machine = create(sfn)["stateMachineArn"]
    assert sfn.publish_state_machine_version(stateMachineArn=machine, revisionId="INITIAL")[
        "stateMachineVersionArn"] == f"{machine}:1"
    old = sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps(TWO))["revisionId"]
    new = sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps(ONE))["revisionId"]
    with pytest.raises(ClientError) as excinfo:
        sfn.publish_state_machine_version(stateMachineArn=machine, revisionId=old)
    assert error(excinfo) == ("ConflictException", f"Failed to publish the State Machine version for revision "
                              f"{old}. The current State Machine revision is {new}.")
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409


def test_an_update_that_changes_nothing_keeps_the_revision(sfn):
    machine = create(sfn)["stateMachineArn"]
    same = sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps(ONE), publish=True)
    assert "revisionId" not in same
    assert same["stateMachineVersionArn"] == f"{machine}:1"
    changed = sfn.update_state_machine(stateMachineArn=machine, tracingConfiguration={"enabled": True})
    assert sfn.describe_state_machine(stateMachineArn=machine)["revisionId"] == changed["revisionId"]


def test_version_numbers_are_never_reused_and_deleting_is_idempotent(sfn):
    machine = create(sfn, publish=True)["stateMachineArn"]
    sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps(TWO), publish=True)
    sfn.delete_state_machine_version(stateMachineVersionArn=f"{machine}:2")
    sfn.delete_state_machine_version(stateMachineVersionArn=f"{machine}:2")
    with pytest.raises(ClientError) as excinfo:
        sfn.describe_state_machine(stateMachineArn=f"{machine}:2")
    assert error(excinfo) == ("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{machine}:2'")
    assert sfn.publish_state_machine_version(stateMachineArn=machine)["stateMachineVersionArn"] == f"{machine}:3"


def test_deleting_a_state_machine_deletes_its_versions_and_aliases(sfn):
    machine = create(sfn, publish=True)["stateMachineArn"]
    alias = sfn.create_state_machine_alias(name="live", routingConfiguration=[
        {"stateMachineVersionArn": f"{machine}:1", "weight": 100}])["stateMachineAliasArn"]
    sfn.delete_state_machine(stateMachineArn=machine)
    assert sfn.list_state_machine_versions(stateMachineArn=machine)["stateMachineVersions"] == []
    with pytest.raises(ClientError) as excinfo:
        sfn.describe_state_machine(stateMachineArn=f"{machine}:1")
    assert error(excinfo)[0] == "StateMachineDoesNotExist"
    with pytest.raises(ClientError) as excinfo:
        sfn.describe_state_machine_alias(stateMachineAliasArn=alias)
    assert error(excinfo)[0] == "ResourceNotFound"
    with pytest.raises(ClientError) as excinfo:
        sfn.start_execution(stateMachineArn=alias)
    assert error(excinfo)[0] == "StateMachineDoesNotExist"


@pytest.mark.parametrize("suffix", [":0", ":01", ":1:2", ":bad name"])
def test_a_malformed_version_or_alias_arn_is_invalid(sfn, suffix):
    machine = create(sfn)["stateMachineArn"]
    with pytest.raises(ClientError) as excinfo:
        sfn.describe_state_machine(stateMachineArn=machine + suffix)
    assert error(excinfo)[0] == "InvalidArn"
    with pytest.raises(ClientError) as excinfo:
        sfn.start_execution(stateMachineArn=machine + suffix)
    assert error(excinfo)[0] == "InvalidArn"


def test_operations_on_a_state_machine_refuse_a_version_arn_and_version_operations_an_alias_arn(sfn):
    machine = create(sfn, publish=True)["stateMachineArn"]
    with pytest.raises(ClientError) as excinfo:
        sfn.update_state_machine(stateMachineArn=f"{machine}:1", definition=json.dumps(TWO))
    assert error(excinfo) == ("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{machine}:1'")
    with pytest.raises(ClientError) as excinfo:
        sfn.delete_state_machine(stateMachineArn=f"{machine}:1")
    assert error(excinfo)[0] == "ValidationException"
    with pytest.raises(ClientError) as excinfo:
        sfn.delete_state_machine_version(stateMachineVersionArn=f"{machine}:live")
    assert error(excinfo)[0] == "InvalidArn"
    with pytest.raises(ClientError) as excinfo:
        sfn.describe_state_machine_alias(stateMachineAliasArn=f"{machine}:1")
    assert error(excinfo)[0] == "InvalidArn"


def test_an_execution_on_a_version_reports_it_and_describes_the_versions_definition(sfn):
    machine = create(sfn, publish=True)["stateMachineArn"]
    sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps(TWO))
    on_version = sfn.start_execution(stateMachineArn=f"{machine}:1")["executionArn"]
    latest = sfn.start_execution(stateMachineArn=machine)["executionArn"]
    assert json.loads(wait_closed(sfn, on_version)["output"]) == "one"
    assert json.loads(wait_closed(sfn, latest)["output"]) == "two"
    described = sfn.describe_execution(executionArn=on_version)
    assert described["stateMachineArn"] == machine
    assert described["stateMachineVersionArn"] == f"{machine}:1"
    assert "stateMachineAliasArn" not in described
    assert "stateMachineVersionArn" not in sfn.describe_execution(executionArn=latest)
    started = sfn.get_execution_history(executionArn=on_version)["events"][0]["executionStartedEventDetails"]
    assert started["stateMachineVersionArn"] == f"{machine}:1" and "stateMachineAliasArn" not in started
    assert json.loads(sfn.describe_state_machine_for_execution(executionArn=on_version)["definition"]) == ONE
    by_version = sfn.list_executions(stateMachineArn=f"{machine}:1")["executions"]
    assert [item["executionArn"] for item in by_version] == [on_version]
    assert by_version[0]["stateMachineVersionArn"] == f"{machine}:1"
    assert {item["executionArn"] for item in sfn.list_executions(stateMachineArn=machine)["executions"]} == {
        on_version, latest}


def test_an_execution_runs_to_the_end_on_its_version_after_an_update_and_the_versions_delete(sfn, server):
    poller = server.client(read_timeout=70)
    activity = sfn.create_activity(name=unique("act"))["activityArn"]
    waits = {"StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": activity, "ResultPath": None, "Next": "Say"},
        "Say": {"Type": "Pass", "Result": "version 1", "End": True}}}
    machine = create(sfn, waits, publish=True)["stateMachineArn"]
    run = sfn.start_execution(stateMachineArn=f"{machine}:1")["executionArn"]
    task = poller.get_activity_task(activityArn=activity)  # the execution is waiting on its worker
    waits["States"]["Say"]["Result"] = "version 2"
    sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps(waits), publish=True)
    sfn.delete_state_machine_version(stateMachineVersionArn=f"{machine}:1")
    sfn.send_task_success(taskToken=task["taskToken"], output="{}")
    described = wait_closed(sfn, run)
    assert (described["status"], json.loads(described["output"])) == ("SUCCEEDED", "version 1")
    assert described["stateMachineVersionArn"] == f"{machine}:1"
    assert "version 1" in sfn.describe_state_machine_for_execution(executionArn=run)["definition"]
    sfn.delete_activity(activityArn=activity)


# -- the describe fields AWS returns today


def test_encryption_defaults_to_an_aws_owned_key_and_a_customer_key_is_kept(sfn):
    machine = create(sfn)["stateMachineArn"]
    assert sfn.describe_state_machine(stateMachineArn=machine)["encryptionConfiguration"] == {
        "type": "AWS_OWNED_KEY"}
    key = {"type": "CUSTOMER_MANAGED_KMS_KEY", "kmsKeyId": "alias/orders", "kmsDataKeyReusePeriodSeconds": 120}
    keyed = create(sfn, encryptionConfiguration=key)["stateMachineArn"]
    assert sfn.describe_state_machine(stateMachineArn=keyed)["encryptionConfiguration"] == key
    with pytest.raises(ClientError) as excinfo:
        create(sfn, encryptionConfiguration={"type": "CUSTOMER_MANAGED_KMS_KEY"})
    assert error(excinfo)[0] == "InvalidEncryptionConfiguration"
    with pytest.raises(ClientError) as excinfo:
        create(sfn, encryptionConfiguration={**key, "kmsDataKeyReusePeriodSeconds": 901})
    assert error(excinfo)[0] == "ValidationException"


def test_an_activity_shows_its_encryption_configuration(sfn):
    plain = sfn.create_activity(name=unique("act"))["activityArn"]
    key = {"type": "CUSTOMER_MANAGED_KMS_KEY", "kmsKeyId": "alias/tasks", "kmsDataKeyReusePeriodSeconds": 300}
    keyed = sfn.create_activity(name=unique("act"), encryptionConfiguration=key)["activityArn"]
    assert sfn.describe_activity(activityArn=plain)["encryptionConfiguration"] == {"type": "AWS_OWNED_KEY"}
    assert sfn.describe_activity(activityArn=keyed)["encryptionConfiguration"] == key


def test_variable_references_name_what_each_state_reads(sfn):
    definition = {"StartAt": "Set", "States": {
        "Set": {"Type": "Pass", "Assign": {"guess": 1, "answer": 1}, "Next": "Check"},
        "Check": {"Type": "Choice", "Choices": [{"Variable": "$guess", "NumericEqualsPath": "$answer",
                                                 "Next": "Done"}], "Default": "Done"},
        "Done": {"Type": "Pass", "QueryLanguage": "JSONata", "Output": "{% $answer + $count([$guess]) %}",
                 "End": True}}}
    machine = create(sfn, definition)["stateMachineArn"]
    references = {"Check": ["answer", "guess"], "Done": ["answer", "guess"]}
    assert sfn.describe_state_machine(stateMachineArn=machine)["variableReferences"] == references
    run = sfn.start_execution(stateMachineArn=machine)["executionArn"]
    assert sfn.describe_state_machine_for_execution(executionArn=run)["variableReferences"] == references
    assert "variableReferences" not in sfn.describe_state_machine(stateMachineArn=create(sfn)["stateMachineArn"])
