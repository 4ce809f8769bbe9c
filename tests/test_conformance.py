"""The conformance corpus: every case in tests/conformance/*.json runs in the test's process on a clock the test
moves (``InProcess``: statewright's app, engine and SQLite store, the engine ticked by hand and the clock jumping to
the next timer whenever nothing is left to do now, so a Wait of a minute takes no time), and a handful of them
(``THROUGH_BOTO3``) also through boto3 against a real server process, which a protocol mistake our own client
would share cannot pass.

A case is ``{"name", "definition", "input" | "input_text", "expect", "stop"?}``. ``expect`` holds ``status`` and
``events`` (history event types in order) and optionally ``output`` (compared as parsed JSON), ``output_text``
(compared as text), ``error`` / ``cause`` (null means DescribeExecution has no such key; the closing event's
details say the same, unless ``closing`` gives those details whole) and ``cause_contains``.
``stop`` (``{"after_events", "error"?, "cause"?}``) calls StopExecution once the history has that many events.
``previous_ids`` in ``expect`` lists every event's previousEventId where the plain chain below does not hold
(Parallel and Map point events at the events that spawned them). ``assigned`` lists, in order, every
``[state name, assignedVariables]`` that the history's StateExited events carry.
``details`` lists ``[event index, {key: value}]`` pairs: that event's details hold those keys with those values
(``null`` means the key is absent); ``describe`` is the same for DescribeExecution's answer.
``output_fields`` is the same for the output (parsed), where the whole output cannot be known in advance, and
``output_keys`` lists the output object's keys in their order.
``child`` is a second definition, created first: ``${CHILD_ARN}`` in the case's definition names it (for nested
executions).
``source`` (not checked) says where the rule a case holds comes from: an AWS recording, or what is inferred.
To add a case, append it to the topic's file; the pytest id is the case's name.

Every case also checks the history's id laws: ids run 1, 2, 3, ...; ExecutionStarted, the first StateEntered,
ExecutionAborted and ExecutionTimedOut point at event 0; every other event points at the one before it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import asgi
from server import ROLE_ARN
from statewright.api.app import App
from statewright.engine.core import wall_clock_ms
from statewright.engine.engine import Engine
from statewright.node import build_node
from statewright.store.sqlite import SqliteStore

CORPUS = Path(__file__).parent / "conformance"
DEADLINE_S = 60
POLL_S = 0.02
SHARDS = 4
QUIET_ROUNDS = 5  # loop turns with no engine work and no request or dispatch in flight: the node is idle
CLOCK_JUMPS_MAX = 10_000


def load_cases() -> list[dict]:
    cases = []
    for path in sorted(CORPUS.glob("*.json")):
        for case in json.loads(path.read_text()):
            cases.append(case)
    names = [case["name"] for case in cases]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    assert not duplicates, f"duplicate case names: {duplicates}"
    return cases


CASES = load_cases()


def input_text(case: dict) -> str:
    if "input_text" in case:
        return case["input_text"]
    return json.dumps(case.get("input", {}))


def history(sfn, arn: str) -> list[dict]:
    events, token = [], None
    while True:
        page = sfn.get_execution_history(executionArn=arn, maxResults=1000, **({"nextToken": token} if token else {}))
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            return events


def wait_for(condition, what: str):
    """On a real server: poll ``condition`` until it holds (a bounded wait, not a timing assertion)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {DEADLINE_S} s")
        time.sleep(POLL_S)


class InProcess:
    """A node in the test's process on a clock only the test moves: requests go through the ASGI app (the API's
    own parsing, validation and answers), the engine ticks on this thread, and ``wait_for`` lets it run until
    nothing is left to do at this instant, then jumps the clock to the next timer (Trio's autojump clock). Methods
    named as boto3's answer with the parsed JSON body (timestamps stay epoch seconds)."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.now_ms = wall_clock_ms()
        self.store = SqliteStore(data_dir / "statewright.db", SHARDS)
        node = build_node(self.store, lambda edges, histories: Engine(self.store, clock=lambda: self.now_ms,
                                                                      edges=edges, histories=histories),
                          account_id=asgi.ACCOUNT)
        self.engine = node.engine
        self.engine.acquire_all_shards()
        self.app = App(node.service)
        self.loop = asyncio.new_event_loop()
        self._background: set[asyncio.Task] = set()
        self.loop.run_until_complete(self._attach())

    async def _attach(self) -> None:
        self.app.service.attach(asyncio.get_running_loop())  # dispatches (nested executions) flow, as under serve
        self._background = asyncio.all_tasks() - {asyncio.current_task()}

    def close(self) -> None:
        self.loop.run_until_complete(self.app.service.detach())
        self.engine.stop()
        asgi.close(self.app)
        self.loop.close()

    def call(self, operation: str, **params: Any) -> dict:
        status, body = self.loop.run_until_complete(self._call(operation, params))
        assert status == 200, (operation, status, body)
        return body

    async def _call(self, operation: str, params: dict) -> tuple[int, dict]:
        answer = asyncio.ensure_future(asgi.call(self.app, operation, params))
        while not answer.done():  # an answer after a commit needs the engine's tick
            if not self.engine.tick(self.now_ms):
                await asyncio.sleep(0.0005)
        return answer.result()

    def create_state_machine(self, **params: Any) -> dict:
        return self.call("CreateStateMachine", **params)

    def start_execution(self, **params: Any) -> dict:
        return self.call("StartExecution", **params)

    def stop_execution(self, **params: Any) -> dict:
        return self.call("StopExecution", **params)

    def describe_execution(self, **params: Any) -> dict:
        return self.call("DescribeExecution", **params)

    def get_execution_history(self, **params: Any) -> dict:
        return self.call("GetExecutionHistory", **params)

    def wait_for(self, condition: Callable[[], Any], what: str) -> Any:
        """Run the node until ``condition`` holds: at each instant until it is idle, then on to the next timer."""
        deadline = time.monotonic() + DEADLINE_S  # a bound on a stuck engine's real time, not a timing assertion
        for _ in range(CLOCK_JUMPS_MAX):
            self.loop.run_until_complete(self._settle(deadline))
            value = condition()
            if value:
                return value
            due_ms = self._next_due_ms()
            if due_ms is None:
                raise AssertionError(f"{what}: the node is idle and no timer is left to fire")
            self.now_ms = max(due_ms, self.now_ms + 1)
        raise AssertionError(f"{what}: still not there after {CLOCK_JUMPS_MAX} timers")

    async def _settle(self, deadline: float) -> None:
        quiet = 0
        while quiet < QUIET_ROUNDS:
            assert time.monotonic() < deadline, "the engine never went idle"
            worked = self.engine.tick(self.now_ms)
            await asyncio.sleep(0)
            pending = [task for task in asyncio.all_tasks() - self._background - {asyncio.current_task()}
                       if not task.done()]
            quiet = 0 if worked or pending else quiet + 1
            if pending and not worked:  # a dispatch or a store read on its way: give it a moment
                await asyncio.sleep(0.0005)

    def _next_due_ms(self) -> int | None:
        due = [rows[0].fire_at_ms for shard in range(SHARDS)
               if (rows := self.store.due_timers(shard, 0, 1 << 62, 1))]
        return min(due, default=None)


def check_id_laws(events: list[dict]) -> None:
    assert [event["id"] for event in events] == list(range(1, len(events) + 1)), "ids must run 1, 2, 3, ..."
    for index, event in enumerate(events):
        first_state = index == 1 and event["type"].endswith("StateEntered")
        if index == 0 or first_state or event["type"] in ("ExecutionAborted", "ExecutionTimedOut"):
            assert event["previousEventId"] == 0, event
        else:
            assert event["previousEventId"] == event["id"] - 1, event


def details_of(event: dict) -> dict:
    keys = [key for key in event if key.endswith("EventDetails")]
    assert len(keys) == 1, event
    return event[keys[0]]


def assert_holds(found: dict, wanted: dict) -> None:
    for key, value in wanted.items():
        assert found.get(key) == value, (key, found)


def by_name(*names: str) -> list[dict]:
    found = [case for case in CASES if case["name"] in names]
    assert len(found) == len(names), sorted(set(names) - {case["name"] for case in found})
    return found


# Through boto3 on a real server too: the first case of every topic, and those that need the most of a real node
# (nested executions through the dispatcher, StopExecution on a running execution, an execution's timeout).
THROUGH_BOTO3 = [
    *{path.stem: json.loads(path.read_text())[0] for path in sorted(CORPUS.glob("*.json"))}.values(),
    *by_name("nested-sync2-returns-the-child-description-with-json-payloads", "stop-with-error-and-cause",
             "timeout-seconds-ends-a-long-wait")]


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> InProcess:
    node = InProcess(tmp_path_factory.mktemp("conformance") / "data")
    yield node
    node.close()


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_conformance(case, node):
    check(case, node, node.wait_for)


@pytest.mark.slow
@pytest.mark.parametrize("case", THROUGH_BOTO3, ids=[case["name"] for case in THROUGH_BOTO3])
def test_conformance_through_boto3_on_a_real_server(case, sfn):
    check(case, sfn, wait_for)


def check(case: dict, sfn, wait_for: Callable[[Callable[[], Any], str], Any]) -> None:
    """Run the case on ``sfn`` (boto3's client or InProcess), ``wait_for`` moving it on, and check its expectations."""
    def make_machine(definition: dict, name: str) -> str:
        return sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE_ARN)[
            "stateMachineArn"]

    expect = case["expect"]
    definition = case["definition"]
    if "child" in case:
        child_arn = make_machine(case["child"], name=f"cf-child-{uuid.uuid4().hex[:16]}")
        definition = json.loads(json.dumps(definition).replace("${CHILD_ARN}", child_arn))
    machine_arn = make_machine(definition, name=f"cf-{uuid.uuid4().hex[:16]}")
    execution_arn = sfn.start_execution(stateMachineArn=machine_arn, name=f"ex-{uuid.uuid4().hex[:16]}",
                                        input=input_text(case))["executionArn"]

    if "stop" in case:
        stop = case["stop"]
        wait_for(lambda: len(history(sfn, execution_arn)) >= stop["after_events"], "the events before the stop")
        sfn.stop_execution(executionArn=execution_arn,
                           **{key: stop[key] for key in ("error", "cause") if key in stop})

    described = wait_for(
        lambda: (d := sfn.describe_execution(executionArn=execution_arn))["status"] != "RUNNING" and d,
        "the execution to close")
    events = history(sfn, execution_arn)
    types = [event["type"] for event in events]

    assert described["status"] == expect["status"], (described, types)
    assert types == expect["events"], json.dumps(events, indent=1, default=str)
    if "previous_ids" in expect:
        assert [event["id"] for event in events] == list(range(1, len(events) + 1))
        assert [event["previousEventId"] for event in events] == expect["previous_ids"]
    else:
        check_id_laws(events)
    assert json.loads(details_of(events[0])["input"]) == json.loads(input_text(case))
    assert described["input"] == input_text(case)

    if "assigned" in expect:
        assigned = [[details_of(e)["name"], details_of(e)["assignedVariables"]] for e in events
                    if e["type"].endswith("StateExited") and "assignedVariables" in details_of(e)]
        assert assigned == expect["assigned"]
        assert all(details_of(e)["assignedVariablesDetails"] == {"truncated": False} for e in events
                   if "assignedVariables" in (details_of(e) if e["type"].endswith("StateExited") else {}))
    for index, wanted in expect.get("details", []):
        assert_holds(details_of(events[index]), wanted)
    assert_holds(described, expect.get("describe", {}))
    if "output_fields" in expect:
        assert_holds(json.loads(described["output"]), expect["output_fields"])
    if "output_keys" in expect:
        assert list(json.loads(described["output"])) == expect["output_keys"]
    if "output" in expect:
        assert json.loads(described["output"]) == expect["output"]
    if "output_text" in expect:
        assert described["output"] == expect["output_text"]
    if described["status"] == "SUCCEEDED":
        assert details_of(events[-1])["output"] == described["output"]
    else:
        assert "output" not in described

    closing = details_of(events[-1])
    for key in ("error", "cause"):
        if key in expect:
            assert described.get(key) == expect[key], (key, described)
            if "closing" not in expect:  # the closing event's details say the same, unless the case says otherwise
                assert closing.get(key) == expect[key], (key, closing)
    if "closing" in expect:
        assert closing == expect["closing"], closing
    if "cause_contains" in expect:
        assert expect["cause_contains"] in described.get("cause", ""), described
    if described["status"] == "FAILED":
        assert {k: v for k, v in closing.items() if k in ("error", "cause")} == {
            k: described[k] for k in ("error", "cause") if k in described}
