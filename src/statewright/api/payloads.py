"""JSON carried inside string members (execution input, task output, TestState variables), read at the door.

A payload is read as the engine reads and writes state data, with orjson: what orjson cannot read (a number
beyond a double, a lone surrogate escape, nesting past its depth limit) the engine could not store either, so it
is refused here with AWS's error for that member (InvalidExecutionInput, InvalidOutput), never a 500 later. How
deep a payload may nest to be stored is the engine's rule, not this module's.
"""

from __future__ import annotations

from typing import Any

import orjson

from .errors import AwsError


def parse_json(text: str, code: str, prefix: str) -> Any:
    """The JSON value of ``text``; raises AwsError(``code``, "``prefix``: '<what is wrong>'") if there is none."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise AwsError(code, f"{prefix}: '{exc}'") from None
