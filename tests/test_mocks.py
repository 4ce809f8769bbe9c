"""Mocked service integrations in Step Functions Local's format: `serve --mock-config FILE`, executions started on
`ARN#TestCase`. Real server processes, boto3: mocked Lambda and SQS states, attempt ranges under Retry, mocks for
some states and a real activity for the rest, activities and .waitForTaskToken mocked, JSONata states, and the
errors a user meets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from botocore.exceptions import ClientError

from server import ROLE_ARN, ServerProcess, history, wait_closed
from statewright.decider.mocks import MockConfig

pytestmark = pytest.mark.slow  # real server processes: not in the fast tier

LAMBDA = "arn:aws:states:::lambda:invoke"
SQS = "arn:aws:states:::sqs:sendMessage"
UNLISTED = "arn:aws:states:::bedrock:invokeModelStream"  # no optimized integration AWS lists
HELLO = {"StatusCode": 200, "Payload": {"body": "Hello from Lambda!"}}
CONFIG = {
    "StateMachines": {
        "orders": {"TestCases": {
            "HappyPath": {"LambdaState": "LambdaOk", "SQSState": "SqsOk"},
            "RetryPath": {"LambdaState": "LambdaRetry", "SQSState": "SqsOk"},
            "HybridPath": {"LambdaState": "LambdaOk"},
            "Broken": {"LambdaState": "LambdaBroken"},
        }},
        "callbacks": {"TestCases": {"Mocked": {"Approve": "Approved", "Work": "Worked"},
                                    "Refused": {"Approve": "Refused", "Work": "Worked"}}},
        "nested": {"TestCases": {"Mocked": {"Child": "ChildDone"}}},
        "typos": {"TestCases": {"Typo": {"Chrage": "LambdaOk", "Ship": "SqsOk"}, "NotATask": {"Wait": "LambdaOk"},
                                "Nested": {"Inner": "LambdaOk"}}},
        "jsonata": {"TestCases": {"Mocked": {"Call": "LambdaOk"}}},
        "legacy": {"TestCases": {"Mocked": {"Function": "LambdaRetry"}}},
    },
    "MockedResponses": {
        "LambdaOk": {"0": {"Return": HELLO}},
        "SqsOk": {"0": {"Return": {"MessageId": "m-1", "MD5OfMessageBody": "abc"}}},
        "LambdaRetry": {
            "0": {"Throw": {"Error": "Lambda.ResourceNotReadyException", "Cause": "Lambda resource is not ready."}},
            "1-2": {"Throw": {"Error": "Lambda.TimeoutException", "Cause": "Lambda timed out."}},
            "3": {"Return": HELLO},
        },
        "LambdaBroken": {"0": {"Throw": {"Error": "Lambda.Unknown", "Cause": "it broke"}}},
        "Approved": {"0": {"Return": {"approved": True}}},
        "Worked": {"0": {"Return": {"worked": 1}}},
        "Refused": {"0": {"Throw": {"Error": "Approval.Refused", "Cause": "no"}}},
        "ChildDone": {"0": {"Return": {"Status": "SUCCEEDED", "Output": {"child": "done"}}}},
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mocks")
    config = directory / "MockConfigFile.json"
    config.write_text(json.dumps(CONFIG))
    server = ServerProcess(directory / "data", extra_args=("--mock-config", str(config), "--wait-scale", "0"))
    yield server.start()
    server.stop()


def orders(sfn, activity: str | None = None) -> str:
    """Lambda, then SQS (or, with ``activity``, a real activity in SQS's place)."""
    second = ({"Type": "Task", "Resource": activity, "End": True} if activity else
              {"Type": "Task", "Resource": SQS, "Parameters": {"QueueUrl": "q", "MessageBody.$": "$"},
               "End": True})
    definition = {"StartAt": "LambdaState", "States": {
        "LambdaState": {"Type": "Task", "Resource": LAMBDA, "Parameters": {"FunctionName": "f", "Payload.$": "$"},
                        "Retry": [{"ErrorEquals": ["Lambda.ResourceNotReadyException", "Lambda.TimeoutException"],
                                   "IntervalSeconds": 60, "MaxAttempts": 3}],
                        "ResultSelector": {"body.$": "$.Payload.body"}, "Next": "SQSState"},
        "SQSState": second}}
    return create(sfn, "orders", definition)


def create(sfn, name: str, definition: dict) -> str:
    try:
        return sfn.create_state_machine(name=name, definition=json.dumps(definition),
                                        roleArn=ROLE_ARN)["stateMachineArn"]
    except ClientError as exc:  # the module's server keeps its machines: update to this test's definition
        if exc.response["Error"]["Code"] != "StateMachineAlreadyExists":
            raise
        arn = exc.response["Error"]["Message"].split("'")[1]
        sfn.update_state_machine(stateMachineArn=arn, definition=json.dumps(definition))
        return arn


def run(sfn, machine: str, case: str, data: dict | None = None) -> dict:
    started = sfn.start_execution(stateMachineArn=f"{machine}#{case}", name=uuid.uuid4().hex,
                                  input=json.dumps(data or {"order": 7}))
    return wait_closed(sfn, started["executionArn"])


def test_a_happy_path_answers_every_task_from_its_mock_as_the_real_ones_would_be_recorded(server):
    sfn = server.client()
    described = run(sfn, orders(sfn), "HappyPath")
    assert described["status"] == "SUCCEEDED"
    assert described["stateMachineArn"].endswith(":stateMachine:orders")  # the test case is not part of it
    assert json.loads(described["output"]) == {"MessageId": "m-1", "MD5OfMessageBody": "abc"}
    events = history(sfn, described["executionArn"])
    scheduled = [e["taskScheduledEventDetails"] for e in events if e["type"] == "TaskScheduled"]
    assert [(s["resourceType"], s["resource"]) for s in scheduled] == [("lambda", "invoke"), ("sqs", "sendMessage")]
    succeeded = [e["taskSucceededEventDetails"] for e in events if e["type"] == "TaskSucceeded"]
    assert json.loads(succeeded[0]["output"]) == HELLO
    assert [e["type"] for e in events].count("TaskStarted") == 2


def test_attempt_ranges_answer_each_retry_in_turn(server):
    sfn = server.client()
    described = run(sfn, orders(sfn), "RetryPath")
    assert described["status"] == "SUCCEEDED"
    failed = [e["taskFailedEventDetails"]["error"] for e in history(sfn, described["executionArn"])
              if e["type"] == "TaskFailed"]
    assert failed == ["Lambda.ResourceNotReadyException", "Lambda.TimeoutException", "Lambda.TimeoutException"]


def test_a_mocked_error_is_the_tasks_error_for_retry_and_catch(server):
    sfn = server.client()
    described = run(sfn, orders(sfn), "Broken")
    assert (described["status"], described["error"], described["cause"]) == ("FAILED", "Lambda.Unknown", "it broke")


def test_states_the_test_case_leaves_out_call_their_real_resource(server):
    sfn = server.client(read_timeout=70)
    activity = sfn.create_activity(name=f"ship-{uuid.uuid4().hex[:8]}")["activityArn"]
    machine = orders(sfn, activity)
    started = sfn.start_execution(stateMachineArn=f"{machine}#HybridPath", input='{"order": 8}')
    task = sfn.get_activity_task(activityArn=activity, workerName="real")  # the mocked Lambda came first
    assert json.loads(task["input"]) == {"body": "Hello from Lambda!"}
    sfn.send_task_success(taskToken=task["taskToken"], output='{"shipped": true}')
    described = wait_closed(sfn, started["executionArn"])
    assert (described["status"], json.loads(described["output"])) == ("SUCCEEDED", {"shipped": True})


def test_a_mocked_activity_and_a_mocked_callback_answer_without_a_worker(server):
    sfn = server.client()
    activity = sfn.create_activity(name=f"work-{uuid.uuid4().hex[:8]}")["activityArn"]
    machine = create(sfn, "callbacks", {"StartAt": "Approve", "States": {
        "Approve": {"Type": "Task", "Resource": f"{LAMBDA}.waitForTaskToken",
                    "Parameters": {"FunctionName": "ask", "Payload": {"token.$": "$$.Task.Token"}},
                    "ResultPath": "$.approval", "Next": "Work"},
        "Work": {"Type": "Task", "Resource": activity, "ResultPath": "$.work", "End": True}}})
    described = run(sfn, machine, "Mocked")
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"order": 7, "approval": {"approved": True}, "work": {"worked": 1}}
    events = history(sfn, described["executionArn"])
    assert [e["type"] for e in events if e["type"].startswith(("Task", "Activity"))] == [
        "TaskStateEntered", "TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskSucceeded", "TaskStateExited",
        "TaskStateEntered", "ActivityScheduled", "ActivityStarted", "ActivitySucceeded", "TaskStateExited"]
    submitted = next(e for e in events if e["type"] == "TaskSubmitted")["taskSubmittedEventDetails"]
    assert (submitted["resource"], submitted["output"]) == ("invoke.waitForTaskToken", "{}")  # the call's answer
    # is not in the mock: none is made up


def test_a_mocked_callback_failure_comes_after_the_submitted_call_as_a_send_task_failure_does(server):
    sfn = server.client()
    activity = sfn.create_activity(name=f"work-{uuid.uuid4().hex[:8]}")["activityArn"]
    machine = create(sfn, "callbacks", {"StartAt": "Approve", "States": {
        "Approve": {"Type": "Task", "Resource": f"{LAMBDA}.waitForTaskToken",
                    "Parameters": {"FunctionName": "ask", "Payload": {"token.$": "$$.Task.Token"}},
                    "Catch": [{"ErrorEquals": ["Approval.Refused"], "ResultPath": "$.refusal", "Next": "Work"}],
                    "End": True},
        "Work": {"Type": "Task", "Resource": activity, "ResultPath": "$.work", "End": True}}})
    described = run(sfn, machine, "Refused")
    assert json.loads(described["output"])["refusal"] == {"Error": "Approval.Refused", "Cause": "no"}
    types = [e["type"] for e in history(sfn, described["executionArn"])]
    assert types[types.index("TaskScheduled"):types.index("TaskStateExited")] == [
        "TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskFailed"]


def test_a_mocked_sync_task_is_submitted_then_succeeds(server):
    sfn = server.client()
    machine = create(sfn, "nested", {"StartAt": "Child", "States": {"Child": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2",
        "Parameters": {"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:child"},
        "OutputPath": "$.Output", "End": True}}})
    described = run(sfn, machine, "Mocked")
    assert (described["status"], json.loads(described["output"])) == ("SUCCEEDED", {"child": "done"})
    types = [e["type"] for e in history(sfn, described["executionArn"])]
    assert types[types.index("TaskScheduled"):types.index("TaskStateExited")] == [
        "TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskSucceeded"]


def test_jsonata_states_read_the_mocked_result(server):
    sfn = server.client()
    machine = create(sfn, "jsonata", {"QueryLanguage": "JSONata", "StartAt": "Call", "States": {
        "Call": {"Type": "Task", "Resource": LAMBDA,
                 "Arguments": {"FunctionName": "f", "Payload": "{% $states.input %}"},
                 "Output": "{% {'said': $states.result.Payload.body} %}", "End": True}}})
    described = run(sfn, machine, "Mocked")
    assert json.loads(described["output"]) == {"said": "Hello from Lambda!"}


def test_a_lambda_function_arn_is_recorded_with_lambda_function_events(server):
    sfn = server.client()
    function = "arn:aws:lambda:us-east-1:123456789012:function:charge"
    machine = create(sfn, "legacy", {"StartAt": "Function", "States": {"Function": {
        "Type": "Task", "Resource": function, "End": True,
        "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 3}]}}})
    described = run(sfn, machine, "Mocked")
    assert described["status"] == "SUCCEEDED"
    events = history(sfn, described["executionArn"])
    attempts = {"TaskScheduled", "TaskStarted", "TaskSucceeded", "TaskFailed"}
    types = [e["type"] for e in events if e["type"].startswith("Lambda") or e["type"] in attempts]
    assert types == ["LambdaFunctionScheduled", "LambdaFunctionStarted", "LambdaFunctionFailed"] * 3 + [
        "LambdaFunctionScheduled", "LambdaFunctionStarted", "LambdaFunctionSucceeded"]
    scheduled = next(e for e in events if e["type"] == "LambdaFunctionScheduled")["lambdaFunctionScheduledEventDetails"]
    assert scheduled["resource"] == function


def test_a_resource_aws_does_not_list_is_refused_with_a_mock_configuration_too(server):
    sfn = server.client()
    with pytest.raises(ClientError) as refused:
        create(sfn, "unlisted", {"StartAt": "M", "States": {"M": {"Type": "Task", "Resource": UNLISTED, "End": True}}})
    assert refused.value.response["Error"]["Code"] == "InvalidDefinition"
    assert f"The resource provided {UNLISTED} is not recognized" in refused.value.response["Error"]["Message"]


def test_a_start_with_the_same_name_on_another_test_case_is_another_execution(server):
    sfn = server.client()
    activity = sfn.create_activity(name=f"held-{uuid.uuid4().hex[:8]}")["activityArn"]
    machine = orders(sfn, activity)  # HybridPath waits on the real activity: the execution stays open
    name = uuid.uuid4().hex
    first = sfn.start_execution(stateMachineArn=f"{machine}#HybridPath", name=name, input="{}")
    again = sfn.start_execution(stateMachineArn=f"{machine}#HybridPath", name=name, input="{}")  # idempotent
    assert again["executionArn"] == first["executionArn"]
    with pytest.raises(ClientError) as refused:
        sfn.start_execution(stateMachineArn=f"{machine}#Broken", name=name, input="{}")
    assert refused.value.response["Error"]["Code"] == "ExecutionAlreadyExists"
    sfn.stop_execution(executionArn=first["executionArn"])


def test_a_test_case_that_does_not_exist_is_refused(server):
    sfn = server.client()
    machine = orders(sfn)
    with pytest.raises(ClientError) as refused:
        sfn.start_execution(stateMachineArn=f"{machine}#NoSuchCase")
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    message = refused.value.response["Error"]["Message"]
    assert "no test case 'NoSuchCase'" in message and "HappyPath, HybridPath, RetryPath" in message
    unlisted = create(sfn, "unlisted", {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    with pytest.raises(ClientError) as refused:
        sfn.start_execution(stateMachineArn=f"{unlisted}#HappyPath")
    assert "no test cases for the state machine 'unlisted'" in refused.value.response["Error"]["Message"]


@pytest.mark.parametrize(("case", "named"), [("Typo", "'Chrage'"), ("NotATask", "'Wait'"), ("Nested", "'Inner'")])
def test_a_test_case_naming_a_state_that_is_not_a_task_of_the_machine_is_refused(server, case, named):
    sfn = server.client()
    machine = create(sfn, "typos", {"StartAt": "Wait", "States": {
        "Wait": {"Type": "Pass", "Next": "Fan"},
        "Fan": {"Type": "Parallel", "Next": "Ship", "Branches": [{"StartAt": "Charge", "States": {
            "Charge": {"Type": "Task", "Resource": LAMBDA, "Parameters": {"FunctionName": "f"}, "End": True}}}]},
        "Ship": {"Type": "Task", "Resource": SQS, "Parameters": {"QueueUrl": "q", "MessageBody": "m"}, "End": True}}})
    with pytest.raises(ClientError) as refused:
        sfn.start_execution(stateMachineArn=f"{machine}#{case}")
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert refused.value.response["Error"]["Message"] == (
        f"The test case '{case}' of the mock configuration names {named}, not a Task state of the state machine "
        "'typos'; its Task states: Charge, Ship")


def test_without_a_mock_config_test_cases_are_refused(tmp_path):
    plain = ServerProcess(tmp_path / "plain").start()
    try:
        sfn = plain.client()
        machine = sfn.create_state_machine(name="p", roleArn=ROLE_ARN, definition=json.dumps(
            {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))["stateMachineArn"]
        with pytest.raises(ClientError) as refused:
            sfn.start_execution(stateMachineArn=f"{machine}#HappyPath")
        assert "--mock-config" in refused.value.response["Error"]["Message"]
    finally:
        plain.stop()


@pytest.mark.parametrize(("config", "says"), [
    ("not json", "is not JSON"),
    ({"StateMachines": {"m": {"TestCases": {"c": {"S": "Missing"}}}}, "MockedResponses": {}},
     "StateMachines.m.TestCases.c.S names the response 'Missing'"),
    ({"MockedResponses": {"R": {"first": {"Return": 1}}}}, "MockedResponses.R has the key 'first'"),
    ({"MockedResponses": {"R": {"0": {"Return": 1, "Throw": {"Error": "E"}}}}}, "exactly one of Return or Throw"),
    ({"MockedResponses": {"R": {"0-2": {"Return": 1}, "2": {"Return": 2}}}}, "answers attempt 2 twice"),
    ({"MockedResponses": {"R": {"0": {"Return": 1}, "2": {"Return": 2}}}}, "does not answer attempt 1"),
    ({"MockedResponses": {"R": {"1": {"Return": 1}}}}, "does not answer attempt 0"),
])
def test_a_mock_config_that_cannot_be_used_stops_the_server_saying_where(tmp_path, config, says):
    path = tmp_path / "MockConfigFile.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    started = subprocess.run([sys.executable, "-m", "statewright", "serve", "--data-dir", str(tmp_path / "d"),
                              "--mock-config", str(path), "--port", "0"], capture_output=True, text=True, timeout=60)
    assert started.returncode == 1 and says in started.stderr, started.stderr


def test_the_mock_config_is_read_from_sfn_mock_config_as_step_functions_local_reads_it(tmp_path):
    path = tmp_path / "MockConfigFile.json"
    path.write_text(json.dumps({"MockedResponses": {"R": {}}}))
    started = subprocess.run([sys.executable, "-m", "statewright", "serve", "--data-dir", str(tmp_path / "d"),
                              "--port", "0"], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "SFN_MOCK_CONFIG": str(path)})
    assert started.returncode == 1 and "MockedResponses.R defines no response" in started.stderr


def test_each_attempt_gets_the_response_whose_range_covers_it_and_the_last_one_after():
    mocks = MockConfig.parse(CONFIG)
    answers = [mocks.response("orders", "RetryPath", "LambdaState", attempt) for attempt in range(6)]
    assert [next(iter(answer)) for answer in answers] == ["Throw", "Throw", "Throw", "Return", "Return", "Return"]
    assert answers[1]["Throw"]["Error"] == "Lambda.TimeoutException"
    assert mocks.response("orders", "HybridPath", "SQSState", 0) is None  # left to its real resource
    assert mocks.response("other", "HappyPath", "LambdaState", 0) is None
