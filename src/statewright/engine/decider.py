"""The decider: pure functions from (mutable state, command, definition, now_ms) to a Decision.

A Decision carries the history events to append, the new mutable state and the effects (timers to write or
delete). Runs of pure states (Pass, Choice, a Wait already due, and Parallel and Map whose branches are pure) are
evaluated here in one go, so they are committed together. Nothing here reads a clock or touches storage.

Control lives in *flows*: the top level is flow "" and every Parallel branch or Map iteration is a child flow
named "<entered event id of the Parallel/Map>.<index>". A flow record (a JSON object in the mutable state) has:
  m          index of the Machine (States collection) it runs in Definition.machines
  parent     the parent flow's id (None for the top level); slot: its index among the parent's children
  state      the state it is in while it waits (a Wait, a retry backoff, or a Parallel/Map gathering results)
  data       that state's input (a Wait's effective input; the raw input of a state waiting to retry)
  entered_id, entered_ms   when that state was entered
  timer      the timer it waits on, if any; retries: attempts used per retrier of the current state
  fan        while in a Parallel/Map: kind, inputs (per branch or item), results, next, pending, max, raw, started
"""

from __future__ import annotations

import hashlib
from collections import ChainMap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..asl import errors
from ..asl.dataflow import place_result, select
from ..asl.errors import StatesError
from ..asl.handling import error_output, matches
from ..asl.jsonata import QUERY_EVALUATION_ERROR
from ..asl.jsonio import dumps, loads
from ..asl.scope import Scope
from ..asl.states import (
    ChoiceState,
    Definition,
    FailState,
    MapState,
    ParallelState,
    PassState,
    ResultState,
    State,
    SucceedState,
    TaskState,
    WaitState,
)
from ..asl.templates import Template
from ..asl.timestamps import format_ms, parse_ms
from .execution import ABORTED, FAILED, SUCCEEDED, TIMED_OUT, ExecutionState
from .jsonata_steps import JsonataSteps
from .tasks import TaskSteps

MAX_PAYLOAD_BYTES = 262_144
MAX_HISTORY_EVENTS = 25_000
MAX_VARIABLE_BYTES = 10 * 1024 * 1024
EXECUTION_TIMEOUT_TIMER = "execution-timeout"
ROOT = ""
_NO_DETAILS = {"truncated": False}
_MARKERS = frozenset({"MapIterationSucceeded", "MapIterationFailed", "MapIterationAborted"})
_POINT_PAST_MARKERS = frozenset({"MapIterationStarted", "MapStateStarted", "ParallelStateStarted", "MapStateFailed",
                                 "ParallelStateFailed"})
_CLOSING = frozenset({"ExecutionSucceeded", "ExecutionFailed", "ExecutionAborted", "ExecutionTimedOut"})
HISTORY_LIMIT_CAUSE = f"The execution reached the maximum number of history events ({MAX_HISTORY_EVENTS})."


class _HistoryFull(Exception):
    """The next event would be the last one the history may hold: it must be ExecutionFailed."""


@dataclass(slots=True)
class Decision:
    state: ExecutionState
    events: list[dict[str, Any]] = field(default_factory=list)
    timers_added: list[tuple[str, int]] = field(default_factory=list)  # (timer id, fire_at_ms)
    timers_removed: list[tuple[str, int]] = field(default_factory=list)
    dispatches_added: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (dispatch id, payload)
    dispatches_removed: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Services:
    """What Task states ask of the world, passed in so the decider stays pure."""

    mint_token: Callable[[str, int, int], str]  # (execution ARN, scheduled event id, attempt) -> task token
    activity_exists: Callable[[str], bool] = lambda arn: True


def start(execution: ExecutionState, definition: Definition, now_ms: int,
          services: Services | None = None) -> Decision:
    """Open a new execution (version 0, no events yet) and run it until it waits or closes."""
    decision = Decision(execution.copy())
    step = _Step(decision, definition, now_ms, services)
    step.emit("ExecutionStarted", "executionStartedEventDetails",
              {"input": execution.input, "inputDetails": _NO_DETAILS, "roleArn": execution.role_arn})
    if definition.timeout_seconds is not None:
        step.add_timer(EXECUTION_TIMEOUT_TIMER, execution.start_ms + definition.timeout_seconds * 1000)
    step.execution.flows[ROOT] = _new_flow(0, None, 0)
    step.known_value, step.known_text = loads(execution.input), execution.input
    step.guarded(step.run, ROOT, definition.start_at, step.known_value, 0)
    return decision


def fire_timer(execution: ExecutionState, definition: Definition, timer_id: str, now_ms: int,
               services: Services | None = None) -> Decision | None:
    """Apply a fired timer, or return None when the execution no longer expects it."""
    if not execution.is_open or timer_id not in execution.timers:
        return None
    decision = Decision(execution.copy())
    step = _Step(decision, definition, now_ms, services)
    step.remove_timer(timer_id)
    if timer_id == EXECUTION_TIMEOUT_TIMER:
        step.close(TIMED_OUT, "ExecutionTimedOut", "executionTimedOutEventDetails", {})
        return decision
    flow_id = next(fid for fid, flow in step.flows.items()
                   if flow["timer"] == timer_id or (flow["task"] and timer_id in flow["task"]["timers"]))
    if step.flows[flow_id]["timer"] == timer_id:
        step.guarded(step.wake, flow_id)
    else:
        step.guarded(lambda: step.resume(flow_id, step.task_timer_fired(flow_id, timer_id) or ("wait",)))
    return decision


def start_attempt(execution: ExecutionState, definition: Definition, scheduled_id: int, worker_name: str | None,
                  now_ms: int) -> Decision | None:
    """Record a task attempt as started, before it leaves the engine; None if it is not pending or started."""
    step = _Step(Decision(execution.copy()), definition, now_ms)
    flow_id = step.task_flow(scheduled_id) if execution.is_open else None
    if flow_id is None or step.flows[flow_id]["task"]["started"]:
        return None
    step.guarded(step.start_task, flow_id, worker_name)
    return step.decision


def complete_attempt(execution: ExecutionState, definition: Definition, scheduled_id: int, result: tuple,
                     now_ms: int, services: Services | None = None) -> Decision | None:
    """Apply an attempt's result: ("success", output text), ("failure", error, cause) or ("submitted", output).

    None when that attempt is no longer pending (finished, timed out, or the execution closed): the caller's
    reply is late or a duplicate and changes nothing.
    """
    step = _Step(Decision(execution.copy()), definition, now_ms, services)
    flow_id = step.task_flow(scheduled_id) if execution.is_open else None
    if flow_id is None:
        return None
    kind = result[0]
    if kind == "submitted":
        step.guarded(step.submit_task, flow_id, result[1])
    elif kind == "success":
        step.guarded(lambda: step.resume(flow_id, step.task_succeeded(flow_id, result[1])))
    else:
        step.guarded(lambda: step.resume(flow_id, step.task_failed(flow_id, result[1], result[2])))
    return step.decision


def ack_dispatch(execution: ExecutionState, dispatch_id: str) -> Decision:
    """An integration finished with one of this execution's dispatches: delete the outbox row."""
    decision = Decision(execution.copy())
    decision.dispatches_removed.append(dispatch_id)
    return decision


def describe_for_parent(execution: ExecutionState) -> dict[str, Any]:
    """A closed execution as a .sync parent task receives it: DescribeExecution with AWS's capitalised keys."""
    described: dict[str, Any] = {
        "ExecutionArn": execution.arn, "Input": execution.input, "InputDetails": {"Included": True},
        "Name": execution.name, "RedriveCount": 0, "StartDate": execution.start_ms,
        "StateMachineArn": execution.state_machine_arn, "Status": execution.status, "StopDate": execution.stop_ms,
    }
    if execution.output is not None:
        described["Output"] = execution.output
        described["OutputDetails"] = {"Included": True}
    for key in ("error", "cause"):
        if getattr(execution, key) is not None:
            described[key.capitalize()] = getattr(execution, key)
    return dict(sorted(described.items()))


def heartbeat(execution: ExecutionState, definition: Definition, scheduled_id: int, now_ms: int) -> Decision | None:
    """SendTaskHeartbeat: note the time in the state (the heartbeat timer re-arms itself when it fires)."""
    step = _Step(Decision(execution.copy()), definition, now_ms)
    flow_id = step.task_flow(scheduled_id) if execution.is_open else None
    if flow_id is None:
        return None
    step.beat(flow_id)
    return step.decision


def stop(execution: ExecutionState, error: str | None, cause: str | None, now_ms: int) -> Decision | None:
    """StopExecution: abort a running execution; None when it already closed."""
    if not execution.is_open:
        return None
    decision = Decision(execution.copy())
    details = {key: value for key, value in (("error", error), ("cause", cause)) if value is not None}
    _Step(decision, None, now_ms).close(ABORTED, "ExecutionAborted", "executionAbortedEventDetails", details,
                                        error=error, cause=cause, previous_event_id=0)
    return decision


class OneStateRun:
    """TestState: one state of the top-level machine run once, without waiting and without going on.

    ``outcome`` is ("next", name, output) | ("end", output) | ("fail", error, cause) | ("wait",): a retry, or a
    Task attempt waiting for its result (then ``pending_task`` is its dispatch payload, and ``complete`` applies
    the integration's result). ``trace`` holds the data-flow steps; ``variables`` the variables afterwards.
    """

    def __init__(self, execution: ExecutionState, definition: Definition, state_name: str, data: Any,
                 variables: dict[str, Any], now_ms: int, services: Services | None = None) -> None:
        step = _Step(Decision(execution.copy()), definition, now_ms, services)
        step.trace = {}
        flow = _new_flow(0, None, 0)
        flow.update(state=state_name, data=data, entered_ms=now_ms, vars=dict(variables))
        step.flows[ROOT] = flow
        step.emit(f"{definition.states[state_name].type}StateEntered", None, None)
        flow["entered_id"] = step.execution.next_event_id - 1
        self._step, self._flow = step, flow
        self.outcome = self._guarded(lambda: step.attempt(ROOT, definition.states[state_name], data))

    @property
    def trace(self) -> dict[str, Any]:
        return self._step.trace

    @property
    def variables(self) -> dict[str, Any]:
        return self._flow["vars"]

    @property
    def pending_task(self) -> dict[str, Any] | None:
        added = self._step.decision.dispatches_added
        return added[-1][1] if self.outcome[0] == "wait" and self._flow["task"] and added else None

    def complete(self, result: tuple) -> None:
        """The pending attempt's result: ("success", output JSON text) or ("failure", error, cause)."""
        step = self._step
        step.start_task(ROOT, None)
        if result[0] == "success":
            self.outcome = self._guarded(lambda: step.task_succeeded(ROOT, result[1]))
        else:
            self.outcome = self._guarded(lambda: step.task_failed(ROOT, result[1], result[2]))

    @staticmethod
    def _guarded(action: Callable[[], tuple]) -> tuple:
        try:
            return action()
        except _HistoryFull:  # a Map over more items than one history holds
            return _fail(errors.RUNTIME, HISTORY_LIMIT_CAUSE)


def context_object(execution: ExecutionState, state_name: str, entered_ms: int,
                   map_item: tuple[int, Any] | None = None) -> dict[str, Any]:
    """The context object ($$) as a state sees it; ``map_item`` is (index, value) inside a Map's ItemSelector."""
    context = {
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
    if map_item is not None:
        context["Map"] = {"Item": {"Index": map_item[0], "Value": map_item[1]}}
    return context


def _new_flow(machine: int, parent: str | None, slot: int) -> dict[str, Any]:
    return {"m": machine, "parent": parent, "slot": slot, "state": None, "data": None, "entered_id": 0,
            "entered_ms": 0, "timer": None, "retries": {}, "fan": None, "vars": {}, "attempts": 0, "task": None}


# Outcomes of running one state in a flow.
_WAIT = ("wait",)


def _next(name: str, data: Any) -> tuple:
    return ("next", name, data)


def _end(output: Any) -> tuple:
    return ("end", output)


def _fail(error: str | None, cause: str | None) -> tuple:
    return ("fail", error, cause)


class _Step(TaskSteps, JsonataSteps):
    """Accumulates one Decision: events with their ids, timer changes, and the flows' new shape."""

    def __init__(self, decision: Decision, definition: Definition | None, now_ms: int,
                 services: Services | None = None) -> None:
        self.services = services
        self.decision = decision
        self.execution = decision.state
        self.flows = decision.state.flows
        self.definition = definition
        self.now_ms = now_ms
        self.known_value: Any = None
        self.known_text: str | None = None
        self.gathering: set[str] = set()  # flows whose fan-out loop is on the stack
        # TestState only: the data-flow steps of the state under test, and how it ended.
        self.trace: dict[str, Any] | None = None
        self.failures: dict[str, tuple[str | None, str | None]] = {}  # their children's failures, to report

    # -- history, timers, closing

    def emit(self, event_type: str, details_key: str | None, details: dict | None,
             previous_event_id: int | None = None) -> int:
        execution = self.execution
        event_id = execution.next_event_id
        if event_id >= MAX_HISTORY_EVENTS and event_type not in _CLOSING:
            raise _HistoryFull
        if previous_event_id is None:
            marker_prev = execution.marker_prev
            use_marker = marker_prev is not None and event_type in _POINT_PAST_MARKERS
            previous_event_id = marker_prev if use_marker else event_id - 1
        event = {"timestamp": self.now_ms, "type": event_type, "id": event_id, "previousEventId": previous_event_id}
        if details_key is not None:
            event[details_key] = details
        self.decision.events.append(event)
        execution.next_event_id = event_id + 1
        if event_type not in _MARKERS:
            execution.marker_prev = None
        elif execution.marker_prev is None:
            execution.marker_prev = previous_event_id
        return event_id

    def guarded(self, action: Any, *args: Any) -> None:
        """Run ``action``; if the history fills up, the execution fails with the last event it may hold."""
        try:
            action(*args)
        except _HistoryFull:
            self.fail_execution(errors.RUNTIME, HISTORY_LIMIT_CAUSE)

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

    def add_dispatch(self, dispatch_id: str, payload: dict[str, Any]) -> None:
        self.decision.dispatches_added.append((dispatch_id, payload))

    def remove_dispatch(self, dispatch_id: str) -> None:
        added = self.decision.dispatches_added
        staged = [entry for entry in added if entry[0] == dispatch_id]
        if staged:  # scheduled and gone in the same step: no row was ever written
            added.remove(staged[0])
        else:
            self.decision.dispatches_removed.append(dispatch_id)

    def close(self, status: str, event_type: str, details_key: str, details: dict, *,
              output: str | None = None, error: str | None = None, cause: str | None = None,
              previous_event_id: int | None = None) -> None:
        execution = self.execution
        self.emit(event_type, details_key, details, previous_event_id)
        for timer_id in list(execution.timers):
            self.remove_timer(timer_id)
        for flow in self.flows.values():
            task = flow["task"]
            if task and not task["started"]:
                self.remove_dispatch(str(task["scheduled_id"]))
            elif task and task.get("child"):  # a nested execution this one waits on stops with it
                self.add_dispatch(f"stop-{task['scheduled_id']}", {"kind": "stop", "target": task["child"]})
        execution.status = status
        execution.stop_ms = self.now_ms
        execution.output, execution.error, execution.cause = output, error, cause
        self.flows.clear()
        if execution.parent is not None:  # a .sync parent waits for this one: tell it, from the same commit
            self.add_dispatch("parent", {"kind": "parent", **execution.parent, "execution": execution.arn,
                                         "describe": describe_for_parent(execution)})

    def json_of(self, value: Any) -> str:
        """``value`` as JSON. A payload that passes through untouched keeps its text as written, as on AWS."""
        if value is self.known_value and self.known_text is not None and isinstance(value, dict | list):
            return self.known_text  # identity of a container means untouched (scalars are shared by Python)
        text = _checked_json(value)
        self.known_value, self.known_text = value, text
        return text

    def scope(self, flow_id: str, state_name: str, map_item: tuple[int, Any] | None = None) -> Scope:
        """The context object and the variables a state in this flow sees (its own, then each outer flow's)."""
        flow = self.flows[flow_id]
        layers = [flow["vars"]]
        while flow["parent"] is not None:
            flow = self.flows[flow["parent"]]
            layers.append(flow["vars"])
        own = self.flows[flow_id]
        return Scope(lambda: self.context_for(own, state_name, map_item), ChainMap(*layers))

    def context_for(self, flow: dict, state_name: str, map_item: tuple[int, Any] | None) -> dict[str, Any]:
        context = context_object(self.execution, state_name, flow["entered_ms"], map_item)
        state = self.definition.machines[flow["m"]].states.get(state_name) if self.definition else None
        if isinstance(state, TaskState):
            context["State"]["RetryCount"] = max(flow["attempts"] - 1, 0)
            if state.pattern == "waitForTaskToken" and flow["task"]:
                context["Task"] = {"Token": self.token(flow["task"]["scheduled_id"], flow["attempts"])}
        return context

    def seed_of(self, flow: dict) -> Callable[[], bytes]:
        """The seed, computed only if something asks for it (most templates call no random intrinsic)."""
        return lambda: self.seed(flow)

    def seed(self, flow: dict) -> bytes:
        """Entropy for States.UUID and States.MathRandom: fixed by the execution and the state's entry."""
        return hashlib.blake2b(f"{self.execution.arn}|{flow['entered_id']}".encode(), digest_size=16).digest()

    def machine_states(self, flow: dict) -> dict[str, State]:
        return self.definition.machines[flow["m"]].states

    # -- running a flow

    def run(self, flow_id: str, name: str | None, data: Any, previous_event_id: int | None = None) -> None:
        """Enter ``name`` in a flow and keep going through pure states until the flow waits, ends or fails."""
        while name is not None and self.execution.is_open and flow_id in self.flows:
            flow = self.flows[flow_id]
            state = self.machine_states(flow)[name]
            try:
                text = self.json_of(data)
            except StatesError as failure:
                self.settle(flow_id, _fail(failure.error, failure.cause))
                return
            entered_id = self.emit(f"{state.type}StateEntered", "stateEnteredEventDetails",
                                   {"name": name, "input": text, "inputDetails": _NO_DETAILS}, previous_event_id)
            previous_event_id = None
            flow.update(state=name, data=data, entered_id=entered_id, entered_ms=self.now_ms, retries={}, attempts=0,
                        entered_prev=self.decision.events[-1]["previousEventId"])
            name, data = self.settle(flow_id, self.attempt(flow_id, state, data))

    def settle(self, flow_id: str, outcome: tuple) -> tuple[str | None, Any]:
        """Act on a state's outcome; returns the next state and its input when the flow goes on."""
        kind = outcome[0]
        if kind == "next":
            return outcome[1], outcome[2]
        if kind == "end":
            self.flow_succeeded(flow_id, outcome[1])
        elif kind == "fail":
            self.flow_failed(flow_id, outcome[1], outcome[2])
        return None, None

    def resume(self, flow_id: str, outcome: tuple) -> None:
        name, data = self.settle(flow_id, outcome)
        if name is not None:
            self.run(flow_id, name, data)

    def wake(self, flow_id: str) -> None:
        """The flow's timer fired: a Wait ends or a retry starts."""
        flow = self.flows[flow_id]
        flow["timer"] = None
        state = self.machine_states(flow)[flow["state"]]
        if isinstance(state, WaitState):
            try:
                if state.query_language == "JSONata":
                    outcome = self.leave_jsonata_wait(flow_id, state, flow["data"])
                else:
                    outcome = self.leave_wait(flow_id, state, flow["data"], self.scope(flow_id, state.name))
            except StatesError as failure:
                outcome = self.failed_in_state(flow_id, state, failure)
        else:
            outcome = self.attempt(flow_id, state, flow["data"])
        self.resume(flow_id, outcome)

    def attempt(self, flow_id: str, state: State, data: Any) -> tuple:
        """Run one state (again, on a retry) and return its outcome."""
        try:
            return self.evaluate(flow_id, state, data)
        except StatesError as failure:
            return self.failed_in_state(flow_id, state, failure)

    def failed_in_state(self, flow_id: str, state: State, failure: StatesError) -> tuple:
        """An error raised while the state evaluated its fields: record it, then Retry, Catch or fail."""
        flow = self.flows[flow_id]
        cause = self.runtime_cause(flow, failure)
        if failure.error == QUERY_EVALUATION_ERROR:
            self.evaluation_failed(flow, state, failure, cause)
        return self.on_error(flow_id, state, failure.error, cause)

    def runtime_cause(self, flow: dict, failure: StatesError) -> str:
        return (f"An error occurred while executing the state '{flow['state']}' "
                f"(entered at the event id #{flow['entered_id']}). {failure.cause}")

    def evaluate(self, flow_id: str, state: State, data: Any) -> tuple:
        flow = self.flows[flow_id]
        if state.query_language == "JSONata":
            outcome = self.evaluate_jsonata(flow_id, state, data)
            if outcome is not None:
                return outcome
        context = self.scope(flow_id, state.name)
        if isinstance(state, PassState):
            effective = self.note("afterInputPath", select(state.input_path, data, context))
            if state.parameters is not None:
                rendered = state.parameters.render(effective, context, self.seed_of(flow))
                effective = self.note("afterParameters", rendered)
            result = self.note("result", _copy_json(state.result) if state.has_result else effective)
            assigned = self.assigned(flow_id, state.assign, result, context)
            placed = self.note("afterResultPath", place_result(state.result_path, data, result))
            return self.exit(state, select(state.output_path, placed, context), flow_id, assigned)
        if isinstance(state, ChoiceState):
            effective = self.note("afterInputPath", select(state.input_path, data, context))
            target, assign = next(((nxt, rule_assign) for rule, nxt, rule_assign in state.choices
                                   if rule.matches(effective, context)), (state.default, state.assign))
            if target is None:
                raise StatesError(errors.NO_CHOICE_MATCHED, "No Choice Rule matched and no Default is specified.")
            assigned = self.assigned(flow_id, assign, effective, context)
            output = select(state.output_path, effective, context)
            self.emit_exited(state, output, flow_id, assigned)
            return _next(target, output)
        if isinstance(state, WaitState):
            effective = self.note("afterInputPath", select(state.input_path, data, context))
            fire_at_ms = self.wait_until(state, effective, context)
            if fire_at_ms <= self.now_ms or self.trace is not None:  # TestState does not wait
                return self.leave_wait(flow_id, state, effective, context)
            flow["data"] = effective
            self.sleep(flow, f"wait-{flow['entered_id']}", fire_at_ms)
            return _WAIT
        if isinstance(state, SucceedState):
            effective = self.note("afterInputPath", select(state.input_path, data, context))
            output = select(state.output_path, effective, context)
            self.emit_exited(state, output)
            return _end(output)
        if isinstance(state, FailState):
            seed = self.seed(flow)
            error = state.error_path.evaluate(data, context, seed) if state.error_path else state.error
            cause = state.cause_path.evaluate(data, context, seed) if state.cause_path else state.cause
            for value, what in ((error, "ErrorPath"), (cause, "CausePath")):
                if value is not None and not isinstance(value, str):
                    raise StatesError(errors.RUNTIME, f"The {what} of state '{state.name}' must select a string")
            return _fail(error, cause)
        if isinstance(state, ParallelState | MapState):
            return self.fan_out(flow_id, state, data, context)
        if isinstance(state, TaskState):
            return self.schedule(flow_id, state, data, context)
        raise AssertionError(f"unhandled state type {state.type}")

    def note(self, step: str, value: Any) -> Any:
        """Record a data-flow step for TestState's inspection data; returns the value unchanged."""
        if self.trace is not None:
            self.trace[step] = value
        return value

    def sleep(self, flow: dict, timer_id: str, fire_at_ms: int) -> None:
        flow["timer"] = timer_id
        self.add_timer(timer_id, fire_at_ms)

    def assigned(self, flow_id: str, assign: Template | None, result: Any, context: Any) -> dict[str, Any] | None:
        """Evaluate an Assign (``$`` is the state's result); the variables change only when the state exits."""
        if assign is None:
            return None
        return self.within_limits(flow_id, assign.render(result, context, self.seed_of(self.flows[flow_id])))

    def within_limits(self, flow_id: str, values: dict[str, Any]) -> dict[str, Any]:
        """AWS's limits: one state assigns at most 256 KiB, and an execution holds at most 10 MiB of variables."""
        if len(dumps(values).encode()) > MAX_PAYLOAD_BYTES:
            raise StatesError(errors.DATA_LIMIT_EXCEEDED, f"The variables assigned by the state exceed the maximum "
                              f"size of {MAX_PAYLOAD_BYTES} bytes.")
        held = {name: value for flow in self.flows.values() for name, value in flow["vars"].items()}
        held.update(values)
        if len(dumps(held).encode()) > MAX_VARIABLE_BYTES:
            raise StatesError(errors.DATA_LIMIT_EXCEEDED, f"The execution's variables would exceed the maximum "
                              f"size of {MAX_VARIABLE_BYTES} bytes.")
        return values

    def emit_exited(self, state: State, output: Any, flow_id: str | None = None,
                    assigned: dict[str, Any] | None = None, previous_event_id: int | None = None) -> None:
        details = {"name": state.name, "output": self.json_of(output), "outputDetails": _NO_DETAILS}
        if assigned:
            details["assignedVariables"] = {name: dumps(value) for name, value in assigned.items()}
            details["assignedVariablesDetails"] = _NO_DETAILS
        self.emit(f"{state.type}StateExited", "stateExitedEventDetails", details, previous_event_id)
        if assigned:
            self.flows[flow_id]["vars"].update(assigned)

    def exit(self, state: State, output: Any, flow_id: str | None = None,
             assigned: dict[str, Any] | None = None) -> tuple:
        self.emit_exited(state, output, flow_id, assigned)
        return _end(output) if state.end else _next(state.next, output)

    def leave_wait(self, flow_id: str, state: WaitState, effective: Any, context: Any) -> tuple:
        assigned = self.assigned(flow_id, state.assign, effective, context)
        return self.exit(state, select(state.output_path, effective, context), flow_id, assigned)

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
                              f"extended offset date-time format string: {state.timestamp_path.text} == {stamp}")
        return fire_at_ms

    # -- errors: Retry, Catch, or fail the flow

    def on_error(self, flow_id: str, state: State, error: str | None, cause: str | None,
                 alias: str | None = None) -> tuple:
        """Retry, else Catch, else fail the flow. ``alias`` is a second name the error also matches by."""
        return self.retry(flow_id, state, error, cause, alias) or self.catch(flow_id, state, error, cause, alias)

    def retry(self, flow_id: str, state: State, error: str | None, cause: str | None,
              alias: str | None = None) -> tuple | None:
        """Schedule the next attempt if a retrier allows one; None when none does."""
        self.note("error", (error, cause))
        if not isinstance(state, ResultState) or error is None:
            return None
        flow = self.flows[flow_id]
        for index, retrier in enumerate(state.retry):
            if not matches(retrier.error_equals, error, alias):
                continue
            used = flow["retries"].get(str(index), 0)
            if used >= retrier.max_attempts:
                return None  # the first matching retrier decides; once spent, Catch decides
            flow["retries"][str(index)] = used + 1
            seed = jitter_seed(self.execution.arn, flow["entered_id"], used + 1)
            self.sleep(flow, f"retry-{flow['entered_id']}-{used + 1}", self.now_ms + retrier.delay_ms(used + 1, seed))
            return _WAIT
        return None

    def catch(self, flow_id: str, state: State, error: str | None, cause: str | None,
              alias: str | None = None) -> tuple:
        flow = self.flows[flow_id]
        if isinstance(state, ResultState) and error is not None:
            for catcher in state.catch:
                if matches(catcher.error_equals, error, alias):
                    error_object = error_output(error, cause)
                    try:
                        if state.query_language == "JSONata":
                            assigned = None if catcher.assign is None else self.evaluate_value(
                                flow_id, state, catcher.assign, flow["data"], "Catch/Assign", errorOutput=error_object)
                            output = error_object if catcher.output is None else self.evaluate_value(
                                flow_id, state, catcher.output, flow["data"], "Catch/Output", errorOutput=error_object)
                        else:
                            assigned = self.assigned(flow_id, catcher.assign, error_object,
                                                     self.scope(flow_id, state.name))
                            output = place_result(catcher.result_path, flow["data"], error_object)
                    except StatesError as failure:
                        return _fail(failure.error, self.runtime_cause(flow, failure))
                    self.emit_exited(state, output, flow_id, assigned)
                    return _next(catcher.next, output)
        return _fail(error, cause)

    # -- flows ending

    def flow_succeeded(self, flow_id: str, output: Any) -> None:
        if flow_id == ROOT:
            try:
                text = self.json_of(output)
            except StatesError as failure:
                self.fail_execution(failure.error, failure.cause)
                return
            self.close(SUCCEEDED, "ExecutionSucceeded", "executionSucceededEventDetails",
                       {"output": text, "outputDetails": _NO_DETAILS}, output=text)
            return
        flow = self.flows.pop(flow_id)
        parent_id = flow["parent"]
        fan = self.flows[parent_id]["fan"]
        fan["results"][flow["slot"]] = output
        fan["pending"] -= 1
        if fan["kind"] == "map":
            self.emit("MapIterationSucceeded", "mapIterationSucceededEventDetails",
                      {"name": self.flows[parent_id]["state"], "index": flow["slot"]})
        if parent_id not in self.gathering:
            self.gather(parent_id)

    def flow_failed(self, flow_id: str, error: str | None, cause: str | None) -> None:
        if flow_id == ROOT:
            self.fail_execution(error, cause)
            return
        flow = self.flows[flow_id]
        parent_id = flow["parent"]
        parent = self.flows[parent_id]
        fan = parent["fan"]
        if fan["kind"] == "map":
            self.emit("MapIterationFailed", "mapIterationFailedEventDetails",
                      {"name": parent["state"], "index": flow["slot"]})
        self.drop_children(parent_id, aborted_event=fan["kind"] == "map", skip=flow_id)
        self.drop_flow(flow_id)
        parent["fan"] = None
        if parent_id in self.gathering:
            self.failures[parent_id] = (error, cause)
        else:
            self.resume(parent_id, self.fan_failed(parent_id, error, cause))

    def fan_failed(self, flow_id: str, error: str | None, cause: str | None) -> tuple:
        """A branch or iteration failed: retry the whole state (silently, as AWS), or record the failure."""
        flow = self.flows[flow_id]
        state = self.machine_states(flow)[flow["state"]]
        outcome = self.retry(flow_id, state, error, cause)
        if outcome is not None:
            return outcome
        self.emit(f"{state.type}StateFailed", None, None)
        return self.catch(flow_id, state, error, cause)

    def fail_execution(self, error: str | None, cause: str | None) -> None:
        details = {key: value for key, value in (("error", error), ("cause", cause)) if value is not None}
        self.close(FAILED, "ExecutionFailed", "executionFailedEventDetails", details, error=error, cause=cause)

    def drop_flow(self, flow_id: str) -> None:
        if self.flows[flow_id]["task"]:
            self.end_task(flow_id)
        if self.flows[flow_id]["fan"] is not None:  # its children first: they look their parent up
            self.drop_children(flow_id, aborted_event=False)
        flow = self.flows.pop(flow_id)
        if flow["timer"] is not None:
            self.remove_timer(flow["timer"])

    def drop_children(self, parent_id: str, aborted_event: bool, skip: str | None = None) -> None:
        parent = self.flows[parent_id]
        for child_id in [fid for fid, f in self.flows.items() if f["parent"] == parent_id and fid != skip]:
            if aborted_event:
                self.emit("MapIterationAborted", "mapIterationAbortedEventDetails",
                          {"name": parent["state"], "index": self.flows[child_id]["slot"]})
            self.drop_flow(child_id)

    # -- Parallel and Map

    def fan_out(self, flow_id: str, state: ParallelState | MapState, data: Any, context: Any) -> tuple:
        flow = self.flows[flow_id]
        if state.query_language == "JSONata":
            inputs, limit = self.jsonata_fan_inputs(flow_id, state, data)
        elif isinstance(state, ParallelState):
            effective = self.note("afterInputPath", select(state.input_path, data, context))
            if state.parameters is not None:
                rendered = state.parameters.render(effective, context, self.seed_of(flow))
                effective = self.note("afterParameters", rendered)
            inputs, limit = [effective] * len(state.branches), 0
        else:
            effective = self.note("afterInputPath", select(state.input_path, data, context))
            inputs = self.map_inputs(flow_id, state, effective, context)
            limit = self.note("maxConcurrency", self.map_concurrency(state, effective, context))
        kind = "parallel" if isinstance(state, ParallelState) else "map"
        started_type = "ParallelStateStarted" if kind == "parallel" else "MapStateStarted"
        details = {"length": len(inputs)} if kind == "map" else None
        started = self.emit(started_type, "mapStateStartedEventDetails" if details else None, details)
        fan = {"kind": kind, "inputs": inputs, "results": [None] * len(inputs), "next": 0, "pending": 0,
               "max": limit, "raw": data, "started": started}
        flow["fan"] = fan
        return self.gather(flow_id, inline=True)

    def map_inputs(self, flow_id: str, state: MapState, effective: Any, context: Any) -> list[Any]:
        """Each iteration's input: the item, or the ItemSelector rendered with $$.Map.Item."""
        items = self.note("afterItemsPath", select(state.items_path, effective, context))
        if not isinstance(items, list):
            where = state.items_path.text if state.items_path is not None else "null"
            raise StatesError(errors.RUNTIME, f"Item list under path '{where}' must be an array, but got: "
                              f"{dumps(items)}")
        if state.item_selector is None:
            return items
        flow = self.flows[flow_id]
        return self.note("afterItemSelector", [
            state.item_selector.render(effective, self.scope(flow_id, state.name, (i, item)),
                                       lambda i=i: self.seed(flow) + i.to_bytes(4, "big"))
            for i, item in enumerate(items)])

    def map_concurrency(self, state: MapState, effective: Any, context: Any) -> int:
        if state.max_concurrency_path is None:
            return state.max_concurrency
        value = state.max_concurrency_path.resolve(effective, context)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise StatesError(errors.RUNTIME, f"The MaxConcurrencyPath field refers to value '{dumps(value)}' "
                              "which is not a valid non-negative integer")
        return value

    def gather(self, flow_id: str, inline: bool = False) -> tuple | None:
        """Start the branches or items the concurrency limit allows; join when all are done.

        Called inline when the state is entered (returns its outcome), and again whenever a child finishes later
        (then it resumes the flow itself).
        """
        flow = self.flows[flow_id]
        fan = flow["fan"]
        state = self.machine_states(flow)[flow["state"]]
        self.gathering.add(flow_id)
        try:
            while (flow["fan"] is fan and fan["next"] < len(fan["inputs"])
                   and (fan["max"] == 0 or fan["pending"] < fan["max"]) and self.execution.is_open):
                self.start_child(flow_id, state, fan, fan["next"])
                fan["next"] += 1
        finally:
            self.gathering.discard(flow_id)
        if not self.execution.is_open:
            return _WAIT if inline else None
        if flow_id in self.failures:
            outcome = self.fan_failed(flow_id, *self.failures.pop(flow_id))
        elif flow["fan"] is fan and fan["pending"] == 0 and fan["next"] == len(fan["inputs"]):
            outcome = self.join(flow_id, state, fan)
        else:
            return _WAIT if inline else None
        if inline:
            return outcome
        self.resume(flow_id, outcome)
        return None

    def start_child(self, flow_id: str, state: ParallelState | MapState, fan: dict, index: int) -> None:
        child_id = f"{self.flows[flow_id]['entered_id']}.{index}"
        if isinstance(state, ParallelState):
            machine = state.branches[index]
            previous = fan["started"]
        else:
            machine = state.processor
            previous = self.emit("MapIterationStarted", "mapIterationStartedEventDetails",
                                 {"name": state.name, "index": index})
        self.flows[child_id] = _new_flow(machine.index, flow_id, index)
        fan["pending"] += 1
        self.run(child_id, machine.start_at, fan["inputs"][index], previous_event_id=previous)

    def join(self, flow_id: str, state: ParallelState | MapState, fan: dict) -> tuple:
        flow = self.flows[flow_id]
        flow["fan"] = None
        self.emit(f"{state.type}StateSucceeded", None, None)
        # AWS points the Exited event where Succeeded points: at the last event of the branches.
        exited_previous = self.decision.events[-1]["previousEventId"]
        try:
            output, assigned = self.shape_result(flow_id, state, fan["raw"], fan["results"])
        except StatesError as failure:
            return self.failed_in_state(flow_id, state, failure)
        self.emit_exited(state, output, flow_id, assigned, exited_previous)
        return _end(output) if state.end else _next(state.next, output)

    def shape_result(self, flow_id: str, state: ResultState, data: Any, result: Any) -> tuple[Any, dict | None]:
        """A Task's, Parallel's or Map's result made into the state's output and its variable assignments."""
        self.note("result", result)
        if state.query_language == "JSONata":
            assigned = self.jsonata(flow_id, state, "Assign", data, None, result=result)
            output = self.jsonata(flow_id, state, "Output", data, result, result=result)
        else:
            context = self.scope(flow_id, state.name)
            if state.result_selector is not None:
                result = self.note("afterResultSelector", state.result_selector.render(
                    result, context, self.seed_of(self.flows[flow_id])))
            assigned = self.assigned(flow_id, state.assign, result, context)
            placed = self.note("afterResultPath", place_result(state.result_path, data, result))
            output = select(state.output_path, placed, context)
        self.json_of(output)  # a result over the size limit fails here, where Retry and Catch apply
        return output, assigned


def _copy_json(value: Any) -> Any:
    """A fresh copy of a literal from the definition, so no decision shares it with another."""
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value


def _checked_json(value: Any) -> str:
    text = dumps(value)
    if len(text.encode()) > MAX_PAYLOAD_BYTES:
        raise StatesError(errors.DATA_LIMIT_EXCEEDED,
                          f"The state/task returned a result with a size exceeding the maximum number of bytes "
                          f"service limit ({MAX_PAYLOAD_BYTES}).")
    return text


def jitter_seed(execution_arn: str, entered_id: int, attempt: int) -> bytes:
    return hashlib.blake2b(f"{execution_arn}|{entered_id}|{attempt}".encode(), digest_size=16).digest()
