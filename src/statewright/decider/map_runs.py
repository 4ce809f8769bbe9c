"""Distributed Map: the parent's side (entering the Map starts a map run; the run's end completes the Map) and the
map run's coordinator (children started within MaxConcurrency, their outcomes counted against the tolerated
failures, the run closed once).

A map run is a row of its own (an ``ExecutionState`` whose ``run`` holds its books), committed and fenced like an
execution, on the shard its ARN hashes to. Its children are ordinary executions on theirs. Everything between
them is a dispatch written in the commit that decides it, which the engine applies itself (engine/transfers.py):

- ``maprun``: the parent's Map entered (its MapRunStarted event is the attempt's scheduled id): create the run
  (idempotently by its ARN; reading, when an ItemReader reads its items), then mark the parent's attempt started;
- ``mapitems``: the parent read the items (``mapread``) and made the children's inputs of them: the run reading
  gets them (or the read's failure, which fails it);
- ``mapchild``: the run starts child ``i`` (idempotently by its name, derived from the run and ``i``), then the
  dispatch goes;
- ``parent`` (a child's, with ``map_run``): a child closed: the run counts it, then the dispatch goes;
- ``maprundone``: the run closed: complete the parent's attempt (Retry and Catch apply as to any result);
- ``mapread`` and ``mapwrite`` (integrations/aws): the ItemReader's read (reported to the parent, whose
  ItemsPointer, ItemSelector and ItemBatcher make the inputs), the ResultWriter's files;
- ``stop``: a closing parent stops its run; a closing run stops its running children.

So a crash anywhere repeats a stage, never loses one, and a repeated stage changes nothing. The parent's history
holds MapStateStarted, MapRunStarted and MapRunSucceeded or MapRunFailed, never an event per child.

Verified against AWS: the parent's events, their order and details (LocalStack's AWS-validated snapshots of
distributed Maps, and the service model's HistoryEvent), DescribeMapRun's fields (its test_sfn_api_map_run
snapshot), the results' layout and Transformations (AWS's ResultWriter (Map) page: a child that did not succeed is
its whole record, whatever the Transformation). Inferred: a child's name (a UUID derived from the run and its
index), that a declared tolerance of neither kind tolerates no failure (AWS's defaults are 0 for both), and the
events of a map run's redrive around MapRunRedriven.

Pure, like the rest of the decider.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from ..asl.dataflow import select
from ..asl.errors import StatesError
from ..asl.jsonio import dumps, loads
from ..asl.states import MapState, ResultWriter
from ..asl.timestamps import format_ms
from . import distributed_map, retry_catch, trace_context
from .effects import DispatchKind
from .execution import ABORTED, FAILED, RUNNING, SUCCEEDED, TIMED_OUT, ExecutionState, MapRun, TaskAttempt
from .outcomes import WAIT, AttemptFailed, AttemptResult, AttemptSubmitted, AttemptSucceeded, End, Next, Outcome
from .step import Decision, Step, without_none

CONCURRENCY_MAX = 10_000  # children of one map run running at once (AWS's bound; MaxConcurrency 0 means it)
RESULT_WRITER_FAILED = "States.ResultWriterFailed"
REDRIVES_MAX = 1_000  # redrives of one map run
_OUTCOMES = {SUCCEEDED: "succeeded", TIMED_OUT: "timedOut", ABORTED: "aborted"}  # any other close: "failed"


# -- the parent's side


def enter(step: Step, flow_id: str, state: MapState, data: Any) -> Outcome:
    """Record the map run's start and dispatch its creation; the flow then waits on it as a Task waits on its
    attempt (the attempt's id is the MapRunStarted event's). With an ItemReader the run is created reading: the
    parent reads the items (``mapread``) and hands them to it once read (``answered``), so DescribeMapRun finds the
    run from the start, as on AWS."""
    halted_id = step.resuming.pop(flow_id, None)
    if halted_id is not None:  # a redrive: the run the Map stood in runs again
        return _redrive(step, flow_id, step.resumed[halted_id].task.child)
    reader = state.distributed.reader
    if reader is None:
        inputs, limit, tolerance = distributed_map.prepare(step, flow_id, state, data, None)
        destination = _destination(step, flow_id, state, data)
        # AWS records the items' count (0 when an ItemReader reads them: LocalStack's AWS-validated snapshots)
        _run_started(step, flow_id, state, len(inputs))
        _dispatch_run(step, DispatchKind.MAP_RUN, "run", {
            **_request(step, flow_id, state, limit, tolerance, destination), **_items(state, inputs)})
        return WAIT
    where = _where(step, flow_id, state, reader.parameters, data, "ItemReader")
    limit, tolerance = distributed_map.settings(step, flow_id, state, data)
    destination = _destination(step, flow_id, state, data)
    scheduled_id = _run_started(step, flow_id, state, 0)
    _dispatch_run(step, DispatchKind.MAP_RUN, "run", {
        **_request(step, flow_id, state, limit, tolerance, destination), "reading": True})
    # The read's progress, kept with the attempt: the page awaited, the items before it, where they are read from
    step.flows[flow_id].task.job = {"page": 0, "items": 0, "where": where}
    _dispatch_read(step, state, scheduled_id, 0, where, None)
    return WAIT


def _dispatch_read(step: Step, state: MapState, scheduled_id: int, page: int, where: Any,
                   cursor: dict[str, Any] | None) -> None:
    """The ItemReader's read of a page (from ``cursor``; the first from the start)."""
    reader = state.distributed.reader
    step.add_dispatch(_read_id(scheduled_id, page), {
        "kind": DispatchKind.MAP_READ, "execution": step.execution.arn, "scheduled_id": scheduled_id,
        "action": reader.action, "parameters": where, "input_type": reader.input_type, "page": page,
        "cursor": cursor})


def _read_id(scheduled_id: int, page: int) -> str:
    return str(scheduled_id) if page == 0 else f"{scheduled_id}-read-{page}"


def _redrive(step: Step, flow_id: str, run_arn: str) -> Outcome:
    """RedriveExecution of a parent whose Map's run did not succeed: the same run goes on (``redrive``), and the
    parent records MapRunRedriven instead of MapRunStarted. Inferred: the events around it, as for a run's start,
    and its redriveCount, the parent's (a run is redriven with its parent)."""
    execution = step.execution
    step.emit("MapStateStarted", "mapStateStartedEventDetails", {"length": 0}, flow=flow_id)
    scheduled_id = step.emit("MapRunRedriven", "mapRunRedrivenEventDetails",
                             {"mapRunArn": run_arn, "redriveCount": execution.redrive_count}, flow=flow_id)
    step.flows[flow_id].task = TaskAttempt(scheduled_id, child=run_arn)
    step.add_dispatch(f"run-{scheduled_id}", {"kind": DispatchKind.MAP_RUN, "execution": execution.arn,
                                              "scheduled_id": scheduled_id, "run": run_arn, "redrive": True})
    return WAIT


def _where(step: Step, flow_id: str, state: MapState, parameters: Any, data: Any, field: str) -> Any:
    """An ItemReader's or ResultWriter's Parameters (Arguments) rendered: where in S3 the data is or goes."""
    if parameters is None:
        return None
    if state.query_language == "JSONata":
        return step.evaluate_expression(flow_id, state, parameters, data, f"{field}/Arguments")
    context = step.scope(flow_id, state.name)
    return parameters.render(select(state.input_path, data, context), context, step.seed_of(step.flows[flow_id]))


def _run_started(step: Step, flow_id: str, state: MapState, length: int) -> int:
    """MapStateStarted and MapRunStarted; the flow waits on the run from now on. Returns the attempt's id."""
    execution = step.execution
    step.emit("MapStateStarted", "mapStateStartedEventDetails", {"length": length}, flow=flow_id)
    scheduled_id = execution.next_event_id
    root = _root_machine(execution.state_machine_arn)
    # Without a Label AWS names the children's state machine with a UUID (the recordings hide it as one)
    label = state.distributed.label or named_uuid(f"{root}|{state.name}")
    run_arn = f"{root.replace(':stateMachine:', ':mapRun:', 1)}/{label}:{named_uuid(f'{execution.arn}|{scheduled_id}')}"
    assert step.emit("MapRunStarted", "mapRunStartedEventDetails", {"mapRunArn": run_arn},
                     flow=flow_id) == scheduled_id
    step.flows[flow_id].task = TaskAttempt(scheduled_id, child=run_arn)
    return scheduled_id


def _destination(step: Step, flow_id: str, state: MapState, data: Any) -> dict[str, str] | None:
    """Where the ResultWriter writes the results (its Bucket and Prefix); None: they are the Map's output."""
    writer = state.distributed.writer
    if writer is None:
        return None
    destination = _where(step, flow_id, state, writer.parameters, data, "ResultWriter")
    if destination is not None and not (isinstance(destination, dict) and isinstance(destination.get("Bucket"), str)
                                        and isinstance(destination.get("Prefix", ""), str)):
        raise StatesError(RESULT_WRITER_FAILED, f"The ResultWriter's Parameters must name a Bucket (and may name a "
                          f"Prefix), as strings: {dumps(destination)}")
    return None if destination is None else {"Bucket": destination["Bucket"], "Prefix": destination.get("Prefix", "")}


def _request(step: Step, flow_id: str, state: MapState, limit: int, tolerance: distributed_map.Tolerance,
             destination: dict[str, str] | None) -> dict[str, Any]:
    """What creating the flow's map run takes, but its children's inputs."""
    execution, task = step.execution, step.flows[flow_id].task
    writer = state.distributed.writer or ResultWriter()
    run_arn = task.child
    return {
        "execution": execution.arn, "scheduled_id": task.scheduled_id, "run": run_arn,
        "machine": machine_of(run_arn), "revision_id": execution.revision_id, "role_arn": execution.role_arn,
        "processor": state.name, "execution_type": state.distributed.execution_type,
        "max_concurrency": limit or CONCURRENCY_MAX, "tolerated_count": tolerance.count,
        "tolerated_percentage": tolerance.percentage, "transformation": writer.transformation,
        "output_type": writer.output_type, "destination": destination,
        **({} if execution.trace is None else {"trace": trace_context.child_of(
            execution.trace, execution.arn, task.scheduled_id)})}


def _items(state: MapState, inputs: list[Any]) -> dict[str, Any]:
    """The children's inputs, as a map run's request carries them."""
    return {"inputs": dumps(inputs), "batched": state.distributed.batcher is not None}


def _dispatch_run(step: Step, kind: DispatchKind, prefix: str, request: dict[str, Any]) -> None:
    step.add_dispatch(f"{prefix}-{request['scheduled_id']}", {"kind": kind, **request})


def _items_id(scheduled_id: int, page: int) -> str:
    return f"items-{scheduled_id}" if page == 0 else f"items-{scheduled_id}-{page}"


def machine_of(map_run_arn: str) -> str:
    """The state machine ARN a map run's children run as (``...:stateMachine:<name>/<label>``)."""
    return map_run_arn.rsplit(":", 1)[0].replace(":mapRun:", ":stateMachine:", 1)


def created(step: Step, flow_id: str) -> None:
    """The map run exists: the attempt is started, and its creation's dispatch goes."""
    task = step.flows[flow_id].task
    task.started = True
    step.remove_dispatch(f"run-{task.scheduled_id}")


def _root_machine(state_machine_arn: str) -> str:
    """The state machine a map run's children are named under: a child's own children too (``name/label``)."""
    return state_machine_arn.split("/", 1)[0]


def answered(step: Step, flow_id: str, result: AttemptResult) -> Outcome:
    """The map run closed: the Map's result (through ResultSelector, ResultPath and OutputPath), or its error
    (Retry, Catch)."""
    flow = step.flows[flow_id]
    state = step.state_of(flow)
    task = flow.task
    read_failed = isinstance(result, AttemptFailed) and result.error == distributed_map.READER_FAILED
    if isinstance(result, AttemptSubmitted):  # the ItemReader read a page: the run gets its items
        read = result.output
        progress = task.job
        page = read.get("page", 0)
        if task.submitted or progress is None or page != progress["page"]:
            return WAIT  # a repeated report of a read
        step.remove_dispatch(_read_id(task.scheduled_id, page))
        progress = {**progress, "last": read.get("next") is None}
        try:
            inputs, limit, tolerance = distributed_map.prepare(step, flow_id, state, flow.data, read["read"],
                                                               progress)
            destination = _destination(step, flow_id, state, flow.data)
            request = {**_request(step, flow_id, state, limit, tolerance, destination), **_items(state, inputs)}
        except StatesError as failure:  # the page's items could not be made: a failed read
            result, read_failed = AttemptFailed(failure.error, failure.cause), True
        else:
            more = not progress["last"] and not progress["done"]
            step.add_dispatch(_items_id(task.scheduled_id, page), {"kind": DispatchKind.MAP_ITEMS, **request,
                                                                   "page": page, "more": more})
            if more:
                progress["page"] = page + 1
                task.job = progress
                _dispatch_read(step, state, task.scheduled_id, page + 1, progress["where"], read["next"])
            else:
                task.submitted, task.job = True, None
            return WAIT
    reading = state.distributed.reader is not None and not task.submitted
    if reading and task.job is not None and isinstance(result, AttemptFailed):  # the read stops here
        step.remove_dispatch(_read_id(task.scheduled_id, task.job["page"]))
    if reading and read_failed:  # the items could not be read: the run fails with the Map
        limit, tolerance = distributed_map.settings(step, flow_id, state, flow.data)
        request = _request(step, flow_id, state, limit, tolerance, _destination(step, flow_id, state, flow.data))
        step.add_dispatch(f"items-{task.scheduled_id}-failed", {"kind": DispatchKind.MAP_ITEMS, **request,
                                                                "error": result.error, "cause": result.cause})
    started_id, flow.task = task.scheduled_id, None
    if isinstance(result, AttemptSucceeded):
        step.emit("MapRunSucceeded", None, None, flow=flow_id)
        step.emit("MapStateSucceeded", None, None, flow=flow_id)
        results = loads(result.output)
        step.known(results, result.output)
        try:
            output, assigned = step.shape_result(flow_id, state, flow.data, results)
        except StatesError as failure:
            return retry_catch.failed_in_state(step, flow_id, state, failure)
        # MapStateExited points at MapRunStarted in AWS's recordings since November 2024 (at MapRunSucceeded before)
        step.emit_exited(state, output, flow_id, assigned, started_id)
        return End(output) if state.end else Next(state.next, output)
    assert isinstance(result, AttemptFailed)
    # A run that had its items: a redrive of the execution redrives it (the halted flow keeps its ARN); one that
    # never had them is started anew, as AWS starts a new Map Run for a Map whose ItemReader failed (its
    # "Redriving Map Runs" page)
    # A run that failed while its items were still read (more failures than tolerated) is not redriven either: the
    # pages on their way to it are dropped once it closed, so a redrive reads the items again into a new run
    if task.started and not reading:
        flow.task = task
        step.halt(flow_id)
        flow.task = None
    step.emit("MapRunFailed", "mapRunFailedEventDetails", without_none(result.error, result.cause), flow=flow_id)
    return retry_catch.state_failed(step, flow_id, state, result.error, result.cause)


# -- the map run


def create(arn: str, shard_id: int, request: dict[str, Any], now_ms: int) -> Decision:
    """A new map run from its parent's ``maprun`` dispatch (or its ``mapitems``, when that came first): its first
    children start, or it reads (``request["reading"]``) until ``filled``."""
    run = MapRun(request["execution"], request["scheduled_id"], request["execution_type"], "[]", 0,
                 request["max_concurrency"], request["tolerated_count"], request["tolerated_percentage"],
                 request["transformation"], request["output_type"], request["destination"], reading=True)
    state = ExecutionState(arn, request["machine"], arn.rsplit(":", 1)[1], request["revision_id"],
                           request["role_arn"], "", now_ms, shard_id, processor=request["processor"], run=run,
                           trace=request.get("trace"))
    decision = Decision(state)
    if not request.get("reading"):
        _take(decision, request, now_ms)
    return decision


def filled(state: ExecutionState, request: dict[str, Any], now_ms: int) -> Decision | None:
    """The parent read a page of the run's items (``request``: its ``mapitems`` dispatch, with ``inputs``, or with
    the ``error`` the read failed with): their children start, or it fails. None: it is not reading (any more),
    or has that page."""
    run = state.run
    page = request.get("page", 0)
    if not state.is_open or not run.reading or request.get("reading") or (
            "error" not in request and (page < run.pages or str(page) in run.early)):
        return None
    decision = Decision(state.copy())
    _take(decision, request, now_ms)
    return decision


def _take(decision: Decision, request: dict[str, Any], now_ms: int) -> None:
    """A page of items, in its turn: one that came early waits for those before it (their transfers are
    independent), then goes on with them."""
    run = decision.state.run
    if "error" in request:
        run.reading = False
        _close(decision, FAILED, now_ms, request["error"], request["cause"], tell_parent=False)
        return
    page = request.get("page", 0)
    if page > run.pages:
        run.early = {**run.early, str(page): request}
        return
    _fill(run, request)
    while run.reading and str(run.pages) in run.early:
        early = dict(run.early)
        _fill(run, early.pop(str(run.pages)))
        run.early = early
    _go_on(decision, now_ms)


def _fill(run: MapRun, request: dict[str, Any]) -> None:
    added = _inputs(request["inputs"])
    if added:
        run.inputs = request["inputs"] if run.total == 0 else f"{run.inputs[:-1]},{request['inputs'][1:]}"
    run.total += len(added)
    if request["batched"]:
        run.sizes = run.sizes + [len(batch["Items"]) for batch in added]
    run.pages += 1
    run.reading = bool(request.get("more"))


def not_redrivable(state: ExecutionState, scheduled_id: int) -> str | None:
    """Why the run cannot be redriven for the Map's attempt ``scheduled_id`` (None: it can): AWS redrives a Map Run
    at most 1,000 times, then the Map fails with States.Runtime (its "Redriving Map Runs" page; the cause's wording
    is ours)."""
    if state.is_open and state.run.scheduled_id != scheduled_id:  # its parent's stop has not reached it yet
        return f"The map run {state.arn} is still closing after its parent stopped: redrive again once it has closed"
    if state.redrive_count >= REDRIVES_MAX:
        return f"The map run {state.arn} was redriven {state.redrive_count} times, AWS's limit"
    if state.run.stopped:  # their closes would come to a run that no longer counts them (ours)
        return (f"The map run {state.arn} has {len(state.run.stopped)} children it stopped that have not closed "
                "yet: redrive again once they have")
    return None


def redrive(state: ExecutionState, request: dict[str, Any], now_ms: int) -> Decision | None:
    """The parent's redrive reached its run (``request``: the ``maprun`` dispatch of the Map's new attempt): a run
    that did not succeed opens again for that attempt. Its children that did not succeed are redriven (as AWS
    redrives a map run's failed, timed out and aborted children, ``REDRIVABLE_BY_MAP_RUN``), those never started
    start; the results of those that succeeded are kept. A run that succeeded before its parent heard (the parent
    was stopped first) tells the new attempt its output. None: nothing to do (redriven for that attempt already;
    ``not_redrivable`` refuses a run still open for an earlier one)."""
    run = state.run
    if run.scheduled_id == request["scheduled_id"] or state.is_open:
        return None
    if state.status == SUCCEEDED:
        decision = Decision(state.copy())
        decision.state.run.scheduled_id = request["scheduled_id"]
        _tell_parent(decision)
        return decision
    decision = Decision(state.copy())
    redriven, run = decision.state, decision.state.run
    redriven.status, redriven.stop_ms, redriven.error, redriven.cause = RUNNING, None, None, None
    redriven.redrive_count, redriven.redrive_ms = state.redrive_count + 1, now_ms
    run.scheduled_id = request["scheduled_id"]
    run.redo = [index for index in range(run.next_index) if str(index) not in run.results]
    run.failures, run.failed, run.timed_out, run.aborted = {}, 0, 0, 0
    run.stopped, run.not_redrivable, run.written = [], 0, 0
    run.items = {key: count for key, count in run.items.items() if key == "succeeded"}
    _go_on(decision, now_ms)
    return decision


def child_closed(state: ExecutionState, index: int, described: dict[str, Any], round_: int | None,
                 now_ms: int) -> Decision | None:
    """A child closed (``described``: as DescribeExecution describes it to a parent, describe_for_parent) in the
    run's redrive ``round_`` (None: a child started before rounds were told): count it, start the next ones or close
    the run. A child the run stopped was counted aborted: its close corrects that (it may have failed or succeeded
    first) and gives its record to the results, which are written once every stopped child told. None: the run
    counted it already, or it tells of an earlier round (told again, or late: the run was redriven since, and
    awaits that child's close in this round)."""
    run = state.run
    if round_ is not None and round_ != state.redrive_count:
        return None
    stopped = index in run.stopped
    if not stopped and (not state.is_open or index not in run.running):
        return None
    decision = Decision(state.copy())
    run = decision.state.run
    status = described["Status"]
    if stopped:
        run.stopped.remove(index)
        if status != ABORTED:
            _count(run, index, ABORTED, -1)
            _count(run, index, status)
    else:
        run.running.remove(index)
        _count(run, index, status)
    if status != SUCCEEDED and described.get("RedriveStatus") == "NOT_REDRIVABLE":
        run.not_redrivable += 1
    # Each child's part of the results: its output (COMPACT, FLATTEN), or its whole record (NONE, and a failed
    # child whatever the Transformation: AWS's ResultWriter (Map) page)
    if status != SUCCEEDED:
        run.failures[str(index)] = dumps(_record(described))
    elif run.transformation == "NONE":
        run.results[str(index)] = dumps(_record(described))
    else:
        run.results[str(index)] = described.get("Output", "null")
    if not stopped:
        _go_on(decision, now_ms)
    elif run.closing is not None and not run.stopped:
        _write(decision)
    return decision


def _count(run: MapRun, index: int, status: str, by: int = 1) -> None:
    """Count child ``index`` closed with ``status`` (``by`` -1: no longer)."""
    if status == SUCCEEDED:
        run.succeeded += by
    elif status == TIMED_OUT:
        run.timed_out += by
    elif status == ABORTED:
        run.aborted += by
    else:
        run.failed += by
    if run.sizes:  # a batch's items share its outcome
        outcome = _OUTCOMES.get(status, "failed")
        run.items = {**run.items, outcome: run.items.get(outcome, 0) + by * run.sizes[index]}


def _record(described: dict[str, Any]) -> dict[str, Any]:
    """A child's record in the results, as AWS writes it: DescribeExecution's fields with capitals, dates as ISO
    text; a child that did not succeed has no Output and may be redriven with its map run (a record AWS wrote, seen
    in a user's fixtures: inferred)."""
    record = dict(described)
    for key in ("StartDate", "StopDate", "RedriveDate"):
        if record.get(key) is not None:
            record[key] = format_ms(record[key])
    if record["Status"] != SUCCEEDED:
        record.pop("Output", None)
        record["OutputDetails"] = {"Included": True}
    return dict(sorted(record.items()))


def update(state: ExecutionState, max_concurrency: int | None, tolerated_count: int | None,
           tolerated_percentage: float | None, now_ms: int) -> Decision | None:
    """UpdateMapRun: new bounds take effect at once (more children start, or the run fails now). None: the run
    closed, nothing to update."""
    if not state.is_open:
        return None
    decision = Decision(state.copy())
    run = decision.state.run
    if max_concurrency is not None:
        run.max_concurrency = max_concurrency or CONCURRENCY_MAX
    if tolerated_count is not None:
        run.tolerated_count = tolerated_count
    if tolerated_percentage is not None:
        run.tolerated_percentage = tolerated_percentage
    if run.closing is None:
        _go_on(decision, now_ms)
    return decision


def stop(state: ExecutionState, error: str | None, cause: str | None, now_ms: int) -> Decision | None:
    """The parent stopped waiting (it closed, or its Map was abandoned): the run aborts and stops its children."""
    if not state.is_open:
        return None
    decision = Decision(state.copy())
    if state.run.closing is not None:  # its results were being written: no longer awaited
        decision.effects.dispatches_removed.append("write")
    _close(decision, ABORTED, now_ms, error, cause, tell_parent=False)
    return decision


def written(state: ExecutionState, error: str | None, cause: str | None, now_ms: int) -> Decision | None:
    """The ResultWriter wrote the results (or failed to: ``error``): the run closes as it was closing. None: not
    written by this run now (a repeated report)."""
    if not state.is_open or state.run.closing is None:
        return None
    decision = Decision(state.copy())
    run = decision.state.run
    status, closing_error, closing_cause = run.closing
    if error is not None and status == SUCCEEDED:
        status, closing_error, closing_cause = FAILED, error, cause
    if error is None:
        run.written = len(run.results) + len(run.failures)
    _close(decision, status, now_ms, closing_error, closing_cause)
    decision.effects.dispatches_removed.append("write")
    return decision


def _go_on(decision: Decision, now_ms: int) -> None:
    run = decision.state.run
    if _exceeded(run):
        _finish(decision, FAILED, now_ms, distributed_map.THRESHOLD_EXCEEDED, distributed_map.THRESHOLD_CAUSE)
        return
    most = min(run.max_concurrency, CONCURRENCY_MAX)  # a larger MaxConcurrency runs AWS's most at once
    while run.redo and len(run.running) < most:  # a redrive's children first
        _redrive_child(decision, run.redo.pop(0))
    if run.next_index < run.total and len(run.running) < most:
        inputs = _inputs(run.inputs)
        while run.next_index < run.total and len(run.running) < most:
            _start_child(decision, run.next_index, inputs[run.next_index])
            run.next_index += 1
    if not run.running and not run.redo and run.next_index >= run.total and not run.reading:
        _finish(decision, SUCCEEDED, now_ms)


def _finish(decision: Decision, status: str, now_ms: int, error: str | None = None,
            cause: str | None = None) -> None:
    """The run's outcome is decided: with a ResultWriter bound for S3 its results are written first (the run closes
    once they are, ``written``), else it closes now."""
    run = decision.state.run
    run.redo = []
    if run.destination is None:
        _close(decision, status, now_ms, error, cause)
        return
    run.closing = [status, error, cause]
    _stop_running(decision)
    if not run.stopped:  # else once the children it stopped told how they closed (child_closed)
        _write(decision)


def _write(decision: Decision) -> None:
    """Dispatch the writing of the results."""
    state = decision.state
    run = state.run
    # Children never started (the run failed): their inputs (the record AWS writes for them is not documented)
    pending = _inputs(run.inputs)[run.next_index:]
    decision.effects.dispatches_added.append(("write", {
        "kind": DispatchKind.MAP_WRITE, "run": state.arn, "bucket": run.destination["Bucket"],
        "prefix": results_prefix(state), "output_type": run.output_type, "SUCCEEDED": _succeeded(run),
        "FAILED": _in_order(run.failures),
        "PENDING": [dumps({"Input": dumps(item), "InputDetails": {"Included": True}}) for item in pending]}))


def _stop_running(decision: Decision) -> None:
    """No more children: those running stop now, counted as aborted until they tell how they closed (one may
    have failed or succeeded on its own meanwhile: child_closed). A stop that finds its child not started yet
    starts it first (``start``: the same start as its own, which a start on its way then finds done), so every
    stopped child exists, closes ABORTED and tells the run: none is left running unseen."""
    state = decision.state
    run = state.run
    inputs = _inputs(run.inputs) if run.running else []
    for index in run.running:
        name = child_name(state.arn, index)
        decision.effects.dispatches_added.append((f"stop-{index}", {
            "kind": DispatchKind.STOP, "target": child_arn(state, name), "start": {
                "machine": state.state_machine_arn, "name": name, "revision_id": state.revision_id,
                "role_arn": state.role_arn, "input": dumps(inputs[index]),
                "parent": _parent(state, index), "processor": state.processor}}))
        _count(run, index, ABORTED)
    run.stopped.extend(run.running)
    run.running = []


@functools.lru_cache(maxsize=64)
def _inputs(text: str) -> list[Any]:
    """A run's children's inputs, parsed once for all the decisions that start its children (the text is the
    same object in every copy of the run's state; the list is only read)."""
    return loads(text)


def _in_order(parts: dict[str, str]) -> list[str]:
    return [parts[key] for key in sorted(parts, key=int)]


def _succeeded(run: MapRun) -> list[str]:
    """The succeeded children's part of the results, in order."""
    return [part for key in sorted(run.results, key=int) for part in _shaped(run, run.results[key])]


def _shaped(run: MapRun, text: str) -> list[str]:
    """A succeeded child's part of the results: its output, or with FLATTEN an array output's elements."""
    if run.transformation == "FLATTEN":
        value = loads(text)
        if isinstance(value, list):
            return [dumps(item) for item in value]
    return [text]


def _exceeded(run: MapRun) -> bool:
    """More children failed than the run tolerates (declaring neither kind tolerates none, as AWS's defaults). A
    percentage is of all the children: while the items are read, their number is not known yet (inferred)."""
    failures = run.failed + run.timed_out + run.aborted
    if run.tolerated_count is None and run.tolerated_percentage is None:
        return failures > 0
    percentage = None if run.reading else run.tolerated_percentage
    return distributed_map.Tolerance(run.tolerated_count, percentage).exceeded(failures, run.total)


def _start_child(decision: Decision, index: int, child_input: Any) -> None:
    state = decision.state
    state.run.running.append(index)
    name = child_name(state.arn, index)
    decision.effects.dispatches_added.append((f"child-{index}", {
        "kind": DispatchKind.MAP_CHILD, "arn": child_arn(state, name), "machine": state.state_machine_arn,
        "name": name, "revision_id": state.revision_id, "role_arn": state.role_arn, "input": dumps(child_input),
        "parent": _parent(state, index), "processor": state.processor,
        **({} if state.trace is None else {"trace": state.trace})}))


def _redrive_child(decision: Decision, index: int) -> None:
    state = decision.state
    state.run.running.append(index)
    decision.effects.dispatches_added.append((f"child-{index}-{state.redrive_count}", {
        "kind": DispatchKind.MAP_CHILD, "arn": child_arn(state, child_name(state.arn, index)), "redrive": True,
        "token": redrive_token(state), "run": state.arn, "index": index}))


def redrive_token(state: ExecutionState) -> str:
    """The client token a run redrives its children with in this redrive round of its own: the same each time the
    redrive is sent, and naming the round, which the child takes on (``token_round``) and tells when it closes."""
    return f"{state.arn}|{state.redrive_count}"


def token_round(token: str) -> int:
    return int(token.rsplit("|", 1)[1])


def _parent(state: ExecutionState, index: int) -> dict[str, Any]:
    """What a child knows of the run that started it: which one, its index, and the run's redrive round (its close
    tells the run all three)."""
    return {"map_run": state.arn, "index": index, "round": state.redrive_count}


def item_count(run_arn: str, run: MapRun, name: str) -> int:
    """The items child ``name`` runs on (ListExecutions by map run: its itemCount): its batch's, or one."""
    if not run.sizes:
        return 1
    index = _child_indexes(run_arn, len(run.sizes)).get(name)
    return 1 if index is None else run.sizes[index]


@functools.lru_cache(maxsize=8)
def _child_indexes(run_arn: str, children: int) -> dict[str, int]:
    """A batching run's children by name (their names are derived from their indexes, not the other way)."""
    return {child_name(run_arn, index): index for index in range(children)}


def child_name(run_arn: str, index: int) -> str:
    return named_uuid(f"{run_arn}|{index}")


def named_uuid(name: str) -> str:
    """A UUID (version 5's layout) derived from ``name``: the same each time, so a repeated start repeats it."""
    digest = bytearray(hashlib.sha1(name.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    text = digest.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def child_arn(state: ExecutionState, name: str) -> str:
    """A child's ARN. Express children are durable executions too (with Express's five-minute limit:
    ``asl.definition.processor_definition``), so DescribeExecution and ListExecutions by map run find them, as AWS
    lets them for Express children a map run dispatched (the service model's documentation of both)."""
    return f"{state.state_machine_arn.replace(':stateMachine:', ':execution:', 1)}:{name}"


def _close(decision: Decision, status: str, now_ms: int, error: str | None = None, cause: str | None = None, *,
           tell_parent: bool = True) -> None:
    state = decision.state
    run = state.run
    state.status, state.stop_ms, state.error, state.cause = status, now_ms, error, cause
    run.closing = None
    _stop_running(decision)
    if status == SUCCEEDED and run.destination is None:  # the results are the Map's output
        run.written = len(run.results) + len(run.failures)
    if tell_parent:
        _tell_parent(decision, error, cause)


def _tell_parent(decision: Decision, error: str | None = None, cause: str | None = None) -> None:
    """The run's close goes to its parent's Map attempt (``run.scheduled_id``): its output, or its error."""
    state = decision.state
    result: dict[str, Any] = ({"output": _output(state)} if state.status == SUCCEEDED
                              else {"error": error, "cause": cause})
    decision.effects.dispatches_added.append(("done", {"kind": DispatchKind.MAP_RUN_DONE,
                                                       "execution": state.run.parent_arn,
                                                       "scheduled_id": state.run.scheduled_id, **result}))


def _output(state: ExecutionState) -> str:
    """The Map's result: the children's results in their order (an array, FLATTEN's arrays spliced in), or where
    the ResultWriter wrote them (AWS's ResultWriter (Map) page)."""
    run = state.run
    if run.destination is not None:
        return dumps({"MapRunArn": state.arn, "ResultWriterDetails": {
            "Bucket": run.destination["Bucket"], "Key": f"{results_prefix(state)}manifest.json"}})
    parts = []
    for key in sorted({**run.results, **run.failures}, key=int):
        parts.extend([run.failures[key]] if key in run.failures else _shaped(run, run.results[key]))
    return "[" + ",".join(parts) + "]"


def results_prefix(state: ExecutionState) -> str:
    """Where a run's result files go: ``<Prefix>/<the run's id>/`` (AWS's ResultWriter (Map) page)."""
    prefix = state.run.destination["Prefix"].rstrip("/")
    return f"{prefix}/{state.name}/" if prefix else f"{state.name}/"


def counts(state: ExecutionState) -> dict[str, int]:
    """DescribeMapRun's executionCounts. resultsWritten counts the children whose part of the results was
    delivered: none while the run runs, all that closed once it succeeded (AWS, as LocalStack recorded it and as
    a user measured a running run)."""
    run = state.run
    return {"aborted": run.aborted, "failed": run.failed, "failuresNotRedrivable": run.not_redrivable,
            "pending": run.total - run.next_index, "pendingRedrive": len(run.redo), "resultsWritten": run.written,
            "running": len(run.running), "succeeded": run.succeeded, "timedOut": run.timed_out, "total": run.total}


def item_counts(state: ExecutionState, executions: dict[str, int]) -> dict[str, int]:
    """DescribeMapRun's itemCounts: the executions' counts, unless the Map batches (then their items')."""
    run = state.run
    if not run.sizes:
        return dict(executions)
    counts = dict(executions)
    counts.update(run.items)
    counts["total"] = sum(run.sizes)
    counts["pending"] = sum(run.sizes[run.next_index:])
    counts["running"] = sum(run.sizes[index] for index in run.running)
    counts["pendingRedrive"] = sum(run.sizes[index] for index in run.redo)
    counts["resultsWritten"] = sum(run.sizes[int(key)] for key in {**run.results, **run.failures}) if run.written else 0
    return counts
