"""The decider: pure functions from (mutable state, command, definition, now_ms) to a Decision.

A Decision carries the history events to append, the new mutable state and the effects (timers and dispatches to
write or delete). Runs of pure states (Pass, Choice, a Wait already due, and Parallel and Map whose branches are
pure) are evaluated in one go, so they are committed together. Nothing in the decider reads a clock, the store
or the disk: what it needs of the world (task token signing, which activities exist) comes in ``Services``.

This module is the decider's public face; the work is done by functions over a ``step.Step`` (the decision being
built), one module per concept:
  flows             running flows: enter a state, act on its outcome, gather a fan-out's children
  jsonpath_states   Pass, Choice, Wait, Succeed, Fail under JSONPath
  jsonata_states    the same under JSONata, and the JSONata fields of the other states
  fan_out           Parallel and Map: inputs, child records, join, a child's failure
  retry_catch       Retry, Catch, or the flow fails
  tasks             Task attempts: schedule, start, result, heartbeat, deadlines
Control lives in *flows* (``execution.Flow``): the top level is flow "" and every Parallel branch or Map iteration
is a child flow named "<entered event id of the Parallel/Map>.<index>".

A redrive reopens a closed execution from the flows it left (``ExecutionState.halted``): each enters again the
state it stood in, with fresh attempt counts; a Parallel or Map re-entered keeps its children's results and resumes
only the children that had not succeeded (``fan_out.resumed_children``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..asl import errors
from ..asl.budget import spending
from ..asl.errors import StatesError
from ..asl.jsonio import loads
from ..asl.states import Definition, MapState, ParallelState
from . import distributed_map, fan_out, flows, map_runs, retry_catch, tasks
from .effects import TimerKind
from .execution import (
    ABORTED,
    OPEN_MS_MAX,
    REDRIVE_TOKEN_MS,
    REDRIVE_TOKENS_MAX,
    RUNNING,
    TIMED_OUT,
    ExecutionState,
    Flow,
)
from .outcomes import (
    AttemptFailed,
    AttemptPolled,
    AttemptResult,
    AttemptSubmitted,
    AttemptSucceeded,
    Fail,
    Outcome,
    Wait,
)
from .step import HISTORY_EVENTS_MAX as HISTORY_EVENTS_MAX
from .step import (
    HISTORY_LIMIT_CAUSE,
    NO_DETAILS,
    ROOT,
    Decision,
    HistoryFull,
    Services,
    Step,
    without_none,
)
from .step import PAYLOAD_BYTES_MAX as PAYLOAD_BYTES_MAX
from .step import describe_for_parent as describe_for_parent

EXECUTION_TIMEOUT_TIMER = TimerKind.EXECUTION_TIMEOUT.id()


def started_again(execution: ExecutionState, token: str | None, input_text: str, parent: dict[str, Any] | None,
                  test_case: str | None, synchronous: bool) -> int | None:
    """A start of an execution that exists already: the start time to answer with, or None for
    ExecutionAlreadyExists. This very start sent again (its token) stands, open or closed; another start stands
    while the execution runs with the same input, for the same parent attempt and test case, unless it is
    synchronous (StartSyncExecution waits for its own run)."""
    if token is not None and token == execution.start_token:
        return execution.start_ms
    if (execution.is_open and execution.input == input_text and execution.parent == parent
            and execution.test_case == test_case and not synchronous):
        return execution.start_ms
    return None


def start(execution: ExecutionState, definition: Definition, now_ms: int,
          services: Services | None = None, duration_ms_max: int | None = None, defer: bool = False) -> Decision:
    """Open a new execution (version 0, no events yet) and run it until it waits or closes. ``duration_ms_max``:
    it times out then at the latest, whatever the definition's TimeoutSeconds (an Express execution's limit; a
    Standard execution's, None, is a year: ``OPEN_MS_MAX``).
    ``defer``: open it only, its first state entered by a continuation due now (``flows.defer``)."""
    decision = Decision(execution.copy())
    step = Step(decision, definition, now_ms, services)
    details = {"input": execution.input, "inputDetails": NO_DETAILS, "roleArn": execution.role_arn}
    if execution.alias_arn is not None:  # as AWS records a start through an alias or on a version
        details["stateMachineAliasArn"] = execution.alias_arn
    if execution.version_arn is not None:
        details["stateMachineVersionArn"] = execution.version_arn
    step.emit("ExecutionStarted", "executionStartedEventDetails", details)
    step.status_changed()
    timeout_ms = OPEN_MS_MAX if duration_ms_max is None else duration_ms_max
    if definition.timeout_seconds is not None:
        timeout_ms = min(definition.timeout_seconds * 1000, timeout_ms)
    step.add_timer(EXECUTION_TIMEOUT_TIMER, execution.start_ms + timeout_ms)
    step.flows[ROOT] = Flow(0, None, 0)
    data = step.take(execution.input)
    if defer:
        flows.defer(step, ROOT, definition.start_at, data)
    else:
        step.guarded(flows.run, step, ROOT, definition.start_at, data, 0)
    return decision


def redrive_reads(execution: ExecutionState) -> list[int]:
    """The Entered events a redrive needs: a Wait that was waiting keeps only its effective input (after InputPath),
    and enters again on its raw input, which its Entered event holds."""
    return [flow.entered_id for flow in execution.halted.values() if _waiting(flow)]


def _waiting(flow: Flow) -> bool:
    return flow.timer is not None and TimerKind.of(flow.timer) is TimerKind.WAIT


def redriven_by(execution: ExecutionState, client_token: str | None, now_ms: int) -> int | None:
    """The time of the redrive this client token made within the last 15 minutes (answered again as it was)."""
    return next((redrive_ms for token, redrive_ms in execution.redrive_tokens
                 if token == client_token and now_ms - redrive_ms <= REDRIVE_TOKEN_MS), None)


def redrive(execution: ExecutionState, definition: Definition, now_ms: int, client_token: str | None,
            entered_inputs: Mapping[int, str], services: Services | None = None) -> Decision:
    """RedriveExecution (the caller checked ``execution.not_redrivable``): ExecutionRedriven, the definition's
    timeout counted again from now, and every flow the execution left entering again the state it stood in.
    ``entered_inputs``: the inputs of the Entered events ``redrive_reads`` named. A map run's child is redriven by
    its run alone, in a redrive round of the run's own that its token names and its close will tell."""
    decision = Decision(execution.copy())
    step = Step(decision, definition, now_ms, services)
    state = step.execution
    if state.map_run is not None:
        state.parent = {**state.parent, "round": map_runs.token_round(client_token)}
    step.resumed, state.halted = dict(state.halted), {}
    for flow_id, flow in step.resumed.items():
        if _waiting(flow):
            step.resumed[flow_id] = flow = flow.copy()
            step.hold(flow, step.take(entered_inputs[flow.entered_id]))
    state.status, state.stop_ms, state.output, state.error, state.cause = RUNNING, None, None, None, None
    state.redrive_count, state.redrive_ms = state.redrive_count + 1, now_ms
    if client_token is not None:
        state.redrive_tokens = [*state.redrive_tokens[1 - REDRIVE_TOKENS_MAX:], [client_token, now_ms]]
    step.emit("ExecutionRedriven", "executionRedrivenEventDetails", {"redriveCount": state.redrive_count})
    step.status_changed("PENDING_REDRIVE")  # as AWS reports a redrive: PENDING_REDRIVE, then RUNNING
    step.status_changed()
    deadline_ms = state.start_ms + OPEN_MS_MAX  # counted from its start, whatever its redrives
    if definition.timeout_seconds is not None:
        deadline_ms = min(deadline_ms, now_ms + definition.timeout_seconds * 1000)
    step.add_timer(EXECUTION_TIMEOUT_TIMER, deadline_ms)
    root = step.resumed[ROOT]
    step.flows[ROOT] = Flow(root.machine, None, 0)
    step.guarded(lambda: flows.run(step, ROOT, *step.resume(ROOT, ROOT)))
    return decision


def fire_timer(execution: ExecutionState, definition: Definition, timer_id: str, now_ms: int,
               services: Services | None = None) -> Decision | None:
    """Apply a fired timer, or return None when the execution no longer expects it."""
    if not execution.is_open or timer_id not in execution.timers:
        return None
    decision = Decision(execution.copy())
    step = Step(decision, definition, now_ms, services)
    step.remove_timer(timer_id)
    if timer_id == EXECUTION_TIMEOUT_TIMER:
        # As AWS records it: States.Timeout in the event (none on the execution), pointing at event 0
        step.close(TIMED_OUT, "ExecutionTimedOut", "executionTimedOutEventDetails", {"error": "States.Timeout"},
                   previous_event_id=0)
    else:
        step.guarded(flows.timer_fired, step, timer_id)
    return decision


def start_attempt(execution: ExecutionState, definition: Definition, scheduled_id: int, worker_name: str | None,
                  now_ms: int) -> Decision | None:
    """Record a task attempt as started, before it leaves the engine; None if it is not pending or started."""
    step = Step(Decision(execution.copy()), definition, now_ms)
    flow_id = tasks.pending_flow(step, scheduled_id) if execution.is_open else None
    if flow_id is None or step.flows[flow_id].task.started:
        return None
    if isinstance(step.state_of(step.flows[flow_id]), MapState):  # a distributed Map's map run was created
        map_runs.created(step, flow_id)
    else:
        step.guarded(tasks.start, step, flow_id, worker_name)
    return step.decision


def pending_attempts(execution: ExecutionState) -> dict[int, bool]:
    """The execution's pending task attempts: scheduled event id -> whether the attempt started. A read; no copy."""
    if not execution.is_open:
        return {}
    return {flow.task.scheduled_id: flow.task.started for flow in execution.flows.values() if flow.task is not None}


def complete_attempt(execution: ExecutionState, definition: Definition, scheduled_id: int, result: AttemptResult,
                     now_ms: int, services: Services | None = None) -> Decision | None:
    """Apply an attempt's result.

    None when that attempt is no longer pending (finished, timed out, or the execution closed): the caller's
    reply is late or a duplicate and changes nothing.
    """
    step = Step(Decision(execution.copy()), definition, now_ms, services)
    flow_id = tasks.pending_flow(step, scheduled_id) if execution.is_open else None
    if flow_id is None:
        return None
    if isinstance(step.state_of(step.flows[flow_id]), MapState):  # a distributed Map's read items, or its run's end
        step.guarded(lambda: flows.resume(step, flow_id, map_runs.answered(step, flow_id, result)))
        return step.decision
    if not step.flows[flow_id].task.started:  # a result before its start was recorded (a child that closed at
        # once, a token answered at once): the start lands with it
        step.guarded(tasks.start, step, flow_id, None)
        if flow_id not in step.flows:  # the start filled the history: the execution failed
            return step.decision
    if isinstance(result, AttemptSubmitted):
        step.guarded(tasks.submit, step, flow_id, result.output, result.job)
    elif isinstance(result, AttemptPolled):
        tasks.polled(step, flow_id, result.poll)
    else:
        step.guarded(_answered, step, flow_id, result)
    return step.decision


def _answered(step: Step, flow_id: str, result: AttemptSucceeded | AttemptFailed) -> None:
    """The attempt's result (after the submission a mocked answer stands for, if any), and what follows it."""
    tasks.submit_mocked(step, flow_id)
    if isinstance(result, AttemptSucceeded):
        flows.resume(step, flow_id, tasks.succeeded(step, flow_id, result.output))
    else:
        flows.resume(step, flow_id, tasks.failed(step, flow_id, result.error, result.cause))


def ack_dispatch(execution: ExecutionState, dispatch_id: str) -> Decision:
    """An integration finished with one of this execution's dispatches: delete the outbox row."""
    decision = Decision(execution.copy())
    decision.effects.dispatches_removed.append(dispatch_id)
    return decision


def heartbeat(execution: ExecutionState, definition: Definition, scheduled_id: int, now_ms: int) -> Decision | None:
    """SendTaskHeartbeat: note the time in the state (the heartbeat timer re-arms itself when it fires)."""
    step = Step(Decision(execution.copy()), definition, now_ms)
    flow_id = tasks.pending_flow(step, scheduled_id) if execution.is_open else None
    if flow_id is None:
        return None
    tasks.beat(step, flow_id)
    return step.decision


def stop(execution: ExecutionState, error: str | None, cause: str | None, now_ms: int,
         services: Services | None = None) -> Decision | None:
    """StopExecution: abort a running execution; None when it already closed."""
    if not execution.is_open:
        return None
    decision = Decision(execution.copy())
    Step(decision, None, now_ms, services).close(ABORTED, "ExecutionAborted", "executionAbortedEventDetails",
                                       without_none(error, cause), error=error, cause=cause, previous_event_id=0)
    return decision


def fail_unstorable(decision: Decision, now_ms: int, reason: str, services: Services | None = None) -> None:
    """The state ``decision`` leaves cannot be encoded (a value built at run time nested deeper than the store
    writes): the execution fails with States.Runtime in the same decision instead, dropping the data, so one
    execution's values never stop the others or leave it running."""
    # The flows hold that value: nothing to redrive.
    Step(decision, None, now_ms, services).fail_execution(
        errors.RUNTIME, f"The execution's state could not be stored: {reason} (a value nested too deeply).",
        redrivable=False)


class OneStateRun:
    """TestState: one state run once, without waiting and without going on (a state inside a Parallel or Map runs in
    its branch's or iterator's States, alone).

    ``outcome`` is Next, End, Fail, or Wait: a retry, or a Task attempt waiting for its result (then
    ``pending_task`` is its dispatch payload, and ``complete`` applies the integration's result). ``trace`` holds
    the data-flow steps; ``variables`` the variables afterwards; ``iterations`` a Map's iterations (its child
    executions: batches, when it batches), once its input processing ran.
    """

    def __init__(self, execution: ExecutionState, definition: Definition, state_name: str, data: Any,
                 variables: dict[str, Any], now_ms: int, services: Services | None = None,
                 retries_used: int = 0, mock: AttemptSucceeded | AttemptFailed | None = None,
                 context: dict[str, Any] | None = None, failures: int = 0, read: str | None = None) -> None:
        """``retries_used``: retries already spent on the state's retrier that takes the error (TestState's
        stateConfiguration.retrierRetryCount), so a test can see what the next error does after them; they are
        the attempt's $$.State.RetryCount too. ``mock``: a Parallel's or Map's result or error, standing for its
        branches or iterations (which are never run here: the API requires the mock), or None for another state
        (a Task's mock goes to ``complete``). ``context``: the context object ($$) the caller gives, instead of
        the one the run makes. A distributed Map's ``failures``: its iterations that failed
        (mapIterationFailureCount), and ``read``: the data its ItemReader read (mapItemReaderData)."""
        step = Step(Decision(execution.copy()), definition, now_ms, services)
        step.trace = {}
        step.context_given = context
        machine = next(found for found in definition.machines if state_name in found.states)
        flow = Flow(machine.index, None, 0, state=state_name, data=data, entered_ms=now_ms,
                    variables=dict(variables))
        state = machine.states[state_name]
        if retries_used:
            flow.retries = {str(index): retries_used for index in range(len(getattr(state, "retry", ())))}
            flow.attempts = retries_used  # the attempt about to run is the one after them
        step.flows[ROOT] = flow
        flow.entered_id = step.emit(f"{state.type}StateEntered", None, None)
        flow.entered_prev = step.decision.effects.events[-1]["previousEventId"]
        self._step, self._flow = step, flow
        self.iterations: int | None = None
        self.mocked_text: tuple[Any, str] | None = None  # a Parallel's or Map's mocked result, and its text
        if isinstance(state, ParallelState | MapState):
            assert mock is not None, "TestState runs a Parallel or Map only with a mock for its children"
            self.outcome: Outcome = self._guarded(lambda: self._mocked_fan_out(state, data, mock, failures, read))
        else:
            self.outcome = self._guarded(lambda: flows.attempt(step, ROOT, state, data))

    def _mocked_fan_out(self, state: ParallelState | MapState, data: Any, mock: AttemptSucceeded | AttemptFailed,
                        failures: int, read: str | None) -> Outcome:
        """The state's input processing as it runs, then the mock for what its children would have given: a
        mocked result unless more of a distributed Map's iterations failed than it tolerates, a mocked error as
        it is (the error its children ended the Map with: AWS answers a mocked errorOutput with that error
        whatever mapIterationFailureCount says, LocalStack's AWS-validated test_state_configuration snapshots;
        that it does so also past a declared threshold is inferred)."""
        step = self._step
        tolerance = None
        try:
            if isinstance(state, MapState) and state.distributed is not None:
                tolerance = distributed_map.enter(step, ROOT, state, data, read)
            else:
                fan_out.enter(step, ROOT, state, data, step.scope(ROOT, state.name))
        except StatesError as failure:
            return retry_catch.failed_in_state(step, ROOT, state, failure)
        fan = self._flow.fan
        if isinstance(state, MapState):
            self.iterations = len(fan.inputs)
        else:  # AWS's inspection data of a mocked Parallel has no afterInputPath (LocalStack's AWS-validated 2025
            step.trace.pop("afterInputPath", None)  # recordings of test_base_parallel_state_mock_success)
        if isinstance(mock, AttemptFailed):
            self._flow.fan = None
            return fan_out.failed(step, ROOT, mock.error, mock.cause)
        if tolerance is not None and tolerance.exceeded(failures, len(fan.inputs)):
            self._flow.fan = None
            return fan_out.failed(step, ROOT, distributed_map.THRESHOLD_EXCEEDED, distributed_map.THRESHOLD_CAUSE)
        fan.results = loads(mock.output)
        self.mocked_text = (loads(mock.output), mock.output)
        outcome = fan_out.join(step, ROOT, state)
        step.trace.pop("result", None)  # AWS shows no result for a mocked Parallel or Map: the mock is its own
        return outcome

    @property
    def trace(self) -> dict[str, Any]:
        return self._step.trace

    @property
    def variables(self) -> dict[str, Any]:
        return self._flow.variables

    @property
    def pending_task(self) -> dict[str, Any] | None:
        added = self._step.decision.effects.dispatches_added
        return added[-1][1] if isinstance(self.outcome, Wait) and self._flow.task is not None and added else None

    def complete(self, result: AttemptSucceeded | AttemptFailed) -> None:
        """The pending attempt's result."""
        step = self._step
        tasks.start(step, ROOT, None)
        if isinstance(result, AttemptSucceeded):
            self.outcome = self._guarded(lambda: tasks.succeeded(step, ROOT, result.output))
        else:
            self.outcome = self._guarded(lambda: tasks.failed(step, ROOT, result.error, result.cause))

    def _guarded(self, action: Callable[[], Outcome]) -> Outcome:
        try:
            with spending(self._step.budget):
                return action()
        except HistoryFull:  # a Map over more items than one history holds
            return Fail(errors.RUNTIME, HISTORY_LIMIT_CAUSE)
