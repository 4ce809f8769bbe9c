"""The conformance corpus: every case in tests/conformance/*.json runs through boto3 against a real server.

A case is ``{"name", "definition", "input" | "input_text", "expect", "stop"?}``. ``expect`` holds ``status`` and
``events`` (history event types in order) and optionally ``output`` (compared as parsed JSON), ``output_text``
(compared as text), ``error`` / ``cause`` (null means DescribeExecution has no such key) and ``cause_contains``.
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

Every case also checks the history's id laws: ids run 1, 2, 3, ...; ExecutionStarted, the first StateEntered
and ExecutionAborted point at event 0; every other event points at the one before it.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "conformance"
DEADLINE_S = 60
POLL_S = 0.02


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
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {DEADLINE_S} s")
        time.sleep(POLL_S)


def check_id_laws(events: list[dict]) -> None:
    assert [event["id"] for event in events] == list(range(1, len(events) + 1)), "ids must run 1, 2, 3, ..."
    for index, event in enumerate(events):
        first_state = index == 1 and event["type"].endswith("StateEntered")
        if index == 0 or first_state or event["type"] == "ExecutionAborted":
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


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_conformance(case, sfn, make_machine):
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
            assert closing.get(key) == expect[key], (key, closing)
    if "cause_contains" in expect:
        assert expect["cause_contains"] in described.get("cause", ""), described
    if described["status"] == "FAILED":
        assert {k: v for k, v in closing.items() if k in ("error", "cause")} == {
            k: described[k] for k in ("error", "cause") if k in described}
