"""botocore clients for everything statewright calls on AWS (Task integrations, log delivery, events), found the
way every AWS tool finds them, and the threads the calls run on.

Endpoints and credentials come from botocore's own configuration chain: ``AWS_ENDPOINT_URL`` and
``AWS_ENDPOINT_URL_<SERVICE>`` (or ``endpoint_url`` in a profile), ``AWS_PROFILE``, the credentials chain. Step
Functions itself (``aws-sdk:sfn:*``) is this server unless ``AWS_ENDPOINT_URL_SFN`` names another: a workflow's
SendTaskSuccess, StartExecution or DescribeExecution reaches the statewright that runs it, not a second, empty Step
Functions at ``AWS_ENDPOINT_URL`` (which a user points at an emulator of the other services). The
region is the caller's (an execution's ARN names it). A role to act as (a Task's ``Credentials.RoleArn``, or the
state machine's role when ``--assume-machine-role`` is on) is assumed through STS at the configured endpoint, and its
credentials are kept until five minutes before they expire.

botocore is synchronous: each call runs on a thread of this pool, off the event loop and off the engine thread. At
most ``Limits.aws_calls_per_service_max`` calls to one service run at once; a caller waits for a slot (``slot``)
before it records its attempt as started, so the wait is not part of the attempt. botocore never retries a call
here (``total_max_attempts`` 1): a call that may have reached the service is not repeated behind the workflow's
back; the state's Retry decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import botocore.session
from botocore.client import BaseClient
from botocore.config import Config
from botocore.credentials import Credentials

from ...engine.limits import Limits

T = TypeVar("T")

CONNECT_TIMEOUT_S = 10.0
ROLE_SESSION_S = 3600  # how long an assumed role's credentials are asked for
ROLE_REFRESH_MARGIN_S = 300.0  # they are assumed again this long before they expire


CredentialsFor = Callable[[], Awaitable[Credentials | None]]  # the credentials a request is signed with, when asked


class AwsClients:
    """botocore clients by (service, region, role, read timeout); shared by every integration of one server."""

    def __init__(self, limits: Limits | None = None, session: botocore.session.Session | None = None,
                 own_endpoint: str | None = None,
                 own_keys: Callable[[str], dict[str, str] | None] | None = None) -> None:
        """``own_endpoint``: this server's API, which Step Functions calls reach (None: as botocore finds it);
        ``own_keys``: the credentials an account's workflows sign those calls with (--auth sigv4; None: any)."""
        limits = limits or Limits()
        self._session = session or botocore.session.Session()
        self._own_endpoint = own_endpoint
        self._own_keys = own_keys
        self._per_service = limits.aws_calls_per_service_max
        self._threads = ThreadPoolExecutor(limits.aws_calls_concurrent_max, thread_name_prefix="statewright-aws")
        self._lock = threading.Lock()  # botocore sessions are not thread-safe; clients are
        self._clients: dict[tuple[str, str, str | None, float, str | None], BaseClient] = {}
        self._roles: dict[tuple[str, str], tuple[dict[str, str], float]] = {}  # (role, region) -> keys, refresh at
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._trace = threading.local()  # the X-Ray header of the call this pool thread makes (trace_header)

    def client(self, service: str, region: str, role_arn: str | None = None, read_timeout_s: float = 60.0,
               account: str | None = None) -> BaseClient:
        """The client for ``service`` (botocore's name) in ``region``, acting as ``role_arn`` when given, or, for
        this server's own API, as ``account`` (the calling execution's). Blocks (an STS call) when the role's
        credentials are not at hand: call it on a pool thread."""
        if self._calls_own(service) and self._own_keys is not None and account is not None:
            keys = self._own_keys(account) or {}
        else:
            keys = self._role_keys(role_arn, region) if role_arn else {}
        key = (service, region, role_arn, read_timeout_s, keys.get("aws_access_key_id"))
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                config = Config(retries={"total_max_attempts": 1}, connect_timeout=CONNECT_TIMEOUT_S,
                                read_timeout=read_timeout_s, max_pool_connections=self._per_service,
                                user_agent_extra="statewright")
                client = self._clients[key] = self._session.create_client(service, region_name=region, config=config,
                                                                          **keys, **self._own(service, keys))
                client.meta.events.register("before-call", self._traced)
            return client

    def credentials(self, region: str, role_arn: str | None = None) -> Credentials | None:
        """The credentials a request signed by hand is signed with (API Gateway's): ``role_arn``'s, else the
        server's own (None: it has none). Blocks as ``client`` does."""
        if role_arn:
            keys = self._role_keys(role_arn, region)
            return Credentials(keys["aws_access_key_id"], keys["aws_secret_access_key"], keys["aws_session_token"])
        found = self._session.get_credentials()
        if found is None:
            return None
        frozen = found.get_frozen_credentials()
        return Credentials(frozen.access_key, frozen.secret_key, frozen.token)

    def _own(self, service: str, keys: dict[str, str]) -> dict[str, str]:
        """For Step Functions: this server's endpoint, unless AWS_ENDPOINT_URL_SFN names another (and placeholder
        credentials when none are configured: this server checks none by default)."""
        if not self._calls_own(service):
            return {}
        placeholders = {} if keys or self._session.get_credentials() else {
            "aws_access_key_id": "statewright", "aws_secret_access_key": "statewright"}
        return {"endpoint_url": self._own_endpoint, **placeholders}

    def _calls_own(self, service: str) -> bool:
        return service == "stepfunctions" and self._own_endpoint is not None and not os.environ.get(
            "AWS_ENDPOINT_URL_SFN")

    def _role_keys(self, role_arn: str, region: str) -> dict[str, str]:
        cached = self._roles.get((role_arn, region))
        if cached is not None and time.time() < cached[1]:
            return cached[0]
        answer = self.client("sts", region).assume_role(RoleArn=role_arn, DurationSeconds=ROLE_SESSION_S,
                                                        RoleSessionName=f"statewright-{uuid.uuid4().hex[:16]}")
        credentials = answer["Credentials"]
        keys = {"aws_access_key_id": credentials["AccessKeyId"],
                "aws_secret_access_key": credentials["SecretAccessKey"],
                "aws_session_token": credentials["SessionToken"]}
        with self._lock:  # the clients made with the role's earlier keys are done with
            for stale in [key for key in self._clients if key[2] == role_arn and key[1] == region]:
                del self._clients[stale]
        refresh_at = min(credentials["Expiration"].timestamp(), time.time() + ROLE_SESSION_S) - ROLE_REFRESH_MARGIN_S
        self._roles[(role_arn, region)] = (keys, max(refresh_at, time.time() + 1))
        return keys

    @contextlib.contextmanager
    def trace_header(self, header: str | None) -> Iterator[None]:
        """On a pool thread: the calls made inside send X-Ray's ``X-Amzn-Trace-Id: header`` (None: none)."""
        self._trace.header = header
        try:
            yield
        finally:
            self._trace.header = None

    def _traced(self, params: dict[str, Any], **_: Any) -> None:
        header = getattr(self._trace, "header", None)
        if header is not None:
            params["headers"]["X-Amzn-Trace-Id"] = header

    @contextlib.asynccontextmanager
    async def slot(self, service: str) -> AsyncIterator[None]:
        """Hold one of ``service``'s call slots (callers wait in arrival order when all are taken)."""
        slots = self._slots.get(service)
        if slots is None:
            slots = self._slots[service] = asyncio.Semaphore(self._per_service)
        async with slots:
            yield

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` (botocore calls) on a pool thread."""
        return await asyncio.get_running_loop().run_in_executor(self._threads, function, *args)

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
