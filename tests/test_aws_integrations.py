"""AWS service integrations end to end: boto3 against a real statewright server whose AWS endpoint is moto's server,
and Lambda functions served by a local web service (serve --functions)."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from aws import ACCOUNT, aws_client, caught, output, rule_to_queue, run, server_env, task
from aws import table as new_table
from server import ROLE_ARN, ServerProcess, history, wait_closed

pytestmark = pytest.mark.slow  # a real server and moto: not in the fast tier


@pytest.fixture
def sfn(aws_server):
    return aws_server.client()


# -- SQS, SNS, EventBridge


def test_sqs_send_message_puts_a_json_body_on_the_queue(sfn, moto):
    sqs = aws_client(moto, "sqs")
    queue = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    result = output(run(sfn, task("arn:aws:states:::sqs:sendMessage",
                                  {"QueueUrl": queue, "MessageBody": {"order.$": "$.order"}}), {"order": 7}))
    assert set(result) >= {"MD5OfMessageBody", "MessageId", "SdkHttpMetadata", "SdkResponseMetadata"}
    assert result["SdkHttpMetadata"]["HttpStatusCode"] == 200
    message = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1)["Messages"][0]
    assert json.loads(message["Body"]) == {"order": 7}
    assert message["MessageId"] == result["MessageId"]


def test_sqs_wait_for_task_token_completes_from_the_message_read_off_the_queue(sfn, moto):
    sqs = aws_client(moto, "sqs")
    queue = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    definition = task("arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                      {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token", "n": 1}})
    arn = sfn.create_state_machine(name=f"cb-{uuid.uuid4().hex[:8]}", definition=json.dumps(definition),
                                   roleArn=ROLE_ARN)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    messages = []
    deadline = time.monotonic() + 20
    while not messages and time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", [])
    body = json.loads(messages[0]["Body"])
    assert sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"
    # The message can be read before SendMessage's answer reaches the engine; a worker that answers at once then
    # finishes the task before its TaskSubmitted, which this test is not about: it answers once that is recorded.
    while "TaskSubmitted" not in [event["type"] for event in history(sfn, execution)]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    sfn.send_task_success(taskToken=body["token"], output=json.dumps({"approved": True}))
    described = wait_closed(sfn, execution)
    assert json.loads(described["output"]) == {"approved": True}
    types = [event["type"] for event in history(sfn, execution)]
    assert types[2:6] == ["TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskSucceeded"]


def test_sns_publish_reaches_an_sqs_subscription(sfn, moto):
    sns, sqs = aws_client(moto, "sns"), aws_client(moto, "sqs")
    topic = sns.create_topic(Name=f"t-{uuid.uuid4().hex[:8]}")["TopicArn"]
    queue = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    result = output(run(sfn, task("arn:aws:states:::sns:publish", {"TopicArn": topic, "Message": {"hi": 1}})))
    assert "MessageId" in result
    message = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=2)["Messages"][0]
    assert json.loads(message["Body"]) == {"hi": 1}


def test_events_put_events_reaches_the_rule_target_queue(sfn, moto):
    sqs = aws_client(moto, "sqs")
    queue = rule_to_queue(moto, {"source": ["statewright.test"]})
    result = output(run(sfn, task("arn:aws:states:::events:putEvents", {"Entries": [
        {"Source": "statewright.test", "DetailType": "Order", "Detail": {"order": 3}}]})))
    assert result["FailedEntryCount"] == 0 and "EventId" in result["Entries"][0]
    assert "SdkHttpMetadata" not in result
    message = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=2)["Messages"][0]
    event = json.loads(message["Body"])
    assert event["detail"] == {"order": 3}
    execution, machine = event["resources"]  # Step Functions adds both to every entry's Resources
    assert ":execution:" in execution
    assert machine == execution.replace(":execution:", ":stateMachine:").rsplit(":", 1)[0]


# -- DynamoDB and S3


def test_dynamodb_put_get_update_delete(sfn, moto):
    dynamodb = aws_client(moto, "dynamodb")
    table = new_table(moto)
    key = {"pk": {"S": "a"}}
    states = {
        "Put": {"Type": "Task", "Resource": "arn:aws:states:::dynamodb:putItem", "ResultPath": None,
                "Parameters": {"TableName": table,
                               "Item": {"pk": {"S": "a"}, "n": {"N.$": "States.Format('{}', $.n)"}}},
                "Next": "Update"},
        "Update": {"Type": "Task", "Resource": "arn:aws:states:::dynamodb:updateItem", "ResultPath": None,
                   "Parameters": {"TableName": table, "Key": key, "UpdateExpression": "SET n = n + :one",
                                  "ExpressionAttributeValues": {":one": {"N": "1"}}}, "Next": "Get"},
        "Get": {"Type": "Task", "Resource": "arn:aws:states:::dynamodb:getItem", "ResultPath": "$.got",
                "Parameters": {"TableName": table, "Key": key}, "Next": "Delete"},
        "Delete": {"Type": "Task", "Resource": "arn:aws:states:::dynamodb:deleteItem", "ResultPath": None,
                   "Parameters": {"TableName": table, "Key": key}, "End": True},
    }
    result = output(run(sfn, {"StartAt": "Put", "States": states}, {"n": 41}))
    assert result["got"]["Item"] == {"pk": {"S": "a"}, "n": {"N": "42"}}
    assert "SdkResponseMetadata" in result["got"]
    assert "Item" not in dynamodb.get_item(TableName=table, Key=key)


def test_dynamodb_missing_table_is_caught_by_its_error_name(sfn):
    definition = task("arn:aws:states:::dynamodb:getItem", {"TableName": "no-such-table", "Key": {"pk": {"S": "x"}}},
                      Catch=[{"ErrorEquals": ["DynamoDB.ResourceNotFoundException"], "Next": "Missing"}])
    definition["States"]["Missing"] = {"Type": "Pass", "End": True}
    result = output(run(sfn, definition))
    assert result["Error"] == "DynamoDB.ResourceNotFoundException"
    assert "(Service: AmazonDynamoDBv2; Status Code: 400; Error Code: ResourceNotFoundException" in result["Cause"]


def test_aws_sdk_s3_put_and_get_object_as_text(sfn, moto):
    s3 = aws_client(moto, "s3")
    bucket = f"b-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    states = {
        "Put": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:s3:putObject", "ResultPath": "$.put",
                "Parameters": {"Bucket": bucket, "Key": "k.json", "Body.$": "$.doc"}, "Next": "Get"},
        "Get": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:s3:getObject", "ResultPath": "$.got",
                "Parameters": {"Bucket": bucket, "Key": "k.json"}, "End": True},
    }
    result = output(run(sfn, {"StartAt": "Put", "States": states}, {"doc": "plain text"}))
    assert "ETag" in result["put"] and "SdkHttpMetadata" not in result["put"]
    assert result["got"]["Body"] == "plain text"
    assert result["got"]["ContentLength"] == len("plain text")
    assert result["got"]["LastModified"].endswith("Z")
    assert s3.get_object(Bucket=bucket, Key="k.json")["Body"].read() == b"plain text"


def test_aws_sdk_errors_are_named_service_dot_exception(sfn):
    result = output(run(sfn, caught("arn:aws:states:::aws-sdk:sqs:getQueueUrl", {"QueueName": "nope"})))
    assert result["Error"] == "Sqs.QueueDoesNotExistException"
    assert "(Service: Sqs, Status Code: 400, Request ID: " in result["Cause"]
    result = output(run(sfn, caught("arn:aws:states:::aws-sdk:s3:getObject", {"Bucket": "nope", "Key": "k"})))
    assert result["Error"] == "S3.NoSuchBucketException"
    # S3's text carries its extended request id too (LocalStack's AWS recordings mask "Extended Request ID: ...")
    assert re.search(r"\(Service: S3, Status Code: 404, Request ID: [^,]+, Extended Request ID: [^)]+\)$",
                     result["Cause"]), result["Cause"]


def test_aws_sdk_takes_pascal_case_for_a_camel_case_api_and_answers_in_pascal_case(sfn, moto):
    table = new_table(moto)
    result = output(run(sfn, task("arn:aws:states:::aws-sdk:dynamodb:describeTable", {"TableName": table})))
    assert result["Table"]["TableName"] == table
    assert result["Table"]["CreationDateTime"].endswith("Z")
    # Batch's API is camelCase (jobQueueName...); Step Functions spells its members in PascalCase both ways.
    result = output(run(sfn, task("arn:aws:states:::aws-sdk:batch:describeJobQueues", {"JobQueues": ["none"]})))
    assert result == {"JobQueues": []}


def test_credentials_role_is_assumed_through_sts(sfn):
    role = f"arn:aws:iam::{ACCOUNT}:role/worker"
    described = run(sfn, task("arn:aws:states:::aws-sdk:sts:getCallerIdentity", {},
                              Credentials={"RoleArn.$": "$.role"}), {"role": role})
    assert output(described)["Arn"].startswith(f"arn:aws:sts::{ACCOUNT}:assumed-role/worker/")
    # The history says which role the call was made as (AWS's recordings: taskCredentials in TaskScheduled)
    (scheduled,) = [event for event in described["events"] if event["type"] == "TaskScheduled"]
    assert scheduled["taskScheduledEventDetails"]["taskCredentials"] == {"roleArn": role}
    unassumed = output(run(sfn, task("arn:aws:states:::aws-sdk:sts:getCallerIdentity", {})))
    assert "assumed-role" not in unassumed["Arn"]


# -- Lambda through --functions


def test_lambda_invoke_answers_with_lambdas_result_shape(sfn, functions):
    result = output(run(sfn, task("arn:aws:states:::lambda:invoke",
                                  {"FunctionName": "greet", "Payload": {"name.$": "$.who"}}), {"who": "ada"}))
    assert result["Payload"] == {"greeting": "hello ada"}
    assert result["StatusCode"] == 200 and result["ExecutedVersion"] == "$LATEST"
    assert result["SdkHttpMetadata"]["HttpStatusCode"] == 200 and "RequestId" in result["SdkResponseMetadata"]


def test_lambda_function_error_is_retried_by_retry(sfn, functions):
    described = run(sfn, task("arn:aws:states:::lambda:invoke", {"FunctionName": "flaky", "Payload": {}},
                              Retry=[{"ErrorEquals": ["FlakyError"], "IntervalSeconds": 1, "MaxAttempts": 2}],
                              OutputPath="$.Payload"))
    assert output(described) == {"ok": 2}
    failed = [event for event in described["events"] if event["type"] == "TaskFailed"]
    assert failed[0]["taskFailedEventDetails"]["error"] == "FlakyError"
    assert json.loads(failed[0]["taskFailedEventDetails"]["cause"])["errorMessage"] == "first call fails"


def test_lambda_reply_without_error_type_is_lambda_unknown(sfn):
    result = output(run(sfn, caught("arn:aws:states:::lambda:invoke", {"FunctionName": "broken", "Payload": {}})))
    assert result["Error"] == "Lambda.Unknown"


def test_a_result_that_is_not_json_is_lambdas_marshal_error_with_lambdas_error_payload(sfn):
    described = run(sfn, task("arn:aws:states:::lambda:invoke", {"FunctionName": "unmarshalable", "Payload": {}}))
    assert described["status"] == "FAILED" and described["error"] == "Runtime.MarshalError"
    cause = json.loads(described["cause"])
    assert cause["errorType"] == "Runtime.MarshalError" and cause["errorMessage"].startswith(
        "Unable to marshal response: ")
    assert set(cause) == {"errorMessage", "errorType", "requestId", "stackTrace"}


def test_legacy_function_arn_resource_returns_the_payload_and_records_lambda_events(sfn):
    described = run(sfn, task(f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:legacy"), {"echo": [1, 2]})
    assert output(described) == {"echo": [1, 2]}
    types = [event["type"] for event in described["events"]]
    assert types[2:5] == ["LambdaFunctionScheduled", "LambdaFunctionStarted", "LambdaFunctionSucceeded"]


@pytest.mark.parametrize(("invocation_type", "status"), [("Event", 202), ("DryRun", 204)])
def test_an_event_or_dry_run_invocation_answers_without_the_functions_result(sfn, invocation_type, status):
    result = output(run(sfn, task("arn:aws:states:::lambda:invoke", {
        "FunctionName": "greet", "InvocationType": invocation_type, "Payload": {"name": "x"}})))
    assert result["StatusCode"] == status and result["Payload"] == ""


def test_aws_sdk_lambda_invoke_gets_the_apis_own_answer(sfn):
    result = output(run(sfn, task("arn:aws:states:::aws-sdk:lambda:invoke",
                                  {"FunctionName": "greet", "Payload": json.dumps({"name": "sdk"})})))
    assert json.loads(result["Payload"]) == {"greeting": "hello sdk"} and result["StatusCode"] == 200
    result = output(run(sfn, task("arn:aws:states:::aws-sdk:lambda:invoke", {"FunctionName": "broken"})))
    assert result["FunctionError"] == "Unhandled"  # data in the API's answer, not a failure of the task


def test_a_function_mapped_by_arn_answers_to_its_name_and_qualifier(sfn):
    result = output(run(sfn, task("arn:aws:states:::lambda:invoke",
                                  {"FunctionName": "legacy", "Qualifier": "7", "Payload": {"a": 1}})))
    assert result["Payload"] == {"a": 1} and result["ExecutedVersion"] == "7"


def test_a_call_that_outlasts_timeout_seconds_times_out_and_frees_its_slot(sfn):
    described = run(sfn, task("arn:aws:states:::lambda:invoke", {"FunctionName": "slow"}, TimeoutSeconds=1))
    assert described["status"] == "FAILED" and described["error"] == "States.Timeout"
    state = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "TimeoutSeconds": 1, "End": True,
             "Parameters": {"FunctionName": "slow"}}
    answer = sfn.test_state(definition=json.dumps(state), roleArn=ROLE_ARN)
    assert answer["status"] == "FAILED" and answer["error"] == "States.Timeout"


def test_credentials_naming_the_role_twice_are_refused(sfn):
    definition = task("arn:aws:states:::aws-sdk:sts:getCallerIdentity", {},
                      Credentials={"RoleArn": f"arn:aws:iam::{ACCOUNT}:role/a", "RoleArn.$": "$.r"})
    with pytest.raises(ClientError) as raised:
        sfn.create_state_machine(name=f"bad-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN,
                                 definition=json.dumps(definition))
    assert "/States/T/Credentials" in raised.value.response["Error"]["Message"]


def test_unmapped_function_goes_to_the_lambda_endpoint(sfn):
    result = output(run(sfn, caught("arn:aws:states:::lambda:invoke", {"FunctionName": "not-deployed"})))
    assert result["Error"] == "Lambda.ResourceNotFoundException"


# -- validation


@pytest.mark.parametrize("resource", [
    "arn:aws:states:::aws-sdk:nosuchservice:doThing",
    "arn:aws:states:::aws-sdk:sqs:noSuchAction",
    "arn:aws:states:::aws-sdk:sqs:sendMessage.sync",
    "arn:aws:states:::aws-sdk:sqs:SendMessage",
    "arn:aws:states:::nothing",
])
def test_unknown_resources_are_refused_as_aws_refuses_them(sfn, resource):
    with pytest.raises(ClientError) as raised:
        sfn.create_state_machine(name=f"bad-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN,
                                 definition=json.dumps(task(resource, {})))
    assert raised.value.response["Error"]["Code"] == "InvalidDefinition"
    assert f"The resource provided {resource} is not recognized" in raised.value.response["Error"]["Message"]
    found = sfn.validate_state_machine_definition(definition=json.dumps(task(resource, {})))
    assert found["result"] == "FAIL" and "is not recognized" in found["diagnostics"][0]["message"]


def test_unsupported_pattern_of_an_optimized_integration_is_refused(sfn):
    with pytest.raises(ClientError) as raised:
        sfn.create_state_machine(name=f"bad-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=json.dumps(
            task("arn:aws:states:::dynamodb:getItem.waitForTaskToken", {})))
    assert "does not support the '.waitForTaskToken' pattern" in raised.value.response["Error"]["Message"]


@pytest.mark.parametrize("resource", ["arn:aws:states:::aws-sdk:sqs:listQueues", "arn:aws:states:::sqs:sendMessage"])
def test_parameters_the_api_does_not_have_are_refused(sfn, resource):
    definition = json.dumps(task(resource, {"QueueUrl": "q", "NoSuchField.$": "$.x"}))
    with pytest.raises(ClientError) as raised:
        sfn.create_state_machine(name=f"bad-{uuid.uuid4().hex[:8]}", roleArn=ROLE_ARN, definition=definition)
    assert "The field 'NoSuchField' is not supported by Step Functions at /States/T/Parameters" in \
        raised.value.response["Error"]["Message"]


def test_parameters_that_do_not_fit_the_api_at_run_time_fail_the_execution(sfn):
    described = run(sfn, task("arn:aws:states:::aws-sdk:sqs:listQueues", {"QueueNamePrefix.$": "$.prefix"}),
                    {"prefix": {"not": "a string"}})
    assert described["status"] == "FAILED" and described["error"] == "States.Runtime"
    assert "QueueNamePrefix" in described["cause"]


# -- TestState


def test_test_state_calls_the_resource_for_real(sfn, moto):
    sqs = aws_client(moto, "sqs")
    name = f"q-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    state = {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:sqs:getQueueUrl", "End": True,
             "Parameters": {"QueueName.$": "$.queue"}}
    answer = sfn.test_state(definition=json.dumps(state), roleArn=ROLE_ARN, input=json.dumps({"queue": name}))
    assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == {"QueueUrl": url}
    answer = sfn.test_state(definition=json.dumps(state), roleArn=ROLE_ARN, input=json.dumps({"queue": "nope"}))
    assert answer["status"] == "FAILED" and answer["error"] == "Sqs.QueueDoesNotExistException"
    lambda_state = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "End": True,
                    "Parameters": {"FunctionName": "greet", "Payload": {"name": "bo"}}, "OutputPath": "$.Payload"}
    answer = sfn.test_state(definition=json.dumps(lambda_state), roleArn=ROLE_ARN)
    assert json.loads(answer["output"]) == {"greeting": "hello bo"}


def test_test_state_refuses_a_callback_task_without_a_mock(sfn):
    state = {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken", "End": True,
             "Parameters": {"QueueUrl": "q", "MessageBody.$": "$$.Task.Token"}}
    with pytest.raises(ClientError) as raised:
        sfn.test_state(definition=json.dumps(state), roleArn=ROLE_ARN)
    assert raised.value.response["Error"]["Code"] == "ValidationException"


def test_machine_role_and_a_service_endpoint_of_its_own(tmp_path, moto):
    """--assume-machine-role makes calls as the state machine's role; AWS_ENDPOINT_URL_<SERVICE> wins over
    AWS_ENDPOINT_URL, as in every AWS tool (the general endpoint here answers nothing)."""
    env = {**server_env(moto), "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ENDPOINT_URL_STS": moto}
    server = ServerProcess(tmp_path / "data", extra_args=("--assume-machine-role",), env=env).start()
    try:
        result = output(run(server.client(), task("arn:aws:states:::aws-sdk:sts:getCallerIdentity", {})))
        assert result["Arn"].startswith(f"arn:aws:sts::{ACCOUNT}:assumed-role/{ROLE_ARN.rsplit('/', 1)[1]}/")
    finally:
        server.stop()


def test_the_language_the_calls_and_the_jobs_agree_on_the_integrations():
    """asl/definition_tasks.py lists each optimized integration's patterns (the language layer knows no botocore);
    integrations/aws/calls.py says how each is called, jobs.py how each .sync job is followed."""
    from statewright.asl.definition_tasks import _INTEGRATIONS
    from statewright.integrations.aws.calls import OPTIMIZED
    from statewright.integrations.aws.jobs import JOBS

    aws = {key for key in _INTEGRATIONS if key[0] not in ("http", "states", "apigateway")}
    assert aws == set(OPTIMIZED) | {("eks", "call"), ("eks", "runJob")}
    kubernetes = {("eks", "runJob")}  # a cluster's Kubernetes API, not an AWS API: integrations/aws/kubernetes.py
    assert {key for key in aws if "sync" in _INTEGRATIONS[key]} == set(JOBS) | kubernetes


def test_an_express_workflow_calls_lambda_and_sqs_synchronously(sfn, moto):
    sqs = aws_client(moto, "sqs")
    queue = sqs.create_queue(QueueName=f"x-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    definition = {"StartAt": "Greet", "States": {
        "Greet": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "OutputPath": "$.Payload",
                  "Parameters": {"FunctionName": "greet", "Payload.$": "$"}, "Next": "Send"},
        "Send": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "ResultPath": None, "End": True,
                 "Parameters": {"QueueUrl": queue, "MessageBody.$": "$"}}}}
    arn = sfn.create_state_machine(name=f"x-{uuid.uuid4().hex[:8]}", definition=json.dumps(definition),
                                   roleArn=ROLE_ARN, type="EXPRESS")["stateMachineArn"]
    answer = sfn.start_sync_execution(stateMachineArn=arn, input=json.dumps({"name": "ex"}))
    assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == {"greeting": "hello ex"}
    message = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1)["Messages"][0]
    assert json.loads(message["Body"]) == {"greeting": "hello ex"}
