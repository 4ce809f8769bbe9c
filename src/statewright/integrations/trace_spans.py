"""The spans of a traced execution, read from its history as the history is committed.

A span per run of the execution (ExecutionStarted or ExecutionRedriven to its close), one per state (Entered to
Exited), one per Map iteration and per map run, and one per task attempt (Scheduled to its result; a retry is the
next attempt, numbered). Spans nest as the states do: a state's parent is the Map iteration it runs in, or the
Parallel whose branch it is in, or the run.

Where an event happened is the flow the decider recorded with it (``FLOW_KEY``: "" for the top level,
"<entered id>.<index>" for a branch or an iteration of the Parallel or Map entered at that event), not its
``previousEventId``, which follows the order events were committed in. Each span's id is derived from the execution
ARN and the event that opened it (decider/trace_context.py): spans ended by another node, or after a restart, name
the same parents. Pure: events in, finished spans out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..decider import trace_context
from ..decider.step import FLOW_KEY

_SCHEDULED = frozenset({"TaskScheduled", "ActivityScheduled", "LambdaFunctionScheduled"})
_ATTEMPT_PROGRESS = frozenset({"TaskStarted", "TaskSubmitted", "ActivityStarted", "LambdaFunctionStarted"})
_ATTEMPT_SUCCEEDED = frozenset({"TaskSucceeded", "ActivitySucceeded", "LambdaFunctionSucceeded"})
_ATTEMPT_FAILED = frozenset({
    "TaskFailed", "TaskTimedOut", "TaskStartFailed", "TaskSubmitFailed", "ActivityFailed", "ActivityTimedOut",
    "ActivityScheduleFailed", "LambdaFunctionFailed", "LambdaFunctionTimedOut", "LambdaFunctionScheduleFailed",
    "LambdaFunctionStartFailed"})
RUN_STARTS = frozenset({"ExecutionStarted", "ExecutionRedriven"})
RUN_ENDS = {"ExecutionSucceeded": None, "ExecutionFailed": "failed", "ExecutionTimedOut": "timed out",
             "ExecutionAborted": "aborted"}
_CONTAINER_ENDS = {"ParallelStateSucceeded": None, "ParallelStateFailed": "failed", "MapStateSucceeded": None,
                   "MapStateFailed": "failed"}
_ITERATION_ENDS = {"MapIterationSucceeded": None, "MapIterationFailed": "failed", "MapIterationAborted": "aborted"}
_MAPRUN_STARTS = frozenset({"MapRunStarted", "MapRunRedriven"})
_MAPRUN_ENDS = {"MapRunSucceeded": None, "MapRunFailed": "failed", "MapRunAborted": "aborted"}
_ATTRIBUTE = "aws.stepfunctions."  # the attributes' prefix
LEFT = ("States.Failed", "the state was left without exiting it: it failed")  # a state a later one replaced
FAIL = ("FailStateEntered", "a Fail state")  # a Fail state's, until the run's close names the error


@dataclass(slots=True)
class Frame:
    """A span still open."""

    span_id: str
    parent_id: str | None
    name: str
    kind: str  # execution, state, iteration, maprun, attempt
    start_ms: int
    opened_by: int  # the event that opened it
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    error: tuple[str, str] | None = None  # (error, cause) of a failed end
    attempts: int = 0  # a Task state's attempts so far


@dataclass(frozen=True, slots=True)
class FinishedSpan:
    name: str
    trace: str  # the execution's trace context
    span_id: str
    parent_id: str | None
    start_ms: int
    end_ms: int
    attributes: dict[str, Any]
    events: tuple[tuple[str, int, dict[str, Any]], ...]
    error: tuple[str, str] | None


@dataclass(slots=True)
class _Flow:
    """One flow's open spans: its Map iteration's (if it is one), its state's, its attempt's, its map run's."""

    iteration: Frame | None = None
    state: Frame | None = None
    attempt: Frame | None = None
    map_run: Frame | None = None


class Track:
    """One traced execution's open spans, fed its history events in order."""

    def __init__(self, machine_arn: str, execution_arn: str, trace: str) -> None:
        self.machine_arn = machine_arn
        self.execution_arn = execution_arn
        self.trace = trace
        self.run: Frame | None = None
        self.flows: dict[str, _Flow] = {}
        self.open: dict[str, Frame] = {}  # span id -> frame
        self.children: dict[str, set[str]] = {}  # span id -> the open spans directly inside it
        self.last_event_id = 0
        self.closed = False

    def apply(self, event: dict[str, Any]) -> list[FinishedSpan]:
        """Take the next history event; the spans it ends."""
        ended: list[FinishedSpan] = []
        kind, event_id, at_ms = event["type"], event["id"], event["timestamp"]
        self.last_event_id = event_id
        if kind in RUN_STARTS:
            self._start_run(event_id, at_ms, "redrive" if kind == "ExecutionRedriven" else "start")
            return ended
        if self.run is None:  # its start was never seen (its history could not be read): a run span of its own
            self._start_run(1, at_ms, "start")
        if kind in RUN_ENDS:
            self._end_run(event, RUN_ENDS[kind], at_ms, ended)
            return ended
        flow_id = event.get(FLOW_KEY)
        if flow_id is None:
            return ended  # not of a flow (an evaluation's failure): no span of its own
        flow = self.flows.setdefault(flow_id, _Flow())
        details = _details(event)
        if kind.endswith("StateEntered"):
            if flow.state is not None:  # a state left without an exit: it failed, and was caught
                flow.state.error = flow.state.error or LEFT
                self._end_below(flow.state, at_ms, ended)
            state_type = kind.removesuffix("StateEntered")
            name = details.get("name", state_type)
            flow.state = self._frame(event_id, self._parent_of_state(flow_id, flow), name, "state", at_ms,
                                     {"state.name": name, "state.type": state_type})
            if state_type == "Fail":  # the flow fails here: its error is the run's, or its branch's
                flow.state.error = FAIL
            flow.attempt = flow.map_run = None
        elif kind.endswith("StateExited"):
            if flow.state is not None:
                self._end_below(flow.state, at_ms, ended)
                flow.state = flow.attempt = flow.map_run = None
        elif kind in _CONTAINER_ENDS:
            if flow.state is not None:  # a Parallel's or Map's children are over: any still open end with it
                if _CONTAINER_ENDS[kind] is not None:
                    flow.state.error = (self._failure_inside(flow.state) or flow.state.error
                                        or (kind, "a branch or iteration failed"))
                else:
                    flow.state.error = None
                cut = None if _CONTAINER_ENDS[kind] is None else (kind, f"cut short: the {kind[:-11]} failed")
                for child in list(self.children.get(flow.state.span_id, ())):
                    inner = self.open[child]
                    if cut is not None and inner.error is None:
                        inner.error = cut
                    self._end_below(inner, at_ms, ended, cut)
                branches = f"{flow.state.opened_by}."
                for gone in [other for other in self.flows if other.startswith(branches)]:
                    del self.flows[gone]
        elif kind == "MapIterationStarted":
            index = details.get("index", 0)
            container = flow_id.rsplit(".", 1)[0]
            flow.iteration = self._frame(event_id, trace_context.span_id(self.execution_arn, int(container)),
                                         f"iteration {index}", "iteration", at_ms, {"map.iteration": index})
        elif kind in _ITERATION_ENDS:
            if flow.iteration is not None:
                if _ITERATION_ENDS[kind] is not None:
                    flow.iteration.error = self._failure_inside(flow.iteration) or (kind, "")
                    container = self.open.get(flow.iteration.parent_id)
                    if container is not None and kind == "MapIterationFailed":  # what fails the Map
                        container.error = container.error or flow.iteration.error
                self._end_below(flow.iteration, at_ms, ended,
                                None if _ITERATION_ENDS[kind] is None else (kind, f"cut short: the iteration "
                                                                                  f"{_ITERATION_ENDS[kind]}"))
            del self.flows[flow_id]
        elif kind in _MAPRUN_STARTS:
            flow.map_run = self._frame(event_id, None if flow.state is None else flow.state.span_id, "map run",
                                       "maprun", at_ms, {"map_run.arn": details.get("mapRunArn", "")})
        elif kind in _MAPRUN_ENDS:
            if flow.map_run is not None:
                if _MAPRUN_ENDS[kind] is not None:
                    flow.map_run.error = _error_of(details, f"the map run {_MAPRUN_ENDS[kind]}")
                self._end_below(flow.map_run, at_ms, ended, flow.map_run.error)
                flow.map_run = None
        elif kind in _SCHEDULED:
            state = flow.state
            number = 1
            if state is not None:
                state.attempts += 1
                number = state.attempts
            attributes = {"attempt": number, "resource": details.get("resource", "")}
            if "resourceType" in details:
                attributes["resource_type"] = details["resourceType"]
            flow.attempt = self._frame(event_id, None if state is None else state.span_id, f"attempt {number}",
                                       "attempt", at_ms, attributes)
        elif kind in _ATTEMPT_PROGRESS:
            if flow.attempt is not None:
                flow.attempt.events.append((kind, at_ms, {}))
        elif kind in _ATTEMPT_SUCCEEDED or kind in _ATTEMPT_FAILED:
            failed = _error_of(details, kind) if kind in _ATTEMPT_FAILED else None
            if flow.attempt is not None:
                flow.attempt.error = failed
                self._end_below(flow.attempt, at_ms, ended)
                flow.attempt = None
            if flow.state is not None:
                flow.state.error = failed  # the state's outcome is its last attempt's
        return ended

    def _start_run(self, event_id: int, at_ms: int, how: str) -> None:
        self.run = self._frame(event_id, trace_context.parent_span(self.trace),
                               self.machine_arn.rsplit(":", 1)[-1], "execution", at_ms,
                               {"execution.arn": self.execution_arn, "state_machine.arn": self.machine_arn,
                                "execution.run": how})
        self.flows = {}
        self.closed = False

    def _end_run(self, event: dict[str, Any], error: str | None, at_ms: int, ended: list[FinishedSpan]) -> None:
        """The run closed: it and whatever still ran in it end; cut short, those are failed (or aborted)."""
        run = self.run
        if error is not None:
            run.error = _error_of(_details(event), f"the execution {error}")
            cut = run.error if error == "failed" else (f"States.{error.title().replace(' ', '')}",
                                                         f"the execution {error}")
            for frame in self.open.values():
                if frame is not run and frame.error in (None, FAIL):
                    frame.error = cut
        self._end_below(run, at_ms, ended)
        for frame in list(self.open.values()):  # none should be left; were one, it ends with the run
            self._end_below(frame, at_ms, ended)
        self.flows, self.children = {}, {}
        self.closed = True

    def _failure_inside(self, frame: Frame) -> tuple[str, str] | None:
        """The error of a failed span still open inside ``frame`` (what failed a branch or an iteration)."""
        for child in self.children.get(frame.span_id, ()):
            inner = self.open.get(child)
            if inner is None:
                continue
            if inner.error is not None and inner.error not in (LEFT, FAIL):
                return inner.error
            found = self._failure_inside(inner)
            if found is not None:
                return found
        return None

    def _parent_of_state(self, flow_id: str, flow: _Flow) -> str | None:
        """A state's parent span: its Map iteration's, else the Parallel's its branch is of, else the run's."""
        if flow.iteration is not None:
            return flow.iteration.span_id
        if flow_id:
            return trace_context.span_id(self.execution_arn, int(flow_id.rsplit(".", 1)[0]))
        return None if self.run is None else self.run.span_id

    def _frame(self, event_id: int, parent_id: str | None, name: str, kind: str, at_ms: int,
               attributes: dict[str, Any]) -> Frame:
        span = trace_context.span_id(self.execution_arn, event_id)
        frame = Frame(span, parent_id, name, kind, at_ms, event_id,
                      {_ATTRIBUTE + key: value for key, value in attributes.items()})
        self.open[span] = frame
        if parent_id is not None:
            self.children.setdefault(parent_id, set()).add(span)
        return frame

    def _end_below(self, frame: Frame, at_ms: int, ended: list[FinishedSpan],
                   cut: tuple[str, str] | None = None) -> None:
        """End ``frame`` and whatever is still open inside it, innermost first; ``cut``: the error of those inside
        that had not failed themselves (they were cut short)."""
        if frame.span_id not in self.open:
            return
        for child in list(self.children.pop(frame.span_id, ())):
            inner = self.open.get(child)
            if inner is not None:
                if cut is not None and inner.error is None:
                    inner.error = cut
                self._end_below(inner, at_ms, ended, cut)
        del self.open[frame.span_id]
        if frame.parent_id in self.children:
            self.children[frame.parent_id].discard(frame.span_id)
        ended.append(FinishedSpan(frame.name, self.trace, frame.span_id, frame.parent_id, frame.start_ms,
                                  max(at_ms, frame.start_ms), frame.attributes, tuple(frame.events), frame.error))


def _details(event: dict[str, Any]) -> dict[str, Any]:
    return next((value for key, value in event.items() if key.endswith("EventDetails")), None) or {}


def _error_of(details: dict[str, Any], fallback: str) -> tuple[str, str]:
    return details.get("error", fallback), details.get("cause", "")
