"""Any node serves any call: two nodes on one SQLite file, shards split between them, boto3 talking to node A about
executions whose shard node B serves. Commands travel over the nodes' authenticated channel; reads stay local."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
import uuid

import pytest
import websockets
from botocore.exceptions import ClientError
from websockets.asyncio.client import connect

from nodes import SECRET, SHARDS, Node, name_on
from server import ROLE_ARN, history, wait_closed
from statewright.cluster import channel, peers
from statewright.engine import commands
from statewright.engine.limits import Limits
from statewright.engine.shards import shard_for
from statewright.engine.tokens import TaskTokens

A_SHARDS = {0, 1}
B_SHARDS = set(range(SHARDS)) - A_SHARDS
ANSWERED = 'statewright_forwarded_calls_total{outcome="answered"}'
WAIT = {"StartAt": "Sleep", "States": {"Sleep": {"Type": "Wait", "Seconds": 3600, "End": True}}}
PASS = {"StartAt": "Hello", "States": {"Hello": {"Type": "Pass", "Parameters": {"hello.$": "$.who"}, "End": True}}}


@pytest.fixture
def nodes(tmp_path):
    a, b = Node(tmp_path / "shared.db", "a").start(), Node(tmp_path / "shared.db", "b").start()
    a.take(A_SHARDS)
    b.take(B_SHARDS)
    for node in (a, b):
        node.directory.refresh()
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def sfn(nodes):
    return nodes[0].client()


def machine(sfn, definition: dict) -> str:
    return sfn.create_state_machine(name=f"sm-{uuid.uuid4().hex[:12]}", definition=json.dumps(definition),
                                    roleArn=ROLE_ARN)["stateMachineArn"]


def code(excinfo: pytest.ExceptionInfo) -> str:
    return excinfo.value.response["Error"]["Code"]


def test_start_at_a_runs_on_b_and_reads_stay_local(nodes, sfn):
    a, b = nodes
    arn = machine(sfn, PASS)
    name = name_on(arn, B_SHARDS, uuid.uuid4().hex)
    started = sfn.start_execution(stateMachineArn=arn, name=name, input='{"who": "b"}')
    assert a.metric(ANSWERED) == 1
    described = wait_closed(sfn, started["executionArn"])  # served by A from the store
    assert (described["status"], json.loads(described["output"])) == ("SUCCEEDED", {"hello": "b"})
    assert [e["type"] for e in history(sfn, started["executionArn"])][-1] == "ExecutionSucceeded"
    # idempotent by name and input while it runs; another input is refused with the modelled error
    waiting = machine(sfn, WAIT)
    name = name_on(waiting, B_SHARDS, uuid.uuid4().hex)
    first = sfn.start_execution(stateMachineArn=waiting, name=name, input='{"n": 1}')
    again = sfn.start_execution(stateMachineArn=waiting, name=name, input='{"n": 1}')
    assert (again["executionArn"], again["startDate"]) == (first["executionArn"], first["startDate"])
    with pytest.raises(ClientError) as refused:
        sfn.start_execution(stateMachineArn=waiting, name=name, input='{"n": 2}')
    assert code(refused) == "ExecutionAlreadyExists"
    assert a.metric(ANSWERED) == 4
    assert b.metric(ANSWERED) == 0  # B served every command itself


def test_a_start_on_a_own_shard_is_not_forwarded(nodes, sfn):
    a, _ = nodes
    arn = machine(sfn, PASS)
    run = sfn.start_execution(stateMachineArn=arn, name=name_on(arn, A_SHARDS, uuid.uuid4().hex), input='{"who": 1}')
    assert wait_closed(sfn, run["executionArn"])["status"] == "SUCCEEDED"
    assert a.metric(ANSWERED) == 0


def test_an_unnamed_start_is_placed_on_a_shard_of_the_node_it_reached(nodes, sfn):
    a, _ = nodes
    arn = machine(sfn, PASS)
    runs = [sfn.start_execution(stateMachineArn=arn, input='{"who": 1}')["executionArn"] for _ in range(20)]
    assert {a.engine.owns(shard_for(run, SHARDS)) for run in runs} == {True}
    assert a.metric(ANSWERED) == 0
    assert {wait_closed(sfn, run)["status"] for run in runs} == {"SUCCEEDED"}
    assert all(uuid.UUID(run.rsplit(":", 1)[1]) for run in runs)  # named as AWS names them: a UUID


def test_stop_at_a_stops_an_execution_on_b(nodes, sfn):
    arn = machine(sfn, WAIT)
    run = sfn.start_execution(stateMachineArn=arn, name=name_on(arn, B_SHARDS, uuid.uuid4().hex))
    stopped = sfn.stop_execution(executionArn=run["executionArn"], error="Enough", cause="said so")
    described = sfn.describe_execution(executionArn=run["executionArn"])
    assert (described["status"], described["error"]) == ("ABORTED", "Enough")
    assert described["stopDate"] == stopped["stopDate"]
    missing = run["executionArn"].rpartition(":")[0] + ":" + name_on(arn, B_SHARDS, "never-started")
    with pytest.raises(ClientError) as refused:
        sfn.stop_execution(executionArn=missing)
    assert code(refused) == "ExecutionDoesNotExist"


def test_task_replies_at_a_reach_an_attempt_on_b(nodes, sfn):
    a, b = nodes
    worker = b.client(read_timeout=70)  # matching across nodes is not this test's business: poll the owner
    activity = worker.create_activity(name=f"act-{uuid.uuid4().hex[:12]}")["activityArn"]
    arn = machine(sfn, {"StartAt": "Work", "States": {"Work": {
        "Type": "Task", "Resource": activity, "HeartbeatSeconds": 600, "End": True}}})
    succeeding = sfn.start_execution(stateMachineArn=arn, name=name_on(arn, B_SHARDS, "ok-" + uuid.uuid4().hex))
    failing = sfn.start_execution(stateMachineArn=arn, name=name_on(arn, B_SHARDS, "no-" + uuid.uuid4().hex))
    first, second = (worker.get_activity_task(activityArn=activity)["taskToken"] for _ in range(2))
    sfn.send_task_heartbeat(taskToken=first)
    sfn.send_task_success(taskToken=first, output='{"done": true}')
    sfn.send_task_failure(taskToken=second, error="Broke", cause="on purpose")
    with pytest.raises(ClientError) as late:
        sfn.send_task_success(taskToken=first, output="{}")
    assert code(late) == "TaskTimedOut"
    outcomes = {wait_closed(sfn, run["executionArn"])["status"] for run in (succeeding, failing)}
    assert outcomes == {"SUCCEEDED", "FAILED"}
    assert a.metric(ANSWERED) == 6  # 2 starts, heartbeat, success, failure, the late success


def test_a_token_signed_after_a_key_rotation_is_taken_by_a_node_that_has_not_read_it_yet(nodes, sfn):
    a, b = nodes
    activity = b.client().create_activity(name=f"act-{uuid.uuid4().hex[:12]}")["activityArn"]
    arn = machine(sfn, {"StartAt": "Work", "States": {"Work": {"Type": "Task", "Resource": activity, "End": True}}})
    run = sfn.start_execution(stateMachineArn=arn, name=name_on(arn, A_SHARDS, uuid.uuid4().hex))
    TaskTokens.rotate(a.store)
    b.engine.tokens.refresh()  # B has read the new key set (its membership step came first); A has not
    token = b.client().get_activity_task(activityArn=activity)["taskToken"]
    assert b.engine.tokens.current != a.engine.tokens.current
    sfn.send_task_success(taskToken=token, output='{"rotated": true}')  # at A, which reads the key set again
    assert wait_closed(sfn, run["executionArn"])["status"] == "SUCCEEDED"
    assert a.engine.tokens.current == b.engine.tokens.current


def test_a_sync_child_on_b_reports_to_its_parent_on_a(nodes, sfn):
    a, b = nodes
    child = machine(sfn, PASS)
    child_name = name_on(child, B_SHARDS, uuid.uuid4().hex)
    parent = machine(sfn, {"StartAt": "Call", "States": {"Call": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2", "End": True,
        "Parameters": {"StateMachineArn": child, "Name": child_name, "Input": {"who": "child"}}}}})
    run = sfn.start_execution(stateMachineArn=parent, name=name_on(parent, A_SHARDS, uuid.uuid4().hex))
    described = wait_closed(sfn, run["executionArn"])
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["Output"] == {"hello": "child"}
    assert a.metric(ANSWERED) >= 1 and b.metric(ANSWERED) >= 1  # the start went to B, the result came back to A


def test_stopping_a_parent_on_a_stops_its_child_on_b(nodes, sfn):
    child = machine(sfn, WAIT)
    child_name = name_on(child, B_SHARDS, uuid.uuid4().hex)
    child_arn = child.replace(":stateMachine:", ":execution:") + ":" + child_name
    parent = machine(sfn, {"StartAt": "Call", "States": {"Call": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync", "End": True,
        "Parameters": {"StateMachineArn": child, "Name": child_name}}}})
    run = sfn.start_execution(stateMachineArn=parent, name=name_on(parent, A_SHARDS, uuid.uuid4().hex))
    Node.wait_until(lambda: "TaskSubmitted" in [e["type"] for e in history(sfn, run["executionArn"])])
    sfn.stop_execution(executionArn=run["executionArn"])
    Node.wait_until(lambda: sfn.describe_execution(executionArn=child_arn)["status"] != "RUNNING")
    assert sfn.describe_execution(executionArn=child_arn)["status"] == "ABORTED"


def over_channel(node: Node, secret: bytes, body: bytes, kind: bytes = channel.COMMANDS) -> tuple[bytes, bytes]:
    async def request() -> tuple[bytes, bytes]:
        link = channel.Channel(node.endpoint, secret)
        try:
            return await link.request(kind, body, 5.0)
        finally:
            await link.close()

    return asyncio.run(request())


def test_the_channel_refuses_a_bad_secret_and_applies_nothing(nodes, sfn):
    _, b = nodes
    arn = machine(sfn, WAIT)
    name = name_on(arn, B_SHARDS, uuid.uuid4().hex)
    execution_arn = arn.replace(":stateMachine:", ":execution:") + ":" + name
    revision = b.store.get_state_machine(arn).revision_id
    body = commands.encode_commands([commands.StartExecution(execution_arn, arn, name, revision, ROLE_ARN, "{}")])
    for secret in (b"another secret", b"", SECRET.encode() + b" "):
        with pytest.raises(channel.Refused):
            over_channel(b, secret, body)
    with pytest.raises(ClientError) as missing:
        sfn.describe_execution(executionArn=execution_arn)
    assert code(missing) == "ExecutionDoesNotExist"
    status, answer = over_channel(b, SECRET.encode(), body)
    assert status == channel.OK
    (start_ms,) = commands.decode_replies(answer)
    assert sfn.describe_execution(executionArn=execution_arn)["status"] == "RUNNING"
    assert isinstance(start_ms, int)


def test_a_caller_that_skips_the_challenge_is_closed_before_anything_applies(nodes, sfn):
    _, b = nodes
    arn = machine(sfn, WAIT)
    name = name_on(arn, B_SHARDS, uuid.uuid4().hex)
    execution_arn = arn.replace(":stateMachine:", ":execution:") + ":" + name
    revision = b.store.get_state_machine(arn).revision_id
    body = commands.encode_commands([commands.StartExecution(execution_arn, arn, name, revision, ROLE_ARN, "{}")])

    async def send_commands_at_once() -> int:
        async with connect(channel.websocket_url(b.endpoint), proxy=None) as raw:
            await raw.recv()  # the challenge, not answered
            await raw.send(bytes(8) + channel.COMMANDS + body)
            with pytest.raises(websockets.ConnectionClosed):
                await raw.recv()
            return raw.close_code

    assert asyncio.run(send_commands_at_once()) == channel.POLICY_VIOLATION
    with pytest.raises(ClientError) as missing:
        sfn.describe_execution(executionArn=execution_arn)
    assert code(missing) == "ExecutionDoesNotExist"


def test_a_caller_that_never_answers_the_challenge_is_closed(nodes):
    _, b = nodes

    async def stay_silent() -> int:
        async with connect(channel.websocket_url(b.endpoint), proxy=None) as raw:
            await raw.recv()  # the challenge, never answered
            with pytest.raises(websockets.ConnectionClosed):
                await raw.recv()  # the node closes the connection after CONNECT_TIMEOUT_S
            return raw.close_code

    assert asyncio.run(stay_silent()) == channel.POLICY_VIOLATION


def test_the_channel_refuses_bad_bodies_and_is_absent_without_a_secret(nodes, tmp_path):
    _, b = nodes
    garbled = b'{"v": 1, "throttle": true, "commands": [{"type": "Nope"}]}'
    status, answer = over_channel(b, SECRET.encode(), garbled)
    assert status == channel.REFUSED and b"Nope" in answer
    status, _ = over_channel(b, SECRET.encode(), b'{"kind": "nothing", "arn": "x"}', channel.CHANGED)
    assert status == channel.REFUSED
    single = Node(tmp_path / "alone.db", "alone", secret=None).start()
    try:
        with pytest.raises(channel.Refused, match="403"):
            over_channel(single, SECRET.encode(), garbled)
    finally:
        single.close()


def poke(node: Node, signature: str | None) -> int:
    headers = {} if signature is None else {peers.SIGNATURE_HEADER: signature}
    request = urllib.request.Request(node.endpoint + peers.MEMBERSHIP_PATH, data=b"", headers=headers,
                                     method="POST")
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


def test_the_membership_poke_needs_a_fresh_signature_with_the_secret(nodes):
    _, b = nodes
    stale_ms = 1_000_000  # 1970: signed with the right secret, long ago
    for signature in (None, "", "garbage", peers.sign(b"another secret", b""), peers.sign(SECRET.encode(), b" "),
                      peers.sign(SECRET.encode(), b"", stale_ms)):
        assert poke(b, signature) == 403
    assert poke(b, peers.sign(SECRET.encode(), b"")) == 200


def test_a_shard_moving_from_b_to_a_mid_call_still_succeeds(nodes, sfn):
    a, b = nodes
    arn = machine(sfn, PASS)
    moving = {2}
    name = name_on(arn, moving, uuid.uuid4().hex)
    b.give_up(moving)  # A's directory still names B, which answers "not my shard"; then nobody holds the lease
    refreshes = a.directory.refreshes
    outcome: dict = {}
    call = threading.Thread(target=lambda: outcome.update(
        sfn.start_execution(stateMachineArn=arn, name=name, input='{"who": "moved"}')))
    call.start()
    Node.wait_until(lambda: a.directory.refreshes > refreshes + 1)  # it found B gone and looked again, in vain
    a.take(moving)
    call.join(30)
    assert "executionArn" in outcome
    assert wait_closed(sfn, outcome["executionArn"])["status"] == "SUCCEEDED"
    assert a.metric('statewright_forwarded_calls_total{outcome="not_owner"}') >= 1


def test_a_command_that_finds_its_shard_gone_at_the_tick_is_forwarded(tmp_path):
    """A owns the shard when the call checks, loses it before its engine applies the command: the engine answers
    "not my shard" and the call goes on to B, which took the shard meanwhile."""
    a = Node(tmp_path / "shared.db", "a")  # not started: its engine ticks when the test says
    b = Node(tmp_path / "shared.db", "b").start()
    try:
        arn = machine(b.client(), PASS)
        name = name_on(arn, {2}, uuid.uuid4().hex)
        command = commands.StartExecution(arn.replace(":stateMachine:", ":execution:") + ":" + name, arn, name,
                                          a.store.get_state_machine(arn).revision_id, ROLE_ARN, '{"who": 2}')
        range_id = a.store.acquire_shard(2, "a", 2**62)
        a.engine.gain_shard(2, range_id, None)
        a.engine.tick(a.engine.clock())

        async def run() -> object:
            call = asyncio.ensure_future(a.service.run(command))
            await asyncio.sleep(0)  # the call checked ownership and queued its command in A's inbox
            assert a.engine.owns(2) and a.metric(ANSWERED) == 0
            a.engine.drop_shards({2})
            a.engine.tick(a.engine.clock())  # the drop, then the command: "this node does not own shard 2"
            a.store.release_shards("a", {2: range_id})
            b.take({2})
            try:
                return await call
            finally:
                await a.service.detach()

        assert isinstance(asyncio.run(run()), int)
        assert wait_closed(b.client(), command.arn)["status"] == "SUCCEEDED"
        assert a.metric(ANSWERED) == 1
    finally:
        a.close()
        b.close()


def test_a_command_refused_before_its_engine_served_the_shard_is_not_my_shard_even_once_it_does(tmp_path):
    """A node's lease is in the store before its engine serves the shard. A command its engine refused then is
    "not my shard" (the forwarder finds the owner again), not a 503, even if the engine serves the shard by the
    time the refusal is looked at."""
    a = Node(tmp_path / "shared.db", "a")  # not started: its engine ticks when the test says
    b = Node(tmp_path / "shared.db", "b").start()
    try:
        arn = machine(b.client(), PASS)
        name = name_on(arn, {2}, uuid.uuid4().hex)
        command = commands.StartExecution(arn.replace(":stateMachine:", ":execution:") + ":" + name, arn, name,
                                          a.store.get_state_machine(arn).revision_id, ROLE_ARN, '{"who": 2}')
        range_id = a.store.acquire_shard(2, "a", 2**62)

        async def run() -> list[object]:
            call = asyncio.ensure_future(a.service.run_here([command], throttle=True))
            await asyncio.sleep(0)  # the command waits in A's inbox
            a.engine.tick(a.engine.clock())  # refused: the engine does not serve shard 2 yet
            a.engine.gain_shard(2, range_id, None)
            a.engine.tick(a.engine.clock())  # now it does
            try:
                return await call
            finally:
                await a.service.detach()

        [reply] = asyncio.run(run())
        assert isinstance(reply, commands.ShardNotOwned) and reply.shard_id == 2
    finally:
        a.close()
        b.close()


def test_a_full_inbox_at_the_owner_throttles_the_caller(tmp_path):
    a = Node(tmp_path / "shared.db", "a").start()
    b = Node(tmp_path / "shared.db", "b", limits=Limits(inbox_commands_max=0)).start()  # refuses every API call
    try:
        a.take(A_SHARDS)
        b.take(B_SHARDS)
        sfn = a.client()
        arn = machine(sfn, PASS)
        with pytest.raises(ClientError) as throttled:
            sfn.start_execution(stateMachineArn=arn, name=name_on(arn, B_SHARDS, uuid.uuid4().hex))
        assert code(throttled) == "ThrottlingException"
        run = sfn.start_execution(stateMachineArn=arn, name=name_on(arn, A_SHARDS, uuid.uuid4().hex),
                                  input='{"who": "a"}')
        assert wait_closed(sfn, run["executionArn"])["status"] == "SUCCEEDED"  # A's own inbox has room
    finally:
        a.close()
        b.close()


def test_an_owner_that_is_down_gets_the_caller_a_retryable_error(tmp_path):
    a = Node(tmp_path / "shared.db", "a", deadline_s=0.3).start()
    b = Node(tmp_path / "shared.db", "b").start()
    try:
        a.take(A_SHARDS)
        b.take(B_SHARDS)
        a.directory.refresh()
        sfn = a.client()
        arn = machine(sfn, WAIT)
        run = sfn.start_execution(stateMachineArn=arn, name=name_on(arn, B_SHARDS, uuid.uuid4().hex))
        b.stop()  # B's port refuses connections; its lease still stands, so no node takes its shards
        with pytest.raises(ClientError) as unavailable:
            sfn.stop_execution(executionArn=run["executionArn"])
        assert code(unavailable) == "ServiceUnavailable"
        assert unavailable.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503  # retried by AWS SDKs
        assert a.metric('statewright_forwarded_calls_total{outcome="gave_up"}') == 1
        assert sfn.describe_execution(executionArn=run["executionArn"])["status"] == "RUNNING"  # reads go on
    finally:
        a.close()
        b.close()
