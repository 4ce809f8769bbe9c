"""JSON text in and out: nesting bounds. A payload handed in may nest DEPTH_MAX levels, no more (refused at the API
with the member's error); text nested deeper than any parser goes is a ValueError, never a RecursionError."""

from __future__ import annotations

import pytest

from statewright.api.errors import AwsError
from statewright.api.payloads import parse_json
from statewright.asl.errors import RUNTIME, StatesError
from statewright.asl.jsonio import DEPTH_MAX, depth, dumps, loads


def _deep_text(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(("value", "expected"), [(1, 0), ([], 1), ({"a": [1, {"b": []}]}, 4), ([[], [[[]]]], 4)])
def test_depth_counts_levels_of_arrays_and_objects(value, expected):
    assert depth(value) == expected


def test_a_payload_may_nest_depth_max_levels_and_no_more():
    assert depth(parse_json(_deep_text(DEPTH_MAX), "InvalidOutput", "Invalid Output")) == DEPTH_MAX
    with pytest.raises(AwsError, match=f"nested deeper than {DEPTH_MAX} levels") as refused:
        parse_json(_deep_text(DEPTH_MAX + 1), "InvalidOutput", "Invalid Output")
    assert refused.value.code == "InvalidOutput"


def test_text_nested_deeper_than_any_parser_goes_is_a_value_error():
    with pytest.raises(ValueError, match="nested too deeply"):
        loads(_deep_text(50_000))


def test_a_value_nested_deeper_than_any_writer_goes_is_a_runtime_error():
    value: list = []
    for _ in range(50_000):
        value = [value]
    with pytest.raises(StatesError) as caught:
        dumps(value)
    assert caught.value.error == RUNTIME
