"""The ASGI application: AWS JSON 1.0 over HTTP (``X-Amz-Target: AWSStepFunctions.<Operation>``).

Every request is parsed, checked against the service model, then handed to its operation's handler. Whatever
goes wrong is answered in AWS's error shape: 4xx for the caller's mistakes, never a 500 for bad input.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson

from ..cluster import channel, peers
from ..console import Console
from ..console.pages import send_json
from ..engine.commands import EngineUnavailable, InboxFull
from ..metrics import CONTENT_TYPE
from ..store.base import StoreUnavailable
from . import (  # noqa: F401  (modules register their handlers)
    activities,
    aliases,
    clock,
    executions,
    map_runs,
    state_machines,
    test_state,
    versions,
)
from .arns import Scope
from .auth import Door, OpenDoor, check_owned
from .errors import THROTTLING, AwsError, throttled
from .executions import TRACE_HTTP_HEADER
from .model import operation_names, validate_request
from .quotas import TAKEN_BY_HANDLER
from .service import HANDLERS, Service

log = logging.getLogger("statewright.api")

BODY_BYTES_MAX = 2 * 1024 * 1024  # the largest legal request (a 1 MiB definition) fits with room to spare
DRAIN_BODY_BYTES = 64 * 1024 * 1024  # an oversized body is read (and dropped) up to this, so the client hears 413
_TARGET_PREFIX = "AWSStepFunctions."
_LONG_POLLS = frozenset({"GetActivityTask"})
_STARTS = frozenset({"StartExecution", "StartSyncExecution"})
_JSON_HEADERS = [(b"content-type", b"application/x-amz-json-1.0")]
# A ThrottlingException is answered after this pause: a caller that retries at once without backing off (a runaway
# loop) sends a call per pause on each connection, not as many as the server can refuse, and a refusal it holds
# costs nothing while it waits. Well-behaved SDKs back off longer than this before their retry anyway.
THROTTLED_PAUSE_S = 0.1


class App:
    def __init__(self, service: Service, default_region: str = "us-east-1",
                 virtual_clock: clock.VirtualClock | None = None, door: Door | None = None) -> None:
        """``virtual_clock``: --clock virtual, the engine's clock, which Statewright.AdvanceClock moves; ``door``:
        who may call (auth.py; by default --auth open's, any caller in the service's one account)."""
        self.service = service
        self.door = door or OpenDoor(service.account_id, default_region)
        self.virtual_clock = virtual_clock
        self.known_operations = operation_names()
        self._request_ids = _request_ids()
        self.metrics = service.engine.metrics.api(self.known_operations)
        service.engine.metrics.watch_activity_backlog(service.matcher.backlog_size)
        self.console = Console(service.console)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, self.service)
            return
        if scope["type"] == "websocket":  # only other nodes open one: their channel to this node
            if scope["path"] == channel.PATH:
                forwarder = self.service.forwarder
                await peers.serve_channel(scope, receive, send, None if forwarder is None else forwarder.secret,
                                          self.service)
            else:
                await send({"type": "websocket.close"})
            return
        if scope["type"] != "http":
            return
        if self.console.serves(scope):  # a browser's GET: the web console (console/)
            await self._console(scope, receive, send)
            return
        if scope["method"] == "GET" and scope["path"] == "/metrics":
            await _send_metrics(self.metrics.exposition(), send)
            return
        if scope["path"] == peers.MEMBERSHIP_PATH:
            try:
                status, answer = 200, await self._membership_changed(scope, await _read_body(receive))
            except AwsError as error:  # not a cluster node, not signed with its secret, a body over the limit
                status, answer = error.status, orjson.dumps(error.body())
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": answer})
            return
        started = time.perf_counter()
        request_id = next(self._request_ids)
        caller: list[Scope] = []  # who the door admitted the request as
        try:
            status, body = 200, await self._handle(scope, receive, caller)
        except _ClientGone:
            return
        except AwsError as error:
            status, body = error.status, error.body()
            if error.code == THROTTLING:  # over its rate: the caller's next call on this connection waits too
                await asyncio.sleep(THROTTLED_PAUSE_S)
        except (EngineUnavailable, StoreUnavailable) as exc:  # the shard moved, the database is away: retry
            status, body = 503, {"__type": "ServiceUnavailable", "message": str(exc)}
        except Exception:
            log.exception("request %s failed", request_id)
            status, body = 500, {"__type": "InternalFailure", "message": f"Internal error; request id {request_id}"}
        answer = orjson.dumps(body)
        await send({"type": "http.response.start", "status": status,
                    "headers": [*_JSON_HEADERS, (b"content-length", b"%d" % len(answer)),
                                (b"x-amzn-requestid", request_id.encode())]})
        await send({"type": "http.response.body", "body": answer})
        self.metrics.request_done(scope, status, body, time.perf_counter() - started,
                                  (caller[0].account, caller[0].region) if caller else ("", ""))

    async def _console(self, scope: dict, receive: Any, send: Any) -> None:
        """The console's page is anyone's; its views and stream are admitted as an API call is (the page signs
        them under --auth sigv4) and show the caller's account, in its region, only."""
        place = None
        if self.console.reads_data(scope):
            try:
                where = self._admit(scope, b"")
            except AwsError as error:
                await send_json(send, error.status, error.body())
                return
            place = None if where.caller is None else (where.region, where.account)
        await self.console(scope, receive, send, place)

    async def _handle(self, scope: dict, receive: Any, caller: list[Scope]) -> dict:
        if scope["method"] != "POST":
            raise AwsError("UnknownOperationException", "Send AWS JSON 1.0 requests as HTTP POST to /", 404)
        headers = dict(scope["headers"])
        body = await _read_body(receive)
        # The caller is known first, as AWS knows it: nothing about the request is told to an unknown one
        where = self._admit(scope, body)
        caller.append(where)
        target = headers.get(b"x-amz-target", b"").decode("latin-1")
        if target.startswith(clock.TARGET_PREFIX):
            return await self._clock(target.removeprefix(clock.TARGET_PREFIX), body)
        operation = target.removeprefix(_TARGET_PREFIX)
        if not target.startswith(_TARGET_PREFIX) or operation not in self.known_operations:
            raise AwsError("UnknownOperationException", f"Unknown operation: '{target or '(no X-Amz-Target header)'}'")
        function = HANDLERS.get(operation)
        if function is None:
            raise AwsError("UnknownOperationException", f"statewright does not implement {operation} yet")
        if operation not in TAKEN_BY_HANDLER:  # the caller's bucket, before the request is even parsed
            self.service.rates.admit(where.account, where.region, operation)
        try:
            params = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise AwsError("SerializationException", f"The request body is not valid JSON: {exc}") from None
        params = validate_request(operation, params)
        answered = check_owned(operation, params, where)
        if answered is not None:
            return answered
        if operation in _STARTS and b"x-amzn-trace-id" in headers:  # the X-Ray header an instrumented caller sends
            params[TRACE_HTTP_HEADER] = headers[b"x-amzn-trace-id"].decode("latin-1")
        try:
            result = function(self.service, params, where)
            if inspect.isawaitable(result):
                result = await (_unless_disconnected(result, receive) if operation in _LONG_POLLS else result)
        except InboxFull:  # the engine holds all the commands it may: the caller backs off and retries
            raise throttled() from None
        return result

    def _admit(self, scope: dict, body: bytes) -> Scope:
        return self.door.admit(scope["method"], scope.get("raw_path") or scope["path"].encode(),
                               scope.get("query_string", b""), scope["headers"], body)

    async def _membership_changed(self, scope: dict, body: bytes) -> bytes:
        """Another node joined or left (cluster/peers.py): step this node's membership now."""
        forwarder = self.service.forwarder
        if forwarder is None or scope["method"] != "POST":
            raise AwsError("UnknownOperationException", f"{scope['method']} {scope['path']} is not served here", 404)
        refused = peers.refusal(forwarder.secret, scope, body)
        if refused is not None:
            raise AwsError("AccessDeniedException", refused, 403)
        self.service.membership_changed()
        return b"{}"

    async def _clock(self, operation: str, body: bytes) -> dict:
        """statewright's own operations on the virtual clock (see api/clock.py)."""
        if operation not in clock.OPERATIONS:
            raise AwsError("UnknownOperationException", f"Unknown operation: '{clock.TARGET_PREFIX}{operation}'")
        virtual = self.virtual_clock
        if virtual is None:
            raise AwsError("UnknownOperationException", f"{clock.TARGET_PREFIX}{operation} needs a server started "
                                                        "with --clock virtual")
        try:
            params = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise AwsError("SerializationException", f"The request body is not valid JSON: {exc}") from None
        if not isinstance(params, dict):
            raise AwsError("SerializationException", "The request body must be a JSON object")
        if operation == "AdvanceClock":
            await clock.advance_through(self.service, virtual, clock.advance_by(params))
        return clock.reading(virtual)


def _request_ids() -> Iterator[str]:
    """Request ids in UUID form: a random prefix per process and a counter (uuid4 per request costs a syscall)."""
    prefix = uuid.uuid4().hex[:20]
    for n in itertools.count():
        yield f"{prefix[:8]}-{prefix[8:12]}-{prefix[12:16]}-{prefix[16:20]}-{n:012x}"


async def _unless_disconnected(work: Any, receive: Any) -> Any:
    """Await a handler, cancelling it if the client goes away first (a long poll must not outlive its worker)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait([task, watcher], return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise _ClientGone
    return task.result()


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _ClientGone(Exception):
    """The client closed the connection before its answer was ready; nothing is sent."""


async def _read_body(receive: Any) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= BODY_BYTES_MAX:
            chunks.append(chunk)
        elif size > DRAIN_BODY_BYTES:
            break  # past this, the answer goes out while the client still sends (its connection may reset)
        if not message.get("more_body"):
            break
    if size > BODY_BYTES_MAX:
        raise AwsError("ValidationException", f"The request body is larger than {BODY_BYTES_MAX} bytes", 413)
    return b"".join(chunks)


async def _send_metrics(text: bytes, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", CONTENT_TYPE.encode())]})
    await send({"type": "http.response.body", "body": text})


async def _lifespan(receive: Any, send: Any, service: Service) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            service.attach(asyncio.get_running_loop())
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            # A cluster node hands its shards over first (the engine drains and lets go), while it still runs.
            await asyncio.get_running_loop().run_in_executor(None, service.leave)
            service.engine.stop()  # here, not after the server returns: uvicorn re-raises SIGTERM once it has shut down
            await service.detach()
            await send({"type": "lifespan.shutdown.complete"})
            return
