"""Lambda functions served as local web services (``statewright serve --functions FILE``), for development
without a Lambda service.

The file is a JSON object mapping a function's name or ARN to an http(s) URL. A Task that invokes a mapped function
(``lambda:invoke`` or the function's ARN as its Resource) POSTs the payload there as JSON, and the reply is the
function's answer: a 2xx reply's JSON body is its result (a body that is not JSON is Lambda's
``Runtime.MarshalError``, as its runtime answers a result it cannot serialize); a reply whose body is a JSON object
carrying ``errorType`` and ``errorMessage`` is a function error, named by errorType (as Lambda reports a function
that raised); any other reply is a function error ``Lambda.Unknown``; no reply at all is
``Lambda.SdkClientException``. The result has the shape of Lambda's own (``StatusCode`` 200, ``ExecutedVersion`` the
numeric Qualifier or ``$LATEST``, the reply's headers in SdkHttpMetadata); ``InvocationType`` Event answers 202
without waiting for the function, DryRun 204 without calling it. ``aws-sdk:lambda:invoke`` gets the API's answer as
it is (a function error is its ``FunctionError`` field, not a failure). A function the file does not map is invoked
through the Lambda endpoint botocore is configured for.
"""

from __future__ import annotations

import asyncio
import enum
import os
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import httptools

from ...asl.jsonio import dumps, loads
from ...decider.outcomes import AttemptFailed, AttemptSucceeded
from ..http import RESPONSE_BYTES_MAX, SOCKET, Failure, Response
from .calls import LAMBDA_CLIENT, LAMBDA_UNKNOWN, lambda_outcome

Outcome = AttemptSucceeded | AttemptFailed


class InvalidFunctions(ValueError):
    """The --functions file cannot be used: the message says why."""


class FunctionStyle(enum.Enum):
    """How the Task that invokes a function reads its answer."""

    PAYLOAD = "payload"  # a function's ARN as the Resource: the result is the payload itself
    TASK = "task"  # lambda:invoke: Lambda's answer with Payload parsed and SdkHttpMetadata; a function error fails
    SDK = "sdk"  # aws-sdk:lambda:invoke: the API's answer as it is (Payload as text, FunctionError in it)


class LocalFunctions:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._urls: dict[str, str] = {}
        self._client = _LocalClient()
        if path is None:
            return
        try:
            with open(path, "rb") as stream:
                document = loads(stream.read())
        except (OSError, ValueError) as error:
            raise InvalidFunctions(f"cannot read the functions file {path}: {error}") from None
        if not isinstance(document, dict):
            raise InvalidFunctions(f"the functions file {path} must hold a JSON object: function name or ARN -> URL")
        for name, url in document.items():
            parts = urlsplit(url) if isinstance(url, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                raise InvalidFunctions(f"the functions file {path}: the URL of {name!r} must be an http or https URL")
            self._urls[name] = url
            self._urls.setdefault(_bare_name(name), url)  # an ARN's function answers to its name too

    def __len__(self) -> int:
        return len(self._urls)

    async def _post(self, url: str, payload: bytes, headers: str = "") -> Response:
        return await self._client.post(url, payload, headers)

    def url(self, function_name: Any) -> str | None:
        """The URL serving this FunctionName (a name, ``name:qualifier``, or a full or partial ARN), if mapped."""
        if not isinstance(function_name, str) or not self._urls:
            return None
        return self._urls.get(function_name) or self._urls.get(_bare_name(function_name))

    async def invoke(self, url: str, payload: bytes, *, style: FunctionStyle, invocation_type: str = "RequestResponse",
                     qualifier: str | None = None, headers: list[tuple[str, str]] = ()) -> Outcome:
        """Invoke the function at ``url`` as Lambda would (module docstring): DryRun calls nothing (204), Event
        hands the payload over without waiting for the function's answer (202). ``headers``: sent along (a traced
        execution's trace context)."""
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
        version = qualifier if isinstance(qualifier, str) and qualifier.isdigit() else "$LATEST"
        if invocation_type in ("Event", "DryRun"):
            if invocation_type == "Event":
                task = asyncio.ensure_future(self._post(url, payload, extra))
                _BACKGROUND.add(task)
                task.add_done_callback(_BACKGROUND.discard)
            status = 202 if invocation_type == "Event" else 204
            return _answer(style, None, "", {"StatusCode": status}, _metadata(status, []))
        try:
            reply = await self._post(url, payload, extra)
        except Failure as failure:
            return AttemptFailed(LAMBDA_CLIENT, f"The function at {url} could not be reached: {failure.cause}")
        text = reply.body.decode("utf-8", errors="replace") or "null"
        request_id = str(uuid.uuid4())
        try:
            answer = loads(text)
        except ValueError as problem:
            answer, unreadable = None, problem
        else:
            unreadable = None
        if unreadable is not None and 200 <= reply.status < 300:
            # what Lambda's runtime answers for a result it cannot serialize as JSON
            text = dumps({"errorMessage": f"Unable to marshal response: {unreadable}",
                          "errorType": "Runtime.MarshalError", "requestId": request_id, "stackTrace": []})
            error: str | None = "Unhandled"
        elif isinstance(answer, dict) and "errorType" in answer and "errorMessage" in answer:
            error = "Unhandled"
        elif not 200 <= reply.status < 300:
            if style is not FunctionStyle.SDK:
                return AttemptFailed(LAMBDA_UNKNOWN, f"The function at {url} answered {reply.status} {reply.reason}: "
                                                     f"{text[:1000]}")
            error = "Unhandled"
        else:
            error = None
        return _answer(style, error, text, {"ExecutedVersion": version, "StatusCode": 200},
                       _metadata(200, reply.headers, request_id))


_BACKGROUND: set[asyncio.Task] = set()  # Event invocations under way (held so they are not collected)


def _answer(style: FunctionStyle, error: str | None, text: str, fields: dict[str, Any], metadata: dict) -> Outcome:
    if style is FunctionStyle.SDK:  # the API's own answer: a function error is data, not a failure
        return AttemptSucceeded(dumps({**fields, "Payload": text, **({"FunctionError": error} if error else {})}))
    return lambda_outcome(error, text, fields, metadata, style is FunctionStyle.PAYLOAD)


def _metadata(status: int, headers: list[tuple[str, str]], request_id: str | None = None) -> dict[str, Any]:
    return {"HTTPHeaders": {name.lower(): value for name, value in headers}, "HTTPStatusCode": status,
            "RequestId": request_id or str(uuid.uuid4())}


def _bare_name(function_name: str) -> str:
    """``arn:aws:lambda:r:a:function:name:qualifier`` (or ``a:function:name``, ``name:qualifier``) -> ``name``."""
    return function_name.split(":function:", 1)[-1].split(":", 1)[0]


class _LocalClient:
    """POSTs to the local function servers, the hot path of a Lambda chain: the request written out directly (it
    carries only our own headers) and the reply parsed by httptools (the C parser uvicorn serves with, about ten
    times cheaper than h11 in Python), on connections kept for the next call. A kept connection is reused only
    within IDLE_S of its last answer, well inside servers' keep-alive times (uvicorn's is 5 s), and a request that
    fails on one is not sent again: it may have been received (the caller's Retry decides)."""

    IDLE_S = 1.0
    IDLE_PER_HOST = 64

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]]] = {}

    async def post(self, url: str, payload: bytes, headers: str = "") -> Response:
        """POST ``payload`` to ``url``; ``headers``: more header lines, each ending in CRLF."""
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection = self._take((host, port))
        if connection is None:
            try:
                connection = await asyncio.open_connection(host, port, ssl=parts.scheme == "https" or None)
            except OSError as error:
                raise Failure(SOCKET, f"Could not connect to {parts.netloc}: {error}") from None
        reader, writer = connection
        reply = _Reply()
        parser = httptools.HttpResponseParser(reply)
        try:
            writer.write(f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                         f"{headers}Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
            while not reply.complete:
                data = await reader.read(65_536)
                if not data:
                    raise Failure(SOCKET, f"{parts.netloc} closed the connection before answering")
                parser.feed_data(data)
                if reply.size > RESPONSE_BYTES_MAX:
                    raise Failure(SOCKET, f"The answer of {parts.netloc} exceeds {RESPONSE_BYTES_MAX} bytes")
        except (OSError, httptools.HttpParserError) as error:
            writer.close()
            raise Failure(SOCKET, f"The connection to {parts.netloc} failed: {error}") from None
        except BaseException:
            writer.close()
            raise
        if parser.should_keep_alive() and len(self._idle.setdefault((host, port), [])) < self.IDLE_PER_HOST:
            self._idle[(host, port)].append((reader, writer, time.monotonic()))
        else:
            writer.close()
        return Response(parser.get_status_code(), reply.reason, reply.headers, b"".join(reply.body))

    def _take(self, key: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        idle, now = self._idle.get(key, []), time.monotonic()
        while idle:
            reader, writer, since = idle.pop()
            if now - since < self.IDLE_S and not writer.is_closing() and not reader.at_eof():
                return reader, writer
            writer.close()
        return None


class _Reply:
    """httptools' callbacks for one response."""

    def __init__(self) -> None:
        self.reason = ""
        self.headers: list[tuple[str, str]] = []
        self.body: list[bytes] = []
        self.size = 0
        self.complete = False

    def on_status(self, status: bytes) -> None:
        self.reason += status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.size += len(body)

    def on_message_complete(self) -> None:
        self.complete = True
