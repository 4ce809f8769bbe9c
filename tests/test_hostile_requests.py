"""Requests a hostile or careless client sends: each gets a 4xx in AWS's error shape (never a 500), and a refused
request writes nothing. The cases are the ones an outside fuzz run found answered 500 (issue 14, finding 4)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid

import pytest
from botocore.exceptions import ClientError

from asgi import call
from server import ROLE_ARN, raw_call
from statewright.api.app import App
from statewright.engine.engine import Engine
from statewright.node import build_node
from statewright.store.sqlite import SqliteStore

PASS = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
DEEP = "[" * 10_000 + "]" * 10_000
LONG_INTEGER = "9" * 5_000  # past Python's int digit limit (4,300)
JSONATA_ERROR = json.dumps({"Type": "Pass", "QueryLanguage": "JSONata", "Output": "{% $error('boom') %}",
                            "End": True})


def send(server, operation: str, params: dict) -> tuple[int, dict]:
    return raw_call(server, f"AWSStepFunctions.{operation}", json.dumps(params).encode())


def refused(status: int, body: dict, code: str) -> bool:
    """A 400 in AWS's shape carrying ``code``."""
    return status == 400 and body["__type"].endswith("#" + code) and bool(body["message"])


@pytest.fixture
def machine(make_machine) -> str:
    return make_machine(json.loads(PASS))


@pytest.mark.parametrize(("member", "value"), [("input", DEEP), ("input", '"\\ud800"'), ("input", "1e999"),
                                               ("input", f'{{"n": {"9" * 400}}}')])
def test_an_execution_input_the_engine_cannot_read_is_invalid_execution_input(server, machine, member, value):
    status, body = send(server, "StartExecution", {"stateMachineArn": machine, member: value})
    assert refused(status, body, "InvalidExecutionInput")
    assert body["message"].startswith("Invalid State Machine Execution Input: '")


def test_task_output_nested_too_deep_is_invalid_output(server):
    status, body = send(server, "SendTaskSuccess", {"taskToken": "not-a-token", "output": DEEP})
    assert refused(status, body, "InvalidOutput")


@pytest.mark.parametrize("member", ["input", "variables"])
def test_test_state_payload_nested_too_deep_is_invalid_execution_input(server, member):
    status, body = send(server, "TestState", {"definition": PASS, "stateName": "P", member: DEEP})
    assert refused(status, body, "InvalidExecutionInput")


def test_a_null_input_is_an_absent_input(server, sfn, machine):
    status, body = send(server, "StartExecution", {"stateMachineArn": machine, "input": None})
    assert status == 200
    assert sfn.describe_execution(executionArn=body["executionArn"])["input"] == "{}"


def test_a_null_state_machine_arn_is_a_missing_one(server):
    status, body = send(server, "ListExecutions", {"stateMachineArn": None})
    assert refused(status, body, "ValidationException")


@pytest.mark.parametrize("member", ["roleArn", "definition"])
def test_an_update_of_only_null_members_changes_nothing(server, sfn, machine, member):
    status, body = send(server, "UpdateStateMachine", {"stateMachineArn": machine, member: None})
    assert refused(status, body, "MissingRequiredParameter")
    assert sfn.describe_state_machine(stateMachineArn=machine)["definition"] == PASS


def test_a_null_required_member_is_named(server):
    status, body = send(server, "DescribeStateMachine", {"stateMachineArn": None})
    assert refused(status, body, "ValidationException")
    assert "'stateMachineArn'" in body["message"]


def test_test_state_with_a_null_input_runs_on_an_empty_object(server):
    status, body = send(server, "TestState", {"definition": PASS, "stateName": "P", "input": None})
    assert (status, body["status"], body["output"]) == (200, "SUCCEEDED", "{}")


def test_a_null_tag_in_the_list_is_refused(server, machine):
    status, body = send(server, "TagResource", {"resourceArn": machine, "tags": [None]})
    assert refused(status, body, "ValidationException")
    assert "'tags.1.member'" in body["message"]


def test_a_state_machine_with_a_keyless_tag_is_not_created(server, sfn):
    name = f"tagless-{uuid.uuid4().hex[:8]}"
    status, body = send(server, "CreateStateMachine", {"name": name, "definition": PASS, "roleArn": ROLE_ARN,
                                                        "tags": [{"key": "team", "value": "a"}, {}]})
    assert refused(status, body, "ValidationException")
    assert "'tags.2.member.key'" in body["message"]
    assert name not in [machine["name"] for machine in sfn.list_state_machines()["stateMachines"]]


def test_an_activity_with_a_keyless_tag_is_not_created(server, sfn):
    name = f"tagless-{uuid.uuid4().hex[:8]}"
    status, body = send(server, "CreateActivity", {"name": name, "tags": [{"value": "v"}]})
    assert refused(status, body, "ValidationException")
    assert name not in [activity["name"] for activity in sfn.list_activities()["activities"]]


def test_tag_resource_with_one_keyless_tag_writes_none_of_them(server, sfn, machine):
    status, body = send(server, "TagResource", {"resourceArn": machine, "tags": [{"key": "team"}, {}]})
    assert refused(status, body, "ValidationException")
    assert sfn.list_tags_for_resource(resourceArn=machine)["tags"] == []


def test_an_existing_activity_keeps_its_tags_when_created_again(sfn):
    name = f"again-{uuid.uuid4().hex[:8]}"
    arn = sfn.create_activity(name=name, tags=[{"key": "team", "value": "a"}])["activityArn"]
    assert sfn.create_activity(name=name, tags=[{"key": "team", "value": "b"}])["activityArn"] == arn
    assert sfn.list_tags_for_resource(resourceArn=arn)["tags"] == [{"key": "team", "value": "a"}]


def long_integer_machine() -> str:
    return f'{{"StartAt": "P", "States": {{"P": {{"Type": "Pass", "Result": {LONG_INTEGER}, "End": true}}}}}}'


def test_a_definition_with_an_integer_over_4300_digits_is_invalid(sfn):
    with pytest.raises(ClientError) as raised:
        sfn.create_state_machine(name=f"long-{uuid.uuid4().hex[:8]}", definition=long_integer_machine(),
                                 roleArn=ROLE_ARN)
    assert raised.value.response["Error"]["Code"] == "InvalidDefinition"
    assert "INVALID_JSON_DESCRIPTION: Number value length (5000) exceeds the maximum allowed" in str(raised.value)


def test_validating_a_definition_with_an_integer_over_4300_digits_fails_it(sfn):
    result = sfn.validate_state_machine_definition(definition=long_integer_machine())
    assert (result["result"], result["diagnostics"][0]["code"]) == ("FAIL", "INVALID_JSON_DESCRIPTION")


def test_test_state_of_a_machine_with_an_integer_over_4300_digits_is_invalid(server):
    status, body = send(server, "TestState", {"definition": long_integer_machine(), "stateName": "P"})
    assert refused(status, body, "InvalidDefinition")


def test_test_state_with_a_jsonata_error_fails_the_state(server):
    status, body = send(server, "TestState", {"definition": JSONATA_ERROR})
    assert (status, body["status"], body["error"]) == (200, "FAILED", "States.QueryEvaluationError")
    assert "boom" in body["cause"]


# -- a full disk: SQLite's own "database or disk is full", from a database capped at its current size


class FillingStore(SqliteStore):
    """The SQLite store on a disk that fills up when ``full`` is set: every connection is capped at the pages the
    database has (SQLite's max_page_count), so a write that needs one more page fails as on a full disk."""

    full = False

    def _db(self) -> sqlite3.Connection:
        db = super()._db()
        pages = db.execute("PRAGMA page_count").fetchone()[0] if self.full else 1 << 30
        db.execute(f"PRAGMA max_page_count = {pages}")
        return db


@pytest.fixture
def filling(tmp_path):
    store = FillingStore(tmp_path / "statewright.db", 2)
    app = App(build_node(store, lambda edges, histories: Engine(store, edges=edges, histories=histories)).service)
    yield app
    app.service.close()
    store.close()


def big_machine() -> dict:
    """A request whose state machine needs new pages: 200 KB of Pass states."""
    states = {f"S{i}": {"Type": "Pass", "Result": "x" * 2_000, "Next": f"S{i + 1}"} for i in range(100)}
    states["S100"] = {"Type": "Succeed"}
    return {"name": "big", "definition": json.dumps({"StartAt": "S0", "States": states}), "roleArn": ROLE_ARN,
            "tags": [{"key": "team", "value": "payments"}]}


def many_tags() -> list[dict]:
    return [{"key": f"k{i}", "value": "v" * 256} for i in range(50)]


def test_create_state_machine_on_a_full_disk_is_a_503_and_writes_nothing(filling):
    asyncio.run(create_state_machine_on_a_full_disk(filling))


async def create_state_machine_on_a_full_disk(filling: App) -> None:
    filling.service.store.full = True
    status, body = await call(filling, "CreateStateMachine", big_machine())
    assert (status, body["__type"]) == (503, "ServiceUnavailable")
    assert "full" in body["message"]
    filling.service.store.full = False
    _, listed = await call(filling, "ListStateMachines", {})
    assert listed["stateMachines"] == []
    status, created = await call(filling, "CreateStateMachine", big_machine())  # the store still writes after it
    assert status == 200
    _, tags = await call(filling, "ListTagsForResource", {"resourceArn": created["stateMachineArn"]})
    assert tags["tags"] == [{"key": "team", "value": "payments"}]


def test_tag_resource_on_a_full_disk_is_a_503_and_writes_no_tag(filling):
    asyncio.run(tag_resource_on_a_full_disk(filling))


async def tag_resource_on_a_full_disk(filling: App) -> None:
    _, created = await call(filling, "CreateStateMachine", {"name": "small", "definition": PASS, "roleArn": ROLE_ARN})
    arn = created["stateMachineArn"]
    filling.service.store.full = True
    status, body = await call(filling, "TagResource", {"resourceArn": arn, "tags": many_tags()})
    assert (status, body["__type"]) == (503, "ServiceUnavailable")
    _, tags = await call(filling, "ListTagsForResource", {"resourceArn": arn})
    assert tags["tags"] == []


def test_create_activity_on_a_full_disk_is_a_503_and_writes_nothing(filling):
    asyncio.run(create_activity_on_a_full_disk(filling))


async def create_activity_on_a_full_disk(filling: App) -> None:
    filling.service.store.full = True
    status, _ = await call(filling, "CreateActivity", {"name": "work", "tags": many_tags()})
    assert status == 503
    _, listed = await call(filling, "ListActivities", {})
    assert listed["activities"] == []
