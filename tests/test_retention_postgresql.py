"""Retention and compaction on PostgreSQL, end to end: a real cluster node on the test PostgreSQL, boto3. With
nothing configured but the store, histories are compacted into the database's own payloads table (out of the
history table) and read exactly as before, a redrive reading them there too; past retention an execution answers
ExecutionDoesNotExist, leaves with its object, and its name starts a new execution. The virtual clock is SQLite's
alone, so the node is started again with the settings that make the time already passed enough:
``--compact-after-days 0`` (as soon as closed), then ``--retention-days 0`` (gone once closed)."""

from __future__ import annotations

import json

import psycopg
import pytest

from server import ROLE_ARN, ServerProcess, history, wait_closed
from test_retention import CHAIN, eventually, readings
from test_retention_redrive import WAITS, aborted_in_wait
from test_serve_postgresql import node_args

pytestmark = pytest.mark.slow  # a real server on PostgreSQL: not in the fast tier

FAILS = {"StartAt": "A", "States": {
    "A": {"Type": "Pass", "Result": 1, "ResultPath": "$.a", "Next": "F"},
    "F": {"Type": "Fail", "Error": "Broken", "Cause": "on purpose"}}}


def _rows(store: str, sql: str, arns: list[str]) -> int:
    with psycopg.connect(store, autocommit=True) as db:
        return db.execute(sql, (arns,)).fetchone()[0]


def _hot_rows(store: str, arns: list[str]) -> int:
    return _rows(store, "SELECT count(*) FROM history WHERE execution_arn = ANY(%s)", arns)


def _executions(store: str, arns: list[str]) -> int:
    return _rows(store, "SELECT count(*) FROM executions WHERE arn = ANY(%s)", arns)


def _objects(store: str) -> int:
    with psycopg.connect(store, autocommit=True) as db:
        return db.execute("SELECT count(*) FROM payloads").fetchone()[0]


def _node(tmp_path, store: str, *settings: str) -> ServerProcess:
    return ServerProcess(tmp_path / "data", shards=4, extra_args=(*node_args(store), *settings)).start()


def test_a_node_compacts_into_its_database_and_expires_executions_with_nothing_else_configured(
        tmp_path, postgres_schema):
    node = _node(tmp_path, postgres_schema)
    try:
        sfn = node.client()
        chain = sfn.create_state_machine(name="chain", definition=json.dumps(CHAIN), roleArn=ROLE_ARN)
        fails = sfn.create_state_machine(name="fails", definition=json.dumps(FAILS), roleArn=ROLE_ARN)
        arns = [sfn.start_execution(stateMachineArn=chain["stateMachineArn"], name=f"pg-{n}",
                                    input=json.dumps({"n": n}))["executionArn"] for n in range(5)]
        arns.append(sfn.start_execution(stateMachineArn=fails["stateMachineArn"], name="broken")["executionArn"])
        assert [wait_closed(sfn, arn)["status"] for arn in arns] == ["SUCCEEDED"] * 5 + ["FAILED"]
        waits = sfn.create_state_machine(name="waits", definition=json.dumps(WAITS), roleArn=ROLE_ARN)
        arns.append(aborted_in_wait(sfn, waits["stateMachineArn"], "stopped"))
        before = {arn: readings(sfn, arn) for arn in arns}
        assert _hot_rows(postgres_schema, arns) > 0 and _objects(postgres_schema) == 0
    finally:
        node.stop()

    node = _node(tmp_path, postgres_schema, "--compact-after-days", "0")
    try:
        sfn = node.client()
        assert eventually(lambda: _hot_rows(postgres_schema, arns) == 0)
        assert _objects(postgres_schema) == len(arns)
        assert {arn: readings(sfn, arn) for arn in arns} == before
        assert not (tmp_path / "data" / "payloads").exists()  # nothing outside the database
        stopped = arns[-1]
        sfn.redrive_execution(executionArn=stopped)  # into its Wait again, on the input read from the object
        entered = [event for event in history(sfn, stopped) if event["type"] == "WaitStateEntered"]
        assert len(entered) == 2 and entered[0]["stateEnteredEventDetails"] == entered[1]["stateEnteredEventDetails"]
        sfn.stop_execution(executionArn=stopped)
        assert wait_closed(sfn, stopped)["status"] == "ABORTED"
    finally:
        node.stop()

    node = _node(tmp_path, postgres_schema, "--retention-days", "0")
    try:
        sfn = node.client()
        for arn in arns:
            with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
                sfn.describe_execution(executionArn=arn)
            with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
                sfn.get_execution_history(executionArn=arn)
        assert eventually(lambda: _executions(postgres_schema, arns) == 0)
        assert eventually(lambda: _objects(postgres_schema) == 0)
    finally:
        node.stop()

    node = _node(tmp_path, postgres_schema)
    try:
        sfn = node.client()
        again = sfn.start_execution(stateMachineArn=chain["stateMachineArn"], name="pg-0", input='{"again": true}')
        assert again["executionArn"] == arns[0]
        described = wait_closed(sfn, arns[0])
        assert described["status"] == "SUCCEEDED" and described["input"] == '{"again": true}'
        assert [event["id"] for event in history(sfn, arns[0])] == list(range(1, len(before[arns[0]]["forward"]) + 1))
    finally:
        node.stop()
