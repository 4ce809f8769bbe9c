"""Distributed Map through boto3: map runs, their children, MaxConcurrency, tolerated failures, batching, the map run
APIs, stop and update mid-run, S3 ItemReaders against moto, and a SIGKILL mid-run."""

import gzip
import io
import json
import time

import boto3
import pytest
from moto.server import ThreadedMotoServer

from aws import aws_client, server_env
from server import ServerProcess, free_port, history, raw_call, wait_closed

ROLE = "arn:aws:iam::123456789012:role/r"


def distributed(processor_states: dict, start_at: str = "P", **fields) -> dict:
    return {"Type": "Map", "End": True, **fields,
            "ItemProcessor": {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                              "StartAt": start_at, "States": processor_states}}


DOUBLE = {"P": {"Type": "Pass", "Parameters": {"v.$": "$.v", "twice.$": "States.MathAdd($.v, $.v)"}, "End": True}}
# A child that sleeps a second, then fails when its item says so.
SLEEPY = {"W": {"Type": "Wait", "Seconds": 1, "Next": "C"},
          "C": {"Type": "Choice", "Choices": [{"Variable": "$.fail", "BooleanEquals": True, "Next": "F"}],
                "Default": "S"},
          "F": {"Type": "Fail", "Error": "ItemBroke", "Cause": "asked to"},
          "S": {"Type": "Succeed"}}


def run(sfn, machine_arn: str, given: object, deadline_s: float = 30) -> tuple[dict, list[dict]]:
    execution = sfn.start_execution(stateMachineArn=machine_arn, input=json.dumps(given))
    described = wait_closed(sfn, execution["executionArn"], deadline_s)
    return described, history(sfn, execution["executionArn"])


def map_run_of(events: list[dict]) -> str:
    return next(event["mapRunStartedEventDetails"]["mapRunArn"] for event in events if event["type"] == "MapRunStarted")


def children(sfn, map_run_arn: str) -> list[dict]:
    found, token = [], None
    while True:
        page = sfn.list_executions(mapRunArn=map_run_arn, **({"nextToken": token} if token else {}))
        found += page["executions"]
        token = page.get("nextToken")
        if not token:
            return found


def most_running_at_once(sfn, executions: list[dict]) -> int:
    """From the children's own histories: the most that were between their first and last event at one time."""
    spans = []
    for child in executions:
        events = history(sfn, child["executionArn"])
        spans.append((events[0]["timestamp"], events[-1]["timestamp"]))
    # At one instant, children that ended end first, then children start, then those that ended as they began.
    moments = sorted([(start, 1, 1) for start, _ in spans] + [(stop, 0 if start < stop else 2, -1)
                                                              for start, stop in spans])
    running = most = 0
    for _, _, change in moments:
        running += change
        most = max(most, running)
    return most


def test_children_run_each_item_and_the_output_is_theirs_in_order(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(DOUBLE, ItemsPath="$.items", Label="fanout")}})
    described, events = run(sfn, machine, {"items": [{"v": i} for i in range(7)]})
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == [{"v": i, "twice": 2 * i} for i in range(7)]
    # The parent's history names the run, never a child (AWS's recorded order; Exited points at MapRunStarted).
    assert [(event["type"], event["previousEventId"]) for event in events] == [
        ("ExecutionStarted", 0), ("MapStateEntered", 0), ("MapStateStarted", 2), ("MapRunStarted", 3),
        ("MapRunSucceeded", 4), ("MapStateSucceeded", 5), ("MapStateExited", 4), ("ExecutionSucceeded", 7)]
    assert events[2]["mapStateStartedEventDetails"] == {"length": 7}
    map_run = map_run_of(events)
    machine_name = machine.rsplit(":", 1)[1]
    assert f":mapRun:{machine_name}/fanout:" in map_run


def test_the_legacy_iterator_spelling_runs_a_distributed_map_too(sfn, make_machine):
    fan = distributed(DOUBLE, ItemsPath="$.items")
    fan["Iterator"] = fan.pop("ItemProcessor")  # ProcessorConfig inside Iterator, as AWS takes it
    machine = make_machine({"StartAt": "M", "States": {"M": fan}})
    described, events = run(sfn, machine, {"items": [{"v": 1}, {"v": 2}]})
    assert json.loads(described["output"]) == [{"v": 1, "twice": 2}, {"v": 2, "twice": 4}]
    assert "MapRunStarted" in [event["type"] for event in events]


def test_the_map_run_apis_describe_the_run_and_its_children(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(DOUBLE, ItemsPath="$.items", Label="apis",
                                                                        MaxConcurrency=3)}})
    described, events = run(sfn, machine, {"items": [{"v": i} for i in range(5)]})
    map_run = map_run_of(events)
    runs = sfn.list_map_runs(executionArn=described["executionArn"])["mapRuns"]
    assert [(item["mapRunArn"], item["executionArn"]) for item in runs] == [(map_run, described["executionArn"])]
    assert runs[0]["stateMachineArn"] == f"{machine}/apis"
    run_described = sfn.describe_map_run(mapRunArn=map_run)
    counts = {"pending": 0, "running": 0, "succeeded": 5, "failed": 0, "timedOut": 0, "aborted": 0, "total": 5,
              "resultsWritten": 5, "failuresNotRedrivable": 0, "pendingRedrive": 0}
    assert run_described["status"] == "SUCCEEDED"
    assert run_described["maxConcurrency"] == 3
    assert run_described["toleratedFailureCount"] == 0 and run_described["toleratedFailurePercentage"] == 0.0
    assert run_described["itemCounts"] == counts and run_described["executionCounts"] == counts
    assert run_described["executionArn"] == described["executionArn"]
    kids = children(sfn, map_run)
    assert len(kids) == 5 and {kid["status"] for kid in kids} == {"SUCCEEDED"}
    assert {kid["stateMachineArn"] for kid in kids} == {f"{machine}/apis"}
    assert {kid["mapRunArn"] for kid in kids} == {map_run}
    assert {kid["itemCount"] for kid in kids} == {1}
    child = sfn.describe_execution(executionArn=kids[0]["executionArn"])
    assert child["mapRunArn"] == map_run and child["stateMachineArn"] == f"{machine}/apis"
    assert json.loads(child["output"])["twice"] == 2 * json.loads(child["input"])["v"]
    for_child = sfn.describe_state_machine_for_execution(executionArn=kids[0]["executionArn"])
    assert for_child["label"] == "apis" and for_child["mapRunArn"] == map_run
    assert json.loads(for_child["definition"])["States"] == DOUBLE
    assert [event["type"] for event in history(sfn, kids[0]["executionArn"])] == [
        "ExecutionStarted", "PassStateEntered", "PassStateExited", "ExecutionSucceeded"]


def test_express_children_are_listed_and_described_through_their_map_run(sfn, make_machine):
    fan = distributed(DOUBLE, ItemsPath="$.items", Label="quick")
    fan["ItemProcessor"]["ProcessorConfig"]["ExecutionType"] = "EXPRESS"
    machine = make_machine({"StartAt": "M", "States": {"M": fan}})
    described, events = run(sfn, machine, {"items": [{"v": 1}, {"v": 2}]})
    assert json.loads(described["output"]) == [{"v": 1, "twice": 2}, {"v": 2, "twice": 4}]
    kids = children(sfn, map_run_of(events))
    assert len(kids) == 2 and {kid["status"] for kid in kids} == {"SUCCEEDED"}
    child = sfn.describe_execution(executionArn=kids[0]["executionArn"])
    assert child["mapRunArn"] == map_run_of(events) and json.loads(child["output"])["twice"] in (2, 4)


def test_results_inline_past_256_kib_fail_the_map_with_data_limit_exceeded(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(
        {"P": {"Type": "Pass", "Result": "x" * 2_000, "End": True}}, ItemsPath="$.items", MaxConcurrency=200)}})
    described, _ = run(sfn, machine, {"items": list(range(150))}, 60)  # 150 results of 2 KB: past 256 KiB
    assert (described["status"], described["error"]) == ("FAILED", "States.DataLimitExceeded")


def test_max_concurrency_is_never_exceeded(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(
        {"W": {"Type": "Wait", "Seconds": 1, "End": True}}, start_at="W", ItemsPath="$.items", MaxConcurrency=2)}})
    described, events = run(sfn, machine, {"items": list(range(4))})
    assert described["status"] == "SUCCEEDED"
    kids = children(sfn, map_run_of(events))
    assert len(kids) == 4
    assert most_running_at_once(sfn, kids) == 2


def test_a_failed_child_fails_the_run_when_no_failure_is_tolerated(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(SLEEPY, start_at="W", ItemsPath="$.items")}})
    described, events = run(sfn, machine, {"items": [{"fail": False}, {"fail": True}, {"fail": False}]})
    assert described["status"] == "FAILED"
    assert described["error"] == "States.ExceedToleratedFailureThreshold"
    failed = next(event for event in events if event["type"] == "MapRunFailed")
    assert failed["mapRunFailedEventDetails"]["error"] == "States.ExceedToleratedFailureThreshold"
    assert [event["type"] for event in events][-3:] == ["MapRunFailed", "MapStateFailed", "ExecutionFailed"]
    assert sfn.describe_map_run(mapRunArn=map_run_of(events))["status"] == "FAILED"


def test_tolerated_failures_let_the_run_succeed_with_each_failure_recorded_in_the_output(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(
        SLEEPY, start_at="W", ItemsPath="$.items", ToleratedFailureCount=1)}})
    described, events = run(sfn, machine, {"items": [{"fail": False}, {"fail": True}, {"fail": False}]})
    assert described["status"] == "SUCCEEDED"
    output = json.loads(described["output"])
    # A failed child's part is its whole record, whatever the Transformation (AWS's ResultWriter (Map) page)
    assert (output[1]["Status"], output[1]["Error"], output[1]["Cause"]) == ("FAILED", "ItemBroke", "asked to")
    assert output[0] == {"fail": False}
    counts = sfn.describe_map_run(mapRunArn=map_run_of(events))["executionCounts"]
    assert (counts["succeeded"], counts["failed"], counts["total"]) == (2, 1, 3)


def test_a_tolerated_percentage_is_of_all_the_children(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(
        SLEEPY, start_at="W", ItemsPath="$.items", ToleratedFailurePercentage=30, MaxConcurrency=10)}})
    one_in_four = [{"fail": index == 0} for index in range(4)]
    assert run(sfn, machine, {"items": one_in_four})[0]["status"] == "SUCCEEDED"
    two_in_four = [{"fail": index < 2} for index in range(4)]
    assert run(sfn, machine, {"items": two_in_four})[0]["error"] == "States.ExceedToleratedFailureThreshold"


def test_catch_takes_the_run_failure(sfn, make_machine):
    fan = distributed(SLEEPY, start_at="W", ItemsPath="$.items", Next="Caught")
    del fan["End"]
    fan["Catch"] = [{"ErrorEquals": ["States.ExceedToleratedFailureThreshold"], "Next": "Caught"}]
    machine = make_machine({"StartAt": "M", "States": {"M": fan, "Caught": {"Type": "Pass", "End": True}}})
    described, _ = run(sfn, machine, {"items": [{"fail": True}]})
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["Error"] == "States.ExceedToleratedFailureThreshold"


def test_batches_are_children_and_items_are_counted_by_item(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(
        {"P": {"Type": "Pass", "End": True}}, ItemsPath="$.items",
        ItemBatcher={"MaxItemsPerBatch": 2, "BatchInput": {"run.$": "$.run"}})}})
    described, events = run(sfn, machine, {"run": "r1", "items": [1, 2, 3, 4, 5]})
    assert json.loads(described["output"]) == [{"BatchInput": {"run": "r1"}, "Items": [1, 2]},
                                               {"BatchInput": {"run": "r1"}, "Items": [3, 4]},
                                               {"BatchInput": {"run": "r1"}, "Items": [5]}]
    run_described = sfn.describe_map_run(mapRunArn=map_run_of(events))
    assert run_described["executionCounts"]["total"] == 3 and run_described["executionCounts"]["succeeded"] == 3
    assert run_described["itemCounts"]["total"] == 5 and run_described["itemCounts"]["succeeded"] == 5
    assert sorted(kid["itemCount"] for kid in children(sfn, map_run_of(events))) == [1, 2, 2]


def test_stopping_the_parent_aborts_the_run_and_its_children(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(
        {"W": {"Type": "Wait", "Seconds": 300, "End": True}}, start_at="W", ItemsPath="$.items", MaxConcurrency=2)}})
    arn, map_run = start_run(sfn, machine, list(range(5)))
    _when(lambda: len([kid for kid in children(sfn, map_run) if kid["status"] == "RUNNING"]) == 2 or None)
    # Nothing is written while the run runs (AWS: resultsWritten 0)
    assert sfn.describe_map_run(mapRunArn=map_run)["executionCounts"]["resultsWritten"] == 0
    sfn.stop_execution(executionArn=arn, error="Enough", cause="stopped by the test")
    assert _when(lambda: sfn.describe_map_run(mapRunArn=map_run)["status"] == "ABORTED" or None)
    assert _when(lambda: {kid["status"] for kid in children(sfn, map_run)} == {"ABORTED"} or None)
    assert len(children(sfn, map_run)) == 2  # the other three never started
    counts = sfn.describe_map_run(mapRunArn=map_run)["executionCounts"]
    assert (counts["aborted"], counts["pending"], counts["running"], counts["resultsWritten"]) == (2, 3, 0, 0)
    with pytest.raises(sfn.exceptions.ValidationException, match="only a running Map Run"):
        sfn.update_map_run(mapRunArn=map_run, maxConcurrency=5)
    assert sfn.describe_map_run(mapRunArn=map_run)["maxConcurrency"] == 2


def test_update_map_run_raises_max_concurrency_mid_run(sfn, make_machine):
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(
        {"W": {"Type": "Wait", "Seconds": 1, "End": True}}, start_at="W", ItemsPath="$.items", MaxConcurrency=1)}})
    arn, map_run = start_run(sfn, machine, list(range(6)))
    sfn.update_map_run(mapRunArn=map_run, maxConcurrency=6)
    assert sfn.describe_map_run(mapRunArn=map_run)["maxConcurrency"] == 6
    assert _when(lambda: sfn.describe_map_run(mapRunArn=map_run)["executionCounts"]["running"] > 1 or None)
    assert wait_closed(sfn, arn)["status"] == "SUCCEEDED"


def test_redriving_the_parent_redrives_its_run_keeping_what_succeeded(sfn, make_machine):
    activity = sfn.create_activity(name=f"items-{time.monotonic_ns()}")["activityArn"]
    machine = make_machine({"StartAt": "M", "States": {"M": distributed(
        {"T": {"Type": "Task", "Resource": activity, "TimeoutSeconds": 60, "End": True}}, start_at="T",
        ItemsPath="$.items", MaxConcurrency=1)}})
    arn = sfn.start_execution(stateMachineArn=machine, input=json.dumps({"items": [0, 1, 2]}))["executionArn"]

    def answer(fail: bool) -> int:
        task = sfn.get_activity_task(activityArn=activity)
        item = json.loads(task["input"])
        if fail:
            sfn.send_task_failure(taskToken=task["taskToken"], error="Flaky", cause="the first time")
        else:
            sfn.send_task_success(taskToken=task["taskToken"], output=json.dumps({"done": item}))
        return item

    assert answer(fail=False) == 0
    assert answer(fail=True) == 1
    failed = wait_closed(sfn, arn)
    assert (failed["status"], failed["error"]) == ("FAILED", "States.ExceedToleratedFailureThreshold")
    map_run = map_run_of(history(sfn, arn))
    assert sfn.describe_map_run(mapRunArn=map_run)["executionCounts"]["pending"] == 1  # the third never started
    # The failed child is redriven by its run, through its parent, never directly
    broken = next(kid for kid in children(sfn, map_run) if kid["status"] == "FAILED")
    assert sfn.describe_execution(executionArn=broken["executionArn"])["redriveStatus"] == "REDRIVABLE_BY_MAP_RUN"
    with pytest.raises(sfn.exceptions.ExecutionNotRedrivable, match="redrive its parent execution"):
        sfn.redrive_execution(executionArn=broken["executionArn"])

    sfn.redrive_execution(executionArn=arn)
    assert sorted([answer(fail=False), answer(fail=False)]) == [1, 2]
    described = wait_closed(sfn, arn)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == [{"done": 0}, {"done": 1}, {"done": 2}]
    events = history(sfn, arn)
    redriven = next(event for event in events if event["type"] == "MapRunRedriven")
    assert redriven["mapRunRedrivenEventDetails"] == {"mapRunArn": map_run, "redriveCount": 1}
    run_described = sfn.describe_map_run(mapRunArn=map_run)
    assert (run_described["status"], run_described["redriveCount"]) == ("SUCCEEDED", 1)
    assert "redriveDate" in run_described
    counts = run_described["executionCounts"]
    assert (counts["succeeded"], counts["failed"], counts["total"]) == (3, 0, 3)
    kids = {kid["name"]: kid for kid in children(sfn, map_run)}
    assert len(kids) == 3 and sorted(kid["redriveCount"] for kid in kids.values()) == [0, 0, 1]
    redriven = sfn.list_executions(mapRunArn=map_run, redriveFilter="REDRIVEN")["executions"]
    assert [kid["redriveCount"] for kid in redriven] == [1]


def test_test_state_and_an_execution_agree_on_the_children_inputs(sfn, make_machine):
    fan = distributed({"P": {"Type": "Pass", "End": True}}, ItemsPath="$.items", MaxConcurrency=2,
                      ItemSelector={"value.$": "$$.Map.Item.Value", "index.$": "$$.Map.Item.Index", "tag.$": "$.tag"},
                      ItemBatcher={"MaxItemsPerBatch": 2, "BatchInput": {"tag.$": "$.tag"}})
    given = {"tag": "t", "items": ["a", "b", "c"]}
    tested = sfn.test_state(definition=json.dumps({"StartAt": "M", "States": {"M": fan}}), stateName="M",
                            input=json.dumps(given), inspectionLevel="DEBUG", mock={"result": "[]"})
    batches = json.loads(tested["inspectionData"]["afterItemBatcher"])
    machine = make_machine({"StartAt": "M", "States": {"M": fan}})
    described, events = run(sfn, machine, given)
    assert json.loads(described["output"]) == batches
    inputs = sorted((json.loads(sfn.describe_execution(executionArn=kid["executionArn"])["input"])
                     for kid in children(sfn, map_run_of(events))), key=lambda batch: batch["Items"][0]["index"])
    assert inputs == batches


def test_map_run_apis_answer_bad_input_as_aws_does(sfn, server):
    region_account = "us-east-1:123456789012"
    missing = f"arn:aws:states:{region_account}:mapRun:nothing/label:0f0e0d0c-0000-4000-8000-000000000000"
    with pytest.raises(sfn.exceptions.ResourceNotFound):
        sfn.describe_map_run(mapRunArn=missing)
    with pytest.raises(sfn.exceptions.InvalidArn):
        sfn.describe_map_run(mapRunArn=f"arn:aws:states:{region_account}:execution:nothing:x")
    with pytest.raises(sfn.exceptions.ResourceNotFound):
        sfn.update_map_run(mapRunArn=missing, maxConcurrency=2)
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.list_map_runs(executionArn=f"arn:aws:states:{region_account}:execution:nothing:x")
    with pytest.raises(sfn.exceptions.ResourceNotFound):
        sfn.list_executions(mapRunArn=missing)
    with pytest.raises(sfn.exceptions.ClientError) as both:
        sfn.list_executions(mapRunArn=missing, stateMachineArn=f"arn:aws:states:{region_account}:stateMachine:x")
    assert both.value.response["Error"]["Code"] == "ValidationException"
    status, body = raw_call(server, "AWSStepFunctions.UpdateMapRun",
                            json.dumps({"mapRunArn": missing, "toleratedFailurePercentage": 150}).encode())
    assert status == 400 and "less than or equal to 100" in body["message"]


def start_run(sfn, machine_arn: str, items: list) -> tuple[str, str]:
    """Start an execution over ``items``; its ARN and its map run's, once the run exists."""
    arn = sfn.start_execution(stateMachineArn=machine_arn, input=json.dumps({"items": items}))["executionArn"]
    map_run = _when(lambda: next((map_run_of([event]) for event in history(sfn, arn)
                                  if event["type"] == "MapRunStarted"), None))
    # The run's own row is created by a transfer from the parent's shard, a tick or more after MapRunStarted
    _when(lambda: sfn.list_map_runs(executionArn=arn)["mapRuns"] or None)
    return arn, map_run


def _when(probe, deadline_s: float = 20):
    """Poll ``probe`` until it returns something (a bounded wait, not a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = probe()
        if found is not None:
            return found
        time.sleep(0.05)
    raise AssertionError("never happened")


# -- ItemReader from S3 (moto)


@pytest.fixture
def s3(moto):
    client = boto3.client("s3", endpoint_url=moto, region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")
    client.create_bucket(Bucket="items")
    return client


@pytest.fixture
def aws_sfn(aws_server):
    return aws_server.client()


def reader_machine(sfn, reader: dict, **fields) -> str:
    definition = {"StartAt": "M", "States": {"M": distributed({"P": {"Type": "Pass", "End": True}},
                                                             ItemReader=reader, **fields)}}
    return sfn.create_state_machine(name=f"reader-{time.monotonic_ns()}", definition=json.dumps(definition),
                                    roleArn=ROLE)["stateMachineArn"]


def test_items_are_read_from_a_jsonl_object(aws_sfn, s3):
    s3.put_object(Bucket="items", Key="rows.jsonl", Body=b'{"n": 1}\n{"n": 2}\n\n{"n": 3}\n')
    machine = reader_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                       "ReaderConfig": {"InputType": "JSONL"},
                                       "Parameters": {"Bucket": "items", "Key.$": "$.key"}})
    described, events = run(aws_sfn, machine, {"key": "rows.jsonl"})
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert next(event for event in events if event["type"] == "MapStateStarted")[
        "mapStateStartedEventDetails"] == {"length": 0}


def test_items_are_read_from_a_csv_object_with_given_headers_and_a_limit(aws_sfn, s3):
    s3.put_object(Bucket="items", Key="rows.csv", Body=b"1;a\n2;b\n3;c\n")
    config = {"InputType": "CSV", "CSVHeaderLocation": "GIVEN", "CSVHeaders": ["id", "name"],
              "CSVDelimiter": "SEMICOLON", "MaxItems": 2}
    machine = reader_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                       "Parameters": {"Bucket": "items", "Key": "rows.csv"}, "ReaderConfig": config})
    described, _ = run(aws_sfn, machine, {})
    assert json.loads(described["output"]) == [{"id": "1", "name": "a"}, {"id": "2", "name": "b"}]


def test_items_are_read_from_a_json_object_at_its_items_pointer(aws_sfn, s3):
    s3.put_object(Bucket="items", Key="doc.json", Body=json.dumps({"data": {"rows": [10, 20]}}).encode())
    machine = reader_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:getObject", "Parameters": {
        "Bucket": "items", "Key": "doc.json"}, "ReaderConfig": {"InputType": "JSON", "ItemsPointer": "/data/rows"}},
        ItemSelector={"value.$": "$$.Map.Item.Value", "index.$": "$$.Map.Item.Index"})
    described, _ = run(aws_sfn, machine, {})
    assert json.loads(described["output"]) == [{"value": 10, "index": 0}, {"value": 20, "index": 1}]


def test_items_are_the_objects_a_listing_finds(aws_sfn, s3):
    for name in ("in/a.txt", "in/b.txt", "other/c.txt"):
        s3.put_object(Bucket="items", Key=name, Body=b"hello")
    machine = reader_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:listObjectsV2",
                                       "Parameters": {"Bucket": "items", "Prefix": "in/"}})
    described, _ = run(aws_sfn, machine, {})
    listed = json.loads(described["output"])
    assert [item["Key"] for item in listed] == ["in/a.txt", "in/b.txt"]
    assert {item["Size"] for item in listed} == {5}
    assert set(listed[0]) == {"Etag", "Key", "LastModified", "Size", "StorageClass"}
    assert isinstance(listed[0]["LastModified"], int)  # epoch seconds, as AWS's ItemReader (Map) page shows


def test_parameters_s3_does_not_take_fail_the_map_at_once(aws_sfn, s3):
    machine = reader_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                       "ReaderConfig": {"InputType": "JSON"}, "Parameters": {"Bucket": "items"}})
    described, _ = run(aws_sfn, machine, {})
    assert described["error"] == "States.ItemReaderFailed" and "parameters are not valid" in described["cause"]


def test_a_missing_object_fails_the_map_with_item_reader_failed(aws_sfn, s3):
    machine = reader_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                       "ReaderConfig": {"InputType": "JSON"},
                                       "Parameters": {"Bucket": "items", "Key": "nowhere.json"}})
    described, events = run(aws_sfn, machine, {})
    assert described["status"] == "FAILED"
    assert described["error"] == "States.ItemReaderFailed"
    assert [event["type"] for event in events][-4:] == ["MapRunStarted", "MapRunFailed", "MapStateFailed",
                                                        "ExecutionFailed"]
    first_run = map_run_of(events)
    assert _when(lambda: sfn_status(aws_sfn, first_run) == "FAILED" or None)
    # A redrive starts a new run, as AWS starts a new Map Run where the ItemReader failed
    s3.put_object(Bucket="items", Key="nowhere.json", Body=b"[1, 2]")
    aws_sfn.redrive_execution(executionArn=described["executionArn"])
    described = wait_closed(aws_sfn, described["executionArn"])
    assert described["status"] == "SUCCEEDED", described
    events = history(aws_sfn, described["executionArn"])
    runs = [map_run_of([event]) for event in events if event["type"] == "MapRunStarted"]
    assert len(runs) == 2 and runs[0] == first_run != runs[1]
    assert sfn_status(aws_sfn, runs[1]) == "SUCCEEDED"
    assert [run["mapRunArn"] for run in aws_sfn.list_map_runs(executionArn=described["executionArn"])[
        "mapRuns"]] == runs[::-1]


@pytest.mark.parametrize(("input_type", "body", "says"), [
    ("JSON", b'{"not": "a list"}', "must hold a JSON array"),
    ("PARQUET", b"not parquet at all", "not a Parquet file"),
    ("MANIFEST", b"[]", "not an S3 Inventory manifest"),
    ("CSV", b"id,name,id\n1,a,2\n", "names the column 'id' twice"),
    ("CSV", b"id,,name\n1,a,b\n", "names no column 2"),
])
def test_an_object_that_is_not_its_input_type_fails_the_map(aws_sfn, s3, input_type, body, says):
    s3.put_object(Bucket="items", Key=f"object.{input_type}", Body=body)
    machine = reader_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                       "ReaderConfig": {"InputType": input_type, **(
                                           {"CSVHeaderLocation": "FIRST_ROW"} if input_type == "CSV" else {})},
                                       "Parameters": {"Bucket": "items", "Key": f"object.{input_type}"}})
    described, _ = run(aws_sfn, machine, {})
    assert described["error"] == "States.ItemReaderFailed"
    assert says in described["cause"]


def test_items_are_the_rows_of_a_parquet_object(aws_sfn, s3):
    import pyarrow
    import pyarrow.parquet

    sink = io.BytesIO()
    pyarrow.parquet.write_table(pyarrow.table({"id": [1, 2], "name": ["a", "b"]}), sink)
    s3.put_object(Bucket="items", Key="rows.parquet", Body=sink.getvalue())
    machine = reader_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                       "ReaderConfig": {"InputType": "PARQUET"},
                                       "Parameters": {"Bucket": "items", "Key": "rows.parquet"}})
    described, _ = run(aws_sfn, machine, {})
    assert json.loads(described["output"]) == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


def test_items_are_the_objects_an_s3_inventory_manifest_lists(aws_sfn, s3):
    s3.put_object(Bucket="items", Key="inventory/data/part-0.csv.gz",
                  Body=gzip.compress(b'"items","photos/a.jpg","12"\n"items","photos/b.jpg","34"\n'))
    s3.put_object(Bucket="items", Key="inventory/data/part-1.csv", Body=b'"items","photos/c.jpg","56"\n')
    manifest = {"sourceBucket": "items", "destinationBucket": "arn:aws:s3:::items", "version": "2016-11-30",
                "fileFormat": "CSV", "fileSchema": "Bucket, Key, Size",
                "files": [{"key": "inventory/data/part-0.csv.gz", "size": 1, "MD5checksum": "x"},
                          {"key": "inventory/data/part-1.csv", "size": 1, "MD5checksum": "y"}]}
    s3.put_object(Bucket="items", Key="inventory/manifest.json", Body=json.dumps(manifest).encode())
    machine = reader_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                       "ReaderConfig": {"InputType": "MANIFEST"},
                                       "Parameters": {"Bucket": "items", "Key": "inventory/manifest.json"}})
    described, _ = run(aws_sfn, machine, {})
    assert [item["Key"] for item in json.loads(described["output"])] == ["photos/a.jpg", "photos/b.jpg",
                                                                          "photos/c.jpg"]
    assert json.loads(described["output"])[0] == {"Bucket": "items", "Key": "photos/a.jpg", "Size": "12"}


@pytest.fixture(scope="module")
def paged_sfn(tmp_path_factory, moto):
    """A server whose ItemReader reads 40 bytes of an object, or 2 objects of a listing, at a time."""
    server = ServerProcess(tmp_path_factory.mktemp("paged") / "data", env=server_env(moto), extra_args=(
        "--item-reader-page-bytes", "40", "--item-reader-page-items", "2")).start()
    yield server.client()
    server.stop()


def test_an_object_read_in_pages_gives_every_row_once_in_order(paged_sfn, s3):
    rows = [{"n": n, "pad": "x" * (n % 3)} for n in range(12)] + [{"n": 12, "long": "y" * 100}]  # one past a page
    s3.put_object(Bucket="items", Key="paged.jsonl", Body="".join(json.dumps(row) + "\n" for row in rows).encode())
    machine = reader_machine(paged_sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                         "ReaderConfig": {"InputType": "JSONL"},
                                         "Parameters": {"Bucket": "items", "Key": "paged.jsonl"}},
                             ItemSelector={"n.$": "$$.Map.Item.Value.n", "index.$": "$$.Map.Item.Index"},
                             ItemBatcher={"MaxItemsPerBatch": 4}, MaxConcurrency=3)
    described, events = run(paged_sfn, machine, {})
    assert described["status"] == "SUCCEEDED", described
    batches = json.loads(described["output"])
    assert [len(batch["Items"]) for batch in batches] == [4, 4, 4, 1]  # a batch goes on over the pages
    items = [item for batch in batches for item in batch["Items"]]
    assert items == [{"n": n, "index": n} for n in range(13)]  # the index goes on across pages
    counts = paged_sfn.describe_map_run(mapRunArn=map_run_of(events))["itemCounts"]
    assert (counts["total"], counts["succeeded"]) == (13, 13)


def test_a_csv_read_in_pages_keeps_its_header_and_its_quoted_line_breaks(paged_sfn, s3):
    body = "id,text\n" + "".join(f'{n},"line {n}\nand more"\n' for n in range(6))
    s3.put_object(Bucket="items", Key="paged.csv", Body=body.encode())
    machine = reader_machine(paged_sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                         "ReaderConfig": {"InputType": "CSV", "CSVHeaderLocation": "FIRST_ROW",
                                                          "MaxItems": 5},
                                         "Parameters": {"Bucket": "items", "Key": "paged.csv"}})
    described, _ = run(paged_sfn, machine, {})
    assert json.loads(described["output"]) == [{"id": str(n), "text": f"line {n}\nand more"} for n in range(5)]


def test_a_listing_read_in_pages_gives_every_object_once(paged_sfn, s3):
    for n in range(5):
        s3.put_object(Bucket="items", Key=f"pages/{n}.txt", Body=b"hi")
    machine = reader_machine(paged_sfn, {"Resource": "arn:aws:states:::s3:listObjectsV2",
                                         "Parameters": {"Bucket": "items", "Prefix": "pages/"}})
    described, _ = run(paged_sfn, machine, {})
    assert [item["Key"] for item in json.loads(described["output"])] == [f"pages/{n}.txt" for n in range(5)]


@pytest.mark.slow
def test_s3_out_of_reach_is_waited_for_and_the_run_goes_on(tmp_path):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there yet
    server = ServerProcess(tmp_path / "data", env=server_env(endpoint)).start()
    late = None
    try:
        sfn = server.client()
        machine = reader_machine(sfn, {"Resource": "arn:aws:states:::s3:getObject",
                                       "ReaderConfig": {"InputType": "JSONL"},
                                       "Parameters": {"Bucket": "late", "Key": "rows.jsonl"}})
        arn = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
        _when(lambda: b"trying again" in server.log_path.read_bytes() or None)
        assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
        # The run exists while its items are read: described and listed, with none counted yet
        (listed,) = sfn.list_map_runs(executionArn=arn)["mapRuns"]
        reading = sfn.describe_map_run(mapRunArn=listed["mapRunArn"])
        assert reading["status"] == "RUNNING" and reading["executionCounts"]["total"] == 0
        # The object is written before S3 comes within reach (through another port of this process's moto, whose
        # buckets every moto server of the process serves): a retry in between would find the bucket but no object
        staging_port = free_port()
        staging = ThreadedMotoServer(ip_address="127.0.0.1", port=staging_port, verbose=False)
        staging.start()
        try:
            bucket = aws_client(f"http://127.0.0.1:{staging_port}", "s3")
            bucket.create_bucket(Bucket="late")
            bucket.put_object(Bucket="late", Key="rows.jsonl", Body=b'{"n": 1}\n{"n": 2}\n')
        finally:
            staging.stop()
        late = ThreadedMotoServer(ip_address="127.0.0.1", port=int(endpoint.rsplit(":", 1)[1]), verbose=False)
        late.start()
        described = wait_closed(sfn, arn, 60)
        assert described["status"] == "SUCCEEDED", described
        assert json.loads(described["output"]) == [{"n": 1}, {"n": 2}]
    finally:
        server.stop()
        if late is not None:
            late.stop()


# -- a crash mid-run


@pytest.mark.slow
def test_a_sigkill_mid_run_starts_no_child_twice_and_loses_none(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    try:
        sfn = server.client()
        definition = {"StartAt": "M", "States": {"M": distributed(
            {"W": {"Type": "Wait", "Seconds": 1, "End": True}}, start_at="W", ItemsPath="$.items",
            MaxConcurrency=20)}}
        machine = sfn.create_state_machine(name="crash", definition=json.dumps(definition),
                                           roleArn=ROLE)["stateMachineArn"]
        arn, map_run = start_run(sfn, machine, list(range(60)))
        _when(lambda: sfn.describe_map_run(mapRunArn=map_run)["executionCounts"]["succeeded"] >= 10 or None)
        server.kill()
        server.start()
        sfn = server.client()
        described = wait_closed(sfn, arn, 60)
        assert described["status"] == "SUCCEEDED"
        assert json.loads(described["output"]) == list(range(60))
        kids = children(sfn, map_run)
        assert len(kids) == 60 and len({kid["executionArn"] for kid in kids}) == 60
        assert {kid["status"] for kid in kids} == {"SUCCEEDED"}
        assert most_running_at_once(sfn, kids) <= 20
        counts = sfn.describe_map_run(mapRunArn=map_run)["executionCounts"]
        assert (counts["succeeded"], counts["total"], counts["running"]) == (60, 60, 0)
    finally:
        server.stop()


# -- ResultWriter to S3 (moto)


def writer_machine(sfn, writer: dict, processor: dict | None = None, **fields) -> str:
    definition = {"StartAt": "M", "States": {"M": distributed(processor or {"P": {"Type": "Pass", "End": True}},
                                                             start_at="W" if processor else "P", ItemsPath="$.items",
                                                             ResultWriter=writer, **fields)}}
    return sfn.create_state_machine(name=f"writer-{time.monotonic_ns()}", definition=json.dumps(definition),
                                    roleArn=ROLE)["stateMachineArn"]


def s3_json(s3, key: str) -> object:
    return json.loads(s3.get_object(Bucket="items", Key=key)["Body"].read())


def test_results_go_to_s3_with_a_manifest_and_the_output_says_where(aws_sfn, s3):
    machine = writer_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:putObject",
                                       "Parameters": {"Bucket": "items", "Prefix": "out"}}, Label="export")
    described, events = run(aws_sfn, machine, {"items": [{"v": 1}, {"v": 2}]})
    assert described["status"] == "SUCCEEDED", described
    map_run = map_run_of(events)
    run_id = map_run.rsplit(":", 1)[1]
    output = json.loads(described["output"])
    assert output == {"MapRunArn": map_run, "ResultWriterDetails": {"Bucket": "items",
                                                                    "Key": f"out/{run_id}/manifest.json"}}
    manifest = s3_json(s3, f"out/{run_id}/manifest.json")
    assert manifest["DestinationBucket"] == "items" and manifest["MapRunArn"] == map_run
    assert manifest["ResultFiles"]["FAILED"] == [] and manifest["ResultFiles"]["PENDING"] == []
    (succeeded,) = manifest["ResultFiles"]["SUCCEEDED"]
    assert succeeded["Key"] == f"out/{run_id}/SUCCEEDED_0.json"
    records = s3_json(s3, succeeded["Key"])
    assert succeeded["Size"] == len(s3.get_object(Bucket="items", Key=succeeded["Key"])["Body"].read())
    assert sorted(json.loads(record["Output"])["v"] for record in records) == [1, 2]
    record = records[0]
    assert list(record) == sorted(record)  # AWS writes the keys in order
    assert record["Status"] == "SUCCEEDED" and record["StateMachineArn"].endswith("/export")
    assert record["InputDetails"] == {"Included": True} and record["StartDate"].endswith("Z")
    assert record["RedriveStatus"] == "NOT_REDRIVABLE"


def test_failed_children_go_to_their_own_file_as_whole_records(aws_sfn, s3):
    machine = writer_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:putObject",
                                       "Parameters": {"Bucket": "items", "Prefix": "mixed/"},
                                       "WriterConfig": {"OutputType": "JSONL", "Transformation": "COMPACT"}},
                             processor=SLEEPY, ToleratedFailureCount=1)
    described, events = run(aws_sfn, machine, {"items": [{"fail": False}, {"fail": True}]})
    assert described["status"] == "SUCCEEDED", described
    run_id = map_run_of(events).rsplit(":", 1)[1]
    manifest = s3_json(s3, f"mixed/{run_id}/manifest.json")
    body = s3.get_object(Bucket="items", Key=manifest["ResultFiles"]["SUCCEEDED"][0]["Key"])["Body"].read()
    assert [json.loads(line) for line in body.decode().splitlines()] == [{"fail": False}]  # COMPACT: the output
    failed = s3.get_object(Bucket="items", Key=manifest["ResultFiles"]["FAILED"][0]["Key"])["Body"].read()
    (record,) = [json.loads(line) for line in failed.decode().splitlines()]
    assert (record["Status"], record["Error"], record["Cause"]) == ("FAILED", "ItemBroke", "asked to")
    assert "Output" not in record and record["RedriveStatus"] == "REDRIVABLE_BY_MAP_RUN"


def test_a_child_the_failing_run_stopped_is_written_as_aborted_once_it_closed(aws_sfn, s3):
    machine = writer_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:putObject",
                                       "Parameters": {"Bucket": "items", "Prefix": "stopped"}},
                             processor={"W": {"Type": "Choice", "Default": "Nap",
                                              "Choices": [{"Variable": "$.fail", "BooleanEquals": True,
                                                           "Next": "F"}]},
                                        "Nap": {"Type": "Wait", "Seconds": 300, "End": True},
                                        "F": {"Type": "Fail", "Error": "ItemBroke"}}, MaxConcurrency=2)
    described, events = run(aws_sfn, machine, {"items": [{"fail": False}, {"fail": True}]})
    assert (described["status"], described["error"]) == ("FAILED", "States.ExceedToleratedFailureThreshold")
    map_run = map_run_of(events)
    manifest = s3_json(s3, f"stopped/{map_run.rsplit(':', 1)[1]}/manifest.json")
    records = [record for file in manifest["ResultFiles"]["FAILED"] for record in s3_json(s3, file["Key"])]
    assert sorted((record["Status"], json.loads(record["Input"])["fail"]) for record in records) == [
        ("ABORTED", False), ("FAILED", True)]
    counts = aws_sfn.describe_map_run(mapRunArn=map_run)["executionCounts"]
    assert (counts["failed"], counts["aborted"], counts["running"], counts["resultsWritten"]) == (1, 1, 0, 2)


def test_flatten_splices_the_children_arrays_into_the_result_files(aws_sfn, s3):
    machine = writer_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:putObject",
                                       "Parameters": {"Bucket": "items", "Prefix": "flat"},
                                       "WriterConfig": {"OutputType": "JSON", "Transformation": "FLATTEN"}},
                             processor={"W": {"Type": "Pass", "Parameters": {"pair.$": "States.Array($.v, $.v)"},
                                              "OutputPath": "$.pair", "End": True}})
    _, events = run(aws_sfn, machine, {"items": [{"v": 1}, {"v": 2}]})
    run_id = map_run_of(events).rsplit(":", 1)[1]
    assert s3_json(s3, f"flat/{run_id}/SUCCEEDED_0.json") == [1, 1, 2, 2]


def test_a_writer_config_alone_shapes_the_output_in_place(aws_sfn):
    machine = writer_machine(aws_sfn, {"WriterConfig": {"OutputType": "JSON", "Transformation": "FLATTEN"}},
                             processor={"W": {"Type": "Pass", "Parameters": {"pair.$": "States.Array($.v, $.v)"},
                                              "OutputPath": "$.pair", "End": True}})
    described, _ = run(aws_sfn, machine, {"items": [{"v": 1}, {"v": 2}]})
    assert json.loads(described["output"]) == [1, 1, 2, 2]


def test_a_bucket_that_does_not_exist_fails_the_map_with_result_writer_failed(aws_sfn, s3):
    machine = writer_machine(aws_sfn, {"Resource": "arn:aws:states:::s3:putObject",
                                       "Parameters": {"Bucket": "no-such-bucket", "Prefix": "x"}})
    described, events = run(aws_sfn, machine, {"items": [1]})
    assert (described["status"], described["error"]) == ("FAILED", "States.ResultWriterFailed")
    assert sfn_status(aws_sfn, map_run_of(events)) == "FAILED"


def sfn_status(sfn, map_run_arn: str) -> str:
    return sfn.describe_map_run(mapRunArn=map_run_arn)["status"]


@pytest.mark.parametrize("output_type", ["JSON", "JSONL"])
def test_results_past_a_file_size_go_on_in_the_next_file(s3, output_type):
    from statewright.integrations.aws import result_writer

    records = [json.dumps({"Output": "x" * 30, "n": n}) for n in range(10)]  # 52 bytes each
    payload = {"run": "arn:aws:states:us-east-1:123456789012:mapRun:m/l:r", "bucket": "items", "prefix": "split/",
               "output_type": output_type, "SUCCEEDED": records, "FAILED": [], "PENDING": []}
    result_writer.write(s3, payload, file_bytes_max=200)  # AWS's is 5 GB
    files = s3_json(s3, "split/manifest.json")["ResultFiles"]["SUCCEEDED"]
    assert [file["Key"] for file in files] == [f"split/SUCCEEDED_{n}.json" for n in range(len(files))]
    assert len(files) == 4  # three records a file: a fourth would pass 200 bytes
    written = []
    for file in files:
        body = s3.get_object(Bucket="items", Key=file["Key"])["Body"].read()
        assert file["Size"] == len(body) <= 200
        written += ([json.loads(line) for line in body.decode().splitlines()] if output_type == "JSONL"
                    else json.loads(body))
    assert written == [json.loads(record) for record in records]


def test_a_max_concurrency_past_awss_bound_runs_ten_thousand_children_at_most():
    from statewright.decider import map_runs

    request = {"execution": "arn:aws:states:us-east-1:123456789012:execution:m:p", "scheduled_id": 4,
               "execution_type": "STANDARD", "max_concurrency": 20_000, "tolerated_count": None,
               "tolerated_percentage": None, "transformation": "COMPACT", "output_type": "JSON", "destination": None,
               "machine": "arn:aws:states:us-east-1:123456789012:stateMachine:m/l", "revision_id": "r",
               "role_arn": ROLE, "processor": "M", "inputs": json.dumps(list(range(10_005))), "batched": False}
    decision = map_runs.create("arn:aws:states:us-east-1:123456789012:mapRun:m/l:x", 0, request, 0)
    starts = [dispatch for dispatch, _ in decision.effects.dispatches_added if dispatch.startswith("child-")]
    assert len(starts) == map_runs.CONCURRENCY_MAX == 10_000 and len(decision.state.run.running) == 10_000
