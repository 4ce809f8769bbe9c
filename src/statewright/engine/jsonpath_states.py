"""Pass, Choice, Wait, Succeed and Fail under JSONPath: InputPath, Parameters, Result, ResultPath, OutputPath.

These states never wait on the world: each returns its outcome at once, except a Wait that is not yet due, which
sleeps on a timer in its flow. Functions over a ``step.Step``; pure, like the rest of the decider.
"""

from __future__ import annotations

from typing import Any

from ..asl import errors
from ..asl.dataflow import place_result, select
from ..asl.errors import StatesError
from ..asl.states import ChoiceState, FailState, PassState, State, SucceedState, WaitState
from ..asl.timestamps import parse_ms
from .outcomes import WAIT, End, Fail, Next, Outcome
from .step import Step


def evaluate(step: Step, flow_id: str, state: State, data: Any, context: Any) -> Outcome:
    evaluator = _EVALUATORS.get(type(state))
    if evaluator is None:
        raise AssertionError(f"unhandled state type {state.type}")
    return evaluator(step, flow_id, state, data, context)


def _pass(step: Step, flow_id: str, state: PassState, data: Any, context: Any) -> Outcome:
    effective = step.note("afterInputPath", select(state.input_path, data, context))
    if state.parameters is not None:
        rendered = state.parameters.render(effective, context, step.seed_of(step.flows[flow_id]))
        effective = step.note("afterParameters", rendered)
    result = step.note("result", _copy_json(state.result) if state.has_result else effective)
    assigned = step.assigned(flow_id, state.assign, result, context)
    placed = step.note("afterResultPath", place_result(state.result_path, data, result))
    return step.exit(state, select(state.output_path, placed, context), flow_id, assigned)


def _choice(step: Step, flow_id: str, state: ChoiceState, data: Any, context: Any) -> Outcome:
    effective = step.note("afterInputPath", select(state.input_path, data, context))
    target, assign = next(((nxt, rule_assign) for rule, nxt, rule_assign in state.choices
                           if rule.matches(effective, context)), (state.default, state.assign))
    if target is None:
        raise StatesError(errors.NO_CHOICE_MATCHED, "No Choice Rule matched and no Default is specified.")
    assigned = step.assigned(flow_id, assign, effective, context)
    output = select(state.output_path, effective, context)
    step.emit_exited(state, output, flow_id, assigned)
    return Next(target, output)


def _wait(step: Step, flow_id: str, state: WaitState, data: Any, context: Any) -> Outcome:
    effective = step.note("afterInputPath", select(state.input_path, data, context))
    fire_at_ms = wait_until(step, state, effective, context)
    if fire_at_ms <= step.now_ms or step.trace is not None:  # TestState does not wait
        return leave_wait(step, flow_id, state, effective, context)
    flow = step.flows[flow_id]
    flow.data = effective
    step.sleep(flow, f"wait-{flow.entered_id}", fire_at_ms)
    return WAIT


def _succeed(step: Step, flow_id: str, state: SucceedState, data: Any, context: Any) -> Outcome:
    effective = step.note("afterInputPath", select(state.input_path, data, context))
    output = select(state.output_path, effective, context)
    step.emit_exited(state, output)
    return End(output)


def _fail(step: Step, flow_id: str, state: FailState, data: Any, context: Any) -> Outcome:
    seed = step.seed(step.flows[flow_id])
    error = state.error_path.evaluate(data, context, seed) if state.error_path else state.error
    cause = state.cause_path.evaluate(data, context, seed) if state.cause_path else state.cause
    for value, what in ((error, "ErrorPath"), (cause, "CausePath")):
        if value is not None and not isinstance(value, str):
            raise StatesError(errors.RUNTIME, f"The {what} of state '{state.name}' must select a string")
    return Fail(error, cause)


_EVALUATORS = {PassState: _pass, ChoiceState: _choice, WaitState: _wait, SucceedState: _succeed, FailState: _fail}


def leave_wait(step: Step, flow_id: str, state: WaitState, effective: Any, context: Any) -> Next | End:
    assigned = step.assigned(flow_id, state.assign, effective, context)
    return step.exit(state, select(state.output_path, effective, context), flow_id, assigned)


def wait_until(step: Step, state: WaitState, data: Any, context: Any) -> int:
    if state.seconds is not None:
        return step.now_ms + state.seconds * 1000
    if state.timestamp_ms is not None:
        return state.timestamp_ms
    if state.seconds_path is not None:
        seconds = state.seconds_path.resolve(data, context)
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
            raise StatesError(errors.RUNTIME, f"The SecondsPath parameter does not reference a valid "
                              f"positive integer: {state.seconds_path.text}")
        return step.now_ms + seconds * 1000
    stamp = state.timestamp_path.resolve(data, context)
    fire_at_ms = parse_ms(stamp)
    if fire_at_ms is None:
        raise StatesError(errors.RUNTIME, f"The TimestampPath parameter does not reference a valid ISO-8601 "
                          f"extended offset date-time format string: {state.timestamp_path.text} == {stamp}")
    return fire_at_ms


def _copy_json(value: Any) -> Any:
    """A fresh copy of a literal from the definition, so no execution's state shares it with the cached
    definition."""
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value
