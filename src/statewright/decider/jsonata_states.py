"""States whose QueryLanguage is JSONata: Pass, Choice, Wait, Succeed and Fail, and the JSONata fields of the
others (a Task's TimeoutSeconds/HeartbeatSeconds, a Parallel's Arguments, a Map's Items and ItemSelector).

Instead of InputPath/Parameters/ResultSelector/ResultPath/OutputPath, a JSONata state evaluates its Arguments,
Output, Assign, Condition, Items, ... against ``$states`` (input, result, errorOutput, context) and the workflow
variables (``Step.jsonata``). Every field reads the variables as they were when the state was entered; Assign
takes effect when it exits. A failed expression is States.QueryEvaluationError, recorded first as an
EvaluationFailed event. Functions over a ``step.Step``; pure, like the rest of the decider.
"""

from __future__ import annotations

from typing import Any

from ..asl import errors
from ..asl.errors import StatesError
from ..asl.jsonata import QUERY_EVALUATION_ERROR
from ..asl.jsonio import dumps, shown
from ..asl.states import ChoiceState, FailState, MapState, ParallelState, PassState, State, SucceedState, WaitState
from ..asl.timestamps import parse_ms
from . import jsonpath_states
from .effects import TimerKind
from .execution import Flow
from .outcomes import WAIT, End, Fail, Next, Outcome
from .step import Step, query_error


def evaluate(step: Step, flow_id: str, state: State, data: Any) -> Outcome | None:
    """Pass, Choice, Wait, Succeed and Fail in JSONata; None for the states evaluated elsewhere."""
    if isinstance(state, PassState):
        output = step.jsonata(flow_id, state, "Output", data, data)
        assigned = step.jsonata(flow_id, state, "Assign", data, None)
        return step.exit(state, output, flow_id, assigned)
    if isinstance(state, ChoiceState):
        return _choice(step, flow_id, state, data)
    if isinstance(state, WaitState):
        fire_at_ms = _wait_until(step, flow_id, state, data)
        if fire_at_ms > step.now_ms and step.trace is None:  # TestState does not wait
            flow = step.flows[flow_id]
            step.hold(flow, data)
            step.sleep(flow, TimerKind.WAIT.id(flow.entered_id), fire_at_ms)
            return WAIT
        return leave_wait(step, flow_id, state, data)
    if isinstance(state, SucceedState):
        output = step.jsonata(flow_id, state, "Output", data, data)
        step.emit_exited(state, output, flow_id)
        return End(output)
    if isinstance(state, FailState):
        error = step.jsonata(flow_id, state, "Error", data, None)
        cause = step.jsonata(flow_id, state, "Cause", data, None)
        for value, what in ((error, "Error"), (cause, "Cause")):
            if value is not None and not isinstance(value, str):
                raise query_error(f"The {what} of state '{state.name}' must evaluate to a string", what)
        return Fail(error, cause)
    return None


def _choice(step: Step, flow_id: str, state: ChoiceState, data: Any) -> Next:
    """A rule's Condition is named ``Choices[<index>]/Condition`` in the EvaluationFailed location and the cause
    alike: AWS names one field the same in both (recorded for Output, Assign, Arguments and their members); the
    bracketed index is inferred (the form of AWS's definition diagnostics)."""
    target, assign, rule_output = state.default, state.jsonata.get("Assign"), None
    for index, (condition, nxt, rule_assign, rule_output_of) in enumerate(state.choices):
        field = f"Choices[{index}]/Condition"
        verdict = step.evaluate_expression(flow_id, state, condition, data, field)
        if not isinstance(verdict, bool):
            raise query_error(f"The Condition of the Choice rule at index {index} must evaluate to a boolean, "
                              f"not {type(verdict).__name__}", field)
        if verdict:
            target, assign = nxt, rule_assign
            rule_output = None if rule_output_of is None else (index, rule_output_of)
            break
    if target is None:
        raise StatesError(errors.NO_CHOICE_MATCHED, "No Choice Rule matched and no Default is specified.")
    assigned = None if assign is None else step.evaluate_expression(flow_id, state, assign, data, "Assign")
    if rule_output is None:
        output = step.jsonata(flow_id, state, "Output", data, data)
    else:
        output = step.evaluate_expression(flow_id, state, rule_output[1], data, f"Choices[{rule_output[0]}]/Output")
    step.emit_exited(state, output, flow_id, assigned)
    return Next(target, output)


def leave_wait(step: Step, flow_id: str, state: WaitState, data: Any) -> Next | End:
    output = step.jsonata(flow_id, state, "Output", data, data)
    assigned = step.jsonata(flow_id, state, "Assign", data, None)
    return step.exit(state, output, flow_id, assigned)


def _wait_until(step: Step, flow_id: str, state: WaitState, data: Any) -> int:
    if state.seconds is not None or state.timestamp_ms is not None:
        return jsonpath_states.wait_until(step, state, data, None)
    if "Seconds" in state.jsonata:
        seconds = step.jsonata(flow_id, state, "Seconds", data)
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
            raise query_error(f"The Seconds field must evaluate to a non-negative integer, not {seconds!r}",
                              "Seconds")
        return step.now_ms + seconds * 1000
    stamp = step.jsonata(flow_id, state, "Timestamp", data)
    fire_at_ms = parse_ms(stamp)
    if fire_at_ms is None:
        raise query_error("The Timestamp field cannot be parsed as an ISO-8601 extended offset date-time format "
                          f"string: {shown(stamp)}", "Timestamp")
    return jsonpath_states.within_reach(fire_at_ms, step.now_ms, "Timestamp")


def seconds(step: Step, flow_id: str, state: State, field: str, data: Any, fixed: int | None) -> int | None:
    """TimeoutSeconds / HeartbeatSeconds / MaxConcurrency, a number or an expression."""
    if field not in state.jsonata:
        return fixed
    value = step.jsonata(flow_id, state, field, data)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise query_error(f"The {field} field must evaluate to a non-negative integer, not {value!r}", field)
    return value


def branch_inputs(step: Step, flow_id: str, state: ParallelState, data: Any) -> list[Any]:
    """A Parallel's branch inputs (Arguments)."""
    return [step.jsonata(flow_id, state, "Arguments", data, data)] * len(state.branches)


def map_inputs(step: Step, flow_id: str, state: MapState, data: Any,
               items: list[Any] | None, first: int = 0) -> tuple[list[Any], int]:
    """A Map's iteration inputs (Items, or the ``items`` a distributed Map's ItemReader read, through
    ItemSelector) and its MaxConcurrency. Not shown as afterItemsPath: AWS's InspectionData leaves it out for
    JSONata (its documentation, and its TestState answers as recorded by LocalStack's snapshots)."""
    if items is None:
        items = step.jsonata(flow_id, state, "Items", data, data)
    if not isinstance(items, list):
        if "Items" in state.jsonata:
            raise query_error(state.jsonata["Items"].unexpected_type("Items", items, "array"), "Items")
        # Without Items the state's input is iterated: AWS's EvaluationFailed for it names no location.
        raise StatesError(QUERY_EVALUATION_ERROR, f"Map state input must be an array but was: {dumps(items)}")
    selector = state.jsonata.get("ItemSelector")
    if selector is not None:
        items = step.note("afterItemSelector", [
            step.evaluate_expression(flow_id, state, selector, data, "ItemSelector", (index, item))
            for index, item in enumerate(items, first)])
    return items, step.note("maxConcurrency", max_concurrency(step, flow_id, state, data))


def max_concurrency(step: Step, flow_id: str, state: MapState, data: Any) -> int:
    return seconds(step, flow_id, state, "MaxConcurrency", data, state.max_concurrency)


def evaluation_failed(step: Step, flow: Flow, state: State, failure: StatesError, cause: str) -> None:
    """AWS records a failed JSONata expression as EvaluationFailed. A state-level field (Arguments, Output, Assign,
    Items, ...) points it where the state's entry points, a Wait's own Seconds or Timestamp at the entry itself.
    Recorded on AWS (LocalStack's snapshots, 11-2024): a Pass's Output and Assign (also after other states), a
    Task's Arguments, a Map's Items, a Wait's Timestamp; inferred for Choice, Parallel, Fail and Succeed."""
    details = {"error": failure.error, "cause": cause, "state": state.name}
    location = getattr(failure, "location", "")
    if location:
        details["location"] = location
    own = isinstance(state, WaitState) and location in ("Seconds", "Timestamp")
    previous = flow.entered_id if own else flow.entered_prev
    step.emit("EvaluationFailed", "evaluationFailedEventDetails", details, previous)
