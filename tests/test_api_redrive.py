"""RedriveExecution through boto3 against a real server (on the virtual clock, so 14 days can pass): where a redrive
picks up, what it keeps, DescribeExecution's and ListExecutions' redrive fields, clientToken, and every refusal."""

from __future__ import annotations

import json
import uuid

import pytest

from server import ROLE_ARN, ServerProcess, history, wait_closed

pytestmark = pytest.mark.slow  # a real server process: not in the fast tier


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """This module's own server, on the virtual clock (conftest's ``sfn`` is a client of it)."""
    process = ServerProcess(tmp_path_factory.mktemp("redrive") / "data", extra_args=("--clock", "virtual")).start()
    yield process
    process.stop()


@pytest.fixture
def activity(sfn):
    return sfn.create_activity(name=f"a-{uuid.uuid4().hex[:8]}")["activityArn"]


def machine(sfn, definition: dict) -> str:
    return sfn.create_state_machine(name=f"m-{uuid.uuid4().hex[:10]}", definition=json.dumps(definition),
                                    roleArn=ROLE_ARN)["stateMachineArn"]


def task(activity: str, **more) -> dict:
    return {"Type": "Task", "Resource": activity, **more}


def answer(sfn, activity: str, output: dict | None = None, error: str | None = None) -> dict:
    """Take the next task of the activity and answer it: success with ``output``, or failure with ``error``."""
    taken = sfn.get_activity_task(activityArn=activity)
    if error is None:
        sfn.send_task_success(taskToken=taken["taskToken"], output=json.dumps(output or {}))
    else:
        sfn.send_task_failure(taskToken=taken["taskToken"], error=error, cause="it broke")
    return json.loads(taken["input"])


def entered(events: list[dict]) -> list[str]:
    return [event["stateEnteredEventDetails"]["name"] for event in events if event["type"].endswith("StateEntered")]


def test_a_failed_task_is_redriven_from_the_state_that_failed_with_every_earlier_result_kept(sfn, activity):
    arn = machine(sfn, {"StartAt": "Prepare", "States": {
        "Prepare": {"Type": "Pass", "Result": "ready", "ResultPath": "$.prepared", "Next": "Charge"},
        "Charge": task(activity, ResultPath="$.charged", Next="Ship",
                       Retry=[{"ErrorEquals": ["Flaky"], "MaxAttempts": 1, "IntervalSeconds": 1}]),
        "Ship": {"Type": "Pass", "End": True}}})
    execution = sfn.start_execution(stateMachineArn=arn, input='{"order": 7}')["executionArn"]
    answer(sfn, activity, error="Flaky")
    answer(sfn, activity, error="Flaky")  # the one retry spent
    failed = wait_closed(sfn, execution)
    assert (failed["status"], failed["redriveCount"], failed["redriveStatus"]) == ("FAILED", 0, "REDRIVABLE")
    assert "redriveDate" not in failed and "redriveStatusReason" not in failed
    before = history(sfn, execution)

    redriven = sfn.redrive_execution(executionArn=execution)
    described = sfn.describe_execution(executionArn=execution)
    assert described["status"] == "RUNNING" and described["redriveCount"] == 1
    assert described["redriveDate"] == redriven["redriveDate"]
    assert (described["redriveStatus"], described["redriveStatusReason"]) == (
        "NOT_REDRIVABLE", "Execution is RUNNING and cannot be redriven")
    assert "stopDate" not in described and "error" not in described
    assert answer(sfn, activity, error="Flaky") == {"order": 7, "prepared": "ready"}  # the retry count is fresh
    answer(sfn, activity, {"id": 1})
    done = wait_closed(sfn, execution)
    assert done["status"] == "SUCCEEDED"
    assert json.loads(done["output"]) == {"order": 7, "prepared": "ready", "charged": {"id": 1}}

    events = history(sfn, execution)
    assert events[:len(before)] == before
    redrive = events[len(before)]
    assert (redrive["type"], redrive["id"], redrive["previousEventId"]) == (
        "ExecutionRedriven", len(before) + 1, len(before))
    assert redrive["executionRedrivenEventDetails"] == {"redriveCount": 1}
    assert entered(events[len(before):]) == ["Charge", "Ship"]  # Prepare, which succeeded, does not run again


def test_parallel_and_map_rerun_only_the_branches_and_iterations_that_did_not_succeed(sfn, activity):
    arn = machine(sfn, {"StartAt": "Both", "States": {"Both": {"Type": "Parallel", "End": True, "Branches": [
        {"StartAt": "Each", "States": {"Each": {"Type": "Map", "ItemsPath": "$.items", "End": True,
                                                "ItemProcessor": {"StartAt": "Work", "States": {
                                                    "Work": task(activity, End=True)}}}}},
        {"StartAt": "Other", "States": {"Other": {"Type": "Pass", "Result": "other", "End": True}}}]}}})
    execution = sfn.start_execution(stateMachineArn=arn, input='{"items": [0, 1, 2]}')["executionArn"]
    taken = [sfn.get_activity_task(activityArn=activity) for _ in range(3)]
    for one in (taken[0], taken[2]):
        sfn.send_task_success(taskToken=one["taskToken"], output='{"done": true}')
    sfn.send_task_failure(taskToken=taken[1]["taskToken"], error="Broken")
    failed_index = json.loads(taken[1]["input"])
    assert wait_closed(sfn, execution)["status"] == "FAILED"
    before = history(sfn, execution)

    sfn.redrive_execution(executionArn=execution)
    assert answer(sfn, activity, {"done": "again"}) == failed_index  # only the iteration that failed runs again
    done = wait_closed(sfn, execution)
    assert done["status"] == "SUCCEEDED"
    expected = [{"done": True}] * 3
    expected[failed_index] = {"done": "again"}
    assert json.loads(done["output"]) == [expected, "other"]
    after = history(sfn, execution)[len(before):]
    assert entered(after) == ["Both", "Each", "Work"]
    assert [e["mapIterationStartedEventDetails"]["index"] for e in after if e["type"] == "MapIterationStarted"] == [
        failed_index]
    assert next(e for e in after if e["type"] == "MapStateStarted")["mapStateStartedEventDetails"] == {"length": 3}


def test_an_aborted_execution_resumes_the_state_it_was_stopped_in(sfn, activity):
    arn = machine(sfn, {"StartAt": "First", "States": {"First": task(activity, Next="Then"),
                                                       "Then": task(activity, End=True)}})
    execution = sfn.start_execution(stateMachineArn=arn, input="{}")["executionArn"]
    answer(sfn, activity, {"step": 1})
    sfn.get_activity_task(activityArn=activity)  # Then's first attempt is in a worker's hands when it stops
    sfn.stop_execution(executionArn=execution, error="Operator", cause="paused")
    assert sfn.describe_execution(executionArn=execution)["status"] == "ABORTED"
    sfn.redrive_execution(executionArn=execution)
    assert answer(sfn, activity, {"step": 2}) == {"step": 1}
    assert wait_closed(sfn, execution)["status"] == "SUCCEEDED"
    assert entered(history(sfn, execution)) == ["First", "Then", "Then"]


def test_a_timed_out_execution_gets_its_whole_timeout_again_and_a_wait_its_whole_wait(sfn, server):
    arn = machine(sfn, {"TimeoutSeconds": 3600, "StartAt": "Hold", "States": {
        "Hold": {"Type": "Wait", "Seconds": 7200, "InputPath": "$.inner", "Next": "Done"},
        "Done": {"Type": "Pass", "End": True}}})
    execution = sfn.start_execution(stateMachineArn=arn, input='{"inner": {"x": 1}}')["executionArn"]
    server.advance("1h")
    assert wait_closed(sfn, execution)["status"] == "TIMED_OUT"
    sfn.redrive_execution(executionArn=execution)
    server.advance("59m")
    assert sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"
    server.advance("1m")
    assert wait_closed(sfn, execution)["status"] == "TIMED_OUT"  # the timeout restarted at the redrive
    events = history(sfn, execution)
    reentered = [e for e in events if e["type"] == "WaitStateEntered"][-1]
    assert json.loads(reentered["stateEnteredEventDetails"]["input"]) == {"inner": {"x": 1}}  # raw, as at first


def test_client_token_answers_the_same_redrive_again_and_a_new_one_is_refused_while_running(sfn, activity):
    arn = machine(sfn, {"StartAt": "T", "States": {"T": task(activity, End=True)}})
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    answer(sfn, activity, error="Broken")
    wait_closed(sfn, execution)
    first = sfn.redrive_execution(executionArn=execution, clientToken="once")
    again = sfn.redrive_execution(executionArn=execution, clientToken="once")
    assert again["redriveDate"] == first["redriveDate"]
    with pytest.raises(sfn.exceptions.ExecutionNotRedrivable) as raised:
        sfn.redrive_execution(executionArn=execution, clientToken="twice")
    assert raised.value.response["Error"]["Message"] == "Execution is RUNNING and cannot be redriven"
    assert sfn.describe_execution(executionArn=execution)["redriveCount"] == 1
    answer(sfn, activity, error="Broken")
    wait_closed(sfn, execution)
    sfn.redrive_execution(executionArn=execution, clientToken="twice")
    events = history(sfn, execution)
    assert [e["executionRedrivenEventDetails"] for e in events if e["type"] == "ExecutionRedriven"] == [
        {"redriveCount": 1}, {"redriveCount": 2}]


def test_list_executions_shows_redrives_and_filters_by_them(sfn, activity):
    arn = machine(sfn, {"StartAt": "T", "States": {"T": task(activity, End=True)}})
    redriven = sfn.start_execution(stateMachineArn=arn, name="redriven")["executionArn"]
    answer(sfn, activity, error="Broken")
    wait_closed(sfn, redriven)
    sfn.start_execution(stateMachineArn=arn, name="left")
    when = sfn.redrive_execution(executionArn=redriven)["redriveDate"]
    listed = {item["name"]: item for item in sfn.list_executions(stateMachineArn=arn)["executions"]}
    assert (listed["redriven"]["redriveCount"], listed["redriven"]["redriveDate"]) == (1, when)
    assert listed["left"]["redriveCount"] == 0 and "redriveDate" not in listed["left"]
    assert [e["name"] for e in sfn.list_executions(stateMachineArn=arn, redriveFilter="REDRIVEN")[
        "executions"]] == ["redriven"]
    assert [e["name"] for e in sfn.list_executions(stateMachineArn=arn, redriveFilter="NOT_REDRIVEN")[
        "executions"]] == ["left"]
    # A redrive is one commit: no execution is ever seen between the request and its new attempt.
    assert sfn.list_executions(stateMachineArn=arn, statusFilter="PENDING_REDRIVE")["executions"] == []


def test_succeeded_and_running_executions_are_not_redrivable_and_say_why(sfn):
    arn = machine(sfn, {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 60, "End": True}}})
    running = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    described = sfn.describe_execution(executionArn=running)
    assert (described["redriveStatus"], described["redriveStatusReason"]) == (
        "NOT_REDRIVABLE", "Execution is RUNNING and cannot be redriven")
    with pytest.raises(sfn.exceptions.ExecutionNotRedrivable, match="Execution is RUNNING and cannot be redriven"):
        sfn.redrive_execution(executionArn=running)
    passing = machine(sfn, {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    succeeded = sfn.start_execution(stateMachineArn=passing)["executionArn"]
    assert wait_closed(sfn, succeeded)["redriveStatusReason"] == "Execution is SUCCEEDED and cannot be redriven"
    with pytest.raises(sfn.exceptions.ExecutionNotRedrivable, match="Execution is SUCCEEDED and cannot be redriven"):
        sfn.redrive_execution(executionArn=succeeded)


def test_an_execution_closed_more_than_14_days_ago_is_not_redrivable(sfn, server):
    arn = machine(sfn, {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "E"}}})
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    wait_closed(sfn, execution)
    server.advance("13d")
    assert sfn.describe_execution(executionArn=execution)["redriveStatus"] == "REDRIVABLE"
    server.advance("1d")  # and the milliseconds the clock ran on since the close
    described = sfn.describe_execution(executionArn=execution)
    assert (described["redriveStatus"], described["redriveStatusReason"]) == (
        "NOT_REDRIVABLE", "Execution redrivable period exceeded")
    with pytest.raises(sfn.exceptions.ExecutionNotRedrivable, match="Execution redrivable period exceeded"):
        sfn.redrive_execution(executionArn=execution)


def test_an_execution_of_a_deleted_state_machine_is_not_redrivable(sfn):
    arn = machine(sfn, {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "E"}}})
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    wait_closed(sfn, execution)
    sfn.delete_state_machine(stateMachineArn=arn)
    assert sfn.describe_execution(executionArn=execution)["redriveStatusReason"] == (
        "State machine is in DELETING status")
    with pytest.raises(sfn.exceptions.ExecutionNotRedrivable, match="State machine is in DELETING status"):
        sfn.redrive_execution(executionArn=execution)


def test_a_history_of_24999_events_is_not_redrivable(sfn):
    arn = machine(sfn, {"StartAt": "Loop", "States": {"Loop": {"Type": "Map", "ItemsPath": "$.items", "End": True,
                                                               "ItemProcessor": {"StartAt": "P", "States": {
                                                                   "P": {"Type": "Pass", "End": True}}}}}})
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps({"items": list(range(6_300))}))
    described = wait_closed(sfn, execution["executionArn"], deadline_s=120)
    assert described["status"] == "FAILED"  # at the 25,000-event limit
    assert described["redriveStatusReason"] == "Execution history event limit exceeded"
    with pytest.raises(sfn.exceptions.ExecutionNotRedrivable, match="Execution history event limit exceeded"):
        sfn.redrive_execution(executionArn=execution["executionArn"])


def test_unknown_and_malformed_executions(sfn):
    missing = "arn:aws:states:us-east-1:123456789012:execution:nobody:none"
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.redrive_execution(executionArn=missing)
    with pytest.raises(sfn.exceptions.InvalidArn):
        sfn.redrive_execution(executionArn="arn:aws:states:us-east-1:123456789012:stateMachine:nobody")
    with pytest.raises(sfn.exceptions.ClientError, match="ValidationException"):
        sfn.redrive_execution(executionArn=missing, clientToken="x" * 65)


def test_the_context_object_counts_redrives(sfn, activity):
    arn = machine(sfn, {"StartAt": "T", "States": {"T": task(activity, Parameters={
        "count.$": "$$.Execution.RedriveCount", "time.$": "$$.Execution.RedriveTime"}, End=True)}})
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    failed = wait_closed(sfn, execution)  # no RedriveTime before the first redrive: the path finds nothing
    assert (failed["status"], failed["error"]) == ("FAILED", "States.Runtime")
    when = sfn.redrive_execution(executionArn=execution)["redriveDate"]
    given = answer(sfn, activity)
    assert given["count"] == 1 and given["time"].startswith(when.strftime("%Y-%m-%dT%H:%M:%S"))


def test_an_iteration_not_yet_resumed_when_a_resumed_sibling_fails_again_is_kept_for_the_next_redrive(sfn, server):
    """Item a fails until the second redrive; item b was aborted in its Wait when a first failed. The first redrive
    resumes a, which fails at once, before b is added again: b must still be there for the second redrive."""
    arn = machine(sfn, {"StartAt": "M", "States": {"M": {
        "Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 2, "End": True, "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "Which", "States": {
                "Which": {"Type": "Choice", "Default": "Nap",
                          "Choices": [{"Variable": "$", "StringEquals": "a", "Next": "Moment"}]},
                "Moment": {"Type": "Wait", "Seconds": 1, "Next": "Check"},
                # fails (an index below 0) until the second redrive
                "Check": {"Type": "Pass", "Next": "Done", "ResultPath": None, "Parameters": {
                    "v.$": "States.ArrayGetItem(States.Array(1), States.MathAdd($$.Execution.RedriveCount, -2))"}},
                "Nap": {"Type": "Wait", "Seconds": 3, "Next": "Done"},
                "Done": {"Type": "Pass", "End": True}}}}}})
    execution = sfn.start_execution(stateMachineArn=arn, input='{"items": ["a", "b", "c"]}')["executionArn"]
    server.advance("1s")
    assert wait_closed(sfn, execution)["status"] == "FAILED"  # a failed while b waited
    sfn.redrive_execution(executionArn=execution)
    assert wait_closed(sfn, execution)["status"] == "FAILED"  # a failed again at once, b not yet added again
    sfn.redrive_execution(executionArn=execution)
    server.advance("10s")
    done = wait_closed(sfn, execution)
    assert done["status"] == "SUCCEEDED" and json.loads(done["output"]) == ["a", "b", "c"]
