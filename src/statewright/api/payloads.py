"""JSON carried inside string members (execution input, task output, TestState variables), read at the door.

A payload is read with orjson, as the engine writes state data: what orjson cannot read (a number beyond a
double, a lone surrogate escape) or the engine could not store (nesting deeper than jsonio.DEPTH_MAX) is refused
here with AWS's error for that member (InvalidExecutionInput, InvalidOutput), never a 500 later.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..asl.jsonio import DEPTH_MAX, depth
from .errors import AwsError


def parse_json(text: str, code: str, prefix: str) -> Any:
    """The JSON value of ``text``; raises AwsError(``code``, "``prefix``: '<what is wrong>'") if there is none."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise AwsError(code, f"{prefix}: '{exc}'") from None
    if depth(value) > DEPTH_MAX:
        raise AwsError(code, f"{prefix}: 'JSON nested deeper than {DEPTH_MAX} levels'")
    return value
