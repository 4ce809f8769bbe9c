"""The suite's way to a real ``statewright serve`` process (statewright.testing's StatewrightServer, as users' tests
get it) and what tests do with one: raw requests, waiting for an execution to close, reading a whole history."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from statewright.testing import StatewrightServer, free_port

__all__ = ["ROLE_ARN", "ServerProcess", "free_port", "history", "raw_call", "wait_closed"]

ROLE_ARN = "arn:aws:iam::123456789012:role/statewright-test"


def raw_call(server: ServerProcess, target: str | None, body: bytes | None, method: str = "POST",
             headers: dict[str, str] | None = None) -> tuple[int, dict]:
    """One request as bytes on the wire, past boto3's own checks; (status, parsed JSON body)."""
    sent = {"Content-Type": "application/x-amz-json-1.0", **(headers or {})}
    if target:
        sent["X-Amz-Target"] = target
    request = urllib.request.Request(server.endpoint + "/", data=body, headers=sent, method=method)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


ServerProcess = StatewrightServer  # the shipped test server (statewright.testing) is the suite's too


def wait_closed(client, execution_arn: str, deadline_s: float = 30) -> dict:
    """DescribeExecution until the execution leaves RUNNING (a bounded wait, not a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while True:
        described = client.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


def history(client, execution_arn: str, **options: object) -> list[dict]:
    """The whole history, following nextToken."""
    events, token = [], None
    while True:
        page = client.get_execution_history(executionArn=execution_arn, **options,
                                            **({"nextToken": token} if token else {}))
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            return events
