"""Intrinsic functions: AWS's documented examples, behaviour AWS was observed to have (rounding, StringSplit,
how States.Format writes objects), escaping, nesting, argument errors at run time, syntax errors at compile
time, seeded randomness, templates, and hypothesis laws (derandomized)."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statewright.asl.definition import InvalidDefinition, parse_definition
from statewright.asl.errors import RUNTIME, StatesError
from statewright.asl.intrinsics import (
    INTRINSIC_FAILURE,
    IntrinsicSyntaxError,
    compile_intrinsic,
    is_intrinsic,
)
from statewright.asl.jsonio import dumps
from statewright.asl.paths import PathSyntaxError
from statewright.asl.templates import Template

CI = settings(derandomize=True, deadline=None, max_examples=100)
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
ARN = "arn:aws:imagebuilder:us-east-1:123456789012:image-recipe/my-recipe/1.2.3"


def run(expression: str, data=None, context=None, seed: bytes = b""):
    return compile_intrinsic(expression).evaluate(data, context, seed)


# -- AWS's documented examples (docs.aws.amazon.com/step-functions/latest/dg/intrinsic-functions.html)

DOCUMENTED = [
    ("States.Array($.Id)", {"Id": 123456}, [123456]),
    ("States.ArrayPartition($.inputArray,4)", {"inputArray": [1, 2, 3, 4, 5, 6, 7, 8, 9]},
     [[1, 2, 3, 4], [5, 6, 7, 8], [9]]),
    ("States.ArrayPartition(States.Array(1, 2, 3, 4, 5, 6, 7), 4)", None, [[1, 2, 3, 4], [5, 6, 7]]),
    ("States.ArrayContains($.inputArray, $.lookingFor)", {"inputArray": [1, 2, 3, 4, 5, 6, 7, 8, 9], "lookingFor": 5},
     True),
    ("States.ArrayRange(1, 9, 2)", None, [1, 3, 5, 7, 9]),
    ("States.ArrayGetItem($.inputArray, $.index)", {"inputArray": [1, 2, 3, 4, 5, 6, 7, 8, 9], "index": 5}, 6),
    ("States.ArrayLength($.inputArray)", {"inputArray": [1, 2, 3, 4, 5, 6, 7, 8, 9]}, 9),
    ("States.ArrayUnique($.inputArray)", {"inputArray": [1, 2, 3, 3, 3, 3, 3, 3, 4]}, [1, 2, 3, 4]),
    ("States.Base64Encode($.input)", {"input": "Data to encode"}, "RGF0YSB0byBlbmNvZGU="),
    # The page prints "Decoded data" here, but that is not what the string decodes to.
    ("States.Base64Decode($.base64)", {"base64": "RGF0YSB0byBlbmNvZGU="}, "Data to encode"),
    # The page prints aaff4a450a104cd177d28d18d7485e8cae074b7, one digit short of the real SHA-1.
    ("States.Hash($.Data, $.Algorithm)", {"Data": "input data", "Algorithm": "SHA-1"},
     "aaff4a450a104cd177d28d18d74485e8cae074b7"),
    ("States.JsonMerge($.json1, $.json2, false)",
     {"json1": {"a": {"a1": 1, "a2": 2}, "b": 2}, "json2": {"a": {"a3": 1, "a4": 2}, "c": 3}},
     {"a": {"a3": 1, "a4": 2}, "b": 2, "c": 3}),
    ("States.StringToJson($.escapedJsonString)", {"escapedJsonString": '{"foo": "bar"}'}, {"foo": "bar"}),
    ("States.JsonToString($.unescapedJson)", {"unescapedJson": {"foo": "bar"}}, '{"foo":"bar"}'),
    ("States.MathAdd($.value1, $.step)", {"value1": 111, "step": -1}, 110),
    ("States.StringSplit($.inputString, $.splitter)", {"inputString": "1,2,3,4,5", "splitter": ","},
     ["1", "2", "3", "4", "5"]),
    ("States.StringSplit($.inputString, $.splitter)", {"inputString": "This.is+a,test=string", "splitter": ".+,="},
     ["This", "is", "a", "test", "string"]),
    ("States.Format('Hello, my name is {}.', $.name)", {"name": "Arnav"}, "Hello, my name is Arnav."),
    ("States.Format($.template, $.name)", {"name": "Arnav", "template": "Hello, my name is {}."},
     "Hello, my name is Arnav."),
    # From the States Language specification.
    ("States.Format('Your name is {}, we are in the year {}', $.name, 2020)", {"name": "Foo"},
     "Your name is Foo, we are in the year 2020"),
    ("States.Array('Foo', 2020, $.someJson, null)", {"someJson": {"random": "abcdefg"}},
     ["Foo", 2020, {"random": "abcdefg"}, None]),
]


@pytest.mark.parametrize(("expression", "data", "expected"), DOCUMENTED)
def test_documented_examples(expression, data, expected):
    assert run(expression, data) == expected


@pytest.mark.parametrize(("algorithm", "digest"), [
    ("MD5", "812f45842bc6d66ee14572ce20db8e86"),
    ("SHA-1", "aaff4a450a104cd177d28d18d74485e8cae074b7"),
    ("SHA-256", "b4a697a057313163aee33cd8d40c66e9f0f177e00cac2de32475ffff6169c3e3"),
    ("SHA-384", "d28a7d5cf25a74f11a50a18452b75e04bb3d70c9dd0510d6123aa008c756511b"
                "87525bdc835ebb27e1fb9e9374a15562"),
    ("SHA-512", "6ce4adb348546d4f449c4d25aad9a7c9cb711d9e91982d3f0b29ca2f3f47d4ce"
                "2deba23bf2954f0f1d593fc50283731a533d30d425402d4f91316d871303aac4"),
])
def test_hash_algorithms(algorithm, digest):
    assert run(f"States.Hash('input data', '{algorithm}')") == digest


# -- behaviour beyond the examples, as AWS was recorded doing it

BEHAVIOUR = [
    # Numbers are rounded half up (Java's Math.round), each argument on its own.
    ("States.MathAdd(1.49, 1.5)", 3),
    ("States.MathAdd(1.5, 1.51)", 4),
    ("States.MathAdd(-1.49, -1.5)", -2),
    ("States.MathAdd(-1.5, -1.51)", -3),
    ("States.MathAdd(0.5, 0)", 1),
    ("States.MathAdd(2.5, 0)", 3),
    ("States.MathAdd(-0.5, 0)", 0),
    ("States.MathAdd(-2.5, 0)", -2),
    ("States.MathAdd(-0.5, 0.5)", 1),
    ("States.MathAdd(2147483647, -2147483648)", -1),
    ("States.ArrayPartition(States.Array(1, 2, 3), 1.5)", [[1, 2], [3]]),
    ("States.ArrayPartition(States.Array(), 3)", []),
    ("States.ArrayRange(0, 10, 3)", [0, 3, 6, 9]),
    ("States.ArrayRange(1, 9, 9)", [1]),
    ("States.ArrayRange(9, 1, -4)", [9, 5, 1]),
    ("States.ArrayRange(1, 9, -1)", []),
    ("States.ArrayRange(0.5, 2.4, 1)", [1, 2]),
    ("States.ArrayRange(1, 1000, 1)", list(range(1, 1001))),
    # Every delimiter character splits, and empty pieces are dropped.
    ("States.StringSplit(' , ', ',')", [" ", " "]),
    ("States.StringSplit(', , ,', ',')", [" ", " "]),
    ("States.StringSplit(',,,,', ',')", []),
    ("States.StringSplit('split on T and \nnew line', 'T\n')", ["split on ", " and ", "new line"]),
    ("States.StringSplit('abc', '')", ["abc"]),
    # Blank text parses to null; -0 to 0.
    ("States.StringToJson('')", None),
    ("States.StringToJson(' ')", None),
    ("States.StringToJson('-0')", 0),
    ("States.StringToJson('[1, 2, \"HelloWorld\"]')", [1, 2, "HelloWorld"]),
    ("States.JsonToString(States.StringToJson('{\"Arg1\": 1, \"Arg2\": []}'))", '{"Arg1":1,"Arg2":[]}'),
    ("States.JsonToString('HelloWorld')", '"HelloWorld"'),
    ("States.JsonToString(null)", "null"),
    # States.Format writes strings bare, and objects and arrays as Java prints a Map and a List.
    ("States.Format('[{}|{}|{}|{}|{}]', '', null, 1, 1.1, true)", "[|null|1|1.1|true]"),
    ("States.Format('{}', States.StringToJson('{\"Arg1\": 1, \"Arg2\": []}'))", "{Arg1=1, Arg2=[]}"),
    ("States.Format('{}', States.Array(1, 'a', States.Array(null, false)))", "[1, a, [null, false]]"),
    ("States.Format('no placeholders')", "no placeholders"),
    # Equality is JSON's: objects whatever their key order, numbers by value, never true == 1.
    ("States.ArrayContains(States.Array(1, 2), true)", False),
    ("States.ArrayContains(States.Array(true, false), false)", True),
    ("States.ArrayContains(States.Array(), null)", False),
    ("States.ArrayContains(States.Array(States.Array(1, 2, 3), 2), States.Array(1, 2, 3))", True),
    ("States.ArrayContains(States.Array(States.StringToJson('{\"a\":1,\"b\":2}')), "
     "States.StringToJson('{\"b\":2,\"a\":1}'))", True),
    ("States.ArrayUnique(States.Array(null, null, true, 1, 1.0, 0, 'x', 'x', States.Array(), States.Array()))",
     [None, True, 1, 0, "x", []]),
    ("States.ArrayGetItem(States.Array('a', 'b'), 1.0)", "b"),
    ("States.JsonMerge(States.StringToJson('{\"a\":1,\"d\":3}'), States.StringToJson('{\"d\":4}'), false)",
     {"a": 1, "d": 4}),
    ("States.Base64Encode('')", ""),
    ("States.Base64Decode('')", ""),
    ("States.Base64Decode('RGF0YQ')", "Data"),  # AWS accepts missing padding
    ("States.Base64Decode('RGF0\nYQ==')", "Data"),  # and skips characters outside the alphabet
    ("States.Base64Encode('héllo ✓')", "aMOpbGxvIOKckw=="),
    ("States.Array()", []),
]


@pytest.mark.parametrize(("expression", "expected"), BEHAVIOUR)
def test_behaviour(expression, expected):
    assert run(expression) == expected


def test_array_unique_keeps_the_first_occurrence_in_order():
    data = {"items": [{"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 1, "b": 1}, 3, 1, 3]}
    assert run("States.ArrayUnique($.items)", data) == [{"a": 1, "b": 2}, {"a": 1, "b": 1}, 3, 1]


# -- literals, escaping and paths

ESCAPES = [
    (r"States.Format('escaped \{\} and {}', 'x')", "escaped {} and x"),
    (r"States.Format('it\'s {}', 'x')", "it's x"),
    (r"States.Format('a \\ b {}', 1)", "a \\ b 1"),
    (r"States.Array('\{', '\}', '\\', '\'')", ["{", "}", "\\", "'"]),
    (r"States.Array('{}')", ["{}"]),  # a placeholder only means something to States.Format
    (r"States.Array('a, b)', ' ( ')", ["a, b)", " ( "]),
    ("States.Array('Hello\nWorld')", ["Hello\nWorld"]),  # a JSON \n is a real newline, not an escape
    ("States.Array(1, -2, 2.5, -0.25, 1e3, true, false, null)", [1, -2, 2.5, -0.25, 1000.0, True, False, None]),
    ("States.Array(  1 ,2  )", [1, 2]),
]


@pytest.mark.parametrize(("expression", "expected"), ESCAPES)
def test_literals_and_escapes(expression, expected):
    assert run(expression) == expected


def test_a_template_read_from_the_input_has_no_escapes():
    data = {"template": r"C:\dir\{} {}", "a": 1, "b": 2}
    assert run("States.Format($.template, $.a, $.b)", data) == r"C:\dir\1 2"


PATHS = [
    ("States.Array($)", {"a": 1}, [{"a": 1}]),
    ("States.Array($.a.b[1])", {"a": {"b": [5, 6]}}, [6]),
    ("States.Array($['a b'], $.abc.['def ghi'])", {"a b": 1, "abc": {"def ghi": 2}}, [1, 2]),
    ("States.Array($.items[?(@.n > 1)].n)", {"items": [{"n": 1}, {"n": 2}, {"n": 3}]}, [[2, 3]]),
    ("States.Array($$.Execution.Id, $$)", {}, ["arn:x", {"Execution": {"Id": "arn:x"}}]),
]


@pytest.mark.parametrize(("expression", "data", "expected"), PATHS)
def test_path_arguments(expression, data, expected):
    assert run(expression, data, {"Execution": {"Id": "arn:x"}}) == expected


def test_the_context_may_be_built_lazily():
    assert run("States.Format('{}', $$.Execution.Id)", {}, lambda: {"Execution": {"Id": "arn:x"}}) == "arn:x"


# -- nesting

NESTED = [
    # AWS's nine-function example (its template has one {} too many: the values are the recipe's 1 and 2).
    ("States.Format('{}.{}', States.ArrayGetItem(States.StringSplit(States.ArrayGetItem(States.StringSplit("
     "$.ImageRecipe.Arn, '/'), 2), '.'), 0), States.ArrayGetItem(States.StringSplit(States.ArrayGetItem("
     "States.StringSplit($.ImageRecipe.Arn, '/'), 2), '.'), 1))", "1.2"),
    ("States.ArrayGetItem(States.StringSplit($$.StateMachine.Name, '-'), States.MathAdd(States.ArrayLength("
     "States.StringSplit($$.StateMachine.Name, '-')), -1))", "last"),
    ("States.JsonMerge(States.StringToJson('{\"in_literal\": \"false\"}'), $$.Execution.Input, false)",
     {"in_literal": "false", "k": "v"}),
    ("States.ArrayLength(States.ArrayPartition(States.ArrayRange(1, 100, 1), 7))", 15),
]


@pytest.mark.parametrize(("expression", "expected"), NESTED)
def test_nested_calls(expression, expected):
    context = {"StateMachine": {"Name": "my-state-machine-last"}, "Execution": {"Input": {"k": "v"}}}
    assert run(expression, {"ImageRecipe": {"Arn": ARN}}, context) == expected


def nested(depth: int) -> str:
    return "States.Array(" * depth + ")" * depth


def test_ten_levels_of_nesting_are_allowed_and_eleven_are_not():
    assert run(nested(10)) == [[[[[[[[[[]]]]]]]]]]
    with pytest.raises(IntrinsicSyntaxError, match="nested at most 10"):
        compile_intrinsic(nested(11))


# -- errors while running: States.IntrinsicFailure, or States.Runtime for a path that selects nothing

RUNTIME_ERRORS = [
    ("States.ArrayPartition($.s, 2)", "an array as its first argument, not a string"),
    ("States.ArrayPartition($.a, 0)", "chunk size greater than 0, not 0"),
    ("States.ArrayPartition($.a, 0.4)", "chunk size greater than 0, not 0"),
    ("States.ArrayPartition($.a, -1)", "chunk size greater than 0"),
    ("States.ArrayPartition($.a, '2')", "an integer as its second argument, not a string"),
    ("States.ArrayContains($.s, 1)", "an array as its first argument"),
    ("States.ArrayRange(1, 9, 0)", "step other than 0"),
    ("States.ArrayRange(1, 1001, 1)", "at most 1000 items, not 1001"),
    ("States.ArrayRange(1, true, 1)", "an integer as its second argument, not a boolean"),
    ("States.ArrayGetItem($.a, 3)", "index 3 is out of bounds for an array of 3 items"),
    ("States.ArrayGetItem($.a, -1)", "index -1 is out of bounds"),
    ("States.ArrayGetItem($.a, 1.5)", "an integer as its second argument, not a number"),
    ("States.ArrayGetItem($.o, 0)", "an array as its first argument, not an object"),
    ("States.ArrayLength(null)", "an array as its first argument, not null"),
    ("States.ArrayUnique($.s)", "an array as its first argument"),
    ("States.Base64Encode($.long)", "at most 10000 characters, not 10001"),
    ("States.Base64Encode(1)", "a string as its first argument, not a number"),
    ("States.Base64Decode($.long)", "at most 10000 characters"),
    ("States.Base64Decode('abcde')", "not valid Base64"),
    ("States.Base64Decode('Q')", "not valid Base64"),
    ("States.Hash($.long, 'MD5')", "at most 10000 characters"),
    ("States.Hash('x', 'SHA-2')", "does not know the algorithm 'SHA-2'"),
    ("States.Hash('x', 'sha-1')", "does not know the algorithm"),
    ("States.JsonMerge($.o, $.o, true)", "shallow mode only"),
    ("States.JsonMerge($.o, $.o, 'false')", "the boolean false as its third argument, not a string"),
    ("States.JsonMerge($.o, $.a, false)", "an object as its second argument, not an array"),
    ("States.MathAdd(2147483648, 0)", "integers from -2147483648 to 2147483647, not 2147483648"),
    ("States.MathAdd(-2147483649, 0)", "not -2147483649"),
    ("States.MathAdd('1', 2)", "an integer as its first argument, not a string"),
    ("States.MathRandom(5, 5)", "end greater than its start, not 5 and 5"),
    ("States.MathRandom(1, 9, 'seed')", "an integer as its third argument"),
    ("States.StringSplit($.a, ',')", "a string as its first argument, not an array"),
    ("States.StringSplit('a', 1)", "a string as its second argument"),
    ("States.StringToJson('{nope')", "could not parse the string as JSON"),
    ("States.StringToJson(1)", "a string as its first argument"),
    ("States.Format($.a, 1)", "a string as its first argument, not an array"),
    ("States.Format($.s, 1)", "0 placeholders {} but 1 value to put in them"),
]


@pytest.mark.parametrize(("expression", "message"), RUNTIME_ERRORS)
def test_argument_errors_are_intrinsic_failures(expression, message):
    data = {"s": "text", "a": [1, 2, 3], "o": {"k": 1}, "long": "x" * 10_001}
    with pytest.raises(StatesError) as caught:
        run(expression, data)
    assert caught.value.error == INTRINSIC_FAILURE
    assert caught.value.cause.startswith(f"The function '{expression}' had the following error: ")
    assert message in caught.value.cause


def test_a_path_that_selects_nothing_is_a_runtime_error_naming_the_whole_expression():
    with pytest.raises(StatesError) as caught:
        run("States.Array(States.Format('{}', $.nope))", {"other": 1})
    assert caught.value.error == RUNTIME
    assert caught.value.cause == (
        "The function 'States.Array(States.Format('{}', $.nope))' had the following error: "
        "The JsonPath argument for the field '$.nope' could not be found in the input '{\"other\":1}'")


def test_a_context_path_that_selects_nothing_shows_the_context_object():
    with pytest.raises(StatesError, match=r"'\$\$.Execution.Name' could not be found in the input '\{\}'"):
        run("States.Array($$.Execution.Name)", {"a": 1}, {})


# -- errors at compile time

SYNTAX_ERRORS = [
    ("States.Foo(1)", "unknown intrinsic function States.Foo"),
    ("States.format('x')", "unknown intrinsic function States.format"),
    ("States.UUID(1)", "States.UUID takes 0 arguments, but 1 given"),
    ("States.ArrayRange(1, 2)", "States.ArrayRange takes 3 arguments, but 2 given"),
    ("States.MathRandom(1)", "States.MathRandom takes 2 to 3 arguments, but 1 given"),
    ("States.ArrayLength()", "States.ArrayLength takes 1 argument, but 0 given"),
    ("States.Format()", "States.Format takes at least 1 argument, but 0 given"),
    ("States.Format('{} and {}', 1)", "2 placeholders {} but 1 value"),
    (r"States.Format('\{\}', 1)", "0 placeholders {} but 1 value"),
    ("States.Format(1)", "first argument of States.Format must be a string"),
    ("States.Array('unterminated)", "unterminated string literal"),
    (r"States.Array('open \n escape')", "a backslash may only escape one of"),
    ("States.Array('trailing \\", "a backslash may only escape one of"),
    ("States.Array(1 2)", "expected ',' or ')'"),
    ("States.Array(1,)", "expected an argument"),
    ("States.Array(", "expected an argument"),
    ("States.Array(1", "expected ',' or ')'"),
    ("States.Array(nul)", "expected an argument"),
    ("States.Array(truex)", "expected an argument"),
    ("States.Array(\"double\")", "expected an argument"),
    ("States.Array(01)", "expected ',' or ')'"),
    ("States.Array() extra", "unexpected text after the function call"),
    ("States.Array()States.Array()", "unexpected text after the function call"),
    (" States.Array()", "expected an intrinsic function call"),
    ("States.Array", "expected an intrinsic function call"),
    ("$.a", "expected an intrinsic function call"),
    ("States.Array($.a[)", "invalid path argument '$.a[)'"),
    ("States.Array(@.a)", "expected an argument"),
]


@pytest.mark.parametrize(("expression", "message"), SYNTAX_ERRORS)
def test_syntax_errors_are_found_at_compile_time(expression, message):
    with pytest.raises(IntrinsicSyntaxError) as caught:
        compile_intrinsic(expression)
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_is_intrinsic():
    assert is_intrinsic("States.Format('x')")
    assert is_intrinsic("States.UUID ()")
    assert not is_intrinsic("$.States.Format")
    assert not is_intrinsic("States.Format")
    assert not is_intrinsic(42)


# -- randomness: deterministic from the seed

def test_uuid_is_a_version_4_uuid_fixed_by_the_seed():
    first = run("States.UUID()", seed=b"execution-1/event-7")
    assert UUID4.match(first)
    assert run("States.UUID()", seed=b"execution-1/event-7") == first
    assert run("States.UUID()", seed=b"execution-1/event-8") != first


def test_each_draw_in_one_expression_differs():
    values = run("States.Array(States.UUID(), States.UUID(), States.UUID())", seed=b"s")
    assert len(set(values)) == 3
    assert all(UUID4.match(value) for value in values)


def test_math_random_without_a_seed_follows_the_engine_seed():
    draws = [run("States.MathRandom(1, 999)", seed=bytes([i])) for i in range(50)]
    assert all(1 <= n < 999 and isinstance(n, int) for n in draws)
    assert len(set(draws)) > 40
    assert draws == [run("States.MathRandom(1, 999)", seed=bytes([i])) for i in range(50)]


def test_math_random_with_a_seed_argument_ignores_the_engine_seed():
    values = {run("States.MathRandom(0, 999, 3)", seed=bytes([i])) for i in range(20)}
    assert len(values) == 1
    assert run("States.MathRandom(0, 999, 3.2)") in values  # the seed is rounded like the bounds
    assert {run(f"States.MathRandom(0, 999, {seed})") for seed in range(20)} != values


def test_math_random_end_is_exclusive():
    assert {run("States.MathRandom(7, 8)", seed=bytes([i])) for i in range(20)} == {7}
    assert {run("States.MathRandom(12.5, 14.51)", seed=bytes([i])) for i in range(40)} == {13, 14}


# -- templates

def test_template_renders_intrinsics_paths_and_literals():
    template = Template({
        "greeting.$": "States.Format('Hello, my name is {}.', $.name)",
        "name.$": "$.name",
        "nested": [{"count.$": "States.ArrayLength($.items)"}, "literal"],
        "execution.$": "States.Format('{}', $$.Execution.Id)",
    })
    data = {"name": "Arnav", "items": [1, 2]}
    assert template.render(data, {"Execution": {"Id": "arn:x"}}) == {
        "greeting": "Hello, my name is Arnav.",
        "name": "Arnav",
        "nested": [{"count": 2}, "literal"],
        "execution": "arn:x",
    }


def test_template_gives_each_random_field_its_own_draws_and_replays_them():
    template = Template({"a.$": "States.UUID()", "b.$": "States.UUID()", "c": [{"d.$": "States.UUID()"}]})
    first = template.render({}, {}, b"execution/event-2")
    assert len({first["a"], first["b"], first["c"][0]["d"]}) == 3
    assert template.render({}, {}, b"execution/event-2") == first
    assert template.render({}, {}, b"execution/event-3")["a"] != first["a"]
    assert UUID4.match(template.render({}, {})["a"])  # the seed is optional


def test_template_keeps_the_plain_path_error():
    with pytest.raises(StatesError) as caught:
        Template({"x.$": "$.missing"}).render({"a": 1}, {})
    assert caught.value.error == RUNTIME
    assert caught.value.cause == ("The JSONPath '$.missing' specified for the field 'x.$' could not be found in "
                                  "the input '{\"a\":1}'")


def test_template_passes_intrinsic_failures_on():
    with pytest.raises(StatesError) as caught:
        Template({"x.$": "States.ArrayLength($.a)"}).render({"a": 1}, {})
    assert caught.value.error == INTRINSIC_FAILURE


def test_a_bad_intrinsic_makes_the_definition_invalid():
    with pytest.raises(PathSyntaxError, match="is not a valid intrinsic function: unknown intrinsic function"):
        Template({"x.$": "States.Nope(1)"})
    definition = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True,
                                                   "Parameters": {"x.$": "States.Format('{}')"}}}}
    with pytest.raises(InvalidDefinition, match=re.escape("1 placeholder {} but 0 values")):
        parse_definition(dumps(definition))


def test_a_definition_with_intrinsics_parses():
    definition = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True, "Parameters": {
        "id.$": "States.UUID()", "parts.$": "States.StringSplit($$.Execution.Name, '-')"}}}}
    parse_definition(dumps(definition))


# -- laws

texts = st.text(max_size=60)
scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(-1e6, 1e6, allow_nan=False) | texts
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner,
                                                                                                 max_size=4),
                           max_leaves=15)
arrays = st.lists(json_values, max_size=30)


@CI
@given(texts)
def test_base64_decode_inverts_encode(text):
    assert run("States.Base64Decode(States.Base64Encode($.s))", {"s": text}) == text


@CI
@given(arrays, st.integers(1, 12))
def test_partition_makes_ceil_n_chunks_that_join_back(array, size):
    chunks = run("States.ArrayPartition($.a, $.n)", {"a": array, "n": size})
    assert run("States.ArrayLength($)", chunks) == math.ceil(len(array) / size)
    assert [item for chunk in chunks for item in chunk] == array
    assert all(len(chunk) == size for chunk in chunks[:-1])


@pytest.mark.slow  # seconds of examples: not in the fast tier
@CI
@given(arrays)
def test_array_unique_is_idempotent_and_keeps_membership(array):
    unique = run("States.ArrayUnique($)", array)
    assert run("States.ArrayUnique($)", unique) == unique
    assert len(unique) <= len(array)
    for item in array:
        assert run("States.ArrayContains($.u, $.x)", {"u": unique, "x": item})


@CI
@given(json_values)
def test_string_to_json_inverts_json_to_string(value):
    assert run("States.StringToJson(States.JsonToString($))", value) == value


@CI
@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6), st.integers(-50, 50).filter(bool))
def test_array_range_matches_python_range(first, last, step):
    expected = list(range(first, last + (1 if step > 0 else -1), step))
    expression = f"States.ArrayRange({first}, {last}, {step})"
    if len(expected) > 1000:
        with pytest.raises(StatesError):
            run(expression)
    else:
        assert run(expression) == expected


@CI
@given(st.lists(st.text(alphabet="ab,;", max_size=6), max_size=6), st.sampled_from([",", ";", ",;"]))
def test_string_split_pieces_contain_no_delimiter_and_keep_the_rest(pieces, delimiters):
    text = delimiters[0].join(pieces)
    split = run("States.StringSplit($.t, $.d)", {"t": text, "d": delimiters})
    assert all(piece and not set(piece) & set(delimiters) for piece in split)
    assert "".join(split) == "".join(char for char in text if char not in delimiters)


@CI
@given(st.lists(texts, max_size=5))
def test_format_substitutes_values_in_order(values):
    template = "<" + "|".join("{}" for _ in values) + ">"
    expression = "States.Format($.t" + "".join(f", $.v[{i}]" for i in range(len(values))) + ")"
    assert run(expression, {"t": template, "v": values}) == "<" + "|".join(values) + ">"


@CI
@given(st.binary(max_size=16), st.integers(-1000, 1000), st.integers(1, 1000))
def test_random_values_are_in_range_and_replay(seed, start, width):
    expression = f"States.Array(States.MathRandom({start}, {start + width}), States.UUID())"
    number, uuid = run(expression, seed=seed)
    assert start <= number < start + width
    assert UUID4.match(uuid)
    assert run(expression, seed=seed) == [number, uuid]
