"""The spans of a traced execution, read from its history as the history is committed.

A span per run of the execution (ExecutionStarted or ExecutionRedriven to its close), one per state (Entered to
Exited), one per Map iteration and per map run, and one per task attempt (Scheduled to its result; a retry is the
next attempt, numbered). Spans nest as the states do: a state's parent is the Parallel, the Map iteration or the
run it is in.

Where an event belongs is found the way the history itself says it: each event's ``previousEventId`` names the
event before it on the same path (a branch, an iteration), so the stack of spans open on that path after each event
is kept by event id (``Track.paths``), and an event's own path is its previous event's. Each span's id is
derived from the execution ARN and the event that opened it (decider/trace_context.py): spans ended by another
node, or after a restart, name the same parents. Pure: events in, finished spans out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..decider import trace_context

_SCHEDULED = frozenset({"TaskScheduled", "ActivityScheduled", "LambdaFunctionScheduled"})
_ATTEMPT_PROGRESS = frozenset({"TaskStarted", "TaskSubmitted", "ActivityStarted", "LambdaFunctionStarted"})
_ATTEMPT_SUCCEEDED = frozenset({"TaskSucceeded", "ActivitySucceeded", "LambdaFunctionSucceeded"})
_ATTEMPT_FAILED = frozenset({
    "TaskFailed", "TaskTimedOut", "TaskStartFailed", "TaskSubmitFailed", "ActivityFailed", "ActivityTimedOut",
    "ActivityScheduleFailed", "LambdaFunctionFailed", "LambdaFunctionTimedOut", "LambdaFunctionScheduleFailed",
    "LambdaFunctionStartFailed"})
_RUN_STARTS = frozenset({"ExecutionStarted", "ExecutionRedriven"})
_RUN_ENDS = {"ExecutionSucceeded": None, "ExecutionFailed": "failed", "ExecutionTimedOut": "timed out",
             "ExecutionAborted": "aborted"}
_CONTAINER_STARTS = frozenset({"ParallelStateStarted", "MapStateStarted"})
_CONTAINER_ENDS = {"ParallelStateSucceeded": None, "ParallelStateFailed": "failed", "ParallelStateAborted": "aborted",
                   "MapStateSucceeded": None, "MapStateFailed": "failed", "MapStateAborted": "aborted"}
_ITERATION_ENDS = {"MapIterationSucceeded": None, "MapIterationFailed": "failed", "MapIterationAborted": "aborted"}
_MAP_RUN_STARTS = frozenset({"MapRunStarted", "MapRunRedriven"})
_MAP_RUN_ENDS = {"MapRunSucceeded": None, "MapRunFailed": "failed", "MapRunAborted": "aborted"}
_ATTRIBUTE = "aws.stepfunctions."  # the attributes' prefix


@dataclass(slots=True)
class Frame:
    """A span still open."""

    span_id: str
    parent_id: str | None
    name: str
    kind: str  # execution, state, iteration, maprun, attempt
    start_ms: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    error: tuple[str, str] | None = None  # (error, cause) of a failed end
    container: bool = False  # a Parallel or Map state whose branches or iterations have started
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


Path = tuple[Frame, ...]


class Track:
    """One traced execution's open spans, fed its history events in order."""

    def __init__(self, machine_arn: str, execution_arn: str, trace: str) -> None:
        self.machine_arn = machine_arn
        self.execution_arn = execution_arn
        self.trace = trace
        self.paths: dict[int, Path] = {}  # event id -> the spans open on its path after it
        self.open: dict[str, Frame] = {}  # span id -> frame
        self.root: Path = ()  # the current run's path (its execution span)
        self.last_event_id = 0
        self.closed = False

    def apply(self, event: dict[str, Any]) -> list[FinishedSpan]:
        """Take the next history event; the spans it ends."""
        ended: list[FinishedSpan] = []
        kind, event_id, at_ms = event["type"], event["id"], event["timestamp"]
        self.last_event_id = event_id
        if kind in _RUN_STARTS:
            frame = self._frame(event_id, None, self.machine_arn.rsplit(":", 1)[-1], "execution", at_ms, {
                "execution.arn": self.execution_arn, "state_machine.arn": self.machine_arn,
                "execution.run": "redrive" if kind == "ExecutionRedriven" else "start"})
            frame.parent_id = trace_context.parent_span(self.trace)
            self.root = self.paths[event_id] = (frame,)
            self.closed = False
            return ended
        if not self.root:  # its start was never seen (its history could not be read): a run span of its own
            frame = self._frame(1, None, self.machine_arn.rsplit(":", 1)[-1], "execution", at_ms,
                                {"execution.arn": self.execution_arn, "state_machine.arn": self.machine_arn})
            frame.parent_id = trace_context.parent_span(self.trace)
            self.root = (frame,)
        path = self.paths.get(event["previousEventId"]) or self.root
        if kind in _RUN_ENDS:
            error = _RUN_ENDS[kind]
            self.root[0].error = None if error is None else _error_of(event, error)
            for frame in list(self.open.values()):  # whatever still runs ends with the run
                ended.append(self._end(frame, at_ms))
            self.paths.clear()
            self.closed = True
            return ended
        path = self._settled(path)
        if kind.endswith("StateEntered"):
            details = event.get("stateEnteredEventDetails", {})
            state_type = kind.removesuffix("StateEntered")
            if path and path[-1].kind == "state" and not path[-1].container:  # a state left without an exit
                ended.append(self._end(path[-1], at_ms))
                path = path[:-1]
            frame = self._frame(event_id, path, details.get("name", state_type), "state", at_ms,
                                {"state.name": details.get("name", ""), "state.type": state_type})
            path = (*path, frame)
        elif kind.endswith("StateExited"):
            name = event.get("stateExitedEventDetails", {}).get("name")
            at = _deepest(path, lambda frame: frame.kind == "state" and frame.name == name)
            if at is not None:
                ended.extend(self._end_below(path, at, at_ms))
                path = path[:at]
        elif kind.endswith("StateAborted"):
            at = _deepest(path, lambda frame: frame.kind == "state")
            if at is not None:
                path[at].error = ("States.Aborted", "the state was aborted")
                ended.extend(self._end_below(path, at, at_ms))
                path = path[:at]
        elif kind in _CONTAINER_STARTS:
            if path and path[-1].kind == "state":
                path[-1].container = True
        elif kind in _CONTAINER_ENDS:
            at = _deepest(path, lambda frame: frame.container)
            if at is not None:
                error = _CONTAINER_ENDS[kind]
                path[at].error = None if error is None else _error_of(event, error)
                ended.extend(self._end_descendants(path[at].span_id, at_ms))
                path = path[:at + 1]
        elif kind == "MapIterationStarted":
            at = _deepest(path, lambda frame: frame.container)
            path = path if at is None else path[:at + 1]
            index = event.get("mapIterationStartedEventDetails", {}).get("index", 0)
            path = (*path, self._frame(event_id, path, f"iteration {index}", "iteration", at_ms,
                                       {"map.iteration": index}))
        elif kind in _ITERATION_ENDS:
            index = next((value.get("index") for key, value in event.items() if key.endswith("EventDetails")), None)
            at = _deepest(path, lambda frame: frame.kind == "iteration"
                          and frame.attributes[_ATTRIBUTE + "map.iteration"] == index)
            if at is not None:
                error = _ITERATION_ENDS[kind]
                path[at].error = None if error is None else _error_of(event, error)
                ended.extend(self._end_below(path, at, at_ms))
                path = path[:at]
        elif kind in _MAP_RUN_STARTS:
            details = next((value for key, value in event.items() if key.endswith("EventDetails")), {})
            path = (*path, self._frame(event_id, path, "map run", "maprun", at_ms,
                                       {"map_run.arn": details.get("mapRunArn", "")}))
        elif kind in _MAP_RUN_ENDS:
            at = _deepest(path, lambda frame: frame.kind == "maprun")
            if at is not None:
                error = _MAP_RUN_ENDS[kind]
                path[at].error = None if error is None else _error_of(event, error)
                ended.extend(self._end_below(path, at, at_ms))
                path = path[:at]
        elif kind in _SCHEDULED:
            details = next((value for key, value in event.items() if key.endswith("EventDetails")), {})
            state = path[-1] if path and path[-1].kind == "state" else None
            number = 1
            if state is not None:
                state.attempts += 1
                number = state.attempts
            attributes = {"attempt": number, "resource": details.get("resource", "")}
            if "resourceType" in details:
                attributes["resource_type"] = details["resourceType"]
            path = (*path, self._frame(event_id, path, f"attempt {number}", "attempt", at_ms, attributes))
        elif kind in _ATTEMPT_PROGRESS:
            if path and path[-1].kind == "attempt":
                path[-1].events.append((kind, at_ms, {}))
        elif kind in _ATTEMPT_SUCCEEDED or kind in _ATTEMPT_FAILED:
            failed = _error_of(event, kind) if kind in _ATTEMPT_FAILED else None
            if path and path[-1].kind == "attempt":
                path[-1].error = failed
                ended.append(self._end(path[-1], at_ms))
                path = path[:-1]
            if path and path[-1].kind == "state":
                path[-1].error = failed  # the state's outcome is its last attempt's
        self.paths[event_id] = path
        return ended

    def _frame(self, event_id: int, path: Path | None, name: str, kind: str, at_ms: int,
               attributes: dict[str, Any]) -> Frame:
        span = trace_context.span_id(self.execution_arn, event_id)
        frame = Frame(span, path[-1].span_id if path else None, name, kind, at_ms,
                      {_ATTRIBUTE + key: value for key, value in attributes.items()})
        self.open[span] = frame
        return frame

    def _settled(self, path: Path) -> Path:
        """``path`` without the spans at its end that have already ended (another path ended them)."""
        while path and path[-1].span_id not in self.open:
            path = path[:-1]
        return path

    def _end(self, frame: Frame, at_ms: int) -> FinishedSpan:
        self.open.pop(frame.span_id, None)
        return FinishedSpan(frame.name, self.trace, frame.span_id, frame.parent_id, frame.start_ms,
                            max(at_ms, frame.start_ms), frame.attributes, tuple(frame.events), frame.error)

    def _end_below(self, path: Path, at: int, at_ms: int) -> list[FinishedSpan]:
        """End ``path[at]`` and whatever runs inside it."""
        ended = self._end_descendants(path[at].span_id, at_ms)
        if path[at].span_id in self.open:
            ended.append(self._end(path[at], at_ms))
        return ended

    def _end_descendants(self, span_id: str, at_ms: int) -> list[FinishedSpan]:
        inside = [frame for frame in self.open.values() if self._descends(frame, span_id)]
        return [self._end(frame, at_ms) for frame in sorted(inside, key=lambda frame: -frame.start_ms)]

    def _descends(self, frame: Frame, ancestor: str) -> bool:
        parent = frame.parent_id
        while parent is not None:
            if parent == ancestor:
                return True
            above = self.open.get(parent)
            parent = None if above is None else above.parent_id
        return False


def _deepest(path: Path, matches: Any) -> int | None:
    """The index of the last frame of ``path`` that ``matches``."""
    for index in range(len(path) - 1, -1, -1):
        if matches(path[index]):
            return index
    return None


def _error_of(event: dict[str, Any], fallback: str) -> tuple[str, str]:
    details = next((value for key, value in event.items() if key.endswith("EventDetails")), {})
    return details.get("error", fallback), details.get("cause", "")
