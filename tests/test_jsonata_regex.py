"""JSONata regular expressions (and $toMillis pictures) on RE2: patterns that make a backtracking engine run for
ever are decided at once, $match/$contains/$replace/$split keep their meaning, patterns RE2 cannot run fail the
evaluation (never fall back to backtracking), broken ones are refused when the definition is compiled, and the
engine agrees with Python's ``re`` on patterns both can run (hypothesis, derandomized)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonata.regex_engine import RegexFlags

from statewright.asl.errors import StatesError
from statewright.asl.jsonata import QUERY_EVALUATION_ERROR, JsonataSyntaxError, compile_value
from statewright.asl.regex import compile_regex

CI = settings(derandomize=True, deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
NEAR_MISS = "a" * 5000 + "b"  # a backtracking engine needs about 2^5000 steps to refuse /(a+)+$/ here


def run(text: str, state_input=None):
    return compile_value("{% " + text + " %}", "Output").evaluate({}, {"input": state_input or {}})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$count($match($states.input.s, /(a+)+$/))", 0),
        ("$contains($states.input.s, /(a|aa)+c/)", False),
        ("$replace($states.input.s, /(a*)*c/, 'x') = $states.input.s", True),
        ("$count($split($states.input.s, /(a+)+c/))", 1),
        ("$exists(/(a+)+$/($states.input.s))", False),
        ("$count($match($states.input.s, /(.*a){20}c/))", 0),
        # $toMillis matches the timestamp against its picture made a pattern, literal text unescaped
        ("$exists($toMillis($states.input.s, '(a+)+[Y]'))", False),
        ("$exists($toMillis($states.input.digits, '" + "[f]" * 30 + "'))", False),
    ],
)
def test_catastrophic_patterns_are_decided_at_once(text, expected):
    assert run(text, {"s": NEAR_MISS, "digits": "1" * 200 + "x"}) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('$match("a1b22c", /([0-9])+/)', [{"match": "1", "index": 1, "groups": ["1"]},
                                          {"match": "22", "index": 3, "groups": ["2"]}]),
        ('$match("a1b22c", /[0-9]+/, 1)', {"match": "1", "index": 1, "groups": []}),
        ('$match("x\ny", /^y$/m).index', 2),
        ('$exists($match("y\n", /y$/))', False),  # $ ends the text, as in JavaScript
        ('$match("A", /\\u0041/).match', "A"),
        ('$contains("ABC", /b/i)', True),
        ('$contains("ABC", /b/)', False),
        ('$replace("abc", /(b)/, "[$0|$1|$2|$12|$$|\\\\n]")', "a[b|b||b2|$|\\n]c"),
        ('$replace("abcabc", /b/, "X", 1)', "aXcabc"),
        ('$replace("abc", /(b)/, function($m){$uppercase($m.match)})', "aBc"),
        ('$replace("héllo", /l+/, "日")', "hé日o"),
        ('$split("a1b22c", /[0-9]+/)', ["a", "b", "c"]),
        ('$split("a1b22c", /[0-9]+/, 2)', ["a", "b"]),
        ('/b+/("abbc").match', "bb"),
        ('/b/("abcb").next().start', 3),
        ('$toMillis("2024-03-05", "[Y]-[M]-[D]")', 1709596800000),
    ],
)
def test_regex_functions_keep_their_meaning(text, expected):
    assert run(text) == expected


@pytest.mark.parametrize("pattern", ["(a)\\1", "a(?=b)", "(?<!x)a", "a{1001}"])
def test_a_pattern_only_a_backtracking_engine_runs_fails_the_evaluation(pattern):
    value = compile_value("{% $match('aab', /" + pattern + "/) %}", "Output")  # accepted, as AWS accepts it
    with pytest.raises(StatesError) as caught:
        value.evaluate({}, {"input": {}})
    assert caught.value.error == QUERY_EVALUATION_ERROR
    assert "cannot be run" in caught.value.cause and "RE2" in caught.value.cause


def test_a_pattern_that_is_no_regular_expression_is_refused_at_compile_time():
    with pytest.raises(JsonataSyntaxError, match=r"the regular expression /\[b-a\]/ is not valid"):
        compile_value("{% $match('a', /[b-a]/) %}", "Output")


# -- agreement with Python's re where both apply

_ATOMS = st.sampled_from(["a", "b", ".", "[ab]", "[^a]", "\\d", "\\w", "\\s"])
_QUANTIFIERS = st.sampled_from(["", "", "*", "+", "?", "{1,2}", "*?", "+?"])


def _patterns(depth: int = 2) -> st.SearchStrategy[str]:
    piece = st.builds(lambda atom, quantifier: atom + quantifier, _ATOMS, _QUANTIFIERS)
    if depth > 0:
        # A repeated group that can match the empty string captures differently in Python (its last, empty turn)
        # and in RE2 and JavaScript (the last turn that took characters): leave those out.
        group = (st.tuples(st.deferred(lambda: _patterns(depth - 1)), _QUANTIFIERS)
                 .filter(lambda drawn: not drawn[1] or re.fullmatch(drawn[0], "") is None)
                 .map(lambda drawn: f"({drawn[0]}){drawn[1]}"))
        piece = piece | group
    sequence = st.lists(piece, min_size=1, max_size=3).map("".join)
    return st.lists(sequence, min_size=1, max_size=2).map("|".join)


_TEXT = st.text(alphabet="ab1 \n", max_size=12)


def _both(pattern: str) -> tuple:
    """The pattern on RE2 and on Python's re. Patterns that can match the empty string are left out: after an empty
    match RE2 moves on one character, as JavaScript does, where Python tries a longer match at the same place."""
    reference = re.compile(pattern)
    assume(reference.fullmatch("") is None)
    return compile_regex(pattern, RegexFlags()), reference


@pytest.mark.slow  # seconds of examples: not in the fast tier
@CI
@given(pattern=_patterns(), text=_TEXT)
def test_matches_agree_with_python_re(pattern, text):
    linear, reference = _both(pattern)
    found = [(match.group(), match.start(), match.groups()) for match in linear.finditer(text)]
    assert found == [(match.group(), match.start(), match.groups()) for match in reference.finditer(text)]
    assert linear.split(text) == reference.split(text)


@pytest.mark.slow  # seconds of examples: not in the fast tier
@CI
@given(pattern=_patterns(), text=_TEXT)
def test_replacements_agree_with_python_re(pattern, text):
    linear, reference = _both(pattern)
    groups = reference.groups
    template = "<\\g<0>" + "".join(f"|\\g<{group}>" for group in range(1, groups + 1)) + ">"
    assert linear.sub(template, text) == reference.sub(template, text)
    assert linear.sub(template, text, 1) == reference.sub(template, text, 1)
