"""Parse and validate a state machine definition into compiled states.

``parse_definition`` either returns a ``Definition`` whose paths, templates and Choice rules are compiled (so
nothing is parsed again per transition) or raises ``InvalidDefinition`` with AWS-style diagnostics
(``Diagnostic(code, message, location)``), the ones ValidateStateMachineDefinition lists and CreateStateMachine
joins into its InvalidDefinition message.

Validation runs in two phases, as AWS's answers suggest: the schema phase (fields, types, values, expressions,
resources) and, only when that found nothing, the graph phase (duplicate state names, transition targets,
unreachable states, a terminal state). So a definition missing StartAt is not also told that its states are
unreachable. Locations are JSON-pointer-like, with array indices in brackets: ``/States/P/Branches[0]/States/A``,
``/States/C/Choices[1]/Next``.

Pure: this module reads no clock and does no I/O; it must not import from the engine, the store or the API.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from .definition_rules import SECONDS_MAX, RuleParsing
from .definition_tasks import TaskParsing
from .diagnostics import (
    DUPLICATE_NAME,
    INVALID_NAME,
    MISSING_END,
    MISSING_TARGET,
    SCHEMA,
    TOO_DEEPLY_NESTED,
    UNSUPPORTED_FEATURE,
    Diagnostic,
    InvalidDefinition,
    expected,
    language_only,
    load_json,
    one_of,
    only_one,
)
from .distributed import EXECUTION_TYPES
from .distributed import FIELDS as DISTRIBUTED_FIELDS
from .distributed import parse as parse_distributed
from .intrinsics import Intrinsic, IntrinsicSyntaxError, compile_intrinsic
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
    WaitState,
)
from .templates import Template, compile_dynamic
from .timestamps import parse_ms

__all__ = ["Definition", "Diagnostic", "InvalidDefinition", "Machine", "State", "parse_definition"]

STATE_NAME_MAX = 80
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LANGUAGES = ("JSONPath", "JSONata")
_TYPES = "[Task, Wait, Pass, Succeed, Fail, Choice, Parallel, Map]"

_TOP_LEVEL = {"StartAt", "States", "Comment", "Version", "TimeoutSeconds", "QueryLanguage"}
_MACHINE_FIELDS = {"StartAt", "States", "Comment"}
_COMMON = {"Type", "Comment", "QueryLanguage"}
_FLOW = {"Next", "End"}
_IO = {"InputPath", "OutputPath"}
_FANOUT = _COMMON | _FLOW | _IO | {"ResultPath", "ResultSelector", "Retry", "Catch", "Assign"}
# The fields each state type allows in JSONPath states.
_ALLOWED: dict[str, set[str]] = {
    "Pass": _COMMON | _FLOW | _IO | {"ResultPath", "Parameters", "Result", "Assign"},
    "Choice": _COMMON | _IO | {"Choices", "Default", "Assign"},
    "Wait": _COMMON | _FLOW | _IO | {"Seconds", "Timestamp", "SecondsPath", "TimestampPath", "Assign"},
    "Succeed": _COMMON | _IO,
    "Fail": _COMMON | {"Error", "Cause", "ErrorPath", "CausePath"},
    "Parallel": _FANOUT | {"Branches", "Parameters"},
    "Map": _FANOUT | {"ItemProcessor", "Iterator", "ItemsPath", "ItemSelector", "Parameters", "MaxConcurrency",
                      "MaxConcurrencyPath"} | DISTRIBUTED_FIELDS,
    "Task": _FANOUT | {"Resource", "Parameters", "TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds",
                       "HeartbeatSecondsPath", "Credentials"},
}
# In JSONata states the JSONPath fields give way to Arguments, Output, Items, Condition, ... (expressions).
_JSONPATH_ONLY = {"InputPath", "OutputPath", "Parameters", "ResultSelector", "ResultPath", "Result", "ItemsPath",
                  "SecondsPath", "TimestampPath", "ErrorPath", "CausePath", "TimeoutSecondsPath",
                  "HeartbeatSecondsPath", "MaxConcurrencyPath", "ToleratedFailureCountPath",
                  "ToleratedFailurePercentagePath"}
_ALLOWED_JSONATA: dict[str, set[str]] = {kind: fields - _JSONPATH_ONLY for kind, fields in _ALLOWED.items()}
for _kind in ("Pass", "Choice", "Wait", "Succeed", "Task", "Parallel", "Map"):
    _ALLOWED_JSONATA[_kind].add("Output")
for _kind in ("Task", "Parallel"):
    _ALLOWED_JSONATA[_kind].add("Arguments")
_ALLOWED_JSONATA["Map"].add("Items")
_JSONATA_FIELDS = ("Arguments", "Output", "Assign", "Items", "ItemSelector", "Seconds", "Timestamp", "Error", "Cause",
                   "TimeoutSeconds", "HeartbeatSeconds", "MaxConcurrency", "Credentials")
# Recognised States Language types that this build does not run yet.
_NOT_YET: set[str] = set()
# What checks an AWS resource against the services and operations the SDK models: (integration, action, pattern,
# the names of the Task's Parameters or Arguments, or None when they are computed as a whole, and the values of
# those written literally) -> the problems found, each as (the field it is in: "Resource" or "Parameters",
# message). The caller injects it: the language layer knows no service models.
ResourceCheck = Callable[[str, str, str, Collection[str] | None, dict[str, Any]], list[tuple[str, str]]]


def parse_definition(text: str, *, resource_check: ResourceCheck | None = None, express: bool = False) -> Definition:
    """Compile ``text`` (a JSON definition) or raise InvalidDefinition listing what is wrong. ``resource_check``:
    how AWS resources are checked (without it they are taken as written). ``express``: the rules of an EXPRESS state
    machine too (no activities, no .sync or .waitForTaskToken). A Map in DISTRIBUTED mode is compiled with its
    distributed fields (``asl/distributed.py``)."""
    raw, duplicates = load_json(text)
    try:
        return _Parser(duplicates, resource_check, express).parse(raw)
    except RecursionError:
        raise InvalidDefinition([Diagnostic(TOO_DEEPLY_NESTED, "The states are too deeply nested")]) from None


# -- the parser


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _terminal(state: State) -> bool:
    return state.end or isinstance(state, SucceedState | FailState)


def _dynamic_problem(value: Any) -> str | None:
    """Why a ``.$`` value (or ErrorPath, CausePath) is neither a path nor an intrinsic function, or None."""
    if not isinstance(value, str):
        return "the value must be a string"
    try:
        if value.startswith("States."):
            compile_intrinsic(value)
        else:
            Path(value)
    except (IntrinsicSyntaxError, PathSyntaxError) as exc:
        return str(exc)
    return None


@dataclass(slots=True)
class _Scope:
    """One States collection as the graph phase sees it."""

    where: str  # "" for the top level, else e.g. /States/P/Branches[0]
    start_at: str | None
    states: dict[str, State] = field(default_factory=dict)

    @property
    def top(self) -> bool:
        return not self.where


class _Parser(RuleParsing, TaskParsing):
    def __init__(self, duplicates: dict[int, list[str]], resource_check: ResourceCheck | None = None,
                 express: bool = False) -> None:
        self.duplicates = duplicates  # id(object) -> keys the JSON text repeats in it
        self.resource_check = resource_check
        self.express = express
        self.labels: set[str] = set()  # the distributed Maps' Labels so far: each names its own runs
        self.problems: list[Diagnostic] = []  # the schema phase
        self.graph_problems: list[Diagnostic] = []  # the graph phase, reported only when the schema phase is clean
        self.machines: list[Machine] = []
        self.scopes: list[_Scope] = []  # pre-order
        self.names: set[str] = set()
        self.language = self.top_language = "JSONPath"  # of the state being parsed, and of the whole machine

    def problem(self, code: str, message: str, location: str) -> None:
        self.problems.append(Diagnostic(code, message, location))

    def schema(self, message: str, location: str) -> None:
        self.problem(SCHEMA, message, location)

    def graph(self, code: str, message: str, location: str) -> None:
        self.graph_problems.append(Diagnostic(code, message, location))

    # -- the machine and its States

    def parse(self, raw: Any) -> Definition:
        if not isinstance(raw, dict):
            raise InvalidDefinition([Diagnostic(SCHEMA, "Definition must be a valid JSON object")])
        self.top_language, deferred = self.language_field(raw, "")
        top = self.machine(raw, "", _TOP_LEVEL, deferred)
        if self.problems:
            raise InvalidDefinition(self.problems)
        self.check_graph()
        if self.graph_problems:
            raise InvalidDefinition(self.graph_problems)
        for index, machine in enumerate(self.machines):
            machine.index = index
        timeout = raw.get("TimeoutSeconds")
        return Definition(top.start_at, top.states, timeout, raw.get("Comment"), self.machines)

    def top_fields(self, raw: dict) -> None:
        for key in ("Comment", "Version"):
            if key in raw and not isinstance(raw[key], str):
                self.schema(expected("STRING"), f"/{key}")
        if "TimeoutSeconds" in raw:
            self.integer(raw, "TimeoutSeconds", "", 1, SECONDS_MAX)

    def language_field(self, raw: dict, where: str) -> tuple[str, list[Diagnostic]]:
        """The QueryLanguage ``raw`` sets (None when absent) and the problems with its value. As measured on AWS,
        any value but exactly "JSONPath" makes the state JSONata, and a bad value is reported at the field."""
        if "QueryLanguage" not in raw:
            return self.top_language if where else "JSONPath", []
        value = raw["QueryLanguage"]
        if value in _LANGUAGES:
            return value, []
        message = expected("STRING") if not isinstance(value, str) else one_of(_LANGUAGES)
        return "JSONata", [Diagnostic(SCHEMA, message, f"{where}/QueryLanguage")]

    def machine(self, raw: dict, where: str, allowed: set[str], deferred: list[Diagnostic] | None = None) -> Machine:
        """One States collection; nested ones (branches, item processors) register themselves after their states,
        the top level first, so machine indices stay as the engine stores them."""
        location = where or "/"
        missing = [key for key in ("States", "StartAt") if key not in raw]
        if missing:
            self.schema(f"These fields are required: [{', '.join(missing)}]", location)
        self.unknown_fields(raw, allowed, location)
        self.problems.extend(deferred or ())
        if not where:
            self.top_fields(raw)
        elif "Comment" in raw and not isinstance(raw["Comment"], str):
            self.schema(expected("STRING"), f"{where}/Comment")
        start_at = raw.get("StartAt")
        if "StartAt" in raw and not isinstance(start_at, str):
            self.schema(expected("STRING"), f"{where}/StartAt")
            start_at = None
        machine = Machine(start_at or "", {})
        if not where:
            self.machines.insert(0, machine)
        scope = _Scope(where, start_at)
        self.scopes.append(scope)
        if "States" in raw:
            machine.states = scope.states = self.states(raw["States"], f"{where}/States")
        if where:
            self.machines.append(machine)
        return machine

    def states(self, raw: Any, where: str) -> dict[str, State]:
        if not isinstance(raw, dict):
            self.schema(expected("OBJECT"), where)
            return {}
        for name in self.duplicates.get(id(raw), ()):
            self.graph(DUPLICATE_NAME, f"Duplicate State name: '{name}'", f"{where}/{name}")
        compiled = {}
        for name, body in raw.items():
            if name in self.names:
                self.graph(DUPLICATE_NAME, f"Duplicate State name: '{name}'", f"{where}/{name}")
            self.names.add(name)
            state = self.state(name, body, f"{where}/{name}")
            if state is not None:
                compiled[name] = state
        return compiled

    # -- the graph phase

    def check_graph(self) -> None:
        """Transition targets that name no state, states nothing transitions to, and a top level without a
        terminal state. As on AWS, a state is reachable when its StartAt or any transition in its States
        collection names it; a missing terminal state silences the reachability report of the top level."""
        no_terminal = False
        for scope in self.scopes:
            targets = [(scope.start_at, f"{scope.where}/StartAt")] if scope.start_at is not None else []
            for state in scope.states.values():
                targets += self.targets(state, f"{scope.where}/States/{state.name}")
            dangling = [(target, location) for target, location in targets if target not in scope.states]
            for target, location in dangling:
                self.graph(MISSING_TARGET, f"Missing 'Next' target: {target}", location)
            # A dangling target may be the end the author meant, so it alone is reported. (One emulator reports
            # AWS adding MISSING_END_STATE here too; test_api_state_machines pins the single diagnostic.)
            if scope.top and not dangling and not any(map(_terminal, scope.states.values())):
                no_terminal = True
                continue
            targeted = {target for target, _ in targets}
            for name in scope.states:
                if name not in targeted:
                    self.graph(MISSING_TARGET, f'State "{name}" is not reachable.', f"{scope.where}/States/{name}")
        if no_terminal:
            self.graph(MISSING_END, "Workflow has no terminal state", "")

    @staticmethod
    def targets(state: State, where: str) -> list[tuple[str, str]]:
        found = [(state.next, f"{where}/Next")] if state.next else []
        if isinstance(state, ChoiceState):
            found += [(target, f"{where}/Choices[{i}]/Next") for i, (_, target, _, _) in enumerate(state.choices)]
            if state.default is not None:
                found.append((state.default, f"{where}/Default"))
        if isinstance(state, ResultState):
            found += [(catcher.next, f"{where}/Catch[{i}]/Next") for i, catcher in enumerate(state.catch)]
        return found

    # -- one state

    def state(self, name: str, raw: Any, where: str) -> State | None:
        if not name:
            self.problem(INVALID_NAME, "Invalid State name: State name cannot be empty", where)
        elif len(name) > STATE_NAME_MAX:
            self.problem(INVALID_NAME, f"Invalid State name: State exceeds the {STATE_NAME_MAX}-character limit "
                         "allowed by the service", where)
        if not isinstance(raw, dict):
            self.schema(expected("OBJECT"), where)
            return None
        if "Type" not in raw:
            self.schema("These fields are required: [Type]", where)
            return None
        kind = raw["Type"]
        if isinstance(kind, str) and kind in _NOT_YET:
            self.problem(UNSUPPORTED_FEATURE, f"statewright does not run {kind} states yet", f"{where}/Type")
            return None
        if not isinstance(kind, str) or kind not in _ALLOWED:
            self.schema(f"The field 'Type' should have one of these values: {_TYPES}", f"{where}/Type")
            return None
        language, deferred = self.language_field(raw, where)
        downgraded = raw.get("QueryLanguage") == "JSONPath" and self.top_language == "JSONata"
        if downgraded:
            self.schema("'QueryLanguage' can not be 'JSONPath' if set to 'JSONata' for whole state machine", where)
        outer, self.language = self.language, language
        try:
            self.state_fields(kind, raw, where, downgraded)
            self.problems.extend(deferred)
            if "Comment" in raw and not isinstance(raw["Comment"], str):
                self.schema(expected("STRING"), f"{where}/Comment")
            state = getattr(self, "pass_" if kind == "Pass" else kind.lower())(name, raw, where)
            state.query_language = language
            if kind in ("Pass", "Wait", "Parallel", "Map", "Task"):
                self.flow(state, raw, where)
            if language == "JSONata":
                state.jsonata = self.expressions(raw, _JSONATA_FIELDS, where)
                return state
            if "InputPath" in raw:
                state.input_path = self.path(raw, "InputPath", where, nullable=True)
            if "OutputPath" in raw:
                state.output_path = self.path(raw, "OutputPath", where, nullable=True)
            state.assign = self.assign(raw, where)
            return state
        finally:
            self.language = outer

    def state_fields(self, kind: str, raw: dict, where: str, downgraded: bool) -> None:
        """Fields the state type does not have, or has only in the other query language; located at the state,
        as AWS locates them. A state that wrongly downgrades to JSONPath is not also told about its JSONata
        fields (measured on AWS)."""
        if self.language == "JSONata":
            allowed, other = _ALLOWED_JSONATA[kind], _ALLOWED[kind]
        else:
            allowed, other = _ALLOWED[kind], _ALLOWED_JSONATA[kind]
        for key in raw:
            if key in allowed:
                continue
            if key in other:
                if not downgraded:
                    self.schema(language_only(self.language, key), where)
            else:
                self.schema(f"Field '{key}' is not supported", where)

    def unknown_fields(self, raw: dict, allowed: set[str], where: str, other_language: Collection[str] = ()) -> bool:
        clean = True
        for key in raw:
            if key in other_language:
                self.schema(language_only(self.language, key), where)
            elif key not in allowed:
                self.schema(f"Field '{key}' is not supported", where)
            else:
                continue
            clean = False
        return clean

    def flow(self, state: State, raw: dict, where: str) -> None:
        nxt, end = raw.get("Next"), raw.get("End")
        if "End" in raw and not isinstance(end, bool):
            self.schema(expected("BOOLEAN"), f"{where}/End")
        if "Next" in raw and not isinstance(nxt, str):
            self.schema(expected("STRING"), f"{where}/Next")
        elif isinstance(nxt, str) and end is True:
            self.schema(only_one(["Next", "End"]), where)
        elif "Next" not in raw and end is not True and ("End" not in raw or isinstance(end, bool)):
            self.schema("One of the following fields is required: [Next, End]", where)
        state.next = nxt if isinstance(nxt, str) else None
        state.end = end is True

    # -- values

    def integer(self, raw: dict, key: str, where: str, minimum: int, maximum: int | None) -> int | None:
        value = raw[key]
        location = f"{where}/{key}"
        if not _is_int(value):
            self.schema(expected("INTEGER"), location)
        elif value < minimum:
            self.schema(f"Minimum value is {minimum}", location)
        elif maximum is not None and value > maximum:
            self.schema(f"Maximum value is {maximum}", location)
        else:
            return value
        return None

    def path(self, raw: dict, key: str, where: str, nullable: bool = False) -> Path | None:
        value = raw[key]
        if value is None and nullable:
            return None
        location = f"{where}/{key}"
        if not isinstance(value, str):
            self.schema(expected("STRING"), location)
            return IDENTITY
        try:
            return Path(value)
        except PathSyntaxError as exc:
            self.schema(f"The value for the field '{key}' must be a valid JSONPath ({exc})", location)
            return IDENTITY

    def dynamic(self, raw: dict, key: str, where: str) -> Path | Intrinsic | None:
        problem = _dynamic_problem(raw[key])
        if problem is not None:
            self.schema(f"The value for the field '{key}' must be a valid JSONPath or a valid intrinsic function "
                        f"call ({problem})", f"{where}/{key}")
            return None
        return compile_dynamic(raw[key], f"{where}/{key}")

    def template(self, raw: dict, key: str, where: str) -> Template | None:
        """A payload template (Parameters, ResultSelector, ItemSelector, a JSONPath Assign): every ``name.$``
        value must be a path or an intrinsic function."""
        if key not in raw:
            return None
        if not self.dynamic_fields(raw[key], f"{where}/{key}"):
            return None
        try:
            return Template(raw[key])
        except PathSyntaxError as exc:  # dynamic_fields found nothing, so this is not expected
            self.schema(str(exc), f"{where}/{key}")
            return None

    def dynamic_fields(self, value: Any, where: str) -> bool:
        clean = True
        if isinstance(value, dict):
            for key, item in value.items():
                if not key.endswith(".$"):
                    clean = self.dynamic_fields(item, f"{where}/{key}") and clean
                    continue
                problem = _dynamic_problem(item)
                if problem is not None:
                    self.schema(f"The value for the field '{key}' must be a valid JSONPath or a valid intrinsic "
                                f"function call ({problem})", f"{where}/{key}")
                    clean = False
        elif isinstance(value, list):
            for index, item in enumerate(value):
                clean = self.dynamic_fields(item, f"{where}[{index}]") and clean
        return clean

    def result_path(self, raw: dict, where: str) -> ReferencePath | None:
        if "ResultPath" not in raw:
            return KEEP_ALL
        value = raw["ResultPath"]
        if value is None:
            return None
        if not isinstance(value, str):
            self.schema(expected("STRING"), f"{where}/ResultPath")
            return KEEP_ALL
        try:
            return ReferencePath(value)
        except PathSyntaxError:
            self.schema("The value for the field 'ResultPath' must be a valid ReferencePath", f"{where}/ResultPath")
            return KEEP_ALL

    def expressions(self, raw: dict, fields: tuple[str, ...], where: str, within: str = "") -> dict[str, CompiledValue]:
        """The JSONata-capable fields present in ``raw``, each compiled once; ``within`` leads the field's name in
        causes when ``raw`` is part of the state (a Choice rule's ``Choices[1]/``)."""
        compiled = {}
        for key in fields:
            if key in raw:
                if key == "Assign":
                    self.check_variable_names(raw["Assign"], f"{where}/Assign")
                try:
                    compiled[key] = compile_value(raw[key], within + key)
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
            self.schema(expected("OBJECT"), where)
            return False
        for key in value:
            name = key[:-2] if key.endswith(".$") and self.language == "JSONPath" else key
            if not _VARIABLE_NAME.match(name) or name == "states":
                self.schema(f"'{name}' is not a valid variable name", f"{where}/{key}")
        return True

    # -- Pass, Choice, Wait, Succeed, Fail

    def pass_(self, name: str, raw: dict, where: str) -> PassState:
        state = PassState(name, "Pass")
        state.parameters = self.template(raw, "Parameters", where)
        if "Result" in raw:
            state.result, state.has_result = raw["Result"], True
        state.result_path = self.result_path(raw, where)
        return state

    def wait(self, name: str, raw: dict, where: str) -> WaitState:
        state = WaitState(name, "Wait")
        fields = ["Seconds", "Timestamp"] + (["SecondsPath", "TimestampPath"] if self.language == "JSONPath" else [])
        given = [key for key in fields if key in raw]
        if not given:
            if not {"SecondsPath", "TimestampPath"} & set(raw):  # in JSONata states those are reported already
                self.schema(f"One of the following fields is required: [{', '.join(fields)}]", where)
            return state
        if len(given) > 1:
            self.schema(only_one(given), where)
            return state
        key, value = given[0], raw[given[0]]
        if self.language == "JSONata" and is_expression(value):
            return state  # evaluated when the state runs
        if key == "Seconds":
            state.seconds = self.integer(raw, "Seconds", where, 0, SECONDS_MAX)
        elif key == "Timestamp":
            if not isinstance(value, str):
                self.schema(expected("STRING"), f"{where}/Timestamp")
                return state
            state.timestamp_ms = parse_ms(value)
            if state.timestamp_ms is None:
                self.schema("String does not match RFC3339 timestamp", f"{where}/Timestamp")  # AWS's words
        elif key == "SecondsPath":
            state.seconds_path = self.path(raw, "SecondsPath", where)
        else:
            state.timestamp_path = self.path(raw, "TimestampPath", where)
        return state

    def succeed(self, name: str, raw: dict, where: str) -> SucceedState:
        return SucceedState(name, "Succeed")

    def fail(self, name: str, raw: dict, where: str) -> FailState:
        state = FailState(name, "Fail")
        for key in ("Error", "Cause"):
            if key in raw and not isinstance(raw[key], str):
                self.schema(expected("STRING"), f"{where}/{key}")
        if self.language == "JSONata":
            return state  # Error and Cause are literals or expressions, compiled with the other JSONata fields
        for key in ("Error", "Cause"):
            if key in raw and f"{key}Path" in raw:
                self.schema(only_one([key, f"{key}Path"]), where)
        state.error = raw.get("Error") if isinstance(raw.get("Error"), str) else None
        state.cause = raw.get("Cause") if isinstance(raw.get("Cause"), str) else None
        if "ErrorPath" in raw:
            state.error_path = self.dynamic(raw, "ErrorPath", where)
        if "CausePath" in raw:
            state.cause_path = self.dynamic(raw, "CausePath", where)
        return state

    # -- Task

    def seconds(self, raw: dict, key: str, where: str) -> tuple[int | None, Path | None]:
        """TimeoutSeconds / HeartbeatSeconds, or their Path variants (one of the two at most)."""
        if self.language == "JSONata" and is_expression(raw.get(key)):
            return None, None  # evaluated when the state runs
        path_key = f"{key}Path"
        if key in raw and path_key in raw:
            self.schema(only_one([key, path_key]), where)
        if path_key in raw and self.language == "JSONPath":
            return None, self.path(raw, path_key, where)
        if key not in raw:
            return None, None
        return self.integer(raw, key, where, 1, SECONDS_MAX), None

    # -- Retry and Catch

    def result_fields(self, state: ResultState, raw: dict, where: str) -> None:
        state.result_selector = self.template(raw, "ResultSelector", where)
        state.result_path = self.result_path(raw, where)
        state.retry = [self.retrier(rule, at) for rule, at in self.rules(raw, "Retry", where)]
        state.catch = [self.catcher(rule, at) for rule, at in self.rules(raw, "Catch", where)]

    def parallel(self, name: str, raw: dict, where: str) -> ParallelState:
        state = ParallelState(name, "Parallel")
        self.result_fields(state, raw, where)
        state.parameters = self.template(raw, "Parameters", where)
        branches = raw.get("Branches")
        if "Branches" not in raw:
            self.schema("These fields are required: [Branches]", where)
            branches = []
        elif not isinstance(branches, list):
            self.schema(expected("ARRAY"), f"{where}/Branches")
            branches = []
        elif not branches:
            self.schema("Value cannot be empty", f"{where}/Branches")
        for i, branch in enumerate(branches):
            at = f"{where}/Branches[{i}]"
            if not isinstance(branch, dict):
                self.schema(expected("OBJECT"), at)
                continue
            state.branches.append(self.machine(branch, at, _MACHINE_FIELDS))
        return state

    def map(self, name: str, raw: dict, where: str) -> MapState:
        state = MapState(name, "Map")
        self.result_fields(state, raw, where)
        language_fields = _ALLOWED_JSONATA["Map"] if self.language == "JSONata" else _ALLOWED["Map"]
        distributed_fields = sorted(DISTRIBUTED_FIELDS & language_fields & set(raw))
        if "ItemSelector" in raw and "Parameters" in raw:
            self.schema(only_one(["ItemSelector", "Parameters"]), where)
        state.item_selector = self.template(raw, "ItemSelector" if "ItemSelector" in raw else "Parameters", where)
        if "ItemsPath" in raw:
            state.items_path = self.path(raw, "ItemsPath", where, nullable=True)
        if "MaxConcurrency" in raw and "MaxConcurrencyPath" in raw:
            self.schema(only_one(["MaxConcurrency", "MaxConcurrencyPath"]), where)
        concurrency = raw.get("MaxConcurrency", 0)
        if "MaxConcurrency" in raw and not (self.language == "JSONata" and is_expression(concurrency)):
            concurrency = self.integer(raw, "MaxConcurrency", where, 0, None)
        state.max_concurrency = concurrency if _is_int(concurrency) else 0
        if "MaxConcurrencyPath" in raw and self.language == "JSONPath":
            state.max_concurrency_path = self.path(raw, "MaxConcurrencyPath", where)
        if "ItemProcessor" in raw and "Iterator" in raw:
            self.schema(only_one(["ItemProcessor", "Iterator"]), where)
        if "ItemProcessor" not in raw and "Iterator" not in raw:
            self.schema("These fields are required: [ItemProcessor]", where)
            return state
        key = "ItemProcessor" if "ItemProcessor" in raw else "Iterator"
        processor = raw[key]
        if not isinstance(processor, dict):
            self.schema(expected("OBJECT"), f"{where}/{key}")
            return state
        # The legacy Iterator takes a ProcessorConfig too (AWS runs a distributed Map spelled so: LocalStack's
        # AWS-validated test_map_state_legacy_config_distributed)
        allowed = _MACHINE_FIELDS | {"ProcessorConfig"}
        mode, execution_type = self.processor_config(processor, f"{where}/{key}")
        express, self.express = self.express, self.express or execution_type == "EXPRESS"  # Express children's
        try:  # rules (no activities, .sync or .waitForTaskToken) hold in an EXPRESS processor
            state.processor = self.machine(processor, f"{where}/{key}", allowed)
        finally:
            self.express = express
        if mode == "DISTRIBUTED":
            state.distributed = parse_distributed(self, raw, where)
            state.distributed.execution_type = execution_type
        else:
            for name in distributed_fields:
                self.schema(f"The field '{name}' is supported only when the ItemProcessor's ProcessorConfig Mode is "
                            "'DISTRIBUTED'", where)
        return state

    def processor_config(self, processor: dict, where: str) -> tuple[str, str]:
        """The Map's mode, INLINE or DISTRIBUTED (an invalid one is reported, and taken as INLINE), and its
        children's ExecutionType."""
        if "ProcessorConfig" not in processor:
            return "INLINE", "STANDARD"
        config = processor["ProcessorConfig"]
        where = f"{where}/ProcessorConfig"
        if not isinstance(config, dict):
            self.schema(expected("OBJECT"), where)
            return "INLINE", "STANDARD"
        self.unknown_fields(config, {"Mode", "ExecutionType"}, where)
        mode = config.get("Mode", "INLINE")
        if mode not in ("INLINE", "DISTRIBUTED"):
            self.schema(one_of(("INLINE", "DISTRIBUTED")), f"{where}/Mode")
            return "INLINE", "STANDARD"
        execution_type = config.get("ExecutionType", "STANDARD")
        if mode == "DISTRIBUTED" and "ExecutionType" not in config:  # required in DISTRIBUTED mode (AWS's
            # ItemProcessor documentation)
            self.schema("These fields are required: [ExecutionType]", where)
        elif mode == "DISTRIBUTED" and execution_type not in EXECUTION_TYPES:
            self.schema(one_of(EXECUTION_TYPES), f"{where}/ExecutionType")
        return mode, execution_type


EXPRESS_SECONDS_MAX = 300  # an Express execution's longest run, five minutes


def processor_definition(definition: Definition, map_state: str) -> Definition:
    """What a distributed Map's children run: the Map's ItemProcessor as a definition of its own (an EXPRESS
    processor's children time out after Express's five minutes). Its nested machines keep their places in
    ``machines`` (only the top level's is the processor's now), so a flow's machine index means the same in both."""
    state = next(machine.states[map_state] for machine in definition.machines if map_state in machine.states)
    processor = state.processor
    machines = list(definition.machines)
    machines[0] = Machine(processor.start_at, processor.states, 0)
    express = state.distributed is not None and state.distributed.execution_type == "EXPRESS"
    return Definition(processor.start_at, processor.states, EXPRESS_SECONDS_MAX if express else None,
                      machines=machines)


def raw_state(definition: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The state of that name in a definition as JSON (``json.loads``'d), at any depth: inside Parallel branches
    and Map processors too (state names are unique in a definition). None: no such state."""
    def find(states: Any) -> dict[str, Any] | None:
        for found_name, state in (states.items() if isinstance(states, dict) else ()):
            if not isinstance(state, dict):
                continue
            if found_name == name:
                return state
            for machine in [state.get("ItemProcessor", state.get("Iterator")), *state.get("Branches", [])]:
                found = find(machine.get("States")) if isinstance(machine, dict) else None
                if found is not None:
                    return found
        return None
    return find(definition.get("States"))
