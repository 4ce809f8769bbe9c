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

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from ...asl import errors
from ...asl.definition_tasks import LAMBDA_FUNCTION
from ...asl.jsonio import dumps, loads
from ...decider.outcomes import AttemptFailed, AttemptPolled, AttemptSubmitted, AttemptSucceeded
from ...engine.commands import AckDispatch, CompleteAttempt
from ...store.base import Dispatch
from ..dispatcher import Dispatcher
from ..traces import CallSpans, CallTrace
from . import api_gateway, calls, jobs, kubernetes, shapes
from .clients import AwsClients, CredentialsFor
from .functions import FunctionStyle, LocalFunctions

log = logging.getLogger("statewright.integrations")
ECS_FAILURES = "AmazonECS.Unknown"  # an ECS job or callback task whose RunTask answered with Failures
T = TypeVar("T")
Outcome = AttemptSucceeded | AttemptFailed | AttemptSubmitted


class AwsTasks:
    def __init__(self, dispatcher: Dispatcher, clients: AwsClients, functions: LocalFunctions | None = None,
                 assume_machine_role: bool = False, spans: CallSpans | None = None) -> None:
        self.dispatcher = dispatcher
        self.clients = clients
        self.spans = spans or CallSpans()
        self.functions = functions or LocalFunctions()
        self.assume_machine_role = assume_machine_role
        for kind in {"aws-sdk", LAMBDA_FUNCTION, "apigateway", *(service for service, _ in calls.OPTIMIZED)}:
            dispatcher.register(kind, self.run)

    async def run(self, dispatch: Dispatch) -> None:
        payload = dispatch.payload
        within_s = calls.call_deadline_s(payload)
        kind = payload["kind"]
        service = "lambda" if kind in (LAMBDA_FUNCTION, "aws-sdk:lambda") else kind.removeprefix("aws-sdk:")
        if "poll" in payload:  # a .sync task's job: no attempt to start, the describe call may repeat
            async with self.clients.slot(service):
                try:
                    if _kubernetes(payload):  # a cluster's API: bounded here, botocore's calls by their own timeout
                        async with asyncio.timeout(within_s):
                            outcome = await kubernetes.poll(payload["job"], _region(payload),
                                                            self._credentials(payload), payload["poll"])
                    else:
                        outcome = await self.clients.run(self._job_call, payload, jobs.poll)
                except (ClientError, BotoCoreError, TimeoutError):  # no client now (its role could not be assumed)
                    outcome = AttemptPolled(payload["poll"])  # or no answer in time: the next poll tries again
            await self.dispatcher.report(CompleteAttempt(dispatch.execution_arn, payload["scheduled_id"], outcome),
                                         within_s)
        elif "cancel" in payload:
            async with self.clients.slot(service):
                try:
                    if _kubernetes(payload):
                        async with asyncio.timeout(within_s):
                            await kubernetes.stop(payload["job"], _region(payload), self._credentials(payload))
                    else:
                        await self.clients.run(self._job_call, payload, jobs.stop)
                except (ClientError, BotoCoreError, TimeoutError) as error:
                    log.info("could not stop the job of %s: %s", dispatch.execution_arn, error)
            await self.dispatcher.report(AckDispatch(dispatch.execution_arn, dispatch.dispatch_id), within_s)
        else:
            await self.dispatcher.call_once(dispatch, self.clients.slot(service), lambda: self.perform(payload),
                                            within_s)

    async def perform(self, payload: dict[str, Any]) -> Outcome:
        """Make the call a Task's dispatch payload describes and return its outcome (TestState calls it too),
        within the call's deadline; never raises."""
        deadline_s = calls.call_deadline_s(payload)
        try:
            async with asyncio.timeout(deadline_s):
                outcome = await self._perform(payload)
        except TimeoutError:
            return AttemptFailed(errors.TIMEOUT, f"The call got no answer within {deadline_s:g} seconds")
        except (ClientError, BotoCoreError) as error:  # a role to sign with that could not be assumed
            return AttemptFailed(calls.TASK_FAILED, f"Could not assume the role {self._role(payload)}: {error}")
        except Exception as error:  # a bug; the attempt fails alone, with what went wrong
            log.exception("the AWS call of %s failed", payload["execution"])
            return AttemptFailed(calls.TASK_FAILED, f"{type(error).__name__}: {error}")
        return self._pattern_outcome(payload, outcome)

    async def _perform(self, payload: dict[str, Any]) -> AttemptSucceeded | AttemptFailed:
        if "trace" not in payload:  # untraced: nothing to make on the hot path
            return await self._perform_traced(payload, None)
        kind = payload["kind"]
        service = "lambda" if kind == LAMBDA_FUNCTION else kind.removeprefix("aws-sdk:")
        action = "invoke" if kind == LAMBDA_FUNCTION else str(payload["action"])  # a bare function ARN: Invoke
        with self.spans.call(payload, f"{service}.{action}", {
                "rpc.system": "aws-api", "rpc.service": service, "rpc.method": action,
                "cloud.region": payload["execution"].split(":")[3]}) as traced:
            outcome = await self._perform_traced(payload, traced)
            if traced is not None:
                traced.ended(outcome)
            return outcome

    async def _perform_traced(self, payload: dict[str, Any], traced: CallTrace | None
                              ) -> AttemptSucceeded | AttemptFailed:
        kind, given = payload["kind"], payload["input"]
        if kind == "apigateway":
            return await api_gateway.invoke(given, self._credentials(payload))
        if _kubernetes(payload):
            run = kubernetes.call if payload["action"] == "call" else kubernetes.run_job
            return await run(given, _region(payload), self._credentials(payload))
        url = self.functions.url(_function_name(payload))
        if url is None:
            return await self.clients.run(self._call, payload, None if traced is None else traced.xray_header)
        headers = [] if traced is None else [("X-Amzn-Trace-Id", traced.xray_header),
                                             ("traceparent", traced.traceparent)]
        if kind == LAMBDA_FUNCTION:
            return await self.functions.invoke(url, dumps(given).encode(), style=FunctionStyle.PAYLOAD,
                                               headers=headers)
        payload_value = given.get("Payload", {})
        sdk = kind == "aws-sdk:lambda"  # the API's Payload is the bytes themselves; lambda:invoke's is JSON
        body = payload_value.encode() if sdk and isinstance(payload_value, str) else dumps(payload_value).encode()
        return await self.functions.invoke(url, body, invocation_type=given.get("InvocationType", "RequestResponse"),
                                           qualifier=given.get("Qualifier"),
                                           style=FunctionStyle.SDK if sdk else FunctionStyle.TASK, headers=headers)

    def _pattern_outcome(self, payload: dict[str, Any], outcome: AttemptSucceeded | AttemptFailed) -> Outcome:
        """A callback or .sync task's call answered: the attempt is submitted (with the job to poll), or fails when
        the answer shows the work never started."""
        pattern = payload["pattern"]
        if not isinstance(outcome, AttemptSucceeded) or pattern == "":
            return outcome
        output = loads(outcome.output)
        if payload["kind"] == "ecs" and isinstance(output, dict) and output.get("Failures"):
            return AttemptFailed(ECS_FAILURES, outcome.output)  # as AWS fails an ECS job or callback task
        if pattern == "waitForTaskToken":
            return AttemptSubmitted(output)
        handle = (kubernetes.handle(payload["input"], output) if _kubernetes(payload)
                  else jobs.handle(payload["kind"], payload["action"], payload["input"], output))
        if handle is None:
            return AttemptFailed(calls.TASK_FAILED, f"The call started no job: {outcome.output}")
        role = self._role(payload)
        if role:
            handle["RoleArn"] = role  # its polls and its stop are made as the role that started it
        return AttemptSubmitted(output, handle)

    def _credentials(self, payload: dict[str, Any]) -> CredentialsFor:
        """The credentials a request signed here is signed with (API Gateway's, a cluster's token), when asked: a
        job's polls and stop as the role that started it."""
        role = (payload.get("job") or {}).get("RoleArn") or self._role(payload)
        return lambda: self.clients.run(self.clients.credentials, _region(payload), role)

    def _role(self, payload: dict[str, Any]) -> str | None:
        return payload.get("role") or (payload.get("machine_role") if self.assume_machine_role else None) or None

    def _job_call(self, payload: dict[str, Any], operation: Callable[..., T]) -> T:
        """On a pool thread: poll or stop the job of a .sync task."""
        handle = payload["job"]
        spec = jobs.JOBS[(payload["kind"], payload["action"])]
        region, account = payload["execution"].split(":")[3:5]
        client = self.clients.client(spec.service, region, handle.get("RoleArn"), account=account)
        return operation(payload["kind"], payload["action"], handle, client, payload.get("poll", 0))

    def _call(self, payload: dict[str, Any], trace_header: str | None) -> AttemptSucceeded | AttemptFailed:
        """On a pool thread: plan the call, find its client (assuming its role), make it (with X-Ray's
        ``trace_header``, when traced)."""
        try:
            call = calls.plan(payload)
        except shapes.ParameterError as error:
            return AttemptFailed(errors.RUNTIME, str(error))
        role = self._role(payload)
        try:
            region, account = payload["execution"].split(":")[3:5]
            client = self.clients.client(call.service, region, role, call.timeout_s, account)
        except (ClientError, BotoCoreError) as error:
            return AttemptFailed(calls.TASK_FAILED, f"Could not assume the role {role}: {error}")
        def client_for(service: str) -> Any:  # another service the call needs (Bedrock's S3 input and output)
            return self.clients.client(service, region, role, call.timeout_s, account)
        if trace_header is None:
            return calls.perform(call, client, client_for)
        with self.clients.trace_header(trace_header):
            return calls.perform(call, client, client_for)


def _region(payload: dict[str, Any]) -> str:
    return payload["execution"].split(":")[3]


def _kubernetes(payload: dict[str, Any]) -> bool:
    """Whether the Task calls a cluster's Kubernetes API (eks:call, eks:runJob) rather than an AWS API."""
    return payload["kind"] == "eks" and payload["action"] in ("call", "runJob")


def _function_name(payload: dict[str, Any]) -> Any:
    """The Lambda function a Task invokes, if it invokes one."""
    kind, given = payload["kind"], payload["input"]
    if kind == LAMBDA_FUNCTION:
        return payload["action"]
    if kind in ("lambda", "aws-sdk:lambda") and payload["action"] == "invoke" and isinstance(given, dict):
        return given.get("FunctionName")
    return None
