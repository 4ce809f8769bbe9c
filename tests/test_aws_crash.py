"""A server SIGKILLed with AWS calls in flight: after the restart every call's outcome is either applied once or
is States.Timeout (its attempt's deadline), and none is applied twice."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from aws import aws_client, server_env
from server import ROLE_ARN, ServerProcess, history, wait_closed

pytestmark = pytest.mark.slow  # a real server killed mid-call, moto: not in the fast tier


def test_calls_in_flight_at_a_crash_are_applied_once_or_time_out(tmp_path, moto):
    sqs = aws_client(moto, "sqs")
    queue = sqs.create_queue(QueueName=f"crash-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    server = ServerProcess(tmp_path / "data", env=server_env(moto)).start()
    try:  # stopped whatever happens: a server left running would fail the next test (ResourceWarning)
        sfn = server.client()
        definition = {"StartAt": "Send", "States": {"Send": {
            "Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "TimeoutSeconds": 3, "End": True,
            "Parameters": {"QueueUrl": queue, "MessageBody.$": "$$.Execution.Name"}}}}
        machine = sfn.create_state_machine(name="crash", definition=json.dumps(definition),
                                           roleArn=ROLE_ARN)["stateMachineArn"]
        def start_all() -> None:
            for index in range(60):
                try:
                    sfn.start_execution(stateMachineArn=machine, name=f"e{index}")
                except (BotoCoreError, ClientError):  # the server is gone: the starts after the kill never ran
                    return

        starter = threading.Thread(target=start_all)
        starter.start()
        time.sleep(0.4)  # some calls made, some in flight, some not yet started
        server.kill()
        starter.join()
        server.start()
        sfn = server.client()
        executions = {e["name"]: e["executionArn"] for e in sfn.list_executions(stateMachineArn=machine)["executions"]}
        outcomes = {name: wait_closed(sfn, arn) for name, arn in executions.items()}
        bodies: dict[str, int] = {}
        while True:
            messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10,
                                           WaitTimeSeconds=1).get("Messages", [])
            if not messages:
                break
            for message in messages:
                bodies[message["Body"]] = bodies.get(message["Body"], 0) + 1
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
        assert executions, "no start landed before the kill"
        assert all(count == 1 for count in bodies.values()), bodies  # no call was made twice
        for name, described in outcomes.items():
            if described["status"] == "SUCCEEDED":
                assert bodies.get(name) == 1  # applied once
            else:  # lost at the crash: the deadline decided, and the call was made at most once
                assert described["status"] == "FAILED" and described["error"] == "States.Timeout", described
                assert bodies.get(name, 0) <= 1
                types = [event["type"] for event in history(sfn, executions[name])]
                assert types.count("TaskStarted") == 1 and "TaskTimedOut" in types
    finally:
        server.stop()
