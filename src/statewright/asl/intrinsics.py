"""Intrinsic functions (States.Format, States.Array, ..., States.UUID) as AWS Step Functions runs them.

``compile_intrinsic`` parses an expression such as ``States.Format('{} {}', $.a, States.UUID())`` once per
definition into a tree of calls, literals and compiled paths (a hand-written recursive-descent parser; each token,
a quoted string, a number, a keyword, a path, is read where it starts). ``Intrinsic.evaluate`` runs that tree for
one state input; the functions themselves are the ``_format`` ... ``_uuid`` below, listed in ``_FUNCTIONS``.

Each call, and the length of each string or array a call makes, draws on the transition step's evaluation budget
(asl/budget.py); past it the expression fails with States.IntrinsicFailure.

Invariant: evaluation is a pure function of (data, context, seed). States.UUID and States.MathRandom without a
seed argument draw their randomness from ``seed`` (hashed with a per-expression draw counter), so replaying a
history gives the same values. This module must not import a clock, random numbers, uuid, os or threads, nor
anything from the engine or the store.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
from collections.abc import Callable
from typing import Any, NoReturn

from .budget import Budget, BudgetExceeded, active
from .errors import RUNTIME, StatesError
from .jsonio import dumps, loads
from .paths import Path, PathSyntaxError

INTRINSIC_FAILURE = "States.IntrinsicFailure"
NESTING_MAX = 10  # AWS: "You can nest up to 10 intrinsic functions within a field"
STRING_CHARS_MAX = 10_000  # input limit of Base64Encode, Base64Decode and Hash
RANGE_ITEMS_MAX = 1000  # ArrayRange
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1  # MathAdd's argument range
HASH_ALGORITHMS = {"MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}

_CALL_START = re.compile(r"States\.([A-Za-z0-9]+)\s*\(")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_KEYWORD = re.compile(r"(?:true|false|null)(?![A-Za-z0-9_$.])")
_KEYWORDS = {"true": True, "false": False, "null": None}
_ESCAPABLE = "'{}\\"
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/=]")
_ORDINALS = ("first", "second", "third")


class IntrinsicSyntaxError(ValueError):
    """The text is not an intrinsic function call that AWS accepts (syntax, unknown function, argument count)."""


def is_intrinsic(text: Any) -> bool:
    """True when ``text`` starts like an intrinsic function call: ``States.Name(``."""
    return isinstance(text, str) and _CALL_START.match(text) is not None


def compile_intrinsic(text: str) -> Intrinsic:
    """Parse ``text`` once; raise IntrinsicSyntaxError for anything AWS would reject before running it."""
    if not isinstance(text, str):
        raise IntrinsicSyntaxError(f"an intrinsic function must be a string, not {type(text).__name__}")
    return Intrinsic(text, _Parser(text).expression())


class Intrinsic:
    """A compiled intrinsic function expression."""

    __slots__ = ("_root", "text")

    def __init__(self, text: str, root: _Call) -> None:
        self.text = text
        self._root = root

    def evaluate(self, data: Any, context: Any = None, seed: bytes = b"") -> Any:
        """The expression's value for this state input. ``context`` is the context object or a zero-argument
        callable that builds it; ``seed`` feeds States.UUID and unseeded States.MathRandom.

        Raises StatesError: States.Runtime when a path argument selects nothing, States.IntrinsicFailure when an
        argument has the wrong type or value."""
        run = _Run(self.text, data, context, seed, active())
        try:
            return _value(self._root, run)
        except _ArgumentError as exc:
            raise StatesError(INTRINSIC_FAILURE, run.explain(str(exc))) from None
        except BudgetExceeded as exc:
            raise StatesError(INTRINSIC_FAILURE, run.explain(exc.detail)) from None

    def __repr__(self) -> str:
        return f"Intrinsic({self.text!r})"


# -- the tree


class _Literal:
    """A literal argument. ``segments`` is set for string literals: the text split at each unescaped ``{}``, so
    States.Format can tell a placeholder from an escaped ``\\{\\}``."""

    __slots__ = ("segments", "value")

    def __init__(self, value: Any, segments: list[str] | None = None) -> None:
        self.value = value
        self.segments = segments


class _Call:
    __slots__ = ("args", "function", "name", "template")

    def __init__(self, name: str, function: Callable[..., Any], args: list[Any]) -> None:
        self.name = name
        self.function = function
        self.args = args
        self.template: list[str] | None = None  # States.Format with a literal first argument: its segments


# -- parsing


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> NoReturn:
        raise IntrinsicSyntaxError(f"{message} (at character {self.pos} of {self.text!r})")

    def peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def expression(self) -> _Call:
        root = self.call(1)
        self.skip_space()
        if self.pos != len(self.text):
            self.fail("unexpected text after the function call")
        return root

    def call(self, depth: int) -> _Call:
        if depth > NESTING_MAX:
            self.fail(f"intrinsic functions can be nested at most {NESTING_MAX} deep")
        match = _CALL_START.match(self.text, self.pos)
        if match is None:
            self.fail("expected an intrinsic function call such as States.Format(...)")
        name = f"States.{match.group(1)}"
        if name not in _FUNCTIONS:
            self.fail(f"unknown intrinsic function {name}")
        at = self.pos
        self.pos = match.end()
        call = _Call(name, _FUNCTIONS[name][2], self.arguments(depth))
        end, self.pos = self.pos, at  # errors about the call as a whole point at its name
        _check_call(call, self)
        self.pos = end
        return call

    def arguments(self, depth: int) -> list[Any]:
        args: list[Any] = []
        self.skip_space()
        if self.peek() == ")":
            self.pos += 1
            return args
        while True:
            self.skip_space()
            args.append(self.argument(depth))
            self.skip_space()
            separator = self.peek()
            if separator not in (",", ")"):
                self.fail("expected ',' or ')' after an argument")
            self.pos += 1
            if separator == ")":
                return args

    def argument(self, depth: int) -> Any:
        first = self.peek()
        if first == "'":
            return self.string()
        if first == "$":
            return self.path()
        if self.text.startswith("States.", self.pos):
            return self.call(depth + 1)
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            literal = match.group()
            return _Literal(float(literal) if any(c in literal for c in ".eE") else int(literal))
        match = _KEYWORD.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return _Literal(_KEYWORDS[match.group()])
        self.fail("expected an argument: a 'string', a number, true, false, null, a path or an intrinsic function")

    def string(self) -> _Literal:
        """A single-quoted string with AWS's escapes: \\' \\{ \\} \\\\ (any other backslash is an error)."""
        self.pos += 1
        segments: list[str] = []
        chars: list[str] = []
        while True:
            if self.pos >= len(self.text):
                self.fail("unterminated string literal")
            char = self.text[self.pos]
            if char == "'":
                self.pos += 1
                segments.append("".join(chars))
                return _Literal("{}".join(segments), segments)
            if char == "\\":
                escaped = self.text[self.pos + 1 : self.pos + 2]
                if not escaped or escaped not in _ESCAPABLE:
                    self.fail("a backslash may only escape one of ' { } \\")
                chars.append(escaped)
                self.pos += 2
            elif self.text.startswith("{}", self.pos):
                segments.append("".join(chars))
                chars = []
                self.pos += 2
            else:
                chars.append(char)
                self.pos += 1

    def path(self) -> Path:
        """A JSONPath argument: it runs to the first ',', ')' or space outside brackets and quotes."""
        start, depth, quote = self.pos, 0, ""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if quote:
                if char == "\\":
                    self.pos += 1
                elif char == quote:
                    quote = ""
            elif char in "'\"" and depth:
                quote = char
            elif char in "[(":
                depth += 1
            elif char in "])":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (char == "," or char.isspace()):
                break
            self.pos += 1
        text = self.text[start : self.pos]
        try:
            return Path(_drop_dot_before_bracket(text))
        except PathSyntaxError as exc:
            self.pos = start
            self.fail(f"invalid path argument {text!r}: {exc}")


def _drop_dot_before_bracket(text: str) -> str:
    """AWS's documentation writes ``$.abc.['def ghi']``; the dot before a bracket means nothing, so drop it."""
    out, quote = [], ""
    for i, char in enumerate(text):
        if quote:
            if char == quote and text[i - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "." and text[i + 1 : i + 2] == "[":
            continue
        out.append(char)
    return "".join(out)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _check_call(call: _Call, parser: _Parser) -> None:
    """The checks that need no input: argument count, and States.Format's literal template."""
    low, high = _FUNCTIONS[call.name][:2]
    count = len(call.args)
    if count < low or (high is not None and count > high):
        if high is None:
            expected = f"at least {low}"
        else:
            expected = str(low) if low == high else f"{low} to {high}"
        plural = "" if expected.endswith(" 1") or expected == "1" else "s"
        parser.fail(f"{call.name} takes {expected} argument{plural}, but {count} given")
    if call.name == "States.Format" and isinstance(call.args[0], _Literal):
        template = call.args[0]
        if template.segments is None:
            parser.fail("the first argument of States.Format must be a string")
        placeholders = len(template.segments) - 1
        if placeholders != count - 1:
            parser.fail(f"States.Format has {_count(placeholders, 'placeholder')} {{}} "
                        f"but {_count(count - 1, 'value')} to put in them")
        call.template = template.segments


# -- evaluation


class _ArgumentError(Exception):
    """An argument of the wrong type or value; Intrinsic.evaluate turns it into States.IntrinsicFailure."""


class _Run:
    """One evaluation: the input, the context object, the source of seeded randomness and the budget."""

    __slots__ = ("budget", "context", "data", "draws", "seed", "text")

    def __init__(self, text: str, data: Any, context: Any, seed: bytes, budget: Budget) -> None:
        self.budget = budget
        self.text = text
        self.data = data
        self.context = context
        self.seed = bytes(seed)
        self.draws = 0

    def explain(self, detail: str) -> str:
        return f"The function '{self.text}' had the following error: {detail}"

    def random_bytes(self) -> bytes:
        """64 bytes that depend only on the seed and on how many draws this evaluation made before."""
        self.draws += 1
        digest = hashlib.blake2b(digest_size=64)
        digest.update(len(self.seed).to_bytes(8, "big") + self.seed)
        digest.update(self.draws.to_bytes(8, "big"))
        return digest.digest()


def _value(node: Any, run: _Run) -> Any:
    if isinstance(node, _Literal):
        return node.value
    if isinstance(node, Path):
        return _resolve(node, run)
    run.budget.spend()
    result = node.function(node, [_value(arg, run) for arg in node.args], run)
    if isinstance(result, str | list):
        run.budget.build(len(result))
    return result


def _resolve(path: Path, run: _Run) -> Any:
    try:
        return path.resolve(run.data, run.context)
    except BudgetExceeded:
        raise
    except StatesError:
        source = run.data
        if path.is_context:
            source = run.context() if callable(run.context) else run.context
        raise StatesError(RUNTIME, run.explain(f"The JsonPath argument for the field '{path.text}' could not be "
                                               f"found in the input '{dumps(source)}'")) from None


# -- argument checks


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _reject(call: _Call, index: int, expected: str, value: Any) -> NoReturn:
    raise _ArgumentError(f"{call.name} needs {expected} as its {_ORDINALS[index]} argument, not {_kind(value)}")


def _string(call: _Call, values: list[Any], index: int, max_chars: int | None = None) -> str:
    value = values[index]
    if not isinstance(value, str):
        _reject(call, index, "a string", value)
    if max_chars is not None and len(value) > max_chars:
        raise _ArgumentError(f"{call.name} accepts a string of at most {max_chars} characters, "
                             f"not {len(value)}")
    return value


def _array(call: _Call, values: list[Any], index: int) -> list[Any]:
    if not isinstance(values[index], list):
        _reject(call, index, "an array", values[index])
    return values[index]


def _object(call: _Call, values: list[Any], index: int) -> dict[str, Any]:
    if not isinstance(values[index], dict):
        _reject(call, index, "an object", values[index])
    return values[index]


def _rounded(call: _Call, values: list[Any], index: int) -> int:
    """An integer argument; AWS rounds other numbers to the nearest integer, halves upwards (Java's Math.round:
    2.5 -> 3, -2.5 -> -2)."""
    value = values[index]
    if isinstance(value, bool) or not isinstance(value, int | float):
        _reject(call, index, "an integer", value)
    if isinstance(value, int):
        return value
    floor = math.floor(value)
    return floor + 1 if value - floor >= 0.5 else floor


def _whole(call: _Call, values: list[Any], index: int) -> int:
    """An integer argument that is not rounded (an array index): 2 and 2.0 pass, 2.5 does not."""
    value = values[index]
    if isinstance(value, bool) or not isinstance(value, int | float) or value != math.floor(value):
        _reject(call, index, "an integer", value)
    return int(value)


def _identity(value: Any) -> Any:
    """A hashable key under which two JSON values are equal when AWS would call them equal: numbers by value
    (1 == 1.0), objects whatever their key order, and never true == 1."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(_identity(item) for item in value))
    if isinstance(value, dict):
        return ("o", frozenset((key, _identity(item)) for key, item in value.items()))
    return ("z",)


def _text(value: Any) -> str:
    """How States.Format writes a value: strings bare, objects and arrays as Java's Map and List print them
    (AWS writes {"Arg1": 1, "Arg2": []} as {Arg1=1, Arg2=[]}), everything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}={_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_text(item) for item in value) + "]"
    return dumps(value)


# -- the functions: each takes (call, argument values, run)


def _format(call: _Call, values: list[Any], run: _Run) -> str:
    segments = call.template
    if segments is None:  # a template read from the input: only {} is special, the data has no escapes
        segments = _string(call, values, 0).split("{}")
    if len(segments) != len(values):
        raise _ArgumentError(f"States.Format has {_count(len(segments) - 1, 'placeholder')} {{}} "
                             f"but {_count(len(values) - 1, 'value')} to put in them")
    parts = [segments[0]]
    for value, segment in zip(values[1:], segments[1:], strict=True):
        parts += [_text(value), segment]
    return "".join(parts)


def _string_to_json(call: _Call, values: list[Any], run: _Run) -> Any:
    text = _string(call, values, 0)
    if not text.strip():
        return None  # as AWS does for "" and " "
    try:
        return loads(text)
    except ValueError:
        raise _ArgumentError(f"States.StringToJson could not parse the string as JSON: {text[:200]!r}") from None


def _json_to_string(call: _Call, values: list[Any], run: _Run) -> str:
    return dumps(values[0])


def _array_of(call: _Call, values: list[Any], run: _Run) -> list[Any]:
    return values


def _array_partition(call: _Call, values: list[Any], run: _Run) -> list[list[Any]]:
    array = _array(call, values, 0)
    size = _rounded(call, values, 1)
    if size <= 0:
        raise _ArgumentError(f"States.ArrayPartition needs a chunk size greater than 0, not {size}")
    return [array[start : start + size] for start in range(0, len(array), size)]


def _array_contains(call: _Call, values: list[Any], run: _Run) -> bool:
    wanted = _identity(values[1])
    return any(_identity(item) == wanted for item in _array(call, values, 0))


def _array_range(call: _Call, values: list[Any], run: _Run) -> list[int]:
    first, last, step = (_rounded(call, values, i) for i in range(3))
    if step == 0:
        raise _ArgumentError("States.ArrayRange needs a step other than 0")
    numbers = range(first, last + 1 if step > 0 else last - 1, step)
    if len(numbers) > RANGE_ITEMS_MAX:
        raise _ArgumentError(f"States.ArrayRange can make at most {RANGE_ITEMS_MAX} items, "
                             f"not {len(numbers)}")
    return list(numbers)


def _array_get_item(call: _Call, values: list[Any], run: _Run) -> Any:
    array = _array(call, values, 0)
    index = _whole(call, values, 1)
    if not 0 <= index < len(array):
        raise _ArgumentError(f"States.ArrayGetItem: the index {index} is out of bounds for an array of "
                             f"{len(array)} items")
    return array[index]


def _array_length(call: _Call, values: list[Any], run: _Run) -> int:
    return len(_array(call, values, 0))


def _array_unique(call: _Call, values: list[Any], run: _Run) -> list[Any]:
    seen: set[Any] = set()
    unique = []
    for item in _array(call, values, 0):
        key = _identity(item)
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def _base64_encode(call: _Call, values: list[Any], run: _Run) -> str:
    return base64.b64encode(_string(call, values, 0, STRING_CHARS_MAX).encode()).decode("ascii")


def _base64_decode(call: _Call, values: list[Any], run: _Run) -> str:
    """As Java's MIME decoder does: characters outside the alphabet are skipped, '=' ends the data and the
    padding may be missing (AWS decodes 'RGF0YQ' to 'Data')."""
    body = _NOT_BASE64.sub("", _string(call, values, 0, STRING_CHARS_MAX)).partition("=")[0]
    if len(body) % 4 == 1:
        raise _ArgumentError("States.Base64Decode: the string is not valid Base64")
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise _ArgumentError("States.Base64Decode: the string is not valid Base64") from None
    return raw.decode("utf-8", errors="replace")


def _hash(call: _Call, values: list[Any], run: _Run) -> str:
    data = _string(call, values, 0, STRING_CHARS_MAX)
    algorithm = _string(call, values, 1)
    if algorithm not in HASH_ALGORITHMS:
        raise _ArgumentError(f"States.Hash does not know the algorithm {algorithm!r}; use one of "
                             f"{', '.join(HASH_ALGORITHMS)}")
    return hashlib.new(HASH_ALGORITHMS[algorithm], data.encode(), usedforsecurity=False).hexdigest()


def _json_merge(call: _Call, values: list[Any], run: _Run) -> dict[str, Any]:
    first, second = _object(call, values, 0), _object(call, values, 1)
    if values[2] is not False:
        if values[2] is True:
            raise _ArgumentError("States.JsonMerge supports the shallow mode only: its third argument must be false")
        _reject(call, 2, "the boolean false", values[2])
    return {**first, **second}


def _math_random(call: _Call, values: list[Any], run: _Run) -> int:
    start, end = _rounded(call, values, 0), _rounded(call, values, 1)
    if end <= start:
        raise _ArgumentError(f"States.MathRandom needs an end greater than its start, not {start} and {end}")
    if len(values) == 3:  # an explicit seed: the same seed and range give the same number, always
        seed = _rounded(call, values, 2)
        entropy = hashlib.blake2b(f"States.MathRandom {seed}".encode(), digest_size=64).digest()
    else:
        entropy = run.random_bytes()
    return start + int.from_bytes(entropy, "big") % (end - start)  # 512 bits: the modulo bias is nil


def _math_add(call: _Call, values: list[Any], run: _Run) -> int:
    total = 0
    for index in range(2):
        number = _rounded(call, values, index)
        if not INT32_MIN <= number <= INT32_MAX:
            raise _ArgumentError(f"States.MathAdd needs integers from {INT32_MIN} to {INT32_MAX}, not {number}")
        total += number
    return total


def _string_split(call: _Call, values: list[Any], run: _Run) -> list[str]:
    """Every character of the second argument is a delimiter and empty pieces are dropped, as on AWS:
    ('This.is+a,test=string', '.+,=') -> [This, is, a, test, string] and (',,,,', ',') -> []."""
    text, delimiters = _string(call, values, 0), _string(call, values, 1)
    if not delimiters:
        return [text] if text else []
    unified = text.translate({ord(char): delimiters[0] for char in delimiters})
    return [piece for piece in unified.split(delimiters[0]) if piece]


def _uuid(call: _Call, values: list[Any], run: _Run) -> str:
    raw = bytearray(run.random_bytes()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


# name -> (fewest arguments, most arguments or None for no limit, implementation)
_FUNCTIONS: dict[str, tuple[int, int | None, Callable[[_Call, list[Any], _Run], Any]]] = {
    "States.Format": (1, None, _format),
    "States.StringToJson": (1, 1, _string_to_json),
    "States.JsonToString": (1, 1, _json_to_string),
    "States.Array": (0, None, _array_of),
    "States.ArrayPartition": (2, 2, _array_partition),
    "States.ArrayContains": (2, 2, _array_contains),
    "States.ArrayRange": (3, 3, _array_range),
    "States.ArrayGetItem": (2, 2, _array_get_item),
    "States.ArrayLength": (1, 1, _array_length),
    "States.ArrayUnique": (1, 1, _array_unique),
    "States.Base64Encode": (1, 1, _base64_encode),
    "States.Base64Decode": (1, 1, _base64_decode),
    "States.Hash": (2, 2, _hash),
    "States.JsonMerge": (3, 3, _json_merge),
    "States.MathRandom": (2, 3, _math_random),
    "States.MathAdd": (2, 2, _math_add),
    "States.StringSplit": (2, 2, _string_split),
    "States.UUID": (0, 0, _uuid),
}
