"""TestState of a distributed Map through boto3: its own processing (ItemReader data, ItemsPath, ItemSelector,
ItemBatcher, tolerated failures) with a mock standing for its children, and every request AWS refuses for it."""

import json

import pytest
from botocore.exceptions import ClientError

ROLE = "arn:aws:iam::123456789012:role/r"
THRESHOLD = ("States.ExceedToleratedFailureThreshold", "The specified tolerated failure threshold was exceeded")
ITEMS = {"items": [{"n": 1}, {"n": 2}, {"n": 3}]}


def distributed(**fields) -> dict:
    return {"Type": "Map", "End": True, **fields, "ItemProcessor": {
        "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}, "StartAt": "Work",
        "States": {"Work": {"Type": "Pass", "End": True}}}}


def run(sfn, state: dict, payload: object = ITEMS, result: object = (), **options) -> dict:
    if result != ():
        options["mock"] = {"result": json.dumps(result)}
    return sfn.test_state(definition=json.dumps(state), roleArn=ROLE, input=json.dumps(payload), **options)


def refused(sfn, state: dict, payload: object = ITEMS, result: object = (), **options) -> tuple[str, str]:
    with pytest.raises(ClientError) as refusal:
        run(sfn, state, payload, result, **options)
    return refusal.value.response["Error"]["Code"], refusal.value.response["Error"]["Message"]


READER_JSON = {"Resource": "arn:aws:states:::s3:getObject", "ReaderConfig": {"InputType": "JSON"},
               "Parameters": {"Bucket": "b", "Key.$": "$.key"}}


def reader(**config) -> dict:
    return {"Resource": "arn:aws:states:::s3:getObject", "ReaderConfig": config,
            "Parameters": {"Bucket": "b", "Key": "k"}}


# -- the Map's own processing, at each inspection level


def test_items_path_item_selector_and_item_batcher_are_shown_as_the_map_runs_them(sfn):
    state = distributed(InputPath="$.order", ItemsPath="$.items", MaxConcurrency=5, ToleratedFailureCount=1,
                        Label="orders", ItemSelector={"n.$": "$$.Map.Item.Value.n", "at.$": "$$.Map.Item.Index"},
                        ItemBatcher={"MaxItemsPerBatch": 2, "BatchInput": {"order.$": "$.id"}})
    payload = {"order": {"id": "o-1", **ITEMS}}
    answer = run(sfn, state, payload, result=[["a", "b"], ["c"]], inspectionLevel="DEBUG")
    assert (answer["status"], json.loads(answer["output"])) == ("SUCCEEDED", [["a", "b"], ["c"]])
    data = answer["inspectionData"]
    assert json.loads(data["afterInputPath"]) == payload["order"]
    assert json.loads(data["afterItemsPath"]) == ITEMS["items"]
    selected = [{"n": 1, "at": 0}, {"n": 2, "at": 1}, {"n": 3, "at": 2}]
    assert json.loads(data["afterItemSelector"]) == selected
    assert json.loads(data["afterItemBatcher"]) == [{"BatchInput": {"order": "o-1"}, "Items": selected[:2]},
                                                    {"BatchInput": {"order": "o-1"}, "Items": selected[2:]}]
    assert (data["maxConcurrency"], data["toleratedFailureCount"]) == (5, 1)
    assert "toleratedFailurePercentage" not in data


def test_inspection_data_is_shown_at_debug_and_trace_only(sfn):
    state = distributed(ItemsPath="$.items", ToleratedFailurePercentage=10)
    assert "inspectionData" not in run(sfn, state, result=[1, 2, 3])
    trace = run(sfn, state, result=[1, 2, 3], inspectionLevel="TRACE")["inspectionData"]
    assert (trace["toleratedFailurePercentage"], trace["maxConcurrency"]) == (10.0, 0)


def test_a_distributed_map_named_in_a_whole_machine_is_tested_by_state_name(sfn):
    machine = {"StartAt": "Load", "States": {"Load": {"Type": "Pass", "Next": "Fan"},
                                             "Fan": {**distributed(ItemsPath="$.items"), "End": False, "Next": "Done"},
                                             "Done": {"Type": "Succeed"}}}
    answer = sfn.test_state(definition=json.dumps(machine), stateName="Fan", input=json.dumps(ITEMS),
                            mock={"result": "[1, 2, 3]"})
    assert (answer["status"], answer["nextState"], json.loads(answer["output"])) == ("SUCCEEDED", "Done", [1, 2, 3])
    other = sfn.test_state(definition=json.dumps(machine), stateName="Load", input="{}")  # beside a distributed Map
    assert (other["status"], other["nextState"]) == ("SUCCEEDED", "Fan")


def test_a_result_writers_summary_object_is_the_maps_result(sfn):
    summary = {"MapRunArn": "arn:aws:states:us-east-1:123456789012:mapRun:m/r:1",
               "ResultWriterDetails": {"Bucket": "b", "Key": "results/manifest.json"}}
    state = distributed(ItemsPath="$.items", ResultWriter={"Resource": "arn:aws:states:::s3:putObject",
                                                           "Parameters": {"Bucket": "b", "Prefix": "results"}},
                        ResultPath="$.written")
    answer = run(sfn, state, result=summary)
    assert json.loads(answer["output"]) == {**ITEMS, "written": summary}


def test_a_jsonata_distributed_map_evaluates_its_expressions_and_shows_no_jsonpath_steps(sfn):
    state = {**distributed(Items="{% $states.input.items %}", ItemSelector={"double": "{% $states.context.Map.Item"
                                                                                     ".Value.n * 2 %}"},
                           ToleratedFailureCount="{% $count($states.input.items) - 2 %}",
                           ItemBatcher={"MaxItemsPerBatch": "{% 1 + 1 %}"}),
             "QueryLanguage": "JSONata", "Output": "{% $count($states.result) %}"}
    answer = run(sfn, state, result=[1, 2, 3], inspectionLevel="DEBUG")
    assert json.loads(answer["output"]) == 3
    data = answer["inspectionData"]
    assert "afterItemsPath" not in data and "afterInputPath" not in data
    assert json.loads(data["afterItemBatcher"]) == [{"Items": [{"double": 2}, {"double": 4}]},
                                                    {"Items": [{"double": 6}]}]
    assert data["toleratedFailureCount"] == 1
    over = run(sfn, state, result=[1, 2, 3], stateConfiguration={"mapIterationFailureCount": 2})
    assert (over["status"], over["error"], over["cause"]) == ("FAILED", *THRESHOLD)


# -- mapIterationFailureCount and the tolerated failures


@pytest.mark.parametrize(("fields", "failures", "status"), [
    ({"ToleratedFailureCount": 1}, 1, "SUCCEEDED"),
    ({"ToleratedFailureCount": 1}, 2, "FAILED"),
    ({"ToleratedFailurePercentage": 34}, 1, "SUCCEEDED"),  # 1 of 3 is 33.3%
    ({"ToleratedFailurePercentage": 33}, 1, "FAILED"),
    ({"ToleratedFailureCount": 5, "ToleratedFailurePercentage": 50}, 2, "FAILED"),  # either threshold fails it
    ({}, 3, "SUCCEEDED"),  # no tolerated failures declared: AWS's TestState counts none
])
def test_failed_iterations_beyond_the_tolerated_ones_fail_the_map(sfn, fields, failures, status):
    answer = run(sfn, distributed(ItemsPath="$.items", **fields), result=[1, 2, 3],
                 stateConfiguration={"mapIterationFailureCount": failures})
    assert answer["status"] == status
    if status == "FAILED":
        assert (answer["error"], answer["cause"]) == THRESHOLD
    else:
        assert json.loads(answer["output"]) == [1, 2, 3]


def test_the_tolerated_failure_paths_read_the_maps_input(sfn):
    state = distributed(ItemsPath="$.items", ToleratedFailureCountPath="$.limits.count",
                        ToleratedFailurePercentagePath="$.limits.percent")
    payload = {**ITEMS, "limits": {"count": 2, "percent": 70}}
    answer = run(sfn, state, payload, result=[1], inspectionLevel="DEBUG", stateConfiguration={
        "mapIterationFailureCount": 1})
    assert answer["status"] == "SUCCEEDED"
    assert (answer["inspectionData"]["toleratedFailureCount"],
            answer["inspectionData"]["toleratedFailurePercentage"]) == (2, 70.0)
    bad = run(sfn, state, {**ITEMS, "limits": {"count": "two", "percent": 70}}, result=[1])
    assert (bad["status"], bad["error"]) == ("FAILED", "States.Runtime")
    assert "ToleratedFailureCountPath field refers to value \"two\"" in bad["cause"]


def test_an_exceeded_threshold_goes_to_the_catcher_that_takes_it(sfn):
    state = distributed(ItemsPath="$.items", ToleratedFailureCount=0, Catch=[
        {"ErrorEquals": ["Other"], "Next": "Elsewhere"},
        {"ErrorEquals": ["States.ExceedToleratedFailureThreshold"], "ResultPath": "$.error", "Next": "TooMany"}])
    answer = run(sfn, state, result=[1, 2], inspectionLevel="DEBUG", stateConfiguration={
        "mapIterationFailureCount": 1})
    assert (answer["status"], answer["error"], answer["nextState"]) == ("CAUGHT_ERROR", THRESHOLD[0], "TooMany")
    assert answer["inspectionData"]["errorDetails"] == {"catchIndex": 1}
    assert json.loads(answer["output"])["error"] == {"Error": THRESHOLD[0], "Cause": THRESHOLD[1]}


def test_an_exceeded_threshold_a_retrier_takes_is_retriable(sfn):
    state = distributed(ItemsPath="$.items", ToleratedFailureCount=0, Retry=[
        {"ErrorEquals": ["States.ExceedToleratedFailureThreshold"], "IntervalSeconds": 4, "MaxAttempts": 2}])
    answer = run(sfn, state, result=[1], inspectionLevel="DEBUG", stateConfiguration={
        "mapIterationFailureCount": 1})
    assert (answer["status"], answer["error"]) == ("RETRIABLE", THRESHOLD[0])
    assert answer["inspectionData"]["errorDetails"] == {"retryIndex": 0, "retryBackoffIntervalSeconds": 4}
    spent = run(sfn, state, result=[1], stateConfiguration={"mapIterationFailureCount": 1, "retrierRetryCount": 2})
    assert (spent["status"], spent["error"]) == ("FAILED", THRESHOLD[0])


@pytest.mark.parametrize("failures", [0, 2, 3])
def test_a_mocked_error_is_the_maps_error_whatever_the_failed_iterations(sfn, failures):
    state = distributed(ItemsPath="$.items", ToleratedFailureCount=2)
    mock = {"errorOutput": {"error": "MockException", "cause": "the item failed"}}
    answer = run(sfn, state, mock=mock, stateConfiguration={"mapIterationFailureCount": failures,
                                                            "errorCausedByState": "Work"})
    assert (answer["status"], answer["error"], answer["cause"]) == ("FAILED", "MockException", "the item failed")


# -- mapItemReaderData: what the ItemReader read, as found in its source


@pytest.mark.parametrize(("config", "data", "items"), [
    ({"InputType": "JSON"}, '[{"id": 1}, {"id": 2}]', [{"id": 1}, {"id": 2}]),
    ({"InputType": "JSONL"}, '{"id": 1}\n\n{"id": 2}\n', [{"id": 1}, {"id": 2}]),
    ({"InputType": "CSV", "CSVHeaderLocation": "FIRST_ROW"}, "id,name\n1,ann\n2,bo\n",
     [{"id": "1", "name": "ann"}, {"id": "2", "name": "bo"}]),
    ({"InputType": "CSV", "CSVHeaderLocation": "GIVEN", "CSVHeaders": ["id", "name"], "CSVDelimiter": "PIPE",
      "MaxItems": 2}, '1|ann\n2|"bo|b"\n3|cy\n', [{"id": "1", "name": "ann"}, {"id": "2", "name": "bo|b"}]),
])
def test_the_reader_config_makes_the_items_of_the_data_read(sfn, config, data, items):
    answer = run(sfn, distributed(ItemReader=reader(**config)), {}, result=[], inspectionLevel="DEBUG",
                 stateConfiguration={"mapItemReaderData": data})
    assert json.loads(answer["inspectionData"]["afterItemsPath"]) == items


def test_an_items_pointer_selects_the_array_inside_a_json_file(sfn):
    state = distributed(ItemReader=reader(InputType="JSON", ItemsPointer="/data/rows"),
                        ItemSelector={"row.$": "$$.Map.Item.Value", "key.$": "$.key"})
    answer = run(sfn, state, {"key": "k"}, result=[], inspectionLevel="DEBUG",
                 stateConfiguration={"mapItemReaderData": json.dumps({"data": {"rows": ["a", "b"]}})})
    data = answer["inspectionData"]
    assert json.loads(data["afterItemsPointer"]) == ["a", "b"] and "afterItemsPath" not in data
    assert json.loads(data["afterItemSelector"]) == [{"row": "a", "key": "k"}, {"row": "b", "key": "k"}]


def test_a_binary_or_manifest_reader_is_refused_as_test_state_data(sfn):
    code, message = refused(sfn, distributed(ItemReader=reader(InputType="PARQUET")), result=[],
                            stateConfiguration={"mapItemReaderData": "[]"})
    assert code == "ValidationException" and "'PARQUET' is read from S3 by an execution" in message


def test_a_listing_and_max_items_path_read_the_objects_listed(sfn):
    listing = [{"Key": "a.csv", "Size": 1}, {"Key": "b.csv", "Size": 2}, {"Key": "c.csv", "Size": 3}]
    state = distributed(ItemReader={"Resource": "arn:aws:states:::s3:listObjectsV2",
                                    "ReaderConfig": {"MaxItemsPath": "$.first"}, "Parameters": {"Bucket": "b"}})
    answer = run(sfn, state, {"first": 2}, result=[], inspectionLevel="DEBUG",
                 stateConfiguration={"mapItemReaderData": json.dumps(listing)})
    assert json.loads(answer["inspectionData"]["afterItemsPath"]) == listing[:2]


@pytest.mark.parametrize(("config", "data", "says"), [
    ({"InputType": "JSON"}, "[1, 2", "not valid JSON"),
    ({"InputType": "JSON"}, '{"rows": []}', "must hold a JSON array"),
    ({"InputType": "JSON", "ItemsPointer": "/nope"}, '{"rows": []}', "points at nothing"),
    ({"InputType": "CSV"}, "id,name\n1\n", "Row 1 of the data read has 1 fields"),
    ({"InputType": "JSONL"}, '{"id": 1}\nnot json\n', "not valid JSONL"),
])
def test_data_that_does_not_read_as_its_input_type_fails_the_map_with_item_reader_failed(sfn, config, data, says):
    state = distributed(ItemReader=reader(**config), Catch=[{"ErrorEquals": ["States.ItemReaderFailed"],
                                                             "Next": "Unreadable"}])
    answer = run(sfn, state, {}, result=[], stateConfiguration={"mapItemReaderData": data})
    assert (answer["status"], answer["error"], answer["nextState"]) == (
        "CAUGHT_ERROR", "States.ItemReaderFailed", "Unreadable")
    assert says in answer["cause"]


def test_a_jsonata_reader_reads_its_items_without_showing_them_as_after_items_path(sfn):
    state = {**distributed(ItemReader={"Resource": "arn:aws:states:::s3:getObject",
                                       "ReaderConfig": {"InputType": "JSON", "MaxItems": "{% $states.input.n %}"},
                                       "Arguments": {"Bucket": "{% $states.input.bucket %}", "Key": "k"}},
                           ItemSelector="{% $states.context.Map.Item.Value * 10 %}"), "QueryLanguage": "JSONata"}
    answer = run(sfn, state, {"bucket": "b", "n": 2}, result=[10, 20], inspectionLevel="DEBUG",
                 stateConfiguration={"mapItemReaderData": "[1, 2, 3]"})
    assert json.loads(answer["inspectionData"]["afterItemSelector"]) == [10, 20]
    assert "afterItemsPath" not in answer["inspectionData"]


# -- ItemBatcher


def test_batches_hold_at_most_max_input_bytes_per_batch(sfn):
    state = distributed(ItemsPath="$.items", ItemBatcher={"MaxInputBytesPerBatchPath": "$.bytes"})
    payload = {"items": ["aaaa", "bbbb", "cccc"], "bytes": len('{"Items":["aaaa","bbbb"]}')}
    answer = run(sfn, state, payload, result=[], inspectionLevel="DEBUG")
    assert json.loads(answer["inspectionData"]["afterItemBatcher"]) == [{"Items": ["aaaa", "bbbb"]},
                                                                        {"Items": ["cccc"]}]
    too_big = run(sfn, state, {**payload, "bytes": 12}, result=[])
    assert (too_big["status"], too_big["error"]) == ("FAILED", "States.Runtime")
    assert "does not fit in a batch of MaxInputBytesPerBatch 12 bytes" in too_big["cause"]


# -- what AWS refuses


AWS_NEEDS_MOCK = ("TestState API does not support Map or Parallel states. Supported state types include: [Task, Wait, "
                  "Pass, Succeed, Fail, Choice]")


def test_a_distributed_map_without_a_mock_is_refused_as_aws_refuses_it(sfn):
    assert refused(sfn, distributed(ItemsPath="$.items")) == ("InvalidDefinition", AWS_NEEDS_MOCK)
    parallel = {"Type": "Parallel", "End": True, "Branches": [
        {"StartAt": "Inner", "States": {"Inner": distributed(ItemsPath="$.items")}}]}
    assert refused(sfn, parallel) == ("InvalidDefinition", AWS_NEEDS_MOCK)


@pytest.mark.parametrize(("state", "result", "options", "says"), [
    (distributed(ItemsPath="$.items"), {"not": "an array"}, {}, "Mocked result must be an array."),
    (distributed(ItemsPath="$.items", ResultWriter={"Resource": "arn:aws:states:::s3:putObject",
                                                    "Parameters": {"Bucket": "b", "Prefix": "p"}}),
     [1], {}, "Mocked result must be a JSON object."),
    ({"Type": "Map", "End": True, "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}},
     "x", {}, "Mocked result must be an array."),
    (distributed(ItemsPath="$.items"), [1], {"revealSecrets": True},
     "TestState does not support RevealSecrets when a mock is specified."),
    ({"Type": "Pass", "End": True}, (), {"stateConfiguration": {"mapIterationFailureCount": 1}},
     "mapIterationFailureCount applies to a Map state; 'TestState' is a Pass state"),
    ({"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "Parameters": {"FunctionName": "f"}, "End": True},
     {"StatusCode": 200}, {"stateConfiguration": {"mapItemReaderData": "[]"}},
     "mapItemReaderData applies to a Map state; 'TestState' is a Task state"),
    (distributed(ItemsPath="$.items", ToleratedFailureCount=5), [1], {"stateConfiguration": {
        "mapIterationFailureCount": 4}}, "mapIterationFailureCount is 4, more than the 3 iterations the Map state "
                                         "'TestState' runs"),
    (distributed(ItemsPath="$.items", ItemBatcher={"MaxItemsPerBatch": 2}), [1, 2], {"stateConfiguration": {
        "mapIterationFailureCount": 3}}, "more than the 2 iterations the Map state 'TestState' runs"),
    ({"Type": "Map", "ItemsPath": "$.items", "End": True,
      "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}}, [1],
     {"stateConfiguration": {"mapIterationFailureCount": 4}}, "more than the 3 iterations the Map state"),
    (distributed(ItemsPath="$.items"), [], {"stateConfiguration": {"mapItemReaderData": "[]"}},
     "the Map state 'TestState' has no ItemReader"),
    (distributed(ItemReader=READER_JSON), [], {}, "give the data it reads as stateConfiguration.mapItemReaderData"),
])
def test_a_request_that_does_not_fit_the_state_is_a_validation_exception(sfn, state, result, options, says):
    code, message = refused(sfn, state, ITEMS, result, **options)
    assert code == "ValidationException"
    assert says in message


def test_a_negative_failure_count_is_refused_by_the_server_too(server):
    unchecked = server.client(parameter_validation=False)
    code, message = refused(unchecked, distributed(ItemsPath="$.items"), result=[1], stateConfiguration={
        "mapIterationFailureCount": -1})
    assert code == "ValidationException"
    assert "'stateConfiguration.mapIterationFailureCount' failed to satisfy constraint" in message


@pytest.mark.parametrize(("state", "says"), [
    ({**distributed(ItemsPath="$.items"), "ItemProcessor": {"ProcessorConfig": {"Mode": "DISTRIBUTED"}, "StartAt": "W",
                                                            "States": {"W": {"Type": "Pass", "End": True}}}},
     "These fields are required: [ExecutionType]"),
    (distributed(ItemsPath="$.items", ItemReader=READER_JSON),
     "There should only be one of the following fields: [ItemsPath, ItemReader]"),
    (distributed(ItemReader=reader(InputType="JSON", ManifestType="S3_INVENTORY")),
     "The field 'ManifestType' is supported only when 'InputType' is 'MANIFEST'"),
    (distributed(ItemReader=reader(InputType="CSV", CSVHeaderLocation="GIVEN")),
     "These fields are required: [CSVHeaders]"),
    (distributed(ItemReader={"Resource": "arn:aws:states:::s3:putObject", "ReaderConfig": {"InputType": "JSON"}}),
     "Value should be one of the following: [arn:aws:states:::s3:getObject, arn:aws:states:::s3:listObjectsV2]"),
    (distributed(ItemBatcher={"BatchInput": {}}), "One of the following fields is required: [MaxItemsPerBatch"),
    (distributed(ToleratedFailurePercentage=150), "Value should be between 0 and 100"),
    (distributed(ToleratedFailureCount=1, ToleratedFailureCountPath="$.n"),
     "There should only be one of the following fields: [ToleratedFailureCount, ToleratedFailureCountPath]"),
    ({"Type": "Map", "End": True, "ItemReader": READER_JSON,
      "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}},
     "The field 'ItemReader' is supported only when the ItemProcessor's ProcessorConfig Mode is 'DISTRIBUTED'"),
])
def test_a_distributed_map_that_is_not_valid_is_an_invalid_definition(sfn, state, says):
    code, message = refused(sfn, state, result=[])
    assert code == "InvalidDefinition"
    assert says in message
