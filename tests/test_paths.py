"""JSONPath reads (Path) and ResultPath writes (ReferencePath) as AWS Step Functions evaluates them."""

from __future__ import annotations

import copy
import re

import pytest

from statewright.asl.errors import RUNTIME, StatesError
from statewright.asl.paths import Path, PathSyntaxError, ReferencePath

DATA = {
    "a": {"b": {"c": 1}, "list": [10, 20, 30]},
    "a b": "spaced",
    "items": [{"x": 1, "name": "one"}, {"x": 2, "name": "two"}, {"x": 3, "name": "three"}],
    "zero": 0,
    "nothing": None,
    "flag": False,
}
CONTEXT = {"Execution": {"Name": "exec-1", "Input": {"k": "v"}}, "State": {"Name": "S"}}


# -- definite paths


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$", DATA),
        ("$.a.b.c", 1),
        ("$.a.b", {"c": 1}),
        ("$.a.list[0]", 10),
        ("$.a.list[2]", 30),
        ("$.a.list[-1]", 30),
        ("$.a.list[-3]", 10),
        ("$['a b']", "spaced"),
        ('$["a b"]', "spaced"),
        ("$['a']['b']['c']", 1),
        ("$.a['list'][1]", 20),
        ("$.items[1].name", "two"),
        ("$.zero", 0),
        ("$.nothing", None),
        ("$.flag", False),
    ],
)
def test_definite_path_selects_one_value(text, expected):
    path = Path(text)
    assert path.is_definite
    assert path.resolve(DATA) == expected


def test_root_path_returns_the_data_itself():
    assert Path("$").resolve(DATA) is DATA


def test_definite_path_with_index_on_top_level_array():
    assert Path("$[1]").resolve(["a", "b"]) == "b"
    assert Path("$[0][1]").resolve([[1, 2]]) == 2


@pytest.mark.parametrize(("key", "text"), [("a:b", "$['a:b']"), ("a,b", "$['a,b']"), ("x*", "$['x*']"),
                                           ("a..b", "$['a..b']")])
def test_quoted_key_with_jsonpath_punctuation_is_still_one_key(key, text):
    # Jayway (which AWS uses) reads a quoted name literally: these are definite paths to one value.
    path = Path(text)
    assert path.resolve({key: 1}) == 1


@pytest.mark.parametrize(("text", "key"), [("$['it\\'s']", "it\\'s"), ("$['Test\\\"Name']", 'Test\\"Name'),
                                         ('$["a\\"b"]', 'a\\"b'), ("$['a\\\\']", "a\\\\")])
def test_quoted_key_keeps_its_backslashes(text, key):
    # A backslash only keeps the quote after it from ending the key, as AWS reads it.
    path = Path(text)
    assert path.steps == [key]
    assert path.resolve({key: 1}) == 1


# -- context object


def test_context_path_reads_the_context_object():
    path = Path("$$.Execution.Name")
    assert path.is_context
    assert path.resolve(DATA, CONTEXT) == "exec-1"


def test_context_root_is_the_whole_context():
    assert Path("$$").resolve(DATA, CONTEXT) == CONTEXT


def test_context_path_into_execution_input():
    assert Path("$$.Execution.Input.k").resolve({}, CONTEXT) == "v"


def test_missing_context_field_is_a_runtime_error():
    with pytest.raises(StatesError) as caught:
        Path("$$.Task.Token").resolve({}, CONTEXT)
    assert caught.value.error == RUNTIME


# -- indefinite paths give lists


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$.a.list[*]", [10, 20, 30]),
        ("$.items[*].x", [1, 2, 3]),
        ("$.items[*].name", ["one", "two", "three"]),
        ("$.a.list[0:2]", [10, 20]),
        ("$.a.list[1:]", [20, 30]),
        ("$.items[?(@.x > 1)].name", ["two", "three"]),
        ("$.items[?(@.name == 'one')].x", [1]),
    ],
)
def test_indefinite_path_gives_a_list(text, expected):
    path = Path(text)
    assert not path.is_definite
    assert path.resolve(DATA) == expected


def test_wildcard_with_a_single_match_is_still_a_list():
    assert Path("$.l[*]").resolve({"l": [7]}) == [7]


def test_filter_on_context_path():
    context = {"List": [{"v": 1}, {"v": 5}]}
    assert Path("$$.List[?(@.v > 2)].v").resolve({}, context) == [5]


# -- missing paths


@pytest.mark.parametrize(
    ("text", "data", "normalized"),
    [
        ("$.x", {}, "$['x']"),
        ("$.a.x", {"a": {}}, "$['a']['x']"),
        ("$.a.b.c", {"a": {"b": 1}}, "$['a']['b']['c']"),
        ("$.a[3]", {"a": [1]}, "$['a'][3]"),
        ("$.a[0]", {"a": {"0": 1}}, "$['a'][0]"),
        ("$.a.b", {"a": [1]}, "$['a']['b']"),
        ("$.x", [1], "$['x']"),
        ("$.x", "text", "$['x']"),
    ],
)
def test_missing_path_is_a_runtime_error_with_the_aws_message(text, data, normalized):
    with pytest.raises(StatesError) as caught:
        Path(text).resolve(data)
    assert caught.value.error == RUNTIME
    assert caught.value.cause == f"Invalid path '{text}' : No results for path: {normalized}"


def test_missing_path_message_exactly_as_aws_writes_it():
    with pytest.raises(StatesError) as caught:
        Path("$.x").resolve({"y": 1})
    assert caught.value.cause == "Invalid path '$.x' : No results for path: $['x']"


def test_null_value_is_present_not_missing():
    assert Path("$.n").resolve({"n": None}) is None


# -- syntax


@pytest.mark.parametrize("text", ["a.b", "", "x", "$.a[", "$[?(@.x >"])
def test_invalid_path_text_is_a_syntax_error(text):
    with pytest.raises(PathSyntaxError):
        Path(text)


def test_non_string_path_is_a_syntax_error():
    with pytest.raises(PathSyntaxError):
        Path(3)  # type: ignore[arg-type]


# -- ReferencePath writes


def test_write_at_root_replaces_everything():
    assert ReferencePath("$").write({"a": 1}, [1, 2]) == [1, 2]


def test_write_adds_a_field():
    assert ReferencePath("$.r").write({"a": 1}, {"ok": True}) == {"a": 1, "r": {"ok": True}}


def test_write_replaces_an_existing_field():
    assert ReferencePath("$.a").write({"a": 1, "b": 2}, 9) == {"a": 9, "b": 2}


def test_write_creates_missing_intermediate_objects():
    assert ReferencePath("$.a.b.c").write({"x": 1}, "v") == {"x": 1, "a": {"b": {"c": "v"}}}


def test_write_into_existing_nested_object_keeps_siblings():
    data = {"a": {"keep": 1, "b": {"keep": 2}}}
    assert ReferencePath("$.a.b.new").write(data, 3) == {"a": {"keep": 1, "b": {"keep": 2, "new": 3}}}


def test_write_with_quoted_key():
    assert ReferencePath("$['a b']").write({}, 1) == {"a b": 1}


def test_write_into_array_element():
    data = {"l": [{"x": 1}, {"x": 2}]}
    assert ReferencePath("$.l[1].y").write(data, 5) == {"l": [{"x": 1}, {"x": 2, "y": 5}]}
    assert ReferencePath("$.l[0]").write(data, "z") == {"l": ["z", {"x": 2}]}


def test_write_does_not_mutate_the_input():
    data = {"a": {"b": {"c": 1}, "l": [1, 2]}, "k": "v"}
    before = copy.deepcopy(data)
    inner = data["a"]
    out = ReferencePath("$.a.b.d").write(data, {"new": 1})
    assert data == before
    assert inner == before["a"]
    assert out["a"]["b"] == {"c": 1, "d": {"new": 1}}
    ReferencePath("$.a.l[0]").write(data, 9)
    assert data == before


def test_written_value_reads_back_through_path():
    out = ReferencePath("$.p.q").write({"p": {"r": 1}}, [1, {"deep": True}])
    assert Path("$.p.q").resolve(out) == [1, {"deep": True}]
    assert Path("$.p.r").resolve(out) == 1


@pytest.mark.parametrize(
    ("text", "data"),
    [
        ("$.a.b", {"a": 1}),
        ("$.a.b", {"a": "text"}),
        ("$.a.b", {"a": [1, 2]}),
        ("$.a.b.c", {"a": {"b": True}}),
        ("$.x", [1, 2]),
        ("$.x", "text"),
        ("$.x", 3),
        ("$.l[5]", {"l": [1]}),
        ("$.l[0]", {"l": {"0": 1}}),
    ],
)
def test_write_through_a_non_object_is_an_error(text, data):
    before = copy.deepcopy(data)
    with pytest.raises(StatesError):
        ReferencePath(text).write(data, 1)
    assert data == before


@pytest.mark.parametrize("text", ["$$.x", "$.a[*]", "$..a", "$.a[0:1]", "$.a[?(@.x)]", "nope"])
def test_reference_path_must_be_definite_and_not_context(text):
    with pytest.raises(PathSyntaxError):
        ReferencePath(text)


def test_a_filter_regex_runs_in_linear_time():
    # /(a+)+$/ backtracks for ever on a long near miss in Python's re; RE2 decides it at once.
    data = {"items": [{"s": "a" * 5000 + "b"}, {"s": "aa"}]}
    assert Path('$.items[?(@.s =~ "(a+)+$")].s').resolve(data) == ["aa"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('$.items[?(@.s =~ "(a)\\\\1")]', "cannot be run: invalid escape sequence"),
        ("$.s.`sub(/(a+)+$/, x)`", "`sub` is not supported"),
    ],
)
def test_a_path_whose_regex_would_need_backtracking_is_refused(text, reason):
    with pytest.raises(PathSyntaxError, match=re.escape(reason)):
        Path(text)
