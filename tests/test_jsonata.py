"""JSONata: AWS's documented examples, the functions Step Functions adds, undefined and null, errors as
States.QueryEvaluationError with AWS's causes, references AWS refuses at compile time, seeded randomness,
integers written as integers, and hypothesis laws (derandomized)."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statewright.asl.budget import Budget, SliceSpent
from statewright.asl.errors import StatesError
from statewright.asl.jsonata import (
    QUERY_EVALUATION_ERROR,
    UNSUPPORTED_EXPRESSION,
    JsonataSyntaxError,
    compile_value,
    is_expression,
)

CI = settings(derandomize=True, deadline=None, max_examples=50)
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
NOW_MS = 1_700_000_000_000


def run(raw, state_input=None, variables=None, seed=b"", field="Output", **states):
    states = {"input": {} if state_input is None else state_input, **states}
    return compile_value(raw, field).evaluate(variables or {}, states, seed, now_ms=NOW_MS)


def failure(raw, state_input=None, variables=None, field="Output") -> str:
    with pytest.raises(StatesError) as caught:
        run(raw, state_input, variables, field=field)
    assert caught.value.error == QUERY_EVALUATION_ERROR
    return caught.value.cause


def expr(text: str) -> str:
    return "{% " + text + " %}"


# -- AWS's documented examples (docs.aws.amazon.com/step-functions/latest/dg/transforming-data.html,
#    workflow-variables.html, and the JSONata functions Step Functions provides)

DOCUMENTED = [
    pytest.param(
        {"static": "Hello", "title": "{% $states.input.title %}", "name": "{% $customerName %}",
         "not-evaluated": "$customerName"},
        {"title": "Doctor"}, {"customerName": "María"},
        {"static": "Hello", "title": "Doctor", "name": "María", "not-evaluated": "$customerName"},
        id="arguments-converted-from-jsonpath"),
    pytest.param("{% $partition([1, 2, 3, 4, 5, 6, 7, 8, 9], 3) %}", {}, {},
                 [[1, 2, 3], [4, 5, 6], [7, 8, 9]], id="partition"),
    pytest.param("{% $range(0, 10, 2) %}", {}, {}, [0, 2, 4, 6, 8, 10], id="range"),
    pytest.param("{% $hash($states.input.content, 'SHA-256') %}", {"content": "Hello"}, {},
                 hashlib.sha256(b"Hello").hexdigest(), id="hash"),
    pytest.param("{% $parse($states.input.json_string) %}", {"json_string": '{"foo": "bar"}'}, {},
                 {"foo": "bar"}, id="parse"),
    pytest.param({"TimeoutSeconds": "{% $timeout %}"}, {}, {"timeout": 30}, {"TimeoutSeconds": 30},
                 id="variable-as-field"),
    pytest.param("{% $states.input.age >= 18 %}", {"age": 21}, {}, True, id="choice-condition"),
    pytest.param("{% 'Hello ' & $states.input.customer.name %}", {"customer": {"name": "Ann"}}, {}, "Hello Ann",
                 id="string-concatenation"),
]


@pytest.mark.parametrize(("raw", "state_input", "variables", "expected"), DOCUMENTED)
def test_documented_examples(raw, state_input, variables, expected):
    assert run(raw, state_input, variables) == expected


def test_states_fields_and_the_context_object():
    value = {"index": "{% $states.context.Map.Item.Index %}", "value": "{% $states.context.Map.Item.Value %}",
             "result": "{% $states.result.Payload %}", "error": "{% $states.errorOutput.Error %}"}
    states = {"input": {}, "result": {"Payload": [1]}, "errorOutput": {"Error": "E", "Cause": "c"},
              "context": {"Map": {"Item": {"Index": 2, "Value": "v"}}}}
    assert compile_value(value).evaluate({}, states) == {"index": 2, "value": "v", "result": [1], "error": "E"}


# -- the language through this layer

LANGUAGE = [
    ("$count($states.input.items)", {"items": [1, 2, 3]}, 3),
    ("$sum($states.input.items.price)", {"items": [{"price": 2}, {"price": 3}]}, 5),
    ("$map($states.input.items, function($v) { $v * 10 })", {"items": [1, 2]}, [10, 20]),
    ("$states.input.items[price > 2].name", {"items": [{"price": 2, "name": "a"}, {"price": 3, "name": "b"}]}, "b"),
    ("$states.input.n > 5 ? 'big' : 'small'", {"n": 7}, "big"),
    ("{'total': $sum($states.input.items), 'first': $states.input.items[0]}", {"items": [4, 5]},
     {"total": 9, "first": 4}),
    ("($half := $states.input.n / 2; $half * $half)", {"n": 6}, 9),
    ("$states.input.items{name: price}", {"items": [{"name": "a", "price": 1}]}, {"a": 1}),
    ("$join($states.input.words, '-')", {"words": ["a", "b"]}, "a-b"),
    ("$uppercase($substring($states.input.s, 0, 3))", {"s": "hello"}, "HEL"),
    ("[$states.input.a, 'b']", {"a": "a"}, ["a", "b"]),
    ("$states.input.a ~> $string()", {"a": {"x": [1, 2.5]}}, '{"x":[1,2.5]}'),
    ("$exists($states.input.n)", {"n": None}, True),
    ("$type($states.input.n)", {"n": None}, "null"),
]


@pytest.mark.parametrize(("text", "state_input", "expected"), LANGUAGE)
def test_language(text, state_input, expected):
    assert run(expr(text), state_input) == expected


def test_nested_templates_evaluate_every_expression_in_place():
    raw = {"Payload": {"id": "{% $states.input.id %}", "tags": ["{% $tag %}", "static", 3, None, True],
                       "deep": [{"n": "{% $states.input.id + 1 %}"}]},
           "literal": {"a": [1, 2]}, "looks-like": " {% $states.input.id %}"}
    assert run(raw, {"id": 7}, {"tag": "t"}) == {
        "Payload": {"id": 7, "tags": ["t", "static", 3, None, True], "deep": [{"n": 8}]},
        "literal": {"a": [1, 2]}, "looks-like": " {% $states.input.id %}"}


def test_variables_are_bound_by_name_and_null_is_a_value():
    variables = {"order": {"id": 1, "lines": [2, 3]}, "nothing": None, "flag": False}
    assert run(expr("$order.lines[1]"), variables=variables) == 3
    assert run(expr("$nothing"), variables=variables) is None
    assert run(expr("$exists($nothing)"), variables=variables) is True
    assert run(expr("$flag"), variables=variables) is False


# -- is_expression


@pytest.mark.parametrize(("value", "expected"), [
    ("{% $x %}", True), ("{%$x%}", True), ("{%  %}", True), ("{% %}", True),
    (" {% $x %}", False), ("{% $x %} ", False), ("{% $x", False), ("$x %}", False), ("Hello {% $x %} there", False),
    ("{%}", False), ("{%", False), ("", False), (None, False), (3, False), (["{% $x %}"], False),
])
def test_is_expression(value, expected):
    assert is_expression(value) is expected


# -- undefined and null


def test_an_undefined_field_fails_with_aws_cause():
    # The cause AWS gave for this case, less the prefix naming the state that the decider adds.
    raw = {"Input": {"pushLocation": "{% $states.input.pushLocation %}"}}
    assert failure(raw, {}, field="Arguments") == (
        "The JSONata expression '$states.input.pushLocation' specified for the field "
        "'Arguments/Input/pushLocation' returned nothing (undefined).")


@pytest.mark.parametrize(("raw", "location"), [
    ("{% $states.input.missing %}", "Output"),
    ({"a": {"b": ["x", "{% $states.input.missing %}"]}}, "Output/a/b[1]"),
    (["{% $missing %}"], "Output[0]"),
    ("{% $states.input.items[$ > 5] %}", "Output"),
])
def test_undefined_anywhere_is_an_error(raw, location):
    assert f"specified for the field '{location}' returned nothing (undefined)." in failure(raw, {"items": [1]})


def test_without_a_field_name_the_cause_names_only_the_expression():
    with pytest.raises(StatesError) as caught:
        compile_value("{% $nope %}").evaluate({}, {"input": {}})
    assert caught.value.cause == "The JSONata expression '$nope' returned nothing (undefined)."


def test_inside_an_expression_undefined_follows_jsonata():
    assert run(expr("{'a': $states.input.missing, 'b': 1}")) == {"b": 1}
    assert run(expr("[$states.input.missing, 1]")) == [1]
    assert run(expr("$states.input.n"), {"n": None}) is None
    assert run(expr("{'a': $states.input.n}"), {"n": None}) == {"a": None}


# -- the functions Step Functions adds


FUNCTIONS = [
    ("$partition([1,2,3,4,5], 2)", [[1, 2], [3, 4], [5]]),
    ("$partition([1,2,3,4,5], 2.9)", [[1, 2], [3, 4], [5]]),
    ("$partition([1,2,3], 5)", [[1, 2, 3]]),
    ("$partition([1,2,3])", [[1, 2, 3]]),
    ("$partition('a', 1)", [["a"]]),
    ("$range(10, 0, -2)", [10, 8, 6, 4, 2, 0]),
    ("$range(1, 8, 2)", [1, 3, 5, 7]),
    ("$range(-1.7, 2, 1)", [-1, 0, 1, 2]),
    ("$range(5, 1, -1.5)", [5, 4, 3, 2, 1]),
    ("$range(3, 3, 1)", 3),
    ("$hash('Hello', 'MD5')", "8b1a9953c4611296a827abf8c47804d7"),
    ("$hash('Hello', 'SHA-1')", "f7ff9e8b7bb2e09b70935a5d785e0cc5d9d0abf0"),
    ("$hash('Hello', 'SHA-384')", hashlib.sha384(b"Hello").hexdigest()),
    ("$hash('Hello', 'SHA-512')", hashlib.sha512(b"Hello").hexdigest()),
    ("$hash('ñ', 'MD5')", "94e9342ecbb1458b6043ecd3bfcbc192"),
    # java.util.Random(seed).nextDouble(): the values AWS answers for these seeds
    ("$random(42)", 0.7275636800328681),
    ("$random(0)", 0.730967787376657),
    ("$random(7)", 0.7306990420600421),
    ("$random(0.9) = $random(0)", True),
    ("$parse('{\"b\": 1, \"a\": [1.0, 1.5, null]}')", {"b": 1, "a": [1, 1.5, None]}),
    ("$parse('\"text\"')", "text"),
    ("$parse('null')", None),
    ("$exists($parse('null'))", True),
    ("$parse('9223372036854775807')", 9223372036854775807),
    ("$parse('9223372036854775808')", 9.223372036854776e18),
    ("$map(['{\"a\":1}', '{\"a\":2}'], $parse).a", [1, 2]),
]


@pytest.mark.parametrize(("text", "expected"), FUNCTIONS)
def test_functions(text, expected):
    assert run(expr(text)) == expected


@pytest.mark.parametrize("text", [
    "$partition([], 2)", "$partition([1,2,3], 0)", "$partition([1,2], -0.5)",
    "$range(1, 5)", "$range(5, 1, 1)", "$range(1, 5, -1)", "$range(1, 5, 0)", "$range(1, 5, 0.9)",
    "$hash('Hello')", "$parse()",
])
def test_edges_aws_answers_with_undefined(text):
    assert "returned nothing (undefined)." in failure(expr(text))


@pytest.mark.parametrize(("text", "detail"), [
    ("$partition([1,2,3], -1)", "D3137: Second argument must be zero or greater"),
    ("$range('0', 4, 1)", 'T0410: Argument 1 of function "range" does not match function signature'),
    ("$range(1)", "T0410: Argument 2 of function \"range\""),
    ("$range(0, 4, 1, 2)", 'T0410: Argument 4 of function "range" does not match function signature'),
    ("$range(0, 10000000, 1)", "D3137: Expression evaluation memory limit exceeded"),
    ("$hash('Hello', 'md5')", "D3137: Unsupported hash algorithm 'md5'"),
    ("$hash('Hello', 'SHA3-256')", "D3137: Unsupported hash algorithm"),
    ("$hash(42, 'MD5')", 'T0410: Argument 1 of function "hash"'),
    ("$hash('a', 5)", 'T0410: Argument 2 of function "hash"'),
    ("$random(1, 2)", 'T0410: Argument 2 of function "random"'),
    ("$random('x')", 'T0410: Argument 1 of function "random"'),
    ("$uuid('seed')", 'T0410: Argument 1 of function "uuid"'),
    ("$parse(42)", 'T0410: Argument 1 of function "parse"'),
    ("$parse('{}', 'x')", 'T0410: Argument 2 of function "parse"'),
    ("$parse('not json')", "D3137: Invalid JSON"),
    ("$parse('')", "D3137: Invalid JSON"),
    ("$parse('{\"a\":1}{\"b\":2}')", "D3137: Invalid JSON"),
    ("$parse('{\"a\":1,\"a\":2}')", "D3137: Invalid JSON: duplicate key 'a'"),
    ("$parse('NaN')", "D3137: Invalid JSON"),
    ("$parse('1e400')", "D3137: Invalid JSON"),
    ("$eval('1 + 1')", "T1006: Attempted to invoke a non-function"),
])
def test_function_errors(text, detail):
    cause = failure(expr(text))
    assert cause.startswith(f"The JSONata expression '{text}' specified for the field 'Output' threw an error "
                            "during evaluation. ")
    assert detail in cause


def test_uuid_is_version_4_and_each_call_differs():
    first, second = run(expr("[$uuid(), $uuid()]"), seed=b"s")
    assert UUID4.match(first) and UUID4.match(second)
    assert first != second


# -- determinism: $random(), $uuid(), $shuffle, $now and $millis come from what evaluate is given

RANDOM = {"u": "{% $uuid() %}", "r": "{% $random() %}", "s": "{% $shuffle([1,2,3,4,5,6,7,8]) %}",
          "again": ["{% $uuid() %}"]}


def test_the_same_seed_gives_the_same_values():
    compiled = compile_value(RANDOM)
    first = compiled.evaluate({}, {"input": {}}, b"execution-1/state-3")
    assert compiled.evaluate({}, {"input": {}}, b"execution-1/state-3") == first
    assert compile_value(RANDOM).evaluate({}, {"input": {}}, b"execution-1/state-3") == first
    assert 0 <= first["r"] < 1
    assert sorted(first["s"]) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert first["u"] != first["again"][0]  # two fields never share a draw


def test_another_seed_gives_other_values():
    compiled = compile_value(RANDOM)
    first = compiled.evaluate({}, {"input": {}}, b"a")
    second = compiled.evaluate({}, {"input": {}}, b"b")
    assert first["u"] != second["u"] and first["r"] != second["r"]


def test_now_and_millis_read_the_given_time():
    assert run(expr("$millis()")) == NOW_MS
    assert run(expr("$now()")) == "2023-11-14T22:13:20.000Z"
    assert run(expr("$now('[Y0001]-[M01]-[D01]')")) == "2023-11-14"
    with pytest.raises(StatesError) as caught:
        compile_value(expr("$now()")).evaluate({}, {"input": {}})
    assert "given none" in caught.value.cause


# -- numbers: integral values come back as ints, as AWS writes them


@pytest.mark.parametrize(("text", "expected"), [
    ("2.5 * 2", 5), ("$sum([1.5, 2.5])", 4), ("$states.input.f", 2), ("$average([1, 2])", 1.5),
    ("{'n': 6 / 3, 'list': [1.0, 0.5]}", {"n": 2, "list": [1, 0.5]}), ("$states.input.big", 9007199254740993),
    ("1e22", 1e22), ("$states.input.huge", 1e20), ("-0.0", 0), ("$round(2.5)", 2),
])
def test_integral_numbers_are_ints(text, expected):
    result = run(expr(text), {"f": 2.0, "big": 9007199254740993, "huge": 10**20})
    assert result == expected
    assert json.dumps(result) == json.dumps(expected)


# -- errors while evaluating


@pytest.mark.parametrize(("text", "detail"), [
    ("$states.input.n + 'a'", 'T2002: The right side of the "+" operator must evaluate to a number'),
    ("'a' - 1", 'T2001: The left side of the "-" operator must evaluate to a number'),
    ("$error('boom')", "D3137: boom"),
    ("$assert(false, 'nope')", "D3141: nope"),
    ("$notAFunction()", "T1006: Attempted to invoke a non-function"),
    ("1 / 0", "D1001: Number out of range"),
    ("$uppercase", "returned a function, which is not a JSON value."),
    ("($f := function($x) { $x <= 0 ? 0 : 1 + $f($x - 1) }; $f(100000))", "D1011: Stack overflow error"),
])
def test_evaluation_errors(text, detail):
    assert detail in failure(expr(text), {"n": 1})


def budget_failure(text: str, budget: Budget) -> str:
    with pytest.raises(StatesError) as caught:
        compile_value(expr(text), "Output").evaluate({}, {"input": {}}, budget=budget)
    assert caught.value.error == QUERY_EVALUATION_ERROR
    return caught.value.cause


def test_an_endless_loop_runs_out_of_steps():
    cause = budget_failure("($f := function($x) { $f($x + 1) }; $f(1))", Budget(steps_max=10_000))
    assert "more than 10000 evaluation steps (evaluation_steps_max)" in cause


def test_the_budget_is_shared_by_every_expression_of_a_step():
    budget = Budget(steps_max=1_000)
    compiled = compile_value(expr("$reduce([1..200], function($a, $b) { $a + $b })"), "Output")
    assert compiled.evaluate({}, {"input": {}}, budget=budget) == 20100  # about 600 steps
    with pytest.raises(StatesError):
        compiled.evaluate({}, {"input": {}}, budget=budget)
    assert budget.exceeded
    assert compiled.evaluate({}, {"input": {}}, budget=budget) == 20100  # afresh once it ran out: a Catch runs


def test_a_range_is_refused_before_it_is_built():
    cause = budget_failure("$count([1..10000000])", Budget(items_max=1_000_000))
    assert "more than 1000000 items" in cause and "evaluation_items_max" in cause


def test_the_wall_time_bound_reads_the_given_clock():
    ticks = iter(range(0, 10**6, 1))  # each read one second later
    cause = budget_failure("$reduce([1..100000], function($a, $b) { $a + $b })",
                           Budget(ms_max=1_500, clock=lambda: float(next(ticks))))
    assert "more than 1500 ms of evaluation (evaluation_ms_max)" in cause


def test_a_slice_abandons_the_evaluation_instead_of_failing_it():
    """The engine thread's slice: past it, SliceSpent unwinds (no state's failure, no Catch); counted over the
    whole step, across the restart after a failure."""
    compiled = compile_value(expr("$reduce([1..200], function($a, $b) { $a + $b })"), "Output")  # about 600 steps
    budget = Budget(steps_max=1_000, slice_steps=1_500)
    assert compiled.evaluate({}, {"input": {}}, budget=budget) == 20100
    with pytest.raises(StatesError):  # the budget runs out first: a failure, and the budget starts afresh
        compiled.evaluate({}, {"input": {}}, budget=budget)
    with pytest.raises(SliceSpent):  # but the slice counts what the whole step spent
        compiled.evaluate({}, {"input": {}}, budget=budget)
    with pytest.raises(SliceSpent):  # a value built past the slice's items, however few steps
        compile_value(expr("$count([1..5000])"), "Output").evaluate({}, {"input": {}},
                                                                    budget=Budget(slice_items=1_000))
    assert compiled.evaluate({}, {"input": {}}, budget=Budget(slice_steps=None)) == 20100


@pytest.mark.parametrize("text", [
    "($s := function($x, $n) { $n = 0 ? $x : $s($x & $x, $n - 1) }; $s('a', 40))",  # doubling a string
    "$pad('', 100000000)",  # refused before the padding is made
    "$map([1..2000], function($i) { [1..1000] })",  # many ranges, each small
])
def test_building_too_much_fails_on_items(text):
    assert "items (array elements, string characters)" in budget_failure(text, Budget(items_max=1_000_000))


@pytest.mark.parametrize(("options", "expected"), [
    ({"decimal-separator": ",", "grouping-separator": "."}, "12.345,60"),
    ({"grouping-separator": "(a+)+"}, "must be a single character"),
    ({"exponent-separator": "("}, "cannot be '('"),
    ({"decimal-separator": "\\"}, "cannot be '\\'"),
    ({"percent": 5}, "must be a single character"),
])
def test_format_number_separators_are_single_characters(options, expected):
    text = expr("$formatNumber(12345.6, $states.input.picture, $states.input.options)")
    picture = "#.###,00" if options.get("decimal-separator") == "," else "#,##0.00"
    state_input = {"picture": picture, "options": options}
    if expected[0].isdigit():
        assert run(text, state_input) == expected
    else:
        assert expected in failure(text, state_input)


# -- refused when compiled


@pytest.mark.parametrize(("raw", "message"), [
    ("{% a[1,2) %}", 'Expected "]", got ","'),
    ("{% $states.input. %}", "is not valid"),
    ("{%  %}", "is empty"),
    ({"x": ["{% ( %}"]}, "at Output/x[0]"),
])
def test_syntax_errors_are_raised_at_compile_time(raw, message):
    with pytest.raises(JsonataSyntaxError) as caught:
        compile_value(raw, "Output")
    assert message in str(caught.value)


@pytest.mark.parametrize(("text", "reference"), [
    ("phone", "phone"), ("{'v': phone}", "phone"), ("$count(items)", "items"), ("$", "$"), ("$.a", "$"),
    ("$map($states.input.a, function($x) { b })", "b"), ("$states.input.items[$$.x]", "$$"),
])
def test_references_to_the_missing_context_are_refused(text, reference):
    with pytest.raises(JsonataSyntaxError) as caught:
        compile_value({"v": expr(text)}, "Output")
    assert caught.value.code == UNSUPPORTED_EXPRESSION
    assert caught.value.location == "Output/v"
    assert f"Reference to '{reference}'" in str(caught.value)


@pytest.mark.parametrize("text", [
    "$states.input.items[price > 3].name", "$states.input.items.{'n': name}", "$states.input.items{name: price}",
    "$states.input.items^(price)", "[1, 2][$ > 1]", "$states.input.items.($.price)", "$states.input ~> |a|{'x': 1}|",
    "$filter($states.input.items, function($i) { $i.price > 3 })",
])
def test_relative_references_are_accepted(text):
    compile_value(expr(text))


# -- laws

JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8) | st.floats(
    allow_nan=False, allow_infinity=False).filter(lambda number: not number.is_integer())
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=20)


@CI
@given(JSON_VALUES)
def test_a_value_without_expressions_is_its_own_result(value):
    compiled = compile_value(value)
    result = compiled.evaluate({}, {"input": {}})
    assert result == value
    assert compiled.is_literal is not any(is_expression(text) for text in _strings(value))


@CI
@given(JSON_VALUES)
def test_states_input_comes_back_equal_and_untouched(value):
    state_input = {"v": value}
    before = copy.deepcopy(state_input)
    result = compile_value({"copy": expr("$states.input.v"), "all": expr("$states.input")}).evaluate(
        {}, {"input": state_input})
    assert state_input == before
    assert result["all"] == before
    if isinstance(value, list | dict):
        assert result["all"]["v"] is not value  # nothing shared: the caller may change the result


@CI
@given(st.lists(st.integers(), max_size=30), st.integers(1, 12))
def test_partition_chunks_concatenate_to_the_array(items, size):
    # From the input: a number written in the expression is a double, as in JavaScript.
    chunks = run(expr(f"$partition($states.input.items, {size})"), {"items": items}) if items else None
    if chunks is not None:
        assert [item for chunk in chunks for item in chunk] == items
        assert all(len(chunk) == size for chunk in chunks[:-1]) and 0 < len(chunks[-1]) <= size


@CI
@given(st.integers(-50, 50), st.integers(-50, 50), st.integers(-7, 7).filter(bool))
def test_range_is_inclusive_when_the_step_lands_on_the_end(start, end, step):
    expected = list(range(start, end + (1 if step > 0 else -1), step))
    if not expected:
        assert "returned nothing" in failure(expr(f"$range({start}, {end}, {step})"))
    else:
        assert run(expr(f"[$range({start}, {end}, {step})]")) == expected


@CI
@given(st.binary(max_size=16))
def test_randomness_is_a_function_of_the_seed(seed):
    first = run(RANDOM, seed=seed)
    assert run(RANDOM, seed=seed) == first
    assert UUID4.match(first["u"]) and 0 <= first["r"] < 1


@CI
@given(st.integers(-(2**53), 2**53))
def test_integral_floats_come_back_as_ints(number):
    result = run(expr("$states.input.f"), {"f": float(number)})
    assert type(result) is int and result == number
    assert not math.isnan(run(expr("$states.input.f / 3"), {"f": float(number)}))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
