"""JSON carried inside string members (execution input, task output, TestState variables), read at the door.

A payload is read with orjson, as the engine writes state data: what orjson cannot read (a number beyond a
double, a lone surrogate escape) or the engine could not store (nesting deeper than jsonio.DEPTH_MAX) is refused
here with AWS's error for that member (InvalidExecutionInput, InvalidOutput), never a 500 later.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from ..asl.diagnostics import jackson_detail
from ..asl.jsonio import DEPTH_MAX, depth
from .errors import AwsError


def parse_json(text: str, code: str, prefix: str) -> Any:
    """The JSON value of ``text``; raises AwsError(``code``, "``prefix``: '<what is wrong>'") if there is none."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise AwsError(code, f"{prefix}: '{_problem(text, exc)}'") from None
    # Each level opens with a bracket: a text with few of them needs no walk (those inside strings only add).
    if text.count("[") + text.count("{") > DEPTH_MAX and depth(value) > DEPTH_MAX:
        raise AwsError(code, f"{prefix}: 'JSON nested deeper than {DEPTH_MAX} levels'")
    return value


def _problem(text: str, refused: orjson.JSONDecodeError) -> str:
    """AWS's front end reads payloads with Jackson and quotes its message (``Unrecognized token 'not': was
    expecting ...``, without the place in the text). The standard library locates the problem for that wording;
    what only orjson refuses (a number beyond a double, a lone surrogate) keeps orjson's words."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return jackson_detail(text, exc.msg, exc.pos)[0]
    except (ValueError, RecursionError):
        pass
    return str(refused)
