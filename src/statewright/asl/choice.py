"""Choice rules: compiled from a Choice state's ``Choices`` into small rule objects evaluated per input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import RUNTIME, StatesError
from .paths import Path, PathSyntaxError
from .timestamps import parse_exact
from .wildcard import Wildcard


class RuleSyntaxError(ValueError):
    """A Choice rule that the States Language does not allow; ``field`` says where."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# Operator name -> (type check for the variable and operand, comparison).
_TYPED: dict[str, tuple[Callable[[Any], bool], Callable[[Any, Any], bool]]] = {}
for _prefix, _check in (("String", lambda v: isinstance(v, str)), ("Numeric", _is_number)):
    _TYPED[f"{_prefix}Equals"] = (_check, lambda a, b: a == b)
    _TYPED[f"{_prefix}LessThan"] = (_check, lambda a, b: a < b)
    _TYPED[f"{_prefix}GreaterThan"] = (_check, lambda a, b: a > b)
    _TYPED[f"{_prefix}LessThanEquals"] = (_check, lambda a, b: a <= b)
    _TYPED[f"{_prefix}GreaterThanEquals"] = (_check, lambda a, b: a >= b)
_TYPED["BooleanEquals"] = (lambda v: isinstance(v, bool), lambda a, b: a is b)
for _suffix, _compare in (
    ("Equals", lambda a, b: a == b),
    ("LessThan", lambda a, b: a < b),
    ("GreaterThan", lambda a, b: a > b),
    ("LessThanEquals", lambda a, b: a <= b),
    ("GreaterThanEquals", lambda a, b: a >= b),
):
    _TYPED[f"Timestamp{_suffix}"] = (lambda v: parse_exact(v) is not None,
                                     lambda a, b, c=_compare: c(parse_exact(a), parse_exact(b)))

_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "IsNull": lambda v: v is None,
    "IsNumeric": _is_number,
    "IsString": lambda v: isinstance(v, str),
    "IsBoolean": lambda v: isinstance(v, bool),
    "IsTimestamp": lambda v: parse_exact(v) is not None,
}

COMPARISON_OPERATORS = frozenset(
    [*_TYPED, *(f"{op}Path" for op in _TYPED), "StringMatches", *_TYPE_TESTS, "IsPresent"]
)


class Rule:
    """A boolean expression over the state's input."""

    def matches(self, data: Any, context: Any) -> bool:  # pragma: no cover - interface
        raise NotImplementedError


class Comparison(Rule):
    __slots__ = ("operand", "operator", "variable")

    def __init__(self, variable: Path, operator: str, operand: Any) -> None:
        self.variable = variable
        self.operator = operator
        self.operand = operand

    def matches(self, data: Any, context: Any) -> bool:
        op = self.operator
        if op == "IsPresent":
            try:
                self.variable.resolve(data, context)
                present = True
            except StatesError:
                present = False
            return present is self.operand
        try:
            value = self.variable.resolve(data, context)
        except StatesError:
            raise StatesError(RUNTIME, f"Invalid path '{self.variable.text}': The choice state's condition path "
                              "references an invalid value.") from None
        if op in _TYPE_TESTS:
            return _TYPE_TESTS[op](value) is self.operand
        if op == "StringMatches":
            return isinstance(value, str) and self.operand.matches(value)
        if op.endswith("Path"):
            op = op[:-4]
            operand = self.operand.resolve(data, context)
        else:
            operand = self.operand
        check, compare = _TYPED[op]
        return check(value) and check(operand) and compare(value, operand)


class And(Rule):
    __slots__ = ("rules",)

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules

    def matches(self, data: Any, context: Any) -> bool:
        return all(rule.matches(data, context) for rule in self.rules)


class Or(And):
    def matches(self, data: Any, context: Any) -> bool:
        return any(rule.matches(data, context) for rule in self.rules)


class Not(Rule):
    __slots__ = ("rule",)

    def __init__(self, rule: Rule) -> None:
        self.rule = rule

    def matches(self, data: Any, context: Any) -> bool:
        return not self.rule.matches(data, context)


def compile_rule(raw: Any, where: str, top_level: bool) -> Rule:
    """Compile one Choice rule; ``where`` is its location (e.g. /States/Pick/Choices/0) for diagnostics."""
    if not isinstance(raw, dict):
        raise RuleSyntaxError("a Choice rule must be an object", where)
    allowed = {"Next", "Comment", "Assign"} if top_level else {"Comment"}
    if top_level and not isinstance(raw.get("Next"), str):
        raise RuleSyntaxError("a top-level Choice rule must have a 'Next' field", where)
    if not top_level and "Next" in raw:
        raise RuleSyntaxError("only top-level Choice rules may have 'Next'", f"{where}/Next")
    combinators = [key for key in ("And", "Or", "Not") if key in raw]
    operators = [key for key in raw if key in COMPARISON_OPERATORS]
    if len(combinators) + len(operators) != 1:
        raise RuleSyntaxError(
            "a Choice rule must have exactly one comparison operator or one of And, Or, Not", where
        )
    if combinators:
        key = combinators[0]
        extra = set(raw) - allowed - {key}
        if extra:
            raise RuleSyntaxError(f"field '{sorted(extra)[0]}' is not allowed here", where)
        if key == "Not":
            return Not(compile_rule(raw["Not"], f"{where}/Not", False))
        subrules = raw[key]
        if not isinstance(subrules, list) or not subrules:
            raise RuleSyntaxError(f"'{key}' must be a non-empty array of rules", f"{where}/{key}")
        rules = [compile_rule(sub, f"{where}/{key}/{i}", False) for i, sub in enumerate(subrules)]
        return And(rules) if key == "And" else Or(rules)
    operator = operators[0]
    extra = set(raw) - allowed - {operator, "Variable"}
    if extra:
        raise RuleSyntaxError(f"field '{sorted(extra)[0]}' is not allowed here", where)
    if not isinstance(raw.get("Variable"), str):
        raise RuleSyntaxError("a comparison must have a 'Variable' path string", f"{where}/Variable")
    try:
        variable = Path(raw["Variable"])
    except PathSyntaxError as exc:
        raise RuleSyntaxError(str(exc), f"{where}/Variable") from None
    return Comparison(variable, operator, _operand(operator, raw[operator], f"{where}/{operator}"))


def _operand(operator: str, value: Any, where: str) -> Any:
    if operator.endswith("Path"):
        if not isinstance(value, str):
            raise RuleSyntaxError(f"'{operator}' must be a path string", where)
        try:
            return Path(value)
        except PathSyntaxError as exc:
            raise RuleSyntaxError(str(exc), where) from None
    if operator == "StringMatches":
        if not isinstance(value, str):
            raise RuleSyntaxError("'StringMatches' must be a string", where)
        return Wildcard(value)
    if operator in _TYPE_TESTS or operator in ("IsPresent", "BooleanEquals"):
        if not isinstance(value, bool):
            raise RuleSyntaxError(f"'{operator}' must be a boolean", where)
        return value
    check = _TYPED[operator][0]
    if not check(value):
        kind = operator.split("Equals")[0].split("LessThan")[0].split("GreaterThan")[0].lower()
        raise RuleSyntaxError(f"'{operator}' must be a {kind}", where)
    return value
