"""TestState: one state run once against an input, through the same pure decider as real executions.

A state given alone is wrapped in a one-state machine (its transition targets become placeholders), so the parser
validates it exactly as it would inside a state machine. Nothing is stored; Wait states do not wait. A Parallel or Map
is tested with a mock standing for its children (the API refuses one without), so no child runs here; a TestState
definition may therefore hold distributed Maps, which executions do not run yet (``distributed_map``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ..asl.definition import Definition, Diagnostic, InvalidDefinition, parse_definition
from ..asl.jsonio import dumps
from ..asl.states import State
from . import decide
from .execution import ExecutionState
from .outcomes import AttemptFailed, AttemptSucceeded, End, Fail, Wait

_INSPECTION_STEPS = ("afterInputPath", "afterParameters", "afterArguments", "afterItemsPointer", "afterItemsPath",
                     "afterItemSelector", "afterItemBatcher", "result", "afterResultSelector", "afterResultPath")
_INSPECTION_NUMBERS = ("maxConcurrency", "toleratedFailureCount", "toleratedFailurePercentage")  # not JSON text


@dataclass(slots=True)
class TestOutcome:
    status: str  # SUCCEEDED, FAILED, RETRIABLE or CAUGHT_ERROR
    output: str | None = None
    error: str | None = None
    cause: str | None = None
    next_state: str | None = None
    inspection: dict[str, Any] = field(default_factory=dict)


def definition_under_test(definition_text: str, state_name: str | None,
                          services: decide.Services | None = None) -> tuple[Definition, str]:
    """The definition to test and the name of the state in it; raises InvalidDefinition when the state (or the
    machine holding ``state_name``) is not valid."""
    if state_name is None:
        definition_text, state_name = _as_machine(definition_text)
    return parse_definition(definition_text,
                            resource_check=None if services is None else services.resource_check), state_name


def state_named(definition: Definition, name: str) -> State | None:
    """The state of that name, at the top level or inside a Parallel or Map (names are unique in a definition):
    AWS tests a state of a Map's ItemProcessor by name (LocalStack's AWS-validated test_base_state_name)."""
    return next((machine.states[name] for machine in definition.machines if name in machine.states), None)


def start_test(definition: Definition, state_name: str, input_text: str, variables: dict[str, Any],
               execution_arn: str, state_machine_arn: str, role_arn: str, now_ms: int,
               services: decide.Services | None = None, mock: AttemptSucceeded | AttemptFailed | None = None,
               retries_used: int = 0, context: dict[str, Any] | None = None, failures: int = 0,
               read: str | None = None) -> decide.OneStateRun:
    """Run the state once. A Task's attempt is left pending: the caller performs it (or, with a ``mock``, answers
    with it) and passes the result to ``complete``; a Parallel's or Map's mock stands for its children at once.
    ``context``: context object fields the caller gives; ``failures`` and ``read``: a distributed Map's failed
    iterations and the data its ItemReader read (``decide.OneStateRun``)."""
    execution = ExecutionState(execution_arn, state_machine_arn, execution_arn.rsplit(":", 1)[-1], "test",
                               role_arn, input_text, now_ms, 0)
    return decide.OneStateRun(execution, definition, state_name, orjson.loads(input_text), variables, now_ms,
                               services, retries_used, mock, context, failures, read)


def outcome_of(run: decide.OneStateRun, input_text: str) -> TestOutcome:
    """TestState's answer for a finished run."""
    trace, outcome = run.trace, run.outcome

    def text(value: Any) -> str:  # a mocked result passed on untouched keeps its text, as AWS echoes it
        if run.mocked_text is not None and value == run.mocked_text[0]:
            return run.mocked_text[1]
        return dumps(value)
    inspection = {"input": input_text}
    inspection.update({step: text(trace[step]) for step in _INSPECTION_STEPS if step in trace})
    inspection.update({name: trace[name] for name in _INSPECTION_NUMBERS if name in trace})
    if "errorDetails" in trace:  # which retrier or catcher took the error (and the retry's backoff)
        inspection["errorDetails"] = trace["errorDetails"]
    for key in ("request", "response"):  # an HTTP Task's, at inspection level TRACE
        if key in trace:
            inspection[key] = trace[key]
    if run.variables:
        inspection["variables"] = dumps(run.variables)
    caught = trace.get("error")
    if isinstance(outcome, Wait):  # only a retry waits once the attempt is done
        return TestOutcome("RETRIABLE", error=caught[0], cause=caught[1], inspection=inspection)
    if isinstance(outcome, Fail):
        return TestOutcome("FAILED", error=outcome.error, cause=outcome.cause, inspection=inspection)
    if isinstance(outcome, End):
        return TestOutcome("SUCCEEDED", text(outcome.output), inspection=inspection)
    output = text(outcome.data)
    if caught is not None:
        return TestOutcome("CAUGHT_ERROR", output, caught[0], caught[1], outcome.state, inspection)
    return TestOutcome("SUCCEEDED", output, next_state=outcome.state, inspection=inspection)


def _as_machine(state_text: str) -> tuple[str, str]:
    """Wrap one state in a machine whose other states are placeholders for its transition targets. Its name is
    TestState unless a state inside it (a Map's or a branch's) has that name: AWS tests such a Map (LocalStack's
    AWS-validated test_base_map_state_inspect)."""
    try:
        state = orjson.loads(state_text)
    except orjson.JSONDecodeError as exc:
        raise InvalidDefinition([Diagnostic("INVALID_JSON_DESCRIPTION", str(exc))]) from None
    if not isinstance(state, dict):
        raise InvalidDefinition([Diagnostic("SCHEMA_VALIDATION_FAILED", "The state must be a JSON object")])
    inner = _inner_names(state)
    name = next(f"TestState{suffix}" for suffix in ("", *range(1, len(inner) + 2)) if f"TestState{suffix}" not in inner)
    if "Type" not in state and "States" in state:  # ours: AWS's words for a whole machine without stateName are
        # not known (it would answer as for a state without a Type)
        raise InvalidDefinition([Diagnostic("SCHEMA_VALIDATION_FAILED", "The definition is a whole state machine "
                                            "(it has States): give stateName, the name of the state to test")])
    targets = [state.get("Next"), state.get("Default")]
    targets += [rule.get("Next") for rule in state.get("Choices", []) if isinstance(rule, dict)]
    targets += [rule.get("Next") for rule in state.get("Catch", []) if isinstance(rule, dict)]
    states = {target: {"Type": "Succeed"} for target in targets if isinstance(target, str) and target != name}
    return dumps({"StartAt": name, "States": {name: state, **states}}), name


def _inner_names(value: Any) -> set[str]:
    """The names of the states nested in a state (its branches', its ItemProcessor's or Iterator's)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "States" and isinstance(item, dict):
                found.update(name for name in item if isinstance(name, str))
            found |= _inner_names(item)
    elif isinstance(value, list):
        for item in value:
            found |= _inner_names(item)
    return found
