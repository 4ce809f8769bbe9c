"""RedriveExecution of an execution whose history was compacted, end to end: real server processes on the virtual
clock, boto3. A failed or aborted execution is compacted two days after it closed like any other; a redrive
reopens it from the compacted object exactly as from the table (the Wait it was stopped in entered again on the
input its Entered event holds), its new events continue the ids, GetExecutionHistory serves old and new events
every way it pages, and the next compaction puts them all in one object. Redrives answered before a SIGKILL are
kept, and a compaction of redriven histories killed mid-way loses and duplicates nothing."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from server import ROLE_ARN, ServerProcess, history, redrive_through_a_kill, wait_closed
from statewright.sim.checkers import history_problems
from test_retention import eventually, hot_history_rows, objects, readings

pytestmark = pytest.mark.slow  # real server processes: not in the fast tier

# Stopped while it waits, an execution is redriven into the Wait again, whose raw input only its Entered event holds
# (InputPath keeps a part of it): the redrive reads that event from the compacted object.
WAITS = {"StartAt": "A", "States": {
    "A": {"Type": "Pass", "Result": {"step": "a"}, "ResultPath": "$.a", "Next": "W"},
    "W": {"Type": "Wait", "Seconds": 3600, "InputPath": "$.a", "Next": "B"},
    "B": {"Type": "Pass", "Parameters": {"after.$": "$.step"}, "End": True}}}
EXECUTIONS = 120  # more than one compaction batch (100), so a kill can land between two


@pytest.fixture
def server(tmp_path):
    server = ServerProcess(tmp_path / "data", shards=4, extra_args=("--clock", "virtual")).start()
    yield server
    server.stop()


def aborted_in_wait(sfn, machine: str, name: str) -> str:
    arn = sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps({"name": name}))["executionArn"]
    assert eventually(lambda: "WaitStateEntered" in [event["type"] for event in history(sfn, arn)])
    sfn.stop_execution(executionArn=arn, error="Operator", cause="stopped while it waited")
    assert wait_closed(sfn, arn)["status"] == "ABORTED"
    return arn


def _machine(sfn) -> str:
    return sfn.create_state_machine(name=f"w-{uuid.uuid4().hex[:10]}", definition=json.dumps(WAITS),
                                    roleArn=ROLE_ARN)["stateMachineArn"]


def _consistent(readings: dict) -> bool:
    """The history reads the same whichever way it is paged."""
    forward = readings["forward"]
    return (readings["reverse"] == forward[::-1] and readings["pages"] == forward
            and readings["reverse_pages"] == readings["reverse"]
            and [event["id"] for event in readings["no_data"]] == [event["id"] for event in forward])


def test_a_compacted_execution_is_redriven_from_its_object_and_compacted_again_whole(server):
    sfn = server.client()
    arn = aborted_in_wait(sfn, _machine(sfn), "order-1")
    before = readings(sfn, arn)
    server.advance("2d")
    assert eventually(lambda: hot_history_rows(server.data_dir, arn) == 0)
    assert len(objects(server.data_dir)) == 1
    compacted = readings(sfn, arn)
    assert compacted == before
    assert sfn.describe_execution(executionArn=arn)["redriveStatus"] == "REDRIVABLE"

    sfn.redrive_execution(executionArn=arn)
    reopened = history(sfn, arn)
    old = before["forward"]
    assert reopened[:len(old)] == old
    redriven, entered = reopened[len(old):len(old) + 2]
    assert (redriven["id"], redriven["type"], redriven["executionRedrivenEventDetails"]) == (
        len(old) + 1, "ExecutionRedriven", {"redriveCount": 1})
    first_entered = next(event for event in old if event["type"] == "WaitStateEntered")
    assert entered["type"] == "WaitStateEntered"
    assert entered["stateEnteredEventDetails"] == first_entered["stateEnteredEventDetails"]  # from the object
    assert hot_history_rows(server.data_dir, arn) > 0 and len(objects(server.data_dir)) == 1

    server.advance("1h")
    described = wait_closed(sfn, arn)
    assert described["status"] == "SUCCEEDED" and json.loads(described["output"]) == {"after": "a"}
    after = readings(sfn, arn)
    assert after["forward"][:len(old)] == old and _consistent(after)
    assert history_problems(arn, after["forward"], closed=True) == []
    assert [event["id"] for event in history(sfn, arn, reverseOrder=True, maxResults=4)] == list(
        range(len(after["forward"]), 0, -1))

    server.advance("2d")
    assert eventually(lambda: hot_history_rows(server.data_dir, arn) == 0)
    assert eventually(lambda: len(objects(server.data_dir)) == 1)  # the first object went with the second
    assert readings(sfn, arn) == after


def test_redrives_of_compacted_executions_answered_before_a_sigkill_are_kept(server, crash_seed):
    sfn = server.client()
    machine = _machine(sfn)
    executions = [aborted_in_wait(sfn, machine, f"k-{n}") for n in range(EXECUTIONS)]
    before = {arn: history(sfn, arn) for arn in executions}
    server.advance("2d")
    assert eventually(lambda: all(hot_history_rows(server.data_dir, arn) == 0 for arn in executions), 60)

    # the kill's moment from the seed (a failure prints it, and how to run the test again on it: conftest.py)
    answered, tokens = redrive_through_a_kill(server, executions, random.Random(crash_seed).uniform(0.05, 0.3))
    sfn = server.client()
    for arn in executions:
        events = history(sfn, arn)
        assert events[:len(before[arn])] == before[arn], f"{arn}: the compacted history changed"
        if arn in answered:  # durable once answered
            assert sfn.describe_execution(executionArn=arn)["redriveCount"] == 1, f"{arn}: an answered redrive lost"
        again = sfn.redrive_execution(executionArn=arn, clientToken=tokens[arn])["redriveDate"]
        if arn in answered:
            assert again == answered[arn], f"{arn}: an answered redrive was repeated"
    server.advance("1h")
    finished = {}
    for arn in executions:
        assert wait_closed(sfn, arn)["status"] == "SUCCEEDED"
        finished[arn] = history(sfn, arn)
        assert history_problems(arn, finished[arn], closed=True) == []
        assert [event["type"] for event in finished[arn]].count("ExecutionRedriven") == 1

    server.advance("2d")  # compacted again, and killed while the sweep writes the new objects
    assert eventually(lambda: any(hot_history_rows(server.data_dir, arn) == 0 for arn in executions), 60)
    server.kill()
    server.start()
    sfn = server.client()
    assert eventually(lambda: all(hot_history_rows(server.data_dir, arn) == 0 for arn in executions), 60)
    assert {arn: history(sfn, arn) for arn in executions} == finished
