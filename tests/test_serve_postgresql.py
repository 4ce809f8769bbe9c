"""`statewright serve --store postgresql://...`: a real server process on the test PostgreSQL, driven by boto3."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import psycopg
import pytest
from botocore.exceptions import ClientError

from server import ROLE_ARN, ServerProcess, free_port, history, wait_closed
from statewright.node import _listen
from test_metrics import open_executions

pytestmark = pytest.mark.slow  # real servers on PostgreSQL: not in the fast tier

WAIT_THEN_PASS = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 1, "Next": "P"},
                                             "P": {"Type": "Pass", "Result": {"done": True}, "ResultPath": "$.result",
                                                   "End": True}}}
SLEEPER = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}


def node_args(store: str) -> tuple[str, ...]:
    return ("--store", store, "--cluster-secret", "s")


def test_serve_on_postgresql_runs_a_wait_to_the_end_and_keeps_it_across_a_restart(tmp_path, postgres_schema):
    node = ServerProcess(tmp_path / "data", shards=4, extra_args=node_args(postgres_schema)).start()
    try:
        sfn = node.client()
        machine = sfn.create_state_machine(name="waits", definition=json.dumps(WAIT_THEN_PASS),
                                           roleArn=ROLE_ARN)["stateMachineArn"]
        run = sfn.start_execution(stateMachineArn=machine, input='{"n": 1}')["executionArn"]
        described = wait_closed(sfn, run)
        assert described["status"] == "SUCCEEDED"
        assert json.loads(described["output"]) == {"n": 1, "result": {"done": True}}
        assert [event["type"] for event in history(sfn, run)] == [
            "ExecutionStarted", "WaitStateEntered", "WaitStateExited", "PassStateEntered", "PassStateExited",
            "ExecutionSucceeded"]
        sleeper = sfn.create_state_machine(name="sleeps", definition=json.dumps(SLEEPER),
                                           roleArn=ROLE_ARN)["stateMachineArn"]
        sfn.start_execution(stateMachineArn=sleeper)
        assert open_executions(node.endpoint) == 1
        assert not (tmp_path / "data" / "statewright.db").exists()  # nothing went to SQLite

        node.kill()
        node.start()  # the same database: everything committed is there, the count is taken again
        assert sfn.describe_execution(executionArn=run)["status"] == "SUCCEEDED"
        assert open_executions(node.endpoint) == 1
    finally:
        node.stop()


def test_serve_refuses_another_shard_count_and_a_store_that_is_not_postgresql(tmp_path, postgres_schema):
    node = ServerProcess(tmp_path / "data", shards=4, extra_args=node_args(postgres_schema)).start()
    node.stop()
    refused = subprocess.run([sys.executable, "-m", "statewright", "serve", "--port", str(free_port()), "--store",
                              postgres_schema, "--cluster-secret", "s", "--shards", "5"], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 1
    assert "was created with 4 shards" in refused.stderr and "--shards 4" in refused.stderr
    wrong = subprocess.run([sys.executable, "-m", "statewright", "serve", "--store", str(tmp_path / "x.db")],
                           capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "postgresql://" in wrong.stderr


def test_connections_cut_by_the_database_get_a_retryable_error_and_the_node_carries_on(tmp_path, postgres_schema):
    node = ServerProcess(tmp_path / "data", shards=4, extra_args=node_args(postgres_schema)).start()
    try:
        sfn = node.client()
        machine = sfn.create_state_machine(name="waits", definition=json.dumps(WAIT_THEN_PASS),
                                           roleArn=ROLE_ARN)["stateMachineArn"]
        before = sfn.start_execution(stateMachineArn=machine)["executionArn"]
        with psycopg.connect(postgres_schema, autocommit=True) as admin:  # as a restarting database server would
            cut = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()[0]
        assert cut > 0
        for _ in range(3):  # each answer is a success or a retryable 503, never a 500
            try:
                sfn.describe_state_machine(stateMachineArn=machine)
                sfn.start_execution(stateMachineArn=machine)
            except ClientError as error:
                assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 503, error.response
        after = sfn.start_execution(stateMachineArn=machine)["executionArn"]
        for run in (before, after):
            assert wait_closed(sfn, run)["status"] == "SUCCEEDED"
    finally:
        node.stop()


def test_a_node_with_another_secret_or_a_port_in_use_refuses_to_start_and_takes_no_shard(tmp_path, postgres_schema):
    node = ServerProcess(tmp_path / "data", shards=4, extra_args=node_args(postgres_schema)).start()
    try:
        other = subprocess.run([sys.executable, "-m", "statewright", "serve", "--port", str(free_port()), "--store",
                                postgres_schema, "--cluster-secret", "typo", "--shards", "4"], capture_output=True,
                               text=True, timeout=60)
        assert other.returncode == 1
        assert "share another cluster secret" in other.stderr and "--cluster-secret" in other.stderr
        taken = subprocess.run([sys.executable, "-m", "statewright", "serve", "--port", str(node.port), "--store",
                                postgres_schema, "--cluster-secret", "s", "--shards", "4"], capture_output=True,
                               text=True, timeout=60)
        assert taken.returncode == 1
        assert f"cannot listen on 127.0.0.1:{node.port}" in taken.stderr and "--port" in taken.stderr
        with psycopg.connect(postgres_schema) as db:  # neither joined: the first node holds every shard still
            assert db.execute("SELECT DISTINCT owner FROM shards").fetchall() == [(node.endpoint,)]
            assert [row[0] for row in db.execute("SELECT node_id FROM nodes")] == [node.endpoint]
    finally:
        node.stop()


def test_a_starting_node_queues_connections_from_the_moment_it_binds():
    """Before it serves, a node's socket already listens: another node telling it of a membership change meanwhile
    waits to be answered instead of being refused (it would be heard only at the next renewal)."""
    port = free_port()
    listening = _listen("127.0.0.1", port)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        listening.close()
