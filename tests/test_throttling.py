"""A full engine inbox: the API answers ThrottlingException, counts it, and boto3 backs off and retries.

The engine's own side (``Engine.submit`` raising InboxFull at ``Limits.inbox_commands_max``) is tested with the
engine; here a real engine whose inbox holds nothing answers every API command so.
"""

from __future__ import annotations

import asyncio
import json

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from prometheus_client.parser import text_string_to_metric_families

from asgi import ACCOUNT, Threaded, build, call, close
from server import ROLE_ARN
from statewright.engine.commands import Command, InboxFull
from statewright.engine.engine import Engine
from statewright.engine.limits import Limits

PASS = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
MACHINE = f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:busy"
THROTTLED = {"__type": "com.amazon.coral.availability#ThrottlingException", "message": "Rate exceeded"}


class FullInbox(Engine):
    """A real engine whose inbox holds nothing (inbox_commands_max=0), counting the commands it refuses."""

    def __init__(self, store, **options) -> None:
        super().__init__(store, limits=Limits(inbox_commands_max=0), **options)
        self.refused = 0

    def submit(self, command: Command, reply=None, *, throttle: bool = True):
        try:
            return super().submit(command, reply, throttle=throttle)
        except InboxFull:
            self.refused += 1
            raise


@pytest.fixture
def app(tmp_path):
    app = build(tmp_path, FullInbox)
    yield app
    close(app)


def throttled_count(app) -> float:
    families = {family.name: family for family in text_string_to_metric_families(app.metrics.exposition().decode())}
    return next(sample.value for sample in families["statewright_api_throttled_requests"].samples
                if sample.name == "statewright_api_throttled_requests_total")


def test_a_full_inbox_answers_throttling_exception_and_counts_it(app):
    token = app.service.engine.tokens.mint(MACHINE.replace("stateMachine", "execution") + ":x", 5, 1)

    async def scenario() -> list[tuple[int, dict]]:
        created = await call(app, "CreateStateMachine", {"name": "busy", "definition": PASS, "roleArn": ROLE_ARN})
        assert created[0] == 200
        return [await call(app, "StartExecution", {"stateMachineArn": MACHINE}),
                await call(app, "StopExecution", {"executionArn": MACHINE.replace("stateMachine", "execution")
                                                  + ":x"}),
                await call(app, "SendTaskHeartbeat", {"taskToken": token})]

    assert asyncio.run(scenario()) == [(400, THROTTLED)] * 3
    assert app.service.engine.refused == 3
    assert throttled_count(app) == 3


@pytest.mark.parametrize("mode", ["legacy", "standard"])
def test_boto3_retries_a_throttled_request_then_raises_its_code(app, mode):
    asyncio.run(call(app, "CreateStateMachine", {"name": "busy", "definition": PASS, "roleArn": ROLE_ARN}))
    with Threaded(app) as server:
        sfn = boto3.client("stepfunctions", endpoint_url=server.endpoint, region_name="us-east-1",
                           aws_access_key_id="test", aws_secret_access_key="test",
                           config=Config(retries={"mode": mode, "total_max_attempts": 2}))
        with pytest.raises(ClientError) as raised:
            sfn.start_execution(stateMachineArn=MACHINE)
    error = raised.value.response
    assert (error["Error"]["Code"], error["Error"]["Message"]) == ("ThrottlingException", "Rate exceeded")
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["ResponseMetadata"]["RetryAttempts"] == 1  # boto3 treated it as retryable
    assert app.service.engine.refused == 2
