"""Activities across nodes: a worker polling only node A gets the tasks of executions whose shards node B serves,
each attempt once; and what one node changes (activities, state machine records) every node sees at once. Two
in-process nodes on one SQLite file (other nodes' tasks found by the pollers' periodic look) and on one PostgreSQL
schema (found at once through LISTEN/NOTIFY)."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from nodes import SHARDS, Node, name_on
from server import ROLE_ARN, history, wait_closed
from statewright.api import service as service_module

pytestmark = pytest.mark.slow  # nodes on PostgreSQL: not in the fast tier

A_SHARDS = {0, 1}
B_SHARDS = set(range(SHARDS)) - A_SHARDS
TASKS = 6


@pytest.fixture(params=["sqlite", "postgresql"])
def nodes(request, tmp_path, monkeypatch):
    if request.param == "postgresql":
        # Only a NOTIFY can wake a waiting poll within the test: the periodic look comes after the poll ends.
        monkeypatch.setattr(service_module, "LOOK_AGAIN_S", 600.0)
        db = request.getfixturevalue("postgres_schema")
    else:
        db = tmp_path / "shared.db"
    a, b = Node(db, "a").start(), Node(db, "b").start()
    a.take(A_SHARDS)
    b.take(B_SHARDS)
    for node in (a, b):
        node.directory.refresh()
    yield a, b
    a.close()
    b.close()


def machine(sfn, definition: dict) -> str:
    return sfn.create_state_machine(name=f"sm-{uuid.uuid4().hex[:12]}", definition=json.dumps(definition),
                                    roleArn=ROLE_ARN)["stateMachineArn"]


def task_machine(sfn, activity: str) -> str:
    return machine(sfn, {"StartAt": "Work", "States": {"Work": {
        "Type": "Task", "Resource": activity, "HeartbeatSeconds": 600, "End": True}}})


def code(excinfo: pytest.ExceptionInfo) -> str:
    return excinfo.value.response["Error"]["Code"]


def test_a_worker_polling_only_a_completes_the_tasks_of_executions_on_b_once_each(nodes):
    a, b = nodes
    worker = a.client(read_timeout=70)
    activity = b.client().create_activity(name=f"act-{uuid.uuid4().hex[:12]}")["activityArn"]
    arn = task_machine(b.client(), activity)
    with ThreadPoolExecutor(TASKS) as pool:  # polls waiting when the tasks commit, on B
        polls = [pool.submit(worker.get_activity_task, activityArn=activity, workerName=f"w{n}")
                 for n in range(TASKS)]
        runs = [b.client().start_execution(stateMachineArn=arn, name=name_on(arn, B_SHARDS, f"t{n}-{uuid.uuid4().hex}"),
                                           input=json.dumps({"n": n}))["executionArn"] for n in range(TASKS)]
        tasks = [poll.result(timeout=60) for poll in polls]
    assert sorted(json.loads(task["input"])["n"] for task in tasks) == list(range(TASKS))
    for task in tasks:
        worker.send_task_success(taskToken=task["taskToken"], output=task["input"])
    for run in runs:
        assert wait_closed(worker, run)["status"] == "SUCCEEDED"
        assert [event["type"] for event in history(worker, run)].count("ActivityStarted") == 1
    b.wait_until(lambda: b.service.matcher.backlog_size() == 0)  # B let go of its copies of the started tasks
    # Tasks committed before anyone polled wait in B's outbox: a poll at A claims them too.
    late = b.client().start_execution(stateMachineArn=arn, name=name_on(arn, B_SHARDS, uuid.uuid4().hex))
    task = worker.get_activity_task(activityArn=activity)
    assert task["taskToken"]
    worker.send_task_success(taskToken=task["taskToken"], output="{}")
    assert wait_closed(worker, late["executionArn"])["status"] == "SUCCEEDED"


def test_an_activity_created_or_deleted_through_a_is_known_to_b_at_once(nodes):
    a, b = nodes
    activity = a.client().create_activity(name=f"act-{uuid.uuid4().hex[:12]}")["activityArn"]
    assert activity in b.engine.activities  # B's decider schedules Task states on it from now on
    arn = task_machine(a.client(), activity)
    run = a.client().start_execution(stateMachineArn=arn, name=name_on(arn, B_SHARDS, uuid.uuid4().hex))
    task = b.client(read_timeout=70).get_activity_task(activityArn=activity)
    b.client().send_task_success(taskToken=task["taskToken"], output="{}")
    assert wait_closed(a.client(), run["executionArn"])["status"] == "SUCCEEDED"
    a.client().delete_activity(activityArn=activity)
    assert activity not in b.engine.activities
    with pytest.raises(ClientError) as refused:
        b.client().get_activity_task(activityArn=activity)
    assert code(refused) == "ActivityDoesNotExist"


def test_a_poll_for_an_activity_its_node_missed_reads_the_store_before_refusing(nodes):
    a, b = nodes
    activity = a.client().create_activity(name=f"act-{uuid.uuid4().hex[:12]}")["activityArn"]
    b.engine.note_activity(activity, exists=False)  # as if the word from A had been lost
    arn = task_machine(a.client(), activity)
    run = a.client().start_execution(stateMachineArn=arn, name=name_on(arn, A_SHARDS, uuid.uuid4().hex))
    task = b.client(read_timeout=70).get_activity_task(activityArn=activity)
    assert activity in b.engine.activities
    b.client().send_task_success(taskToken=task["taskToken"], output="{}")
    assert wait_closed(a.client(), run["executionArn"])["status"] == "SUCCEEDED"


def test_a_state_machine_updated_or_deleted_through_a_is_seen_by_b_at_once(nodes):
    a, b = nodes
    first = {"StartAt": "One", "States": {"One": {"Type": "Pass", "Result": 1, "End": True}}}
    second = {"StartAt": "Two", "States": {"Two": {"Type": "Pass", "Result": 2, "End": True}}}
    name = f"sm-{uuid.uuid4().hex[:12]}"
    arn = a.client().create_state_machine(name=name, definition=json.dumps(first), roleArn=ROLE_ARN)[
        "stateMachineArn"]
    before = b.client().start_execution(stateMachineArn=arn)  # B caches the record
    assert wait_closed(b.client(), before["executionArn"])["output"] == "1"
    a.client().update_state_machine(stateMachineArn=arn, definition=json.dumps(second))
    after = b.client().start_execution(stateMachineArn=arn)
    assert wait_closed(b.client(), after["executionArn"])["output"] == "2"
    a.client().delete_state_machine(stateMachineArn=arn)
    with pytest.raises(ClientError) as refused:
        b.client().start_execution(stateMachineArn=arn)
    assert code(refused) == "StateMachineDoesNotExist"
    # B now caches "no such machine": creating it again through A must reach B too.
    a.client().create_state_machine(name=name, definition=json.dumps(first), roleArn=ROLE_ARN)
    again = b.client().start_execution(stateMachineArn=arn)
    assert wait_closed(b.client(), again["executionArn"])["output"] == "1"
