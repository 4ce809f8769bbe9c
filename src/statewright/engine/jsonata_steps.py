"""States whose QueryLanguage is JSONata, in the decider (mixed into ``decider._Step``).

Instead of InputPath/Parameters/ResultSelector/ResultPath/OutputPath, a JSONata state evaluates its Arguments,
Output, Assign, Condition, Items, ... against ``$states`` (input, result, errorOutput, context) and the workflow
variables. Every field reads the variables as they were when the state was entered; Assign takes effect when it
exits. A failed expression is States.QueryEvaluationError, recorded first as an EvaluationFailed event.
"""

from __future__ import annotations

from typing import Any

from ..asl import errors
from ..asl.errors import StatesError
from ..asl.jsonata import QUERY_EVALUATION_ERROR
from ..asl.states import ChoiceState, FailState, PassState, State, SucceedState, WaitState
from ..asl.timestamps import parse_ms

_ABSENT = object()


class JsonataSteps:
    """The JSONata half of ``_Step``; it relies on _Step for flows, scopes, events and outcomes."""

    def jsonata(self, flow_id: str, state: State, field: str, data: Any, default: Any = _ABSENT,
                **states: Any) -> Any:
        """Evaluate one JSONata field of ``state`` (``default`` when the state does not set it)."""
        compiled = state.jsonata.get(field)
        if compiled is None:
            return default
        return self.evaluate_value(flow_id, state, compiled, data, field, **states)

    def evaluate_value(self, flow_id: str, state: State, compiled: Any, data: Any, field: str,
                       map_item: tuple[int, Any] | None = None, **states: Any) -> Any:
        scope = self.scope(flow_id, state.name, map_item)
        bindings = {"input": data, "context": scope(), **states}
        try:
            value = compiled.evaluate(dict(scope.variables), bindings, self.seed(self.flows[flow_id]) + field.encode(),
                                      now_ms=self.now_ms)
        except StatesError as failure:
            failure.location = field
            raise
        if field.endswith("Assign"):
            if not isinstance(value, dict):
                raise _query_error(f"The Assign field must evaluate to an object, not {type(value).__name__}", field)
            return self.within_limits(flow_id, value)
        return value

    def evaluation_failed(self, flow: dict, state: State, failure: StatesError, cause: str) -> None:
        """AWS records a failed JSONata expression as EvaluationFailed, pointing where the state's entry points."""
        self.emit("EvaluationFailed", "evaluationFailedEventDetails",
                  {"error": failure.error, "cause": cause, "location": getattr(failure, "location", ""),
                   "state": state.name}, flow["entered_prev"])

    def evaluate_jsonata(self, flow_id: str, state: State, data: Any) -> tuple | None:
        """Pass, Choice, Wait, Succeed and Fail in JSONata; None for the states the shared paths handle."""
        flow = self.flows[flow_id]
        if isinstance(state, PassState):
            output = self.jsonata(flow_id, state, "Output", data, data)
            assigned = self.jsonata(flow_id, state, "Assign", data, None)
            return self.exit(state, output, flow_id, assigned)
        if isinstance(state, ChoiceState):
            target, assign = state.default, state.jsonata.get("Assign")
            for index, (condition, nxt, rule_assign) in enumerate(state.choices):
                verdict = self.evaluate_value(flow_id, state, condition, data, f"Choices/{index}/Condition")
                if not isinstance(verdict, bool):
                    raise _query_error(f"The Condition of the Choice rule at index {index} must evaluate to a "
                                       f"boolean, not {type(verdict).__name__}", f"Choices/{index}/Condition")
                if verdict:
                    target, assign = nxt, rule_assign
                    break
            if target is None:
                raise StatesError(errors.NO_CHOICE_MATCHED, "No Choice Rule matched and no Default is specified.")
            assigned = None if assign is None else self.evaluate_value(flow_id, state, assign, data, "Assign")
            output = self.jsonata(flow_id, state, "Output", data, data)
            self.emit_exited(state, output, flow_id, assigned)
            return ("next", target, output)
        if isinstance(state, WaitState):
            fire_at_ms = self.jsonata_wait_until(flow_id, state, data)
            if fire_at_ms > self.now_ms and self.trace is None:
                flow["data"] = data
                self.sleep(flow, f"wait-{flow['entered_id']}", fire_at_ms)
                return ("wait",)
            return self.leave_jsonata_wait(flow_id, state, data)
        if isinstance(state, SucceedState):
            output = self.jsonata(flow_id, state, "Output", data, data)
            self.emit_exited(state, output)
            return ("end", output)
        if isinstance(state, FailState):
            error = self.jsonata(flow_id, state, "Error", data, None)
            cause = self.jsonata(flow_id, state, "Cause", data, None)
            for value, what in ((error, "Error"), (cause, "Cause")):
                if value is not None and not isinstance(value, str):
                    raise _query_error(f"The {what} of state '{state.name}' must evaluate to a string", what)
            return ("fail", error, cause)
        return None

    def leave_jsonata_wait(self, flow_id: str, state: WaitState, data: Any) -> tuple:
        output = self.jsonata(flow_id, state, "Output", data, data)
        assigned = self.jsonata(flow_id, state, "Assign", data, None)
        return self.exit(state, output, flow_id, assigned)

    def jsonata_wait_until(self, flow_id: str, state: WaitState, data: Any) -> int:
        if state.seconds is not None or state.timestamp_ms is not None:
            return self.wait_until(state, data, None)
        if "Seconds" in state.jsonata:
            seconds = self.jsonata(flow_id, state, "Seconds", data)
            if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
                raise _query_error(f"The Seconds field must evaluate to a non-negative integer, not {seconds!r}",
                                   "Seconds")
            return self.now_ms + seconds * 1000
        stamp = self.jsonata(flow_id, state, "Timestamp", data)
        fire_at_ms = parse_ms(stamp)
        if fire_at_ms is None:
            raise _query_error(f"The Timestamp field must evaluate to an ISO-8601 timestamp, not {stamp!r}",
                               "Timestamp")
        return fire_at_ms

    def jsonata_seconds(self, flow_id: str, state: State, field: str, data: Any, fixed: int | None) -> int | None:
        """TimeoutSeconds / HeartbeatSeconds / MaxConcurrency, a number or an expression."""
        if field not in state.jsonata:
            return fixed
        value = self.jsonata(flow_id, state, field, data)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _query_error(f"The {field} field must evaluate to a non-negative integer, not {value!r}", field)
        return value


    def jsonata_fan_inputs(self, flow_id: str, state: Any, data: Any) -> tuple[list[Any], int]:
        """A JSONata Parallel's branch inputs (Arguments) or a Map's iteration inputs (Items, ItemSelector)."""
        if state.type == "Parallel":
            return [self.jsonata(flow_id, state, "Arguments", data, data)] * len(state.branches), 0
        items = self.note("afterItemsPath", self.jsonata(flow_id, state, "Items", data, data))
        if not isinstance(items, list):
            raise _query_error(f"Map state input must be an array but was: {items!r}", "Items")
        selector = state.jsonata.get("ItemSelector")
        if selector is not None:
            items = self.note("afterItemSelector", [
                self.evaluate_value(flow_id, state, selector, data, "ItemSelector", (index, item))
                for index, item in enumerate(items)])
        limit = self.jsonata_seconds(flow_id, state, "MaxConcurrency", data, state.max_concurrency)
        return items, self.note("maxConcurrency", limit)


def _query_error(cause: str, location: str) -> StatesError:
    failure = StatesError(QUERY_EVALUATION_ERROR, cause)
    failure.location = location
    return failure
