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
    assert json.loads(data["result"]) == {"doubled": 8}
    assert json.loads(data["afterResultPath"]) == {"in": {"n": 4}, "out": {"doubled": 8}}


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
    state = {"Type": "Parallel", "Branches": [{"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Boom"}}}],
             "Catch": [{"ErrorEquals": ["Boom"], "ResultPath": "$.err", "Next": "Recover"}], "End": True}
    result = run(sfn, state, {"x": 1})
    assert (result["status"], result["error"], result["nextState"]) == ("CAUGHT_ERROR", "Boom", "Recover")
    assert json.loads(result["output"]) == {"x": 1, "err": {"Error": "Boom"}}


def test_retriable_error_reports_retriable(sfn):
    state = {"Type": "Parallel", "Branches": [{"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Boom"}}}],
             "Retry": [{"ErrorEquals": ["Boom"]}], "End": True}
    result = run(sfn, state, {})
    assert (result["status"], result["error"]) == ("RETRIABLE", "Boom")


def test_map_state_runs_its_iterations(sfn):
    state = {"Type": "Map", "ItemsPath": "$.items", "ItemSelector": {"v.$": "$$.Map.Item.Value"},
             "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}, "End": True}
    result = run(sfn, state, {"items": [1, 2]}, inspectionLevel="DEBUG")
    assert json.loads(result["output"]) == [{"v": 1}, {"v": 2}]
    assert json.loads(result["inspectionData"]["afterItemSelector"]) == [{"v": 1}, {"v": 2}]


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
    (LAMBDA_TASK, {"result": "not json"}, "Invalid mock result"),
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


def test_error_caused_by_state_names_a_state_inside_the_mocked_parallel(sfn):
    answer = run(sfn, PARALLEL, {}, stateConfiguration={"errorCausedByState": "B"},
                 mock={"errorOutput": {"error": "Branch.Failed", "cause": "b"}})
    assert answer["status"] == "CAUGHT_ERROR"
    for configuration, mock, says in (
            ({"errorCausedByState": "Nope"}, {"errorOutput": {"error": "E"}}, "not a state inside"),
            ({"errorCausedByState": "B"}, {"result": "[]"}, "takes a mocked errorOutput"),
            ({"mapIterationFailureCount": 1}, {"result": "[]"}, "applies to a Map state; 'TestState' is a Parallel")):
        with pytest.raises(ClientError) as refused:
            run(sfn, PARALLEL, {}, stateConfiguration=configuration, mock=mock)
        assert says in refused.value.response["Error"]["Message"]


def test_a_given_context_is_what_the_state_reads_from_the_context_object(sfn):
    state = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "End": True, "ResultPath": "$.r",
             "Parameters": {"FunctionName": "f", "Payload": {"name.$": "$$.Execution.Name", "id.$": "$$.Execution.Id"}}}
    answer = run(sfn, state, {}, inspectionLevel="DEBUG", context=json.dumps({"Execution": {"Name": "given"}}),
                 mock={"result": json.dumps({"StatusCode": 200})})
    payload = json.loads(answer["inspectionData"]["afterParameters"])["Payload"]
    assert payload["name"] == "given" and ":execution:" in payload["id"]  # the rest as TestState makes it


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


@pytest.mark.parametrize(("state", "result", "mode", "says"), [
    (DYNAMO_GET, {"Tabel": {}}, "STRICT", "Tabel is not a field of the API's output"),
    (DYNAMO_GET, {"Table": {"ItemCount": "many"}}, "PRESENT", "Table.ItemCount must be of type long"),
    (DYNAMO_GET, {"Table": {"TableStatus": "SLEEPING"}}, "PRESENT", "Table.TableStatus must be one of"),
    (LAMBDA_TASK, {"StatusCode": "200", "Payload": {}}, "STRICT", "StatusCode must be of type integer"),
    ({"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "End": True,
      "Parameters": {"QueueUrl": "q", "MessageBody": "m"}}, {"MessageId": 7}, "STRICT",
     "MessageId must be of type string"),
])
def test_a_mock_result_that_does_not_fit_the_apis_output_is_refused(sfn, state, result, mode, says):
    with pytest.raises(ClientError) as refused:
        run(sfn, state, {}, mock={"result": json.dumps(result), "fieldValidationMode": mode})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert says in refused.value.response["Error"]["Message"]


@pytest.mark.parametrize(("result", "mode"), [
    ({"Table": {"TableName": "t", "ItemCount": 3}}, "STRICT"),
    ({"Table": {"ItemCount": "many"}, "Extra": True}, "NONE"),
])
def test_a_mock_result_that_fits_or_is_not_checked_stands_for_the_call(sfn, result, mode):
    answer = run(sfn, DYNAMO_GET, {}, mock={"result": json.dumps(result), "fieldValidationMode": mode})
    assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == result


RETRIED = {**LAMBDA_TASK, "Retry": [{"ErrorEquals": ["Lambda.ServiceException"], "IntervalSeconds": 2,
                                     "MaxAttempts": 2},
                                    {"ErrorEquals": ["Lambda.Unknown"], "IntervalSeconds": 3, "MaxAttempts": 2}]}


def test_a_mocked_error_a_retrier_takes_is_retriable_with_the_retriers_index_and_backoff(sfn):
    answer = run(sfn, RETRIED, {}, inspectionLevel="DEBUG",
                 mock={"errorOutput": {"error": "Lambda.Unknown", "cause": "boom"}})
    assert answer["status"] == "RETRIABLE"
    assert answer["inspectionData"]["errorDetails"] == {"retryIndex": 1, "retryBackoffIntervalSeconds": 3}


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
    (PARALLEL, None, "SUCCEEDED"),
    (PARALLEL, {"errorOutput": {"error": "Branch.Failed"}}, "CAUGHT_ERROR"),
    (MAP, None, "SUCCEEDED"),
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
