"""Choice rules: every comparison operator, its Path variant, type tests, combinators and runtime errors."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statewright.asl.choice import COMPARISON_OPERATORS, RuleSyntaxError, compile_rule
from statewright.asl.errors import RUNTIME, StatesError
from statewright.asl.wildcard import Wildcard

CI = settings(derandomize=True, deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
CONTEXT = {"Execution": {"Name": "exec-1"}, "State": {"Name": "Pick"}}


def rule(raw: dict):
    return compile_rule(raw, "/States/Pick/Choices/0", top_level=False)


def check(operator: str, value, operand) -> bool:
    """``value`` compared with the literal ``operand`` and, through the Path variant, with the same operand."""
    literal = rule({"Variable": "$.v", operator: operand}).matches({"v": value}, CONTEXT)
    through_path = rule({"Variable": "$.v", f"{operator}Path": "$.o"}).matches({"v": value, "o": operand}, CONTEXT)
    assert literal is through_path, f"{operator} and {operator}Path disagree for {value!r}, {operand!r}"
    return literal


# -- strings


@pytest.mark.parametrize(
    ("operator", "value", "operand", "expected"),
    [
        ("StringEquals", "abc", "abc", True),
        ("StringEquals", "abc", "abd", False),
        ("StringEquals", "", "", True),
        ("StringEquals", "Abc", "abc", False),
        ("StringLessThan", "abc", "abd", True),
        ("StringLessThan", "abc", "abc", False),
        ("StringLessThan", "b", "a", False),
        ("StringLessThan", "Z", "a", True),
        ("StringLessThan", "ab", "abc", True),
        ("StringGreaterThan", "b", "a", True),
        ("StringGreaterThan", "a", "a", False),
        ("StringLessThanEquals", "a", "a", True),
        ("StringLessThanEquals", "a", "b", True),
        ("StringLessThanEquals", "b", "a", False),
        ("StringGreaterThanEquals", "a", "a", True),
        ("StringGreaterThanEquals", "b", "a", True),
        ("StringGreaterThanEquals", "a", "b", False),
    ],
)
def test_string_comparisons(operator, value, operand, expected):
    assert check(operator, value, operand) is expected


# -- numbers


@pytest.mark.parametrize(
    ("operator", "value", "operand", "expected"),
    [
        ("NumericEquals", 1, 1, True),
        ("NumericEquals", 1, 1.0, True),
        ("NumericEquals", 1, 2, False),
        ("NumericEquals", -0.5, -0.5, True),
        ("NumericLessThan", 1, 2, True),
        ("NumericLessThan", 2, 2, False),
        ("NumericLessThan", -3, -2.5, True),
        ("NumericGreaterThan", 3, 2, True),
        ("NumericGreaterThan", 2, 2, False),
        ("NumericGreaterThan", 2.0001, 2, True),
        ("NumericLessThanEquals", 2, 2, True),
        ("NumericLessThanEquals", 1, 2, True),
        ("NumericLessThanEquals", 3, 2, False),
        ("NumericGreaterThanEquals", 2, 2, True),
        ("NumericGreaterThanEquals", 3, 2, True),
        ("NumericGreaterThanEquals", 1, 2, False),
    ],
)
def test_numeric_comparisons(operator, value, operand, expected):
    assert check(operator, value, operand) is expected


# -- booleans


@pytest.mark.parametrize(
    ("value", "operand", "expected"),
    [(True, True, True), (False, False, True), (True, False, False), (False, True, False)],
)
def test_boolean_equals(value, operand, expected):
    assert check("BooleanEquals", value, operand) is expected


# -- timestamps


@pytest.mark.parametrize(
    ("operator", "value", "operand", "expected"),
    [
        ("TimestampEquals", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", True),
        ("TimestampEquals", "2024-01-01T01:00:00+01:00", "2024-01-01T00:00:00Z", True),
        ("TimestampEquals", "2023-12-31T19:00:00-05:00", "2024-01-01T00:00:00Z", True),
        ("TimestampEquals", "2024-01-01T00:00:00.000Z", "2024-01-01T00:00:00Z", True),
        ("TimestampEquals", "2024-01-01T00:00:00.5Z", "2024-01-01T00:00:00Z", False),
        ("TimestampEquals", "2024-01-01T00:00:01Z", "2024-01-01T00:00:00Z", False),
        ("TimestampLessThan", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00.001Z", True),
        ("TimestampLessThan", "2024-01-01T00:59:59+01:00", "2024-01-01T00:00:00Z", True),
        ("TimestampLessThan", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", False),
        ("TimestampGreaterThan", "2024-01-01T00:00:00.250Z", "2024-01-01T00:00:00.249Z", True),
        ("TimestampGreaterThan", "2024-01-01T00:00:00Z", "2024-01-01T00:30:00+01:00", True),
        ("TimestampGreaterThan", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", False),
        ("TimestampLessThanEquals", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", True),
        ("TimestampLessThanEquals", "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", True),
        ("TimestampLessThanEquals", "2024-01-03T00:00:00Z", "2024-01-02T00:00:00Z", False),
        ("TimestampGreaterThanEquals", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", True),
        ("TimestampGreaterThanEquals", "2025-01-01T00:00:00Z", "2024-01-01T00:00:00Z", True),
        ("TimestampGreaterThanEquals", "2023-01-01T00:00:00Z", "2024-01-01T00:00:00Z", False),
    ],
)
def test_timestamp_comparisons(operator, value, operand, expected):
    assert check(operator, value, operand) is expected


def test_timestamp_fraction_with_many_digits():
    # Correct whether AWS keeps full precision or truncates to milliseconds; rounding would make them equal.
    assert check("TimestampGreaterThan", "2024-01-01T00:00:00.0000001Z", "2023-12-31T23:59:59.999999Z") is True
    assert check("TimestampLessThan", "2023-12-31T23:59:59.9999Z", "2024-01-01T00:00:00Z") is True


# -- type mismatches give False, never an error


@pytest.mark.parametrize(
    ("operator", "value", "operand"),
    [
        ("StringEquals", 1, "1"),
        ("StringEquals", None, "null"),
        ("StringEquals", ["a"], "a"),
        ("StringLessThan", 1, "b"),
        ("StringGreaterThanEquals", {"a": 1}, "a"),
        ("NumericEquals", "1", 1),
        ("NumericEquals", True, 1),
        ("NumericLessThan", None, 5),
        ("NumericGreaterThan", "9", 1),
        ("BooleanEquals", 1, True),
        ("BooleanEquals", "true", True),
        ("BooleanEquals", 0, False),
        ("TimestampEquals", "not a time", "2024-01-01T00:00:00Z"),
        ("TimestampEquals", "2024-01-01T00:00:00", "2024-01-01T00:00:00Z"),
        ("TimestampLessThan", 1704067200, "2024-01-01T00:00:00Z"),
        ("TimestampGreaterThan", "2024-01-01", "2023-01-01T00:00:00Z"),
    ],
)
def test_type_mismatch_is_false(operator, value, operand):
    assert rule({"Variable": "$.v", operator: operand}).matches({"v": value}, CONTEXT) is False


@pytest.mark.parametrize(
    ("operator", "value", "operand"),
    [
        ("StringEqualsPath", "1", 1),
        ("NumericEqualsPath", 1, "1"),
        ("NumericLessThanPath", 1, None),
        ("BooleanEqualsPath", True, "true"),
        ("TimestampEqualsPath", "2024-01-01T00:00:00Z", "tomorrow"),
        ("StringLessThanPath", "a", ["b"]),
    ],
)
def test_path_variant_with_operand_of_the_wrong_type_is_false(operator, value, operand):
    assert rule({"Variable": "$.v", operator: "$.o"}).matches({"v": value, "o": operand}, CONTEXT) is False


# -- StringMatches


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("log-*.txt", "log-2024.txt", True),
        ("log-*.txt", "log-.txt", True),
        ("log-*.txt", "log-2024.txt.bak", False),
        ("log-*.txt", "xlog-1.txt", False),
        ("*", "", True),
        ("*", "anything at all", True),
        ("a*b*c", "aXXbYYc", True),
        ("a*b*c", "acb", False),
        ("exact", "exact", True),
        ("exact", "exactly", False),
        ("a.c", "abc", False),
        ("a.c", "a.c", True),
        ("(x)+[y]?", "(x)+[y]?", True),
        ("line*", "line1\nline2", True),
        ("a\\*b", "a*b", True),
        ("a\\*b", "aXb", False),
        ("a\\*b", "aXXb", False),
        ("a\\\\b", "a\\b", True),
        ("a\\\\*", "a\\xyz", True),
        ("\\**", "*star", True),
        ("\\**", "star", False),
    ],
)
def test_string_matches(pattern, value, expected):
    assert rule({"Variable": "$.v", "StringMatches": pattern}).matches({"v": value}, CONTEXT) is expected


def test_string_matches_on_non_string_is_false():
    for value in (1, None, True, ["a"], {"a": 1}):
        assert rule({"Variable": "$.v", "StringMatches": "*"}).matches({"v": value}, CONTEXT) is False


def test_string_matches_with_many_stars_against_a_long_near_miss_is_decided_without_backtracking():
    # A backtracking regex costs length^stars here (90 characters held the server for 8 s); this is linear.
    pattern = "*a" * 40 + "*b"
    assert Wildcard(pattern).matches("a" * 5000) is False
    assert Wildcard(pattern).matches("a" * 5000 + "b") is True
    assert rule({"Variable": "$.v", "StringMatches": "*a*a*a*a*a*a*b"}).matches({"v": "a" * 90}, CONTEXT) is False


def _tokens(pattern: str):
    """The pattern as (character, is a star) pairs with its escapes resolved: the specification read literally."""
    index = 0
    while index < len(pattern):
        if pattern[index] == "\\" and index + 1 < len(pattern):
            yield pattern[index + 1], False
            index += 2
            continue
        yield pattern[index], pattern[index] == "*"
        index += 1


_PATTERN_TEXT = st.text(alphabet="ab*\\\n", max_size=10)
_VALUE_TEXT = st.text(alphabet="ab*\\\n", max_size=14)


@CI
@given(pattern=_PATTERN_TEXT, value=_VALUE_TEXT)
def test_string_matches_agrees_with_the_specification_read_as_a_regex(pattern, value):
    # A backtracking regex is a fine reference on inputs this short.
    reference = re.compile("".join(".*" if star else re.escape(char) for char, star in _tokens(pattern)), re.DOTALL)
    assert Wildcard(pattern).matches(value) is (reference.fullmatch(value) is not None)


@CI
@given(pattern=_PATTERN_TEXT, data=st.data())
def test_string_matches_accepts_every_value_built_from_its_own_pattern(pattern, data):
    # Fill each star with drawn text: the result must match (most values drawn independently do not).
    value = "".join(data.draw(_VALUE_TEXT) if star else char for char, star in _tokens(pattern))
    assert Wildcard(pattern).matches(value) is True


# -- type tests


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("IsNull", None, True),
        ("IsNull", 0, False),
        ("IsNull", "", False),
        ("IsNumeric", 1, True),
        ("IsNumeric", 1.5, True),
        ("IsNumeric", "1", False),
        ("IsNumeric", True, False),
        ("IsString", "", True),
        ("IsString", 1, False),
        ("IsString", None, False),
        ("IsBoolean", False, True),
        ("IsBoolean", 0, False),
        ("IsBoolean", "true", False),
        ("IsTimestamp", "2024-01-01T00:00:00Z", True),
        ("IsTimestamp", "2024-01-01T00:00:00.123+05:30", True),
        ("IsTimestamp", "2024-01-01T00:00:00", False),
        ("IsTimestamp", "2024-01-01", False),
        ("IsTimestamp", 1704067200, False),
    ],
)
def test_type_tests(operator, value, expected):
    assert rule({"Variable": "$.v", operator: True}).matches({"v": value}, CONTEXT) is expected
    assert rule({"Variable": "$.v", operator: False}).matches({"v": value}, CONTEXT) is (not expected)


def test_is_present():
    present = rule({"Variable": "$.v", "IsPresent": True})
    absent = rule({"Variable": "$.v", "IsPresent": False})
    assert present.matches({"v": None}, CONTEXT) is True
    assert present.matches({}, CONTEXT) is False
    assert absent.matches({}, CONTEXT) is True
    assert absent.matches({"v": 0}, CONTEXT) is False


def test_is_present_on_a_missing_nested_path_does_not_raise():
    assert rule({"Variable": "$.a.b.c", "IsPresent": False}).matches({"a": 1}, CONTEXT) is True
    assert rule({"Variable": "$.l[3]", "IsPresent": True}).matches({"l": [1]}, CONTEXT) is False


# -- missing variables


@pytest.mark.parametrize(
    "raw",
    [
        {"Variable": "$.missing", "StringEquals": "a"},
        {"Variable": "$.missing", "NumericEquals": 1},
        {"Variable": "$.missing", "BooleanEquals": True},
        {"Variable": "$.missing", "TimestampEquals": "2024-01-01T00:00:00Z"},
        {"Variable": "$.missing", "StringMatches": "*"},
        {"Variable": "$.missing", "IsNull": True},
        {"Variable": "$.missing", "StringEqualsPath": "$.v"},
    ],
)
def test_missing_variable_is_a_runtime_error(raw):
    with pytest.raises(StatesError) as caught:
        rule(raw).matches({"v": "a"}, CONTEXT)
    assert caught.value.error == RUNTIME
    assert caught.value.cause == (
        "Invalid path '$.missing': The choice state's condition path references an invalid value.")


def test_missing_variable_inside_not_is_still_an_error():
    with pytest.raises(StatesError):
        rule({"Not": {"Variable": "$.missing", "StringEquals": "a"}}).matches({}, CONTEXT)


# -- context variables


def test_variable_may_read_the_context_object():
    assert rule({"Variable": "$$.State.Name", "StringEquals": "Pick"}).matches({}, CONTEXT) is True
    assert rule({"Variable": "$.v", "StringEqualsPath": "$$.Execution.Name"}).matches({"v": "exec-1"}, CONTEXT)


# -- And, Or, Not


T = {"Variable": "$.t", "BooleanEquals": True}
F = {"Variable": "$.t", "BooleanEquals": False}
DATA = {"t": True, "n": 5, "s": "hello"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"And": [T]}, True),
        ({"And": [T, T]}, True),
        ({"And": [T, F]}, False),
        ({"And": [F, T]}, False),
        ({"Or": [F]}, False),
        ({"Or": [F, T]}, True),
        ({"Or": [F, F]}, False),
        ({"Not": T}, False),
        ({"Not": F}, True),
        ({"Not": {"Not": T}}, True),
        ({"And": [{"Not": F}, {"Or": [F, {"Not": F}]}]}, True),
        ({"Or": [{"And": [T, F]}, {"And": [F, T]}]}, False),
        ({"Not": {"And": [T, {"Or": [F, F]}]}}, True),
        (
            {
                "And": [
                    {"Variable": "$.n", "NumericGreaterThan": 1},
                    {"Variable": "$.n", "NumericLessThanEquals": 5},
                    {"Or": [{"Variable": "$.s", "StringMatches": "h*"}, F]},
                    {"Not": {"Variable": "$.s", "IsNull": True}},
                ]
            },
            True,
        ),
    ],
)
def test_combinators(raw, expected):
    assert rule(raw).matches(DATA, CONTEXT) is expected


def test_top_level_rule_carries_next():
    compiled = compile_rule({"Variable": "$.t", "BooleanEquals": True, "Next": "X"}, "/c", top_level=True)
    assert compiled.matches(DATA, CONTEXT) is True


# -- compile-time checks


def test_every_operator_family_is_known():
    for family in ("String", "Numeric", "Timestamp"):
        for suffix in ("Equals", "LessThan", "GreaterThan", "LessThanEquals", "GreaterThanEquals"):
            assert f"{family}{suffix}" in COMPARISON_OPERATORS
            assert f"{family}{suffix}Path" in COMPARISON_OPERATORS
    for name in ("BooleanEquals", "BooleanEqualsPath", "StringMatches", "IsNull", "IsPresent", "IsNumeric",
                 "IsString", "IsBoolean", "IsTimestamp"):
        assert name in COMPARISON_OPERATORS


@pytest.mark.parametrize(
    "raw",
    [
        {"Variable": "$.v"},
        {"Variable": "$.v", "StringEquals": "a", "NumericEquals": 1},
        {"Variable": "$.v", "StringEquals": 1},
        {"Variable": "$.v", "NumericEquals": "1"},
        {"Variable": "$.v", "BooleanEquals": "true"},
        {"Variable": "$.v", "TimestampEquals": "yesterday"},
        {"Variable": "$.v", "IsNull": "yes"},
        {"Variable": "$.v", "StringEqualsPath": 3},
        {"Variable": "nope", "StringEquals": "a"},
        {"StringEquals": "a"},
        {"And": []},
        {"And": T},
        {"Not": T, "Variable": "$.v"},
        {"Variable": "$.v", "StringEquals": "a", "Next": "X"},
    ],
)
def test_invalid_rules_are_rejected(raw):
    with pytest.raises(RuleSyntaxError):
        rule(raw)


def test_top_level_rule_without_next_is_rejected():
    with pytest.raises(RuleSyntaxError):
        compile_rule({"Variable": "$.v", "StringEquals": "a"}, "/c", top_level=True)
