"""Engine-to-engine work: the dispatches one execution writes for another, applied inside the engine's tick.

Nested executions (``arn:aws:states:::states:startExecution`` and its ``.sync``, ``.sync:2`` and
``.waitForTaskToken`` forms), a closing ``.sync`` child telling its parent, a closing parent stopping the children
it waits on, and a distributed Map's map run (created, starting its children, hearing of their closes, completing
its parent's Map: decider/map_runs.py) are not outside I/O: each is a few commands of the engine itself. A
transfer is a generator of *stages*: each stage is a list of commands the engine applies in one batch, and the next
stage runs only once every write of the previous one committed (it receives their replies). A write that did not
land ends the transfer; the engine reads its dispatch back from the outbox and the transfer starts over, so every
stage must be safe to repeat.

The order makes that so: a child is started (idempotently, by name) before its parent's attempt is marked started
and completed, and a dispatch is acknowledged (its row deleted) only after the work it asked for committed. A crash
anywhere leaves the dispatch in the outbox until its last stage lands.

Nothing here blocks on anything but the store. Must not import statewright.api or statewright.integrations.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Generator
from typing import Any

from ..asl.jsonio import dumps, loads
from ..decider import describe_for_parent, map_runs, trace_context
from ..decider.effects import DispatchKind
from ..decider.execution import ExecutionState
from ..decider.outcomes import AttemptFailed, AttemptResult, AttemptSubmitted, AttemptSucceeded
from ..store.base import AliasRecord, Dispatch, StateMachineRecord, VersionRecord
from .commands import (
    AckDispatch,
    Command,
    CompleteAttempt,
    ExecutionAlreadyExists,
    ExecutionDoesNotExist,
    ExecutionNotRedrivable,
    MapRunChildClosed,
    RedriveExecution,
    StartAttempt,
    StartExecution,
    StartMapRun,
    StopExecution,
)
from .routing import route
from .tokens import InvalidToken, TaskTokens, UnknownKey

log = logging.getLogger("statewright.engine")

# dispatch kinds the engine applies itself: nested executions' ("states", a Task's integration) and DispatchKind's
KINDS = frozenset({"states", DispatchKind.PARENT, DispatchKind.STOP, DispatchKind.MAP_RUN, DispatchKind.MAP_ITEMS,
                   DispatchKind.MAP_CHILD, DispatchKind.MAP_RUN_DONE})
_CHILD_NAMES = uuid.UUID("8f0d5a3c-6c55-4b5e-9a59-1f3c0b1b6a10")
STOPPED_BY_PARENT = "The parent execution that started this one was stopped or closed."

Stages = Generator[list[Command], list[Any], None]  # yields a stage's commands, receives their replies


class TransferContext:
    """What transfers read: state machines, their versions and aliases from the store, executions as the engine
    has them, the token keys."""

    def __init__(self, state_machine: Callable[[str], StateMachineRecord | None],
                 version: Callable[[str, int], VersionRecord | None], alias: Callable[[str, str], AliasRecord | None],
                 execution: Callable[[str], ExecutionState | None], tokens: TaskTokens) -> None:
        self.state_machine = state_machine
        self.version = version
        self.alias = alias
        self.execution = execution
        self.tokens = tokens


def stages(dispatch: Dispatch, context: TransferContext) -> Stages:
    kind = dispatch.payload["kind"]
    if kind == "states":
        return _start_child(dispatch, context)
    if kind == DispatchKind.PARENT:
        if "map_run" in dispatch.payload:
            return _notify_map_run(dispatch)
        return _notify_parent(dispatch, context)
    if kind == DispatchKind.MAP_RUN:
        return _create_map_run(dispatch)
    if kind == DispatchKind.MAP_ITEMS:
        return _fill_map_run(dispatch)
    if kind == DispatchKind.MAP_CHILD:
        return _start_map_run_child(dispatch, context)
    if kind == DispatchKind.MAP_RUN_DONE:
        return _complete_map(dispatch)
    return _stop_child(dispatch)


def _start_child(dispatch: Dispatch, context: TransferContext) -> Stages:
    """Start the child, then start and complete the parent's attempt: with the child's ARN at once
    (request-response), or as submitted (.sync, .waitForTaskToken: the rest comes from the child or the token)."""
    payload = dispatch.payload
    parent_arn, scheduled_id = dispatch.execution_arn, payload["scheduled_id"]
    try:
        command = _child_start(dispatch, context)
        (started,) = yield [command]
        start_ms = _started_at(command, started, context)
    except _ChildError as failure:
        result: AttemptResult = AttemptFailed(failure.error, failure.cause)
    else:
        response = {"ExecutionArn": command.arn, "StartDate": start_ms}
        result = AttemptSucceeded(dumps(response)) if payload["pattern"] == "" else AttemptSubmitted(response)
    if not isinstance(result, AttemptSubmitted):
        # The start's answer is the task's result: alone in its stage (its start lands with it), so the states that
        # follow it are decided on a slice of the engine thread, or in the heavy lane, as any task result's
        yield [CompleteAttempt(parent_arn, scheduled_id, result)]
        return
    started, _ = yield [StartAttempt(parent_arn, scheduled_id), CompleteAttempt(parent_arn, scheduled_id, result)]
    if started is not True:
        # The parent moved on (stopped, timed out, failed elsewhere) while its child started: nothing waits on the
        # child now, and nothing else would stop it.
        yield [StopExecution(command.arn, "States.Aborted", STOPPED_BY_PARENT)]


def _child_start(dispatch: Dispatch, context: TransferContext) -> StartExecution:
    payload = dispatch.payload
    parameters = payload["input"] if isinstance(payload["input"], dict) else {}
    machine_arn = parameters.get("StateMachineArn")
    name = parameters.get("Name") or str(uuid.uuid5(_CHILD_NAMES, f"{dispatch.execution_arn}|"
                                                                 f"{payload['scheduled_id']}"))
    if not isinstance(name, str):
        raise _refused(dispatch, "InvalidName", f"Invalid Name: '{dumps(name)}'")
    machine, version_arn, alias_arn = _target(machine_arn, name, context) if isinstance(machine_arn, str) else (
        None, None, None)
    if machine is None or machine.arn.split(":")[3] != dispatch.execution_arn.split(":")[3]:  # (another region's:
        # unseen from this one, as from AWS's regional endpoint)
        raise _refused(dispatch, "StateMachineDoesNotExist", f"State Machine Does Not Exist: '{machine_arn}'")
    account = dispatch.execution_arn.split(":")[4]
    if machine.arn.split(":")[4] != account:  # another account's: refused as IAM refuses the role
        request_id = _request_id(f"{dispatch.execution_arn}|{dispatch.payload['scheduled_id']}")
        raise _ChildError("StepFunctions.AccessDeniedException", _service_cause(
            f"User: arn:aws:iam::{account}:root is not authorized to perform: states:StartExecution on resource: "
            f"{machine_arn} because no resource-based policy allows the states:StartExecution action",
            "AccessDeniedException", request_id))
    child_input = parameters.get("Input", {})
    text = child_input if isinstance(child_input, str) else dumps({} if child_input is None else child_input)
    try:
        loads(text)
    except ValueError as exc:
        raise _refused(dispatch, "InvalidExecutionInput", f"Invalid State Machine Execution Input: '{exc}'") from None
    child_arn = machine.arn.replace(":stateMachine:", ":execution:", 1) + ":" + name
    parent = ({"token": payload["token"], "pattern": payload["pattern"]}
              if payload["pattern"].startswith("sync") else None)
    trace = None
    if machine.tracing_configuration.get("enabled"):  # joins its parent's trace, under the attempt's span
        given = payload.get("trace")
        trace = (trace_context.child_of(given, dispatch.execution_arn, payload["scheduled_id"]) if given
                 else trace_context.derived_trace(child_arn))
    return StartExecution(child_arn, machine.arn, name, machine.revision_id, machine.role_arn, text, parent,
                          version_arn, alias_arn, trace=trace)


def _target(arn: str, name: str, context: TransferContext) -> tuple[StateMachineRecord | None, str | None,
                                                                      str | None]:
    """What StateMachineArn names, as StartExecution takes it: a state machine (its latest revision), a version
    (``...:name:3``) or an alias (``...:name:PROD``, which picks one of its versions for this child by its weights);
    the record the child runs and its version and alias ARNs. None: nothing of that name."""
    parts = arn.split(":")
    if len(parts) != 8 or parts[5] != "stateMachine":
        return context.state_machine(arn), None, None
    machine_arn, qualifier = arn.rsplit(":", 1)
    alias = None
    if not qualifier.isdigit():
        alias = context.alias(machine_arn, qualifier)
        if alias is None:
            return None, None, None
        child_arn = machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + name
        qualifier = str(route(alias.routing, child_arn))
    version = context.version(machine_arn, int(qualifier))
    if version is None:
        return None, None, None
    return version.machine, f"{machine_arn}:{qualifier}", None if alias is None else arn


def _started_at(command: StartExecution, started: Any, context: TransferContext) -> int:
    if isinstance(started, ExecutionAlreadyExists):  # ours, if this stage ran before a crash; else a name clash
        existing = context.execution(command.arn)
        if existing is None or existing.parent != command.parent:
            raise _ChildError("StepFunctions.ExecutionAlreadyExistsException",
                              _service_cause(f"Execution Already Exists: '{command.arn}'", "ExecutionAlreadyExists",
                                             _request_id(command.arn)))
        return existing.start_ms
    if isinstance(started, BaseException):  # a bug: fail the attempt rather than strand it
        raise _ChildError("States.Runtime", f"The child execution could not be started: {started}")
    return started


def _notify_parent(dispatch: Dispatch, context: TransferContext) -> Stages:
    """A .sync child closed: complete the parent's attempt with the child's description, then acknowledge."""
    payload = dispatch.payload
    try:
        try:
            claims = context.tokens.verify(payload["token"])
        except UnknownKey:  # the parent's node signed it with a key set this node has not read yet
            claims = context.tokens.reread_for(payload["token"], limited=False)
    except InvalidToken:
        log.error("a child execution carries a parent token that does not verify: %s", dispatch.execution_arn)
    else:
        described = dict(payload["describe"])
        if payload["pattern"] == "sync:2":
            for key in ("Input", "Output"):
                if key in described:
                    described[key] = loads(described[key])
        result = (AttemptSucceeded(dumps(described)) if described["Status"] == "SUCCEEDED"
                  else AttemptFailed("States.TaskFailed", dumps(described)))
        yield [CompleteAttempt(claims.execution_arn, claims.scheduled_id, result)]
    yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]


def _create_map_run(dispatch: Dispatch) -> Stages:
    """A distributed Map entered: create its map run, then mark the Map's attempt started (which deletes this
    dispatch); a parent that moved on meanwhile has its run stopped, then the dispatch goes. A redrive the run
    refuses fails the Map's attempt, then the dispatch goes."""
    payload = dispatch.payload
    created, = yield [StartMapRun(payload["run"], payload)]
    if isinstance(created, ExecutionDoesNotExist | ExecutionNotRedrivable):  # a redrive refused
        cause = (created.reason if isinstance(created, ExecutionNotRedrivable)
                 else f"The map run {payload['run']} no longer exists and cannot be redriven")  # (retention)
        yield [CompleteAttempt(dispatch.execution_arn, payload["scheduled_id"], AttemptFailed("States.Runtime", cause))]
        yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]
        return
    started, = yield [StartAttempt(dispatch.execution_arn, payload["scheduled_id"])]
    if started is not True:
        yield [StopExecution(payload["run"], "States.Aborted", STOPPED_BY_PARENT)]
        yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]


def _fill_map_run(dispatch: Dispatch) -> Stages:
    """The ItemReader's items (or its failure) reached the parent: the run reading them gets them (created now if
    its creation is still on its way: the payload carries all of it), then acknowledge."""
    yield [StartMapRun(dispatch.payload["run"], dispatch.payload)]
    yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]


def _start_map_run_child(dispatch: Dispatch, context: TransferContext) -> Stages:
    """A map run starts a child (idempotently: the same name each time), or redrives it, then acknowledges."""
    payload = dispatch.payload
    if payload.get("redrive"):
        yield from _redrive_map_run_child(dispatch, context)
        return
    run = context.execution(dispatch.execution_arn)  # the run, served here: is the child still wanted?
    if run is not None and run.run is not None and payload["parent"]["index"] not in run.run.running:
        # Stopped before it started (its stop told the run it was aborted): starting it now would leave it
        # running with no one to stop it
        yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]
        return
    command = StartExecution(payload["arn"], payload["machine"], payload["name"], payload["revision_id"],
                             payload["role_arn"], payload["input"], payload["parent"],
                             processor=payload["processor"], trace=payload.get("trace"))
    started, = yield [command]
    if isinstance(started, ExecutionAlreadyExists):
        existing = context.execution(command.arn)
        if existing is not None and existing.parent != command.parent:
            log.error("a map run's child %s exists with another parent", command.arn)
    elif isinstance(started, BaseException):  # not started (a bug): started again when the dispatch is read back
        raise started
    yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]


def _redrive_map_run_child(dispatch: Dispatch, context: TransferContext) -> Stages:
    """A redriven map run's child that had not succeeded is redriven (once: the redrive's client token); one that
    cannot be (deleted, or no longer redrivable) is reported to the run as it stands."""
    payload = dispatch.payload
    redriven, = yield [RedriveExecution(payload["arn"], payload["token"], by_map_run=True)]
    if isinstance(redriven, ExecutionNotRedrivable | ExecutionDoesNotExist):
        child = context.execution(payload["arn"])
        described = ({"Status": "FAILED", "Error": "States.Runtime", "Cause": f"The child execution "
                      f"{payload['arn']} no longer exists and cannot be redriven"} if child is None
                     else describe_for_parent(child))
        described["RedriveStatus"] = "NOT_REDRIVABLE"
        if isinstance(redriven, ExecutionNotRedrivable):
            described["RedriveStatusReason"] = redriven.reason
        if described["Status"] == "RUNNING":  # it is closing (stopped by the run): its close will report
            described = {**described, "Status": "FAILED", "Error": "States.Runtime",
                         "Cause": f"The child execution {payload['arn']} was still running and cannot be redriven"}
        yield [MapRunChildClosed(payload["run"], payload["index"], described,
                                  map_runs.token_round(payload["token"]))]
    elif isinstance(redriven, BaseException):
        raise redriven
    yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]


def _notify_map_run(dispatch: Dispatch) -> Stages:
    """A map run's child closed: the run counts it, then acknowledge."""
    payload = dispatch.payload
    yield [MapRunChildClosed(payload["map_run"], payload["index"], payload["describe"], payload.get("round"))]
    yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]


def _complete_map(dispatch: Dispatch) -> Stages:
    """A map run closed: complete its parent's Map (a parent no longer waiting ignores it), then acknowledge."""
    payload = dispatch.payload
    result: AttemptResult = (AttemptSucceeded(payload["output"]) if "output" in payload
                             else AttemptFailed(payload["error"], payload["cause"]))
    yield [CompleteAttempt(payload["execution"], payload["scheduled_id"], result)]
    yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]


def _stop_child(dispatch: Dispatch) -> Stages:
    """A parent closed while a child it waits on runs: stop the child, then acknowledge. A map run's child not
    started yet (its start may be on its way) is started first, with the same start (``start``), then stopped: it
    closes ABORTED and tells its run, as any stopped child does, and a start still on its way finds it there."""
    payload = dispatch.payload
    stopped, = yield [StopExecution(payload["target"], "States.Aborted", STOPPED_BY_PARENT)]
    if isinstance(stopped, ExecutionDoesNotExist) and "start" in payload:
        start = payload["start"]
        yield [StartExecution(payload["target"], start["machine"], start["name"], start["revision_id"],
                              start["role_arn"], start["input"], start["parent"], processor=start["processor"])]
        yield [StopExecution(payload["target"], "States.Aborted", STOPPED_BY_PARENT)]
    yield [AckDispatch(dispatch.execution_arn, dispatch.dispatch_id)]


def _refused(dispatch: Dispatch, code: str, message: str) -> _ChildError:
    """The nested StartExecution refused: StepFunctions.<Code>Exception, its cause in AWS's SDK words."""
    request_id = _request_id(f"{dispatch.execution_arn}|{dispatch.payload['scheduled_id']}")
    return _ChildError(f"StepFunctions.{code}Exception", _service_cause(message, code, request_id))


def _service_cause(message: str, code: str, request_id: str) -> str:
    """AWS records the refusal of a service call as its Java SDK prints the exception: the message, then
    ``(Service: ...; Status Code: ...; Error Code: ...; Request ID: ...; Proxy: null)``."""
    return (f"{message} (Service: AWSStepFunctions; Status Code: 400; Error Code: {code}; Request ID: {request_id}; "
            "Proxy: null)")


def _request_id(seed: str) -> str:
    """A request id for a refused nested call, the same each time the stage runs again."""
    return str(uuid.uuid5(_CHILD_NAMES, f"{seed}|request"))


class _ChildError(Exception):
    def __init__(self, error: str, cause: str) -> None:
        super().__init__(cause)
        self.error = error
        self.cause = cause
