"""The decision being built: the context every part of the decider works on.

A ``Step`` accumulates one Decision (history events with their ids, timer and dispatch changes, the flows' new
shape) and offers what every state needs: emitting events, timers, evaluating Assign, JSONata fields and results
in a flow's scope, exiting a state, closing the execution. The concept modules (``flows``, ``fan_out``,
``retry_catch``, ``tasks``, ``jsonpath_states``, ``jsonata_states``) are functions over a Step; this module must
not import them (nothing here calls back up). Pure: it imports no I/O and reads no clock (``now_ms`` is given).
"""

from __future__ import annotations

import hashlib
import math
from collections import ChainMap
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Any

from ..asl import errors
from ..asl.budget import Budget, spending
from ..asl.dataflow import place_result, select
from ..asl.definition import ResourceCheck
from ..asl.errors import StatesError
from ..asl.jsonata import QUERY_EVALUATION_ERROR
from ..asl.jsonio import dumps, loads
from ..asl.scope import Scope
from ..asl.states import Definition, MapState, ParallelState, ResultState, State, TaskState
from ..asl.templates import Template
from ..asl.timestamps import format_ms
from .effects import DispatchKind, Effects, TimerKind
from .execution import FAILED, REDRIVABLE_MS, SUCCEEDED, ExecutionState, Flow, TaskAttempt, redrive_status
from .mocks import MockConfig
from .outcomes import End, Next

PAYLOAD_BYTES_MAX = 262_144
HISTORY_EVENTS_MAX = 25_000
VARIABLE_BYTES_MAX = 10 * 1024 * 1024
HISTORY_LIMIT_CAUSE = f"The execution reached the maximum number of history events ({HISTORY_EVENTS_MAX})."
ROOT = ""
NO_DETAILS = {"truncated": False}
_MARKERS = frozenset({"MapIterationSucceeded", "MapIterationFailed", "MapIterationAborted"})
_POINT_PAST_MARKERS = frozenset({"MapIterationStarted", "MapStateStarted", "ParallelStateStarted", "MapStateFailed",
                                 "ParallelStateFailed"})
_CLOSING = frozenset({"ExecutionSucceeded", "ExecutionFailed", "ExecutionAborted", "ExecutionTimedOut"})
FLOW_KEY = "flow"  # a traced execution's event: the flow it happened in (not AWS's: GetExecutionHistory drops it)
_ABSENT = object()


class HistoryFull(Exception):
    """The next event would be the last one the history may hold: it must be ExecutionFailed."""


@dataclass(slots=True)
class Decision:
    """What applying one command to one execution comes to: its new state, and the effects the commit writes."""

    state: ExecutionState
    effects: Effects = field(default_factory=Effects)
    # The step spent its share of evaluation (Step.heavy), or deferred a start's first state: the engine decides
    # the execution's next steps in the heavy lane (engine/heavy_routing.py).
    heavy: bool = False


@dataclass(frozen=True, slots=True)
class Services:
    """What Task states ask of the world, and the engine's bounds on one step, passed in as data so the decider
    stays pure."""

    mint_token: Callable[[str, int, int], str]  # (execution ARN, scheduled event id, attempt) -> task token
    activities: Container[str]  # the ARNs of the activities that exist
    budget: Callable[[], Budget] = Budget  # a fresh evaluation budget for each transition step
    apply_states_max: int = 100  # states one step enters; then the execution continues in a later tick
    apply_steps_max: int = 2_000  # evaluation steps after which one step enters no more states
    heavy_pause_ms: int = 250  # then, the wait before the execution goes on
    # The wait of a continuation when a step stopped at its share of states: 0, or, for an account over its
    # StateTransition budget, until its bucket has refilled (engine/transitions.py)
    continue_after_ms: int = 0
    wait_scale: float = 1.0  # Waits and Retry backoffs last this many times their length (serve --wait-scale)
    mocks: MockConfig | None = None  # serve --mock-config: what Task states of a test case answer instead
    # How a definition's aws-sdk resources are checked against the services the SDK models (asl/definition.py).
    resource_check: ResourceCheck | None = None
    # serve --status-events-bus / --webhooks: every status change of a Standard execution dispatches its
    # "Step Functions Execution Status Change" event from the commit that makes it (integrations/status_events.py).
    status_events: bool = False
    redrivable_ms: int = REDRIVABLE_MS  # how long a closed execution can be redriven (the events' redriveStatus)


def poll_timer(task: TaskAttempt) -> str:
    return TimerKind.POLL.id(task.scheduled_id)


def poll_dispatch(task: TaskAttempt) -> str:
    """The dispatch of the task's latest poll (each poll has its own, so a late report names the one it answers)."""
    return f"{task.scheduled_id}.poll{task.polls}"


class Step:
    """One Decision in the making, over a copy of the execution's state."""

    __slots__ = ("budget", "child_texts", "context_given", "decision", "definition", "entered", "execution",
                 "failures", "flows", "gathering", "halted", "kept", "known_text", "known_value", "now_ms", "resumed",
                 "resuming", "services", "trace")

    def __init__(self, decision: Decision, definition: Definition | None, now_ms: int,
                 services: Services | None = None) -> None:
        self.services = services
        self.decision = decision
        self.execution = decision.state
        self.flows = decision.state.flows
        self.definition = definition
        self.now_ms = now_ms
        self.known_value: Any = None  # the payload written last, and its text: not written twice
        self.known_text: str | None = None
        # Payloads whose text is not the compact one, by id: what passes them on untouched writes them so. Those
        # the flows held between steps are known again (Flow.text, FanOut.texts).
        self.kept: dict[int, tuple[Any, str]] = {}
        for flow in (*decision.state.flows.values(), *decision.state.halted.values()):
            if flow.text is not None:
                self.kept[id(flow.data)] = (flow.data, flow.text)
                if flow.fan is not None:  # the fan-out's state input is the flow's data, read back as a copy
                    self.kept[id(flow.fan.state_input)] = (flow.fan.state_input, flow.text)
        # The output text of each fan-out child that succeeded in this step, by (parent flow id, slot): the join
        # writes its result from them (or from FanOut.texts, or from the value).
        self.child_texts: dict[tuple[str, int], str] = {}
        self.context_given: dict[str, Any] | None = None  # TestState's context: the context object, as given
        self.gathering: set[str] = set()  # flows whose fan-out loop is on the stack
        self.failures: dict[str, tuple[str | None, str | None]] = {}  # their children's failures, to report
        # Flows a failure stopped, as it found them, until a Retry or Catch takes the failure (they are forgotten)
        # or it closes the execution (they are kept, for a redrive): the failed branch or iteration, its siblings,
        # the fan-out gathering them.
        self.halted: dict[str, Flow] = {}
        # A redrive: the flows the closed attempt left (ExecutionState.halted), and the new flows that re-enter a
        # fan-out, by the halted flow each takes up (its unfinished children are resumed too).
        self.resumed: dict[str, Flow] = {}
        self.resuming: dict[str, str] = {}
        # TestState only: the data-flow steps of the state under test.
        self.trace: dict[str, Any] | None = None
        self.budget = _DEFAULT_SERVICES.budget() if services is None else services.budget()
        self.entered = 0  # states entered in this step

    # -- history, timers, dispatches

    def emit(self, event_type: str, details_key: str | None, details: dict | None,
             previous_event_id: int | None = None, *, flow: str | None = None) -> int:
        """Record a history event; ``flow``: the flow it belongs to (a state's, a task attempt's, an iteration's),
        kept with the event of a traced execution (``FLOW_KEY``, left out of the API's history) so that its spans
        nest where the event happened: previousEventId follows the commits, not the branches."""
        execution = self.execution
        event_id = execution.next_event_id
        if event_id >= HISTORY_EVENTS_MAX and event_type not in _CLOSING:
            raise HistoryFull
        if previous_event_id is None:
            marker_prev = execution.marker_prev
            use_marker = marker_prev is not None and event_type in _POINT_PAST_MARKERS
            previous_event_id = marker_prev if use_marker else event_id - 1
        event = {"timestamp": self.now_ms, "type": event_type, "id": event_id, "previousEventId": previous_event_id}
        if details_key is not None:
            event[details_key] = details
        if flow is not None and execution.trace is not None:
            event[FLOW_KEY] = flow
        self.decision.effects.events.append(event)
        execution.next_event_id = event_id + 1
        if event_type not in _MARKERS:
            execution.marker_prev = None
        elif execution.marker_prev is None:
            execution.marker_prev = previous_event_id
        return event_id

    def add_timer(self, timer_id: str, fire_at_ms: int) -> None:
        self.execution.timers[timer_id] = fire_at_ms
        self.decision.effects.timers_added.append((timer_id, fire_at_ms))

    def remove_timer(self, timer_id: str) -> None:
        fire_at_ms = self.execution.timers.pop(timer_id)
        added = self.decision.effects.timers_added
        if (timer_id, fire_at_ms) in added:  # set and cancelled in the same step: no row to delete
            added.remove((timer_id, fire_at_ms))
        else:
            self.decision.effects.timers_removed.append((timer_id, fire_at_ms))

    def cancel_timer(self, flow: Flow) -> None:
        """The flow waits on its timer no more (a fan-out's continuation, once the fan-out goes on or ends). One a
        redrive's flow took over from the closed attempt is no row any more: the close removed every timer."""
        if flow.timer is not None:
            if flow.timer in self.execution.timers:
                self.remove_timer(flow.timer)
            flow.timer = None

    def sleep(self, flow: Flow, timer_id: str, fire_at_ms: int) -> None:
        """A Wait or a Retry backoff until ``fire_at_ms`` (scaled by ``Services.wait_scale``)."""
        scale = 1.0 if self.services is None else self.services.wait_scale
        if scale != 1.0 and fire_at_ms > self.now_ms:
            fire_at_ms = self.now_ms + math.ceil((fire_at_ms - self.now_ms) * scale)
        flow.timer = timer_id
        self.add_timer(timer_id, fire_at_ms)

    def add_dispatch(self, dispatch_id: str, payload: dict[str, Any]) -> None:
        self.decision.effects.dispatches_added.append((dispatch_id, payload))

    def remove_dispatch(self, dispatch_id: str) -> None:
        added = self.decision.effects.dispatches_added
        staged = [entry for entry in added if entry[0] == dispatch_id]
        if staged:  # scheduled and gone in the same step: no row was ever written
            added.remove(staged[0])
        else:
            self.decision.effects.dispatches_removed.append(dispatch_id)

    # -- a failure's casualties, kept for a redrive

    def halt(self, flow_id: str) -> None:
        """A failure stops ``flow_id``'s fan-out: keep it and every flow under it as they are now (a flow kept by
        an earlier, deeper failure of this step stays as that one found it)."""
        for found_id, flow in self.flows.items():
            if found_id not in self.halted and self.under(found_id, flow_id, self.flows):
                self.halted[found_id] = flow.copy()

    def forget_halted(self, flow_id: str) -> None:
        """A Retry or Catch of ``flow_id`` took the failure: what it stopped will not be redriven."""
        if self.halted:
            known = {**self.flows, **self.halted}
            for found_id in [found_id for found_id in self.halted if self.under(found_id, flow_id, known)]:
                del self.halted[found_id]

    def resume(self, flow_id: str, halted_id: str) -> tuple[str, Any]:
        """Redrive: the new flow ``flow_id`` takes up where the halted flow stood (its variables; a fan-out's
        gathered results, through ``resuming``). Returns the state it enters again and that state's input."""
        halted = self.resumed[halted_id]
        self.flows[flow_id].variables = dict(halted.variables)
        # a fan-out's gathered results, or a distributed Map's run (its attempt names it), are taken up again
        task = halted.task
        if halted.fan is not None or (task is not None and task.started and ":mapRun:" in (task.child or "")):
            self.resuming[flow_id] = halted_id
        return halted.state, halted.data

    @staticmethod
    def under(found_id: str, flow_id: str, flows: dict[str, Flow]) -> bool:
        """Whether ``found_id`` is ``flow_id`` or one of its descendants."""
        while found_id != flow_id:
            parent = flows[found_id].parent if found_id in flows else None
            if parent is None:
                return False
            found_id = parent
        return True

    # -- closing the execution

    def close(self, status: str, event_type: str, details_key: str, details: dict, *,
              output: str | None = None, error: str | None = None, cause: str | None = None,
              previous_event_id: int | None = None, redrivable: bool = True) -> None:
        """Close the execution; ``redrivable`` False: its flows are not kept for a redrive (they hold data that
        could not be stored)."""
        execution = self.execution
        self.emit(event_type, details_key, details, previous_event_id)
        for timer_id in list(execution.timers):
            self.remove_timer(timer_id)
        for flow in self.flows.values():
            task = flow.task
            if task is not None and not task.started:
                self.remove_dispatch(str(task.scheduled_id))
            elif task is not None and task.child is not None:  # a nested execution this one waits on stops too
                self.add_dispatch(f"stop-{task.scheduled_id}", {"kind": DispatchKind.STOP, "target": task.child})
            elif task is not None and task.job is not None:  # so does an AWS job, where its API allows
                self.abandon_job(flow)
        execution.status = status
        execution.stop_ms = self.now_ms
        execution.output, execution.error, execution.cause = output, error, cause
        # Where a redrive picks up: the flows as they stand, each failure's casualties as the failure found them.
        execution.halted = {} if status == SUCCEEDED or not redrivable else {**self.flows, **self.halted}
        self.flows.clear()
        if execution.parent is not None:  # a .sync parent waits for this one: tell it, from the same commit
            self.add_dispatch("parent", {"kind": DispatchKind.PARENT, **execution.parent, "execution": execution.arn,
                                         "describe": describe_for_parent(execution)})
        self.status_changed()

    def status_changed(self, status: str | None = None) -> None:
        """The execution's status changed in this step (to ``status``, else to the one it has now): with
        Services.status_events, its status change event goes out from this commit. Express executions send none,
        as on AWS."""
        services = self.services
        if services is None or not services.status_events or ":express:" in self.execution.arn:
            return
        detail = status_detail(self.execution, self.now_ms, services.redrivable_ms, status)
        self.add_dispatch(f"status-{self.execution.next_event_id}-{detail['status']}",
                          {"kind": DispatchKind.STATUS, "time": self.now_ms, "detail": detail})

    # -- AWS jobs a .sync task polls (decider/tasks.py); a poll and a stop are dispatches to the integration

    def job_dispatch(self, flow: Flow, what: str) -> dict[str, Any]:
        """The dispatch that polls (``what`` "poll") or stops ("cancel") the job ``flow``'s task waits on (the job
        names its integration: a stop has no definition at hand)."""
        task = flow.task
        return {"kind": task.job["kind"], "action": task.job["action"], "pattern": "sync", what: task.polls,
                "job": task.job, "execution": self.execution.arn, "scheduled_id": task.scheduled_id}

    def abandon_job(self, flow: Flow) -> None:
        """The task stops waiting on its job before the job ended: drop a poll under way, stop the job."""
        task = flow.task
        self.end_poll(task)
        self.add_dispatch(f"cancel-{task.scheduled_id}", self.job_dispatch(flow, "cancel"))

    def end_poll(self, task: TaskAttempt) -> None:
        """The task's latest poll is over: its dispatch goes, if it is still pending."""
        if task.polling:
            task.polling = False
            self.remove_dispatch(poll_dispatch(task))

    def fail_execution(self, error: str | None, cause: str | None, redrivable: bool = True) -> None:
        self.close(FAILED, "ExecutionFailed", "executionFailedEventDetails", without_none(error, cause),
                   error=error, cause=cause, redrivable=redrivable)

    def guarded(self, action: Callable[..., object], *args: Any) -> None:
        """Run ``action`` on this step's evaluation budget; if the history fills up, the execution fails with the
        last event it may hold."""
        try:
            with spending(self.budget):
                action(*args)
        except HistoryFull:
            self.fail_execution(errors.RUNTIME, HISTORY_LIMIT_CAUSE)
        if self.heavy():
            self.decision.heavy = True

    def heavy(self) -> bool:
        """Whether this step spent its share of evaluation (not only its share of states)."""
        services = self.services or _DEFAULT_SERVICES
        return self.budget.exceeded or self.budget.steps >= services.apply_steps_max

    def done_enough(self) -> bool:
        """Whether this step has done its share (states entered, evaluation spent, or the budget ran out once):
        a flow about to enter another state waits for a later tick instead (TestState enters none)."""
        services = self.services or _DEFAULT_SERVICES
        return self.entered >= services.apply_states_max or self.heavy()

    # -- what a state sees

    def json_of(self, value: Any, state_name: str) -> str:
        """``value`` as JSON. A payload that passes through untouched keeps its text as written, as on AWS (the
        execution input's spacing shows in every state that passes it on, recorded on AWS in 2024); what a state
        builds (a Result, Parameters, a Map's items) is written compactly, as AWS-recorded histories show.

        Over 256 KiB it is States.DataLimitExceeded, whose cause names the state that produced it (AWS's cause
        carries no "An error occurred while executing the state" prefix; see ``runtime_cause``)."""
        text = self.verbatim(value)
        if text is None:
            if value is self.known_value and self.known_text is not None and isinstance(value, dict | list):
                text = self.known_text  # identity of a container means untouched (scalars are shared by Python)
            else:
                text = self.known(value, dumps(value))
        if len(text.encode()) > PAYLOAD_BYTES_MAX:
            raise StatesError(errors.DATA_LIMIT_EXCEEDED,
                              f"The state/task '{state_name}' returned a result with a size exceeding the maximum "
                              "number of bytes service limit.")
        return text

    def known(self, value: Any, text: str) -> str:
        """Remember ``text`` as how ``value`` is written, while it passes on untouched; returns ``text``."""
        self.known_value, self.known_text = value, text
        return text

    def keep(self, value: Any, text: str) -> None:
        """``value`` (a container) is written ``text``, not compactly, wherever it passes on untouched."""
        self.kept[id(value)] = (value, text)

    def take(self, text: str) -> Any:
        """The payload a text holds (the execution input, a redriven state's input), keeping the text."""
        value = loads(text)
        if isinstance(value, dict | list) and text != dumps(value):
            self.keep(value, text)
        else:
            self.known(value, text)
        return value

    def verbatim(self, value: Any) -> str | None:
        """The text ``value`` keeps, if it is not the compact one."""
        if not self.kept:  # the common case: every payload so far is compact
            return None
        found = self.kept.get(id(value))
        return found[1] if found is not None and found[0] is value else None

    def hold(self, flow: Flow, data: Any) -> None:
        """The flow keeps ``data`` (its state's input) until a later step: with its text, if that is its own."""
        flow.data, flow.text = data, self.verbatim(data)

    def scope(self, flow_id: str, state_name: str, map_item: tuple[int, Any] | None = None) -> Scope:
        """The context object and the variables a state in this flow sees (its own, then each outer flow's)."""
        own = flow = self.flows[flow_id]
        layers = [flow.variables]
        while flow.parent is not None:
            flow = self.flows[flow.parent]
            layers.append(flow.variables)
        return Scope(lambda: self.context_for(own, state_name, map_item), ChainMap(*layers))

    def context_for(self, flow: Flow, state_name: str, map_item: tuple[int, Any] | None) -> dict[str, Any]:
        if self.context_given is not None:
            return self.given_context(map_item)
        context = context_object(self.execution, state_name, flow.entered_ms, map_item)
        state = self.definition.machines[flow.machine].states.get(state_name) if self.definition else None
        if isinstance(state, TaskState):
            context["State"]["RetryCount"] = max(flow.attempts - 1, 0)
            if _has_token(state) and flow.task is not None:
                context["Task"] = {"Token": self.token(flow.task.scheduled_id, flow.attempts)}
        if self.trace is not None:  # TestState's context as AWS records it (LocalStack's AWS-validated 2025
            # recordings): the state is "StateName", no RedriveCount, a null RoleArn when none was given, and a
            # Map or Parallel has a RetryCount as a Task does
            context["State"]["Name"] = "StateName"
            del context["Execution"]["RedriveCount"]
            context["Execution"]["RoleArn"] = self.execution.role_arn or None
            if isinstance(state, MapState | ParallelState):
                context["State"]["RetryCount"] = 0
        return context

    def given_context(self, map_item: tuple[int, Any] | None) -> dict[str, Any]:
        """TestState's context, which is the whole context object: AWS shows $$ as given, {} for {} (LocalStack's
        AWS-validated test_state_context_object snapshots). A Map's ItemSelector also reads the item it selects
        for (AWS refuses a given Map field), which is added to it: inferred."""
        if map_item is None:
            return self.context_given
        return {**self.context_given, "Map": {"Item": {"Index": map_item[0], "Value": map_item[1]}}}

    def token(self, scheduled_id: int, attempt: int) -> str:
        if self.services is None:
            raise AssertionError("a task token is needed but no token signer was given")
        return self.services.mint_token(self.execution.arn, scheduled_id, attempt)

    def seed(self, flow: Flow) -> bytes:
        """Entropy for States.UUID and States.MathRandom: fixed by the execution and the state's entry."""
        return hashlib.blake2b(f"{self.execution.arn}|{flow.entered_id}".encode(), digest_size=16).digest()

    def seed_of(self, flow: Flow) -> Callable[[], bytes]:
        """The seed, computed only if something asks for it (most templates call no random intrinsic)."""
        return lambda: self.seed(flow)

    def states_of(self, flow: Flow) -> dict[str, State]:
        return self.definition.machines[flow.machine].states

    def state_of(self, flow: Flow) -> State:
        """The state the flow is in."""
        return self.definition.machines[flow.machine].states[flow.state]

    def note(self, step: str, value: Any) -> Any:
        """Record a data-flow step for TestState's inspection data; returns the value unchanged."""
        if self.trace is not None:
            self.trace[step] = value
        return value

    # -- evaluating a state's fields

    def assigned(self, flow_id: str, assign: Template | None, result: Any, context: Any) -> dict[str, Any] | None:
        """Evaluate an Assign (``$`` is the state's result); the variables change only when the state exits."""
        if assign is None:
            return None
        return self.within_limits(assign.render(result, context, self.seed_of(self.flows[flow_id])))

    def within_limits(self, values: dict[str, Any]) -> dict[str, Any]:
        """AWS's limits: one state assigns at most 256 KiB, and an execution holds at most 10 MiB of variables."""
        if len(dumps(values).encode()) > PAYLOAD_BYTES_MAX:
            raise StatesError(errors.DATA_LIMIT_EXCEEDED, f"The variables assigned by the state exceed the maximum "
                              f"size of {PAYLOAD_BYTES_MAX} bytes.")
        held = {name: value for flow in self.flows.values() for name, value in flow.variables.items()}
        held.update(values)
        if len(dumps(held).encode()) > VARIABLE_BYTES_MAX:
            raise StatesError(errors.DATA_LIMIT_EXCEEDED, f"The execution's variables would exceed the maximum "
                              f"size of {VARIABLE_BYTES_MAX} bytes.")
        return values

    def jsonata(self, flow_id: str, state: State, field: str, data: Any, default: Any = _ABSENT,
                **states: Any) -> Any:
        """Evaluate one JSONata field of ``state`` (``default`` when the state does not set it)."""
        compiled = state.jsonata.get(field)
        if compiled is None:
            return default
        return self.evaluate_expression(flow_id, state, compiled, data, field, **states)

    def evaluate_expression(self, flow_id: str, state: State, compiled: Any, data: Any, field: str,
                            map_item: tuple[int, Any] | None = None, **states: Any) -> Any:
        """A JSONata expression against ``$states`` (input, context, and ``states``) and the flow's variables."""
        scope = self.scope(flow_id, state.name, map_item)
        bindings = {"input": data, "context": scope(), **states}
        try:
            value = compiled.evaluate(dict(scope.variables), bindings, self.seed(self.flows[flow_id]) + field.encode(),
                                      now_ms=self.now_ms)
        except StatesError as failure:
            failure.location = field + getattr(failure, "inner", "")
            raise
        if field.endswith("Assign"):
            if not isinstance(value, dict):
                raise query_error(f"The Assign field must evaluate to an object, not {type(value).__name__}", field)
            return self.within_limits(value)
        return value

    def shape_result(self, flow_id: str, state: ResultState, data: Any, result: Any) -> tuple[Any, dict | None]:
        """A Task's, Parallel's or Map's result made into the state's output and its variable assignments."""
        self.note("result", result)
        if state.query_language == "JSONata":
            assigned = self.jsonata(flow_id, state, "Assign", data, None, result=result)
            output = self.jsonata(flow_id, state, "Output", data, result, result=result)
        else:
            context = self.scope(flow_id, state.name)
            if state.result_selector is not None:
                result = state.result_selector.render(result, context, self.seed_of(self.flows[flow_id]))
            self.note("afterResultSelector", result)  # shown without a ResultSelector too (AWS's TestState)
            assigned = self.assigned(flow_id, state.assign, result, context)
            placed = self.note("afterResultPath", place_result(state.result_path, data, result))
            output = select(state.output_path, placed, context)
        self.json_of(output, state.name)  # a result over the size limit fails here, where Retry and Catch apply
        return output, assigned

    # -- leaving a state

    def emit_exited(self, state: State, output: Any, flow_id: str | None = None,
                    assigned: dict[str, Any] | None = None, previous_event_id: int | None = None, *,
                    flow: str | None = None) -> None:
        details = {"name": state.name, "output": self.json_of(output, state.name), "outputDetails": NO_DETAILS}
        if assigned:
            details["assignedVariables"] = {name: dumps(value) for name, value in assigned.items()}
            details["assignedVariablesDetails"] = NO_DETAILS
        self.emit(f"{state.type}StateExited", "stateExitedEventDetails", details, previous_event_id,
                  flow=flow_id if flow is None else flow)
        if assigned:
            self.flows[flow_id].variables.update(assigned)

    def exit(self, state: State, output: Any, flow_id: str | None = None,
             assigned: dict[str, Any] | None = None) -> Next | End:
        self.emit_exited(state, output, flow_id, assigned)
        return End(output) if state.end else Next(state.next, output)

    def runtime_cause(self, flow: Flow, failure: StatesError) -> str:
        """The cause of an error a state raised itself, as AWS words it: prefixed with where it happened, except
        States.DataLimitExceeded, whose cause AWS records as it is (it names the state already)."""
        if failure.error == errors.DATA_LIMIT_EXCEEDED:
            return failure.cause
        return (f"An error occurred while executing the state '{flow.state}' "
                f"(entered at the event id #{flow.entered_id}). {failure.cause}")


def _has_token(state: TaskState) -> bool:
    """Whether the Task's attempts have a task token in $$.Task.Token: a callback's, and a nested execution's
    .sync too, whose child may answer its parent's attempt with it (LocalStack's AWS-validated
    SFN_START_EXECUTION_SYNC_WITH_TASK_TOKEN: SendTaskSuccess ends the parent's .sync task before its child ends)."""
    return state.pattern == "waitForTaskToken" or (state.integration == "states" and state.pattern.startswith("sync"))


_DEFAULT_SERVICES = Services(lambda arn, scheduled_id, attempt: "", ())


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
            "RedriveCount": execution.redrive_count,
        },
        "StateMachine": {
            "Id": execution.state_machine_arn,
            "Name": execution.state_machine_arn.rsplit(":", 1)[-1],
        },
        "State": {"Name": state_name, "EnteredTime": format_ms(entered_ms)},
    }
    if execution.redrive_ms is not None:
        context["Execution"]["RedriveTime"] = format_ms(execution.redrive_ms)
    if map_item is not None:
        context["Map"] = {"Item": {"Index": map_item[0], "Value": map_item[1]}}
    return context


STATUS_EVENT_DATA_MAX = 248 * 1024  # escaped input and output an event may carry (EventBridge takes 256 KB)


def status_detail(execution: ExecutionState, now_ms: int, redrivable_ms: int,
                  status: str | None = None) -> dict[str, Any]:
    """The detail of a "Step Functions Execution Status Change" event, as AWS sends it: dates in epoch
    milliseconds, null for what the execution lacks; as AWS documents, the input is left out (``included`` false)
    when the escaped input and output together pass 248 KB, and the output too when it alone does."""
    status = status or execution.status
    output_size = _escaped_size(execution.output)
    keep_output = output_size <= STATUS_EVENT_DATA_MAX
    keep_input = _escaped_size(execution.input) + (output_size if keep_output else 0) <= STATUS_EVENT_DATA_MAX
    redrive, reason = redrive_status(execution, now_ms, redrivable_ms)
    return {"executionArn": execution.arn, "stateMachineArn": execution.state_machine_arn, "name": execution.name,
            "status": status, "startDate": execution.start_ms, "stopDate": execution.stop_ms,
            "input": execution.input if keep_input else None, "output": execution.output if keep_output else None,
            "inputDetails": {"included": keep_input},
            "outputDetails": None if execution.output is None else {"included": keep_output},
            "error": execution.error, "cause": execution.cause,
            "stateMachineVersionArn": execution.version_arn, "stateMachineAliasArn": execution.alias_arn,
            "redriveCount": execution.redrive_count, "redriveDate": execution.redrive_ms,
            "redriveStatus": redrive, "redriveStatusReason": reason}


def _escaped_size(text: str | None) -> int:
    """The bytes of ``text`` as a JSON string inside the event (quotes and escapes counted)."""
    return 0 if text is None else len(dumps(text))


def describe_for_parent(execution: ExecutionState) -> dict[str, Any]:
    """A closed execution as a .sync parent task receives it: DescribeExecution with AWS's capitalised keys."""
    described: dict[str, Any] = {
        "ExecutionArn": execution.arn, "Input": execution.input, "InputDetails": {"Included": True},
        "Name": execution.name, "RedriveCount": execution.redrive_count, "StartDate": execution.start_ms,
        "StateMachineArn": execution.state_machine_arn, "Status": execution.status, "StopDate": execution.stop_ms,
    }
    if execution.output is not None:
        described["Output"] = execution.output
        described["OutputDetails"] = {"Included": True}
    for key in ("error", "cause"):
        if getattr(execution, key) is not None:
            described[key.capitalize()] = getattr(execution, key)
    if execution.redrive_ms is not None:
        described["RedriveDate"] = execution.redrive_ms
    # As the parent hears it when this one closes: the redrivable period has only begun.
    described["RedriveStatus"], reason = redrive_status(execution, execution.stop_ms, REDRIVABLE_MS)
    if reason is not None:
        described["RedriveStatusReason"] = reason
    return dict(sorted(described.items()))


DATA_KEYS = ("input", "inputDetails", "output", "outputDetails")  # what includeExecutionData false leaves out


def without_data(details: dict[str, Any]) -> dict[str, Any]:
    """An event's details without the execution data in them (GetExecutionHistory's and the execution logs'
    ``includeExecutionData`` false)."""
    return {key: value for key, value in details.items() if key not in DATA_KEYS}


def without_none(error: str | None, cause: str | None) -> dict[str, str]:
    """Event details of an error: only the fields that are set."""
    return {key: value for key, value in (("error", error), ("cause", cause)) if value is not None}


def query_error(cause: str, location: str) -> StatesError:
    """States.QueryEvaluationError at a field of the state (the EvaluationFailed event names it)."""
    failure = StatesError(QUERY_EVALUATION_ERROR, cause)
    failure.location = location
    return failure

