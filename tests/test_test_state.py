"""TestState through boto3: one state, run once, with the data-flow steps AWS shows."""

import json

import pytest
from botocore.exceptions import ClientError


def run(sfn, state: dict, payload: object, **options) -> dict:
    return sfn.test_state(definition=json.dumps(state), roleArn="arn:aws:iam::123456789012:role/r",
                          input=json.dumps(payload), **options)


def test_pass_state_shows_each_data_flow_step_at_debug(sfn):
    state = {"Type": "Pass", "InputPath": "$.in", "Parameters": {"doubled.$": "States.MathAdd($.n, $.n)"},
             "ResultPath": "$.out", "OutputPath": "$.out", "Next": "After"}
    result = run(sfn, state, {"in": {"n": 4}}, inspectionLevel="DEBUG")
    assert result["status"] == "SUCCEEDED"
    assert result["nextState"] == "After"
    assert json.loads(result["output"]) == {"doubled": 8}
    data = result["inspectionData"]
    assert json.loads(data["input"]) == {"in": {"n": 4}}
    assert json.loads(data["afterInputPath"]) == {"n": 4}
    assert json.loads(data["afterParameters"]) == {"doubled": 8}
    assert "result" not in data  # AWS's recordings: a Pass without Result shows afterResultSelector instead
    assert json.loads(data["afterResultSelector"]) == {"doubled": 8}
    assert json.loads(data["afterResultPath"]) == {"in": {"n": 4}, "out": {"doubled": 8}}


@pytest.mark.parametrize(("state", "shown"), [
    ({"Type": "Pass", "End": True}, {"afterInputPath", "afterParameters", "afterResultSelector", "afterResultPath"}),
    ({"Type": "Pass", "Result": {"r": 1}, "End": True}, {"result", "afterResultSelector", "afterResultPath"}),
    ({"Type": "Fail", "Error": "E"}, {"afterInputPath"}),
    ({"Type": "Parallel", "InputPath": "$.a", "Branches": [{"StartAt": "B", "States": {"B": {"Type": "Pass",
                                                                                              "End": True}}}],
      "End": True}, {"afterResultSelector", "afterResultPath"}),
])
def test_each_state_type_shows_the_inspection_data_aws_records(sfn, state, shown):
    """LocalStack's AWS-validated test_base_inspection_level_debug and test_base_parallel_state_mock_success."""
    mock = {"mock": {"result": '[{"b": 1}]'}} if state["Type"] == "Parallel" else {}
    result = run(sfn, state, {"a": {"v": 1}}, inspectionLevel="DEBUG", **mock)
    assert set(result["inspectionData"]) == {"input", *shown}


def test_the_context_is_the_one_aws_gives_a_tested_state(sfn):
    """LocalStack's AWS-validated test_state_with_variables and test_state_task_catch_error (2025)."""
    state = {"Type": "Pass", "QueryLanguage": "JSONata", "Output": "{% $states.context %}", "End": True}
    context = json.loads(sfn.test_state(definition=json.dumps(state), input="{}")["output"])
    assert context["State"]["Name"] == "StateName" and context["Execution"]["RoleArn"] is None
    assert ":express:TestStateMachine:" in context["Execution"]["Id"] and "RedriveCount" not in context["Execution"]


def test_a_state_named_test_state_inside_a_map_is_no_clash(sfn):
    """LocalStack's AWS-validated test_base_map_state_inspect: the Map's ItemProcessor holds a state named
    TestState."""
    state = {"Type": "Map", "QueryLanguage": "JSONata", "Items": "{% $states.input.Values %}", "ItemProcessor": {
        "StartAt": "TestState", "States": {"TestState": {"Type": "Pass", "End": True}}}, "End": True}
    result = run(sfn, state, {"Values": [1, 2]}, inspectionLevel="DEBUG", mock={"result": "[1, 1]"})
    assert result["status"] == "SUCCEEDED" and json.loads(result["output"]) == [1, 1]
    assert "result" not in result["inspectionData"]


def test_a_task_without_a_mock_needs_a_role(sfn):
    with pytest.raises(ClientError) as refused:
        sfn.test_state(definition=json.dumps({"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                                              "Parameters": {"FunctionName": "f"}, "End": True}), input="{}")
    assert refused.value.response["Error"]["Message"] == "RoleArn must be specified when testing a Task state"


def test_info_level_has_no_inspection_data(sfn):
    result = run(sfn, {"Type": "Pass", "End": True}, {"a": 1})
    assert result["status"] == "SUCCEEDED"
    assert "inspectionData" not in result
    assert "nextState" not in result


def test_choice_reports_the_next_state(sfn):
    state = {"Type": "Choice", "Choices": [{"Variable": "$.n", "NumericLessThan": 0, "Next": "Negative"}],
             "Default": "Positive"}
    assert run(sfn, state, {"n": -1})["nextState"] == "Negative"
    assert run(sfn, state, {"n": 1})["nextState"] == "Positive"


def test_wait_state_does_not_wait(sfn):
    result = run(sfn, {"Type": "Wait", "Seconds": 3600, "Next": "Later"}, {"k": 1})
    assert (result["status"], result["nextState"], json.loads(result["output"])) == ("SUCCEEDED", "Later", {"k": 1})


def test_fail_state_fails_with_its_error(sfn):
    result = run(sfn, {"Type": "Fail", "Error": "Nope", "CausePath": "$.why"}, {"why": "because"})
    assert (result["status"], result["error"], result["cause"]) == ("FAILED", "Nope", "because")


def test_runtime_error_fails_with_states_runtime(sfn):
    result = run(sfn, {"Type": "Pass", "InputPath": "$.missing", "End": True}, {})
    assert (result["status"], result["error"]) == ("FAILED", "States.Runtime")


def test_caught_error_reports_caught_error_and_the_catcher(sfn):
    state = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "Parameters": {"FunctionName": "f"},
             "Catch": [{"ErrorEquals": ["Boom"], "ResultPath": "$.err", "Next": "Recover"}], "End": True}
    result = run(sfn, state, {"x": 1}, mock={"errorOutput": {"error": "Boom"}})
    assert (result["status"], result["error"], result["nextState"]) == ("CAUGHT_ERROR", "Boom", "Recover")
    assert json.loads(result["output"]) == {"x": 1, "err": {"Error": "Boom"}}


def test_retriable_error_reports_retriable(sfn):
    state = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "Parameters": {"FunctionName": "f"},
             "Retry": [{"ErrorEquals": ["Boom"]}], "End": True}
    result = run(sfn, state, {}, mock={"errorOutput": {"error": "Boom"}})
    assert (result["status"], result["error"]) == ("RETRIABLE", "Boom")


def test_variables_are_readable_and_assignments_shown(sfn):
    state = {"Type": "Pass", "Parameters": {"seen.$": "$limit"}, "Assign": {"limit": 5}, "End": True}
    result = run(sfn, state, {}, variables=json.dumps({"limit": 3}), inspectionLevel="DEBUG")
    assert json.loads(result["output"]) == {"seen": 3}
    assert json.loads(result["inspectionData"]["variables"]) == {"limit": 5}


def test_state_of_a_whole_machine_by_name(sfn):
    machine = {"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "B"},
                                          "B": {"Type": "Pass", "Result": "b", "End": True}}}
    result = sfn.test_state(definition=json.dumps(machine), stateName="B", input="{}")
    assert json.loads(result["output"]) == "b"


def test_invalid_state_is_invalid_definition(sfn):
    with pytest.raises(sfn.exceptions.InvalidDefinition):
        run(sfn, {"Type": "Pass", "Bogus": 1, "End": True}, {})


def test_an_activity_task_needs_a_real_execution(sfn):
    activity = sfn.create_activity(name="test-state-activity")["activityArn"]
    with pytest.raises(sfn.exceptions.ValidationException):
        run(sfn, {"Type": "Task", "Resource": activity, "End": True}, {})


def test_a_failed_jsonata_expression_fails_the_state(sfn):
    state = {"QueryLanguage": "JSONata", "Type": "Pass", "Output": "{% $missing.field %}", "End": True}
    result = run(sfn, state, {"a": 1})
    assert result["status"] == "FAILED"
    assert result["error"] == "States.QueryEvaluationError"


LAMBDA_TASK = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "Parameters": {"FunctionName": "f"},
               "ResultSelector": {"body.$": "$.Payload.body"}, "End": True,
               "Catch": [{"ErrorEquals": ["Lambda.Unknown"], "Next": "Handle"}]}


def test_a_mocked_result_stands_for_the_tasks_call(sfn):
    answer = run(sfn, LAMBDA_TASK, {}, inspectionLevel="DEBUG",
                 mock={"result": json.dumps({"Payload": {"body": "hi"}, "StatusCode": 200})})
    assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == {"body": "hi"}
    assert json.loads(answer["inspectionData"]["result"]) == {"Payload": {"body": "hi"}, "StatusCode": 200}


def test_a_mocked_error_output_goes_to_the_tasks_catch(sfn):
    answer = run(sfn, LAMBDA_TASK, {}, mock={"errorOutput": {"error": "Lambda.Unknown", "cause": "boom"}})
    assert (answer["status"], answer["error"], answer["cause"], answer["nextState"]) == (
        "CAUGHT_ERROR", "Lambda.Unknown", "boom", "Handle")


@pytest.mark.parametrize(("state", "mock", "says"), [
    (LAMBDA_TASK, {"result": "{}", "errorOutput": {"error": "E"}},
     "A test mock should have only one of the following fields: [result, errorOutput]."),
    (LAMBDA_TASK, {"fieldValidationMode": "NONE"}, "A test mock should have one of the following fields"),
    (LAMBDA_TASK, {"result": "not json"}, "Mocked result must be valid JSON"),
    ({"Type": "Pass", "End": True}, {"result": "{}"}, "State type 'Pass' is not supported when a mock is specified"),
    ({"Type": "Choice", "Choices": [{"Variable": "$.a", "IsPresent": True, "Next": "A"}]},
     {"errorOutput": {"error": "E"}}, "State type 'Choice' is not supported when a mock is specified"),
])
def test_a_mock_that_cannot_stand_for_the_call_is_refused(sfn, state, mock, says):
    with pytest.raises(ClientError) as refused:
        run(sfn, state, {}, mock=mock)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert says in refused.value.response["Error"]["Message"]


PARALLEL = {"Type": "Parallel", "End": True, "ResultSelector": {"first.$": "$[0]"},
            "Catch": [{"ErrorEquals": ["Branch.Failed"], "Next": "Handle"}],
            "Branches": [{"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}},
                         {"StartAt": "B", "States": {"B": {"Type": "Pass", "End": True}}}]}
MAP = {"Type": "Map", "ItemsPath": "$.items", "End": True, "ItemProcessor": {
    "ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "Work", "States": {"Work": {"Type": "Pass", "End": True}}}}


def test_a_mocked_result_stands_for_a_parallels_branches(sfn):
    answer = run(sfn, PARALLEL, {"x": 1}, mock={"result": json.dumps([{"a": 1}, {"b": 2}])})
    assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == {"first": {"a": 1}}


def test_a_mocked_error_of_a_parallel_goes_to_its_catch(sfn):
    answer = run(sfn, PARALLEL, {}, mock={"errorOutput": {"error": "Branch.Failed", "cause": "b"}})
    assert (answer["status"], answer["error"], answer["nextState"]) == ("CAUGHT_ERROR", "Branch.Failed", "Handle")


def test_a_mocked_result_stands_for_a_maps_iterations_after_its_items_are_read(sfn):
    answer = run(sfn, MAP, {"items": [1, 2]}, inspectionLevel="DEBUG", mock={"result": json.dumps(["x", "y"])})
    assert json.loads(answer["output"]) == ["x", "y"]
    assert json.loads(answer["inspectionData"]["afterItemsPath"]) == [1, 2]


def test_a_mocked_maps_inspection_shows_the_maps_own_input_processing(sfn):
    state = {**MAP, "InputPath": "$.x"}
    answer = run(sfn, state, {"x": {"items": [10, 20]}}, inspectionLevel="DEBUG", mock={"result": "[1, 2]"})
    data = answer["inspectionData"]
    assert json.loads(data["afterInputPath"]) == {"items": [10, 20]}
    assert json.loads(data["afterItemsPath"]) == [10, 20]


AWS_NEEDS_MOCK = ("TestState API does not support Map or Parallel states. Supported state types include: [Task, Wait, "
                  "Pass, Succeed, Fail, Choice]")
LAMBDA_BRANCH = {"StartAt": "B", "States": {"B": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                                                  "Parameters": {"FunctionName": "f"}, "End": True}}}


@pytest.mark.parametrize("state", [
    {"Type": "Parallel", "Branches": [LAMBDA_BRANCH], "End": True},
    PARALLEL,
    {**MAP, "ItemProcessor": LAMBDA_BRANCH},
    MAP,
])
def test_a_parallel_or_map_without_a_mock_is_refused_as_aws_refuses_it(sfn, state):
    with pytest.raises(ClientError) as refused:
        run(sfn, state, {"items": [1]})
    assert (refused.value.response["Error"]["Code"], refused.value.response["Error"]["Message"]) == (
        "InvalidDefinition", AWS_NEEDS_MOCK)
    caught = {"Handle": {"Type": "Succeed"}} if "Catch" in state else {}
    machine = {"StartAt": "Fan", "States": {"Fan": state, **caught}}
    with pytest.raises(ClientError) as by_name:
        sfn.test_state(definition=json.dumps(machine), stateName="Fan", input="{}")
    assert by_name.value.response["Error"]["Message"] == AWS_NEEDS_MOCK


@pytest.mark.parametrize(("result", "says"), [
    ({"a": 1}, "Mocked result must be an array."),
    ([1], "Mocked result must contain the same number of items as number of Parallel branches."),
])
def test_a_parallels_mocked_result_is_one_result_per_branch(sfn, result, says):
    with pytest.raises(ClientError) as refused:
        run(sfn, PARALLEL, {}, mock={"result": json.dumps(result)})
    assert refused.value.response["Error"]["Message"] == says


def test_a_state_inside_a_map_is_tested_by_name_and_a_missing_one_is_refused(sfn):
    machine = {"StartAt": "Fan", "States": {"Fan": {**MAP, "ItemProcessor": {
        "StartAt": "HandleItem", "States": {"HandleItem": {"Type": "Pass", "Result": "handled", "End": True}}}}}}
    answer = sfn.test_state(definition=json.dumps(machine), stateName="HandleItem", input="{}")
    assert (answer["status"], json.loads(answer["output"])) == ("SUCCEEDED", "handled") and "nextState" not in answer
    with pytest.raises(ClientError) as refused:
        sfn.test_state(definition=json.dumps(machine), stateName="Nope", input="{}")
    assert (refused.value.response["Error"]["Code"], refused.value.response["Error"]["Message"]) == (
        "ValidationException", "State not found in definition")


def test_a_whole_machine_without_a_state_name_is_told_to_name_the_state(sfn):
    machine = {"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}}
    with pytest.raises(sfn.exceptions.InvalidDefinition) as refused:
        sfn.test_state(definition=json.dumps(machine), input="{}")
    assert "give stateName, the name of the state to test" in refused.value.response["Error"]["Message"]


@pytest.mark.parametrize("options", [{"stateName": ""}, {"stateConfiguration": {"errorCausedByState": ""}}])
def test_an_empty_state_name_gets_the_models_minimum_length(server, options):
    unchecked = server.client(parameter_validation=False)  # boto3 refuses it itself
    member = "stateName" if "stateName" in options else "stateConfiguration.errorCausedByState"
    with pytest.raises(ClientError) as refused:
        unchecked.test_state(definition=json.dumps(PARALLEL), input="{}", mock={"errorOutput": {"error": "E"}},
                             **options)
    assert refused.value.response["Error"]["Message"] == (
        f"1 validation error detected: Value at '{member}' failed to satisfy constraint: Member must have length "
        "greater than or equal to 1")


@pytest.mark.parametrize(("role", "says"), [
    ("garbage", "Invalid Arn: 'Invalid ARN prefix: garbage'"),
    ("arn:aws:s3:::bucket", "Invalid Arn: 'Resource type not valid in this context: arn:aws:s3:::bucket'"),
])
def test_a_role_arn_that_is_no_iam_role_is_refused_as_create_state_machine_refuses_it(sfn, role, says):
    with pytest.raises(ClientError) as refused:
        sfn.test_state(definition=json.dumps({"Type": "Pass", "End": True}), roleArn=role, input="{}")
    assert (refused.value.response["Error"]["Code"], refused.value.response["Error"]["Message"]) == (
        "InvalidArn", says)


def test_a_mocked_error_output_without_an_error_is_refused(sfn):
    with pytest.raises(ClientError) as refused:
        run(sfn, LAMBDA_TASK, {}, mock={"errorOutput": {"cause": "no name"}})
    assert refused.value.response["Error"]["Message"] == "A mocked errorOutput must have an error."


def test_error_caused_by_state_names_a_state_inside_the_mocked_parallel(sfn):
    answer = run(sfn, PARALLEL, {}, stateConfiguration={"errorCausedByState": "B"},
                 mock={"errorOutput": {"error": "Branch.Failed", "cause": "b"}})
    assert answer["status"] == "CAUGHT_ERROR"
    for configuration, mock, says in (
            ({"errorCausedByState": "Nope"}, {"errorOutput": {"error": "E"}}, "not a state inside"),
            ({"errorCausedByState": "B"}, {"result": "[1, 2]"}, "takes a mocked errorOutput"),
            ({"mapIterationFailureCount": 1}, {"result": "[1, 2]"}, "applies to a Map state; 'TestState' is a "
                                                                    "Parallel")):
        with pytest.raises(ClientError) as refused:
            run(sfn, PARALLEL, {}, stateConfiguration=configuration, mock=mock)
        assert says in refused.value.response["Error"]["Message"]


CONTEXT_TASK = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "End": True, "ResultPath": "$.r",
                "Parameters": {"FunctionName": "f", "Payload": {"context.$": "$$"}}}


@pytest.mark.parametrize("context", [
    {"Execution": {"Name": "given", "StartTime": "2025-01-15T10:30:00.000Z", "Input": {"any": ["json"]}},
     "State": {"Name": "S", "EnteredTime": "2025-01-15T10:30:01.500Z", "RetryCount": 0},
     "StateMachine": {"Id": "arn:aws:states:us-east-1:123456789012:stateMachine:m", "Name": "m"}},
    {"Execution": {}, "State": {}, "StateMachine": {}},
    {},
])
def test_a_given_context_is_the_whole_context_object_the_state_reads(sfn, context):
    answer = run(sfn, CONTEXT_TASK, {}, inspectionLevel="DEBUG", context=json.dumps(context),
                 mock={"result": json.dumps({"StatusCode": 200})})
    assert json.loads(answer["inspectionData"]["afterParameters"])["Payload"] == {"context": context}


@pytest.mark.parametrize(("context", "says"), [
    ({"Bogus": 1}, "Field 'Bogus' is not allowed"),
    ({"Execution": {"pokemon": "squirtle"}}, "Field 'pokemon' is not allowed"),
    ({"Map": {}}, "'Map' field is not supported when mocking a Context object"),
    ({"Execution": {"Id": 1}}, "Execution.Id must be a string"),
    ({"Execution": {"Name": 5}}, "Execution.Name must be a string"),
    ({"Execution": {"StartTime": "yesterday"}}, "Execution.StartTime must be an ISO 8601 timestamp string"),
    ({"State": {"RetryCount": "2"}}, "State.RetryCount must be an integer"),
    ({"State": []}, "State must be an object"),
    ([], "the context object must be a JSON object"),
    ({"Task": {"Token": "t"}}, "Context object contains 'Task' when state is not a Task state with a '.sync' or "
                               "'.waitForTaskToken' service integration pattern"),
])
def test_a_context_that_is_not_a_context_object_is_refused_field_by_field(sfn, context, says):
    with pytest.raises(ClientError) as refused:
        run(sfn, CONTEXT_TASK, {}, context=json.dumps(context), mock={"result": "{}"})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert refused.value.response["Error"]["Message"] == f"Invalid Context object provided: {says}"


def test_a_given_task_token_is_the_one_a_callback_task_sends(sfn):
    state = {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken", "End": True,
             "Parameters": {"QueueUrl": "q", "MessageBody": {"token.$": "$$.Task.Token"}}}
    answer = run(sfn, state, {}, inspectionLevel="DEBUG", context=json.dumps({"Task": {"Token": "abcd123"}}),
                 mock={"result": json.dumps({"approved": True})})
    assert json.loads(answer["inspectionData"]["afterParameters"])["MessageBody"] == {"token": "abcd123"}


def test_a_context_without_a_mock_is_refused(sfn):
    with pytest.raises(ClientError) as refused:
        run(sfn, {"Type": "Pass", "End": True}, {}, context=json.dumps({"Execution": {"Name": "n"}}))
    assert "together with a mock" in refused.value.response["Error"]["Message"]


def test_an_activity_task_runs_on_its_mock(sfn):
    state = {"Type": "Task", "Resource": "arn:aws:states:us-east-1:123456789012:activity:none", "End": True}
    answer = run(sfn, state, {}, mock={"result": json.dumps({"done": True})})
    assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == {"done": True}


DYNAMO_GET = {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:dynamodb:describeTable", "End": True,
              "Parameters": {"TableName": "t"}}


def task(resource: str, **fields) -> dict:
    return {"Type": "Task", "Resource": f"arn:aws:states:::{resource}", "End": True, **fields}


SFN_START = task("aws-sdk:sfn:startExecution", Parameters={"StateMachineArn": "arn"})
NESTED = task("states:startExecution", Parameters={"StateMachineArn": "arn"})
SQS_SEND = task("sqs:sendMessage", Parameters={"QueueUrl": "q", "MessageBody": "m"})
S3_GET = task("aws-sdk:s3:getObject", Parameters={"Bucket": "b", "Key": "k"})
KMS_ENCRYPT = task("aws-sdk:kms:encrypt", Parameters={"KeyId": "k", "Plaintext": "p"})
GET_FUNCTION = task("aws-sdk:lambda:getFunction", Parameters={"FunctionName": "f"})
PUT_EVENTS = task("events:putEvents", Parameters={"Entries": []})
ARN = "arn:aws:states:us-east-1:123456789012:execution:m:e"


# AWS's words for each, as LocalStack's AWS-validated test_field_validation_mode snapshots record them (those for
# an ISO 8601 text, a boolean and a maximum length are ours).
@pytest.mark.parametrize(("state", "result", "mode", "says"), [
    (DYNAMO_GET, {"Table": {"ItemCount": "many"}}, "PRESENT", "Field 'ItemCount' must be a number"),
    (DYNAMO_GET, {"Table": {"TableStatus": "SLEEPING"}}, "PRESENT", "Field 'TableStatus' is not an expected value"),
    (LAMBDA_TASK, {"StatusCode": "200", "Payload": {}}, "STRICT", "Field 'StatusCode' must be a number"),
    (SQS_SEND, {"MessageId": 7}, "STRICT", "Field 'MessageId' must be a string"),
    (PUT_EVENTS, {"Entries": "x"}, "STRICT", "Field 'Entries' must be an array"),
    (PUT_EVENTS, {"Entries": [{"EventId": "a"}, {"EventId": ["b"]}]}, "PRESENT", "Field 'EventId' must be a string"),
    (SFN_START, {}, "STRICT", "Required field 'ExecutionArn' is missing"),
    (SFN_START, {"executionArn": ARN, "startDate": "2025-01-15T10:30:00Z"}, "STRICT",
     "Required field 'ExecutionArn' is missing"),
    (SFN_START, {"ExecutionArn": ARN, "StartDate": 1764103483}, "STRICT", "Field 'StartDate' must be a string"),
    (SFN_START, {"ExecutionArn": ARN, "StartDate": True}, "PRESENT", "Field 'StartDate' must be a string"),
    (SFN_START, {"ExecutionArn": ARN, "StartDate": "yesterday"}, "STRICT",
     "Field 'StartDate' must be an ISO 8601 timestamp"),
    (SFN_START, {"StartDate": "yesterday"}, "PRESENT", "Field 'StartDate' must be an ISO 8601 timestamp"),
    (NESTED, {"StartDate": "2025-01-15T10:30:00Z"}, "STRICT", "Required field 'ExecutionArn' is missing"),
    (S3_GET, {"ContentLength": "9000"}, "STRICT", "Field 'ContentLength' must be a number"),
    (S3_GET, {"StorageClass": "Papyrus"}, "STRICT", "Field 'StorageClass' is not an expected value"),
    (S3_GET, {"DeleteMarker": "yes"}, "STRICT", "Field 'DeleteMarker' must be a boolean"),
    (KMS_ENCRYPT, {"CiphertextBlob": 123}, "STRICT", "Field 'CiphertextBlob' must be a string"),
    (KMS_ENCRYPT, {"CiphertextBlob": ""}, "STRICT", "Field 'CiphertextBlob' is smaller than the minimum length"),
    (KMS_ENCRYPT, {"KeyId": "k" * 2049}, "STRICT", "Field 'KeyId' is larger than the maximum length"),
    (GET_FUNCTION, {"Configuration": {"MemorySize": 127}}, "STRICT",
     "Field 'MemorySize' is less than the minimum value"),
    (GET_FUNCTION, {"Configuration": {"MemorySize": 32769}}, "STRICT", "Field 'MemorySize' exceeds the maximum value"),
    (task("dynamodb:putItem", Parameters={"TableName": "t", "Item": {}}),
     {"ConsumedCapacity": {"CapacityUnits": "123.45"}}, "STRICT", "Field 'CapacityUnits' must be a number"),
    # .sync: what the pattern returns, a nested execution's description, an ECS task
    (NESTED | {"Resource": "arn:aws:states:::states:startExecution.sync:2"}, {"Status": 7}, "PRESENT",
     "Field 'Status' must be a string"),
    (NESTED | {"Resource": "arn:aws:states:::states:startExecution.sync"}, {"ExecutionArn": ARN}, "STRICT",
     "Required field 'StateMachineArn' is missing"),
    (task("ecs:runTask.sync", Parameters={"TaskDefinition": "t"}), {"LastStatus": 5}, "STRICT",
     "Field 'LastStatus' must be a string"),
])
def test_a_mock_result_that_does_not_fit_what_the_task_returns_is_refused_in_aws_words(sfn, state, result, mode,
                                                                                         says):
    with pytest.raises(ClientError) as refused:
        run(sfn, state, {}, mock={"result": json.dumps(result), "fieldValidationMode": mode})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert refused.value.response["Error"]["Message"] == f"Mock result schema validation error: {says}"


@pytest.mark.parametrize(("state", "result", "mode"), [
    (DYNAMO_GET, {"Table": {"TableName": "table", "ItemCount": 3}}, "STRICT"),
    (DYNAMO_GET, {"Tabel": {}}, "STRICT"),  # a field the API does not have is not checked (AWS: {"random": "json"})
    (DYNAMO_GET, {"Table": {"ItemCount": "many"}, "Extra": True}, "NONE"),
    (SFN_START, {"ExecutionArn": ARN, "StartDate": "2025-11-26T00:19:16.123456"}, "STRICT"),  # no offset, as AWS
    (task("lambda:invoke", Parameters={"FunctionName": "f"}), {"Payload": {"any": "json"}, "SdkHttpMetadata": {}},
     "STRICT"),
    # what a callback sends, an activity worker's output and a .sync:2 execution's Output are any JSON
    (task("sqs:sendMessage.waitForTaskToken", Parameters={"QueueUrl": "q", "MessageBody": {"t.$": "$$.Task.Token"}}),
     {"approved": True, "MessageId": 7}, "STRICT"),
    ({"Type": "Task", "Resource": "arn:aws:states:us-east-1:123456789012:activity:a", "End": True},
     {"StartDate": 1}, "STRICT"),
    (NESTED | {"Resource": "arn:aws:states:::states:startExecution.sync:2"},
     {"ExecutionArn": ARN, "StateMachineArn": "arn", "Status": "SUCCEEDED", "StartDate": "2025-01-15T10:30:00Z",
      "Output": {"parsed": True}, "Input": {}}, "STRICT"),
])
def test_a_mock_result_that_fits_or_is_not_checked_stands_for_the_call(sfn, state, result, mode):
    answer = run(sfn, state, {}, mock={"result": json.dumps(result), "fieldValidationMode": mode})
    assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == result


RETRIED = {**LAMBDA_TASK, "Retry": [{"ErrorEquals": ["Lambda.ServiceException"], "IntervalSeconds": 2,
                                     "MaxAttempts": 2},
                                    {"ErrorEquals": ["Lambda.Unknown"], "IntervalSeconds": 3, "MaxAttempts": 2}]}


def test_a_mocked_error_a_retrier_takes_is_retriable_with_the_retriers_index_and_backoff(sfn):
    answer = run(sfn, RETRIED, {}, inspectionLevel="DEBUG",
                 mock={"errorOutput": {"error": "Lambda.Unknown", "cause": "boom"}})
    assert answer["status"] == "RETRIABLE"
    assert answer["inspectionData"]["errorDetails"] == {"retryIndex": 1, "retryBackoffIntervalSeconds": 3}


def test_the_retriers_count_is_the_states_retry_count_in_the_context_object(sfn):
    state = {**RETRIED, "Parameters": {"FunctionName": "f", "Payload": {"retries.$": "$$.State.RetryCount"}}}
    for spent in (0, 2):
        answer = run(sfn, state, {}, inspectionLevel="DEBUG", stateConfiguration={"retrierRetryCount": spent},
                     mock={"errorOutput": {"error": "Lambda.Unknown"}})
        assert json.loads(answer["inspectionData"]["afterParameters"])["Payload"] == {"retries": spent}


def test_once_the_retriers_count_is_spent_the_catch_takes_the_error(sfn):
    answer = run(sfn, RETRIED, {}, inspectionLevel="DEBUG", stateConfiguration={"retrierRetryCount": 2},
                 mock={"errorOutput": {"error": "Lambda.Unknown", "cause": "boom"}})
    assert (answer["status"], answer["nextState"]) == ("CAUGHT_ERROR", "Handle")
    assert answer["inspectionData"]["errorDetails"] == {"catchIndex": 0}


DISTRIBUTED_MAP = {**MAP, "ItemProcessor": {**MAP["ItemProcessor"], "ProcessorConfig": {
    "Mode": "DISTRIBUTED", "ExecutionType": "EXPRESS"}}}
EVERY_STATE_TYPE = [  # (state, mock, status): each state type, with and without a mock where both apply
    ({"Type": "Pass", "Result": 1, "ResultPath": "$.r", "End": True}, None, "SUCCEEDED"),
    ({"Type": "Choice", "Choices": [{"Variable": "$.items", "IsPresent": True, "Next": "Yes"}]}, None, "SUCCEEDED"),
    ({"Type": "Wait", "Seconds": 5, "Next": "Later"}, None, "SUCCEEDED"),
    ({"Type": "Succeed"}, None, "SUCCEEDED"),
    ({"Type": "Fail", "Error": "E", "Cause": "c"}, None, "FAILED"),
    (LAMBDA_TASK, {"result": json.dumps({"Payload": {"body": "b"}})}, "SUCCEEDED"),
    (PARALLEL, {"result": "[1, 2]"}, "SUCCEEDED"),
    (PARALLEL, {"errorOutput": {"error": "Branch.Failed"}}, "CAUGHT_ERROR"),
    (MAP, {"result": "[1, 2]"}, "SUCCEEDED"),
    (DISTRIBUTED_MAP, {"result": "[1, 2]"}, "SUCCEEDED"),
]


@pytest.mark.parametrize(("state", "mock", "status"), EVERY_STATE_TYPE)
def test_every_state_type_answers_at_every_inspection_level(sfn, state, mock, status):
    options = {} if mock is None else {"mock": mock}
    answers = {level: run(sfn, state, {"items": [1, 2]}, inspectionLevel=level, **options)
               for level in ("INFO", "DEBUG", "TRACE")}
    assert {answer["status"] for answer in answers.values()} == {status}
    assert "inspectionData" not in answers["INFO"]
    assert json.loads(answers["DEBUG"]["inspectionData"]["input"]) == {"items": [1, 2]}
    assert answers["TRACE"]["inspectionData"] == answers["DEBUG"]["inspectionData"]  # TRACE adds an HTTP Task's
    # request and response only


def test_a_mocked_parallel_result_passed_on_untouched_keeps_its_text(sfn):
    """LocalStack's AWS-validated test_base_parallel_state_mock_success: AWS echoes the mock as it was written."""
    state = {"Type": "Parallel", "End": True, "Branches": [
        {"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}},
        {"StartAt": "B", "States": {"B": {"Type": "Pass", "End": True}}}]}
    written = '[{"branch1": "result"}, {"branch2": "result"}]'
    result = run(sfn, state, {}, inspectionLevel="DEBUG", mock={"result": written})
    assert result["output"] == written and result["inspectionData"]["afterResultSelector"] == written


def test_a_task_shows_its_parameters_and_result_selector_steps_even_without_them(sfn):
    state = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "End": True}
    result = run(sfn, state, {"FunctionName": "f", "Payload": None}, inspectionLevel="DEBUG",
                 mock={"result": '{"StatusCode": 200, "Payload": {"ok": true}}'})
    data = result["inspectionData"]
    assert json.loads(data["afterParameters"]) == json.loads(data["afterInputPath"])
    assert json.loads(data["afterResultSelector"]) == json.loads(data["result"])


def test_a_spent_retrier_is_named_in_the_error_details(sfn):
    state = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "Parameters": {"FunctionName": "f"},
             "Retry": [{"ErrorEquals": ["MockException"], "MaxAttempts": 5}], "End": True}
    result = run(sfn, state, {}, inspectionLevel="DEBUG", mock={"errorOutput": {"error": "MockException"}},
                 stateConfiguration={"retrierRetryCount": 5})
    assert result["status"] == "FAILED" and result["inspectionData"]["errorDetails"] == {"retryIndex": 0}
