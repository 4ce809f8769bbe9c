"""JSONPath as AWS Step Functions evaluates it, compiled once per definition.

Plain paths such as ``$.a.b[0]`` or ``$['a b']`` (the common case) are parsed here into a list of steps and
walked directly. Paths with wildcards, slices, recursive descent or filters go to jsonpath-ng and yield a list, as
they do on AWS. A path that starts with ``$$`` reads the context object instead of the state's data.

Quoted keys: a backslash keeps the next character from ending the key but stays in the key, so ``$['Test\\"Name']``
names the key ``Test\\"Name``. This is how Jayway JsonPath (whose wording AWS's path errors carry) read keys before
its 2.5 release; inferred from AWS parsing such a key differently from an unescaping reader, not seen recorded.

Regular expressions: a filter's ``=~`` runs on RE2 (linear in the text), through the one hook jsonpath-ng offers,
its operator table (``jsonpath_ng.ext.filter.OPERATOR_MAP["=~"]``), replaced when this module is imported; a
pattern RE2 cannot run is refused when the path is compiled. jsonpath-ng's own ```sub(/regex/, repl)``` extension,
which AWS does not have, would run a backtracking regex and is refused. What such a path selects counts against
the transition step's evaluation budget (asl/budget.py), one step per value selected: past it, States.Runtime.
"""

from __future__ import annotations

import re
from typing import Any

from jsonpath_ng import JSONPath
from jsonpath_ng.exceptions import JsonPathParserError
from jsonpath_ng.ext import filter as jsonpath_filter
from jsonpath_ng.ext import parse as parse_extended
from jsonpath_ng.ext.string import Sub

from .budget import active
from .errors import RUNTIME, StatesError
from .regex import compile_filter_regex

_NAME = re.compile(r"\.([^.\[\]]+)")
_QUOTED = re.compile(r"\[\s*(?:'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\")\s*\]")
_INDEX = re.compile(r"\[\s*(-?\d+)\s*\]")
_INDEFINITE = re.compile(r"\*|\?\(|:|,")
_VARIABLE = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)")

Step = str | int

jsonpath_filter.OPERATOR_MAP["=~"] = lambda value, pattern: (
    isinstance(value, str) and compile_filter_regex(pattern).search(value) is not None)


class PathSyntaxError(ValueError):
    """The text is not a JSONPath that AWS accepts."""


class PathNotFound(StatesError):
    """A definite path selects nothing in its data: fields that read a path (SecondsPath, ErrorPath, ...) name
    that failure in their own words."""


def _parse_definite(text: str) -> list[Step] | None:
    """Steps of a definite path, or None when the path needs the general evaluator."""
    if not text.startswith("$"):
        raise PathSyntaxError(f"a path must start with '$': {text!r}")
    steps: list[Step] = []
    pos = 1
    while pos < len(text):
        for pattern in (_NAME, _QUOTED, _INDEX):
            match = pattern.match(text, pos)
            if match:
                break
        else:
            return None
        if pattern is _INDEX:
            steps.append(int(match.group(1)))
        elif pattern is _QUOTED:
            steps.append(match.group(1) if match.group(1) is not None else match.group(2))
        elif _INDEFINITE.search(match.group(1)):
            return None  # a bare name with a wildcard or filter in it: the general evaluator's job
        else:
            steps.append(match.group(1))
        pos = match.end()
    return steps


def _normalized(steps: list[Step]) -> str:
    return "$" + "".join(f"[{s}]" if isinstance(s, int) else f"['{s}']" for s in steps)


def _backtracking_regex(node: Any) -> str | None:
    """Why ``node`` (a parsed jsonpath-ng expression) holds a regular expression that would not run on RE2, if so."""
    if isinstance(node, Sub):
        return "`sub` is not supported"
    if isinstance(node, jsonpath_filter.Expression) and node.op == "=~":
        if not isinstance(node.value, str):
            return "'=~' needs a string pattern"
        try:
            compile_filter_regex(node.value)
        except ValueError as exc:
            return str(exc)
    for value in getattr(node, "__dict__", {}).values():
        for item in value if isinstance(value, list | tuple) else (value,):
            reason = _backtracking_regex(item) if isinstance(item, JSONPath) else None
            if reason:
                return reason
    return None


class Path:
    """A compiled JSONPath. ``resolve`` returns the value it selects or raises States.Runtime.

    ``$$...`` reads the context object and ``$name...`` the variable ``name``; plain ``$...`` reads the data.
    """

    __slots__ = ("_expr", "_steps", "is_context", "text", "variable")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise PathSyntaxError(f"a path must be a string, not {type(text).__name__}")
        self.text = text
        self.is_context = text.startswith("$$")
        variable = _VARIABLE.match(text)
        self.variable = variable.group(1) if variable else None
        if self.is_context:
            body = text[1:]
        elif self.variable is not None:
            body = "$" + text[variable.end():]
        else:
            body = text
        self._steps = _parse_definite(body)
        self._expr = None
        if self._steps is None:
            try:
                self._expr = parse_extended(body)
            except (JsonPathParserError, Exception) as exc:  # jsonpath-ng raises several types
                raise PathSyntaxError(f"invalid JSONPath {text!r}: {exc}") from None
            refused = _backtracking_regex(self._expr)
            if refused:
                raise PathSyntaxError(f"invalid JSONPath {text!r}: {refused}")

    @property
    def is_definite(self) -> bool:
        return self._steps is not None

    @property
    def steps(self) -> list[Step]:
        if self._steps is None:
            raise PathSyntaxError(f"{self.text!r} is not a definite path")
        return self._steps

    def resolve(self, data: Any, context: Any = None) -> Any:
        """Select from ``data``, the context object or a variable.

        ``context`` is the context object, or a zero-argument callable that builds it (so states that never read
        it never pay for it) and may carry the visible variables as a ``variables`` mapping (asl.scope.Scope).
        """
        if self.is_context:
            value = context() if callable(context) else context
        elif self.variable is not None:
            variables = getattr(context, "variables", None) or {}
            if self.variable not in variables:
                raise StatesError(RUNTIME, f"Invalid path '{self.text}': The variable '${self.variable}' is not "
                                  "defined")
            value = variables[self.variable]
        else:
            value = data
        if self._steps is None:
            found = [match.value for match in self._expr.find(value)]
            active().spend(len(found) + 1)
            return found
        for step in self._steps:
            if isinstance(step, int):
                if isinstance(value, list) and -len(value) <= step < len(value):
                    value = value[step]
                    continue
            elif isinstance(value, dict) and step in value:
                value = value[step]
                continue
            raise PathNotFound(RUNTIME, f"Invalid path '{self.text}' : No results for path: {_normalized(self._steps)}")
        return value

    def evaluate(self, data: Any, context: Any = None, seed: bytes = b"") -> Any:
        """The same as ``resolve``; the signature intrinsic functions share, so either can stand in a field."""
        return self.resolve(data, context)

    def __repr__(self) -> str:
        return f"Path({self.text!r})"


class ReferencePath:
    """A ResultPath: a definite path naming where a result is written into the state's input."""

    __slots__ = ("steps", "text")

    def __init__(self, text: str) -> None:
        path = Path(text)
        if path.is_context or path.variable is not None or not path.is_definite:
            raise PathSyntaxError(f"{text!r} is not a valid reference path")
        self.text = text
        self.steps = path.steps

    def write(self, data: Any, value: Any) -> Any:
        """Return ``data`` with ``value`` placed at this path; containers on the way are copied, not mutated."""
        if not self.steps:
            return value
        return self._write(data, 0, value)

    def _write(self, node: Any, depth: int, value: Any) -> Any:
        step = self.steps[depth]
        last = depth == len(self.steps) - 1
        if isinstance(step, int):
            if not isinstance(node, list) or not -len(node) <= step < len(node):
                raise StatesError(
                    RUNTIME,
                    f"Unable to apply ReferencePath {self.text} to input: the index {step} does not exist",
                )
            copy = list(node)
        else:
            if node is None and depth > 0:
                node = {}
            if not isinstance(node, dict):
                raise StatesError(
                    RUNTIME,
                    f"Unable to apply ReferencePath {self.text} to input: "
                    f"'{_normalized(self.steps[:depth]) if depth else '$'}' is not an object",
                )
            copy = dict(node)
        copy[step] = value if last else self._write(copy.get(step) if isinstance(copy, dict) else copy[step],
                                                     depth + 1, value)
        return copy
