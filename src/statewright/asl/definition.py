"""Parse and validate a state machine definition into compiled states.

``parse_definition`` either returns a ``Definition`` whose paths, templates and Choice rules are compiled (so
nothing is parsed again per transition) or raises ``InvalidDefinition`` with AWS-style diagnostics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from .choice import RuleSyntaxError, compile_rule
from .handling import ALL, Catcher, Retrier
from .intrinsics import Intrinsic
from .jsonata import CompiledValue, JsonataSyntaxError, compile_value, is_expression
from .paths import Path, PathSyntaxError, ReferencePath
from .states import (
    IDENTITY,
    KEEP_ALL,
    ChoiceState,
    Definition,
    FailState,
    Machine,
    MapState,
    ParallelState,
    PassState,
    ResultState,
    State,
    SucceedState,
    TaskState,
    WaitState,
)
from .templates import Template, compile_dynamic
from .timestamps import parse_ms

__all__ = ["Definition", "Diagnostic", "InvalidDefinition", "Machine", "State", "parse_definition"]

MAX_STATE_NAME = 80
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_TOP_LEVEL = {"StartAt", "States", "Comment", "Version", "TimeoutSeconds", "QueryLanguage"}
_COMMON = {"Type", "Comment"}
_FLOW = {"Next", "End"}
_IO = {"InputPath", "OutputPath"}
_FANOUT = _COMMON | _FLOW | _IO | {"ResultPath", "ResultSelector", "Retry", "Catch", "Assign"}
_ALLOWED: dict[str, set[str]] = {
    "Pass": _COMMON | _FLOW | _IO | {"ResultPath", "Parameters", "Result", "Assign"},
    "Choice": _COMMON | _IO | {"Choices", "Default", "Assign"},
    "Wait": _COMMON | _FLOW | _IO | {"Seconds", "Timestamp", "SecondsPath", "TimestampPath", "Assign"},
    "Succeed": _COMMON | _IO,
    "Fail": _COMMON | {"Error", "Cause", "ErrorPath", "CausePath"},
    "Parallel": _FANOUT | {"Branches", "Parameters"},
    "Map": _FANOUT | {"ItemProcessor", "Iterator", "ItemsPath", "ItemSelector", "Parameters", "MaxConcurrency",
                      "MaxConcurrencyPath"},
}
_ALLOWED["Task"] = _FANOUT | {"Resource", "Parameters", "TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds",
                               "HeartbeatSecondsPath", "Credentials"}
# In JSONata states the JSONPath fields give way to Arguments, Output, Items, Condition, ... (expressions).
_JSONPATH_ONLY = {"InputPath", "OutputPath", "Parameters", "ResultSelector", "ResultPath", "Result", "ItemsPath",
                  "SecondsPath", "TimestampPath", "ErrorPath", "CausePath", "TimeoutSecondsPath",
                  "HeartbeatSecondsPath", "MaxConcurrencyPath"}
_ALLOWED_JSONATA: dict[str, set[str]] = {kind: (fields - _JSONPATH_ONLY) | {"QueryLanguage"}
                                         for kind, fields in _ALLOWED.items()}
for _kind in ("Pass", "Choice", "Wait", "Succeed", "Task", "Parallel", "Map"):
    _ALLOWED_JSONATA[_kind].add("Output")
for _kind in ("Task", "Parallel"):
    _ALLOWED_JSONATA[_kind].add("Arguments")
_ALLOWED_JSONATA["Map"].add("Items")
_JSONATA_FIELDS = ("Arguments", "Output", "Assign", "Items", "ItemSelector", "Seconds", "Timestamp", "Error", "Cause",
                   "TimeoutSeconds", "HeartbeatSeconds", "MaxConcurrency")
for _kind in _ALLOWED:
    _ALLOWED[_kind].add("QueryLanguage")
# Recognised States Language types that this build does not run yet.
_NOT_YET: set[str] = set()
_ACTIVITY_ARN = re.compile(r"^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:activity:[^:]+$")
_SERVICE_ARN = re.compile(r"^arn:aws[a-z-]*:states:::(?P<service>[a-zA-Z0-9-]+):(?P<action>[a-zA-Z0-9]+)"
                          r"(?:\.(?P<pattern>sync(?::2)?|waitForTaskToken))?$")
# The service integrations this build runs, with the patterns each allows.
_INTEGRATIONS = {("http", "invoke"): {""}, ("states", "startExecution"): {"", "sync", "sync:2", "waitForTaskToken"}}
_MAX_TIMEOUT_SECONDS = 99999999
_MACHINE_FIELDS = {"StartAt", "States", "Comment"}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    message: str
    location: str = ""
    severity: str = "ERROR"

    def render(self) -> str:
        return f"{self.code}: {self.message}" + (f" at {self.location}" if self.location else "")


class InvalidDefinition(ValueError):
    """The definition breaks a States Language rule; ``diagnostics`` lists every problem found."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("Invalid State Machine Definition: '" + "', '".join(d.render() for d in diagnostics) + "'")


def parse_definition(text: str) -> Definition:
    """Compile ``text`` (a JSON definition) or raise InvalidDefinition listing what is wrong."""
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidDefinition([Diagnostic("INVALID_JSON_DESCRIPTION", str(exc))]) from None
    return _Parser().parse(raw)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Parser:
    def __init__(self) -> None:
        self.problems: list[Diagnostic] = []
        self.machines: list[Machine] = []
        self.names: set[str] = set()
        self.language = self.top_language = "JSONPath"  # of the state being parsed, and of the whole machine

    def problem(self, code: str, message: str, location: str) -> None:
        self.problems.append(Diagnostic(code, message, location))

    def schema(self, message: str, location: str) -> None:
        self.problem("SCHEMA_VALIDATION_FAILED", message, location)

    def parse(self, raw: Any) -> Definition:
        if not isinstance(raw, dict):
            raise InvalidDefinition([Diagnostic("SCHEMA_VALIDATION_FAILED", "Definition must be a valid JSON object")])
        for key in sorted(set(raw) - _TOP_LEVEL):
            self.schema(f"Field '{key}' is not supported", f"/{key}")
        timeout = raw.get("TimeoutSeconds")
        if timeout is not None and (not _is_int(timeout) or timeout <= 0 or timeout > 99999999):
            self.schema("The value for the field 'TimeoutSeconds' must be a positive integer", "/TimeoutSeconds")
        self.language = raw.get("QueryLanguage", "JSONPath")
        if self.language not in ("JSONPath", "JSONata"):
            self.schema("The value for the field 'QueryLanguage' must be one of [JSONPath, JSONata]",
                        "/QueryLanguage")
            self.language = "JSONPath"
        self.top_language = self.language
        top = self.machine(raw, "")
        if self.problems:
            raise InvalidDefinition(self.problems)
        for index, machine in enumerate(self.machines):
            machine.index = index
        return Definition(top.start_at, top.states, timeout, raw.get("Comment"), self.machines)

    def machine(self, raw: dict, where: str) -> Machine:
        """One States collection; nested ones (branches, item processors) register themselves first."""
        missing = [key for key in ("States", "StartAt") if key not in raw]
        if missing:
            self.schema(f"These fields are required: [{', '.join(missing)}]", where or "/")
        start_at = raw.get("StartAt")
        if "StartAt" in raw and not isinstance(start_at, str):
            self.schema("The value for the field 'StartAt' must be a STRING", f"{where}/StartAt")
        machine = Machine(start_at if isinstance(start_at, str) else "", {})
        if not where:
            self.machines.insert(0, machine)  # the top level is machines[0]
        states = self.states(raw.get("States"), f"{where}/States")
        if states is not None:
            machine.states = states
            if isinstance(start_at, str) and start_at not in states:
                self.problem("MISSING_TRANSITION_TARGET", f"Missing 'Next' target: {start_at}", f"{where}/StartAt")
            elif isinstance(start_at, str):
                self.reachability(start_at, states, where)
        if where:
            self.machines.append(machine)
        return machine

    def states(self, raw: Any, where: str) -> dict[str, State] | None:
        if raw is None:
            return None
        if not isinstance(raw, dict) or not raw:
            self.schema("The value for the field 'States' must be a non-empty OBJECT", where)
            return None
        compiled = {}
        for name, body in raw.items():
            if name in self.names:
                self.problem("DUPLICATE_STATE_NAME", f"Duplicate State name: '{name}'", f"{where}/{name}")
            self.names.add(name)
            state = self.state(name, body, f"{where}/{name}")
            if state is not None:
                compiled[name] = state
        for state in compiled.values():
            for target, location in self.targets(state, where):
                if target not in raw:
                    self.problem("MISSING_TRANSITION_TARGET", f"Missing 'Next' target: {target}", location)
        return compiled

    def targets(self, state: State, where: str) -> list[tuple[str, str]]:
        base = f"{where}/{state.name}"
        found = [(state.next, f"{base}/Next")] if state.next else []
        if isinstance(state, ChoiceState):
            found += [(target, f"{base}/Choices/{i}/Next") for i, (_, target, _) in enumerate(state.choices)]
            if state.default:
                found.append((state.default, f"{base}/Default"))
        if isinstance(state, ResultState):
            found += [(catcher.next, f"{base}/Catch/{i}/Next") for i, catcher in enumerate(state.catch)]
        return found

    def reachability(self, start_at: str, states: dict[str, State], where: str) -> None:
        seen, todo = set(), [start_at]
        while todo:
            name = todo.pop()
            if name in seen or name not in states:
                continue
            seen.add(name)
            todo.extend(target for target, _ in self.targets(states[name], ""))
        for name in states:
            if name not in seen:
                self.problem("UNREACHABLE_STATE", f"State '{name}' is not reachable", f"{where}/States/{name}")

    def state(self, name: str, raw: Any, where: str) -> State | None:
        if len(name) > MAX_STATE_NAME or not name:
            self.schema(f"State names must be 1 to {MAX_STATE_NAME} characters long", where)
        if not isinstance(raw, dict):
            self.schema("A state must be an object", where)
            return None
        kind = raw.get("Type")
        if kind in _NOT_YET:
            self.problem("UNSUPPORTED_FEATURE", f"statewright does not run {kind} states yet", f"{where}/Type")
            return None
        if kind not in _ALLOWED:
            self.schema("The field 'Type' should have one of these values: "
                        "[Task, Wait, Pass, Succeed, Fail, Choice, Parallel, Map]", f"{where}/Type")
            return None
        language = raw.get("QueryLanguage", self.top_language)
        if language not in ("JSONPath", "JSONata"):
            self.schema("The value for the field 'QueryLanguage' must be one of [JSONPath, JSONata]",
                        f"{where}/QueryLanguage")
            language = self.top_language
        elif language == "JSONPath" and self.top_language == "JSONata":
            self.schema("'QueryLanguage' can not be 'JSONPath' if set to 'JSONata' for whole state machine",
                        f"{where}/QueryLanguage")
        outer, self.language = self.language, language
        try:
            allowed = _ALLOWED_JSONATA[kind] if language == "JSONata" else _ALLOWED[kind]
            for key in sorted(set(raw) - allowed):
                self.schema(f"Field '{key}' is not supported" + (
                    " when the query language is JSONata" if key in _JSONPATH_ONLY and language == "JSONata"
                    else ""), f"{where}/{key}")
            state = getattr(self, "pass_" if kind == "Pass" else kind.lower())(name, raw, where)
            state.query_language = language
            if kind in ("Pass", "Wait", "Parallel", "Map", "Task"):
                self.flow(state, raw, where)
            if language == "JSONata":
                state.jsonata = self.expressions(raw, _JSONATA_FIELDS, where)
                return state
            if "InputPath" in raw:
                state.input_path = self.path(raw["InputPath"], f"{where}/InputPath", nullable=True)
            if "OutputPath" in raw:
                state.output_path = self.path(raw["OutputPath"], f"{where}/OutputPath", nullable=True)
            state.assign = self.assign(raw, where)
            return state
        finally:
            self.language = outer

    def expressions(self, raw: dict, fields: tuple[str, ...], where: str) -> dict[str, CompiledValue]:
        """The JSONata-capable fields present in ``raw``, each compiled once."""
        compiled = {}
        for key in fields:
            if key in raw:
                if key == "Assign":
                    self.check_variable_names(raw["Assign"], f"{where}/Assign")
                try:
                    compiled[key] = compile_value(raw[key], key)
                except JsonataSyntaxError as exc:
                    self.problem(exc.code, str(exc), f"{where}/{key}")
        return compiled

    def assign(self, raw: dict, where: str) -> Template | CompiledValue | None:
        """Assign: an object whose keys are variable names (``name.$`` for a path or intrinsic value in JSONPath
        states; values with ``{% %}`` expressions in JSONata states)."""
        if "Assign" not in raw:
            return None
        if not self.check_variable_names(raw["Assign"], f"{where}/Assign") or not raw["Assign"]:
            return None
        if self.language == "JSONata":
            return self.expressions(raw, ("Assign",), where).get("Assign")
        return self.template(raw, "Assign", where)

    def check_variable_names(self, value: Any, where: str) -> bool:
        if not isinstance(value, dict):
            self.schema("The value for the field 'Assign' must be an OBJECT", where)
            return False
        for key in value:
            name = key[:-2] if key.endswith(".$") and self.language == "JSONPath" else key
            if not _VARIABLE_NAME.match(name) or name == "states":
                self.schema(f"'{name}' is not a valid variable name", f"{where}/{key}")
        return True

    def flow(self, state: State, raw: dict, where: str) -> None:
        nxt, end = raw.get("Next"), raw.get("End")
        if end is not None and not isinstance(end, bool):
            self.schema("The field 'End' must be a boolean", f"{where}/End")
        if nxt is not None and not isinstance(nxt, str):
            self.schema("The field 'Next' must be a string", f"{where}/Next")
        elif nxt is not None and end:
            self.schema("A state may have 'Next' or 'End', not both", where)
        elif nxt is None and end is not True:
            self.schema("The state must have 'Next' or 'End': true", where)
        state.next = nxt if isinstance(nxt, str) else None
        state.end = end is True

    def path(self, raw: Any, where: str, nullable: bool = False) -> Path | None:
        if raw is None and nullable:
            return None
        try:
            return Path(raw)
        except PathSyntaxError as exc:
            self.schema(f"The value is not a valid JSONPath: {exc}", where)
            return IDENTITY

    def pass_(self, name: str, raw: dict, where: str) -> PassState:
        state = PassState(name, "Pass")
        state.parameters = self.template(raw, "Parameters", where)
        if "Result" in raw:
            state.result, state.has_result = raw["Result"], True
        state.result_path = self.result_path(raw, where)
        return state

    def choice(self, name: str, raw: dict, where: str) -> ChoiceState:
        state = ChoiceState(name, "Choice")
        choices = raw.get("Choices")
        if not isinstance(choices, list) or not choices:
            self.schema("The field 'Choices' is required and must be a non-empty array", f"{where}/Choices")
            choices = []
        for i, rule in enumerate(choices):
            at = f"{where}/Choices/{i}"
            if self.language == "JSONata":
                condition = self.jsonata_rule(rule, at)
                if condition is not None:
                    state.choices.append((condition, rule["Next"], self.assign(rule, at)))
                continue
            try:
                state.choices.append((compile_rule(rule, at, True), rule["Next"], self.assign(rule, at)))
            except RuleSyntaxError as exc:
                self.schema(str(exc), exc.field)
        default = raw.get("Default")
        if default is not None and not isinstance(default, str):
            self.schema("The field 'Default' must be a string", f"{where}/Default")
        state.default = default if isinstance(default, str) else None
        return state

    def jsonata_rule(self, rule: Any, where: str) -> CompiledValue | None:
        """A JSONata Choice rule: {"Condition": "{% ... %}", "Next": ..., "Assign"?: ...}."""
        if not isinstance(rule, dict) or not isinstance(rule.get("Next"), str) or "Condition" not in rule:
            self.schema("These fields are required: [Condition, Next]", where)
            return None
        self.unknown_fields(rule, {"Condition", "Next", "Assign", "Comment"}, where)
        return self.expressions(rule, ("Condition",), where).get("Condition")

    def wait(self, name: str, raw: dict, where: str) -> WaitState:
        state = WaitState(name, "Wait")
        given = [key for key in ("Seconds", "Timestamp", "SecondsPath", "TimestampPath") if key in raw]
        if len(given) != 1:
            self.schema("A Wait state must have exactly one of Seconds, Timestamp, SecondsPath, TimestampPath",
                        where)
            return state
        if self.language == "JSONata" and is_expression(raw[given[0]]):
            return state  # evaluated when the state runs
        key, value = given[0], raw[given[0]]
        if key == "Seconds":
            if not _is_int(value) or value < 0 or value > 99999999:
                self.schema("The value for the field 'Seconds' must be a non-negative integer", f"{where}/Seconds")
            state.seconds = value
        elif key == "Timestamp":
            state.timestamp_ms = parse_ms(value)
            if state.timestamp_ms is None:
                self.schema("The value for the field 'Timestamp' must be an ISO-8601 timestamp",
                            f"{where}/Timestamp")
        elif key == "SecondsPath":
            state.seconds_path = self.path(value, f"{where}/SecondsPath")
        else:
            state.timestamp_path = self.path(value, f"{where}/TimestampPath")
        return state

    def succeed(self, name: str, raw: dict, where: str) -> SucceedState:
        return SucceedState(name, "Succeed")

    def fail(self, name: str, raw: dict, where: str) -> FailState:
        state = FailState(name, "Fail")
        if self.language == "JSONata":
            return state  # Error and Cause are literals or expressions, compiled with the other JSONata fields
        for field_name, path_name in (("Error", "ErrorPath"), ("Cause", "CausePath")):
            if field_name in raw and path_name in raw:
                self.schema(f"A Fail state may have '{field_name}' or '{path_name}', not both", where)
            if field_name in raw and not isinstance(raw[field_name], str):
                self.schema(f"The field '{field_name}' must be a string", f"{where}/{field_name}")
        state.error = raw.get("Error") if isinstance(raw.get("Error"), str) else None
        state.cause = raw.get("Cause") if isinstance(raw.get("Cause"), str) else None
        if "ErrorPath" in raw:
            state.error_path = self.dynamic(raw["ErrorPath"], f"{where}/ErrorPath")
        if "CausePath" in raw:
            state.cause_path = self.dynamic(raw["CausePath"], f"{where}/CausePath")
        return state

    def dynamic(self, raw: Any, where: str) -> Path | Intrinsic | None:
        try:
            return compile_dynamic(raw, where)
        except PathSyntaxError as exc:
            self.schema(str(exc), where)
            return None

    # -- Task

    def task(self, name: str, raw: dict, where: str) -> TaskState:
        state = TaskState(name, "Task")
        self.result_fields(state, raw, where)
        state.parameters = self.template(raw, "Parameters", where)
        resource = raw.get("Resource")
        if not isinstance(resource, str):
            self.schema("These fields are required: [Resource]", where)
            return state
        state.resource = resource
        service = _SERVICE_ARN.match(resource)
        if _ACTIVITY_ARN.match(resource):
            state.integration = "activity"
        elif service and (service["service"], service["action"]) in _INTEGRATIONS:
            state.integration, state.action = service["service"], service["action"]
            state.pattern = service["pattern"] or ""
            if state.pattern not in _INTEGRATIONS[(state.integration, state.action)]:
                self.problem("INVALID_RESOURCE", f"The resource '{resource}' does not support the "
                             f"'.{state.pattern}' pattern", f"{where}/Resource")
        else:
            self.problem("INVALID_RESOURCE", f"statewright does not run the resource '{resource}' yet; it runs "
                         "activities, arn:aws:states:::http:invoke and arn:aws:states:::states:startExecution",
                         f"{where}/Resource")
        state.timeout_seconds, state.timeout_seconds_path = self.seconds(raw, "TimeoutSeconds", where)
        state.heartbeat_seconds, state.heartbeat_seconds_path = self.seconds(raw, "HeartbeatSeconds", where)
        if (state.heartbeat_seconds is not None and state.timeout_seconds is not None
                and state.heartbeat_seconds >= state.timeout_seconds):
            self.schema("The value of the field 'HeartbeatSeconds' must be smaller than the value of the field "
                        "'TimeoutSeconds'", f"{where}/HeartbeatSeconds")
        return state

    def seconds(self, raw: dict, key: str, where: str) -> tuple[int | None, Path | None]:
        """TimeoutSeconds / HeartbeatSeconds, or their Path variants (one of the two at most)."""
        if self.language == "JSONata" and is_expression(raw.get(key)):
            return None, None  # evaluated when the state runs
        path_key = f"{key}Path"
        if key in raw and path_key in raw:
            self.schema(f"A state may have '{key}' or '{path_key}', not both", where)
        if path_key in raw:
            return None, self.path(raw[path_key], f"{where}/{path_key}")
        value = raw.get(key)
        if value is not None and (not _is_int(value) or not 1 <= value <= _MAX_TIMEOUT_SECONDS):
            self.schema(f"The value for the field '{key}' must be a positive integer", f"{where}/{key}")
            return None, None
        return value, None

    # -- Parallel and Map

    def result_fields(self, state: ResultState, raw: dict, where: str) -> None:
        state.result_selector = self.template(raw, "ResultSelector", where)
        state.result_path = self.result_path(raw, where)
        state.retry = [self.retrier(rule, f"{where}/Retry/{i}") for i, rule in enumerate(self.rules(raw, "Retry",
                                                                                                   where))]
        state.catch = [self.catcher(rule, f"{where}/Catch/{i}") for i, rule in enumerate(self.rules(raw, "Catch",
                                                                                                   where))]

    def parallel(self, name: str, raw: dict, where: str) -> ParallelState:
        state = ParallelState(name, "Parallel")
        self.result_fields(state, raw, where)
        state.parameters = self.template(raw, "Parameters", where)
        branches = raw.get("Branches")
        if not isinstance(branches, list) or not branches:
            self.schema("The field 'Branches' is required and must be a non-empty array", f"{where}/Branches")
            branches = []
        for i, branch in enumerate(branches):
            if not isinstance(branch, dict):
                self.schema("A branch must be an object", f"{where}/Branches/{i}")
                continue
            self.unknown_fields(branch, _MACHINE_FIELDS, f"{where}/Branches/{i}")
            state.branches.append(self.machine(branch, f"{where}/Branches/{i}"))
        return state

    def map(self, name: str, raw: dict, where: str) -> MapState:
        state = MapState(name, "Map")
        self.result_fields(state, raw, where)
        if "ItemSelector" in raw and "Parameters" in raw:
            self.schema("A Map state may have 'ItemSelector' or 'Parameters', not both", where)
        state.item_selector = self.template(raw, "ItemSelector" if "ItemSelector" in raw else "Parameters", where)
        if "ItemsPath" in raw:
            state.items_path = self.path(raw["ItemsPath"], f"{where}/ItemsPath", nullable=True)
        concurrency = raw.get("MaxConcurrency", 0)
        if self.language == "JSONata" and is_expression(concurrency):
            concurrency = 0  # evaluated when the state runs
        elif not _is_int(concurrency) or concurrency < 0:
            self.schema("The value for the field 'MaxConcurrency' must be a non-negative integer",
                        f"{where}/MaxConcurrency")
        state.max_concurrency = concurrency if _is_int(concurrency) else 0
        if "MaxConcurrencyPath" in raw:
            if "MaxConcurrency" in raw:
                self.schema("A Map state may have 'MaxConcurrency' or 'MaxConcurrencyPath', not both", where)
            state.max_concurrency_path = self.path(raw["MaxConcurrencyPath"], f"{where}/MaxConcurrencyPath")
        key = "ItemProcessor" if "ItemProcessor" in raw else "Iterator"
        processor = raw.get(key)
        if not isinstance(processor, dict):
            self.schema("These fields are required: [ItemProcessor]", where)
            return state
        self.unknown_fields(processor, _MACHINE_FIELDS | ({"ProcessorConfig"} if key == "ItemProcessor" else set()),
                            f"{where}/{key}")
        mode = (processor.get("ProcessorConfig") or {}).get("Mode", "INLINE")
        if mode != "INLINE":
            self.problem("UNSUPPORTED_FEATURE", "statewright runs inline Map states only so far",
                         f"{where}/{key}/ProcessorConfig/Mode")
        state.processor = self.machine(processor, f"{where}/{key}")
        return state

    def unknown_fields(self, raw: dict, allowed: set[str], where: str) -> None:
        for key in sorted(set(raw) - allowed):
            self.schema(f"Field '{key}' is not supported", f"{where}/{key}")

    def template(self, raw: dict, key: str, where: str) -> Template | None:
        if key not in raw:
            return None
        try:
            return Template(raw[key])
        except PathSyntaxError as exc:
            self.schema(str(exc), f"{where}/{key}")
            return None

    def result_path(self, raw: dict, where: str) -> ReferencePath | None:
        if "ResultPath" not in raw:
            return KEEP_ALL
        if raw["ResultPath"] is None:
            return None
        try:
            return ReferencePath(raw["ResultPath"])
        except PathSyntaxError:
            self.schema("The value for the field 'ResultPath' must be a valid reference path", f"{where}/ResultPath")
            return KEEP_ALL

    def rules(self, raw: dict, key: str, where: str) -> list[dict]:
        rules = raw.get(key, [])
        if not isinstance(rules, list) or not all(isinstance(rule, dict) for rule in rules):
            self.schema(f"The field '{key}' must be an array of objects", f"{where}/{key}")
            return []
        return rules

    def error_equals(self, rule: dict, where: str) -> list[str]:
        names = rule.get("ErrorEquals")
        if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
            self.schema("The field 'ErrorEquals' is required and must be a non-empty array of strings",
                        f"{where}/ErrorEquals")
            return []
        if ALL in names and len(names) > 1:
            self.schema(f"'{ALL}' must appear alone in 'ErrorEquals'", f"{where}/ErrorEquals")
        return names

    def retrier(self, rule: dict, where: str) -> Retrier:
        self.unknown_fields(rule, {"ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate", "MaxDelaySeconds",
                                   "JitterStrategy", "Comment"}, where)
        retrier = Retrier(self.error_equals(rule, where))
        interval = rule.get("IntervalSeconds", 1)
        if _is_int(interval) and 1 <= interval <= 99999999:
            retrier.interval_seconds = interval
        else:
            self.schema("The value for the field 'IntervalSeconds' must be a positive integer",
                        f"{where}/IntervalSeconds")
        attempts = rule.get("MaxAttempts", 3)
        if _is_int(attempts) and 0 <= attempts <= 99999999:
            retrier.max_attempts = attempts
        else:
            self.schema("The value for the field 'MaxAttempts' must be a non-negative integer",
                        f"{where}/MaxAttempts")
        backoff = rule.get("BackoffRate", 2.0)
        if isinstance(backoff, int | float) and not isinstance(backoff, bool) and backoff >= 1.0:
            retrier.backoff_rate = float(backoff)
        else:
            self.schema("The value for the field 'BackoffRate' must be a number greater than or equal to 1.0",
                        f"{where}/BackoffRate")
        max_delay = rule.get("MaxDelaySeconds")
        if max_delay is None or (_is_int(max_delay) and 1 <= max_delay <= 31622400):
            retrier.max_delay_seconds = max_delay
        else:
            self.schema("The value for the field 'MaxDelaySeconds' must be a positive integer",
                        f"{where}/MaxDelaySeconds")
        jitter = rule.get("JitterStrategy", "NONE")
        if jitter in ("FULL", "NONE"):
            retrier.jitter = jitter == "FULL"
        else:
            self.schema("The value for the field 'JitterStrategy' must be one of [FULL, NONE]",
                        f"{where}/JitterStrategy")
        return retrier

    def catcher(self, rule: dict, where: str) -> Catcher:
        fields = {"ErrorEquals", "Next", "Comment", "Assign"}
        self.unknown_fields(rule, fields | ({"Output"} if self.language == "JSONata" else {"ResultPath"}), where)
        nxt = rule.get("Next")
        if not isinstance(nxt, str):
            self.schema("These fields are required: [Next]", where)
        catcher = Catcher(self.error_equals(rule, where), nxt if isinstance(nxt, str) else "",
                          self.result_path(rule, where), self.assign(rule, where))
        if self.language == "JSONata":
            catcher.output = self.expressions(rule, ("Output",), where).get("Output")
        return catcher

