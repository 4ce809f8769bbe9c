"""An execution's mutable state: the one row the engine rewrites on every commit, and its stored form.

It holds what the engine needs to take the next step (where each flow waits, its pending timers, the next event
id) and what DescribeExecution shows. History events live elsewhere, append-only.

The stored blob is JSON: an object led by the schema version, ``{"v": 3, "arn": ..., "flows": {id: Flow}, ...}``,
in which each record (Flow, FanOut, TaskAttempt) is an array of its fields in declaration order: orjson writes a
tuple several times faster than a slotted dataclass, and this blob is written on every commit. ``from_blob``
reads every version ever written (version 0 had no "v" and stored flows as objects with short keys; version 2 added
the redrive fields, absent from version 1; version 3 the texts a payload keeps, ``Flow.text`` and ``FanOut.texts``);
``to_blob`` writes the current one. A change to a record's fields is a new version with its own loader.

JSON values inside the records (a flow's data and variables, a fan-out's inputs and results) are never changed in
place by the decider, which builds new values instead, so a copy of the state shares them and copies only the
records and the containers the decider does change. Pure: imports no I/O.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
TIMED_OUT = "TIMED_OUT"
ABORTED = "ABORTED"


DAY_MS = 86_400_000
REDRIVE_EVENTS_MAX = 24_998  # AWS redrives a history under 24,999 events: room for ExecutionRedriven and one more
# A Standard execution's maximum open time, one year from its start (AWS's quota): it times out then, and a redrive
# after it is refused
OPEN_MS_MAX = 365 * DAY_MS
REDRIVABLE_MS = 14 * DAY_MS  # how long after it closed an execution can be redriven (serve --redrivable-days)
REDRIVE_TOKENS_MAX = 10  # the client tokens of the latest redrives, answered idempotently
REDRIVE_TOKEN_MS = 15 * 60_000  # ... for 15 minutes after their first use


def not_redrivable(execution: ExecutionState, now_ms: int, redrivable_ms: int) -> str | None:
    """Why RedriveExecution refuses the execution now (DescribeExecution's redriveStatusReason, in AWS's words);
    None when it can be redriven."""
    if execution.status in (RUNNING, SUCCEEDED):
        return f"Execution is {execution.status} and cannot be redriven"
    if not execution.halted:  # closed by a statewright that kept no redrive point (or with unstorable data)
        return "Execution was started before the launch of RedriveExecution"
    if execution.next_event_id - 1 > REDRIVE_EVENTS_MAX:
        return "Execution history event limit exceeded"
    if now_ms - execution.start_ms > OPEN_MS_MAX:
        return "Execution has exceeded the max execution time"
    if now_ms - execution.stop_ms > redrivable_ms:
        return "Execution redrivable period exceeded"
    return None


def redrive_status(execution: ExecutionState, now_ms: int, redrivable_ms: int) -> tuple[str, str | None]:
    """DescribeExecution's redriveStatus and redriveStatusReason (None: AWS gives no reason). A map run's child
    is redriven by its run, when its parent is redriven (AWS's DescribeExecution: ``REDRIVABLE_BY_MAP_RUN``)."""
    reason = not_redrivable(execution, now_ms, redrivable_ms)
    if reason is not None:
        return "NOT_REDRIVABLE", reason
    return ("REDRIVABLE" if execution.map_run is None else "REDRIVABLE_BY_MAP_RUN"), None


def redriven_by_its_map_run(execution: ExecutionState) -> str | None:
    """Why RedriveExecution refuses a map run's child (None: not one): its run redrives it (AWS's RedriveExecution
    page; the reason's wording is ours)."""
    if execution.map_run is None:
        return None
    return (f"Execution is a child of the map run {execution.map_run}: redrive its parent execution, whose map "
            f"run redrives it")


SCHEMA_VERSION = 3


@dataclass(slots=True)
class FanOut:
    """A Parallel or Map state gathering its children's results."""

    kind: str  # "parallel" or "map"
    inputs: list[Any]  # per branch or item
    results: list[Any]  # per branch or item, filled in as children succeed
    next_index: int  # the next branch or item to start
    running: int  # children started and not finished
    max_concurrency: int  # 0: no limit
    state_input: Any  # the state's raw input (the flow's data), where ResultPath places the joined result
    started_id: int  # the ParallelStateStarted / MapStateStarted event
    # The output text of each child (by its index, as a string) that succeeded with a payload written otherwise
    # than compactly (it passed on the execution input untouched, for one): the join writes it so (step.json_of).
    texts: dict[str, str] = field(default_factory=dict)

    def copy(self) -> FanOut:
        clone = FanOut(*_FAN_OUT_FIELDS(self))
        clone.results = list(self.results)
        clone.texts = dict(self.texts)
        return clone


@dataclass(slots=True)
class TaskAttempt:
    """A Task state's pending attempt, named everywhere (tokens, dispatches, timers) by its scheduled event id."""

    scheduled_id: int
    started: bool = False  # the attempt left the engine (its dispatch is gone)
    heartbeat_ms: int | None = None
    last_beat_ms: int | None = None
    timers: list[str] = field(default_factory=list)  # its deadline timers
    submitted: bool = False  # a .sync or .waitForTaskToken call was made; the result comes later
    child: str | None = None  # the nested execution it waits on, stopped if this one closes first
    job: Any = None  # an AWS job a .sync task started and polls (integrations/aws/jobs.py), stopped if abandoned
    polls: int = 0  # the job's polls dispatched so far (their timers back off)
    polling: bool = False  # the last of them has not reported yet (its dispatch is pending)

    def copy(self) -> TaskAttempt:
        clone = TaskAttempt(*_TASK_ATTEMPT_FIELDS(self))
        clone.timers = list(self.timers)
        return clone


@dataclass(slots=True)
class Flow:
    """One running flow: the top level (id "") or a Parallel branch / Map iteration ("<entered id>.<index>")."""

    machine: int  # index of the Machine (States collection) it runs in Definition.machines
    parent: str | None  # the parent flow's id (None for the top level)
    slot: int  # its index among the parent's children
    state: str | None = None  # the state it is in (or, waiting on a continuation timer, the one it enters next)
    data: Any = None  # that state's input (a Wait's effective input; the raw input of a state waiting to retry)
    text: str | None = None  # data's text where it is not the compact one (Step.hold), so that it keeps it
    entered_id: int = 0  # the state's Entered event
    entered_ms: int = 0
    entered_prev: int = 0  # the Entered event's previousEventId, where an EvaluationFailed event points
    timer: str | None = None  # the timer it waits on (a Wait, a retry backoff, or a continuation: flows.py)
    retries: dict[str, int] = field(default_factory=dict)  # attempts used per retrier index of the current state
    attempts: int = 0  # Task attempts scheduled in the current state
    variables: dict[str, Any] = field(default_factory=dict)
    fan: FanOut | None = None  # while in a Parallel or Map
    task: TaskAttempt | None = None  # while in a Task (fan and task stay last: see _flow_row)

    def copy(self) -> Flow:
        clone = Flow(*_FLOW_FIELDS(self))
        clone.retries = dict(self.retries)
        clone.variables = dict(self.variables)
        if self.fan is not None:
            clone.fan = self.fan.copy()
        if self.task is not None:
            clone.task = self.task.copy()
        return clone


@dataclass(slots=True)
class MapRun:
    """A distributed Map's map run: the books its coordinator keeps (``decider/map_runs.py``). A map run is a row of
    its own, an ``ExecutionState`` whose ``run`` is this record: committed, fenced and cached like an execution."""

    parent_arn: str  # the execution whose Map state runs it
    scheduled_id: int  # that Map's attempt (its MapRunStarted event), which the run completes
    execution_type: str  # the children's: STANDARD or EXPRESS
    inputs: str  # the children's inputs, a JSON array (an item, or a batch, each)
    total: int  # how many children in all
    max_concurrency: int  # children running at once, at most (UpdateMapRun changes it)
    tolerated_count: int | None  # failed children tolerated (None: not declared)
    tolerated_percentage: float | None
    transformation: str  # the ResultWriter's: NONE (whole records), COMPACT (outputs) or FLATTEN
    output_type: str  # JSON or JSONL (the result files')
    destination: dict[str, str] | None  # the ResultWriter's S3 Bucket and Prefix; None: results are the output
    next_index: int = 0  # the next child to start
    running: list[int] = field(default_factory=list)  # children started and not closed, by index
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    aborted: int = 0
    results: dict[str, str] = field(default_factory=dict)  # each child that succeeded: its part of the results
    failures: dict[str, str] = field(default_factory=dict)  # each other closed child: its record
    sizes: list[int] = field(default_factory=list)  # a batching Map's: each child's items (DescribeMapRun)
    items: dict[str, int] = field(default_factory=dict)  # ... and its closed items by outcome (itemCounts' keys)
    closing: list[Any] | None = None  # [status, error, cause] decided while its results are written
    redo: list[int] = field(default_factory=list)  # a redrive's children to redrive (not started again yet)
    reading: bool = False  # its parent reads its items (an ItemReader): nothing starts until they come
    stopped: list[int] = field(default_factory=list)  # children it stopped (counted aborted) whose close may tell
    not_redrivable: int = 0  # children that did not succeed and cannot be redriven (DescribeMapRun)
    written: int = 0  # children whose part of the results was delivered (written, or the Map's output)
    pages: int = 0  # pages of the children's inputs it has (an ItemReader's read comes a page at a time)
    early: dict[str, Any] = field(default_factory=dict)  # pages that came before their turn, by number

    def copy(self) -> MapRun:
        """A copy a decision may change; ``inputs``, ``sizes`` and ``items`` are replaced, never changed in place."""
        clone = MapRun(*_MAP_RUN_FIELDS(self))
        clone.running = list(self.running)
        clone.results = dict(self.results)
        clone.failures = dict(self.failures)
        clone.redo = list(self.redo)
        clone.stopped = list(self.stopped)
        return clone


@dataclass(slots=True)
class ExecutionState:
    arn: str
    state_machine_arn: str
    name: str
    revision_id: str  # the definition revision this execution runs on, to the end
    role_arn: str
    input: str  # exactly as the caller sent it
    start_ms: int
    shard_id: int
    status: str = RUNNING
    stop_ms: int | None = None
    output: str | None = None
    error: str | None = None
    cause: str | None = None
    next_event_id: int = 1
    # When the last event is a Map iteration's Succeeded/Failed/Aborted marker, the event that marker points
    # at: AWS points the next iteration's start and the Map's Failed/Started events past such markers.
    marker_prev: int | None = None
    version: int = 0  # committed version of this row; 0 before the first commit
    # Running flows by id: the top level and the branches and iterations of Parallel and Map states.
    flows: dict[str, Flow] = field(default_factory=dict)
    # For a child started by a .sync Task: {"token", "pattern"} of the parent attempt waiting on it.
    parent: dict[str, Any] | None = None
    # Pending timers: timer id -> fire time. Their rows are written and deleted in the same commits.
    timers: dict[str, int] = field(default_factory=dict)
    # What it was started through (DescribeExecution): its revision_id is that version's. Absent from older blobs.
    version_arn: str | None = None
    alias_arn: str | None = None
    test_case: str | None = None  # serve --mock-config: the test case it runs (started on ARN#case)
    redrive_count: int = 0
    redrive_ms: int | None = None  # the last redrive
    # The latest redrives' client tokens: [token, redrive_ms], newest last (at most REDRIVE_TOKENS_MAX).
    redrive_tokens: list[list[Any]] = field(default_factory=list)
    # Closed FAILED, ABORTED or TIMED_OUT: the flows as they stood when it closed (a failure's casualties as the
    # failure found them), where a redrive resumes them. Empty while it runs, after success, and in older blobs.
    halted: dict[str, Flow] = field(default_factory=dict)
    start_token: str | None = None  # the token of the StartExecution call that started it (None in older blobs)
    processor: str | None = None  # a map run's child: the distributed Map whose ItemProcessor it runs
    run: MapRun | None = None  # a map run's row: its books (the row is not an execution then)
    # Traced (tracingConfiguration enabled at its start): its trace context (decider/trace_context.py).
    # Written only when set, so that a blob without it is what an earlier release wrote and reads.
    trace: str | None = None

    @property
    def is_open(self) -> bool:
        return self.status == RUNNING

    def to_blob(self, beside_row: bool = False) -> bytes:
        """The stored form. ``beside_row``: for a store whose row holds ROW_FIELDS in columns of their own (and
        the state machine's ARN, where it is what the row is listed under), which puts them back in front of the
        blob when it reads it (``with_row_fields``): they are left out."""
        # Written out field by field: orjson is several times slower on slotted dataclasses than on dicts and
        # tuples, and this runs on every commit. The round-trip tests catch a field left out here. A field that
        # holds its default (None, 0, empty) is left out: the constructor's default reads it back, in this release
        # and the one before (a rolling upgrade), and a sleeping execution's row is some 200 bytes smaller. The
        # flows are always written: the release before reads them without a default.
        if beside_row:
            blob: dict[str, Any] = {"v": SCHEMA_VERSION}
            if self.state_machine_arn != self.listed_under:
                blob["state_machine_arn"] = self.state_machine_arn
            blob.update(revision_id=self.revision_id, role_arn=self.role_arn, input=self.input,
                        next_event_id=self.next_event_id)
        else:
            blob = {"v": SCHEMA_VERSION, "arn": self.arn, "state_machine_arn": self.state_machine_arn,
                    "name": self.name, "revision_id": self.revision_id, "role_arn": self.role_arn, "input": self.input,
                    "start_ms": self.start_ms, "shard_id": self.shard_id, "status": self.status,
                    "next_event_id": self.next_event_id, "version": self.version}
        blob["flows"] = {flow_id: _flow_row(flow) for flow_id, flow in self.flows.items()}
        if self.timers:
            blob["timers"] = self.timers
        for name in _SPARSE_FIELDS:  # mostly unset
            value = getattr(self, name)
            if value is not None:
                blob[name] = value
        if self.redrive_count:
            blob.update(redrive_count=self.redrive_count, redrive_tokens=self.redrive_tokens)
        if self.halted:
            blob["halted"] = {flow_id: _flow_row(flow) for flow_id, flow in self.halted.items()}
        if self.run is not None:
            blob["run"] = _MAP_RUN_FIELDS(self.run)
        return orjson.dumps(blob)

    @classmethod
    def from_blob(cls, blob: bytes) -> ExecutionState:
        raw = orjson.loads(blob)
        version = raw.pop("v", 0)
        load_flow = _FLOW_LOADERS.get(version)
        if load_flow is None:
            raise ValueError(f"execution state schema version {version} is newer than this statewright reads")
        raw["flows"] = {flow_id: load_flow(flow) for flow_id, flow in raw["flows"].items()}
        raw["halted"] = {flow_id: load_flow(flow) for flow_id, flow in raw.get("halted", {}).items()}
        if raw.get("run") is not None:
            raw["run"] = MapRun(*raw["run"])
        return cls(**raw)

    def copy(self) -> ExecutionState:
        """A copy that a decision may change without changing the committed state it started from. ``halted`` and
        ``redrive_tokens`` are shared: the decider replaces them, never changes them in place."""
        clone = ExecutionState(*_ALL_FIELDS(self))
        clone.timers = dict(self.timers)
        clone.flows = {flow_id: flow.copy() for flow_id, flow in self.flows.items()}
        if self.parent is not None:
            clone.parent = dict(self.parent)
        if self.run is not None:
            clone.run = self.run.copy()
        return clone

    @property
    def root_machine_arn(self) -> str:
        """The state machine it belongs to (its logging configuration, its deletion): a map run's child, its
        parent's."""
        return self.state_machine_arn.split("/", 1)[0]

    @property
    def listed_under(self) -> str:
        """What its row is listed under (ListExecutions): its state machine; a map run's child, its map run; a map
        run, its parent execution (ListMapRuns)."""
        if self.run is not None:
            return self.run.parent_arn
        return self.map_run or self.state_machine_arn

    @property
    def map_run(self) -> str | None:
        """The map run that started it (None: not a map run's child)."""
        if self.parent is not None and "map_run" in self.parent:
            return self.parent["map_run"]
        return None


def _flow_row(flow: Flow) -> tuple[Any, ...]:
    fan, task = flow.fan, flow.task
    return (*_FLOW_ROW_HEAD(flow), None if fan is None else _FAN_OUT_FIELDS(fan),
            None if task is None else _TASK_ATTEMPT_FIELDS(task))


def _flow_v3(fields: list[Any]) -> Flow:
    flow = Flow(*fields)
    if flow.fan is not None:
        flow.fan = FanOut(*flow.fan)
    if flow.task is not None:
        flow.task = TaskAttempt(*flow.task)
    return flow


def _flow_v1(fields: list[Any]) -> Flow:
    """Versions 1 and 2: no text after the data (and their fan-outs no texts: the default)."""
    return _flow_v3([*fields[:5], None, *fields[5:]])


def _flow_v0(raw: dict[str, Any]) -> Flow:
    """Version 0: flows as objects with short keys ("m", "vars"; a fan-out's "next", "pending", "max", "raw",
    "started"), a task record that also held its input (now only in its dispatch) and left out "submitted" and
    "child" until they were set. A task record holding only "scheduled_id" is an attempt whose input failed after
    the record was made: never scheduled, so no attempt."""
    fan, task = raw["fan"], raw["task"]
    if task is not None and "started" not in task:
        task = None
    return Flow(
        raw["m"], raw["parent"], raw["slot"], raw["state"], raw["data"], None, raw["entered_id"], raw["entered_ms"],
        raw.get("entered_prev", 0), raw["timer"], raw["retries"], raw["attempts"], raw["vars"],
        None if fan is None else FanOut(fan["kind"], fan["inputs"], fan["results"], fan["next"], fan["pending"],
                                        fan["max"], fan["raw"], fan["started"]),
        None if task is None else TaskAttempt(task["scheduled_id"], task["started"], task["heartbeat_ms"],
                                              task["last_beat_ms"], task["timers"], task.get("submitted", False),
                                              task.get("child")))


_FLOW_LOADERS = {0: _flow_v0, 1: _flow_v1, 2: _flow_v1, 3: _flow_v3}  # version 2 changed no record
# The fields a store's row may hold in columns of their own (``to_blob(beside_row=True)`` leaves them out)
ROW_FIELDS = ("arn", "name", "start_ms", "shard_id", "status", "version")
# Fields written only when set (to_blob): their default is None
_SPARSE_FIELDS = ("stop_ms", "output", "error", "cause", "start_token", "marker_prev", "parent", "version_arn",
                  "alias_arn", "test_case", "redrive_ms", "processor", "trace")
# Every field in constructor order: for copies without a JSON round trip, and for the stored rows.
_ALL_FIELDS = operator.attrgetter(*(f.name for f in fields(ExecutionState)))
_FLOW_NAMES = tuple(f.name for f in fields(Flow))
assert _FLOW_NAMES[-2:] == ("fan", "task"), "a stored flow row ends with its fan-out and its task attempt"
_FLOW_FIELDS = operator.attrgetter(*_FLOW_NAMES)
_FLOW_ROW_HEAD = operator.attrgetter(*_FLOW_NAMES[:-2])
_FAN_OUT_FIELDS = operator.attrgetter(*(f.name for f in fields(FanOut)))
_TASK_ATTEMPT_FIELDS = operator.attrgetter(*(f.name for f in fields(TaskAttempt)))
_MAP_RUN_FIELDS = operator.attrgetter(*(f.name for f in fields(MapRun)))
