"""Fencing on real processes (issue 33, deliverable 3): two ``statewright serve`` nodes on one PostgreSQL schema,
node A reaching the database through a link the test holds and cuts (tests/link.py), node B directly.

- A's commit is held in the link until its lease ran out and B took every shard; released, it reaches the database
  after the shard moved: the store refuses it by range id, A counts it in ``statewright_fenced_writes_total`` and
  stops serving the shard, and the execution exists at most once.
- The link is cut while A's commit waits in it (it never reached the database), or after it reached the database
  with its answer held (it landed, A never heard): either way nothing is applied twice and the execution, started
  again by its client with the same name and input, runs once to its end.

Every wait is bounded; nothing asserts a duration.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

from cluster_harness import LEASE_MS, RENEW_MS, SECRET, SETTLE_S, SHARDS, client, metrics
from link import Link, through
from server import ROLE_ARN, ServerProcess, wait_closed
from statewright.cluster.membership import assignment
from statewright.engine.shards import shard_for

pytestmark = pytest.mark.slow  # two real nodes on PostgreSQL: not in the fast tier

NAP = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}
IN_LINK_S = 0.5  # time for A's commit to follow its first bytes into the held link


class Pair:
    """Node A (through ``link``) and node B (direct), 8 shards between them."""

    def __init__(self, tmp_path, store: str) -> None:
        self.link = Link(urlsplit(store).port or 5432)
        args = ("--cluster-secret", SECRET, "--lease-ms", str(LEASE_MS), "--lease-renew-ms", str(RENEW_MS))
        self.a = ServerProcess(tmp_path / "a", shards=SHARDS, extra_args=(
            "--store", through(store, self.link.port), *args))
        self.b = ServerProcess(tmp_path / "b", shards=SHARDS, extra_args=("--store", store, *args))
        self.sfn_a, self.sfn_b = None, None

    def start(self) -> Pair:
        self.a.start()
        self.b.start()
        self.sfn_a, self.sfn_b = client(self.a.endpoint), client(self.b.endpoint)
        self.wait_owned({self.a: 4, self.b: 4})
        return self

    def wait_owned(self, expected: dict[ServerProcess, int]) -> None:
        deadline = time.monotonic() + SETTLE_S
        while True:
            owned = {node: int(metrics(node.endpoint)["statewright_shards_owned"]) for node in expected}
            if owned == expected:
                return
            assert time.monotonic() < deadline, f"shards owned {owned}; logs: {self.a.log_path}, {self.b.log_path}"
            time.sleep(0.1)

    def a_shards(self) -> set[int]:
        owners = assignment(SHARDS, [self.a.endpoint, self.b.endpoint])
        return {shard for shard, owner in enumerate(owners) if owner == self.a.endpoint}

    def name_on_a(self, machine_arn: str) -> str:
        """A fresh execution name whose ARN hashes to a shard A serves."""
        mine = self.a_shards()
        prefix = machine_arn.replace(":stateMachine:", ":execution:", 1)
        while True:
            name = uuid.uuid4().hex
            if shard_for(f"{prefix}:{name}", SHARDS) in mine:
                return name

    def fenced(self) -> float:
        return metrics(self.a.endpoint).get("statewright_fenced_writes_total", 0)

    def close(self) -> None:
        self.link.heal()
        for node in (self.a, self.b):
            node.stop()
        self.link.close()


@pytest.fixture
def pair(tmp_path, postgres_schema) -> Iterator[Pair]:
    nodes = Pair(tmp_path, postgres_schema).start()
    yield nodes
    nodes.close()


def stop_in_background(sfn, arn: str) -> dict:
    """StopExecution on a thread; the dict gets its answer ("stopped") or its error ("error") when it comes."""
    outcome: dict = {}

    def call() -> None:
        try:
            outcome["stopped"] = sfn.stop_execution(executionArn=arn, error="Enough", cause="the test")["stopDate"]
        except (ClientError, ConnectionClosedError, ReadTimeoutError) as exc:
            outcome["error"] = exc
        finally:
            outcome["done"] = True

    outcome["thread"] = threading.Thread(target=call, daemon=True)
    outcome["thread"].start()
    return outcome


def stop_again(sfn, arn: str, deadline_s: float = 60) -> None:
    """The client's retry of the stop (a stopped execution answers with its stop date), until a node answers."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            sfn.stop_execution(executionArn=arn, error="Enough", cause="the test")
            return
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in {"ServiceUnavailable", "ThrottlingException"}:
                raise
        except (ConnectionClosedError, ReadTimeoutError):
            pass
        assert time.monotonic() < deadline, "no node accepted the stop again"
        time.sleep(0.2)


def stopped_once(sfn, arn: str) -> None:
    """The execution was stopped once: aborted, with one ExecutionAborted after its one start."""
    described = wait_closed(sfn, arn, 60)
    assert (described["status"], described.get("error")) == ("ABORTED", "Enough"), described
    types = [event["type"] for event in sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]]
    assert types.count("ExecutionStarted") == 1 and types.count("ExecutionAborted") == 1, types


def waiting_on_a(pair: Pair) -> str:
    """An execution on one of A's shards, started through A (so A has it in memory: a stop needs no read), waiting;
    its ARN."""
    machine = pair.sfn_b.create_state_machine(name=f"fence-{uuid.uuid4().hex[:8]}", definition=json.dumps(NAP),
                                             roleArn=ROLE_ARN)["stateMachineArn"]
    name = pair.name_on_a(machine)
    arn = pair.sfn_a.start_execution(stateMachineArn=machine, name=name, input="{}")["executionArn"]
    deadline = time.monotonic() + 10
    while "WaitStateEntered" not in [event["type"] for event in pair.sfn_a.get_execution_history(
            executionArn=arn)["events"]]:
        assert time.monotonic() < deadline, "the execution never reached its Wait"
        time.sleep(0.05)
    return arn


def held_in_link(pair: Pair, arn: str) -> dict:
    """Hold A's link, then stop ``arn`` through A: A decides the stop and sends its commit into the held link."""
    pair.link.hold()
    call = stop_in_background(pair.sfn_a, arn)
    deadline = time.monotonic() + 10
    while pair.link.held_bytes() == 0:
        assert time.monotonic() < deadline, "A sent nothing into the link"
        time.sleep(0.02)
    time.sleep(IN_LINK_S)
    return call


def test_a_commit_that_reaches_the_database_after_its_shard_moved_is_refused_by_the_range_id(pair):
    arn = waiting_on_a(pair)
    assert pair.fenced() == 0
    call = held_in_link(pair, arn)
    pair.wait_owned({pair.b: SHARDS})  # A's lease ran out while its commit waited: B took every shard
    pair.link.release()  # the commit reaches the database now, at A's old range ids
    deadline = time.monotonic() + SETTLE_S
    while pair.fenced() == 0:
        assert time.monotonic() < deadline, f"no fenced write counted; log: {pair.a.log_path}"
        time.sleep(0.1)
    call["thread"].join(30)
    assert call.get("done"), "A never answered the stop"
    assert b"writes refused by the range id" in pair.a.log_path.read_bytes()  # said in A's log
    # The refused write changed nothing: the execution still waits until the client's retry stops it, once.
    assert pair.sfn_b.describe_execution(executionArn=arn)["status"] in ("RUNNING", "ABORTED")
    stop_again(pair.sfn_b, arn)
    stopped_once(pair.sfn_b, arn)
    pair.wait_owned({pair.a: 4, pair.b: 4})  # A rejoins at new range ids


@pytest.mark.parametrize("reached", [False, True], ids=["before-the-database", "after-the-database"])
def test_a_node_cut_off_mid_commit_applies_nothing_twice(pair, reached):
    arn = waiting_on_a(pair)
    call = held_in_link(pair, arn)
    if reached:  # the commit lands; its answer never reaches A
        pair.link.release_requests()
        deadline = time.monotonic() + 10
        while pair.link.held_bytes() > 0:
            assert time.monotonic() < deadline, "the held requests never left the link"
            time.sleep(0.05)
        time.sleep(IN_LINK_S)  # the database answers into the held link
    pair.link.cut()
    call["thread"].join(30)
    assert call.get("done"), "A never answered the stop"
    pair.link.heal()
    if reached:
        assert pair.sfn_b.describe_execution(executionArn=arn)["status"] == "ABORTED"
    stop_again(pair.sfn_a, arn)
    stopped_once(pair.sfn_b, arn)
    pair.wait_owned({pair.a: 4, pair.b: 4})
