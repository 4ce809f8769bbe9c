"""JSON text in and out, compact as AWS writes state data; orjson for speed, the standard library for the
rare values orjson refuses (integers beyond 64 bits, nesting beyond its 255 levels).

What a caller hands in (StartExecution input, SendTaskSuccess output) may nest DEPTH_MAX levels (api/payloads.py
refuses deeper), which the engine can store. The execution state nests a payload a
few levels deeper still, and orjson writes at most 255; a value built deeper at run time fails its execution
with States.Runtime (decider/decide.py ``fail_unstorable``).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from .errors import RUNTIME, StatesError

DEPTH_MAX = 200  # levels of arrays and objects in a payload


def dumps(value: Any) -> str:
    """Raises StatesError(States.Runtime) for a value nested too deeply to write at all."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        except RecursionError:
            raise StatesError(RUNTIME, "The value is nested too deeply to be written as JSON.") from None


def loads(text: str | bytes) -> Any:
    """Raises ValueError when the text is not JSON, or nests deeper than Python's recursion allows."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            return json.loads(text)  # raises ValueError when the text really is not JSON
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None


def depth(value: Any) -> int:
    """Levels of arrays and objects in ``value`` (0 for a scalar), counted without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, at = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, at)
        pending.extend((child, at + 1) for child in children if isinstance(child, dict | list))
    return deepest


def shown(value: Any) -> str:
    """A value as AWS quotes it in a runtime cause (``$.x == value``): a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else dumps(value)
