"""Runs the attempts of AWS Task states: Lambda functions, aws-sdk calls and the optimized integrations.

Each attempt waits for a slot of its service (``AwsClients.slot``), is recorded as started, and makes its one
call on a pool thread (``calls.perform``), or to a local function's URL (``functions``). A request-response call's
answer is the attempt's result; a ``.waitForTaskToken`` call's answer only submits it (TaskSubmitted), and the
callback with its token completes it. The role a call is made as: the Task's Credentials.RoleArn, else the state
machine's role when the server assumes machine roles (``--assume-machine-role``), else the server's own
credentials.

What is at most once and what at least once: a call is made at most once per attempt. Its start is committed
before the call leaves, and a dispatch found started after a crash is never called again: if the server dies
while a call is in flight, the attempt's deadline makes it States.Timeout and the state's Retry decides whether
to call again (a new attempt). A call whose slot the server had not yet granted when it died was not made, and is
offered again from the outbox. So a workflow sees each call's side effect at most once per attempt, and at least
once overall only when its Retry allows it; services that take an idempotency key can be given
``$$.Execution.Id`` and ``$$.State.Name`` (README).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from ...asl import errors
from ...asl.definition import LAMBDA_FUNCTION
from ...asl.jsonio import dumps, loads
from ...engine.commands import AckDispatch, CompleteAttempt
from ...engine.outcomes import AttemptFailed, AttemptPolled, AttemptSubmitted, AttemptSucceeded
from ...store.base import Dispatch
from ..dispatcher import Dispatcher
from . import calls, jobs, shapes
from .clients import AwsClients
from .functions import LocalFunctions

log = logging.getLogger("statewright.integrations")
T = TypeVar("T")
Outcome = AttemptSucceeded | AttemptFailed | AttemptSubmitted


class AwsTasks:
    def __init__(self, dispatcher: Dispatcher, clients: AwsClients, functions: LocalFunctions | None = None,
                 assume_machine_role: bool = False) -> None:
        self.dispatcher = dispatcher
        self.clients = clients
        self.functions = functions or LocalFunctions()
        self.assume_machine_role = assume_machine_role
        for kind in {"aws-sdk", LAMBDA_FUNCTION, *(service for service, _ in calls.OPTIMIZED)}:
            dispatcher.register(kind, self.run)

    async def run(self, dispatch: Dispatch) -> None:
        payload = dispatch.payload
        lambda_call = payload["kind"] in (LAMBDA_FUNCTION, "lambda") or payload["kind"] == "aws-sdk:lambda"
        within_s = calls.LAMBDA_TIMEOUT_S if lambda_call else calls.CALL_TIMEOUT_S
        service = "lambda" if lambda_call else payload["kind"].removeprefix("aws-sdk:")
        if "poll" in payload:  # a .sync task's job: no attempt to start, the describe call may repeat
            async with self.clients.slot(service):
                try:
                    outcome = await self.clients.run(self._job_call, payload, jobs.poll)
                except (ClientError, BotoCoreError):  # no client now (its role could not be assumed): poll later
                    outcome = AttemptPolled()
            await self.dispatcher.report(CompleteAttempt(dispatch.execution_arn, payload["scheduled_id"], outcome),
                                         within_s)
        elif "cancel" in payload:
            async with self.clients.slot(service):
                try:
                    await self.clients.run(self._job_call, payload, jobs.stop)
                except (ClientError, BotoCoreError) as error:
                    log.info("could not stop the job of %s: %s", dispatch.execution_arn, error)
            await self.dispatcher.run(AckDispatch(dispatch.execution_arn, dispatch.dispatch_id))
        else:
            await self.dispatcher.call_once(dispatch, self.clients.slot(service), lambda: self.perform(payload),
                                            within_s)

    async def perform(self, payload: dict[str, Any]) -> Outcome:
        """Make the call a Task's dispatch payload describes and return its outcome (TestState calls it too)."""
        kind, action, given = payload["kind"], payload["action"], payload["input"]
        function = action if kind == LAMBDA_FUNCTION else given.get("FunctionName") if (
            kind == "lambda" and isinstance(given, dict)) else None
        url = self.functions.url(function)
        if url is not None:
            body = dumps(given if kind == LAMBDA_FUNCTION else given.get("Payload", {})).encode()
            outcome: Outcome = await self.functions.invoke(url, body, legacy=kind == LAMBDA_FUNCTION)
        else:
            outcome = await self.clients.run(self._call, payload)
        if isinstance(outcome, AttemptSucceeded) and payload["pattern"] == "waitForTaskToken":
            return AttemptSubmitted(loads(outcome.output))
        if isinstance(outcome, AttemptSucceeded) and payload["pattern"] == "sync":
            output = loads(outcome.output)
            handle = jobs.handle(kind, action, given, output)
            if handle is None:
                return AttemptFailed(calls.TASK_FAILED, f"The call started no job: {outcome.output}")
            if payload.get("role"):
                handle["RoleArn"] = payload["role"]
            return AttemptSubmitted(output, handle)
        return outcome

    def _job_call(self, payload: dict[str, Any], operation: Callable[..., T]) -> T:
        """On a pool thread: poll or stop the job of a .sync task."""
        handle = payload["job"]
        spec = jobs.JOBS[(payload["kind"], payload["action"])]
        client = self.clients.client(spec.service, payload["execution"].split(":")[3], handle.get("RoleArn"))
        return operation(payload["kind"], payload["action"], handle, client)

    def _call(self, payload: dict[str, Any]) -> Outcome:
        """On a pool thread: plan the call, find its client (assuming its role), make it."""
        try:
            call = calls.plan(payload["kind"], payload["action"], payload["input"])
        except shapes.ParameterError as error:
            return AttemptFailed(errors.RUNTIME, str(error))
        role = payload.get("role") or (payload.get("machine_role") if self.assume_machine_role else None)
        region = payload["execution"].split(":")[3]
        try:
            client = self.clients.client(call.service, region, role or None, call.read_timeout_s)
        except (ClientError, BotoCoreError) as error:
            return AttemptFailed(calls.TASK_FAILED, f"Could not assume the role {role}: {error}")
        return calls.perform(call, client)
