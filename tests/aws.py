"""What the AWS integration tests run against: moto's server as the AWS endpoint, the environment that points a
statewright server at it, boto3 clients for setting up and reading back, and a local web service standing in for
Lambda functions (``serve --functions``)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
from botocore.config import Config

from server import ROLE_ARN, free_port, history, wait_closed

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account, and statewright's
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def start_moto() -> tuple[Any, str]:
    """moto's server on a free port: (the server, its endpoint)."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    return moto, f"http://127.0.0.1:{port}"


def server_env(endpoint: str) -> dict[str, str]:
    """A statewright server's environment for calling AWS at ``endpoint``, found as every AWS tool finds it."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": REGION, **CREDENTIALS,
            "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}


def aws_client(endpoint: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION,
                        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                        config=Config(retries={"max_attempts": 0}))


def queue(endpoint: str) -> tuple[str, str]:
    """A new SQS queue on moto: (its URL, its ARN)."""
    sqs = aws_client(endpoint, "sqs")
    url = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def rule_to_queue(endpoint: str, pattern: dict) -> str:
    """An EventBridge rule on the default bus that sends the events ``pattern`` matches to a new queue; its URL."""
    url, arn = queue(endpoint)
    events = aws_client(endpoint, "events")
    rule = f"r-{uuid.uuid4().hex[:10]}"
    events.put_rule(Name=rule, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=rule, Targets=[{"Id": "q", "Arn": arn}])
    return url


def table(endpoint: str) -> str:
    """A new DynamoDB table on moto keyed by the string ``pk``; its name."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    aws_client(endpoint, "dynamodb").create_table(
        TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
    return name


class LocalFunction:
    """An HTTP server answering each POST with ``handler(payload, call_number)`` -> (status, JSON body), counting
    the calls per path (one path per function)."""

    def __init__(self, handler: Callable[[str, Any, int], tuple[int, Any]]) -> None:
        self.calls: dict[str, int] = {}
        self.payloads: list[Any] = []
        lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                payload = json.loads(body or b"null")
                with lock:
                    number = owner.calls[self.path] = owner.calls.get(self.path, 0) + 1
                    owner.payloads.append(payload)
                status, answer = handler(self.path, payload, number)
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()  # bytes: as they are
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def run(sfn, definition: dict, payload: dict | None = None) -> dict:
    """Create a machine, run one execution to its end, return DescribeExecution (with the history under
    "events")."""
    arn = sfn.create_state_machine(name=f"aws-{uuid.uuid4().hex[:10]}", definition=json.dumps(definition),
                                   roleArn=ROLE_ARN)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps(payload or {}))["executionArn"]
    described = wait_closed(sfn, execution)
    described["events"] = history(sfn, execution)
    return described


def task(resource: str, parameters: dict | None = None, **fields) -> dict:
    state = {"Type": "Task", "Resource": resource, "End": True, **fields}
    if parameters is not None:
        state["Parameters"] = parameters
    return {"StartAt": "T", "States": {"T": state}}


def caught(resource: str, parameters: dict) -> dict:
    """A Task whose every error is caught: the output is the error and cause."""
    definition = task(resource, parameters, Catch=[{"ErrorEquals": ["States.ALL"], "Next": "Caught"}])
    definition["States"]["Caught"] = {"Type": "Pass", "End": True}
    return definition


def output(described: dict):
    assert described["status"] == "SUCCEEDED", described
    return json.loads(described["output"])
