"""Retention and compaction end to end: real server processes on the virtual clock, boto3. A closed execution's
history moves to the payload store (a directory, or S3 on moto's server) after --compact-after-days and reads
exactly as before; after --retention-days the execution is gone and its name free; compaction killed with SIGKILL
loses and duplicates nothing."""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.request
import uuid
from pathlib import Path

import boto3
import pytest

from aws import CREDENTIALS, REGION, server_env
from server import ROLE_ARN, ServerProcess, history, wait_closed
from statewright import cli
from statewright.node import ServerConfig

pytestmark = pytest.mark.slow  # real server processes: not in the fast tier

CHAIN = {"StartAt": "A", "States": {
    "A": {"Type": "Pass", "Result": {"step": "a"}, "ResultPath": "$.a", "Next": "B"},
    "B": {"Type": "Pass", "Result": {"step": "b"}, "ResultPath": "$.b", "Next": "C"},
    "C": {"Type": "Pass", "Parameters": {"all.$": "$"}, "End": True}}}


def _machine(sfn) -> str:
    return sfn.create_state_machine(name=f"m-{uuid.uuid4().hex[:10]}", definition=json.dumps(CHAIN),
                                    roleArn=ROLE_ARN)["stateMachineArn"]


def _closed(sfn, machine: str, name: str) -> str:
    arn = sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps({"name": name}))["executionArn"]
    assert wait_closed(sfn, arn)["status"] == "SUCCEEDED"
    return arn


def readings(sfn, arn: str) -> dict:
    """Everything a client reads of a closed execution: DescribeExecution and the history every way it pages."""
    described = sfn.describe_execution(executionArn=arn)
    for moment in ("ResponseMetadata", "redriveStatus", "redriveStatusReason"):  # of the moment, not the execution
        described.pop(moment, None)
    return {"describe": described, "forward": history(sfn, arn), "reverse": history(sfn, arn, reverseOrder=True),
            "pages": history(sfn, arn, maxResults=2), "reverse_pages": history(sfn, arn, maxResults=3,
                                                                               reverseOrder=True),
            "no_data": history(sfn, arn, includeExecutionData=False, maxResults=4)}


def eventually(check, deadline_s: float = 30) -> bool:
    """A bounded wait for the background sweep to act on an advance (not a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def hot_history_rows(data_dir: Path, arn: str) -> int:
    with sqlite3.connect(f"file:{data_dir / 'statewright.db'}?mode=ro", uri=True) as db:
        return db.execute("SELECT COUNT(*) FROM history JOIN executions ON executions.id = history.execution_id "
                          "WHERE arn = ?", (arn,)).fetchone()[0]


def objects(data_dir: Path) -> list[Path]:
    return [path for path in (data_dir / "payloads").rglob("*.json.gz")]


@pytest.fixture
def server(tmp_path):
    server = ServerProcess(tmp_path / "data", extra_args=("--clock", "virtual")).start()
    yield server
    server.stop()


def test_a_history_compacted_after_two_days_reads_the_same_until_retention_ends_then_the_name_is_free(server):
    sfn = server.client()
    machine = _machine(sfn)
    early = _closed(sfn, machine, "early")  # a day older: its compaction shows a sweep has run
    server.advance("1d")
    arn = _closed(sfn, machine, "order-1")
    before = readings(sfn, arn)
    assert len(before["forward"]) > 6 and before["reverse"] == before["forward"][::-1]
    server.advance("1d")
    assert eventually(lambda: hot_history_rows(server.data_dir, early) == 0)
    assert hot_history_rows(server.data_dir, arn) > 0 and len(objects(server.data_dir)) == 1
    server.advance("1d")
    assert eventually(lambda: hot_history_rows(server.data_dir, arn) == 0)
    assert len(objects(server.data_dir)) == 2
    assert readings(sfn, arn) == before
    with pytest.raises(sfn.exceptions.ExecutionAlreadyExists):
        sfn.start_execution(stateMachineArn=machine, name="order-1", input="{}")
    server.advance("87d")  # 89 days after it closed: still there (and the early one gone)
    assert readings(sfn, arn) == before
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.describe_execution(executionArn=early)
    server.advance("1d")
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.describe_execution(executionArn=arn)
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.get_execution_history(executionArn=arn)
    assert eventually(lambda: objects(server.data_dir) == [])
    with urllib.request.urlopen(f"{server.endpoint}/metrics") as response:
        metrics = response.read().decode()
    assert 'statewright_retention_executions_total{outcome="compacted"} 2.0' in metrics
    assert 'statewright_retention_executions_total{outcome="deleted"} 2.0' in metrics
    assert sfn.start_execution(stateMachineArn=machine, name="order-1", input="{}")["executionArn"] == arn
    again = wait_closed(sfn, arn)
    assert again["status"] == "SUCCEEDED" and again["input"] == "{}"
    assert [event["id"] for event in history(sfn, arn)] == list(range(1, len(before["forward"]) + 1))


def test_retention_and_compaction_follow_their_settings(tmp_path):
    server = ServerProcess(tmp_path / "data", extra_args=("--clock", "virtual", "--retention-days", "10",
                                                          "--compact-after-days", "4.5")).start()
    try:
        sfn = server.client()
        machine = _machine(sfn)
        early = _closed(sfn, machine, "early")
        server.advance("1d")
        arn = _closed(sfn, machine, "short")
        server.advance("4d")
        assert eventually(lambda: hot_history_rows(server.data_dir, early) == 0)
        assert hot_history_rows(server.data_dir, arn) > 0
        server.advance("12h")
        assert eventually(lambda: hot_history_rows(server.data_dir, arn) == 0)
        server.advance("6d")
        with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
            sfn.describe_execution(executionArn=arn)
    finally:
        server.stop()


def test_the_settings_take_days_with_fractions_and_refuse_what_is_no_number_of_days(monkeypatch, capsys):
    served: list[ServerConfig] = []
    monkeypatch.setattr(cli, "serve", lambda config: served.append(config) or 0)
    assert cli.main(["serve", "--retention-days", "0.5", "--compact-after-days", "0"]) == 0
    assert (served[0].retention_days, served[0].compact_after_days) == (0.5, 0)
    for value in ("-1", "soon", "nan", "1e9"):
        with pytest.raises(SystemExit):
            cli.main(["serve", "--retention-days", value])
        assert "--retention-days" in capsys.readouterr().err


def test_histories_compacted_into_s3_read_the_same(tmp_path, moto):
    bucket = f"histories-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=moto, region_name=REGION, aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
    s3.create_bucket(Bucket=bucket)
    server = ServerProcess(tmp_path / "data", extra_args=("--clock", "virtual", "--payload-store",
                                                          f"s3://{bucket}/statewright/"), env=server_env(moto)).start()
    try:
        sfn = server.client()
        machine = _machine(sfn)
        arns = [_closed(sfn, machine, f"s3-{n}") for n in range(3)]
        before = [readings(sfn, arn) for arn in arns]
        server.advance("2d")
        assert eventually(lambda: all(hot_history_rows(server.data_dir, arn) == 0 for arn in arns))
        keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket)["Contents"]]
        assert len(keys) == 3 and all(key.startswith("statewright/history/") for key in keys)
        assert objects(server.data_dir) == []
        assert [readings(sfn, arn) for arn in arns] == before
        server.advance("88d")
        assert eventually(lambda: s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0)
    finally:
        server.stop()


def test_compaction_killed_with_sigkill_loses_and_duplicates_no_history(tmp_path):
    server = ServerProcess(tmp_path / "data", extra_args=("--clock", "virtual")).start()
    try:
        sfn = server.client()
        machine = _machine(sfn)
        arns = [_closed(sfn, machine, f"k-{n}") for n in range(250)]  # three sweeps' batches
        before = {arn: history(sfn, arn) for arn in arns}
        server.advance("2d")
        for _ in range(3):  # killed at a first object, at once after a restart, then mid-way
            assert eventually(lambda: len(objects(server.data_dir)) > 0, 30)
            server.kill()
            server.start()
        assert eventually(lambda: len(objects(server.data_dir)) == len(arns), 60)
        assert eventually(lambda: all(hot_history_rows(server.data_dir, arn) == 0 for arn in arns), 60)
        assert {arn: history(sfn, arn) for arn in arns} == before
    finally:
        server.stop()
