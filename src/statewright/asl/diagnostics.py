"""Diagnostics: what ValidateStateMachineDefinition lists and CreateStateMachine joins into InvalidDefinition, the
codes AWS uses, the wording of its recurring messages, and reading definition JSON as AWS's parser reports it.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any

# Diagnostic codes (AWS's, from the ValidateStateMachineDefinitionDiagnostic list; UNSUPPORTED_FEATURE is ours).
SCHEMA = "SCHEMA_VALIDATION_FAILED"
INVALID_JSON = "INVALID_JSON_DESCRIPTION"
MISSING_TARGET = "MISSING_TRANSITION_TARGET"
MISSING_END = "MISSING_END_STATE"
DUPLICATE_NAME = "DUPLICATE_STATE_NAME"
INVALID_NAME = "INVALID_STATE_NAME"
INVALID_RESOURCE = "INVALID_RESOURCE"
TOO_DEEPLY_NESTED = "TOO_DEEPLY_NESTED"
UNSUPPORTED_FEATURE = "UNSUPPORTED_FEATURE"

_SOURCE_SHOWN_CHARS = 500  # INVALID_JSON_DESCRIPTION quotes the definition up to this length, as Jackson does
_BARE_TOKEN = re.compile(r"[A-Za-z0-9_$+.-]+")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    message: str
    location: str = ""
    severity: str = "ERROR"

    def render(self) -> str:
        """``CODE: message at location``, as CreateStateMachine writes it (``at null`` when there is none)."""
        return f"{self.code}: {self.message} at {self.location or 'null'}"


class InvalidDefinition(ValueError):
    """The definition breaks a States Language rule; ``diagnostics`` lists every problem found."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("Invalid State Machine Definition: '" + ", ".join(d.render() for d in diagnostics) + "'")


class _NonNumeric(ValueError):
    """NaN or Infinity: JSON has no such numbers."""


def _no_constant(name: str) -> Any:
    raise _NonNumeric(name)


def load_json(text: str) -> tuple[Any, dict[int, list[str]]]:
    """The JSON value of ``text``, and the keys each object repeats (by the object's id)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "replace")
    if not text.strip():
        raise InvalidDefinition([Diagnostic(SCHEMA, "Definition must be a valid JSON object")])
    duplicates: dict[int, list[str]] = {}

    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        built = dict(pairs)
        if len(built) != len(pairs):
            seen: set[str] = set()
            duplicates[id(built)] = [key for key, _ in pairs if key in seen or seen.add(key)]
        return built

    try:
        return json.loads(text, object_pairs_hook=build, parse_constant=_no_constant), duplicates
    except json.JSONDecodeError as exc:
        raise InvalidDefinition([json_problem(text, exc.msg, exc.pos)]) from None
    except _NonNumeric as exc:
        token = str(exc)
        detail = f"Non-standard token '{token}': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow"
        raise InvalidDefinition([json_problem(text, detail, max(text.find(token), 0), len(token))]) from None
    except ValueError:  # an integer longer than int's digit limit (Jackson, AWS's parser, also caps a number)
        digits = max(re.finditer(r"\d+", text), key=lambda run: len(run.group()))
        detail = (f"Number value length ({len(digits.group())}) exceeds the maximum allowed "
                  f"({sys.get_int_max_str_digits()})")
        raise InvalidDefinition([json_problem(text, detail, digits.start(), len(digits.group()))]) from None
    except RecursionError:
        raise InvalidDefinition([Diagnostic(TOO_DEEPLY_NESTED, "The states are too deeply nested")]) from None


def json_problem(text: str, detail: str, pos: int, length: int = 0) -> Diagnostic:
    """INVALID_JSON_DESCRIPTION in the words of AWS's parser (Jackson) where they are known: the problem, then
    ``at [Source: (String)"..."; line: L, column: C]``, whose column is the one just after the offending text."""
    detail, length = jackson_detail(text, detail, pos, length)
    end = min(pos + length, len(text))
    line = text.count("\n", 0, end) + 1
    column = end - (text.rfind("\n", 0, end) + 1) + 1
    shown = text if len(text) <= _SOURCE_SHOWN_CHARS else (
        f'{text[:_SOURCE_SHOWN_CHARS]}"[truncated {len(text) - _SOURCE_SHOWN_CHARS} chars]')
    location = f'[Source: (String)"{shown}"; line: {line}, column: {column}]'
    return Diagnostic(INVALID_JSON, f"{detail}\n at {location}", location)


def jackson_detail(text: str, detail: str, pos: int, length: int = 0) -> tuple[str, int]:
    """What Jackson says of the JSON problem the standard library found at ``pos`` (``detail`` is its message),
    and how many characters of ``text`` the problem spans. AWS quotes it alone where it reads a payload
    (execution input), and with the place in the text where it reads a definition."""
    if length == 0 and pos < len(text):
        ch = text[pos]
        token = _BARE_TOKEN.match(text, pos) if detail == "Expecting value" else None
        if token is not None:
            detail = (f"Unrecognized token '{token.group()}': was expecting (JSON String, Number, Array, Object or "
                      "token 'null', 'true' or 'false')")
            length = len(token.group())
        else:
            expected = {
                "Expecting value": "expected a valid value (JSON String, Number, Array, Object or token 'null', "
                                   "'true' or 'false')",
                "Expecting property name enclosed in double quotes": "was expecting double-quote to start field name",
                "Expecting ':' delimiter": "was expecting a colon to separate field name and value",
                "Expecting ',' delimiter": "was expecting comma to separate entries",
                "Extra data": "expected end-of-input",
            }.get(detail)
            if expected is not None:
                detail = f"Unexpected character ('{ch}' (code {ord(ch)})): {expected}"
            length = 1
    elif pos >= len(text):
        detail = f"Unexpected end-of-input: {detail[0].lower()}{detail[1:]}"
    return detail, length


def expected(kind: str) -> str:
    return f"Expected value of type [{kind}]"


def one_of(values: tuple[str, ...] | list[str]) -> str:
    return f"Value should be one of the following: [{', '.join(values)}]"


def only_one(fields: list[str]) -> str:
    return f"There should only be one of the following fields: [{', '.join(fields)}]"


def language_only(language: str, key: str) -> str:
    other = "JSONata" if language == "JSONPath" else "JSONPath"
    return (f"The QueryLanguage is set to '{language}', but field '{key}' is only supported for the '{other}' "
            "QueryLanguage")
