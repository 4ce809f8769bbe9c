"""Errors in a state: Retry (a backoff timer, then the whole state runs again), else Catch (the error object
placed at the catcher's ResultPath, or its JSONata Output), else the flow fails.

Retry counts live in the flow (``Flow.retries``, per retrier index) and reset when a state is entered. Backoff
jitter is seeded from the execution, the state's entry and the attempt, so a replay is exact. Functions over a
``step.Step``; pure, like the rest of the decider.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..asl.dataflow import place_result
from ..asl.errors import StatesError
from ..asl.handling import Catcher, error_output, matches
from ..asl.jsonata import QUERY_EVALUATION_ERROR
from ..asl.states import MapState, ParallelState, ResultState, State
from . import jsonata_states
from .effects import TimerKind
from .outcomes import WAIT, Fail, Next, Wait
from .step import Step


def failed_in_state(step: Step, flow_id: str, state: State, failure: StatesError) -> Wait | Next | Fail:
    """An error raised while the state evaluated its fields: record it, then Retry, Catch or fail."""
    flow = step.flows[flow_id]
    cause = step.runtime_cause(flow, failure)
    if failure.error == QUERY_EVALUATION_ERROR:
        jsonata_states.evaluation_failed(step, flow, state, failure, cause)
        if isinstance(state, ParallelState | MapState):  # recorded for a Map's Items: MapStateFailed follows
            return state_failed(step, flow_id, state, failure.error, cause)
    return on_error(step, flow_id, state, failure.error, cause)


def state_failed(step: Step, flow_id: str, state: ParallelState | MapState, error: str | None,
                 cause: str | None) -> Wait | Next | Fail:
    """A Parallel or Map failed (a child, or one of its expressions): retry the whole state (silently, as AWS),
    else record <Type>StateFailed, then Catch or fail."""
    outcome = retry(step, flow_id, state, error, cause)
    if outcome is not None:
        return outcome
    step.emit(f"{state.type}StateFailed", None, None, flow=flow_id)
    return catch(step, flow_id, state, error, cause)


def on_error(step: Step, flow_id: str, state: State, error: str | None, cause: str | None,
             alias: str | None = None) -> Wait | Next | Fail:
    """Retry, else Catch, else fail the flow. ``alias`` is a second name the error also matches by."""
    return retry(step, flow_id, state, error, cause, alias) or catch(step, flow_id, state, error, cause, alias)


def retry(step: Step, flow_id: str, state: State, error: str | None, cause: str | None,
          alias: str | None = None) -> Wait | None:
    """Schedule the next attempt if a retrier allows one; None when none does."""
    step.note("error", (error, cause))
    if not isinstance(state, ResultState):
        return None
    flow = step.flows[flow_id]
    for index, retrier in enumerate(state.retry):
        if not matches(retrier.error_equals, error, alias):
            continue
        used = flow.retries.get(str(index), 0)
        if used >= retrier.max_attempts:  # the first matching retrier decides; once spent, Catch decides
            step.note("errorDetails", {"retryIndex": index})  # AWS's TestState names the spent retrier
            return None
        flow.retries[str(index)] = used + 1
        seed = jitter_seed(step.execution.arn, flow.entered_id, used + 1)
        delay_ms = retrier.delay_ms(used + 1, seed)
        step.note("errorDetails", {"retryIndex": index, "retryBackoffIntervalSeconds": delay_ms // 1000})
        step.sleep(flow, TimerKind.RETRY.id(flow.entered_id, used + 1), step.now_ms + delay_ms)
        step.forget_halted(flow_id)
        return WAIT
    return None


def catch(step: Step, flow_id: str, state: State, error: str | None, cause: str | None,
          alias: str | None = None) -> Next | Fail:
    """The first catcher matching the error takes the flow to its Next; without one the flow fails."""
    if not isinstance(state, ResultState):
        return Fail(error, cause)
    index, catcher = next(((index, catcher) for index, catcher in enumerate(state.catch)
                           if matches(catcher.error_equals, error, alias)), (None, None))
    if catcher is None:
        return Fail(error, cause)
    step.note("errorDetails", {"catchIndex": index})
    flow = step.flows[flow_id]
    error_object = error_output(error, cause)
    try:
        output, assigned = _caught(step, flow_id, state, catcher, error_object)
    except StatesError as failure:
        return Fail(failure.error, step.runtime_cause(flow, failure))
    step.emit_exited(state, output, flow_id, assigned)
    step.forget_halted(flow_id)
    return Next(catcher.next, output)


def _caught(step: Step, flow_id: str, state: ResultState, catcher: Catcher,
            error_object: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    """The catcher's output and variable assignments, from the error object."""
    data = step.flows[flow_id].data
    if state.query_language == "JSONata":
        assigned = None if catcher.assign is None else step.evaluate_expression(
            flow_id, state, catcher.assign, data, "Catch/Assign", errorOutput=error_object)
        output = error_object if catcher.output is None else step.evaluate_expression(
            flow_id, state, catcher.output, data, "Catch/Output", errorOutput=error_object)
        return output, assigned
    assigned = step.assigned(flow_id, catcher.assign, error_object, step.scope(flow_id, state.name))
    return place_result(catcher.result_path, data, error_object), assigned


def jitter_seed(execution_arn: str, entered_id: int, attempt: int) -> bytes:
    return hashlib.blake2b(f"{execution_arn}|{entered_id}|{attempt}".encode(), digest_size=16).digest()
