"""Engine-to-engine work: the dispatches one execution writes for another, applied inside the engine's tick.

Nested executions (``arn:aws:states:::states:startExecution`` and its ``.sync``, ``.sync:2`` and
``.waitForTaskToken`` forms), a closing ``.sync`` child telling its parent, and a closing parent stopping the children
it waits on are not outside I/O: each is a few commands of the engine itself. ``apply_transfer`` turns one such
dispatch into those commands and applies them in the current batch, so they commit together: starting a child, its
parent's attempt started and completed land in one transaction, and a dispatch is acknowledged in the same commit as
the work it asked for. A crash before that commit leaves the dispatch in the outbox, and it is applied again.

Nothing here blocks on anything but the store. Must not import statewright.api or statewright.integrations.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from ..asl.jsonio import dumps, loads
from ..store.base import Dispatch, StateMachineRecord
from .commands import (
    AckDispatch,
    Command,
    CompleteAttempt,
    ExecutionAlreadyExists,
    StartAttempt,
    StartExecution,
    StopExecution,
)
from .execution import ExecutionState
from .tokens import InvalidToken, TaskTokens

log = logging.getLogger("statewright.engine")

KINDS = frozenset({"states", "parent", "stop"})  # dispatch kinds the engine applies itself
_CHILD_NAMES = uuid.UUID("8f0d5a3c-6c55-4b5e-9a59-1f3c0b1b6a10")
STOPPED_BY_PARENT = "The parent execution that started this one was stopped or closed."

Apply = Callable[[Command], Any]  # applies a command in the current batch; returns its reply or the exception


class TransferContext:
    """What transfers need from the engine: the batch, the store's state machines, the executions, the tokens."""

    def __init__(self, apply: Apply, state_machine: Callable[[str], StateMachineRecord | None],
                 execution: Callable[[str], ExecutionState | None], tokens: TaskTokens) -> None:
        self.apply = apply
        self.state_machine = state_machine
        self.execution = execution
        self.tokens = tokens


def apply_transfer(dispatch: Dispatch, context: TransferContext) -> None:
    kind = dispatch.payload["kind"]
    if kind == "states":
        _start_child(dispatch, context)
    elif kind == "parent":
        _notify_parent(dispatch, context)
    else:
        context.apply(StopExecution(dispatch.payload["target"], "States.Aborted", STOPPED_BY_PARENT))
        context.apply(AckDispatch(dispatch.execution_arn, dispatch.dispatch_id))


def _start_child(dispatch: Dispatch, context: TransferContext) -> None:
    """Start the child and complete the parent's attempt in one commit: with the child's ARN at once
    (request-response), or as submitted (.sync, .waitForTaskToken: the rest comes from the child or the token)."""
    payload = dispatch.payload
    parent_arn, scheduled_id = dispatch.execution_arn, payload["scheduled_id"]
    if context.apply(StartAttempt(parent_arn, scheduled_id)) is not True:
        return  # the attempt moved on (timed out, stopped): no child for it
    try:
        child_arn, start_ms = _child(dispatch, context)
    except _ChildError as failure:
        context.apply(CompleteAttempt(parent_arn, scheduled_id, ("failure", failure.error, failure.cause)))
        return
    response = {"ExecutionArn": child_arn, "StartDate": start_ms}
    result = ("success", dumps(response)) if payload["pattern"] == "" else ("submitted", response)
    context.apply(CompleteAttempt(parent_arn, scheduled_id, result))


def _child(dispatch: Dispatch, context: TransferContext) -> tuple[str, int]:
    payload = dispatch.payload
    parameters = payload["input"] if isinstance(payload["input"], dict) else {}
    machine_arn = parameters.get("StateMachineArn")
    machine = context.state_machine(machine_arn) if isinstance(machine_arn, str) else None
    if machine is None:
        raise _ChildError("StepFunctions.StateMachineDoesNotExistException",
                          f"State Machine Does Not Exist: '{machine_arn}' (Service: AWSStepFunctions; "
                          "Status Code: 400; Error Code: StateMachineDoesNotExist)")
    name = parameters.get("Name") or str(uuid.uuid5(_CHILD_NAMES, f"{dispatch.execution_arn}|"
                                                                 f"{payload['scheduled_id']}"))
    child_input = parameters.get("Input", {})
    text = child_input if isinstance(child_input, str) else dumps({} if child_input is None else child_input)
    try:
        loads(text)
    except ValueError as exc:
        raise _ChildError("StepFunctions.InvalidExecutionInputException",
                          f"Invalid State Machine Execution Input: '{exc}'") from None
    child_arn = machine.arn.replace(":stateMachine:", ":execution:", 1) + ":" + name
    parent = ({"token": payload["token"], "pattern": payload["pattern"]}
              if payload["pattern"].startswith("sync") else None)
    started = context.apply(StartExecution(child_arn, machine.arn, name, machine.revision_id, machine.role_arn,
                                           text, parent))
    if isinstance(started, ExecutionAlreadyExists):
        existing = context.execution(child_arn)
        if existing is None or existing.parent != parent:
            raise _ChildError("StepFunctions.ExecutionAlreadyExistsException",
                              f"Execution Already Exists: '{child_arn}'")
        return child_arn, existing.start_ms
    if isinstance(started, BaseException):  # a bug or a store failure: fail the attempt rather than strand it
        raise _ChildError("States.Runtime", f"The child execution could not be started: {started}")
    return child_arn, started


def _notify_parent(dispatch: Dispatch, context: TransferContext) -> None:
    """A .sync child closed: complete the parent's attempt with the child's description, and acknowledge."""
    payload = dispatch.payload
    try:
        claims = context.tokens.verify(payload["token"])
    except InvalidToken:
        log.error("a child execution carries a parent token that does not verify: %s", dispatch.execution_arn)
    else:
        described = dict(payload["describe"])
        if payload["pattern"] == "sync:2":
            for key in ("Input", "Output"):
                if key in described:
                    described[key] = loads(described[key])
        result = (("success", dumps(described)) if described["Status"] == "SUCCEEDED"
                  else ("failure", "States.TaskFailed", dumps(described)))
        context.apply(CompleteAttempt(claims.execution_arn, claims.scheduled_id, result))
    context.apply(AckDispatch(dispatch.execution_arn, dispatch.dispatch_id))


class _ChildError(Exception):
    def __init__(self, error: str, cause: str) -> None:
        super().__init__(cause)
        self.error = error
        self.cause = cause
