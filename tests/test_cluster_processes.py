"""Three real ``statewright serve`` nodes on loopback sharing the test PostgreSQL (issue 9, deliverable 7).

Each test starts three subprocesses on one fresh schema with short leases and 8 shards, runs a mixed workload
through boto3 (chains of Pass, Waits, an activity worker, a ``.waitForTaskToken`` callback, Parallel and Map, a
nested ``startExecution.sync:2``), hurts the cluster (SIGKILL, SIGSTOP/SIGCONT; a rolling restart is
test_rolling_upgrade.py's), and checks that every acknowledged execution completes exactly once with its expected
output and that the shards end up where the membership's assignment puts them. Every wait is bounded; nothing
asserts a duration.

The node ids are their addresses (``http://127.0.0.1:PORT``); the assignment gives each of three nodes two or three of
the eight shards, so killing or pausing any node always moves shards.
"""

from __future__ import annotations

import itertools
import json
import signal
import time
import uuid
from collections.abc import Iterator

import pytest

from cluster_harness import FINISH_S, LEASE_MS, SHARDS, Cluster, Workload, busiest, metrics
from server import ROLE_ARN, wait_closed
from statewright.cluster.membership import assignment
from statewright.engine.shards import shard_for

pytestmark = pytest.mark.slow  # three real nodes on PostgreSQL: not in the fast tier


@pytest.fixture
def cluster(tmp_path, postgres_schema) -> Iterator[Cluster]:
    nodes = Cluster(tmp_path, postgres_schema).start()
    yield nodes
    nodes.close()


@pytest.fixture
def workload(cluster) -> Iterator[Workload]:
    load = Workload(cluster)
    yield load
    load.close()


# -- the tests


def test_sigkill_one_node_under_a_mixed_workload_loses_nothing(cluster, workload):
    run = workload.trickle(120)
    workload.wait_started(40)
    victim = busiest(cluster)
    cluster.up.discard(victim)
    cluster.nodes[victim].kill()
    owned = cluster.wait_for_assignment()  # the killed node's shards are served by the other two
    assert sum(owned.values()) == SHARDS
    run.join(FINISH_S)
    workload.check()
    assert len(workload.acknowledged) == 120
    assert workload.tasks_done >= sum(1 for kind, _ in workload.acknowledged.values() if kind == "activity")


def test_sigstop_past_the_lease_then_sigcont_corrupts_nothing(cluster, workload):
    run = workload.trickle(120)
    workload.wait_started(40)
    paused = busiest(cluster)
    cluster.up.discard(paused)
    cluster.nodes[paused].process.send_signal(signal.SIGSTOP)  # mid-workload: it may hold work in flight
    try:
        time.sleep(LEASE_MS / 1000 + 1)  # past its lease: the others take its shards
        cluster.wait_for_assignment()
    finally:
        cluster.nodes[paused].process.send_signal(signal.SIGCONT)
    cluster.up.add(paused)
    cluster.wait_for_assignment()  # it renews its node record and gets its shards back, at new range ids
    run.join(FINISH_S)
    workload.check()
    woken = metrics(cluster.nodes[paused].endpoint)
    fenced = woken.get("statewright_fenced_writes_total", 0)
    lost = woken.get('statewright_lease_renewals_total{outcome="lost"}', 0)
    # Whether the paused node had a commit under way when it stopped is up to the scheduler: print, not assert.
    print(f"paused node: fenced writes {fenced:g}, leases found lost on waking {lost:g}")
    assert sum(cluster.owned(index) for index in cluster.up) == SHARDS


def test_a_worker_polling_only_node_a_completes_tasks_of_executions_owned_by_b_and_c(cluster):
    load = Workload(cluster, poll_nodes={0})
    try:
        owners = assignment(SHARDS, [node.endpoint for node in cluster.nodes])
        machine = load.machines["activity"]
        prefix = machine.replace(":stateMachine:", ":execution:")
        for index in (1, 2):
            names = (f"on-{index}-{i}-{load.prefix}" for i in itertools.count())
            picked = [name for name in itertools.islice(
                (name for name in names if owners[shard_for(f"{prefix}:{name}", SHARDS)]
                 == cluster.nodes[index].endpoint), 3)]
            for name in picked:
                load.start_one("activity", name)
        load.check(finish_s=12)  # far more than a local task takes: it never arrives if A cannot match it
        assert load.tasks_done == 6
    finally:
        load.close()


def test_an_activity_created_at_one_node_is_known_to_the_others(cluster):
    name = f"made-at-a-{uuid.uuid4().hex[:8]}"
    arn = cluster.client(0).create_activity(name=name)["activityArn"]
    assert cluster.client(1).describe_activity(activityArn=arn)["name"] == name  # a read from the store: fine
    machine = cluster.client(0).create_state_machine(
        name=f"uses-{name}", roleArn=ROLE_ARN, definition=json.dumps({"StartAt": "T", "States": {"T": {
            "Type": "Task", "Resource": arn, "TimeoutSeconds": 30, "End": True}}}))["stateMachineArn"]
    owners = assignment(SHARDS, [node.endpoint for node in cluster.nodes])
    prefix = machine.replace(":stateMachine:", ":execution:")
    run = next(f"run-{i}" for i in itertools.count()
               if owners[shard_for(f"{prefix}:run-{i}", SHARDS)] == cluster.nodes[1].endpoint)
    execution = cluster.client(0).start_execution(stateMachineArn=machine, name=run)["executionArn"]
    sfn = cluster.client(1)
    deadline = time.monotonic() + 10
    while True:  # bounded: the task is scheduled by B, which owns the execution
        types = [event["type"] for event in sfn.get_execution_history(executionArn=execution)["events"]]
        if "ActivityScheduled" in types or sfn.describe_execution(executionArn=execution)["status"] != "RUNNING":
            break
        assert time.monotonic() < deadline, types
        time.sleep(0.05)
    assert sfn.describe_execution(executionArn=execution)["status"] == "RUNNING", types
    task = sfn.get_activity_task(activityArn=arn, workerName="b")  # B owns it: same-node matching
    sfn.send_task_success(taskToken=task["taskToken"], output="{}")


def test_a_redrive_through_any_node_reaches_the_owner_and_a_refusal_keeps_its_reason(cluster):
    sfn = cluster.client(0)  # not the owner: every command goes to node 1
    owners = assignment(SHARDS, [node.endpoint for node in cluster.nodes])

    def on_node_1(definition: dict) -> str:
        machine = sfn.create_state_machine(name=f"redrive-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN,
                                           definition=json.dumps(definition))["stateMachineArn"]
        prefix = machine.replace(":stateMachine:", ":execution:")
        run = next(f"run-{i}" for i in itertools.count()
                   if owners[shard_for(f"{prefix}:run-{i}", SHARDS)] == cluster.nodes[1].endpoint)
        execution = sfn.start_execution(stateMachineArn=machine, name=run)["executionArn"]
        wait_closed(sfn, execution)
        return execution

    failing = on_node_1({"StartAt": "Broke", "States": {"Broke": {"Type": "Fail", "Error": "Always"}}})
    first = sfn.redrive_execution(executionArn=failing, clientToken="once")["redriveDate"]
    assert sfn.redrive_execution(executionArn=failing, clientToken="once")["redriveDate"] == first
    described = wait_closed(sfn, failing)
    assert (described["status"], described["redriveCount"], described["redriveDate"]) == ("FAILED", 1, first)
    passing = on_node_1({"StartAt": "Fine", "States": {"Fine": {"Type": "Succeed"}}})
    with pytest.raises(sfn.exceptions.ExecutionNotRedrivable, match="Execution is SUCCEEDED and cannot be redriven"):
        sfn.redrive_execution(executionArn=passing)
