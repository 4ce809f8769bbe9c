"""The validation corpus: every case of tests/validation/*.json through ``parse_definition`` (fast, pure), and the
cases marked ``"api": true`` through ValidateStateMachineDefinition and CreateStateMachine on a real server.

A case is ``{"name", "definition" (an object) or "definition_text" (raw text), "valid", "diagnostics"}``; each
expected diagnostic has ``code`` and ``location`` ("" for none) and optionally ``message`` (exact) or
``message_contains``. Diagnostics are compared in order and in number. Optional fields: ``api`` (also run against
the server), ``aws_message`` (the exact InvalidDefinition message AWS was recorded giving), ``source`` (where the
wording was seen), ``pending`` (an AWS rule statewright does not enforce yet: the case must fail, strictly).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from server import ROLE_ARN
from statewright.asl.definition import InvalidDefinition, parse_definition

CORPUS = Path(__file__).parent / "validation"


def _load() -> list[dict]:
    cases = []
    for path in sorted(CORPUS.glob("*.json")):
        for case in json.loads(path.read_text()):
            case["file"] = path.name
            cases.append(case)
    return cases


CASES = _load()


def _param(case: dict):
    marks = [pytest.mark.xfail(strict=True, reason=case["pending"])] if "pending" in case else []
    return pytest.param(case, id=case["name"], marks=marks)


def _text(case: dict) -> str:
    return case["definition_text"] if "definition_text" in case else json.dumps(case["definition"])


def _assert_diagnostics(actual: list[dict], expected: list[dict]) -> None:
    """``actual``: diagnostics as dicts with code, message and (possibly empty) location."""
    shown = json.dumps(actual, indent=1)
    assert len(actual) == len(expected), shown
    for got, want in zip(actual, expected, strict=True):
        assert got["code"] == want["code"], shown
        assert got["location"] == want["location"], shown
        if "message" in want:
            assert got["message"] == want["message"], shown
        if "message_contains" in want:
            assert want["message_contains"] in got["message"], shown


def test_the_corpus_is_well_formed():
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names)), "case names must be unique"
    assert len(CASES) >= 60
    for case in CASES:
        assert ("definition" in case) != ("definition_text" in case), case["name"]
        assert case["valid"] == (not case.get("diagnostics")), case["name"]
        for diagnostic in case.get("diagnostics", []):
            assert {"code", "location"} <= diagnostic.keys(), case["name"]


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_parse_definition(case):
    text = _text(case)
    if case["valid"]:
        parse_definition(text)
        return
    with pytest.raises(InvalidDefinition) as raised:
        parse_definition(text)
    diagnostics = raised.value.diagnostics
    _assert_diagnostics([{"code": d.code, "message": d.message, "location": d.location} for d in diagnostics],
                        case["diagnostics"])
    if "aws_message" in case:
        assert str(raised.value) == case["aws_message"]


API_CASES = [case for case in CASES if case.get("api") and "pending" not in case]


def test_the_server_sample_covers_valid_and_invalid_cases():
    assert {case["valid"] for case in API_CASES} == {True, False}
    assert len(API_CASES) >= 10


@pytest.mark.parametrize("case", [_param(case) for case in API_CASES])
def test_validate_and_create_through_boto3(sfn, case):
    text = _text(case)
    result = sfn.validate_state_machine_definition(definition=text)
    assert result["truncated"] is False
    assert result["result"] == ("OK" if case["valid"] else "FAIL")
    diagnostics = result["diagnostics"]
    assert all(d["severity"] == "ERROR" for d in diagnostics)
    _assert_diagnostics([{**d, "location": d.get("location", "")} for d in diagnostics], case.get("diagnostics", []))

    name = f"validation-{uuid.uuid4().hex[:12]}"
    if case["valid"]:
        sfn.create_state_machine(name=name, definition=text, roleArn=ROLE_ARN)
        return
    with pytest.raises(sfn.exceptions.InvalidDefinition) as raised:
        sfn.create_state_machine(name=name, definition=text, roleArn=ROLE_ARN)
    rendered = ", ".join(f"{d['code']}: {d['message']} at {d.get('location', 'null')}" for d in diagnostics)
    message = raised.value.response["Error"]["Message"]
    assert message == f"Invalid State Machine Definition: '{rendered}'"
    if "aws_message" in case:
        assert message == case["aws_message"]
