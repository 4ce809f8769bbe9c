"""statewright import and export: state machines (with their versions, aliases, tags, logging and tracing settings)
and activities copied between Step Functions endpoints through botocore: a second statewright, and moto."""

import json
import os
import subprocess
import sys

import boto3

from aws import CREDENTIALS, aws_client, server_env
from server import ROLE_ARN, ServerProcess, wait_closed

ACCOUNT_B = "222222222222"


def statewright(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **CREDENTIALS, "AWS_DEFAULT_REGION": "us-east-1"}
    return subprocess.run([sys.executable, "-m", "statewright", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def machine_definition(activity_arn: str, greeting: str) -> dict:
    return {"StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": activity_arn, "TimeoutSeconds": 60, "Next": "Say"},
        "Say": {"Type": "Pass", "Result": greeting, "ResultPath": "$.said", "End": True}}}


def test_import_copies_versions_aliases_tags_and_settings_and_the_copy_runs(tmp_path, moto):
    # Both check a log group exists (in moto's CloudWatch Logs) before they take a logging configuration
    source = ServerProcess(tmp_path / "source", extra_args=("--account-id", ACCOUNT_B), env=server_env(moto)).start()
    target = ServerProcess(tmp_path / "target", env=server_env(moto)).start()
    aws_client(moto, "logs").create_log_group(logGroupName="flows")
    try:
        there, here = source.client(), target.client()
        activity = there.create_activity(name="work", tags=[{"key": "team", "value": "a"}])["activityArn"]
        logging = {"level": "ERROR", "includeExecutionData": False, "destinations": [{"cloudWatchLogsLogGroup": {
            "logGroupArn": f"arn:aws:logs:us-east-1:{ACCOUNT_B}:log-group:flows:*"}}]}
        created = there.create_state_machine(
            name="flow", definition=json.dumps(machine_definition(activity, "one")), roleArn=ROLE_ARN, publish=True,
            versionDescription="first", tags=[{"key": "env", "value": "prod"}], loggingConfiguration=logging,
            tracingConfiguration={"enabled": True})
        flow = created["stateMachineArn"]
        two = there.update_state_machine(stateMachineArn=flow, publish=True,
                                         definition=json.dumps(machine_definition(activity, "two")))
        there.update_state_machine(stateMachineArn=flow, definition=json.dumps(machine_definition(activity, "three")))
        there.create_state_machine_alias(name="live", description="most traffic", routingConfiguration=[
            {"stateMachineVersionArn": created["stateMachineVersionArn"], "weight": 10},
            {"stateMachineVersionArn": two["stateMachineVersionArn"], "weight": 90}])
        there.create_state_machine(name="quick", type="EXPRESS", roleArn=ROLE_ARN, definition=json.dumps(
            {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))

        copied = statewright("import", "--from-endpoint", source.endpoint, "--endpoint-url", target.endpoint)
        assert copied.returncode == 0, copied.stderr
        assert "copied 1 activities, 2 state machines with 2 versions and 1 aliases" in copied.stdout

        mine = {machine["name"]: machine for machine in here.list_state_machines()["stateMachines"]}
        assert set(mine) == {"flow", "quick"} and mine["quick"]["type"] == "EXPRESS"
        local_flow = mine["flow"]["stateMachineArn"]
        assert ":123456789012:" in local_flow  # this server's account, not the source's
        described = here.describe_state_machine(stateMachineArn=local_flow)
        assert json.loads(described["definition"])["States"]["Say"]["Result"] == "three"
        local_activity = here.list_activities()["activities"][0]["activityArn"]
        assert json.loads(described["definition"])["States"]["Work"]["Resource"] == local_activity
        assert described["loggingConfiguration"]["level"] == "ERROR"
        assert described["tracingConfiguration"] == {"enabled": True}
        assert here.list_tags_for_resource(resourceArn=local_flow)["tags"] == [{"key": "env", "value": "prod"}]
        assert here.list_tags_for_resource(resourceArn=local_activity)["tags"] == [{"key": "team", "value": "a"}]
        versions = here.list_state_machine_versions(stateMachineArn=local_flow)["stateMachineVersions"]
        assert sorted(version["stateMachineVersionArn"].rsplit(":", 1)[1] for version in versions) == ["1", "2"]
        first = here.describe_state_machine(stateMachineArn=f"{local_flow}:1")
        assert first["description"] == "first" and json.loads(first["definition"])["States"]["Say"]["Result"] == "one"
        (alias,) = here.list_state_machine_aliases(stateMachineArn=local_flow)["stateMachineAliases"]
        routing = here.describe_state_machine_alias(stateMachineAliasArn=alias["stateMachineAliasArn"])
        assert {(route["stateMachineVersionArn"].rsplit(":", 1)[1], route["weight"])
                for route in routing["routingConfiguration"]} == {("1", 10), ("2", 90)}

        # The copy runs here: its activity's worker answers through this server
        arn = here.start_execution(stateMachineArn=f"{local_flow}:2", input="{}")["executionArn"]
        task = here.get_activity_task(activityArn=local_activity)
        here.send_task_success(taskToken=task["taskToken"], output="{}")
        assert json.loads(wait_closed(here, arn)["output"])["said"] == "two"

        again = statewright("import", "--from-endpoint", source.endpoint, "--endpoint-url", target.endpoint)
        assert "skipped state machine flow: the target has one of that name" in again.stdout
    finally:
        source.stop()
        target.stop()


def test_export_reaches_moto_and_import_takes_what_moto_holds(tmp_path, moto):
    server = ServerProcess(tmp_path / "data").start()
    try:
        here = server.client()
        here.create_state_machine(name="exported", roleArn=ROLE_ARN, definition=json.dumps(
            {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))
        sent = statewright("export", "--to-endpoint", moto, "--endpoint-url", server.endpoint)
        assert sent.returncode == 0, sent.stderr
        there = boto3.client("stepfunctions", endpoint_url=moto, region_name="us-east-1", **{
            "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"]})
        assert "exported" in {machine["name"] for machine in there.list_state_machines()["stateMachines"]}
        there.create_state_machine(name="from-moto", roleArn=ROLE_ARN, definition=json.dumps(
            {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 1, "End": True}}}))
        taken = statewright("import", "--from-endpoint", moto, "--endpoint-url", server.endpoint)
        assert taken.returncode == 0, taken.stderr
        names = {machine["name"] for machine in here.list_state_machines()["stateMachines"]}
        assert {"exported", "from-moto"} <= names
        assert "skipped state machine exported: the target has one of that name" in taken.stdout
    finally:
        server.stop()
