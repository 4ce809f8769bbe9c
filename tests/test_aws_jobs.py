"""Start a job and wait for it (.sync) against moto's server: the poll is a timer, the result the job's final
description, and an abandoned job is stopped."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from aws import ACCOUNT, aws_client, output, run, task
from server import ROLE_ARN, history, wait_closed


@pytest.fixture
def sfn(aws_server):
    return aws_server.client()


def _types(described: dict) -> list[str]:
    return [event["type"] for event in described["events"]]


def test_athena_query_sync_waits_for_the_query_and_returns_its_description(sfn):
    described = run(sfn, task("arn:aws:states:::athena:startQueryExecution.sync", {
        "QueryString": "SELECT 1", "WorkGroup": "primary",
        "ResultConfiguration": {"OutputLocation": "s3://results/"}}))
    result = output(described)
    assert result["QueryExecution"]["Status"]["State"] == "SUCCEEDED"
    assert result["QueryExecution"]["Query"] == "SELECT 1"
    assert _types(described)[2:6] == ["TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskSucceeded"]
    submitted = next(e for e in described["events"] if e["type"] == "TaskSubmitted")["taskSubmittedEventDetails"]
    assert "QueryExecutionId" in json.loads(submitted["output"])


def test_glue_job_run_sync_returns_the_final_job_run(sfn, moto):
    glue = aws_client(moto, "glue")
    name = f"job-{uuid.uuid4().hex[:8]}"
    glue.create_job(Name=name, Role=ROLE_ARN, Command={"Name": "glueetl", "ScriptLocation": "s3://s/x.py"})
    result = output(run(sfn, task("arn:aws:states:::glue:startJobRun.sync", {"JobName": name})))
    assert result["JobName"] == name and result["JobRunState"] == "SUCCEEDED"


def test_codebuild_build_sync_returns_the_build(sfn, moto):
    codebuild = aws_client(moto, "codebuild")
    name = f"p-{uuid.uuid4().hex[:8]}"
    codebuild.create_project(name=name, source={"type": "S3", "location": "bucket/source.zip"},
                             artifacts={"type": "NO_ARTIFACTS"}, serviceRole=ROLE_ARN,
                             environment={"type": "LINUX_CONTAINER", "image": "img", "computeType":
                                          "BUILD_GENERAL1_SMALL"})
    result = output(run(sfn, task("arn:aws:states:::codebuild:startBuild.sync", {"ProjectName": name})))
    assert result["Build"]["BuildStatus"] == "SUCCEEDED" and result["Build"]["ProjectName"] == name


def _ecs_task_definition(moto) -> tuple[object, str, str]:
    ecs = aws_client(moto, "ecs")
    cluster = ecs.create_cluster(clusterName=f"c-{uuid.uuid4().hex[:8]}")["cluster"]["clusterArn"]
    definition = ecs.register_task_definition(family=f"f-{uuid.uuid4().hex[:8]}", containerDefinitions=[
        {"name": "app", "image": "busybox", "memory": 64}])["taskDefinition"]["taskDefinitionArn"]
    return ecs, cluster, definition


def test_an_ecs_task_whose_deadline_passes_is_stopped(sfn, moto):
    ecs, cluster, definition = _ecs_task_definition(moto)
    described = run(sfn, task("arn:aws:states:::ecs:runTask.sync", {"Cluster": cluster,
                                                                     "TaskDefinition": definition,
                                                                     "LaunchType": "FARGATE"},
                              TimeoutSeconds=3))
    assert described["status"] == "FAILED" and described["error"] == "States.Timeout"
    started = [t for t in ecs.list_tasks(cluster=cluster, desiredStatus="STOPPED")["taskArns"]]
    assert len(started) == 1  # moto's tasks run until stopped: the timeout stopped it
    scheduled = next(e for e in described["events"] if e["type"] == "TaskScheduled")["taskScheduledEventDetails"]
    assert json.loads(scheduled["parameters"])["StartedBy"] == "AWS Step Functions"  # as AWS's recording shows
    assert ecs.describe_tasks(cluster=cluster, tasks=started)["tasks"][0]["startedBy"] == "AWS Step Functions"


def test_stopping_the_execution_stops_its_ecs_task(sfn, moto):
    ecs, cluster, definition = _ecs_task_definition(moto)
    arn = sfn.create_state_machine(name=f"ecs-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=json.dumps(
        task("arn:aws:states:::ecs:runTask.sync", {"Cluster": cluster, "TaskDefinition": definition,
                                                   "LaunchType": "FARGATE"})))[
        "stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    deadline = time.monotonic() + 20
    while "TaskSubmitted" not in [e["type"] for e in history(sfn, execution)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ecs.list_tasks(cluster=cluster, desiredStatus="RUNNING")["taskArns"]
    sfn.stop_execution(executionArn=execution)
    assert wait_closed(sfn, execution)["status"] == "ABORTED"
    deadline = time.monotonic() + 20
    while ecs.list_tasks(cluster=cluster, desiredStatus="RUNNING")["taskArns"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ecs.list_tasks(cluster=cluster, desiredStatus="RUNNING")["taskArns"]
    assert ecs.list_tasks(cluster=cluster, desiredStatus="STOPPED")["taskArns"]


def test_a_start_call_refused_by_the_service_fails_with_its_error(sfn):
    described = run(sfn, task("arn:aws:states:::glue:startJobRun.sync", {"JobName": "no-such-job"}))
    assert described["status"] == "FAILED"
    assert described["error"] == "Glue.EntityNotFoundException"
    assert f"arn:aws:iam::{ACCOUNT}" not in described["cause"]
