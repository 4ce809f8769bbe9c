"""The web console, as a user drives it: a real server process, boto3 beside it, and headless Chromium (Debian's,
driven by Playwright) on its page. What the page shows is checked against what the API says."""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Page, expect

from nodes import SHARDS, Node, name_on
from server import ServerProcess

ROLE = "arn:aws:iam::123456789012:role/console-tests"
WAIT_MS = 15_000


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path_factory.mktemp("console") / "data").start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def sfn(server):
    return server.client()


def machine(sfn, definition: dict) -> str:
    return sfn.create_state_machine(name=f"console-{uuid.uuid4().hex[:10]}", definition=json.dumps(definition),
                                    roleArn=ROLE)["stateMachineArn"]


def activity(sfn) -> str:
    return sfn.create_activity(name=f"console-{uuid.uuid4().hex[:10]}")["activityArn"]


def execution_url(server: ServerProcess, arn: str) -> str:
    return f"{server.endpoint}/#/execution/{quote(arn, safe='')}"


def poll_task(sfn, activity_arn: str) -> dict:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        task = sfn.get_activity_task(activityArn=activity_arn, workerName="console-test")
        if task.get("taskToken"):
            return task
    raise AssertionError("no activity task came")


def wait_status(sfn, arn: str, status: str) -> dict:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=arn)
        if described["status"] == status:
            return described
        time.sleep(0.05)
    raise AssertionError(f"{arn} never became {status}: {described['status']}")


def get(server: ServerProcess, path: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(server.endpoint + path) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def test_the_page_and_its_files_are_served_on_the_api_port_and_nothing_else(server, sfn):
    status, kind, body = get(server, "/")
    assert (status, kind) == (200, "text/html; charset=utf-8") and b"statewright console" in body
    status, kind, body = get(server, "/console/console.js")
    assert (status, kind) == (200, "text/javascript; charset=utf-8") and b"executionPage" in body
    assert get(server, "/console/vendor/dagre-3.1.4.esm.js")[0] == 200
    for outside in ("/console/../../pyproject.toml", "/console/nope.js", "/console/feed.py", "/index.html"):
        status, kind, body = get(server, outside)
        assert status == 404 and json.loads(body)["__type"].endswith("#UnknownOperationException"), outside
    assert "stateMachines" in sfn.list_state_machines()  # the API is where it was


def test_the_stream_says_committed_after_each_commit_that_adds_to_the_history(server, sfn):
    worker_activity = activity(sfn)
    arn = sfn.start_execution(stateMachineArn=machine(sfn, {"StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": worker_activity, "End": True}}}))["executionArn"]
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    connection.request("GET", f"/console/events?executionArn={quote(arn, safe='')}")
    response = connection.getresponse()
    assert response.status == 200 and response.headers["content-type"] == "text/event-stream"

    def next_event() -> str:
        lines = []
        while (line := response.fp.readline().decode()) != "\n":
            lines.append(line)
        return next((line.split(": ", 1)[1].strip() for line in lines if line.startswith("event:")), "")
    assert next_event() == "watching"
    task = poll_task(sfn, worker_activity)  # the attempt started: a commit that adds ActivityStarted
    assert next_event() == "committed"
    sfn.send_task_success(taskToken=task["taskToken"], output="{}")
    assert next_event() == "committed"
    connection.close()
    wait_status(sfn, arn, "SUCCEEDED")
    status, _, body = get(server, "/console/events")
    assert (status, body) == (400, b"executionArn is required")


def test_an_execution_is_drawn_on_its_graph_and_coloured_live_as_it_commits(server, sfn, page):
    worker_activity = activity(sfn)
    machine_arn = machine(sfn, {"StartAt": "Route", "States": {
        "Route": {"Type": "Choice", "Choices": [{"Variable": "$.go", "BooleanEquals": True, "Next": "Work"}],
                  "Default": "Skip"},
        "Skip": {"Type": "Pass", "End": True},
        "Work": {"Type": "Task", "Resource": worker_activity, "Next": "Both"},
        "Both": {"Type": "Parallel", "Next": "Done", "Branches": [
            {"StartAt": "Left", "States": {"Left": {"Type": "Pass", "End": True}}},
            {"StartAt": "Right", "States": {"Right": {"Type": "Pass", "End": True}}}]},
        "Done": {"Type": "Succeed"}}})
    arn = sfn.start_execution(stateMachineArn=machine_arn, input='{"go": true}')["executionArn"]
    page.goto(execution_url(server, arn))
    graph = page.get_by_test_id("graph")
    expect(graph.locator('[data-state="Work"]')).to_have_attribute("data-status", "running", timeout=WAIT_MS)
    expect(graph.locator('[data-state="Route"]')).to_have_attribute("data-status", "succeeded")
    expect(graph.locator('[data-state="Skip"]')).to_have_attribute("data-status", "not-started")
    expect(graph.locator(".edge text", has_text="$.go BooleanEquals true")).to_have_count(1)
    expect(page.get_by_test_id("status")).to_have_text("RUNNING")

    task = poll_task(sfn, worker_activity)
    sfn.send_task_success(taskToken=task["taskToken"], output='{"made": 7}')
    # No reload: the stream wakes the page, which reads the new events.
    for state in ("Work", "Both", "Left", "Right", "Done"):
        expect(graph.locator(f'[data-state="{state}"]')).to_have_attribute("data-status", "succeeded",
                                                                            timeout=WAIT_MS)
    expect(page.get_by_test_id("status")).to_have_text("SUCCEEDED")

    graph.locator('[data-state="Work"]').click()
    shoot(page, "execution-state-details")
    details = page.get_by_test_id("state-details")
    expect(details.get_by_test_id("selected-state")).to_have_text("Work")
    assert json.loads(details.get_by_test_id("state-input").inner_text()) == {"go": True}
    assert json.loads(details.get_by_test_id("state-output").inner_text()) == {"made": 7}
    expect(details.get_by_test_id("attempts").locator("tbody tr")).to_have_count(1)

    events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    page.get_by_test_id("tab-history").click()
    expect(page.get_by_test_id("history-table").locator("tbody tr")).to_have_count(len(events))
    page.get_by_test_id("tab-timeline").click()
    entered = [event for event in events if event["type"].endswith("StateEntered")]
    expect(page.get_by_test_id("timeline-row")).to_have_count(len(entered))
    with page.expect_download() as download:
        page.get_by_test_id("download").click()
    with open(download.value.path()) as file:
        saved = json.load(file)
    assert [event["id"] for event in saved["events"]] == [event["id"] for event in events]


def test_retries_are_listed_as_attempts_and_a_failure_shows_in_red(server, sfn, page):
    worker_activity = activity(sfn)
    arn = sfn.start_execution(stateMachineArn=machine(sfn, {"StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": worker_activity, "Next": "Done",
                 "Retry": [{"ErrorEquals": ["Flaky"], "IntervalSeconds": 1, "MaxAttempts": 1}],
                 "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Oops"}]},
        "Done": {"Type": "Succeed"},
        "Oops": {"Type": "Fail", "Error": "Gave.Up", "Cause": "the work kept failing"}}}))["executionArn"]
    for _ in range(2):
        task = poll_task(sfn, worker_activity)
        sfn.send_task_failure(taskToken=task["taskToken"], error="Flaky", cause="try again")
    wait_status(sfn, arn, "FAILED")
    page.goto(execution_url(server, arn))
    graph = page.get_by_test_id("graph")
    expect(graph.locator('[data-state="Work"]')).to_have_attribute("data-status", "caught", timeout=WAIT_MS)
    expect(graph.locator('[data-state="Oops"]')).to_have_attribute("data-status", "failed")
    expect(graph.locator('[data-state="Done"]')).to_have_attribute("data-status", "not-started")
    expect(graph.locator(".edge.catch")).to_have_count(1)
    expect(graph.locator(".edge.retry text")).to_have_text("Retry Flaky up to 1")
    expect(page.get_by_test_id("error")).to_have_text("Gave.Up")
    graph.locator('[data-state="Work"]').click()
    attempts = page.get_by_test_id("attempts").locator("tbody tr")
    expect(attempts).to_have_count(2)
    expect(attempts.nth(1)).to_contain_text("failed — Flaky")
    expect(page.get_by_test_id("state-error")).to_have_text("Flaky")
    shoot(page, "failed-state")


def test_a_user_starts_stops_and_redrives_an_execution_with_the_confirmations_aws_asks_for(server, sfn, page):
    machine_arn = machine(sfn, {"StartAt": "Sleep", "States": {
        "Sleep": {"Type": "Wait", "Seconds": 3600, "Next": "Done"}, "Done": {"Type": "Succeed"}}})
    page.goto(f"{server.endpoint}/#/state-machine/{quote(machine_arn, safe='')}")
    expect(page.get_by_test_id("graph").locator('[data-state="Sleep"]')).to_have_count(1, timeout=WAIT_MS)
    page.get_by_test_id("start").click()
    page.get_by_test_id("execution-input").fill("{not json")
    page.get_by_test_id("dialog-confirm").click()
    expect(page.get_by_test_id("dialog-invalid")).to_contain_text("The input is not valid JSON")
    page.get_by_test_id("execution-name").fill("from-the-console")
    page.get_by_test_id("execution-input").fill('{"hello": "world"}')
    shoot(page, "start-execution")
    page.get_by_test_id("dialog-confirm").click()
    arn = machine_arn.replace(":stateMachine:", ":execution:") + ":from-the-console"
    expect(page).to_have_url(execution_url(server, arn), timeout=WAIT_MS)
    assert sfn.describe_execution(executionArn=arn)["input"] == '{"hello": "world"}'
    expect(page.get_by_test_id("status")).to_have_text("RUNNING")
    expect(page.get_by_test_id("redrive")).to_be_disabled()

    page.get_by_test_id("stop").click()
    page.get_by_test_id("dialog-cancel").click()  # asked, and said no: nothing happens
    assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    page.get_by_test_id("stop").click()
    shoot(page, "stop-confirmation")
    page.get_by_test_id("dialog-confirm").click()
    expect(page.get_by_test_id("status")).to_have_text("ABORTED", timeout=WAIT_MS)
    assert sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"
    expect(page.get_by_test_id("graph").locator('[data-state="Sleep"]')).to_have_attribute("data-status", "aborted")

    page.get_by_test_id("redrive").click()
    page.get_by_test_id("dialog-confirm").click()
    expect(page.get_by_test_id("status")).to_have_text("RUNNING", timeout=WAIT_MS)
    described = sfn.describe_execution(executionArn=arn)
    assert (described["status"], described["redriveCount"]) == ("RUNNING", 1)
    sfn.stop_execution(executionArn=arn)


def test_the_executions_list_filters_by_status_searches_by_name_and_sorts(server, sfn, page):
    waits = machine(sfn, {"StartAt": "Maybe", "States": {
        "Maybe": {"Type": "Choice", "Choices": [{"Variable": "$.wait", "BooleanEquals": True, "Next": "Sleep"}],
                  "Default": "Done"},
        "Sleep": {"Type": "Wait", "Seconds": 3600, "End": True}, "Done": {"Type": "Succeed"}}})
    for name, wait in (("alpha-1", True), ("alpha-2", False), ("beta-1", False)):
        sfn.start_execution(stateMachineArn=waits, name=name, input=json.dumps({"wait": wait}))
    for name in ("alpha-2", "beta-1"):
        wait_status(sfn, waits.replace(":stateMachine:", ":execution:") + f":{name}", "SUCCEEDED")
    page.goto(f"{server.endpoint}/#/state-machine/{quote(waits, safe='')}")
    rows = page.get_by_test_id("execution-list").locator("tbody tr")
    expect(rows).to_have_count(3, timeout=WAIT_MS)
    page.get_by_test_id("status-filter").select_option("SUCCEEDED")
    expect(rows).to_have_count(2)
    page.get_by_test_id("search").fill("alpha")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("alpha-2")
    page.get_by_test_id("status-filter").select_option("All")
    page.get_by_test_id("search").fill("")
    expect(rows).to_have_count(3)
    page.get_by_test_id("execution-list").locator("th", has_text="Name").click()
    assert [rows.nth(index).locator("td").first.inner_text() for index in range(3)] == ["alpha-1", "alpha-2", "beta-1"]
    page.get_by_test_id("execution-list").locator("th", has_text="Name").click()
    assert rows.first.locator("td").first.inner_text() == "beta-1"
    shoot(page, "state-machine")
    sfn.stop_execution(executionArn=waits.replace(":stateMachine:", ":execution:") + ":alpha-1")


def shoot(page: Page, name: str) -> None:
    """A screenshot of the page as the test leaves it: into $STATEWRIGHT_CONSOLE_SHOTS when set (the README's
    pictures in docs/console/ are taken so), else nowhere."""
    folder = os.environ.get("STATEWRIGHT_CONSOLE_SHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


EVERY_STATE_TYPE = {"StartAt": "Begin", "States": {
    "Begin": {"Type": "Pass", "Next": "Decide"},
    "Decide": {"Type": "Choice", "Choices": [
        {"And": [{"Variable": "$.n", "NumericGreaterThan": 1}, {"Variable": "$.n", "NumericLessThan": 9}],
         "Next": "Nap"}], "Default": "Stop"},
    "Nap": {"Type": "Wait", "Seconds": 0, "Next": "Split"},
    "Split": {"Type": "Parallel", "Next": "Items", "Branches": [
        {"StartAt": "Left", "States": {"Left": {"Type": "Pass", "End": True}}},
        {"StartAt": "Right", "States": {"Right": {"Type": "Pass", "End": True}}}]},
    "Items": {"Type": "Map", "ItemsPath": "$[0].list", "Next": "Far", "ItemProcessor": {
        "StartAt": "Each", "States": {"Each": {"Type": "Pass", "End": True}}}},
    "Far": {"Type": "Map", "ItemsPath": "$", "Next": "Finish", "ItemProcessor": {
        "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
        "StartAt": "Child", "States": {"Child": {"Type": "Pass", "End": True}}}},
    "Finish": {"Type": "Succeed"},
    "Stop": {"Type": "Fail", "Error": "Out.Of.Range"}}}


def test_every_state_type_is_drawn_and_a_distributed_map_shows_its_map_run(server, sfn, page):
    arn = sfn.start_execution(stateMachineArn=machine(sfn, EVERY_STATE_TYPE),
                              input=json.dumps({"n": 4, "list": [1, 2, 3]}))["executionArn"]
    wait_status(sfn, arn, "SUCCEEDED")
    page.goto(execution_url(server, arn))
    graph = page.get_by_test_id("graph")
    for state in ("Begin", "Decide", "Nap", "Split", "Left", "Right", "Items", "Each", "Far", "Finish"):
        expect(graph.locator(f'[data-state="{state}"]')).to_have_attribute("data-status", "succeeded",
                                                                            timeout=WAIT_MS)
    expect(graph.locator('[data-state="Stop"]')).to_have_attribute("data-status", "not-started")
    expect(graph.locator('[data-state="Child"]')).to_have_count(1)  # drawn, run in the map run's children
    expect(graph.locator(".cluster")).to_have_count(4)  # two branches, an iteration, a distributed iteration
    expect(graph.locator(".edge text", has_text="$.n NumericGreaterThan 1 and $.n NumericLessThan 9")).to_have_count(1)
    runs = page.get_by_test_id("map-run-table").locator("tbody tr")
    expect(runs).to_have_count(1, timeout=WAIT_MS)
    expect(runs.first).to_contain_text("3 succeeded")
    shoot(page, "execution-graph")
    runs.first.locator("a").click()
    children = page.get_by_test_id("execution-list").locator("tbody tr")
    expect(children).to_have_count(3, timeout=WAIT_MS)
    shoot(page, "map-run")


def test_express_executions_this_node_ran_are_listed_with_their_events(server, sfn, page):
    express = sfn.create_state_machine(name=f"console-express-{uuid.uuid4().hex[:8]}", type="EXPRESS", roleArn=ROLE,
                                       definition=json.dumps({"StartAt": "Hello", "States": {
                                           "Hello": {"Type": "Pass", "Result": "hi", "Next": "Bye"},
                                           "Bye": {"Type": "Pass", "End": True}}}))["stateMachineArn"]
    answered = sfn.start_sync_execution(stateMachineArn=express, name="sync-call", input='{"who": "me"}')
    assert answered["status"] == "SUCCEEDED"
    sfn.start_execution(stateMachineArn=express, name="async-call")
    page.goto(f"{server.endpoint}/#/state-machine/{quote(express, safe='')}")
    listed = page.get_by_test_id("express-list").locator("tbody tr")
    expect(listed).to_have_count(2, timeout=WAIT_MS)
    expect(page.get_by_test_id("express-list")).to_contain_text("sync-call")
    shoot(page, "express-executions")
    page.get_by_test_id("express-list").get_by_role("link", name="sync-call", exact=True).click()
    graph = page.get_by_test_id("graph")
    for state in ("Hello", "Bye"):
        expect(graph.locator(f'[data-state="{state}"]')).to_have_attribute("data-status", "succeeded",
                                                                            timeout=WAIT_MS)
    assert json.loads(page.get_by_test_id("output").text_content()) == "hi"
    page.get_by_test_id("tab-history").click()
    expect(page.get_by_test_id("history-table").locator("tbody tr")).to_have_count(6)  # start, 2 x 2, end
    expect(page.get_by_test_id("stop")).to_have_count(0)


def test_a_history_of_25000_events_opens_at_once_and_pages(server, sfn, page):
    arn = sfn.start_execution(stateMachineArn=machine(sfn, {"StartAt": "Each", "States": {"Each": {
        "Type": "Map", "ItemsPath": "$.items", "ResultPath": None, "End": True,
        "ItemProcessor": {"StartAt": "Item", "States": {"Item": {"Type": "Pass", "End": True}}}}}}),
        input=json.dumps({"items": list(range(6_250))}))["executionArn"]
    wait_status(sfn, arn, "FAILED")  # AWS's limit: the 25,000th event fails it
    page.goto(execution_url(server, arn))
    expect(page.get_by_test_id("graph").locator('[data-state="Item"]')).to_have_attribute(
        "data-status", "succeeded", timeout=WAIT_MS)
    page.get_by_test_id("tab-history").click()
    expect(page.get_by_test_id("history-pages")).to_contain_text("25,000 events", timeout=WAIT_MS)
    expect(page.get_by_test_id("history-table").locator("tbody tr")).to_have_count(100)
    expect(page.get_by_test_id("history-pages-where")).to_have_text("Page 1 of 250")
    page.get_by_test_id("history-pages-next").click()
    expect(page.get_by_test_id("history-table").locator("tbody tr").first.locator("td").first).to_have_text("101")
    shoot(page, "history-table")
    page.get_by_test_id("tab-timeline").click()
    expect(page.get_by_test_id("timeline-pages")).to_contain_text("6,250 runs")
    expect(page.get_by_test_id("timeline-row")).to_have_count(200)
    shoot(page, "timeline")


def test_activities_show_their_waiting_tasks_and_polling_workers_and_the_cluster_page_its_shards(server, sfn, page):
    waiting = activity(sfn)
    sfn.start_execution(stateMachineArn=machine(sfn, {"StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": waiting, "End": True}}}))
    polled = activity(sfn)
    worker = threading.Thread(target=lambda: server.client().get_activity_task(activityArn=polled,
                                                                               workerName="worker-7"))
    worker.start()
    time.sleep(0.5)
    page.goto(f"{server.endpoint}/#/activities")
    rows = page.get_by_test_id("activities").locator("tbody tr")
    expect(rows.filter(has_text=waiting.rsplit(":", 1)[1]).locator("td").nth(1)).to_have_text("1", timeout=WAIT_MS)
    expect(rows.filter(has_text=polled.rsplit(":", 1)[1]).locator("td").nth(2)).to_have_text("worker-7")
    shoot(page, "activities")
    sfn.start_execution(stateMachineArn=machine(sfn, {"StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": polled, "End": True}}}))  # the worker's poll ends with this task
    worker.join(30)
    page.goto(f"{server.endpoint}/#/cluster")
    expect(page.get_by_test_id("single-node")).to_contain_text("it serves all 8 shards", timeout=WAIT_MS)
    expect(page.get_by_test_id("shards").locator("tbody tr")).to_have_count(8)


def test_a_node_that_does_not_run_the_execution_shows_it_and_follows_it(tmp_path, page):
    a, b = Node(tmp_path / "shared.db", "a").start(), Node(tmp_path / "shared.db", "b").start()
    try:
        on_a = set(range(SHARDS // 2))
        a.take(on_a)
        b.take(set(range(SHARDS // 2, SHARDS)))
        for node in (a, b):
            node.directory.refresh()
        sfn = a.client()
        worker_activity = activity(sfn)
        machine_arn = machine(sfn, {"StartAt": "Work", "States": {
            "Work": {"Type": "Task", "Resource": worker_activity, "Next": "Done"}, "Done": {"Type": "Succeed"}}})
        arn = sfn.start_execution(stateMachineArn=machine_arn, name=name_on(machine_arn, on_a, "on-a"))["executionArn"]
        page.goto(f"{b.endpoint}/#/execution/{quote(arn, safe='')}")  # b does not run it: it reads it through a
        graph = page.get_by_test_id("graph")
        expect(graph.locator('[data-state="Work"]')).to_have_attribute("data-status", "running", timeout=WAIT_MS)
        task = poll_task(sfn, worker_activity)
        sfn.send_task_success(taskToken=task["taskToken"], output="{}")
        # Nothing wakes b's stream (a commits): the page reads again on its timer.
        expect(graph.locator('[data-state="Done"]')).to_have_attribute("data-status", "succeeded", timeout=WAIT_MS)
        expect(page.get_by_test_id("status")).to_have_text("SUCCEEDED")
    finally:
        page.goto("about:blank")  # its stream closes: a test server waits for every connection as it stops
        a.close()
        b.close()


def test_a_stopping_server_ends_the_console_streams_instead_of_waiting_for_them(tmp_path):
    process = ServerProcess(tmp_path / "data").start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", process.port, timeout=30)
        connection.request("GET", "/console/events?executionArn=" + quote(
            "arn:aws:states:us-east-1:123456789012:execution:any:one", safe=""))
        response = connection.getresponse()
        assert (response.readline(), response.readline()) == (b"retry: 2000\n", b"event: watching\n")
        process.process.terminate()
        assert process.process.wait(30) == 0  # the open stream did not hold the shutdown
        assert response.read() == b"data: {}\n\n"  # the rest of its first message, then the stream's end
        connection.close()
    finally:
        process.kill()


def test_a_stopped_then_redriven_task_shows_each_run_once_and_parallel_attempts_stay_with_their_states(
        server, sfn, page):
    alpha, beta = activity(sfn), activity(sfn)
    arn = sfn.start_execution(stateMachineArn=machine(sfn, {"StartAt": "Both", "States": {
        "Both": {"Type": "Parallel", "End": True, "Branches": [
            {"StartAt": "TaskA", "States": {"TaskA": {"Type": "Task", "Resource": alpha, "End": True}}},
            {"StartAt": "TaskB", "States": {"TaskB": {"Type": "Task", "Resource": beta, "End": True}}}]}}}))[
        "executionArn"]
    page.goto(execution_url(server, arn))
    graph = page.get_by_test_id("graph")
    task = poll_task(sfn, beta)  # B's attempt ends first, while A's is still scheduled
    sfn.send_task_success(taskToken=task["taskToken"], output='{"b": 1}')
    expect(graph.locator('[data-state="TaskB"]')).to_have_attribute("data-status", "succeeded", timeout=WAIT_MS)
    expect(graph.locator('[data-state="TaskA"]')).to_have_attribute("data-status", "running")
    graph.locator('[data-state="TaskA"]').click()
    expect(page.get_by_test_id("attempts").locator("tbody tr")).to_have_count(1)
    expect(page.get_by_test_id("attempts").locator("tbody tr td").nth(3)).to_have_text("in progress")
    graph.locator('[data-state="TaskB"]').click()
    expect(page.get_by_test_id("attempts").locator("tbody tr td").nth(3)).to_have_text("succeeded")

    page.get_by_test_id("stop").click()
    page.get_by_test_id("dialog-confirm").click()
    expect(page.get_by_test_id("status")).to_have_text("ABORTED", timeout=WAIT_MS)
    expect(graph.locator('[data-state="TaskA"]')).to_have_attribute("data-status", "aborted")
    events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    page.get_by_test_id("tab-history").click()
    rows = page.get_by_test_id("history-table").locator("tbody tr")
    expect(rows).to_have_count(len(events))  # each event once, though the stream woke the page as Stop did
    page.get_by_test_id("tab-graph").click()

    page.get_by_test_id("redrive").click()
    page.get_by_test_id("dialog-confirm").click()
    expect(page.get_by_test_id("status")).to_have_text("RUNNING", timeout=WAIT_MS)
    task = poll_task(sfn, alpha)
    sfn.send_task_success(taskToken=task["taskToken"], output='{"a": 2}')
    expect(page.get_by_test_id("status")).to_have_text("SUCCEEDED", timeout=WAIT_MS)
    graph.locator('[data-state="TaskA"]').click()
    runs = page.get_by_test_id("state-run")
    expect(runs).to_have_count(2)
    expect(runs.nth(0).get_by_test_id("run-status")).to_have_text("aborted")
    expect(runs.nth(1).get_by_test_id("run-status")).to_have_text("succeeded")
    assert json.loads(runs.nth(1).get_by_test_id("state-output").inner_text()) == {"a": 2}
    page.get_by_test_id("tab-history").click()
    expect(rows).to_have_count(len(sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]))


def test_a_state_machine_page_shows_its_versions_and_its_aliases_routing_weights(server, sfn, page):
    arn = machine(sfn, {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    first = sfn.publish_state_machine_version(stateMachineArn=arn)["stateMachineVersionArn"]
    sfn.update_state_machine(stateMachineArn=arn, definition=json.dumps(
        {"StartAt": "Q", "States": {"Q": {"Type": "Pass", "End": True}}}))
    second = sfn.publish_state_machine_version(stateMachineArn=arn)["stateMachineVersionArn"]
    sfn.create_state_machine_alias(name="live", routingConfiguration=[
        {"stateMachineVersionArn": first, "weight": 80}, {"stateMachineVersionArn": second, "weight": 20}])
    page.goto(f"{server.endpoint}/#/state-machine/{quote(arn, safe='')}")
    expect(page.get_by_test_id("versions").locator("tbody tr")).to_have_count(2, timeout=WAIT_MS)
    alias = page.get_by_test_id("aliases").locator("tbody tr")
    expect(alias).to_have_count(1)
    expect(alias.locator("td").nth(1)).to_have_text("version 1: 80 %, version 2: 20 %")
