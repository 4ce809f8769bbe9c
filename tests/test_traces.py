"""Traces of executions whose state machine has tracing enabled, exported over OTLP/HTTP by a real server to a real
receiver (otlp_receiver.py decodes OTLP's protobuf): a span per run, state, Map iteration and task attempt, client
spans for the calls, the context carried to HTTP Tasks (traceparent), local Lambda functions and AWS calls
(X-Amzn-Trace-Id), a caller's traceHeader joined, and the spans of an execution that outlived its server."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
import uuid
from collections import Counter
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from otlp_receiver import OtlpReceiver
from server import ROLE_ARN, ServerProcess, history, wait_closed
from statewright.decider import trace_context
from statewright.integrations.trace_spans import Track
from statewright.integrations.traces import LANE_YOUNG_S

pytestmark = pytest.mark.slow  # real server processes: not in the fast tier

CONNECTION = "arn:aws:events:us-east-1:123456789012:connection/traced/abc"
XRAY_TRACE = "5759e988bd862e3fe1be46a994272793"
XRAY_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
SERVER = 2  # OTLP's span kinds
CLIENT = 3
ERROR = 2  # OTLP's status code
TICK_NS = 100_000_000  # more than a tick of the engine lasts


class Endpoint:
    """A local HTTP service standing in for an HTTP Task's API and a Lambda function: it keeps each request's
    headers, and answers 500 to the first request of a path under /flaky/."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._seen: set[str] = set()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                endpoint.requests.append((self.path, {key.lower(): value for key, value in self.headers.items()}))
                first = self.path not in endpoint._seen
                endpoint._seen.add(self.path)
                status = 500 if self.path.startswith("/flaky/") and first else 200
                body = json.dumps({"ok": status == 200}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def headers_of(self, path: str) -> list[dict[str, str]]:
        return [headers for seen, headers in self.requests if seen == path]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def receiver():
    receiving = OtlpReceiver()
    yield receiving
    receiving.close()


@pytest.fixture(scope="module")
def endpoint():
    serving = Endpoint()
    yield serving
    serving.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, receiver, endpoint):
    folder = tmp_path_factory.mktemp("traces")
    (folder / "connections.json").write_text(json.dumps({CONNECTION: {
        "AuthorizationType": "API_KEY",
        "AuthParameters": {"ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": "secret"}}}}))
    (folder / "functions.json").write_text(json.dumps({"work": f"{endpoint.url}/function/work"}))
    process = ServerProcess(folder / "data", extra_args=(
        "--otlp-endpoint", receiver.endpoint, "--connections", str(folder / "connections.json"),
        "--functions", str(folder / "functions.json")), env={"OTEL_BSP_SCHEDULE_DELAY": "100"}).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def sfn(server):
    return server.client()


FIRST_TRACED: dict[str, float] = {}  # server -> when its first traced state machine was made (its lane starts after)


def machine(sfn, definition: dict, traced: bool = True, kind: str = "STANDARD") -> str:
    if traced:
        FIRST_TRACED.setdefault(sfn.meta.endpoint_url, time.monotonic())
    return sfn.create_state_machine(
        name=f"traced-{uuid.uuid4().hex[:10]}", definition=json.dumps(definition), roleArn=ROLE_ARN, type=kind,
        tracingConfiguration={"enabled": traced})["stateMachineArn"]


def http_task(endpoint: Endpoint, path: str, **more: object) -> dict:
    return {"Type": "Task", "Resource": "arn:aws:states:::http:invoke", "Parameters": {
        "ApiEndpoint": endpoint.url + path, "Method": "POST", "Authentication": {"ConnectionArn": CONNECTION}},
        "ResultSelector": {"ok.$": "$.ResponseBody.ok"}, **more}


def run_span(receiver: OtlpReceiver, execution_arn: str) -> dict:
    return receiver.wait_for(lambda span: span["attributes"].get("aws.stepfunctions.execution.arn")
                             == execution_arn)[0]


def whole_trace(receiver: OtlpReceiver, run: dict, count: int, timeout_s: float = 20.0) -> list[dict]:
    """The spans of ``run``'s trace once there are ``count`` and every parent among them has come (the history's
    spans and the calls' are exported by two processes, each in its own time)."""
    deadline = time.monotonic() + timeout_s
    while True:
        spans = [span for span in list(receiver.spans) if span["trace_id"] == run["trace_id"]]
        ids = {span["span_id"] for span in spans}
        if len(spans) >= count and all(span["parent_span_id"] in ids for span in spans if span["span_id"] != run[
                "span_id"]):
            return spans
        assert time.monotonic() < deadline, f"{len(spans)} spans of {count}, or their parents, came: {spans}"
        time.sleep(0.05)


def test_a_traced_execution_has_a_span_per_run_state_iteration_attempt_and_call(sfn, receiver, endpoint):
    key = uuid.uuid4().hex[:8]
    definition = {"StartAt": "Both", "States": {
        "Both": {"Type": "Parallel", "Next": "Each", "ResultPath": None, "Branches": [
            {"StartAt": "Left", "States": {"Left": {"Type": "Pass", "End": True}}},
            {"StartAt": "Right", "States": {"Right": {"Type": "Pass", "Next": "Right2"},
                                            "Right2": {"Type": "Pass", "End": True}}}]},
        "Each": {"Type": "Map", "ItemsPath": "$.items", "Next": "Call", "ResultPath": None,
                 "ItemProcessor": {"StartAt": "Item", "States": {"Item": http_task(endpoint, f"/item/{key}",
                                                                                   End=True)}}},
        "Call": http_task(endpoint, f"/flaky/{key}", End=True, Retry=[
            {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 2}])}}
    arn = sfn.start_execution(stateMachineArn=machine(sfn, definition),
                              input=json.dumps({"items": [1, 2, 3]}))["executionArn"]
    assert wait_closed(sfn, arn)["status"] == "SUCCEEDED"
    assert all(set(event) <= {"id", "previousEventId", "timestamp", "type"} | {
        key for key in event if key.endswith("EventDetails")} for event in history(sfn, arn))  # AWS's keys only
    run = run_span(receiver, arn)
    assert run["parent_span_id"] is None and run["kind"] == SERVER
    assert run["resource"]["service.name"] == "statewright"
    trace = run["trace_id"]
    assert trace[:8] <= f"{int(time.time()):08x}"  # X-Ray's rule: the trace id begins with its epoch second
    spans = whole_trace(receiver, run, count=23)
    assert len({span["span_id"] for span in spans}) == len(spans)  # each exported once
    by_id = {span["span_id"]: span for span in spans}
    named = {span["name"]: span for span in spans}
    assert set(named) >= {"Both", "Left", "Right", "Right2", "Each", "iteration 0", "iteration 1", "iteration 2",
                          "Item", "Call", "attempt 1", "attempt 2", "HTTP POST"}
    for state in ("Both", "Each", "Call"):
        assert named[state]["parent_span_id"] == run["span_id"]
    for branch_state in ("Left", "Right", "Right2"):
        assert named[branch_state]["parent_span_id"] == named["Both"]["span_id"]
    # Each iteration holds its own Item state, its attempt and its call (the iterations' events interleave)
    iterations = [span for span in spans if span["name"].startswith("iteration")]
    assert {by_id[span["parent_span_id"]]["name"] for span in iterations} == {"Each"}
    items = [span for span in spans if span["name"] == "Item"]
    assert sorted(by_id[span["parent_span_id"]]["name"] for span in items) == [
        "iteration 0", "iteration 1", "iteration 2"]
    # The Task state with a retry: two attempts, the first failed with the HTTP error, each with its client call
    attempts = sorted((span for span in spans if span["parent_span_id"] == named["Call"]["span_id"]),
                      key=lambda span: span["start_ns"])
    assert [span["name"] for span in attempts] == ["attempt 1", "attempt 2"]
    assert attempts[0]["status"] == ERROR
    assert attempts[0]["attributes"]["aws.stepfunctions.error"] == "States.Http.StatusCode.500"
    assert attempts[1]["status"] != ERROR and named["Call"]["status"] != ERROR
    calls = [span for span in spans if span["kind"] == CLIENT and by_id[span["parent_span_id"]] in attempts]
    assert sorted(span["attributes"]["http.response.status_code"] for span in calls) == [200, 500]
    # Spans nest in time. The history's times are the engine's: the time a tick began, in whole milliseconds, and a
    # result that arrives during a tick is recorded at its start; a call's span, timed as it ends, may end a few
    # milliseconds after the attempt whose result it brought (TICK_NS)
    for span in spans:
        parent = by_id.get(span["parent_span_id"])
        if parent is not None:
            assert parent["start_ns"] <= span["start_ns"] <= span["end_ns"] <= parent["end_ns"] + TICK_NS
    # The HTTP endpoint got each call's context: the trace, and the call's own span as the parent
    sent = endpoint.headers_of(f"/flaky/{key}")
    assert len(sent) == 2
    assert {headers["traceparent"] for headers in sent} == {
        f"00-{trace}-{span['span_id']}-01" for span in calls}


def test_branches_and_iterations_that_run_at_once_each_keep_their_own_spans(sfn, receiver):
    """Their events interleave in the history (previousEventId follows the commits, not the branches): each state's
    span is still its own, under its branch's Parallel or its iteration, for as long as it ran; an iteration that
    fails is an error, and the one cut short by it is too."""
    definition = {"StartAt": "Par", "States": {
        "Par": {"Type": "Parallel", "Next": "Each", "ResultPath": None, "Branches": [
            {"StartAt": "Long", "States": {"Long": {"Type": "Wait", "Seconds": 2, "Next": "AfterLong"},
                                           "AfterLong": {"Type": "Pass", "End": True}}},
            {"StartAt": "Short", "States": {"Short": {"Type": "Wait", "Seconds": 1, "Next": "AfterShort"},
                                            "AfterShort": {"Type": "Pass", "End": True}}}]},
        "Each": {"Type": "Map", "ItemsPath": "$.items", "Next": "Done", "ResultPath": None,
                 "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Recovered"}],
                 "ItemProcessor": {"StartAt": "Sort", "States": {
                     "Sort": {"Type": "Choice", "Choices": [{"Variable": "$", "StringEquals": "bad",
                                                            "Next": "Broken"}], "Default": "Nap"},
                     "Nap": {"Type": "Wait", "SecondsPath": "$", "End": True},
                     "Broken": {"Type": "Fail", "Error": "Bad", "Cause": "a bad item"}}}},
        "Recovered": {"Type": "Pass", "Next": "Done"},
        "Done": {"Type": "Pass", "End": True}}}
    arn = sfn.start_execution(stateMachineArn=machine(sfn, definition),
                              input=json.dumps({"items": [2, 1, "bad"]}))["executionArn"]
    wait_closed(sfn, arn)
    run = run_span(receiver, arn)
    spans = whole_trace(receiver, run, count=18)
    by_id = {span["span_id"]: span for span in spans}

    def seconds(span: dict) -> float:
        return (span["end_ns"] - span["start_ns"]) / 1e9

    named = {span["name"]: span for span in spans if span["name"] not in ("Sort", "Nap", "Broken")}
    assert 2 <= seconds(named["Long"]) < 2.5 and 1 <= seconds(named["Short"]) < 1.5
    for name in ("Long", "AfterLong", "Short", "AfterShort"):
        assert by_id[named[name]["parent_span_id"]]["name"] == "Par"
    # The Map's items 2 and 1 slept in their own iterations, until item "bad" failed its iteration, 0 s in: the
    # Map failed (caught), and the sleeping iterations were cut short
    iterations = {span["attributes"]["aws.stepfunctions.map.iteration"]: span for span in spans
                  if span["name"].startswith("iteration")}
    inside = {index: sorted(span["name"] for span in spans if span["parent_span_id"] == iteration["span_id"])
              for index, iteration in iterations.items()}
    assert inside == {0: ["Nap", "Sort"], 1: ["Nap", "Sort"], 2: ["Broken", "Sort"]}
    assert iterations[2]["status"] == ERROR and iterations[2]["attributes"]["aws.stepfunctions.error"] == (
        "MapIterationFailed")
    for index in (0, 1):
        assert iterations[index]["status"] == ERROR  # aborted by the failure
        nap = next(span for span in spans if span["name"] == "Nap" and span["parent_span_id"] == iterations[index][
            "span_id"])
        assert nap["status"] == ERROR and seconds(nap) < 1
    assert named["Each"]["status"] == ERROR and named["Recovered"]["status"] != ERROR
    assert run["status"] != ERROR


def test_a_lambda_function_gets_x_rays_header_and_a_nested_execution_joins_the_trace(sfn, receiver, endpoint):
    child = machine(sfn, {"StartAt": "Inner", "States": {"Inner": {"Type": "Pass", "End": True}}})
    definition = {"StartAt": "Invoke", "States": {
        "Invoke": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                   "Parameters": {"FunctionName": "work", "Payload": {}}, "Next": "Nested"},
        "Nested": {"Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2",
                   "Parameters": {"StateMachineArn": child, "Input": {}}, "Next": "Sdk"},
        "Sdk": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:sfn:startExecution",
                "Parameters": {"StateMachineArn": child, "Input": "{}"}, "End": True}}}
    arn = sfn.start_execution(stateMachineArn=machine(sfn, definition))["executionArn"]
    done = wait_closed(sfn, arn)
    assert done["status"] == "SUCCEEDED", done
    run = run_span(receiver, arn)
    trace = run["trace_id"]
    spans = whole_trace(receiver, run, count=13)
    by_id = {span["span_id"]: span for span in spans}
    # Lambda (a local function here) got X-Ray's header naming its client span, and W3C's
    lambda_call = next(span for span in spans if span["name"] == "lambda.invoke")
    (headers,) = endpoint.headers_of("/function/work")[-1:]
    assert headers["x-amzn-trace-id"] == f"Root=1-{trace[:8]}-{trace[8:]};Parent={lambda_call['span_id']};Sampled=1"
    assert headers["traceparent"] == f"00-{trace}-{lambda_call['span_id']}-01"
    # Both children (a .sync start, and an SDK call that carried X-Amzn-Trace-Id) are runs of the same trace
    children = [span for span in spans if span["kind"] == SERVER and span["span_id"] != run["span_id"]]
    assert len(children) == 2
    def state_above(span: dict) -> str:
        while "aws.stepfunctions.state.name" not in span["attributes"]:
            span = by_id[span["parent_span_id"]]
        return span["name"]
    # each under the state that started it: the .sync start under its attempt, the SDK call's under its client span
    assert sorted(state_above(by_id[span["parent_span_id"]]) for span in children) == ["Nested", "Sdk"]
    sdk_call = next(span for span in spans if span["name"] == "sfn.startExecution")
    assert sdk_call["kind"] == CLIENT and sdk_call["span_id"] in {span["parent_span_id"] for span in children}


def test_a_trace_header_joins_the_callers_trace(sfn, receiver):
    arn = machine(sfn, {"StartAt": "Only", "States": {"Only": {"Type": "Pass", "End": True}}})
    started = sfn.start_execution(stateMachineArn=arn, traceHeader=XRAY_HEADER)["executionArn"]
    wait_closed(sfn, started)
    run = run_span(receiver, started)
    assert (run["trace_id"], run["parent_span_id"]) == (XRAY_TRACE, "53995c3f42cd8ad8")
    assert sfn.describe_execution(executionArn=started)["traceHeader"] == (
        f"Root=1-{XRAY_TRACE[:8]}-{XRAY_TRACE[8:]};Sampled=1")  # as AWS shows a traced execution's
    # W3C's form, and the X-Amzn-Trace-Id HTTP header an instrumented caller sends instead
    w3c_trace = uuid.uuid4().hex
    started = sfn.start_execution(stateMachineArn=arn, traceHeader=f"00-{w3c_trace}-00f067aa0ba902b7-01")
    wait_closed(sfn, started["executionArn"])
    assert run_span(receiver, started["executionArn"])["trace_id"] == w3c_trace
    header_trace = f"{int(time.time()):08x}{uuid.uuid4().hex[:24]}"

    def add_header(request, **_: object) -> None:
        request.headers["X-Amzn-Trace-Id"] = f"Root=1-{header_trace[:8]}-{header_trace[8:]};Sampled=1"
    sfn.meta.events.register_first("before-sign.states.StartExecution", add_header)
    try:  # with both, the header wins (AWS's API reference)
        started = sfn.start_execution(stateMachineArn=arn, traceHeader=XRAY_HEADER)["executionArn"]
    finally:
        sfn.meta.events.unregister("before-sign.states.StartExecution", add_header)
    wait_closed(sfn, started)
    run = run_span(receiver, started)
    assert (run["trace_id"], run["parent_span_id"]) == (header_trace, None)


def test_an_express_execution_is_traced_too(sfn, receiver):
    arn = machine(sfn, {"StartAt": "Only", "States": {"Only": {"Type": "Pass", "End": True}}}, kind="EXPRESS")
    done = sfn.start_sync_execution(stateMachineArn=arn, traceHeader=XRAY_HEADER)
    assert done["status"] == "SUCCEEDED"
    run = run_span(receiver, done["executionArn"])
    assert run["trace_id"] == XRAY_TRACE
    receiver.wait_for(lambda span: span["name"] == "Only" and span["parent_span_id"] == run["span_id"])


def test_untraced_machines_and_unsampled_headers_export_nothing(sfn, receiver):
    plain = machine(sfn, {"StartAt": "Only", "States": {"Only": {"Type": "Pass", "End": True}}}, traced=False)
    traced = machine(sfn, {"StartAt": "Only", "States": {"Only": {"Type": "Pass", "End": True}}})
    quiet = [sfn.start_execution(stateMachineArn=plain, traceHeader=XRAY_HEADER)["executionArn"],
             sfn.start_execution(stateMachineArn=traced, traceHeader=XRAY_HEADER.replace("Sampled=1", "Sampled=0"))[
                 "executionArn"]]
    marker = sfn.start_execution(stateMachineArn=traced)["executionArn"]
    for arn in [*quiet, marker]:
        wait_closed(sfn, arn)
    run_span(receiver, marker)  # exported after the two others were offered
    time.sleep(0.3)
    exported = {span["attributes"].get("aws.stepfunctions.execution.arn") for span in receiver.spans}
    assert not exported & set(quiet)
    assert all("traceHeader" not in sfn.describe_execution(executionArn=arn) for arn in quiet)


def test_spans_of_an_execution_that_outlived_its_server_keep_their_parents(tmp_path, receiver):
    """Killed in a Wait (its run's span and the Wait's open), started again: the spans it then ends name the
    parents the first process opened, none twice (the endpoint from OTEL_EXPORTER_OTLP_ENDPOINT this time)."""
    process = ServerProcess(tmp_path / "data", env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                                                    "OTEL_BSP_SCHEDULE_DELAY": "50"}).start()
    try:
        sfn = process.client()
        arn = machine(sfn, {"StartAt": "First", "States": {
            "First": {"Type": "Pass", "Next": "Nap"},
            "Nap": {"Type": "Wait", "Seconds": 3, "Next": "Last"},
            "Last": {"Type": "Pass", "End": True}}})
        started = sfn.start_execution(stateMachineArn=arn)["executionArn"]
        receiver.wait_for(lambda span: span["name"] == "First" and span["attributes"].get(
            "aws.stepfunctions.state.name") == "First" and span["span_id"] == trace_context.span_id(started, 2))
        process.kill()  # in the Wait: its run span and the Nap's are open
        process.start()
        assert wait_closed(sfn, started)["status"] == "SUCCEEDED"
        run = run_span(receiver, started)
        spans = whole_trace(receiver, run, count=4)
    finally:
        process.stop()
    assert Counter(span["name"] for span in spans) == Counter({"First": 1, "Nap": 1, "Last": 1, run["name"]: 1})
    for span in spans:
        if span is not run:
            assert span["parent_span_id"] == run["span_id"]
    nap = next(span for span in spans if span["name"] == "Nap")
    assert nap["end_ns"] - nap["start_ns"] >= 3_000_000_000


def test_a_trace_lane_that_dies_is_started_again_and_rebuilds_what_was_open(server, sfn, receiver):
    """The process that makes the history's spans killed while an execution waits: the next traced event starts
    another, which rebuilds the open spans from the history; their ids and parents are the same."""
    arn = machine(sfn, {"StartAt": "First", "States": {
        "First": {"Type": "Pass", "Next": "Nap"},
        "Nap": {"Type": "Wait", "Seconds": 2, "Next": "Last"},
        "Last": {"Type": "Pass", "End": True}}})
    started = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    receiver.wait_for(lambda span: span["span_id"] == trace_context.span_id(started, 2))  # First ended
    # a lane that dies young is taken to fail at starting (and started again only later): this one is not
    time.sleep(max(0.0, FIRST_TRACED[sfn.meta.endpoint_url] + LANE_YOUNG_S + 0.5 - time.monotonic()))
    lanes = subprocess.run(["pgrep", "-f", "-P", str(server.process.pid), "trace_lane"], capture_output=True,
                           text=True).stdout.split()
    assert len(lanes) == 1
    os.kill(int(lanes[0]), signal.SIGKILL)
    assert wait_closed(sfn, started)["status"] == "SUCCEEDED"
    run = run_span(receiver, started)
    spans = whole_trace(receiver, run, count=4)
    assert sorted(span["name"] for span in spans if span is not run) == ["First", "Last", "Nap"]
    assert all(span["parent_span_id"] == run["span_id"] for span in spans if span is not run)
    later = sfn.start_execution(stateMachineArn=arn)["executionArn"]
    wait_closed(sfn, later)
    run_span(receiver, later)


def test_spans_rebuilt_from_any_point_of_a_history_are_the_rest_of_those_read_from_its_start(server, sfn, endpoint):
    """What a node that takes an execution over mid-way (a restart, a shard moved) exports: its open spans rebuilt
    from the stored history, then exactly the spans the events after that point end, with the same ids."""
    key = uuid.uuid4().hex[:8]
    definition = {"StartAt": "Both", "States": {
        "Both": {"Type": "Parallel", "Next": "Each", "Branches": [
            {"StartAt": "Left", "States": {"Left": {"Type": "Pass", "End": True}}},
            {"StartAt": "Right", "States": {"Right": http_task(endpoint, f"/flaky/{key}-a", End=True, Retry=[
                {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1}])}}]},
        "Each": {"Type": "Map", "ItemsPath": "$[0].items", "Next": "Fails",
                 "ItemProcessor": {"StartAt": "Item", "States": {"Item": http_task(endpoint, f"/item/{key}",
                                                                                   End=True)}}},
        "Fails": http_task(endpoint, f"/flaky/{key}-b", End=True, Catch=[
            {"ErrorEquals": ["States.ALL"], "Next": "Caught"}]),
        "Caught": {"Type": "Pass", "End": True}}}
    arn = machine(sfn, definition)
    started = sfn.start_execution(stateMachineArn=arn, input=json.dumps({"items": [1, 2]}))["executionArn"]
    assert wait_closed(sfn, started)["status"] == "SUCCEEDED"
    events = stored_history(server, started)  # as a node taking the execution over reads it: with their flows
    assert len(events) == len(history(sfn, started))
    whole = _spans(arn, started, events, 0)
    assert len(whole) == 16 and len({span.span_id for span in whole}) == len(whole)
    assert all(span.parent_id is None or span.parent_id in {other.span_id for other in whole} for span in whole)
    for cut in range(1, len(events)):
        assert _spans(arn, started, events, cut) == [span for span in whole if span.end_ms >= 0 and
                                                     _ended_at(arn, started, events, span) >= cut]


def stored_history(server: ServerProcess, execution_arn: str) -> list[dict]:
    """The execution's history events as the server stored them (its SQLite file, read beside it)."""
    with closing(sqlite3.connect(server.data_dir / "statewright.db")) as db:
        rows = db.execute("SELECT events FROM history JOIN executions ON executions.id = history.execution_id "
                          "WHERE arn = ? ORDER BY first_event_id",
                          (execution_arn,)).fetchall()
    return [event for (blob,) in rows for event in json.loads(blob)]


def _spans(machine_arn: str, execution_arn: str, events: list[dict], cut: int) -> list:
    track = Track(machine_arn, execution_arn, "0" * 32)
    for event in events[:cut]:
        track.apply(event)
    return [span for event in events[cut:] for span in track.apply(event)]


def _ended_at(machine_arn: str, execution_arn: str, events: list[dict], wanted) -> int:
    """The index of the event that ends span ``wanted`` when the history is read from its start."""
    track = Track(machine_arn, execution_arn, "0" * 32)
    for index, event in enumerate(events):
        if any(span.span_id == wanted.span_id for span in track.apply(event)):
            return index
    raise AssertionError(f"{wanted.name} never ended")
