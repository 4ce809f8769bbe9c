"""The decider: pure functions from (mutable state, command, definition, now_ms) to a Decision.

A Decision carries the history events to append, the new mutable state and the effects (timers to write or
delete). Runs of pure states (Pass, Choice, and a Wait that is already due) are evaluated here in one go, so a
chain of them is committed together. Nothing here reads a clock or touches storage.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ..asl import errors
from ..asl.dataflow import place_result, select
from ..asl.definition import ChoiceState, Definition, FailState, PassState, State, SucceedState, WaitState
from ..asl.errors import StatesError
from ..asl.jsonio import dumps, loads
from ..asl.timestamps import format_ms, parse_ms
from .execution import ABORTED, FAILED, SUCCEEDED, TIMED_OUT, ExecutionState

MAX_PAYLOAD_BYTES = 262_144
MAX_HISTORY_EVENTS = 25_000
EXECUTION_TIMEOUT_TIMER = "execution-timeout"
_NO_DETAILS = {"truncated": False}


@dataclass(slots=True)
class Decision:
    state: ExecutionState
    events: list[dict[str, Any]] = field(default_factory=list)
    timers_added: list[tuple[str, int]] = field(default_factory=list)  # (timer id, fire_at_ms)
    timers_removed: list[tuple[str, int]] = field(default_factory=list)

    @property
    def closed(self) -> bool:
        return not self.state.is_open


def start(execution: ExecutionState, definition: Definition, now_ms: int) -> Decision:
    """Open a new execution (version 0, no events yet) and run it until it waits or closes."""
    decision = Decision(copy.copy(execution))
    step = _Step(decision, definition, now_ms)
    step.emit("ExecutionStarted", "executionStartedEventDetails",
              {"input": execution.input, "inputDetails": _NO_DETAILS, "roleArn": execution.role_arn})
    if definition.timeout_seconds is not None:
        step.add_timer(EXECUTION_TIMEOUT_TIMER, execution.start_ms + definition.timeout_seconds * 1000)
    step.known_value, step.known_text = loads(execution.input), execution.input
    step.run(definition.start_at, step.known_value, previous_event_id=0)
    return decision


def fire_timer(execution: ExecutionState, definition: Definition, timer_id: str, now_ms: int) -> Decision | None:
    """Apply a fired timer, or return None when the execution no longer expects it."""
    if not execution.is_open or timer_id not in execution.timers:
        return None
    decision = Decision(_mutable_copy(execution))
    step = _Step(decision, definition, now_ms)
    step.remove_timer(timer_id)
    if timer_id == EXECUTION_TIMEOUT_TIMER:
        step.close(TIMED_OUT, "ExecutionTimedOut", "executionTimedOutEventDetails", {})
        return decision
    state = definition.states[execution.current_state]
    step.leave(state, execution.current_data)
    return decision


def stop(execution: ExecutionState, error: str | None, cause: str | None, now_ms: int) -> Decision | None:
    """StopExecution: abort a running execution; None when it already closed."""
    if not execution.is_open:
        return None
    decision = Decision(_mutable_copy(execution))
    details = {key: value for key, value in (("error", error), ("cause", cause)) if value is not None}
    _Step(decision, None, now_ms).close(ABORTED, "ExecutionAborted", "executionAbortedEventDetails", details,
                                        error=error, cause=cause, previous_event_id=0)
    return decision


def _mutable_copy(execution: ExecutionState) -> ExecutionState:
    clone = copy.copy(execution)
    clone.timers = dict(execution.timers)
    return clone


def context_object(execution: ExecutionState, state_name: str, entered_ms: int) -> dict[str, Any]:
    """The context object ($$) as a state sees it."""
    return {
        "Execution": {
            "Id": execution.arn,
            "Input": loads(execution.input),
            "StartTime": format_ms(execution.start_ms),
            "Name": execution.name,
            "RoleArn": execution.role_arn,
            "RedriveCount": 0,
        },
        "StateMachine": {
            "Id": execution.state_machine_arn,
            "Name": execution.state_machine_arn.rsplit(":", 1)[-1],
        },
        "State": {"Name": state_name, "EnteredTime": format_ms(entered_ms)},
    }


class _LazyContext:
    """Builds the context object on first use: most states never read ``$$``."""

    __slots__ = ("_args", "_value")

    def __init__(self, execution: ExecutionState, state_name: str, entered_ms: int) -> None:
        self._args = (execution, state_name, entered_ms)
        self._value: dict[str, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        if self._value is None:
            self._value = context_object(*self._args)
        return self._value


class _Step:
    """Accumulates one Decision: events with their ids, timer changes, and the state's new shape."""

    def __init__(self, decision: Decision, definition: Definition | None, now_ms: int) -> None:
        self.decision = decision
        self.execution = decision.state
        self.definition = definition
        self.now_ms = now_ms
        self.known_value: Any = None
        self.known_text: str | None = None

    # -- history and timers

    def emit(self, event_type: str, details_key: str | None, details: dict | None,
             previous_event_id: int | None = None) -> int:
        execution = self.execution
        event_id = execution.next_event_id
        event = {
            "timestamp": self.now_ms,
            "type": event_type,
            "id": event_id,
            "previousEventId": event_id - 1 if previous_event_id is None else previous_event_id,
        }
        if details_key is not None:
            event[details_key] = details
        self.decision.events.append(event)
        execution.next_event_id = event_id + 1
        return event_id

    def add_timer(self, timer_id: str, fire_at_ms: int) -> None:
        self.execution.timers[timer_id] = fire_at_ms
        self.decision.timers_added.append((timer_id, fire_at_ms))

    def remove_timer(self, timer_id: str) -> None:
        fire_at_ms = self.execution.timers.pop(timer_id)
        added = self.decision.timers_added
        if (timer_id, fire_at_ms) in added:  # set and cancelled in the same step: no row to delete
            added.remove((timer_id, fire_at_ms))
        else:
            self.decision.timers_removed.append((timer_id, fire_at_ms))

    def close(self, status: str, event_type: str, details_key: str, details: dict, *,
              output: str | None = None, error: str | None = None, cause: str | None = None,
              previous_event_id: int | None = None) -> None:
        execution = self.execution
        self.emit(event_type, details_key, details, previous_event_id)
        for timer_id in list(execution.timers):
            self.remove_timer(timer_id)
        execution.status = status
        execution.stop_ms = self.now_ms
        execution.output, execution.error, execution.cause = output, error, cause
        execution.current_state = execution.current_data = None

    def fail(self, error: str, cause: str) -> None:
        self.close(FAILED, "ExecutionFailed", "executionFailedEventDetails", {"error": error, "cause": cause},
                   error=error, cause=cause)

    # -- running states

    def json_of(self, value: Any) -> str:
        """``value`` as JSON. A payload that passes through untouched keeps its text as written, as on AWS."""
        if value is self.known_value and self.known_text is not None:
            return self.known_text
        text = _checked_json(value)
        self.known_value, self.known_text = value, text
        return text

    def run(self, name: str, data: Any, previous_event_id: int | None = None) -> None:
        """Enter ``name`` with ``data`` and keep going through pure states until the execution waits or closes."""
        while name is not None:
            if self.execution.next_event_id > MAX_HISTORY_EVENTS:
                self.fail(errors.RUNTIME, f"The execution reached the maximum number of history events "
                          f"({MAX_HISTORY_EVENTS}).")
                return
            state = self.definition.states[name]
            entered_id = None
            try:
                details = {"name": name, "input": self.json_of(data), "inputDetails": _NO_DETAILS}
                entered_id = self.emit(f"{state.type}StateEntered", "stateEnteredEventDetails", details,
                                       previous_event_id)
                previous_event_id = None
                name, output = self.enter(state, data, entered_id)
            except StatesError as failure:
                cause = failure.cause
                if entered_id is not None:
                    cause = (f"An error occurred while executing the state '{state.name}' "
                             f"(entered at the event id #{entered_id}). {cause}")
                self.fail(failure.error, cause)
                return
            data = output

    def enter(self, state: State, data: Any, entered_id: int) -> tuple[str | None, Any]:
        """Run one state; return the next state's name and input, or (None, _) when the execution waits or ends."""
        context = _LazyContext(self.execution, state.name, self.now_ms)
        if isinstance(state, PassState):
            effective = select(state.input_path, data, context)
            if state.parameters is not None:
                effective = state.parameters.render(effective, context)
            result = copy.deepcopy(state.result) if state.has_result else effective
            output = select(state.output_path, place_result(state.result_path, data, result), context)
            return self.exit(state, output), output
        if isinstance(state, ChoiceState):
            effective = select(state.input_path, data, context)
            target = next((nxt for rule, nxt in state.choices if rule.matches(effective, context)), state.default)
            if target is None:
                raise StatesError(errors.NO_CHOICE_MATCHED, "No Choice Rule matched and no Default is specified.")
            output = select(state.output_path, effective, context)
            self.exit(state, output)
            return target, output
        if isinstance(state, WaitState):
            effective = select(state.input_path, data, context)
            fire_at_ms = self.wait_until(state, effective, context)
            if fire_at_ms > self.now_ms:
                execution = self.execution
                execution.current_state, execution.current_data = state.name, effective
                execution.entered_ms = self.now_ms
                self.add_timer(f"wait-{entered_id}", fire_at_ms)
                return None, None
            output = select(state.output_path, effective, context)
            return self.exit(state, output), output
        if isinstance(state, SucceedState):
            effective = select(state.input_path, data, context)
            self.succeed(state, select(state.output_path, effective, context))
            return None, None
        if isinstance(state, FailState):
            error = state.error_path.resolve(data, context) if state.error_path else state.error
            cause = state.cause_path.resolve(data, context) if state.cause_path else state.cause
            for value, what in ((error, "ErrorPath"), (cause, "CausePath")):
                if value is not None and not isinstance(value, str):
                    raise StatesError(errors.RUNTIME, f"The {what} of state '{state.name}' must select a string")
            details = {key: value for key, value in (("error", error), ("cause", cause)) if value is not None}
            self.close(FAILED, "ExecutionFailed", "executionFailedEventDetails", details, error=error, cause=cause)
            return None, None
        raise AssertionError(f"unhandled state type {state.type}")

    def leave(self, state: WaitState, effective: Any) -> None:
        """Finish a Wait on its timer and run on from it."""
        execution = self.execution
        execution.current_state = execution.current_data = None
        try:
            context = _LazyContext(execution, state.name, execution.entered_ms)
            output = select(state.output_path, effective, context)
            target = self.exit(state, output)
        except StatesError as failure:
            self.fail(failure.error, failure.cause)
            return
        if target is not None:
            self.run(target, output)

    def exit(self, state: State, output: Any) -> str | None:
        self.emit(f"{state.type}StateExited", "stateExitedEventDetails",
                  {"name": state.name, "output": self.json_of(output), "outputDetails": _NO_DETAILS})
        if state.type == "Choice":
            return None
        if state.end:
            self.succeed(None, output)
            return None
        return state.next

    def succeed(self, state: SucceedState | None, output: Any) -> None:
        text = self.json_of(output)
        if state is not None:
            self.emit("SucceedStateExited", "stateExitedEventDetails",
                      {"name": state.name, "output": text, "outputDetails": _NO_DETAILS})
        self.close(SUCCEEDED, "ExecutionSucceeded", "executionSucceededEventDetails",
                   {"output": text, "outputDetails": _NO_DETAILS}, output=text)

    def wait_until(self, state: WaitState, data: Any, context: Any) -> int:
        if state.seconds is not None:
            return self.now_ms + state.seconds * 1000
        if state.timestamp_ms is not None:
            return state.timestamp_ms
        if state.seconds_path is not None:
            seconds = state.seconds_path.resolve(data, context)
            if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
                raise StatesError(errors.RUNTIME, f"The SecondsPath parameter does not reference a valid "
                                  f"positive integer: {state.seconds_path.text}")
            return self.now_ms + seconds * 1000
        stamp = state.timestamp_path.resolve(data, context)
        fire_at_ms = parse_ms(stamp)
        if fire_at_ms is None:
            raise StatesError(errors.RUNTIME, f"The TimestampPath parameter does not reference a valid ISO-8601 "
                              f"extended offset date-time format string: {state.timestamp_path.text}")
        return fire_at_ms


def _checked_json(value: Any) -> str:
    text = dumps(value)
    if len(text.encode()) > MAX_PAYLOAD_BYTES:
        raise StatesError(errors.DATA_LIMIT_EXCEEDED,
                          f"The state/task returned a result with a size exceeding the maximum number of bytes "
                          f"service limit ({MAX_PAYLOAD_BYTES}).")
    return text
