"""Execution status change events: from the commit that changes the status, to a webhook and to EventBridge (moto's
server, a rule forwarding to a queue), delivered after a SIGKILL between commit and delivery."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aws import aws_client, rule_to_queue, server_env
from server import ROLE_ARN, ServerProcess, free_port, wait_closed

pytestmark = pytest.mark.slow  # real server processes: not in the fast tier


class Webhook:
    """An HTTP server collecting the events POSTed to it; ``down`` answers 503 instead."""

    def __init__(self, port: int | None = None) -> None:
        self.events: list[dict] = []
        self.down = False
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if owner.down:
                    self.send_response(503)
                else:
                    owner.events.append(json.loads(body))
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/events"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def statuses(self, execution_arn: str) -> list[str]:
        return [event["detail"]["status"] for event in self.events if event["resources"] == [execution_arn]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def wait_for(check, deadline_s: float = 30):
    deadline = time.monotonic() + deadline_s
    while not (found := check()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


def start_server(tmp_path, moto, webhook, *extra: str) -> ServerProcess:
    hooks = tmp_path / "webhooks.json"
    hooks.write_text(json.dumps([webhook.url]))
    return ServerProcess(tmp_path / "data", env=server_env(moto),
                         extra_args=("--webhooks", str(hooks), *extra)).start()


def machine(sfn, definition: dict) -> str:
    return sfn.create_state_machine(name=f"ev-{uuid.uuid4().hex[:8]}", definition=json.dumps(definition),
                                    roleArn=ROLE_ARN)["stateMachineArn"]


def test_each_status_change_reaches_the_webhook_and_the_event_bus(tmp_path, moto, webhook):
    sqs = aws_client(moto, "sqs")
    queue = rule_to_queue(moto, {"source": ["aws.states"]})
    server = start_server(tmp_path, moto, webhook, "--status-events-bus", "default")
    try:
        sfn = server.client()
        arn = machine(sfn, {"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": {"ok": 1}, "End": True}}})
        execution = sfn.start_execution(stateMachineArn=arn, input='{"n": 1}')["executionArn"]
        assert wait_for(lambda: len(webhook.statuses(execution)) == 2)
        assert webhook.statuses(execution) == ["RUNNING", "SUCCEEDED"]  # an execution's events in order
        done = next(e for e in webhook.events if e["detail"]["status"] == "SUCCEEDED")
        running = next(e for e in webhook.events if e["detail"]["status"] == "RUNNING")
        assert done["id"] != running["id"] and done["time"].endswith("Z")
        assert (done["source"], done["detail-type"]) == ("aws.states", "Step Functions Execution Status Change")
        detail = done["detail"]
        assert detail["executionArn"] == execution and detail["stateMachineArn"] == arn
        assert json.loads(detail["input"]) == {"n": 1} and json.loads(detail["output"]) == {"ok": 1}
        assert isinstance(detail["startDate"], int) and detail["stopDate"] >= detail["startDate"]
        assert detail["inputDetails"] == {"included": True} and detail["error"] is None
        bus_statuses = set()
        deadline = time.monotonic() + 20
        while bus_statuses != {"RUNNING", "SUCCEEDED"} and time.monotonic() < deadline:
            for message in sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1,
                                               MaxNumberOfMessages=10).get("Messages", []):
                event = json.loads(message["Body"])
                if event["detail"]["executionArn"] == execution:
                    bus_statuses.add(event["detail"]["status"])
        assert bus_statuses == {"RUNNING", "SUCCEEDED"}
    finally:
        server.stop()


def test_failures_stops_and_redrives_are_reported_with_their_details(tmp_path, moto, webhook):
    server = start_server(tmp_path, moto, webhook)
    try:
        sfn = server.client()
        failing = machine(sfn, {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Oops", "Cause": "c"}}})
        failed = sfn.start_execution(stateMachineArn=failing)["executionArn"]
        waiting = machine(sfn, {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 600, "End": True}}})
        stopped = sfn.start_execution(stateMachineArn=waiting)["executionArn"]
        sfn.stop_execution(executionArn=stopped, error="Halt", cause="by test")
        assert wait_closed(sfn, failed)["status"] == "FAILED"
        assert wait_for(lambda: "FAILED" in webhook.statuses(failed) and "ABORTED" in webhook.statuses(stopped))
        detail = next(e["detail"] for e in webhook.events if e["detail"]["executionArn"] == failed
                      and e["detail"]["status"] == "FAILED")
        assert (detail["error"], detail["cause"], detail["redriveStatus"]) == ("Oops", "c", "REDRIVABLE")
        sfn.redrive_execution(executionArn=stopped)
        assert wait_for(lambda: len(webhook.statuses(stopped)) == 4)
        assert webhook.statuses(stopped) == ["RUNNING", "ABORTED", "PENDING_REDRIVE", "RUNNING"]
        redriven = next(e["detail"] for e in webhook.events if e["detail"]["executionArn"] == stopped
                        and e["detail"]["status"] == "PENDING_REDRIVE")
        assert redriven["redriveCount"] == 1 and isinstance(redriven["redriveDate"], int)
        sfn.stop_execution(executionArn=stopped)
    finally:
        server.stop()


def test_events_committed_before_a_crash_are_delivered_after_it(tmp_path, moto):
    port = free_port()
    webhook = Webhook(port)
    webhook.down = True
    server = start_server(tmp_path, moto, webhook)
    try:
        sfn = server.client()
        arn = machine(sfn, {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
        executions = [sfn.start_execution(stateMachineArn=arn)["executionArn"] for _ in range(5)]
        for execution in executions:
            assert wait_closed(sfn, execution)["status"] == "SUCCEEDED"
        with urllib.request.urlopen(f"{server.endpoint}/metrics") as response:
            metrics = response.read().decode()
        assert 'statewright_status_events_failed_total{destination="webhook"}' in metrics
        server.kill()  # committed, not delivered: the events are outbox rows
        webhook.down = False
        assert not webhook.events
        server.start()
        for execution in executions:
            assert wait_for(lambda execution=execution: set(webhook.statuses(execution)) == {"RUNNING",
                                                                                              "SUCCEEDED"})
    finally:
        server.stop()
        webhook.close()
