"""The web console of a server started with --auth sigv4: the user signs in with a key of the accounts file, the
page signs every call, view and stream with it (in Chromium), and sees its own account's resources only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from urllib.parse import quote

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from playwright.sync_api import expect

from server import ROLE_ARN, ServerProcess, wait_closed
from test_console import poll_task

ALICE, BOB = "111111111111", "222222222222"
ALICE_KEY = ("AKIACONSOLEALICE0001", "alice-console-secret")
BOB_KEY = ("AKIACONSOLEBOB000001", "bob-console-secret")
WAIT_MS = 15_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    where = tmp_path_factory.mktemp("console-sigv4")
    accounts = where / "accounts.json"
    accounts.write_text(json.dumps({"accounts": [
        {"accountId": ALICE, "keys": [{"accessKeyId": ALICE_KEY[0], "secretAccessKey": ALICE_KEY[1]}]},
        {"accountId": BOB, "keys": [{"accessKeyId": BOB_KEY[0], "secretAccessKey": BOB_KEY[1]}]}]}))
    process = ServerProcess(where / "data", extra_args=("--auth", "sigv4", "--accounts", str(accounts))).start()
    yield process
    process.stop()


def _client(server, key):
    return boto3.client("stepfunctions", endpoint_url=server.endpoint, region_name="us-east-1",
                        aws_access_key_id=key[0], aws_secret_access_key=key[1],
                        config=Config(retries={"max_attempts": 0}))


def _sign_in(page, key, secret=None):
    page.get_by_test_id("sign-in-accessKeyId").fill(key[0])
    page.get_by_test_id("sign-in-secretAccessKey").fill(secret or key[1])
    page.get_by_test_id("sign-in-submit").click()


def test_the_console_asks_for_a_key_then_shows_only_that_accounts_resources_live(server, page):
    alice, bob = _client(server, ALICE_KEY), _client(server, BOB_KEY)
    work = alice.create_activity(name=f"work-{uuid.uuid4().hex[:8]}")["activityArn"]
    mine = alice.create_state_machine(name=f"alice-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=json.dumps(
        {"StartAt": "Work", "States": {"Work": {"Type": "Task", "Resource": work, "End": True}}}))["stateMachineArn"]
    theirs = bob.create_state_machine(name=f"bob-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=json.dumps(
        {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))["stateMachineArn"]
    streams: list[int] = []
    page.on("response", lambda response: "/console/events" in response.url and streams.append(response.status))

    page.goto(server.endpoint + "/")
    expect(page.get_by_test_id("sign-in")).to_be_visible(timeout=WAIT_MS)
    _sign_in(page, ALICE_KEY, secret="not-the-secret")  # refused: the form again, with the server's reason
    expect(page.locator("#error")).to_contain_text("InvalidSignatureException", timeout=WAIT_MS)
    expect(page.get_by_test_id("sign-in")).to_be_visible()
    _sign_in(page, ALICE_KEY)
    expect(page.get_by_text(mine.split(":")[-1])).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_text(theirs.split(":")[-1])).to_have_count(0)
    expect(page.get_by_test_id("who")).to_contain_text(ALICE_KEY[0])

    run = alice.start_execution(stateMachineArn=mine)["executionArn"]
    page.goto(f"{server.endpoint}/#/execution/{quote(run, safe='')}")
    graph = page.get_by_test_id("graph")
    expect(graph.locator('[data-state="Work"]')).to_have_attribute("data-status", "running", timeout=WAIT_MS)
    task = poll_task(alice, work)
    alice.send_task_success(taskToken=task["taskToken"], output='{"done": true}')
    expect(graph.locator('[data-state="Work"]')).to_have_attribute("data-status", "succeeded", timeout=WAIT_MS)
    assert wait_closed(alice, run)["status"] == "SUCCEEDED"
    assert 200 in streams, "the page's signed stream was admitted"

    page.get_by_test_id("sign-out").click()
    expect(page.get_by_test_id("sign-in")).to_be_visible(timeout=WAIT_MS)


def _get(server, path: str, key=None, region: str = "us-east-1") -> tuple[int, dict]:
    """A GET of the console's, signed with ``key`` for ``region`` by botocore's signer (unsigned without one)."""
    request = AWSRequest(method="GET", url=server.endpoint + path,
                         headers={"Host": server.endpoint.removeprefix("http://")})
    if key is not None:
        SigV4Auth(Credentials(*key), "states", region).add_auth(request)
    try:
        with urllib.request.urlopen(urllib.request.Request(request.url, headers=dict(request.headers.items()))) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_consoles_views_are_signed_and_show_the_callers_account_only(server):
    alice = _client(server, ALICE_KEY)
    machine = alice.create_state_machine(name=f"views-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=json.dumps(
        {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))["stateMachineArn"]
    run = alice.start_execution(stateMachineArn=machine)["executionArn"]
    status, answer = _get(server, "/console/activities")
    assert (status, answer["__type"].split("#")[-1]) == (400, "MissingAuthenticationTokenException")
    assert _get(server, "/console/cluster", ALICE_KEY)[0] == 200
    assert _get(server, f"/console/express?stateMachineArn={quote(machine, safe='')}", ALICE_KEY)[0] == 200
    assert _get(server, f"/console/express?stateMachineArn={quote(machine, safe='')}", BOB_KEY)[0] == 403
    # ... and in its region only: the same account signed for another region is another place
    assert _get(server, f"/console/express?stateMachineArn={quote(machine, safe='')}", ALICE_KEY, "eu-west-1")[0] == 403
    request = AWSRequest(method="GET", url=f"{server.endpoint}/console/events?executionArn={quote(run, safe='')}",
                         headers={"Host": server.endpoint.removeprefix("http://")})
    SigV4Auth(Credentials(*BOB_KEY), "states", "us-east-1").add_auth(request)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(request.url, headers=dict(request.headers.items())))
    with refused.value:  # its connection closed with it
        assert (refused.value.code, refused.value.read()) == (
            403, b"not an execution of the caller's account and region")
