"""Running flows: enter a state, act on its outcome, go on through pure states until the flow waits or ends.

A flow runs inline as far as it can: Pass, Choice, a Wait already due, and the children of a Parallel or Map
(``gather``) all run within one Decision, up to the step's share. When a flow ends, a child reports to its parent's
fan-out and the top level closes the execution. The only module that runs flows: the others return outcomes for it
to act on, so no callback goes back up. Functions over a ``step.Step``; pure, like the rest of the decider.

Fairness: one step runs at most ``Services.apply_states_max`` states of a flow, and enters none after it has spent
``apply_steps_max`` evaluation steps (or its budget ran out once). A flow past that stops before its next state on
a continuation timer, due at once (or after ``heavy_pause_ms`` when evaluation was the cost, so a heavy loop takes
a small share of the engine thread): the step commits, the engine applies the other executions' queued commands,
and the timer's firing enters that state in a later tick. A fan-out past its share starts its next children on a
continuation of its own the same way, so a Map over 10,000 items starts them a share per tick. A loop of pure
states thus advances a slice per tick instead of holding the engine; the first state a call runs always runs, so
every step makes progress.
"""

from __future__ import annotations

from typing import Any

from ..asl.errors import StatesError
from ..asl.states import MapState, ParallelState, State, TaskState, WaitState
from . import fan_out, jsonata_states, jsonpath_states, map_runs, retry_catch, tasks
from .effects import TimerKind
from .execution import SUCCEEDED, Flow
from .outcomes import WAIT, End, Fail, Next, Outcome
from .step import NO_DETAILS, ROOT, Step


def run(step: Step, flow_id: str, name: str, data: Any, previous_event_id: int | None = None) -> None:
    """Enter ``name`` in a flow and keep going through pure states until the flow waits, ends or fails, or the
    step has done its share (then the flow continues in a later tick)."""
    first = True
    while step.execution.is_open and flow_id in step.flows:
        flow = step.flows[flow_id]
        if not first and step.done_enough():
            _continue_later(step, flow, name, data)
            return
        first = False
        step.entered += 1
        state = step.states_of(flow)[name]
        try:
            text = step.json_of(data, name)
        except StatesError as failure:
            settle(step, flow_id, Fail(failure.error, failure.cause))
            return
        flow.entered_ms = step.now_ms  # the context object's EnteredTime, for what is evaluated on entry
        if isinstance(state, MapState) and fan_out.stalls(step, flow_id, state, data):
            flow.state = name
            step.hold(flow, data)
            return
        entered_id = step.emit(f"{state.type}StateEntered", "stateEnteredEventDetails",
                               {"name": name, "input": text, "inputDetails": NO_DETAILS}, previous_event_id,
                               flow=flow_id)
        previous_event_id = None
        flow.state, flow.entered_id = name, entered_id
        step.hold(flow, data)
        flow.entered_prev = step.decision.effects.events[-1]["previousEventId"]
        flow.retries, flow.attempts = {}, 0
        following = settle(step, flow_id, attempt(step, flow_id, state, data))
        if following is None:
            return
        name, data = following.state, following.data


def _continue_later(step: Step, flow: Flow, name: str, data: Any) -> None:
    """Stop before entering ``name``: the flow holds it and its input, and a timer (a row written in this step's
    commit, like any timer) enters it when it fires: at once, after ``heavy_pause_ms`` when evaluation was the
    step's cost, or once the account's transition budget has refilled (``_pause_ms``)."""
    flow.state = name
    step.hold(flow, data)
    flow.timer = TimerKind.CONTINUE.id(flow.entered_id)  # not step.sleep: --wait-scale scales Waits, not this
    step.add_timer(flow.timer, step.now_ms + _pause_ms(step))


def _pause_ms(step: Step) -> int:
    """How long a continuation waits: the engine's ``continue_after_ms`` (0, or until an account over its
    transition budget has some again), and at least ``heavy_pause_ms`` when evaluation was the step's cost."""
    services = step.services
    if services is None:
        return 0
    return max(services.heavy_pause_ms, services.continue_after_ms) if step.heavy() else services.continue_after_ms


def defer(step: Step, flow_id: str, name: str, data: Any) -> None:
    """Enter ``name`` in a step of its own, on a continuation due now: a start whose first state was too heavy to
    evaluate where it was decided (the engine decides the continuation in its heavy lane)."""
    _continue_later(step, step.flows[flow_id], name, data)
    step.decision.heavy = True


def settle(step: Step, flow_id: str, outcome: Outcome) -> Next | None:
    """Act on a state's outcome; returns it when the flow goes on to a next state."""
    if isinstance(outcome, Next):
        return outcome
    if isinstance(outcome, End):
        flow_succeeded(step, flow_id, outcome.output)
    elif isinstance(outcome, Fail):
        flow_failed(step, flow_id, outcome.error, outcome.cause)
    return None


def resume(step: Step, flow_id: str, outcome: Outcome) -> None:
    following = settle(step, flow_id, outcome)
    if following is not None:
        run(step, flow_id, following.state, following.data)


def attempt(step: Step, flow_id: str, state: State, data: Any) -> Outcome:
    """Run one state (again, on a retry) and return its outcome."""
    try:
        return _evaluate(step, flow_id, state, data)
    except StatesError as failure:
        return retry_catch.failed_in_state(step, flow_id, state, failure)


def _evaluate(step: Step, flow_id: str, state: State, data: Any) -> Outcome:
    if state.query_language == "JSONata":
        outcome = jsonata_states.evaluate(step, flow_id, state, data)
        if outcome is not None:
            return outcome
    if isinstance(state, MapState) and state.distributed is not None:
        return map_runs.enter(step, flow_id, state, data)
    context = step.scope(flow_id, state.name)
    if isinstance(state, ParallelState | MapState):
        fan_out.enter(step, flow_id, state, data, context)
        return gather(step, flow_id)
    if isinstance(state, TaskState):
        return tasks.schedule(step, flow_id, state, data, context)
    return jsonpath_states.evaluate(step, flow_id, state, data, context)


def timer_fired(step: Step, timer_id: str) -> None:
    """A flow's timer fired: a Wait ends, a retry starts, or a task deadline passes."""
    flow_id, flow = next((flow_id, flow) for flow_id, flow in step.flows.items()
                         if flow.timer == timer_id or (flow.task is not None and timer_id in flow.task.timers))
    if flow.timer != timer_id:
        resume(step, flow_id, tasks.timer_fired(step, flow_id, timer_id))
        return
    flow.timer = None
    if TimerKind.of(timer_id) is TimerKind.CONTINUE:
        if flow.fan is not None:  # a fan-out that stopped starting children: it starts more
            resume(step, flow_id, gather(step, flow_id))
            return
        # The state it stopped before (not yet entered). A deferred start's first state points back at 0, as one
        # entered at the start does.
        run(step, flow_id, flow.state, flow.data, 0 if flow_id == ROOT and flow.entered_id == 0 else None)
        return
    state = step.state_of(flow)
    if not isinstance(state, WaitState):
        resume(step, flow_id, attempt(step, flow_id, state, flow.data))
        return
    try:
        if state.query_language == "JSONata":
            outcome = jsonata_states.leave_wait(step, flow_id, state, flow.data)
        else:
            outcome = jsonpath_states.leave_wait(step, flow_id, state, flow.data, step.scope(flow_id, state.name))
    except StatesError as failure:
        outcome = retry_catch.failed_in_state(step, flow_id, state, failure)
    resume(step, flow_id, outcome)


def gather(step: Step, flow_id: str) -> Outcome:
    """Start the branches or items the concurrency limit allows; join when all are done.

    Called when the state is entered, and again whenever a child finishes later; WAIT while children run. A fan-out
    a redrive re-enters first resumes the children that had not succeeded.
    """
    flow = step.flows[flow_id]
    fan = flow.fan
    state = step.state_of(flow)
    step.cancel_timer(flow)  # a continuation to start more children (_gather_later): this call does it
    step.gathering.add(flow_id)
    try:
        for child_id, name, data, previous in fan_out.resumed_children(step, flow_id, state):
            run(step, child_id, name, data, previous_event_id=previous)
        while flow.fan is fan and fan_out.may_start_child(fan) and step.execution.is_open:
            if step.done_enough():  # the step did its share: the next children start in a later one
                _gather_later(step, flow)
                break
            index = fan.next_index
            child_id, start_at, previous = fan_out.add_child(step, flow_id, state, index)
            run(step, child_id, start_at, fan.inputs[index], previous_event_id=previous)
            fan.next_index += 1
    finally:
        step.gathering.discard(flow_id)
    if not step.execution.is_open:
        return WAIT
    if flow_id in step.failures:
        return fan_out.failed(step, flow_id, *step.failures.pop(flow_id))
    if flow.fan is fan and fan_out.all_done(fan):
        return fan_out.join(step, flow_id, state)
    return WAIT


def _gather_later(step: Step, flow: Flow) -> None:
    """The fan-out starts its next children when a continuation fires (at once, or after ``heavy_pause_ms`` when
    evaluation was the step's cost), as a flow enters its next state (``_continue_later``)."""
    timer_id = TimerKind.CONTINUE.id(flow.entered_id)
    if flow.timer == timer_id:  # one is set already
        return
    pause_ms = _pause_ms(step)
    flow.timer = timer_id
    # At least a millisecond on: the same timer may have fired in this very step, and a timer is one firing of an
    # id at a time.
    step.add_timer(timer_id, step.now_ms + max(pause_ms, 1))


def flow_succeeded(step: Step, flow_id: str, output: Any) -> None:
    if flow_id == ROOT:
        try:
            text = step.json_of(output, step.flows[ROOT].state)
        except StatesError as failure:
            step.fail_execution(failure.error, failure.cause)
            return
        step.close(SUCCEEDED, "ExecutionSucceeded", "executionSucceededEventDetails",
                   {"output": text, "outputDetails": NO_DETAILS}, output=text)
        return
    parent_id = fan_out.child_succeeded(step, flow_id, output)
    if parent_id not in step.gathering:  # otherwise the loop on the stack goes on with it
        resume(step, parent_id, gather(step, parent_id))


def flow_failed(step: Step, flow_id: str, error: str | None, cause: str | None) -> None:
    if flow_id == ROOT:
        step.fail_execution(error, cause)
        return
    parent_id = fan_out.child_failed(step, flow_id)
    if parent_id in step.gathering:  # the loop on the stack reports it once it unwinds
        step.failures[parent_id] = (error, cause)
    else:
        resume(step, parent_id, fan_out.failed(step, parent_id, error, cause))
