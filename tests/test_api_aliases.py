"""State machine aliases through boto3 against a real server, and the alias's choice of version (a property of
``aliases.route``, checked directly: deterministic, so its split over many starts cannot flake)."""

import json
import uuid

import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from server import ROLE_ARN, wait_closed
from statewright.engine.routing import route

CI = settings(derandomize=True, deadline=None, max_examples=50)


def unique(prefix: str = "alias") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def error(excinfo: pytest.ExceptionInfo) -> tuple[str, str]:
    return excinfo.value.response["Error"]["Code"], excinfo.value.response["Error"]["Message"]


def says(word: str) -> str:
    return json.dumps({"StartAt": "A", "States": {"A": {"Type": "Pass", "Result": word, "End": True}}})


@pytest.fixture
def machine(sfn) -> str:
    """A state machine with versions 1 ("one") and 2 ("two")."""
    arn = sfn.create_state_machine(name=unique("sm"), definition=says("one"), roleArn=ROLE_ARN, publish=True)[
        "stateMachineArn"]
    sfn.update_state_machine(stateMachineArn=arn, definition=says("two"), publish=True)
    return arn


def routes(machine: str, *weights: tuple[int, int]) -> list[dict]:
    return [{"stateMachineVersionArn": f"{machine}:{number}", "weight": weight} for number, weight in weights]


def test_an_alias_is_created_described_updated_listed_and_deleted(sfn, machine):
    created = sfn.create_state_machine_alias(name="live", description="prod", routingConfiguration=routes(
        machine, (1, 100)))
    alias = created["stateMachineAliasArn"]
    assert alias == f"{machine}:live"
    again = sfn.create_state_machine_alias(name="live", description="prod", routingConfiguration=routes(
        machine, (1, 100)))
    assert again == {**created, "ResponseMetadata": again["ResponseMetadata"]}  # idempotent
    described = sfn.describe_state_machine_alias(stateMachineAliasArn=alias)
    assert (described["name"], described["description"], described["routingConfiguration"]) == (
        "live", "prod", routes(machine, (1, 100)))
    sfn.update_state_machine_alias(stateMachineAliasArn=alias, routingConfiguration=routes(machine, (1, 90), (2, 10)))
    sfn.update_state_machine_alias(stateMachineAliasArn=alias, description="canary")
    described = sfn.describe_state_machine_alias(stateMachineAliasArn=alias)
    assert (described["description"], described["routingConfiguration"]) == (
        "canary", routes(machine, (1, 90), (2, 10)))
    assert described["updateDate"] >= described["creationDate"]
    sfn.create_state_machine_alias(name="beta", routingConfiguration=routes(machine, (2, 100)))
    listed = sfn.list_state_machine_aliases(stateMachineArn=machine)["stateMachineAliases"]
    assert [item["stateMachineAliasArn"] for item in listed] == [f"{machine}:beta", alias]
    page = sfn.list_state_machine_aliases(stateMachineArn=machine, maxResults=1)
    assert sfn.list_state_machine_aliases(stateMachineArn=machine, nextToken=page["nextToken"])[
        "stateMachineAliases"][0]["stateMachineAliasArn"] == alias
    sfn.delete_state_machine_alias(stateMachineAliasArn=alias)
    sfn.delete_state_machine_alias(stateMachineAliasArn=alias)  # idempotent, as on AWS
    with pytest.raises(ClientError) as excinfo:
        sfn.describe_state_machine_alias(stateMachineAliasArn=alias)
    assert error(excinfo) == ("ResourceNotFound", "Request references a resource that does not exist.")


def test_creating_an_alias_again_with_another_routing_is_a_conflict(sfn, machine):
    sfn.create_state_machine_alias(name="live", routingConfiguration=routes(machine, (1, 100)))
    with pytest.raises(ClientError) as excinfo:
        sfn.create_state_machine_alias(name="live", routingConfiguration=routes(machine, (2, 100)))
    assert error(excinfo) == ("ConflictException", "Failed to create alias because an alias with the same name and "
                              "a different routing configuration already exists.")


def test_routing_configurations_are_checked_with_awss_messages(sfn, machine):
    cases = [
        ([{"stateMachineVersionArn": machine, "weight": 100}],
         f"Routing configuration must contain state machine version ARNs. Received: [{machine}]"),
        (routes(machine, (1, 50), (1, 50)), f"Routing configuration must contain distinct state machine version "
                                            f"ARNs. Received: [{machine}:1, {machine}:1]"),
        (routes(machine, (1, 70), (2, 29)), "Sum of routing configuration weights must equal 100. Received: [70, 29]"),
        (routes(machine, (1, 50)) + routes(machine + "-other", (1, 50)), None),
    ]
    for routing, message in cases:
        with pytest.raises(ClientError) as excinfo:
            sfn.create_state_machine_alias(name="bad", routingConfiguration=routing)
        code, text = error(excinfo)
        assert code == "ValidationException"
        assert excinfo.value.response["reason"] == "INVALID_ROUTING_CONFIGURATION"
        assert message is None or text == message
    with pytest.raises(ClientError) as excinfo:
        sfn.create_state_machine_alias(name="live", routingConfiguration=routes(machine, (7, 100)))
    assert error(excinfo)[0] == "ResourceNotFound"
    with pytest.raises(ClientError) as excinfo:
        sfn.create_state_machine_alias(name="123", routingConfiguration=routes(machine, (1, 100)))
    assert error(excinfo) == ("ValidationException", "1 validation error detected: Value '123' at 'name' failed to "
                              "satisfy constraint: Member must satisfy regular expression pattern: "
                              "^(?=.*[a-zA-Z_\\-\\.])[a-zA-Z0-9_\\-\\.]+$")


def test_updating_an_alias_that_does_not_exist_is_not_found(sfn, machine):
    with pytest.raises(ClientError) as excinfo:
        sfn.update_state_machine_alias(stateMachineAliasArn=f"{machine}:nobody", description="x")
    assert error(excinfo) == ("ResourceNotFound", "Request references a resource that does not exist.")


def test_a_version_an_alias_routes_to_cannot_be_deleted(sfn, machine):
    sfn.create_state_machine_alias(name="live", routingConfiguration=routes(machine, (1, 50), (2, 50)))
    with pytest.raises(ClientError) as excinfo:
        sfn.delete_state_machine_version(stateMachineVersionArn=f"{machine}:1")
    assert error(excinfo) == ("ConflictException", "Version to be deleted must not be referenced by an alias. "
                              "Current list of aliases referencing this version: [live]")
    sfn.update_state_machine_alias(stateMachineAliasArn=f"{machine}:live", routingConfiguration=routes(
        machine, (2, 100)))
    sfn.delete_state_machine_version(stateMachineVersionArn=f"{machine}:1")


def test_creating_aliases_stops_at_100(sfn, machine):
    for n in range(100):
        sfn.create_state_machine_alias(name=f"a{n}", routingConfiguration=routes(machine, (1, 100)))
    with pytest.raises(ClientError) as excinfo:
        sfn.create_state_machine_alias(name="one-too-many", routingConfiguration=routes(machine, (1, 100)))
    assert error(excinfo)[0] == "ServiceQuotaExceededException"
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 402


def test_starts_through_an_alias_run_the_version_its_weights_draw_for_each_execution(sfn, machine):
    alias = sfn.create_state_machine_alias(name="split", routingConfiguration=routes(machine, (1, 50), (2, 50)))[
        "stateMachineAliasArn"]
    runs = [sfn.start_execution(stateMachineArn=alias, name=f"run-{n}")["executionArn"] for n in range(12)]
    ran = set()
    for run in runs:
        number = route(((1, 50), (2, 50)), run)
        described = wait_closed(sfn, run)
        assert json.loads(described["output"]) == ("one" if number == 1 else "two")
        assert described["stateMachineVersionArn"] == f"{machine}:{number}"
        assert described["stateMachineAliasArn"] == alias
        ran.add(number)
    assert ran == {1, 2}  # twelve fixed names: both versions are drawn
    on_version_1 = sfn.start_execution(stateMachineArn=f"{machine}:1")["executionArn"]
    by_alias = {item["executionArn"] for item in sfn.list_executions(stateMachineArn=alias)["executions"]}
    assert by_alias == set(runs)
    by_version = sfn.list_executions(stateMachineArn=f"{machine}:1")["executions"]
    assert {item["executionArn"] for item in by_version} == {
        run for run in runs if route(((1, 50), (2, 50)), run) == 1} | {on_version_1}
    assert all(item.get("stateMachineAliasArn") in (alias, None) for item in by_version)
    with pytest.raises(ClientError) as excinfo:
        sfn.list_executions(stateMachineArn=f"{machine}:nobody")
    assert error(excinfo)[0] == "ResourceNotFound"


def test_starting_through_a_deleted_alias_fails(sfn, machine):
    alias = sfn.create_state_machine_alias(name="gone", routingConfiguration=routes(machine, (1, 100)))[
        "stateMachineAliasArn"]
    sfn.delete_state_machine_alias(stateMachineAliasArn=alias)
    with pytest.raises(ClientError) as excinfo:
        sfn.start_execution(stateMachineArn=alias)
    assert error(excinfo) == ("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{alias}'")


# -- the choice itself

ARNS = [f"arn:aws:states:us-east-1:123456789012:execution:orders:run-{n}" for n in range(10_000)]


@CI
@given(st.integers(min_value=0, max_value=100), st.text(alphabet="abcdefghij-", max_size=8))
def test_over_many_starts_each_version_gets_its_weights_share(weight, prefix):
    routing = ((1, weight), (2, 100 - weight))
    chosen = [route(routing, arn.replace("run-", f"run-{prefix}")) for arn in ARNS]
    share = 100 * chosen.count(1) / len(chosen)
    assert abs(share - weight) <= 3  # 10,000 draws: a 3-point miss is about six standard deviations out
    if weight in (0, 100):
        assert share == weight  # a version of weight 0 is never drawn


@CI
@given(st.sampled_from(ARNS), st.integers(min_value=1, max_value=99))
def test_the_same_execution_always_draws_the_same_version(arn, weight):
    routing = ((3, weight), (5, 100 - weight))
    assert route(routing, arn) == route(routing, arn) in (3, 5)
