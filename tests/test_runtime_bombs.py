"""Runtime bombs against a real server through boto3: definitions and inputs built to freeze the process or
strand an execution (catastrophic regular expressions, deep JSON, huge intrinsic results, JSONata loops, ranges,
recursion and string building past the evaluation budget of one transition step). Each case fails its own
execution with AWS's error name, or is refused at the door, while an ordinary execution started beside it
completes. A case is one row of CASES; adding a bomb is adding a row."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError

from server import ROLE_ARN, wait_closed

NEAR_MISS = "a" * 5000 + "b"  # backtracking needs about 2^5000 steps to refuse /(a+)+$/ here


def _deep_text(levels: int) -> str:
    return "[" * levels + "]" * levels


def _nested(levels: int, inner: dict[str, Any]) -> dict[str, Any]:
    """``inner`` wrapped in ``levels`` objects: a template that builds deep output around a computed value."""
    for _ in range(levels):
        inner = {"d": inner}
    return inner


def _pass(fields: dict[str, Any], jsonata: bool = False, then_wait: bool = False) -> dict[str, Any]:
    """A Pass state; ``then_wait`` puts a Wait after it, so its output is held in the stored execution state."""
    states = {"P": {"Type": "Pass", **fields, **({"Next": "W"} if then_wait else {"End": True})}}
    if then_wait:
        states["W"] = {"Type": "Wait", "Seconds": 1, "End": True}
    machine = {"StartAt": "P", "States": states}
    return {"QueryLanguage": "JSONata", **machine} if jsonata else machine


def _choice(rule: dict[str, Any]) -> dict[str, Any]:
    return {"StartAt": "C", "States": {
        "C": {"Type": "Choice", "Choices": [{**rule, "Next": "Yes"}], "Default": "No"},
        "Yes": {"Type": "Fail", "Error": "Matched"}, "No": {"Type": "Fail", "Error": "NotMatched"}}}


def _looping(output: str) -> dict[str, Any]:
    """A JSONata Pass computing ``output``, through a Choice back to itself for as long as it succeeds."""
    return {"QueryLanguage": "JSONata", "StartAt": "P", "States": {
        "P": {"Type": "Pass", "Output": {"v": output}, "Next": "C"},
        "C": {"Type": "Choice", "Choices": [{"Condition": "{% $exists($states.input.v) %}", "Next": "P"}],
              "Default": "Done"},
        "Done": {"Type": "Succeed"}}}


@dataclass(frozen=True)
class Bomb:
    name: str
    definition: dict[str, Any]
    input: dict[str, Any] = field(default_factory=dict)
    error: str = ""  # the execution fails with this error
    refused: str = ""  # or StartExecution answers this AWS error


CASES = [
    # -- regular expressions: linear-time engines decide these at once
    Bomb("StringMatches many stars", _choice({"Variable": "$.s", "StringMatches": "*a*a*a*a*a*a*a*a*b"}),
         {"s": "a" * 5000}, error="NotMatched"),
    Bomb("JSONata $match", _pass({"Output": "{% $count($match($states.input.s, /(a+)+$/)) = 1 %}"}, jsonata=True),
         {"s": NEAR_MISS}, error=""),
    Bomb("JSONata $contains", _pass({"Output": "{% $contains($states.input.s, /(a|aa)+c/) %}"}, jsonata=True),
         {"s": NEAR_MISS}, error=""),
    Bomb("JSONata $replace", _pass({"Output": "{% $replace($states.input.s, /(a*)*c/, 'x') %}"}, jsonata=True),
         {"s": NEAR_MISS}, error=""),
    Bomb("JSONata $split", _pass({"Output": "{% $split($states.input.s, /(a+)+c/) %}"}, jsonata=True),
         {"s": NEAR_MISS}, error=""),
    Bomb("JSONata $toMillis picture", _pass({"Output": "{% $toMillis($states.input.s, '(a+)+[Y]') %}"}, jsonata=True),
         {"s": NEAR_MISS}, error="States.QueryEvaluationError"),  # returns nothing: AWS's error for undefined
    Bomb("JSONata backreference", _pass({"Output": "{% $match($states.input.s, /(a)\\1/) %}"}, jsonata=True),
         {"s": "aa"}, error="States.QueryEvaluationError"),
    Bomb("JSONPath filter =~", _pass({"Parameters": {"v.$": '$.items[?(@.s =~ "(a+)+$")]'}}),
         {"items": [{"s": NEAR_MISS}]}, error=""),
    # -- deep JSON: refused at the door, or failing the execution that builds it
    Bomb("deep input", _pass({}), {"v": json.loads(_deep_text(300))}, refused="InvalidExecutionInput"),
    Bomb("deep input into a Wait", {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 0, "End": True}}},
         {"v": json.loads(_deep_text(300))}, refused="InvalidExecutionInput"),
    Bomb("deep JSONata output", _pass({"Output": _nested(100, {"v": "{% $parse($states.input.s) %}"})},
                                      jsonata=True, then_wait=True), {"s": _deep_text(190)}, error="States.Runtime"),
    Bomb("deep intrinsic output", _pass({"Parameters": _nested(100, {"v.$": "States.StringToJson($.s)"})},
                                        then_wait=True), {"s": _deep_text(190)}, error="States.Runtime"),
    Bomb("deep input at the limit is stored", _pass({}, then_wait=True), {"v": json.loads(_deep_text(199))}),
    Bomb("StringToJson deeper than JSON parsers go", _pass({"Parameters": {"v.$": "States.StringToJson($.s)"}}),
         {"s": _deep_text(20_000)}, error="States.IntrinsicFailure"),
    # -- huge intrinsic results
    Bomb("ArrayRange huge", _pass({"Parameters": {"v.$": "States.ArrayRange(1, 100000000, 1)"}}),
         error="States.IntrinsicFailure"),
    Bomb("StringSplit huge", _pass({"Parameters": {"v.$": "States.StringSplit($.s, ',')"}}),
         {"s": "a," * 100_000}, error="States.DataLimitExceeded"),
    Bomb("Array over the payload limit", _pass({"Parameters": {"v.$": "States.Array($.s, $.s)"}}),
         {"s": "x" * 150_000}, error="States.DataLimitExceeded"),
    # -- the evaluation budget of one transition step: steps, time, items
    Bomb("JSONata loop through a Choice", _looping("{% $reduce([1..400000], function($a, $b) { $a + $b }) %}"),
         error="States.QueryEvaluationError"),
    Bomb("JSONata endless recursion", _pass({"Output": "{% ($f := function($x) { $f($x) }; $f(1)) %}"}, jsonata=True),
         error="States.QueryEvaluationError"),
    Bomb("JSONata huge range", _pass({"Output": "{% $count([1..10000000]) %}"}, jsonata=True),
         error="States.QueryEvaluationError"),
    Bomb("JSONata string doubling", _pass({"Output": "{% ($s := function($x, $n) { $n = 0 ? $x : "
                                                     "$s($x & $x, $n - 1) }; $s('a', 40)) %}"}, jsonata=True),
         error="States.QueryEvaluationError"),
    Bomb("JSONata $pad huge", _pass({"Output": "{% $pad('', 1000000000) %}"}, jsonata=True),
         error="States.QueryEvaluationError"),
    Bomb("JSONata $formatNumber separator as a regex",
         _pass({"Output": "{% $formatNumber(1234.5, '#,##0.00', {'grouping-separator': '(a+)+'}) %}"}, jsonata=True),
         error="States.QueryEvaluationError"),
    Bomb("dispatch deeper than the store writes", {"StartAt": "T", "States": {"T": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution", "End": True,
        "Parameters": {"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:none",
                       "Input": _nested(100, {"v.$": "States.StringToJson($.s)"})}}}},
         {"s": _deep_text(190)}, error="States.Runtime"),
]


@pytest.fixture(scope="module")
def ordinary(make_machine):
    return make_machine({"StartAt": "Wait", "States": {
        "Wait": {"Type": "Wait", "Seconds": 0, "Next": "Done"}, "Done": {"Type": "Pass", "End": True}}})


@pytest.fixture(scope="module")
def make_machine(server):
    # Module scope, so the ordinary machine is made once; the conftest fixture of this name is per test.
    client = server.client()

    def make(definition: dict) -> str:
        return client.create_state_machine(name=f"bomb-{uuid.uuid4().hex[:12]}", definition=json.dumps(definition),
                                           roleArn=ROLE_ARN)["stateMachineArn"]

    return make


@pytest.mark.parametrize("bomb", CASES, ids=[case.name for case in CASES])
def test_a_bomb_fails_only_its_own_execution(sfn, make_machine, ordinary, bomb):
    machine = make_machine(bomb.definition)
    text = json.dumps(bomb.input)
    if bomb.refused:
        with pytest.raises(ClientError) as caught:
            sfn.start_execution(stateMachineArn=machine, input=text)
        assert caught.value.response["Error"]["Code"] == bomb.refused
        started = None
    else:
        started = sfn.start_execution(stateMachineArn=machine, input=text)["executionArn"]
    beside = sfn.start_execution(stateMachineArn=ordinary, input=json.dumps({"k": 1}))["executionArn"]
    if started is not None:
        described = wait_closed(sfn, started)
        if bomb.error:
            assert (described["status"], described.get("error")) == ("FAILED", bomb.error), described.get("cause")
        else:
            assert described["status"] == "SUCCEEDED", described.get("cause")
    assert wait_closed(sfn, beside)["status"] == "SUCCEEDED"
