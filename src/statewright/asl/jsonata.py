"""JSONata for states whose QueryLanguage is JSONata: any string ``{% expr %}`` in Arguments, Output, Assign,
Items, ItemSelector, Condition, ... is an expression; everything else is a literal.

``compile_value`` compiles such a JSON value once per definition (a syntax error, or a reference AWS refuses,
such as a bare field name at the top level, raises JsonataSyntaxError). ``CompiledValue.evaluate`` builds a
fresh value from ``$states`` and the workflow variables; any failure is ``States.QueryEvaluationError`` with a
cause phrased as AWS phrases it ("The JSONata expression '...' specified for the field '...' returned nothing
(undefined)."). AWS's added functions are here: $partition, $range, $hash, $random, $uuid and $parse; $eval
is switched off, as on AWS.

Library: jsonata-python (pure Python, no dependencies, Apache-2.0), a port of the reference jsonata-js and of the
Java port, the lineage emulators validated against AWS run; it keeps null apart from undefined and big integers
exact. jsonatapy (Rust) measured 10-40x faster but returns null where an expression returns nothing, lacks
$random and still diverges from the reference, so it cannot report AWS's "returned nothing (undefined)".

Bounds: every evaluation step, every range (counted before it is built) and every long string or array drawn
from the transition step's evaluation budget (asl/budget.py: steps, wall time, items), and recursion at most
CALL_DEPTH_MAX deep per expression; past them the expression fails with States.QueryEvaluationError. $pad's width is
checked before the padding is made, and $formatNumber's separators must be single characters, as XPath has
them (the library puts them into regular expressions unescaped).

Invariant: evaluation is a pure function of (value, variables, $states, seed, now_ms). $random() and $uuid()
without a seed draw from ``seed`` hashed with the field's location and a per-expression counter; $shuffle is
drawn the same way; $now() and $millis() read ``now_ms``. Steps and items are counted, not timed, so a replay
fails (or not) exactly as the first run did; only the budget's optional wall-time bound is not. This module must
not import a clock, random numbers, uuid, os or threads, nor anything from the engine or the store (the library
itself imports some).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any, NoReturn

from jsonata import Jsonata
from jsonata.functions import Functions
from jsonata.jexception import JException
from jsonata.parser import Parser
from jsonata.signature import Signature
from jsonata.utils import Utils

from .budget import Budget, BudgetExceeded, active
from .errors import StatesError
from .nodes import ArrayNode, ObjectNode
from .regex import RegexError, compile_regex, install_picture_engine

QUERY_EVALUATION_ERROR = "States.QueryEvaluationError"
INVALID_EXPRESSION = "INVALID_JSONATA_EXPRESSION"  # AWS's validation code for a syntax error
UNSUPPORTED_EXPRESSION = "UNSUPPORTED_JSONATA_EXPRESSION"  # AWS's code for a reference it refuses
HASH_ALGORITHMS = {"MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}
CALL_DEPTH_MAX = 500  # nested evaluations of one expression; a deeper recursion is a stack overflow
LONG_VALUE_ITEMS = 4_096  # a string or array at least this long is checked against the budget's items
RANGE_ITEMS_MAX = 360_145  # $range; AWS was reported to refuse one item more (its memory limit)
EXACT_FLOAT_MAX = 2**53  # an integral float up to this is written as an integer
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1  # integers stay exact within Java's long, as on AWS

_PLACEHOLDER = re.compile(r"\{\{\{(\w+)\}\}\}|\{\{(\w+)\}\}")

install_picture_engine()  # $toMillis's picture patterns on RE2 too (asl/regex.py)


class JsonataSyntaxError(ValueError):
    """An expression AWS would refuse when the state machine is created. ``code`` is AWS's diagnostic code
    (INVALID_JSONATA_EXPRESSION or UNSUPPORTED_JSONATA_EXPRESSION), ``location`` where in the value it is
    (for example ``Arguments/a[0]``)."""

    def __init__(self, message: str, code: str = INVALID_EXPRESSION, location: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.location = location


def is_expression(value: Any) -> bool:
    """True for a string written ``{% ... %}``: it must start with ``{%`` and end with ``%}``, nothing around."""
    return isinstance(value, str) and len(value) >= 4 and value.startswith("{%") and value.endswith("%}")


def json_type(value: Any) -> str:
    """A JSON value's type as JSONata and AWS's causes name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def compile_value(raw: Any, field: str = "") -> CompiledValue:
    """Compile every ``{% %}`` string in ``raw`` (recursively in objects and arrays) once. ``field`` names the
    value in causes, as AWS does (``Output``, ``Arguments``, ``Choices[1]/Condition``).

    Raises JsonataSyntaxError for an expression that does not parse or that reads the missing context item."""
    return CompiledValue(_compile(raw, field), raw)


class CompiledValue:
    """A JSON value whose ``{% %}`` strings are compiled JSONata expressions; ``raw`` is the value as written."""

    __slots__ = ("_node", "raw")

    def __init__(self, node: Any, raw: Any) -> None:
        self._node = node
        self.raw = raw

    @property
    def is_literal(self) -> bool:
        """True when the value holds no expression at all."""
        return not _has_expression(self._node)

    def evaluate(self, variables: dict[str, Any], states: dict[str, Any], seed: bytes = b"",
                 *, now_ms: int | None = None, budget: Budget | None = None) -> Any:
        """The value for this evaluation: literals as written, each expression's result in its place.

        ``variables`` are the workflow variables, bound as ``$name`` (names without the ``$``); ``states`` is
        ``$states`` (input, result, errorOutput, context: whichever apply); ``seed`` feeds $random(), $uuid()
        and $shuffle; ``now_ms`` is what $now() and $millis() answer (without it they fail). The result is
        made of plain JSON values only and shares nothing with the inputs. Steps and items draw on ``budget``
        (by default the transition step's, asl/budget.py).

        Raises StatesError(States.QueryEvaluationError) when an expression fails, returns nothing or runs out
        of budget."""
        run = _Run(bytes(seed), now_ms, active() if budget is None else budget)
        bindings = _bindings(variables, states, run)
        return _evaluate(self._node, bindings, run)

    def unexpected_type(self, field: str, value: Any, expected: str) -> str:
        """AWS's cause for a field whose value evaluated to the wrong JSON type (recorded for a Map's Items)."""
        text = self.raw[2:-2].strip() if is_expression(self.raw) else json.dumps(self.raw, separators=(",", ":"))
        return (f"The JSONata expression '{text}' specified for the field '{field}' returned an unexpected result "
                f"type. Expected '{expected}', but was '{json_type(value)}' for value: "
                f"{json.dumps(value, separators=(',', ':'), ensure_ascii=False)}")

    def __repr__(self) -> str:
        return f"CompiledValue({_describe_node(self._node)})"


# -- the compiled tree


class _Expression:
    __slots__ = ("compiled", "inner", "location", "text")

    def __init__(self, text: str, compiled: Jsonata, location: str, inner: str) -> None:
        self.text = text
        self.compiled = compiled
        self.location = location
        self.inner = inner  # where in its field's template the expression sits ("/result", "[0]"), "" at the top

    def fail(self, detail: str) -> NoReturn:
        """States.QueryEvaluationError; ``inner`` goes with it, since AWS's EvaluationFailed event names the field
        down to the template member that failed (``Assign/result``, ``Output/result``)."""
        where = f" specified for the field '{self.location}'" if self.location else ""
        failure = StatesError(QUERY_EVALUATION_ERROR, f"The JSONata expression '{self.text}'{where} {detail}")
        failure.inner = self.inner
        raise failure from None


def _compile(raw: Any, location: str, inner: str = "") -> Any:
    if isinstance(raw, dict):
        return ObjectNode([(key, _compile(value, f"{location}/{key}" if location else key, f"{inner}/{key}"))
                           for key, value in raw.items()])
    if isinstance(raw, list):
        return ArrayNode([_compile(item, f"{location}[{index}]", f"{inner}[{index}]")
                          for index, item in enumerate(raw)])
    if is_expression(raw):
        text = raw[2:-2].strip()
        return _Expression(text, _parse(text, location), location, inner)
    return raw


def _parse(text: str, location: str) -> Jsonata:
    where = f" at {location}" if location else ""
    if not text:
        raise JsonataSyntaxError(f"the JSONata expression{where} is empty", INVALID_EXPRESSION, location)
    try:
        compiled = Jsonata(text, compile_regex)
    except RegexError as exc:
        raise JsonataSyntaxError(f"the JSONata expression '{text}'{where} is not valid: {exc}", INVALID_EXPRESSION,
                                 location) from None
    except JException as exc:
        raise JsonataSyntaxError(f"the JSONata expression '{text}'{where} is not valid: {_explain(exc)} "
                                 f"(at character {exc.location})", INVALID_EXPRESSION, location) from None
    except (ValueError, TypeError, IndexError, AttributeError, RecursionError) as exc:  # the parser's own bugs
        raise JsonataSyntaxError(f"the JSONata expression '{text}'{where} is not valid: {exc}",
                                 INVALID_EXPRESSION, location) from None
    compiled.set_output_convert_nulls(False)  # so null (Utils.NULL_VALUE) stays apart from undefined (None)
    refused = _top_level_reference(compiled.ast, top=True)
    if refused is not None:
        detail = "is not supported" if refused == "$$" else "at the top level is not supported"
        raise JsonataSyntaxError(f"Reference to '{refused}' {detail}{where} (read the state input as "
                                 f"$states.input and a variable as $name)", UNSUPPORTED_EXPRESSION, location)
    return compiled


def _top_level_reference(node: Any, top: bool) -> str | None:
    """A field name, ``$`` or ``$$`` read against the top-level context, which AWS leaves empty and refuses
    ("Reference to 'phone' at the top level is not supported"); ``$$`` is refused anywhere. Only the first
    step of a path reads the context it is in; later steps, predicates, sort terms, group-bys and transforms
    read relative data. A lambda body keeps the context it was written in."""
    if not isinstance(node, Parser.Symbol):
        return None
    kind = getattr(node, "type", None)
    if kind == "variable" and node.value == "$":
        return "$$"
    found = None
    if top and kind == "name":
        found = str(node.value)
    elif top and kind == "variable" and node.value == "":
        found = "$"
    children: list[tuple[Any, bool]] = []
    if kind == "path":
        steps = node.steps or []
        children += [(step, top and index == 0) for index, step in enumerate(steps)]
        if getattr(node, "group", None) is not None:
            children += [(part, False) for pair in node.group.lhs_object for part in pair]
    elif kind == "unary":
        children += [(item, top) for item in getattr(node, "expressions", None) or []]
        children += [(part, top) for pair in getattr(node, "lhs_object", None) or [] for part in pair]
        children.append((getattr(node, "expression", None), top))
    elif kind in ("binary", "bind", "apply"):
        children += [(node.lhs, top), (node.rhs, top)]
    elif kind in ("function", "partial"):
        children += [(node.procedure, top), *((argument, top) for argument in node.arguments or [])]
    elif kind == "lambda":
        children.append((node.body, top))
    elif kind == "condition":
        children += [(node.condition, top), (node.then, top), (getattr(node, "_else", None), top)]
    elif kind == "block":
        children += [(expression, top) for expression in node.expressions or []]
    elif kind == "transform":
        children += [(node.pattern, False), (node.update, False), (getattr(node, "delete", None), False)]
    elif kind == "sort":
        children += [(term.expression, False) for term in getattr(node, "terms", None) or []]
    for stage in (getattr(node, "stages", None) or []) + (getattr(node, "predicate", None) or []):
        children.append((getattr(stage, "expr", None), False))
    for child, child_top in children:
        inner = _top_level_reference(child, child_top)
        if inner == "$$" or (inner is not None and found is None):
            found = inner
    return found


def _has_expression(node: Any) -> bool:
    if isinstance(node, _Expression):
        return True
    if isinstance(node, ObjectNode):
        return any(_has_expression(value) for _, value in node.fields)
    if isinstance(node, ArrayNode):
        return any(_has_expression(item) for item in node.items)
    return False


def _describe_node(node: Any) -> str:
    if isinstance(node, _Expression):
        return f"'{{% {node.text} %}}'"
    if isinstance(node, ObjectNode):
        return "{" + ", ".join(f"{key!r}: {_describe_node(value)}" for key, value in node.fields) + "}"
    if isinstance(node, ArrayNode):
        return "[" + ", ".join(_describe_node(item) for item in node.items) + "]"
    return repr(node)


# -- evaluation


class _Run:
    """One CompiledValue.evaluate: the seed, the clock value, the budget, and the depth of the expression run."""

    __slots__ = ("budget", "depth", "draws", "expression_seed", "now_ms", "seed")

    def __init__(self, seed: bytes, now_ms: int | None, budget: Budget) -> None:
        self.seed = seed
        self.now_ms = now_ms
        self.budget = budget
        self.expression_seed = seed
        self.draws = 0
        self.depth = 0

    def start(self, node: _Expression) -> None:
        # Length-prefixed, so (seed, location) pairs never collide; each field draws its own sequence.
        location = node.location.encode()
        self.expression_seed = hashlib.blake2b(len(self.seed).to_bytes(8, "big") + self.seed + location,
                                               digest_size=32).digest()
        self.draws = 0
        self.depth = 0

    def random_bytes(self) -> bytes:
        """32 bytes that depend only on the seed, the field and how many draws this expression made before."""
        self.draws += 1
        return hashlib.blake2b(self.expression_seed + self.draws.to_bytes(8, "big"), digest_size=32).digest()

    def random_fraction(self) -> float:
        """A float in [0, 1) with 53 random bits, as Math.random and java.util.Random give."""
        return (int.from_bytes(self.random_bytes()[:8], "big") >> 11) / EXACT_FLOAT_MAX


class _BoundExceeded(JException):
    """An expression ran past CALL_DEPTH_MAX or the budget. A JException, so the library passes it through as is."""

    def __init__(self, message: str) -> None:
        RuntimeError.__init__(self, message)
        self.error = "D1012"
        self.location = -1
        self.current = self.expected = self.extra = None
        self.type = None
        self.remaining = None


def _evaluate(node: Any, bindings: dict[str, Any], run: _Run) -> Any:
    if isinstance(node, _Expression):
        return _evaluate_expression(node, bindings, run)
    if isinstance(node, ObjectNode):
        return {key: _evaluate(value, bindings, run) for key, value in node.fields}
    if isinstance(node, ArrayNode):
        return [_evaluate(item, bindings, run) for item in node.items]
    return node  # a string, number, boolean or null: immutable


def _evaluate_expression(node: _Expression, bindings: dict[str, Any], run: _Run) -> Any:
    run.start(node)
    # The library keeps "the expression being evaluated" per thread, set when an expression is constructed, and
    # reads it from inside $map, $sort and friends; point it at this one, as if it had just been constructed.
    Jsonata.CURRENT.jsonata = node.compiled
    try:
        result = node.compiled.evaluate(None, bindings)
    except (_BoundExceeded, RegexError) as exc:
        node.fail(f"threw an error during evaluation. {exc}")
    except JException as exc:
        node.fail(f"threw an error during evaluation. {exc.error}: {_explain(exc)}")
    except RecursionError:
        node.fail("threw an error during evaluation. D1011: Stack overflow error: Check for non-terminating "
                  "recursive function. Consider rewriting as tail-recursive.")
    except ZeroDivisionError:
        node.fail("threw an error during evaluation. D1001: Number out of range: division by zero")
    except (ArithmeticError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        node.fail(f"threw an error during evaluation. {type(exc).__name__}: {exc}")
    if result is None:
        node.fail("returned nothing (undefined).")
    return _plain(result, node)


def _plain(value: Any, node: _Expression) -> Any:
    """A JSONata result as plain JSON values: null marker to None, sequences to lists, integral floats to ints
    (AWS writes 2, not 2.0). A function or a non-finite number cannot be JSON."""
    if value is None or value is Utils.NULL_VALUE:
        return None
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):  # exact within Java's long, a double beyond it: AWS's number model
        return int(value) if LONG_MIN <= value <= LONG_MAX else float(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            node.fail(f"threw an error during evaluation. D1001: Number out of range: {_js_number(value)}")
        if value.is_integer() and abs(value) <= EXACT_FLOAT_MAX:
            return int(value)
        return value
    if isinstance(value, list):
        return [_plain(item, node) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item, node) for key, item in value.items()}
    node.fail("returned a function, which is not a JSON value.")


def _js_number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _explain(exc: JException) -> str:
    """The reference implementation's message for a JSONata error. The Python port's catalogue says "Object"
    where jsonata-js says "function" and leaves out the quotes jsonata-js puts around inserted values."""
    template = JException.error_codes.get(exc.error)
    if template is None:
        return str(exc)
    values = iter((exc.current, exc.expected, exc.extra))

    def insert(match: re.Match[str]) -> str:
        value = next(values, None)
        if match.group(1) is not None:  # {{{name}}}: the value as it is
            return "undefined" if value is None else str(value)
        return _js_json(value)

    return _PLACEHOLDER.sub(insert, template.replace("Object", "function"))


def _js_json(value: Any) -> str:
    """What JSON.stringify writes for an inserted value, as jsonata-js's messages show it."""
    if value is None:
        return "undefined"
    if value is Utils.NULL_VALUE:
        return "null"
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return json.dumps(str(value), ensure_ascii=False)


# -- bindings: $states, the workflow variables, AWS's functions and the bounds


def _bindings(variables: dict[str, Any], states: dict[str, Any], run: _Run) -> dict[str, Any]:
    bindings: dict[str, Any] = {name: _Function(name, signature, implementation, run)
                                for name, (signature, implementation) in _FUNCTIONS.items()}
    bindings["eval"] = None  # AWS: "$eval is not available"; calling it is T1006, as calling any non-function
    for name, value in variables.items():
        bindings[name] = Utils.NULL_VALUE if value is None else value  # a bare None would read as undefined
    bindings["states"] = states
    bindings["__evaluate_entry"] = lambda expr, data, env: _enter(run, env)
    bindings["__evaluate_exit"] = lambda expr, data, env, result: _leave(run, env, result)
    return bindings


def _enter(run: _Run, environment: Any) -> None:
    if environment.is_parallel_call:
        return
    run.depth += 1
    if run.depth > CALL_DEPTH_MAX:
        raise _BoundExceeded(f"D1011: Stack overflow error: Check for non-terminating recursive function. "
                             f"Consider rewriting as tail-recursive. Depth={run.depth} max={CALL_DEPTH_MAX}")
    try:
        run.budget.spend()
    except BudgetExceeded as exc:
        raise _BoundExceeded(exc.detail) from None


def _leave(run: _Run, environment: Any, result: Any) -> None:
    if not environment.is_parallel_call:
        run.depth -= 1
    # A range is lazy until an array is built from it (by the caller, after this hook): count its items first.
    try:
        if type(result) is Utils.RangeList:
            run.budget.build(result.b - result.a)
        elif isinstance(result, str | list) and len(result) >= LONG_VALUE_ITEMS:
            run.budget.check_size(len(result))
    except BudgetExceeded as exc:
        raise _BoundExceeded(exc.detail) from None


class _Function(Jsonata.JFunction):
    """A function bound into the expression: the library checks the signature (the arity, and turning a lone
    value into an array for an ``a`` parameter), then calls ``implementation(run, name, args)``."""

    def __init__(self, name: str, signature: Signature, implementation: Callable[..., Any], run: _Run) -> None:
        # Not JFunction.__init__: that would parse the signature again on every evaluation.
        self.function = None
        self.signature = signature
        self.function_name = name
        self._implementation = implementation
        self._run = run

    def validate(self, args: Any, context: Any) -> Any:
        # The library's check names the first argument when there are too many; jsonata-js names the extra one.
        allowed = self.signature.get_number_of_args()
        if isinstance(args, list) and len(args) > allowed:
            _mismatch(self.function_name, allowed)
        try:
            return self.signature.validate(args, context)
        except JException as exc:
            if exc.error != "T0410":
                raise
            _mismatch(self.function_name, self._first_mismatch(args))

    def _first_mismatch(self, args: list[Any]) -> int:
        """The index of the first argument the signature rejects. The library anchors each partial pattern at
        both ends, so it always blames the first argument; jsonata-js matches a prefix, as here."""
        supplied = "".join(self.signature.get_symbol(arg) for arg in args)
        pattern, matched = "^", 0
        for param in self.signature._params:  # the parsed parameters; the library offers no public accessor
            pattern += param.regex
            prefix = re.match(pattern, supplied)
            if prefix is None:
                return matched
            matched = prefix.end()
        return matched

    def call(self, input: Any, args: Any) -> Any:
        return self._implementation(self._run, self.function_name, list(args or []))

    def get_number_of_args(self) -> int:
        return self.signature.get_number_of_args()


def _argument(args: list[Any], index: int) -> Any:
    """An argument, None when it was left out or is undefined, Utils.NULL_VALUE for null."""
    return args[index] if index < len(args) else None


def _mismatch(name: str, index: int) -> NoReturn:
    raise JException("T0410", -1, index + 1, name)


def _fail(message: str) -> NoReturn:
    """An error of AWS's functions; AWS raises them as $error does, under D3137."""
    raise JException("D3137", -1, message)


def _number(args: list[Any], index: int, name: str) -> float | None:
    value = _argument(args, index)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        _mismatch(name, index)
    return value


def _truncated(value: float) -> int:
    """AWS rounds a non-integer argument towards zero (-1.7 -> -1), as Java's (long) cast does."""
    if isinstance(value, int):
        return value
    if math.isnan(value):
        return 0
    return max(LONG_MIN, min(LONG_MAX, math.trunc(value))) if math.isfinite(value) else (
        LONG_MAX if value > 0 else LONG_MIN)


def _partition(run: _Run, name: str, args: list[Any]) -> Any:
    """$partition(array, chunkSize): the array cut into chunks of chunkSize, the last one holding the rest.
    Reported AWS edges: an empty array or a chunk size of 0 give undefined; no chunk size, one chunk."""
    array = _argument(args, 0)
    if array is None:
        return None
    if not isinstance(array, list):
        _mismatch(name, 0)
    size = _number(args, 1, name)
    if not array:
        return None
    if size is None:
        return [list(array)]
    chunk = _truncated(size)
    if chunk == 0:
        return None
    if chunk < 0:
        _fail("Second argument must be zero or greater")
    return [list(array[start : start + chunk]) for start in range(0, len(array), chunk)]


def _range(run: _Run, name: str, args: list[Any]) -> Any:
    """$range(start, end, step): start, start+step, ... up to end inclusive. Arguments are truncated towards
    zero; no step, a step of 0 or one pointing away from end gives undefined; a single item is returned bare,
    as a JSONata sequence of one is."""
    numbers = [_number(args, index, name) for index in range(3)]
    if any(number is None for number in numbers):
        return None
    start, end, step = (_truncated(number) for number in numbers)
    if step == 0 or (step > 0 and start > end) or (step < 0 and start < end):
        return None
    count = abs(end - start) // abs(step) + 1
    if count > RANGE_ITEMS_MAX:
        _fail(f"Expression evaluation memory limit exceeded: $range would make {count} items, "
              f"more than {RANGE_ITEMS_MAX}")
    if count == 1:
        return start
    return list(range(start, start + count * step, step))


def _hash(run: _Run, name: str, args: list[Any]) -> Any:
    """$hash(data, algorithm): the hex digest of the UTF-8 bytes of data. The algorithm's name is case-sensitive;
    without one, undefined."""
    data, algorithm = _argument(args, 0), _argument(args, 1)
    if data is not None and not isinstance(data, str):
        _mismatch(name, 0)
    if algorithm is not None and not isinstance(algorithm, str):
        _mismatch(name, 1)
    if data is None or algorithm is None:
        return None
    if algorithm not in HASH_ALGORITHMS:
        _fail(f"Unsupported hash algorithm '{algorithm}'. Supported algorithms: {', '.join(HASH_ALGORITHMS)}")
    return hashlib.new(HASH_ALGORITHMS[algorithm], data.encode(), usedforsecurity=False).hexdigest()


def _random(run: _Run, name: str, args: list[Any]) -> float:
    """$random([seed]): a number in [0, 1). With a seed, the first nextDouble() of java.util.Random seeded with
    it (truncated towards zero), which is what AWS answers; without one, drawn from this evaluation's seed."""
    seed = _number(args, 0, name)
    if seed is None:
        return run.random_fraction()
    return _java_random_double(_truncated(seed))


def _java_random_double(seed: int) -> float:
    """java.util.Random(seed).nextDouble(): a 48-bit linear congruential generator, two draws of 26 and 27 bits."""
    multiplier, mask = 0x5DEECE66D, (1 << 48) - 1
    state = (seed ^ multiplier) & mask
    state = (state * multiplier + 0xB) & mask
    high = state >> (48 - 26)
    state = (state * multiplier + 0xB) & mask
    low = state >> (48 - 27)
    return ((high << 27) + low) / EXACT_FLOAT_MAX


def _uuid(run: _Run, name: str, args: list[Any]) -> str:
    """$uuid(): a version 4 UUID, drawn from this evaluation's seed."""
    raw = bytearray(run.random_bytes()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _parse_json(run: _Run, name: str, args: list[Any]) -> Any:
    """$parse(jsonString): the JSON value the string holds (AWS's replacement for $eval). Strict: no trailing
    text, no repeated key, no NaN or Infinity; integers beyond Java's long become doubles, as on AWS."""
    text = _argument(args, 0)
    if text is None:
        return None
    if not isinstance(text, str):
        _mismatch(name, 0)
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_json_integer,
                           parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        _fail(f"Invalid JSON: {exc}")
    if _has_infinity(value):
        _fail("Invalid JSON: a number is too large")
    return Utils.NULL_VALUE if value is None else value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise ValueError(f"duplicate key {key!r}")
        value[key] = item
    return value


def _json_integer(text: str) -> int | float:
    number = int(text)
    return number if LONG_MIN <= number <= LONG_MAX else float(number)


def _no_constant(text: str) -> NoReturn:
    raise ValueError(f"{text} is not JSON")


def _has_infinity(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_has_infinity(item) for item in value)
    if isinstance(value, dict):
        return any(_has_infinity(item) for item in value.values())
    return False


def _shuffle(run: _Run, name: str, args: list[Any]) -> Any:
    """$shuffle(array): JSONata's, with the permutation drawn from this evaluation's seed (Fisher-Yates)."""
    array = _argument(args, 0)
    if array is None:
        return None
    items = list(array)
    for index in range(len(items) - 1, 0, -1):
        other = int.from_bytes(run.random_bytes()[:8], "big") % (index + 1)  # 64 bits: no visible bias
        items[index], items[other] = items[other], items[index]
    return items


def _pad(run: _Run, name: str, args: list[Any]) -> Any:
    """$pad(string, width [, char]): JSONata's, with the padded width counted against the budget before the
    padding is made (``$pad('', 1e9)`` would otherwise allocate a gigabyte in one step)."""
    width = _argument(args, 1)
    if isinstance(width, int | float) and not isinstance(width, bool) and math.isfinite(width):
        try:
            run.budget.build(abs(int(width)))
        except BudgetExceeded as exc:
            raise _BoundExceeded(exc.detail) from None
    return Functions.pad(_argument(args, 0), width, _argument(args, 2))


def _format_number(run: _Run, name: str, args: list[Any]) -> Any:
    """$formatNumber(number, picture [, options]): JSONata's, once each separator and sign of ``options`` is a
    single character, as XPath's decimal format has them: the library builds regular expressions from them."""
    options = _argument(args, 2)
    if isinstance(options, dict):
        for key in _SINGLE_CHARACTER_OPTIONS:
            value = options.get(key)
            if value is None:
                continue
            if not (isinstance(value, str) and len(value) == 1):
                _fail(f"The option '{key}' of $formatNumber must be a single character")
            # The library escapes most of them with a backslash inside a character class, but the exponent
            # separator not at all.
            if value == "\\" or (key == "exponent-separator" and value in _REGEX_SYMBOLS):
                _fail(f"The option '{key}' of $formatNumber cannot be '{value}'")
    return Functions.format_number(_argument(args, 0), _argument(args, 1), options)


_SINGLE_CHARACTER_OPTIONS = ("decimal-separator", "grouping-separator", "exponent-separator", "percent",
                             "per-mille", "zero-digit", "digit", "pattern-separator", "minus-sign")
_REGEX_SYMBOLS = frozenset(".^$*+?{}[]|()\\")


def _now(run: _Run, name: str, args: list[Any]) -> Any:
    """$now([picture [, timezone]]): the evaluation's time as an ISO 8601 timestamp (or as the picture says)."""
    picture, timezone = _argument(args, 0), _argument(args, 1)
    return Functions.datetime_from_millis(_clock(run, name), picture, timezone)


def _millis(run: _Run, name: str, args: list[Any]) -> int:
    """$millis(): the evaluation's time in milliseconds since the epoch."""
    return _clock(run, name)


def _clock(run: _Run, name: str) -> int:
    if run.now_ms is None:
        _fail(f"${name}() needs the current time, and this evaluation was given none")
    return run.now_ms


_SIGNATURES = {
    "partition": "<an?:a>",
    "range": "<nnn?:a>",
    "hash": "<ss?:s>",
    "random": "<n?:n>",
    "uuid": "<:s>",
    "parse": "<s?:j>",
    "shuffle": "<a:a>",
    "now": "<s?s?:s>",
    "millis": "<:n>",
    "pad": "<s-ns?:s>",
    "formatNumber": "<n-so?:s>",
}
_IMPLEMENTATIONS: dict[str, Callable[[_Run, str, list[Any]], Any]] = {
    "partition": _partition,
    "range": _range,
    "hash": _hash,
    "random": _random,
    "uuid": _uuid,
    "parse": _parse_json,
    "shuffle": _shuffle,
    "now": _now,
    "millis": _millis,
    "pad": _pad,
    "formatNumber": _format_number,
}
# name -> (signature parsed once, implementation)
_FUNCTIONS = {name: (Signature(signature, name), _IMPLEMENTATIONS[name]) for name, signature in _SIGNATURES.items()}
