"""--auth sigv4: a real server that takes only requests signed with a key of its accounts file, and accounts that
cannot see each other, driven by boto3 and by requests signed (and then spoiled) with botocore's signer."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
import urllib.error
import urllib.request
import uuid

import boto3
import botocore.session
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from prometheus_client.parser import text_string_to_metric_families

from server import ROLE_ARN, ServerProcess, history, wait_closed
from statewright.api import sigv4
from statewright.api.accounts import Accounts, AccountsFileError, parse
from statewright.api.errors import AwsError

ALICE, BOB, LIMITED = "111111111111", "222222222222", "333333333333"
ALICE_KEY = ("AKIAALICE0000000001", "alice-secret")
BOB_KEY = ("AKIABOB00000000000001", "bob-secret")
TEMPORARY = ("ASIAALICE0000000002", "alice-temporary-secret", "alice-session-token")
EXPIRED = ("ASIAALICE0000000003", "alice-expired-secret", "alice-old-token")
LIMITED_KEY = ("AKIALIMITED00000001", "limited-secret")
LATE_KEY = ("AKIALATE00000000001", "late-secret")


def _accounts(*, with_late: bool = False) -> dict:
    alice_keys = [{"accessKeyId": ALICE_KEY[0], "secretAccessKey": ALICE_KEY[1]},
                  {"accessKeyId": TEMPORARY[0], "secretAccessKey": TEMPORARY[1], "sessionToken": TEMPORARY[2],
                   "expiration": "2099-01-01T00:00:00Z"},
                  {"accessKeyId": EXPIRED[0], "secretAccessKey": EXPIRED[1], "sessionToken": EXPIRED[2],
                   "expiration": "2020-01-01T00:00:00Z"}]
    accounts = [{"accountId": ALICE, "keys": alice_keys},
                {"accountId": LIMITED, "keys": [{"accessKeyId": LIMITED_KEY[0], "secretAccessKey": LIMITED_KEY[1]}],
                 "regions": ["us-east-1"]}]
    if with_late:
        accounts.append({"accountId": BOB, "keys": [{"accessKeyId": LATE_KEY[0], "secretAccessKey": LATE_KEY[1]}]})
    else:
        accounts.append({"accountId": BOB, "keys": [{"accessKeyId": BOB_KEY[0], "secretAccessKey": BOB_KEY[1]}]})
    return {"accounts": accounts}


@pytest.fixture(scope="module")
def signed_server(tmp_path_factory):
    where = tmp_path_factory.mktemp("sigv4")
    accounts = where / "accounts.json"
    accounts.write_text(json.dumps(_accounts()))
    process = ServerProcess(where / "data", extra_args=("--auth", "sigv4", "--accounts", str(accounts))).start()
    process.accounts_file = accounts
    yield process
    process.stop()


def _client(server, key: tuple[str, ...], region: str = "us-east-1"):
    return boto3.client("stepfunctions", endpoint_url=server.endpoint, region_name=region,
                        aws_access_key_id=key[0], aws_secret_access_key=key[1],
                        aws_session_token=key[2] if len(key) > 2 else None,
                        config=Config(retries={"max_attempts": 0}, inject_host_prefix=False))


def _signed(server, key: tuple[str, ...], operation: str, params: dict, *, region: str = "us-east-1",
            service: str = "states", when: datetime.datetime | None = None) -> AWSRequest:
    """A request as boto3 would send it, signed by botocore's signer (at ``when``, if given)."""
    body = json.dumps(params).encode()
    request = AWSRequest(method="POST", url=server.endpoint + "/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AWSStepFunctions.{operation}",
        "Host": server.endpoint.removeprefix("http://")})
    signer = SigV4Auth(Credentials(*key), service, region)
    if when is None:
        signer.add_auth(request)
    else:
        request.context["timestamp"] = when.strftime("%Y%m%dT%H%M%SZ")
        request.headers["X-Amz-Date"] = request.context["timestamp"]
        signature = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
        signer._inject_signature_to_request(request, signature)
    return request


def _send(server, request: AWSRequest, *, body: bytes | None = None) -> tuple[int, dict]:
    sent = urllib.request.Request(request.url, data=request.data if body is None else body,
                                  headers=dict(request.headers.items()), method=request.method)
    try:
        with urllib.request.urlopen(sent) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _error(answer: tuple[int, dict]) -> tuple[int, str]:
    status, body = answer
    return status, body.get("__type", "").split("#")[-1]


def _machine(client, name: str | None = None) -> str:
    return client.create_state_machine(
        name=name or f"sm-{uuid.uuid4().hex[:10]}", roleArn=ROLE_ARN,
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))["stateMachineArn"]


def test_a_signed_caller_works_in_its_own_account(signed_server):
    alice = _client(signed_server, ALICE_KEY)
    machine = _machine(alice, "orders")
    assert machine == f"arn:aws:states:us-east-1:{ALICE}:stateMachine:orders"
    run = alice.start_execution(stateMachineArn=machine, input='{"n": 1}')["executionArn"]
    assert run.split(":")[4] == ALICE
    assert wait_closed(alice, run)["status"] == "SUCCEEDED"
    # The same name in another account is another state machine
    bob = _client(signed_server, BOB_KEY)
    assert _machine(bob, "orders") == f"arn:aws:states:us-east-1:{BOB}:stateMachine:orders"
    assert machine in [m["stateMachineArn"] for m in alice.list_state_machines()["stateMachines"]]
    assert machine not in [m["stateMachineArn"] for m in bob.list_state_machines()["stateMachines"]]


def test_a_temporary_key_needs_its_session_token_and_ends(signed_server):
    assert "stateMachines" in _client(signed_server, TEMPORARY).list_state_machines()
    status, code = _error(_send(signed_server, _signed(signed_server, TEMPORARY[:2], "ListStateMachines", {})))
    assert (status, code) == (400, "UnrecognizedClientException")
    wrong = (*TEMPORARY[:2], "another-token")
    assert _error(_send(signed_server, _signed(signed_server, wrong, "ListStateMachines", {}))) == (
        400, "UnrecognizedClientException")
    # A session token sent with a long-term key is not one of its own
    assert _error(_send(signed_server, _signed(signed_server, (*ALICE_KEY, "token"), "ListStateMachines", {}))) == (
        400, "UnrecognizedClientException")
    with pytest.raises(_client(signed_server, EXPIRED).exceptions.ClientError, match="ExpiredTokenException"):
        _client(signed_server, EXPIRED).list_state_machines()


@pytest.mark.parametrize(("case", "expected"), [
    ("unsigned", "MissingAuthenticationTokenException"),
    ("unknown key", "UnrecognizedClientException"),
    ("wrong secret", "InvalidSignatureException"),
    ("body changed after signing", "InvalidSignatureException"),
    ("header changed after signing", "InvalidSignatureException"),
    ("signed for another service", "InvalidSignatureException"),
    ("signed for a region the account may not use", "UnrecognizedClientException"),
    ("signed for no region", "InvalidSignatureException"),
    ("ten minutes old (a replay)", "InvalidSignatureException"),
    ("ten minutes ahead", "InvalidSignatureException"),
    ("no Signature", "IncompleteSignatureException"),
    ("another algorithm", "IncompleteSignatureException"),
    ("a credential of three parts", "IncompleteSignatureException"),
    ("no date", "IncompleteSignatureException"),
    ("host not signed", "InvalidSignatureException"),
    ("a body hash that is not the body's", "InvalidSignatureException"),
])
def test_each_bad_signature_gets_its_aws_error_and_writes_nothing(signed_server, case, expected):
    name = f"bad-{uuid.uuid4().hex[:10]}"
    params = {"name": name, "roleArn": ROLE_ARN,
              "definition": json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})}
    body = None
    now = datetime.datetime.now(datetime.UTC)
    key, region, service, when = ALICE_KEY, "us-east-1", "states", None
    if case == "unknown key":
        key = ("AKIANOBODY000000000001", "whatever")
    elif case == "wrong secret":
        key = (ALICE_KEY[0], "not-the-secret")
    elif case == "signed for another service":
        service = "s3"
    elif case == "signed for a region the account may not use":
        key, region = LIMITED_KEY, "eu-west-1"
    elif case == "signed for no region":
        region = "nowhere"
    elif case == "ten minutes old (a replay)":
        when = now - datetime.timedelta(minutes=10)
    elif case == "ten minutes ahead":
        when = now + datetime.timedelta(minutes=10)
    request = _signed(signed_server, key, "CreateStateMachine", params, region=region, service=service, when=when)
    authorization = request.headers["Authorization"]
    if case == "unsigned":
        del request.headers["Authorization"]
    elif case == "body changed after signing":
        body = json.dumps({**params, "name": name + "x"}).encode()
    elif case == "header changed after signing":
        request.headers.replace_header("X-Amz-Target", "AWSStepFunctions.ValidateStateMachineDefinition")
    elif case == "no Signature":
        request.headers.replace_header("Authorization", authorization.split(", Signature=")[0])
    elif case == "another algorithm":
        request.headers.replace_header("Authorization", authorization.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-MD5"))
    elif case == "a credential of three parts":
        request.headers.replace_header("Authorization", authorization.replace("/states/aws4_request", ""))
    elif case == "no date":
        del request.headers["X-Amz-Date"]
    elif case == "host not signed":
        request.headers.replace_header("Authorization", authorization.replace("SignedHeaders=content-type;host;",
                                                                              "SignedHeaders=content-type;"))
    elif case == "a body hash that is not the body's":
        request.headers["X-Amz-Content-SHA256"] = "0" * 64
    status, answer = _send(signed_server, request, body=body)
    assert (status, answer.get("__type", "").split("#")[-1]) == (400, expected), answer
    assert answer["message"]
    alice = _client(signed_server, ALICE_KEY)
    assert name not in [m["name"] for m in alice.list_state_machines(maxResults=1000)["stateMachines"]]


def test_the_expired_and_early_messages_name_the_times(signed_server):
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=10)
    status, answer = _send(signed_server, _signed(signed_server, ALICE_KEY, "ListStateMachines", {}, when=old))
    assert status == 400 and answer["message"].startswith(f"Signature expired: {old.strftime('%Y%m%dT%H%M%SZ')} "
                                                          "is now earlier than ")


def _alice_world(alice) -> dict[str, str]:
    """Alice's resources of every kind, for Bob to reach for."""
    machine = alice.create_state_machine(
        name=f"sweep-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, publish=True,
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))
    alias = alice.create_state_machine_alias(name="live", routingConfiguration=[
        {"stateMachineVersionArn": machine["stateMachineVersionArn"], "weight": 100}])["stateMachineAliasArn"]
    run = alice.start_execution(stateMachineArn=machine["stateMachineArn"])["executionArn"]
    wait_closed(alice, run)
    activity = alice.create_activity(name=f"sweep-{uuid.uuid4().hex[:8]}")["activityArn"]
    return {"machine": machine["stateMachineArn"], "version": machine["stateMachineVersionArn"], "alias": alias,
            "execution": run, "activity": activity,
            "map_run": f"{machine['stateMachineArn'].replace(':stateMachine:', ':mapRun:')}/M:{uuid.uuid4()}"}


def _bob_calls(world: dict[str, str]) -> dict[str, dict]:
    """Each operation that names a resource, aimed at Alice's."""
    return {
        "DeleteActivity": {"activityArn": world["activity"]},
        "DeleteStateMachine": {"stateMachineArn": world["machine"]},
        "DeleteStateMachineAlias": {"stateMachineAliasArn": world["alias"]},
        "DeleteStateMachineVersion": {"stateMachineVersionArn": world["version"]},
        "DescribeActivity": {"activityArn": world["activity"]},
        "DescribeExecution": {"executionArn": world["execution"]},
        "DescribeMapRun": {"mapRunArn": world["map_run"]},
        "DescribeStateMachine": {"stateMachineArn": world["machine"]},
        "DescribeStateMachineAlias": {"stateMachineAliasArn": world["alias"]},
        "DescribeStateMachineForExecution": {"executionArn": world["execution"]},
        "GetActivityTask": {"activityArn": world["activity"]},
        "GetExecutionHistory": {"executionArn": world["execution"]},
        "ListExecutions": {"stateMachineArn": world["machine"]},
        "ListMapRuns": {"executionArn": world["execution"]},
        "ListStateMachineAliases": {"stateMachineArn": world["machine"]},
        "ListStateMachineVersions": {"stateMachineArn": world["machine"]},
        "ListTagsForResource": {"resourceArn": world["machine"]},
        "PublishStateMachineVersion": {"stateMachineArn": world["machine"]},
        "RedriveExecution": {"executionArn": world["execution"]},
        "StartExecution": {"stateMachineArn": world["alias"]},
        "StartSyncExecution": {"stateMachineArn": world["machine"]},
        "StopExecution": {"executionArn": world["execution"]},
        "TagResource": {"resourceArn": world["activity"], "tags": [{"key": "k", "value": "v"}]},
        "UntagResource": {"resourceArn": world["machine"], "tagKeys": ["k"]},
        "UpdateMapRun": {"mapRunArn": world["map_run"], "maxConcurrency": 1},
        "UpdateStateMachine": {"stateMachineArn": world["machine"], "definition": json.dumps(
            {"StartAt": "X", "States": {"X": {"Type": "Fail"}}})},
        "UpdateStateMachineAlias": {"stateMachineAliasArn": world["alias"], "description": "mine now"},
        "CreateStateMachineAlias": {"name": "stolen", "routingConfiguration": [
            {"stateMachineVersionArn": world["version"], "weight": 100}]},
    }


def test_another_account_can_reach_nothing_of_alices(signed_server):
    alice, bob = _client(signed_server, ALICE_KEY), _client(signed_server, BOB_KEY)
    world = _alice_world(alice)
    calls = _bob_calls(world)
    model = botocore.session.get_session().get_service_model("stepfunctions")
    naming = {operation for operation in model.operation_names
              if any((member.endswith("Arn") and member != "roleArn") or member == "routingConfiguration"
                     for member in model.operation_model(operation).input_shape.members)}
    assert naming == set(calls), "every operation that names a resource is swept"
    for operation, params in calls.items():
        status, answer = _send(signed_server, _signed(signed_server, BOB_KEY, operation, params))
        assert (status, answer.get("__type", "").split("#")[-1]) == (400, "AccessDeniedException"), operation
        assert f"states:{operation} on resource: arn:aws:states:us-east-1:{ALICE}:" in answer["message"]
    # Nothing of Alice's changed, and Bob's lists hold nothing of hers
    assert alice.describe_state_machine(stateMachineArn=world["machine"])["definition"].startswith('{"StartAt": "P"')
    assert alice.describe_state_machine_alias(stateMachineAliasArn=world["alias"]).get("description") is None
    assert alice.list_tags_for_resource(resourceArn=world["activity"])["tags"] == []
    assert [event["type"] for event in history(alice, world["execution"])][-1] == "ExecutionSucceeded"
    listed = json.dumps([bob.list_state_machines()["stateMachines"], bob.list_activities()["activities"]],
                        default=str)
    assert ALICE not in listed


def test_a_region_holds_nothing_of_another_region_of_the_same_account(signed_server):
    """Each operation answers for Alice's us-east-1 resources, asked for in eu-west-1, what it answers there for a
    resource that does not exist: the region is a place of its own."""
    alice = _client(signed_server, ALICE_KEY)
    world = _alice_world(alice)
    here = f"arn:aws:states:eu-west-1:{ALICE}"
    nowhere = {"machine": f"{here}:stateMachine:nowhere", "version": f"{here}:stateMachine:nowhere:1",
               "alias": f"{here}:stateMachine:nowhere:live", "execution": f"{here}:execution:nowhere:run",
               "activity": f"{here}:activity:nowhere", "map_run": f"{here}:mapRun:nowhere/M:{uuid.uuid4()}"}
    missing = _bob_calls(nowhere)
    for operation, params in _bob_calls(world).items():
        asked = _send(signed_server, _signed(signed_server, ALICE_KEY, operation, params, region="eu-west-1"))
        absent = _send(signed_server, _signed(signed_server, ALICE_KEY, operation, missing[operation],
                                              region="eu-west-1"))
        assert _error(asked) == _error(absent), operation
        if asked[0] == 200:  # a deletion of nothing, an empty list
            assert asked[1] == absent[1], operation
        else:
            assert f"arn:aws:states:us-east-1:{ALICE}:" in json.dumps(asked[1]), operation  # it names what it missed
    # Nothing of Alice's in us-east-1 changed
    assert alice.describe_state_machine(stateMachineArn=world["machine"])["status"] == "ACTIVE"
    assert alice.describe_state_machine_alias(stateMachineAliasArn=world["alias"]).get("description") is None
    assert alice.describe_activity(activityArn=world["activity"])["activityArn"] == world["activity"]
    assert alice.list_tags_for_resource(resourceArn=world["activity"])["tags"] == []
    assert [event["type"] for event in history(alice, world["execution"])][-1] == "ExecutionSucceeded"


def test_a_task_token_answers_only_for_its_own_account_and_region(signed_server):
    alice, bob = _client(signed_server, ALICE_KEY), _client(signed_server, BOB_KEY)
    alice_elsewhere = _client(signed_server, ALICE_KEY, region="eu-west-1")
    activity = alice.create_activity(name=f"work-{uuid.uuid4().hex[:8]}")["activityArn"]
    machine = alice.create_state_machine(
        name=f"tokens-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN,
        definition=json.dumps({"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": activity,
                                                                  "End": True}}}))["stateMachineArn"]
    run = alice.start_execution(stateMachineArn=machine)["executionArn"]
    token = alice.get_activity_task(activityArn=activity, workerName="w")["taskToken"]
    for call in (lambda: bob.send_task_success(taskToken=token, output='{"by": "bob"}'),
                 lambda: bob.send_task_failure(taskToken=token, error="Bob"),
                 lambda: bob.send_task_heartbeat(taskToken=token),
                 lambda: alice_elsewhere.send_task_success(taskToken=token, output='{"by": "alice in eu-west-1"}')):
        with pytest.raises(bob.exceptions.InvalidToken):
            call()
    alice.send_task_success(taskToken=token, output='{"by": "alice"}')
    described = wait_closed(alice, run)
    assert (described["status"], json.loads(described["output"])) == ("SUCCEEDED", {"by": "alice"})


def test_a_workflow_calls_this_server_as_its_own_account(signed_server):
    """aws-sdk:sfn calls reach this server signed with a key of the execution's account."""
    alice = _client(signed_server, ALICE_KEY)
    target = _machine(alice)
    caller = alice.create_state_machine(
        name=f"caller-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN,
        definition=json.dumps({"StartAt": "D", "States": {"D": {
            "Type": "Task", "Resource": "arn:aws:states:::aws-sdk:sfn:describeStateMachine",
            "Parameters": {"StateMachineArn": target}, "ResultSelector": {"name.$": "$.Name"},
            "End": True}}}))["stateMachineArn"]
    run = alice.start_execution(stateMachineArn=caller)["executionArn"]
    described = wait_closed(alice, run)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"name": target.split(":")[-1]}


def test_sighup_reads_the_accounts_file_again(signed_server):
    late, bob = _client(signed_server, LATE_KEY), _client(signed_server, BOB_KEY)
    with pytest.raises(late.exceptions.ClientError, match="UnrecognizedClientException"):
        late.list_state_machines()
    bobs = _machine(bob)
    path = signed_server.accounts_file
    try:
        path.write_text(json.dumps(_accounts(with_late=True)))  # Bob's first key is gone, a new one came
        os.kill(signed_server.process.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while True:
            try:
                machines = late.list_state_machines()["stateMachines"]
                break
            except late.exceptions.ClientError:
                assert time.monotonic() < deadline, "the new key was never taken"
                time.sleep(0.05)
        assert bobs in [m["stateMachineArn"] for m in machines]  # Bob's account, reached with Bob's new key
        with pytest.raises(bob.exceptions.ClientError, match="UnrecognizedClientException"):
            bob.list_state_machines()
        path.write_text("{not json")  # a broken file changes nothing
        os.kill(signed_server.process.pid, signal.SIGHUP)
        time.sleep(0.2)
        assert "stateMachines" in late.list_state_machines()
    finally:
        path.write_text(json.dumps(_accounts()))
        os.kill(signed_server.process.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                _client(signed_server, BOB_KEY).list_state_machines()
                break
            except Exception:
                time.sleep(0.05)


@pytest.mark.parametrize(("document", "complaint"), [
    ({"accounts": [{"accountId": "12", "keys": [{"accessKeyId": "AKIA0000000000000001", "secretAccessKey": "s"}]}]},
     "accountId: expected 12 digits"),
    ({"accounts": [{"accountId": ALICE, "keys": []}]}, "keys: expected a list of at least one key"),
    ({"accounts": [{"accountId": ALICE, "keys": [{"accessKeyId": "AKIA0000000000000001", "secretAccessKey": "s"}]},
                   {"accountId": BOB, "keys": [{"accessKeyId": "AKIA0000000000000001", "secretAccessKey": "t"}]}]},
     "AKIA0000000000000001 is listed twice"),
    ({"accounts": [{"accountId": ALICE, "regions": ["mars"], "keys": [
        {"accessKeyId": "AKIA0000000000000001", "secretAccessKey": "s"}]}]}, "regions: expected a list of region"),
    ({"accounts": [{"accountId": ALICE, "keys": [{"accessKeyId": "AKIA0000000000000001", "secretAccessKey": "s",
                                                  "expiration": "2030-01-01T00:00:00Z"}]}]},
     "only a temporary key"),
    ({"accounts": [{"accountId": ALICE, "secret": "x", "keys": []}]}, "unknown field 'secret'"),
    ({"accounts": []}, "lists no account"),
    ({"accounts": [{"accountId": ALICE, "keys": [{"accessKeyId": "AKIA0000000000000001", "secretAccessKey": ""}]}]},
     "secretAccessKey: expected a string that is not empty"),
])
def test_an_accounts_file_that_is_wrong_is_refused_with_its_place(document, complaint):
    with pytest.raises(AccountsFileError, match=complaint):
        parse(document)


def test_serve_refuses_sigv4_without_a_usable_accounts_file(tmp_path):
    command = [sys.executable, "-m", "statewright", "serve", "--data-dir", str(tmp_path / "data"), "--port", "1"]
    missing = subprocess.run([*command, "--auth", "sigv4"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "--auth sigv4 needs --accounts FILE" in missing.stderr
    broken = tmp_path / "accounts.json"
    broken.write_text('{"accounts": [{"accountId": "1"}]}')
    refused = subprocess.run([*command, "--auth", "sigv4", "--accounts", str(broken)], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 1 and "accounts[0].accountId: expected 12 digits" in refused.stderr


def test_ten_thousand_unknown_keys_leave_nothing_behind(tmp_path):
    """Verification keeps no state per request: refusing 10,000 distinct unknown keys allocates nothing that stays."""
    path = tmp_path / "accounts.json"
    path.write_text(json.dumps(_accounts()))
    accounts = Accounts(path)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")

    def refuse(n: int) -> str | None:
        headers = [(b"host", b"127.0.0.1:1"), (b"x-amz-date", stamp.encode()), (b"authorization", (
            f"AWS4-HMAC-SHA256 Credential=AKIAUNKNOWN{n:010d}/{stamp[:8]}/us-east-1/states/aws4_request, "
            f"SignedHeaders=host;x-amz-date, Signature={'0' * 64}").encode())]
        try:
            sigv4.verify(accounts, "POST", b"/", b"", headers, b"{}", time.time())
        except AwsError as error:
            return error.code
        return None

    assert refuse(0) == "UnrecognizedClientException"
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    assert {refuse(n) for n in range(1, 10_001)} == {"UnrecognizedClientException"}
    grown = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
    tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes stayed after 10,000 refusals"


def test_a_definition_cannot_reach_another_accounts_state_machine_or_activity(signed_server):
    alice, bob = _client(signed_server, ALICE_KEY), _client(signed_server, BOB_KEY)
    target = _machine(alice)
    activity = alice.create_activity(name=f"private-{uuid.uuid4().hex[:8]}")["activityArn"]
    for resource in ("arn:aws:states:::states:startExecution", "arn:aws:states:::states:startExecution.sync:2"):
        caller = bob.create_state_machine(
            name=f"reach-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=json.dumps({"StartAt": "S", "States": {
                "S": {"Type": "Task", "Resource": resource, "Parameters": {"StateMachineArn": target},
                      "End": True}}}))["stateMachineArn"]
        described = wait_closed(bob, bob.start_execution(stateMachineArn=caller)["executionArn"])
        assert (described["status"], described["error"]) == ("FAILED", "StepFunctions.AccessDeniedException")
        assert "not authorized to perform: states:StartExecution" in described["cause"]
    assert alice.list_executions(stateMachineArn=target)["executions"] == []
    worker = bob.create_state_machine(
        name=f"steal-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=json.dumps({"StartAt": "T", "States": {
            "T": {"Type": "Task", "Resource": activity, "End": True}}}))["stateMachineArn"]
    described = wait_closed(bob, bob.start_execution(stateMachineArn=worker, input='{"secret": 1}')["executionArn"])
    assert (described["status"], described["error"]) == ("FAILED", "States.Runtime")
    assert "does not exist" in described["cause"]


def test_a_definition_cannot_reach_its_own_accounts_state_machine_or_activity_of_another_region(signed_server):
    alice, alice_elsewhere = _client(signed_server, ALICE_KEY), _client(signed_server, ALICE_KEY, region="eu-west-1")
    target = _machine(alice)
    activity = alice.create_activity(name=f"regional-{uuid.uuid4().hex[:8]}")["activityArn"]
    caller = alice_elsewhere.create_state_machine(
        name=f"reach-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=json.dumps({"StartAt": "S", "States": {
            "S": {"Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2",
                  "Parameters": {"StateMachineArn": target}, "End": True}}}))["stateMachineArn"]
    described = wait_closed(alice_elsewhere, alice_elsewhere.start_execution(stateMachineArn=caller)["executionArn"])
    assert (described["status"], described["error"]) == ("FAILED", "StepFunctions.StateMachineDoesNotExistException")
    assert alice.list_executions(stateMachineArn=target)["executions"] == []
    worker = alice_elsewhere.create_state_machine(
        name=f"work-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=json.dumps({"StartAt": "T", "States": {
            "T": {"Type": "Task", "Resource": activity, "End": True}}}))["stateMachineArn"]
    run = alice_elsewhere.start_execution(stateMachineArn=worker)["executionArn"]
    described = wait_closed(alice_elsewhere, run)
    assert (described["status"], described["error"]) == ("FAILED", "States.Runtime")
    assert "does not exist" in described["cause"]
    # ... scheduled nothing for the us-east-1 activity's workers
    assert "ActivityScheduled" not in [event["type"] for event in history(alice_elsewhere, run)]


def _account_samples(server, family: str) -> dict[tuple, float]:
    with urllib.request.urlopen(server.endpoint + "/metrics") as response:
        text = response.read().decode()
    return {tuple(sorted(sample.labels.items())): sample.value for metric in text_string_to_metric_families(text)
            if metric.name == family for sample in metric.samples if sample.name.endswith("_total")}


def test_metrics_count_each_accounts_requests_and_transitions_apart(signed_server):
    requests, transitions = "statewright_account_api_requests", "statewright_account_state_transitions_committed"
    before = (_account_samples(signed_server, requests), _account_samples(signed_server, transitions))
    alice, bob = _client(signed_server, ALICE_KEY), _client(signed_server, BOB_KEY)
    run = alice.start_execution(stateMachineArn=_machine(alice), input="{}")["executionArn"]
    wait_closed(alice, run)
    bob.list_state_machines()
    with pytest.raises(ClientError):  # an unknown key: counted under no account
        _client(signed_server, ("AKIAUNKNOWN00000001", "nope")).list_state_machines()
    after = (_account_samples(signed_server, requests), _account_samples(signed_server, transitions))

    def moved(kind: int, **labels: str) -> float:
        key = tuple(sorted(labels.items()))
        return after[kind].get(key, 0) - before[kind].get(key, 0)

    assert moved(0, account=ALICE, region="us-east-1", error="") >= 3  # create, start, describe
    assert moved(0, account=BOB, region="us-east-1", error="") == 1
    assert moved(0, account="", region="", error="UnrecognizedClientException") == 1
    assert moved(1, account=ALICE, region="us-east-1") == 1  # its one Pass state
    assert moved(1, account=BOB, region="us-east-1") == 0
