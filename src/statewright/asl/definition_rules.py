"""The definition parser's rules: a Choice state's rules (JSONPath comparisons with And, Or, Not, or a JSONata
Condition) and a state's Retriers and Catchers, checked as AWS checks them and compiled.

A mixin of ``definition._Parser``: its methods use the parser's reporting (``schema``, ``unknown_fields``, ...) and
are reached only through it. Must not import ``definition`` (which imports this).
"""

from __future__ import annotations

from typing import Any

from .choice import COMPARISON_OPERATORS, RuleSyntaxError, compile_rule
from .diagnostics import expected, one_of, only_one
from .handling import ALL, Catcher, Retrier
from .jsonata import CompiledValue
from .paths import Path, PathSyntaxError
from .states import ChoiceState
from .timestamps import parse_exact

SECONDS_MAX = 99999999
_RETRIER_FIELDS = {"ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate", "MaxDelaySeconds",
                   "JitterStrategy", "Comment"}
_CATCHER_FIELDS = {"ErrorEquals", "Next", "Comment", "Assign"}
_CATCHER_ONLY = {"JSONPath": {"ResultPath"}, "JSONata": {"Output"}}
_RULE_COMBINATORS = ("And", "Or", "Not")
_DELAY_SECONDS_MAX = 31622400  # a Retrier's MaxDelaySeconds: one year


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class RuleParsing:
    """Choice rules, Retriers and Catchers: a mixin of the definition parser, whose reporting (``schema``,
    ``unknown_fields``, ``integer``, ...) and language its methods use."""

    def choice(self, name: str, raw: dict, where: str) -> ChoiceState:
        state = ChoiceState(name, "Choice")
        choices = raw.get("Choices")
        if "Choices" not in raw:
            self.schema("These fields are required: [Choices]", where)
            choices = []
        elif not isinstance(choices, list):
            self.schema(expected("ARRAY"), f"{where}/Choices")
            choices = []
        elif not choices:
            self.schema("Value cannot be empty", f"{where}/Choices")
        for i, rule in enumerate(choices):
            at = f"{where}/Choices[{i}]"
            if self.language == "JSONata":
                compiled = self.jsonata_rule(rule, at, i)
                if compiled is not None:
                    state.choices.append((compiled["Condition"], rule["Next"], self.assign(rule, at),
                                          compiled.get("Output")))
            elif self.check_rule(rule, at, top=True):
                try:
                    state.choices.append((compile_rule(rule, at, True), rule["Next"], self.assign(rule, at), None))
                except RuleSyntaxError as exc:  # check_rule found nothing, so this is not expected
                    self.schema(str(exc), exc.field)
        if "Default" in raw:
            if isinstance(raw["Default"], str):
                state.default = raw["Default"]
            else:
                self.schema(expected("STRING"), f"{where}/Default")
        return state

    def check_rule(self, rule: Any, where: str, top: bool) -> bool:
        """A JSONPath Choice rule: one comparison (Variable and one operator) or one of And, Or, Not; Next (and
        Assign) only at the top. Reports every problem; True when there is none."""
        if not isinstance(rule, dict):
            self.schema(expected("OBJECT"), where)
            return False
        combinators = [key for key in _RULE_COMBINATORS if key in rule]
        operators = [key for key in rule if key in COMPARISON_OPERATORS]
        allowed = {"Comment", *combinators, *operators} | ({"Next", "Assign"} if top else set())
        if operators or not combinators:
            allowed.add("Variable")
        clean = self.unknown_fields(rule, allowed, where, {"Condition"})
        if top and "Next" not in rule:
            self.schema("These fields are required: [Next]", where)
            clean = False
        elif top and not isinstance(rule["Next"], str):
            self.schema(expected("STRING"), f"{where}/Next")
            clean = False
        found = combinators + operators
        if not found:
            self.schema("A Choice rule must have a comparison operator, or one of And, Or, Not", where)
            return False
        if len(found) > 1:
            self.schema(only_one(found), where)
            return False
        key = found[0]
        if key == "Not":
            return self.check_rule(rule["Not"], f"{where}/Not", top=False) and clean
        if key in ("And", "Or"):
            rules = rule[key]
            if not isinstance(rules, list):
                self.schema(expected("ARRAY"), f"{where}/{key}")
                return False
            if not rules:
                self.schema("Value cannot be empty", f"{where}/{key}")
                return False
            for i, sub in enumerate(rules):
                clean = self.check_rule(sub, f"{where}/{key}[{i}]", top=False) and clean
            return clean
        if "Variable" not in rule:
            self.schema("These fields are required: [Variable]", where)
            return False
        variable_clean = self.rule_path(rule, "Variable", where)
        return self.operand(key, rule[key], f"{where}/{key}") and variable_clean and clean

    def rule_path(self, rule: dict, key: str, where: str) -> bool:
        value = rule[key]
        if not isinstance(value, str):
            self.schema(expected("STRING"), f"{where}/{key}")
            return False
        try:
            Path(value)
        except PathSyntaxError as exc:
            self.schema(f"The value for the field '{key}' must be a valid JSONPath ({exc})", f"{where}/{key}")
            return False
        return True

    def operand(self, operator: str, value: Any, where: str) -> bool:
        if operator.endswith("Path"):
            return self.rule_path({operator: value}, operator, where.rsplit("/", 1)[0])
        if operator.startswith(("Is", "Boolean")):
            kind, valid = "BOOLEAN", isinstance(value, bool)
        elif operator.startswith("Numeric"):
            kind, valid = "NUMBER", is_number(value)
        else:
            kind, valid = "STRING", isinstance(value, str)
        if not valid:
            self.schema(expected(kind), where)
            return False
        if operator.startswith("Timestamp") and parse_exact(value) is None:
            self.schema(f"The value for the field '{operator}' must be a valid timestamp", where)
            return False
        return True

    def jsonata_rule(self, rule: Any, where: str, index: int) -> dict[str, CompiledValue] | None:
        """A JSONata Choice rule: {"Condition": "{% ... %}", "Next": ..., "Assign"?: ..., "Output"?: ...}; its
        Condition and Output compiled. The Output of the rule that matches is the state's output (AWS's JSONata
        Choice state)."""
        if not isinstance(rule, dict):
            self.schema(expected("OBJECT"), where)
            return None
        jsonpath_only = {"Variable", *_RULE_COMBINATORS, *(key for key in rule if key in COMPARISON_OPERATORS)}
        clean = self.unknown_fields(rule, {"Condition", "Next", "Assign", "Output", "Comment"}, where, jsonpath_only)
        missing = [key for key in ("Condition", "Next") if key not in rule]
        if missing:
            self.schema(f"These fields are required: [{', '.join(missing)}]", where)
            return None
        if not isinstance(rule["Next"], str):
            self.schema(expected("STRING"), f"{where}/Next")
            return None
        compiled = self.expressions(rule, ("Condition", "Output"), where, f"Choices[{index}]/")
        return compiled if clean and "Condition" in compiled else None

    def rules(self, raw: dict, key: str, where: str) -> list[tuple[dict, str]]:
        """The Retriers or Catchers, each with its location; States.ALL only in the last one."""
        if key not in raw:
            return []
        rules = raw[key]
        if not isinstance(rules, list):
            self.schema(expected("ARRAY"), f"{where}/{key}")
            return []
        found = []
        for i, rule in enumerate(rules):
            at = f"{where}/{key}[{i}]"
            if not isinstance(rule, dict):
                self.schema(expected("OBJECT"), at)
                continue
            names = rule.get("ErrorEquals")
            if i < len(rules) - 1 and isinstance(names, list) and ALL in names:
                self.schema(f"'{ALL}' must appear only in the last {'Retrier' if key == 'Retry' else 'Catcher'}",
                            f"{at}/ErrorEquals")
            found.append((rule, at))
        return found

    def error_equals(self, rule: dict, where: str) -> list[str]:
        if "ErrorEquals" not in rule:
            self.schema("These fields are required: [ErrorEquals]", where)
            return []
        names = rule["ErrorEquals"]
        if not isinstance(names, list):
            self.schema(expected("ARRAY"), f"{where}/ErrorEquals")
            return []
        if not names:
            self.schema("Value cannot be empty", f"{where}/ErrorEquals")
            return []
        for i, name in enumerate(names):
            if not isinstance(name, str):
                self.schema(expected("STRING"), f"{where}/ErrorEquals[{i}]")
        if ALL in names and len(names) > 1:
            self.schema(f"'{ALL}' must appear alone in 'ErrorEquals'", f"{where}/ErrorEquals")
        return [name for name in names if isinstance(name, str)]

    def retrier(self, rule: dict, where: str) -> Retrier:
        self.unknown_fields(rule, _RETRIER_FIELDS, where)
        retrier = Retrier(self.error_equals(rule, where))
        if "IntervalSeconds" in rule:
            retrier.interval_seconds = self.integer(rule, "IntervalSeconds", where, 1, SECONDS_MAX) or 1
        if "MaxAttempts" in rule:
            attempts = self.integer(rule, "MaxAttempts", where, 0, SECONDS_MAX)
            retrier.max_attempts = attempts if attempts is not None else 3
        if "BackoffRate" in rule:
            backoff = rule["BackoffRate"]
            if not is_number(backoff):
                self.schema(expected("NUMBER"), f"{where}/BackoffRate")
            elif backoff < 1.0:
                self.schema("Minimum value is 1.0", f"{where}/BackoffRate")
            else:
                retrier.backoff_rate = float(backoff)
        if "MaxDelaySeconds" in rule:
            retrier.max_delay_seconds = self.integer(rule, "MaxDelaySeconds", where, 1, _DELAY_SECONDS_MAX)
        jitter = rule.get("JitterStrategy", "NONE")
        if jitter in ("FULL", "NONE"):
            retrier.jitter = jitter == "FULL"
        else:
            self.schema(one_of(("FULL", "NONE")), f"{where}/JitterStrategy")
        return retrier

    def catcher(self, rule: dict, where: str) -> Catcher:
        other = "JSONata" if self.language == "JSONPath" else "JSONPath"
        self.unknown_fields(rule, _CATCHER_FIELDS | _CATCHER_ONLY[self.language], where, _CATCHER_ONLY[other])
        nxt = rule.get("Next")
        if "Next" not in rule:
            self.schema("These fields are required: [Next]", where)
        elif not isinstance(nxt, str):
            self.schema(expected("STRING"), f"{where}/Next")
        catcher = Catcher(self.error_equals(rule, where), nxt if isinstance(nxt, str) else "",
                          self.result_path(rule, where), self.assign(rule, where))
        if self.language == "JSONata":
            catcher.output = self.expressions(rule, ("Output",), where).get("Output")
        return catcher

    # -- Parallel and Map
