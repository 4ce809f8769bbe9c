"""Nested executions: arn:aws:states:::states:startExecution with its .sync, .sync:2 and .waitForTaskToken forms.

Starting the child comes first and is idempotent (its name is derived from the parent attempt unless the
Parameters give one, and a start with the same name and input returns the running child), so a dispatch replayed
after a crash never starts a second child. A .sync child that closes tells its parent through a dispatch written in
its closing commit; a parent that closes stops the children it waits on the same way.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import suppress
from typing import Any

from ..asl.jsonio import dumps, loads
from ..engine.commands import (
    AckDispatch,
    CompleteAttempt,
    ExecutionAlreadyExists,
    StartExecution,
    StopExecution,
    TaskNotPending,
)
from ..engine.execution import ExecutionState
from ..engine.outcomes import AttemptFailed, AttemptResult, AttemptSubmitted, AttemptSucceeded
from ..engine.tokens import InvalidToken, TaskTokens
from ..store.base import Dispatch, Store
from .dispatcher import Dispatcher

log = logging.getLogger("statewright.integrations")
_CHILD_NAMES = uuid.UUID("8f0d5a3c-6c55-4b5e-9a59-1f3c0b1b6a10")


class NestedExecutions:
    def __init__(self, dispatcher: Dispatcher, store: Store, tokens: TaskTokens) -> None:
        self.dispatcher = dispatcher
        self.store = store
        self.tokens = tokens
        dispatcher.register("states", self.start_child)
        dispatcher.register("parent", self.notify_parent)
        dispatcher.register("stop", self.stop_child)

    async def start_child(self, dispatch: Dispatch) -> None:
        payload = dispatch.payload
        try:
            child_arn, start_ms = await self._start(dispatch)
        except _ChildError as failure:
            if await self.dispatcher.start_attempt(dispatch):
                await self._complete(dispatch, AttemptFailed(failure.error, failure.cause))
            return
        # Refused only when a replay finds the attempt already started (the completion below is then ignored or
        # finishes what the crash interrupted) or when the attempt moved on (then it is ignored too).
        await self.dispatcher.start_attempt(dispatch)
        response = {"ExecutionArn": child_arn, "StartDate": start_ms}
        if payload["pattern"] == "":
            await self._complete(dispatch, AttemptSucceeded(dumps(response)))
        else:
            await self._complete(dispatch, AttemptSubmitted(response))

    async def _start(self, dispatch: Dispatch) -> tuple[str, int]:
        payload = dispatch.payload
        parameters = payload["input"] if isinstance(payload["input"], dict) else {}
        machine_arn = parameters.get("StateMachineArn")
        machine = self.store.get_state_machine(machine_arn) if isinstance(machine_arn, str) else None
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
        command = StartExecution(child_arn, machine.arn, name, machine.revision_id, machine.role_arn, text, parent)
        try:
            start_ms = await self.dispatcher.run(command)
        except ExecutionAlreadyExists:
            blob = self.store.load_execution(child_arn)
            existing = None if blob is None else ExecutionState.from_blob(blob)
            if existing is None or existing.parent != parent:
                raise _ChildError("StepFunctions.ExecutionAlreadyExistsException",
                                  f"Execution Already Exists: '{child_arn}'") from None
            start_ms = existing.start_ms  # our own child, started before a crash
        return child_arn, start_ms

    async def notify_parent(self, dispatch: Dispatch) -> None:
        """A .sync child closed: complete the parent's attempt with the child's description, then ack."""
        payload = dispatch.payload
        try:
            claims = self.tokens.verify(payload["token"])
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
            await self._complete_claims(claims.execution_arn, claims.scheduled_id, result)
        await self.dispatcher.run(AckDispatch(dispatch.execution_arn, dispatch.dispatch_id))

    async def stop_child(self, dispatch: Dispatch) -> None:
        await self.dispatcher.run(StopExecution(dispatch.payload["target"], "States.Aborted",
                                                "The parent execution that started this one was stopped or closed."))
        await self.dispatcher.run(AckDispatch(dispatch.execution_arn, dispatch.dispatch_id))

    async def _complete(self, dispatch: Dispatch, result: AttemptResult) -> None:
        await self._complete_claims(dispatch.execution_arn, dispatch.payload["scheduled_id"], result)

    async def _complete_claims(self, execution_arn: str, scheduled_id: int, result: AttemptResult) -> Any:
        with suppress(TaskNotPending):  # the attempt timed out or the parent closed meanwhile: nothing to change
            await self.dispatcher.run(CompleteAttempt(execution_arn, scheduled_id, result))


class _ChildError(Exception):
    def __init__(self, error: str, cause: str) -> None:
        super().__init__(cause)
        self.error = error
        self.cause = cause
