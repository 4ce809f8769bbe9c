"""JSON text in and out, compact as AWS writes state data; orjson for speed, the standard library for the
rare values orjson refuses (integers beyond 64 bits)."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # raises ValueError when the text really is not JSON
