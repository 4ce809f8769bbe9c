"""Execution logs to CloudWatch Logs, against moto's server: the records at each level, with and without execution
data, for STANDARD and EXPRESS executions; AWS's errors for bad logging configurations; and what the logs show of
an engine killed with express executions in memory (an asynchronous one runs again, a synchronous one does not)."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from aws import aws_client, server_env
from server import ROLE_ARN, ServerProcess

pytestmark = pytest.mark.slow  # real server processes and moto: not in the fast tier

FAILING = {"StartAt": "Prepare", "States": {
    "Prepare": {"Type": "Pass", "Result": {"ready": True}, "Next": "Stop"},
    "Stop": {"Type": "Fail", "Error": "Stopped", "Cause": "on purpose"}}}
SLOW = {"StartAt": "Nap", "States": {"Nap": {"Type": "Wait", "Seconds": 60, "End": True}}}
TYPES_LOGGED = {
    "ALL": ["ExecutionStarted", "PassStateEntered", "PassStateExited", "FailStateEntered", "ExecutionFailed"],
    "ERROR": ["FailStateEntered", "ExecutionFailed"],
    "FATAL": ["ExecutionFailed"]}


@pytest.fixture(scope="module")
def logs(moto):
    return aws_client(moto, "logs")


def serve(path, moto: str, *args: str) -> ServerProcess:
    return ServerProcess(path, extra_args=args, env=server_env(moto))


@pytest.fixture(scope="module")
def logging_server(tmp_path_factory, moto):
    process = serve(tmp_path_factory.mktemp("logging") / "data", moto).start()
    yield process
    process.stop()


def log_group(logs) -> str:
    name = f"/aws/vendedlogs/states/test-{uuid.uuid4().hex[:10]}"
    logs.create_log_group(logGroupName=name)
    return f"arn:aws:logs:us-east-1:123456789012:log-group:{name}:*"


def logging(level: str, group: str, include_data: bool = False) -> dict:
    return {"level": level, "includeExecutionData": include_data,
            "destinations": [{"cloudWatchLogsLogGroup": {"logGroupArn": group}}]}


def records(logs, group: str, until, deadline_s: float = 30) -> list[dict]:
    """The group's records (FilterLogEvents, every stream) once ``until(records)`` holds: a bounded wait."""
    name = group.split(":")[6]
    deadline = time.monotonic() + deadline_s
    while True:
        found, token = [], None
        while True:
            page = logs.filter_log_events(logGroupName=name, **({"nextToken": token} if token else {}))
            found += [json.loads(event["message"]) for event in page["events"]]
            token = page.get("nextToken")
            if not token:
                break
        if until(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def of(found: list[dict], execution_arn: str) -> list[dict]:
    return [record for record in found if record["execution_arn"] == execution_arn]


def has(execution_arn: str, event_type: str, count: int = 1):
    return lambda found: sum(r["type"] == event_type for r in of(found, execution_arn)) >= count


@pytest.mark.parametrize("kind", ["STANDARD", "EXPRESS"])
@pytest.mark.parametrize("level", ["ALL", "ERROR", "FATAL"])
@pytest.mark.parametrize("include_data", [True, False])
def test_each_level_logs_its_event_types(logging_server, logs, kind, level, include_data):
    sfn = logging_server.client()
    group = log_group(logs)
    machine = sfn.create_state_machine(name=f"logged-{uuid.uuid4().hex[:8]}", definition=json.dumps(FAILING),
                                       roleArn=ROLE_ARN, type=kind,
                                       loggingConfiguration=logging(level, group, include_data))["stateMachineArn"]
    if kind == "EXPRESS":
        execution = sfn.start_sync_execution(stateMachineArn=machine, input='{"n": 1}')["executionArn"]
    else:
        execution = sfn.start_execution(stateMachineArn=machine, input='{"n": 1}')["executionArn"]
    found = of(records(logs, group, has(execution, "ExecutionFailed")), execution)
    assert [record["type"] for record in found] == TYPES_LOGGED[level]
    failed = found[-1]
    assert {key: failed[key] for key in ("details", "execution_arn", "redrive_count")} == {
        "details": {"error": "Stopped", "cause": "on purpose"}, "execution_arn": execution, "redrive_count": "0"}
    assert int(failed["id"]) == int(failed["previous_event_id"]) + 1 and failed["event_timestamp"].isdigit()
    if level == "ALL":
        assert found[0]["id"] == "1" and found[0]["previous_event_id"] == "0"
        assert ("input" in found[0]["details"]) is include_data
        assert ("output" in found[2]["details"]) is include_data


def test_nothing_is_logged_at_off(logging_server, logs):
    sfn = logging_server.client()
    group = log_group(logs)

    def machine(configuration: dict, kind: str = "STANDARD") -> str:
        return sfn.create_state_machine(name=f"m-{uuid.uuid4().hex[:8]}", definition=json.dumps(FAILING),
                                        roleArn=ROLE_ARN, type=kind, loggingConfiguration=configuration)[
            "stateMachineArn"]

    quiet = machine({"level": "OFF"})
    turned_off = machine(logging("ALL", group), "EXPRESS")
    sfn.update_state_machine(stateMachineArn=turned_off, loggingConfiguration={"level": "OFF"})
    silent = [sfn.start_execution(stateMachineArn=quiet)["executionArn"],
              sfn.start_sync_execution(stateMachineArn=turned_off)["executionArn"]]
    marker = sfn.start_execution(stateMachineArn=machine(logging("FATAL", group)))["executionArn"]
    found = records(logs, group, has(marker, "ExecutionFailed"))  # delivered in order: the others came before
    assert [r for r in found if r["execution_arn"] in silent] == []


def test_logging_configurations_are_checked_as_aws_checks_them(logging_server, logs):
    sfn = logging_server.client()
    group = log_group(logs)

    def refused(configuration: dict) -> str:
        with pytest.raises(ClientError) as caught:
            sfn.create_state_machine(name=f"bad-{uuid.uuid4().hex[:8]}", definition=json.dumps(FAILING),
                                     roleArn=ROLE_ARN, loggingConfiguration=configuration)
        assert caught.value.response["Error"]["Code"] == "InvalidLoggingConfiguration"
        return caught.value.response["Error"]["Message"]

    missing = "arn:aws:logs:us-east-1:123456789012:log-group:/no/such/group:*"
    assert refused({"level": "ALL"}) == "Invalid Logging Configuration: Must specify exactly one Log Destination."
    assert refused(logging("ERROR", missing)) == "Invalid Logging Configuration: Log Destination not found."
    assert refused(logging("ERROR", group[:-2])).startswith("Invalid Logging Configuration: Invalid log group ARN")
    twice = logging("ALL", group)
    twice["destinations"] *= 2
    assert refused(twice) == "Invalid Logging Configuration: Must specify exactly one Log Destination."
    kept = logging("ERROR", group, include_data=True)
    machine = sfn.create_state_machine(name=f"ok-{uuid.uuid4().hex[:8]}", definition=json.dumps(FAILING),
                                       roleArn=ROLE_ARN, loggingConfiguration=kept)["stateMachineArn"]
    assert sfn.describe_state_machine(stateMachineArn=machine)["loggingConfiguration"] == kept
    with pytest.raises(ClientError) as caught:
        sfn.update_state_machine(stateMachineArn=machine, loggingConfiguration=logging("ALL", missing))
    assert caught.value.response["Error"]["Message"] == "Invalid Logging Configuration: Log Destination not found."


def test_a_killed_engine_reruns_async_express_executions_but_not_sync_ones(tmp_path, moto, logs):
    """kill -9 with two express executions waiting in memory: the asynchronous one (its caller had its 200) starts
    again on the restarted server and finishes, so its log shows two starts; the synchronous one is not run again."""
    server = serve(tmp_path / "data", moto, "--clock", "virtual").start()
    try:
        sfn = server.client()
        group = log_group(logs)
        machine = sfn.create_state_machine(name="naps", definition=json.dumps(SLOW), roleArn=ROLE_ARN,
                                           type="EXPRESS", loggingConfiguration=logging("ALL", group))[
            "stateMachineArn"]
        again = sfn.start_execution(stateMachineArn=machine, name="again")["executionArn"]
        waiting = threading.Thread(target=_start_sync_until_killed, args=(server, machine))
        waiting.start()
        found = records(logs, group, lambda found: sum(r["type"] == "WaitStateEntered" for r in found) >= 2)
        once = next(r["execution_arn"] for r in found if ":naps:once:" in r["execution_arn"])
        server.kill()
        waiting.join()
        server.start()
        server.advance("61s")
        found = records(logs, group, has(again, "ExecutionSucceeded"))
        assert [r["type"] for r in of(found, again)] == [
            "ExecutionStarted", "WaitStateEntered", "ExecutionStarted", "WaitStateEntered", "WaitStateExited",
            "ExecutionSucceeded"]
        assert [r["type"] for r in of(found, once)] == ["ExecutionStarted", "WaitStateEntered"]
    finally:
        server.stop()


def _start_sync_until_killed(server: ServerProcess, machine: str) -> None:
    with pytest.raises(Exception):  # noqa: B017 - the connection drops with the server, whatever botocore makes of it
        server.client(read_timeout=120).start_sync_execution(stateMachineArn=machine, name="once")


def test_a_record_carries_the_redrive_count_and_truncates_a_large_input_as_aws_does():
    from statewright.integrations.execution_logs import DATA_MAX, record

    quoted = '"' * (DATA_MAX // 2 + 10)  # each quote is escaped: twice its size in the record
    event = {"id": 9, "type": "ExecutionRedriven", "previousEventId": 8, "timestamp": 1,
             "executionStartedEventDetails": {"input": quoted, "inputDetails": {"truncated": False}}}
    logged = record("arn:aws:states:us-east-1:123456789012:execution:m:e", 2, event, include_data=True)
    assert logged["redrive_count"] == "2"
    details = logged["details"]
    assert details["inputDetails"] == {"truncated": True}
    assert len(json.dumps(details["input"])) <= DATA_MAX < len(json.dumps(quoted))
