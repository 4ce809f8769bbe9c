"""Which workflow variables each state reads: DescribeStateMachine's ``variableReferences``.

AWS answers a map from state name to the sorted names of the variables the state reads, leaving out states that
read none (and the whole map when no state does); states inside Parallel branches and Map processors are listed by
their own names. A JSONPath state reads a variable through a path (``InputPath``, ``ItemsPath``, ``SecondsPath``,
a Choice rule's ``Variable`` or ``...Path`` comparison, ...) or a ``key.$`` value (paths and intrinsic functions
in Parameters, ResultSelector, ItemSelector, Assign) that starts ``$name``; ``$.``, ``$$`` and plain strings read
none. A JSONata state reads the free ``$name`` of its ``{% %}`` expressions, except ``$states``, functions that are
called, and names the expression binds itself (``$x := ...``, ``function($x)``).

Pure: reads the definition text only, and runs on a definition that parse_definition accepted.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_NESTED = {"States", "Branches", "ItemProcessor", "Iterator"}  # nested machines: their states speak for themselves
_LITERAL = {"Result", "ResultPath", "Comment"}  # literals, and where a result is written (never a variable)
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_VARIABLE = re.compile(r"(?<![\w$])\$([A-Za-z_][A-Za-z0-9_]*)")
_CALLED = re.compile(r"\s*\(")
_BOUND = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)\s*:=")
_PARAMETERS = re.compile(r"function\s*\(([^)]*)\)")
_EXPRESSION = re.compile(r"^\{%(.*)%\}$", re.S)


def variable_references(definition: str) -> dict[str, list[str]]:
    """State name -> the sorted variables it reads, for every state that reads one."""
    raw = orjson.loads(definition)
    found: dict[str, list[str]] = {}
    _machine(raw, raw.get("QueryLanguage", "JSONPath"), found)
    return found


def _machine(machine: dict[str, Any], language: str, found: dict[str, list[str]]) -> None:
    for name, state in machine.get("States", {}).items():
        state_language = state.get("QueryLanguage", language)
        names: set[str] = set()
        _read(state, state_language == "JSONata", names, top=True)
        if names:
            found[name] = sorted(names)
        for branch in state.get("Branches", []):
            _machine(branch, language, found)
        for key in ("ItemProcessor", "Iterator"):
            if isinstance(state.get(key), dict):
                _machine(state[key], language, found)


def _read(value: Any, jsonata: bool, names: set[str], top: bool = False, key: str = "") -> None:
    if isinstance(value, dict):
        for inner, item in value.items():
            if not (top and (inner in _NESTED or inner in _LITERAL)):
                _read(item, jsonata, names, key=inner)
    elif isinstance(value, list):
        for item in value:
            _read(item, jsonata, names, key=key)
    elif isinstance(value, str):
        if jsonata:
            expression = _EXPRESSION.match(value.strip())
            if expression:
                names |= _jsonata_names(expression.group(1))
        elif key.endswith((".$", "Path")) or key == "Variable":
            names |= _path_names(value)


def _path_names(text: str) -> set[str]:
    """The variables a path or an intrinsic function reads (string literals left out)."""
    return set(_VARIABLE.findall(_QUOTED.sub("''", text)))


def _jsonata_names(text: str) -> set[str]:
    code = _QUOTED.sub('""', text)
    local = set(_BOUND.findall(code))
    for parameters in _PARAMETERS.findall(code):
        local |= set(_VARIABLE.findall(parameters))
    free = {match.group(1) for match in _VARIABLE.finditer(code) if not _CALLED.match(code, match.end())}
    return free - local - {"states"}
