"""Parse and validate a state machine definition into compiled states.

``parse_definition`` either returns a ``Definition`` whose paths, templates and Choice rules are compiled (so
nothing is parsed again per transition) or raises ``InvalidDefinition`` with AWS-style diagnostics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from .choice import Rule, RuleSyntaxError, compile_rule
from .paths import Path, PathSyntaxError, ReferencePath
from .templates import Template
from .timestamps import parse_ms

MAX_STATE_NAME = 80
IDENTITY = Path("$")
KEEP_ALL = ReferencePath("$")

_TOP_LEVEL = {"StartAt", "States", "Comment", "Version", "TimeoutSeconds", "QueryLanguage"}
_COMMON = {"Type", "Comment"}
_FLOW = {"Next", "End"}
_IO = {"InputPath", "OutputPath"}
_ALLOWED: dict[str, set[str]] = {
    "Pass": _COMMON | _FLOW | _IO | {"ResultPath", "Parameters", "Result"},
    "Choice": _COMMON | _IO | {"Choices", "Default"},
    "Wait": _COMMON | _FLOW | _IO | {"Seconds", "Timestamp", "SecondsPath", "TimestampPath"},
    "Succeed": _COMMON | _IO,
    "Fail": _COMMON | {"Error", "Cause", "ErrorPath", "CausePath"},
}
# Recognised States Language types that this build does not run yet.
_NOT_YET = {"Task", "Parallel", "Map"}


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


@dataclass(slots=True)
class State:
    name: str
    type: str
    next: str | None = None
    end: bool = False
    input_path: Path | None = IDENTITY  # None: the JSON null, which gives the state {} as input
    output_path: Path | None = IDENTITY


@dataclass(slots=True)
class PassState(State):
    parameters: Template | None = None
    result: Any = None
    has_result: bool = False
    result_path: ReferencePath | None = KEEP_ALL  # None: discard the result, pass the input on


@dataclass(slots=True)
class ChoiceState(State):
    choices: list[tuple[Rule, str]] = field(default_factory=list)
    default: str | None = None


@dataclass(slots=True)
class WaitState(State):
    seconds: int | None = None
    timestamp_ms: int | None = None
    seconds_path: Path | None = None
    timestamp_path: Path | None = None


@dataclass(slots=True)
class SucceedState(State):
    pass


@dataclass(slots=True)
class FailState(State):
    error: str | None = None
    cause: str | None = None
    error_path: Path | None = None
    cause_path: Path | None = None


@dataclass(slots=True)
class Definition:
    start_at: str
    states: dict[str, State]
    timeout_seconds: int | None = None
    comment: str | None = None


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

    def problem(self, code: str, message: str, location: str) -> None:
        self.problems.append(Diagnostic(code, message, location))

    def schema(self, message: str, location: str) -> None:
        self.problem("SCHEMA_VALIDATION_FAILED", message, location)

    def parse(self, raw: Any) -> Definition:
        if not isinstance(raw, dict):
            raise InvalidDefinition([Diagnostic("SCHEMA_VALIDATION_FAILED", "Definition must be a valid JSON object")])
        missing = [key for key in ("States", "StartAt") if key not in raw]
        if missing:
            self.schema(f"These fields are required: [{', '.join(missing)}]", "/")
        for key in sorted(set(raw) - _TOP_LEVEL):
            self.schema(f"Field '{key}' is not supported", f"/{key}")
        start_at = raw.get("StartAt")
        if "StartAt" in raw and not isinstance(start_at, str):
            self.schema("The value for the field 'StartAt' must be a STRING", "/StartAt")
        timeout = raw.get("TimeoutSeconds")
        if timeout is not None and (not _is_int(timeout) or timeout <= 0 or timeout > 99999999):
            self.schema("The value for the field 'TimeoutSeconds' must be a positive integer", "/TimeoutSeconds")
        if raw.get("QueryLanguage", "JSONPath") != "JSONPath":
            self.schema("statewright runs JSONPath definitions only so far", "/QueryLanguage")
        states = self.states(raw.get("States"), "/States")
        if isinstance(start_at, str) and states is not None and start_at not in states:
            self.problem("MISSING_TRANSITION_TARGET", f"Missing 'Next' target: {start_at}", "/StartAt")
        if states is not None and isinstance(start_at, str) and not self.problems:
            self.reachability(start_at, states)
        if self.problems:
            raise InvalidDefinition(self.problems)
        return Definition(start_at, states, timeout, raw.get("Comment"))

    def states(self, raw: Any, where: str) -> dict[str, State] | None:
        if raw is None:
            return None
        if not isinstance(raw, dict) or not raw:
            self.schema("The value for the field 'States' must be a non-empty OBJECT", where)
            return None
        compiled = {}
        for name, body in raw.items():
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
            found += [(target, f"{base}/Choices/{i}/Next") for i, (_, target) in enumerate(state.choices)]
            if state.default:
                found.append((state.default, f"{base}/Default"))
        return found

    def reachability(self, start_at: str, states: dict[str, State]) -> None:
        seen, todo = set(), [start_at]
        while todo:
            name = todo.pop()
            if name in seen or name not in states:
                continue
            seen.add(name)
            todo.extend(target for target, _ in self.targets(states[name], ""))
        for name in states:
            if name not in seen:
                self.problem("UNREACHABLE_STATE", f"State '{name}' is not reachable", f"/States/{name}")

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
        for key in sorted(set(raw) - _ALLOWED[kind]):
            self.schema(f"Field '{key}' is not supported", f"{where}/{key}")
        state = getattr(self, "pass_" if kind == "Pass" else kind.lower())(name, raw, where)
        if kind in ("Pass", "Wait"):
            self.flow(state, raw, where)
        if "InputPath" in raw:
            state.input_path = self.path(raw["InputPath"], f"{where}/InputPath", nullable=True)
        if "OutputPath" in raw:
            state.output_path = self.path(raw["OutputPath"], f"{where}/OutputPath", nullable=True)
        return state

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
        if "Parameters" in raw:
            try:
                state.parameters = Template(raw["Parameters"])
            except PathSyntaxError as exc:
                self.schema(str(exc), f"{where}/Parameters")
        if "Result" in raw:
            state.result, state.has_result = raw["Result"], True
        if "ResultPath" in raw:
            if raw["ResultPath"] is None:
                state.result_path = None
            else:
                try:
                    state.result_path = ReferencePath(raw["ResultPath"])
                except PathSyntaxError:
                    self.schema("The value for the field 'ResultPath' must be a valid reference path",
                                f"{where}/ResultPath")
        return state

    def choice(self, name: str, raw: dict, where: str) -> ChoiceState:
        state = ChoiceState(name, "Choice")
        choices = raw.get("Choices")
        if not isinstance(choices, list) or not choices:
            self.schema("The field 'Choices' is required and must be a non-empty array", f"{where}/Choices")
            choices = []
        for i, rule in enumerate(choices):
            try:
                state.choices.append((compile_rule(rule, f"{where}/Choices/{i}", True), rule["Next"]))
            except RuleSyntaxError as exc:
                self.schema(str(exc), exc.field)
        default = raw.get("Default")
        if default is not None and not isinstance(default, str):
            self.schema("The field 'Default' must be a string", f"{where}/Default")
        state.default = default if isinstance(default, str) else None
        return state

    def wait(self, name: str, raw: dict, where: str) -> WaitState:
        state = WaitState(name, "Wait")
        given = [key for key in ("Seconds", "Timestamp", "SecondsPath", "TimestampPath") if key in raw]
        if len(given) != 1:
            self.schema("A Wait state must have exactly one of Seconds, Timestamp, SecondsPath, TimestampPath",
                        where)
            return state
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
        for field_name, path_name in (("Error", "ErrorPath"), ("Cause", "CausePath")):
            if field_name in raw and path_name in raw:
                self.schema(f"A Fail state may have '{field_name}' or '{path_name}', not both", where)
            if field_name in raw and not isinstance(raw[field_name], str):
                self.schema(f"The field '{field_name}' must be a string", f"{where}/{field_name}")
        state.error = raw.get("Error") if isinstance(raw.get("Error"), str) else None
        state.cause = raw.get("Cause") if isinstance(raw.get("Cause"), str) else None
        if "ErrorPath" in raw:
            state.error_path = self.path(raw["ErrorPath"], f"{where}/ErrorPath")
        if "CausePath" in raw:
            state.cause_path = self.path(raw["CausePath"], f"{where}/CausePath")
        return state
