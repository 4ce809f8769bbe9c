"""Pass, Choice, Wait, Succeed and Fail under JSONPath: InputPath, Parameters, Result, ResultPath, OutputPath.

These states never wait on the world: each returns its outcome at once, except a Wait that is not yet due, which
sleeps on a timer in its flow. Functions over a ``step.Step``; pure, like the rest of the decider.
"""

from __future__ import annotations

from typing import Any

from ..asl import errors
from ..asl.dataflow import place_result, select
from ..asl.errors import StatesError
from ..asl.jsonio import dumps, shown
from ..asl.paths import Path, PathNotFound
from ..asl.states import ChoiceState, FailState, PassState, State, SucceedState, WaitState
from ..asl.timestamps import parse_ms
from .effects import TimerKind
from .outcomes import WAIT, End, Fail, Next, Outcome
from .step import Step

WAIT_AHEAD_MS_MAX = 2**31 * 1000


def evaluate(step: Step, flow_id: str, state: State, data: Any, context: Any) -> Outcome:
    evaluator = _EVALUATORS.get(type(state))
    if evaluator is None:
        raise AssertionError(f"unhandled state type {state.type}")
    return evaluator(step, flow_id, state, data, context)


def _pass(step: Step, flow_id: str, state: PassState, data: Any, context: Any) -> Outcome:
    """TestState's inspection data as AWS records it (LocalStack's AWS-validated test_base_inspection_level_debug,
    2024 and 2025): a Pass with a Result shows that ``result``; one without shows its input processing
    (``afterParameters`` even without Parameters); both show ``afterResultSelector``, a Pass having none."""
    effective = selected = select(state.input_path, data, context)
    if state.parameters is not None:
        effective = state.parameters.render(selected, context, step.seed_of(step.flows[flow_id]))
    result = _copy_json(state.result) if state.has_result else effective
    if step.trace is not None:  # TestState: nothing to note on an execution's path
        if state.has_result:
            step.note("result", result)
        else:
            step.note("afterInputPath", selected)
            step.note("afterParameters", effective)
        step.note("afterResultSelector", result)
    assigned = step.assigned(flow_id, state.assign, result, context)
    placed = step.note("afterResultPath", place_result(state.result_path, data, result))
    return step.exit(state, select(state.output_path, placed, context), flow_id, assigned)


def _choice(step: Step, flow_id: str, state: ChoiceState, data: Any, context: Any) -> Outcome:
    effective = step.note("afterInputPath", select(state.input_path, data, context))
    target, assign = next(((nxt, rule_assign) for rule, nxt, rule_assign, _ in state.choices
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
    step.hold(flow, effective)
    step.sleep(flow, TimerKind.WAIT.id(flow.entered_id), fire_at_ms)
    return WAIT


def _succeed(step: Step, flow_id: str, state: SucceedState, data: Any, context: Any) -> Outcome:
    effective = step.note("afterInputPath", select(state.input_path, data, context))
    output = select(state.output_path, effective, context)
    step.emit_exited(state, output, flow_id)
    return End(output)


def _fail(step: Step, flow_id: str, state: FailState, data: Any, context: Any) -> Outcome:
    step.note("afterInputPath", data)  # a Fail has no InputPath; AWS's TestState shows its input so
    seed = step.seed(step.flows[flow_id])
    error = _fail_field(state.error_path, "ErrorPath", data, context, seed) if state.error_path else state.error
    cause = _fail_field(state.cause_path, "CausePath", data, context, seed) if state.cause_path else state.cause
    for value, what in ((error, "ErrorPath"), (cause, "CausePath")):
        if value is not None and not isinstance(value, str):
            raise StatesError(errors.RUNTIME, f"The {what} of state '{state.name}' must select a string")
    return Fail(error, cause)


def _fail_field(path: Any, field: str, data: Any, context: Any, seed: bytes) -> Any:
    """ErrorPath / CausePath (a path or an intrinsic). AWS words a path that selects nothing as Parameters do."""
    try:
        return path.evaluate(data, context, seed)
    except PathNotFound:
        raise StatesError(errors.RUNTIME, f"The JSONPath '{path.text}' specified for the field '{field}' could not "
                          f"be found in the input '{dumps(data)}'") from None


_EVALUATORS = {PassState: _pass, ChoiceState: _choice, WaitState: _wait, SucceedState: _succeed, FailState: _fail}


def leave_wait(step: Step, flow_id: str, state: WaitState, effective: Any, context: Any) -> Next | End:
    assigned = step.assigned(flow_id, state.assign, effective, context)
    return step.exit(state, select(state.output_path, effective, context), flow_id, assigned)


def wait_until(step: Step, state: WaitState, data: Any, context: Any) -> int:
    if state.seconds is not None:
        return step.now_ms + state.seconds * 1000
    if state.timestamp_ms is not None:
        return within_reach(state.timestamp_ms, step.now_ms, "Timestamp")
    if state.seconds_path is not None:
        seconds = seconds_from_path(state.seconds_path, data, context)
        return within_reach(step.now_ms + seconds * 1000, step.now_ms, "SecondsPath", state.seconds_path.text)
    path = state.timestamp_path
    stamp = _referenced(path, "TimestampPath", data, context)
    fire_at_ms = parse_ms(stamp)
    if fire_at_ms is None:
        raise StatesError(errors.RUNTIME, f"The TimestampPath parameter does not reference a valid ISO-8601 "
                          f"extended offset date-time format string: {path.text} == {shown(stamp)}")
    return within_reach(fire_at_ms, step.now_ms, "TimestampPath", path.text)


def within_reach(fire_at_ms: int, now_ms: int, field: str, source: str | None = None) -> int:
    """AWS counts a Wait's end in seconds held in a signed 32 bits: an AWS-validated boundary test (LocalStack's
    test_timestamp_too_far_in_future_boundary) has 24,855 days ahead succeed and 24,856 days fail, and 2**31 s is
    24,855.13 days. A later end fails the state at once rather than sleeping (the cause's wording is ours)."""
    if fire_at_ms - now_ms <= WAIT_AHEAD_MS_MAX:
        return fire_at_ms
    where = f": {source}" if source else ""
    raise StatesError(errors.RUNTIME, f"The {field} parameter references a time more than {WAIT_AHEAD_MS_MAX // 1000} "
                      f"seconds in the future{where}")


def seconds_from_path(path: Path, data: Any, context: Any) -> int:
    """SecondsPath's value. AWS reads it as a Java long: a fraction, a string or any other JSON value "cannot be
    parsed", a negative number is refused on its own, and each cause quotes the path and the value."""
    seconds = _referenced(path, "SecondsPath", data, context)
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise StatesError(errors.RUNTIME, f"The SecondsPath parameter cannot be parsed as a long value: "
                          f"{path.text} == {shown(seconds)}")
    if seconds < 0:
        raise StatesError(errors.RUNTIME, f"The SecondsPath parameter references a negative value: "
                          f"{path.text} == {seconds}")
    return seconds


def _referenced(path: Path, field: str, data: Any, context: Any) -> Any:
    """The value a Wait's path field selects; a path that selects nothing is refused in AWS's words."""
    try:
        return path.resolve(data, context)
    except PathNotFound:
        raise StatesError(errors.RUNTIME, f"The {field} parameter does not reference an input value: "
                          f"{path.text}") from None


def _copy_json(value: Any) -> Any:
    """A fresh copy of a literal from the definition, so no execution's state shares it with the cached
    definition."""
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value
