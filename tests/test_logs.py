"""A node's log as an operator reads it: one line per event, as text or as JSON lines with stable keys."""

import json
import time
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from link import Link, through
from server import ROLE_ARN, ServerProcess, free_port
from statewright.testing import StatewrightServer

PASS = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}


def test_json_lines_carry_each_event_with_stable_keys(tmp_path):
    server = ServerProcess(tmp_path / "data", extra_args=("--log-format", "json", "--log-level", "info")).start()
    sfn = server.client()
    sfn.list_state_machines()
    server.stop()
    lines = [json.loads(line) for line in server.log_path.read_text().splitlines() if line.strip()]
    events = {line.get("event"): line for line in lines}
    assert {"store", "retention", "limits", "serving", "stopping", "stopped"} <= events.keys(), lines
    for line in lines:
        assert {"time", "level", "logger", "message"} <= line.keys() and line["time"].endswith("Z")
    assert events["serving"]["url"] == server.endpoint and events["serving"]["level"] == "INFO"
    assert events["store"]["message"].startswith("data in ") and events["store"]["shards"] == 8


def test_text_lines_say_the_same_and_a_level_leaves_out_what_is_below_it(tmp_path):
    server = StatewrightServer(tmp_path / "data", 8, ("--log-level", "warning"), free_port()).start()  # no marker
    server.stop()
    assert "serving the Step Functions API" not in server.log_path.read_text()  # INFO, below WARNING
    server = ServerProcess(tmp_path / "again").start()
    server.client().list_activities()  # serving: a stop now is the graceful one
    server.stop()
    text = server.log_path.read_text()
    assert " INFO statewright: serving the Step Functions API on " in text and "stopped: " in text


def test_the_store_out_of_reach_and_back_is_said_once_each(tmp_path, postgres_schema):
    link = Link(urlsplit(postgres_schema).port or 5432)
    server = ServerProcess(tmp_path / "data", extra_args=("--store", through(postgres_schema, link.port),
                                                          "--cluster-secret", "logs-test")).start()
    try:
        sfn = server.client()
        machine = sfn.create_state_machine(name="m", definition=json.dumps(PASS), roleArn=ROLE_ARN)["stateMachineArn"]
        link.cut()
        with pytest.raises(ClientError):  # its commit fails: the caller is told to retry
            sfn.start_execution(stateMachineArn=machine, input="{}")
        _said(server, "the store is out of reach")
        link.heal()
        _said(server, "the store is back after")
        deadline = time.monotonic() + 30
        while True:  # a connection the outage broke fails its first call after it; the client retries
            try:
                sfn.start_execution(stateMachineArn=machine, input="{}")
                break
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "ServiceUnavailable" and time.monotonic() < deadline
                time.sleep(0.2)
        text = server.log_path.read_text()
        assert text.count("the store is out of reach") == 1 and text.count("the store is back") == 1
    finally:
        server.stop()
        link.close()


def _said(server, words: str, deadline_s: float = 30) -> None:
    deadline = time.monotonic() + deadline_s
    while words not in server.log_path.read_text():
        assert time.monotonic() < deadline, f"never said {words!r}: {server.log_path}"
        time.sleep(0.1)
