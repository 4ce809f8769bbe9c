"""The HTTP Task (``arn:aws:states:::http:invoke``): one call to an HTTP(S) API, built the way AWS documents it in
"Call HTTPS APIs in Step Functions workflows".

``invoke(parameters, connections, timeout_s=60)`` takes the Task's evaluated Parameters and returns
``AttemptSucceeded(result_json_text)`` or ``AttemptFailed(error, cause)``. Remote and network problems are outcomes,
never exceptions; only a bug (or cancellation by the caller) raises. The whole call, an OAuth token fetch included,
must finish within ``timeout_s``; the engine enforces its own 60 s attempt deadline on top (recorded as
States.Timeout).

The request: ApiEndpoint (http or https), Method, Headers, QueryParameters, RequestBody (JSON, or form data under
``Transform.RequestBodyEncoding: URL_ENCODED`` with ``RequestEncodingOptions.ArrayFormat`` INDICES (default), REPEAT,
COMMAS or BRACKETS), and the EventBridge connection named by ``Authentication.ConnectionArn`` or
``InvocationConfig.ConnectionArn``. The connection's authorization and its InvocationHttpParameters are merged in;
on a duplicate header, query parameter or body field the connection wins. Step Functions' own headers are added:
``User-Agent: Amazon|StepFunctions|HttpInvoke|<region>`` (the region from the connection ARN) and
``Range: bytes=0-262144``. Redirects are not followed: a 3xx is a failure like any other non-2xx status.

Outcomes:
  2xx           succeeded: {"Headers": {name: [values]}, "ResponseBody": parsed JSON for a JSON content type,
                 else the text, "StatusCode": n, "StatusText": reason}
  other status  failed: "States.Http.StatusCode.<n>", the status text
  no answer     failed: "States.Http.Socket", what went wrong: refused, unresolvable, TLS, reset, timeout
  bad request   failed: "States.Runtime", why: a forbidden header, a string body next to connection body
                parameters, a binary or undecodable response, a malformed field
  connection    failed: "Events.ConnectionResource.ResourceNotFound" | "...InvalidConnectionState", why
  too large     failed: "States.DataLimitExceeded", why: a response body over 262144 bytes

``Connections`` stands in for EventBridge connections: a JSON file mapping each ConnectionArn to
``{"AuthorizationType": "API_KEY" | "BASIC" | "OAUTH_CLIENT_CREDENTIALS", "AuthParameters": {...}}`` in the shape
of EventBridge's CreateConnection. OAuth client-credentials tokens are fetched for real and kept until 60 s before
they expire, or until the API answers 401 or 407 (then the next attempt fetches a new one, as EventBridge does).

Sources: the request fields, the forbidden headers, the merge rules, the array formats, the service headers, the
binary-response rule and the error names are AWS's documentation. A parsed JSON ResponseBody (deployed machines
read $.ResponseBody.field) and the status text as the cause of a non-2xx failure come from public state machines and
a report of real executions. Inferred, not verified: header values as lists, States.Http.Socket for refused,
unresolvable or TLS failures (AWS documents it for the timeout), ResourceNotFound for an unknown connection, the
token request (client id and secret in a Basic header, grant_type=client_credentials added when the connection does
not set it), arrays in QueryParameters repeating their key, and every other cause text.

HTTP/1.1 is spoken with h11 over asyncio streams, one connection per call: h11 is a small, pure-Python protocol
state machine that uvicorn already depends on, so it adds nothing to install, and it lets the call stay on the event
loop where the caller's cancellation and our deadline both reach it (the standard library's clients would need a
thread per call, which neither can stop).

This module must not import statewright.api or statewright.engine: the caller wires it to dispatches.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import contextlib
import dataclasses
import functools
import json
import math
import os
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, urlsplit

import h11

from ..asl import errors
from ..asl.jsonio import dumps, loads
from ..decider.outcomes import AttemptFailed, AttemptSucceeded
from ..engine.limits import Limits
from ..store.base import Dispatch
from .dispatcher import Dispatcher
from .traces import CallSpans

SOCKET = "States.Http.Socket"
STATUS_CODE = "States.Http.StatusCode."
CONNECTION_NOT_FOUND = "Events.ConnectionResource.ResourceNotFound"
CONNECTION_STATE = "Events.ConnectionResource.InvalidConnectionState"

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD")
# Request headers a definition may not set (AWS: "the HTTP Task fails with the States.Runtime error").
FORBIDDEN_HEADERS = frozenset({
    "a-im", "accept-charset", "accept-datetime", "accept-encoding", "authorization", "cache-control", "connection",
    "content-encoding", "content-md5", "date", "expect", "forwarded", "from", "host", "http2-settings", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "max-forwards", "origin", "pragma",
    "proxy-authorization", "referer", "server", "te", "trailer", "transfer-encoding", "upgrade", "via", "warning",
})
FORBIDDEN_PREFIXES = ("x-forwarded-", "x-amz-", "x-amzn-")
SERVICE_HEADERS = frozenset({"host", "user-agent", "range", "content-length"})  # Step Functions sets these itself
AUTHORIZATION_TYPES = {"API_KEY": "ApiKeyAuthParameters", "BASIC": "BasicAuthParameters",
                       "OAUTH_CLIENT_CREDENTIALS": "OAuthParameters"}
ARRAY_FORMATS = ("INDICES", "REPEAT", "COMMAS", "BRACKETS")
BODY_ENCODINGS = ("NONE", "URL_ENCODED")
JSON_TYPE = "application/json; charset=UTF-8"
FORM_TYPE = "application/x-www-form-urlencoded"
RESPONSE_BYTES_MAX = 262_144
READ_CHUNK_BYTES = 65_536
TOKEN_REFRESH_MARGIN_S = 60.0
ATTEMPT_TIMEOUT_S = 60.0  # AWS's limit on one HTTP Task attempt (the engine enforces it as a deadline too)
# Characters left as they are when a URL's path and query go on the wire; everything else is percent-encoded.
URL_SAFE = "!#$%&'()*+,/:;=?@[]~"


async def invoke(parameters: dict, connections: Connections, *, timeout_s: float = ATTEMPT_TIMEOUT_S,
                 trace: dict | None = None, reveal_secrets: bool = False,
                 traceparent: str | None = None) -> AttemptSucceeded | AttemptFailed:
    """Make the call the HTTP Task's evaluated Parameters describe; see the module docstring for the outcomes.
    ``trace`` (TestState at inspection level TRACE) receives the request and the response as TestState shows them;
    what the connection adds (its authorization, its invocation parameters) only with ``reveal_secrets``.
    ``traceparent``: the W3C trace context sent along (a traced execution's), unless the request sets its own."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _invoke(parameters, connections, trace, reveal_secrets, traceparent)
    except TimeoutError:
        return AttemptFailed(SOCKET, f"The HTTP request did not complete within {timeout_s:g} seconds")
    except Failure as failure:
        return AttemptFailed(failure.error, failure.cause)


class Connections:
    """EventBridge connections by ARN, read once from a JSON file; also the cache of OAuth access tokens.

    ``clock`` (seconds, monotonic) decides when a cached token has expired; tests pass their own.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: dict[str, dict] = {}
        if path is not None:
            with open(path, encoding="utf-8") as file:
                self._entries = _checked_connections(json.load(file))
        self._clock = clock
        self._tokens: dict[str, tuple[str, float]] = {}  # arn -> (access token, expires at on self._clock)
        self._fetching: dict[str, asyncio.Lock] = {}

    def get(self, arn: str) -> dict | None:
        return self._entries.get(arn)

    async def authorization(self, arn: str) -> tuple[str, str]:
        """The header that authorizes a call through this connection (fetching an OAuth token when needed)."""
        entry = self._entries[arn]
        kind, auth = entry["AuthorizationType"], entry["AuthParameters"]
        if kind == "API_KEY":
            key = auth["ApiKeyAuthParameters"]
            return key["ApiKeyName"], key["ApiKeyValue"]
        if kind == "BASIC":
            basic = auth["BasicAuthParameters"]
            return "Authorization", _basic(basic["Username"], basic["Password"])
        return "Authorization", f"Bearer {await self._token(arn, auth['OAuthParameters'])}"

    def forget_token(self, arn: str) -> None:
        self._tokens.pop(arn, None)

    async def _token(self, arn: str, oauth: dict) -> str:
        # One fetch at a time per connection: calls that arrive meanwhile wait and share its token.
        async with self._fetching.setdefault(arn, asyncio.Lock()):
            cached = self._tokens.get(arn)
            if cached is not None and self._clock() < cached[1] - TOKEN_REFRESH_MARGIN_S:
                return cached[0]
            token, expires_in_s = await _fetch_token(oauth)
            self._tokens[arn] = (token, math.inf if expires_in_s is None else self._clock() + expires_in_s)
            return token


class Failure(Exception):
    def __init__(self, error: str, cause: str) -> None:
        super().__init__(error, cause)
        self.error = error
        self.cause = cause


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | None


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    tls: bool = False


async def _invoke(parameters: dict, connections: Connections, trace: dict | None = None,
                  reveal_secrets: bool = False, traceparent: str | None = None) -> AttemptSucceeded | AttemptFailed:
    if not isinstance(parameters, dict):
        raise Failure(errors.RUNTIME, "The Parameters of an HTTP Task must be an object")
    arn = _connection_arn(parameters)
    connection = connections.get(arn)
    if connection is None:
        raise Failure(CONNECTION_NOT_FOUND, f"The connection '{arn}' does not exist")
    draft = _draft(parameters, connection, _region(arn))  # every check before any token is fetched
    request = _with_header(draft, *await connections.authorization(arn))
    if traceparent is not None and not any(name.lower() == "traceparent" for name, _ in request.headers):
        request = _with_header(request, "traceparent", traceparent)
    if trace is not None:
        shown = request if reveal_secrets else _draft(parameters, {"AuthParameters": {}}, _region(arn))
        trace["request"] = _traced_request(shown)
    response = await exchange(request)
    if trace is not None:
        trace["response"] = _traced_response(response)
    if 200 <= response.status < 300:
        return AttemptSucceeded(dumps(_result(response)))
    if response.status in (401, 407):
        connections.forget_token(arn)  # the token may have been revoked: the next attempt fetches a new one
    return AttemptFailed(f"{STATUS_CODE}{response.status}", response.reason)


def _traced_request(request: Request) -> dict[str, str]:
    """TestState's inspectionData.request (inferred: the header and body texts' layout)."""
    shown = {"protocol": urlsplit(request.url).scheme, "method": request.method, "url": request.url,
             "headers": _header_text(request.headers)}
    if request.body is not None:
        shown["body"] = request.body.decode("utf-8", errors="replace")
    return shown


def _traced_response(response: Response) -> dict[str, str]:
    return {"protocol": "https" if response.tls else "http", "statusCode": str(response.status),
            "statusMessage": response.reason, "headers": _header_text(response.headers),
            "body": response.body.decode("utf-8", errors="replace")}


def _header_text(headers: list[tuple[str, str]]) -> str:
    return "\r\n".join(f"{name}: {value}" for name, value in headers)


# ---- building the request ------------------------------------------------------------------------------------


def _connection_arn(parameters: dict) -> str:
    arns = [parameters[field].get("ConnectionArn") for field in ("Authentication", "InvocationConfig")
            if isinstance(parameters.get(field), dict)]
    arns = [arn for arn in arns if arn is not None]
    if not arns:
        raise Failure(errors.RUNTIME, "The HTTP Task needs a ConnectionArn in Authentication or InvocationConfig")
    if not all(isinstance(arn, str) for arn in arns) or len(set(arns)) > 1:
        raise Failure(errors.RUNTIME, "The ConnectionArn must be one string, the same in Authentication and "
                       "InvocationConfig")
    return arns[0]


def _region(arn: str) -> str:
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 else ""


def _draft(parameters: dict, connection: dict, region: str) -> Request:
    """The request without its authorization header: a pure function of the Parameters and the connection."""
    method = parameters.get("Method")
    if method not in METHODS:
        raise Failure(errors.RUNTIME, f"The Method '{_shown(method)}' is not one of {', '.join(METHODS)}")
    endpoint = parameters.get("ApiEndpoint")
    if not isinstance(endpoint, str):
        raise Failure(errors.RUNTIME, "The ApiEndpoint field must be a URL string")
    invocation = connection["AuthParameters"].get("InvocationHttpParameters") or {}
    url = _with_query(endpoint, _query(parameters.get("QueryParameters"), invocation))
    headers = _merged_headers(_task_headers(parameters.get("Headers")),
                              _parameter_pairs(invocation, "HeaderParameters"))
    body, content_type = _body(parameters, invocation)
    if body is not None and not any(name.lower() == "content-type" for name, _ in headers):
        headers.append(("Content-Type", content_type))
    headers += [("Range", f"bytes=0-{RESPONSE_BYTES_MAX}"), ("User-Agent", f"Amazon|StepFunctions|HttpInvoke|{region}")]
    return Request(method, url, headers, body)


def _task_headers(value: Any) -> list[tuple[str, str]]:
    if value is None:
        return []
    if not isinstance(value, dict):
        raise Failure(errors.RUNTIME, "The Headers field must be an object")
    forbidden = sorted({name.lower() for name in value if _forbidden(name)})
    if forbidden:
        raise Failure(errors.RUNTIME, f"The 'Headers' field contains unsupported values: [{', '.join(forbidden)}]")
    return [(name, _header_value(name, item)) for name, item in value.items()]


def _forbidden(name: str) -> bool:
    lowered = name.lower()
    return lowered in FORBIDDEN_HEADERS or lowered.startswith(FORBIDDEN_PREFIXES)


def _header_value(name: str, value: Any) -> str:
    if isinstance(value, list) and not any(isinstance(item, dict | list) for item in value):
        return ", ".join(_text(item) for item in value)
    if isinstance(value, dict | list):
        raise Failure(errors.RUNTIME, f"The value of the header '{name}' must be a string")
    return _text(value)


def _merged_headers(task: list[tuple[str, str]], connection: dict[str, str]) -> list[tuple[str, str]]:
    overridden = {name.lower() for name in connection} | SERVICE_HEADERS
    merged = [(name, value) for name, value in task if name.lower() not in overridden]
    merged += [(name, value) for name, value in connection.items() if name.lower() not in SERVICE_HEADERS]
    return merged


def _with_header(request: Request, name: str, value: str) -> Request:
    headers = [(key, item) for key, item in request.headers if key.lower() != name.lower()]
    return Request(request.method, request.url, [(name, value), *headers], request.body)


def _query(value: Any, invocation: dict) -> str:
    """The query string; arrays repeat their key (name=a&name=b), objects nest in brackets."""
    connection = _parameter_pairs(invocation, "QueryStringParameters")
    if isinstance(value, str):  # a query string written out by the definition
        return "&".join(part for part in (value.lstrip("?"), *_form_pairs(connection, "REPEAT")) if part)
    if value is not None and not isinstance(value, dict):
        raise Failure(errors.RUNTIME, "The QueryParameters field must be an object or a string")
    return "&".join(_form_pairs({**(value or {}), **connection}, "REPEAT"))


def _with_query(endpoint: str, query: str) -> str:
    if not query:
        return endpoint
    base, _, fragment = endpoint.partition("#")
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}{query}" + (f"#{fragment}" if fragment else "")


def _body(parameters: dict, invocation: dict) -> tuple[bytes | None, str]:
    body = parameters.get("RequestBody")
    encoding, array_format = _transform(parameters.get("Transform"))
    extra = _parameter_pairs(invocation, "BodyParameters")
    if extra:
        if body is not None and not isinstance(body, dict):
            raise Failure(errors.RUNTIME, "The RequestBody is not a JSON object, so the connection's body "
                           "parameters cannot be merged into it")
        body = {**(body or {}), **extra}
    if body is None:
        return None, JSON_TYPE
    if encoding == "URL_ENCODED":
        if isinstance(body, str):
            return body.encode(), FORM_TYPE
        if not isinstance(body, dict):
            raise Failure(errors.RUNTIME, "A URL_ENCODED RequestBody must be a JSON object or a string")
        return "&".join(_form_pairs(body, array_format)).encode(), FORM_TYPE
    return (body if isinstance(body, str) else dumps(body)).encode(), JSON_TYPE


def _transform(value: Any) -> tuple[str, str]:
    """(RequestBodyEncoding, ArrayFormat), defaults NONE and INDICES."""
    if value is None:
        return "NONE", "INDICES"
    if not isinstance(value, dict) or not isinstance(value.get("RequestEncodingOptions") or {}, dict):
        raise Failure(errors.RUNTIME, "The Transform field and its RequestEncodingOptions must be objects")
    encoding = value.get("RequestBodyEncoding", "NONE")
    array_format = (value.get("RequestEncodingOptions") or {}).get("ArrayFormat", "INDICES")
    if encoding not in BODY_ENCODINGS:
        raise Failure(errors.RUNTIME, f"The RequestBodyEncoding '{_shown(encoding)}' is not NONE or URL_ENCODED")
    if array_format not in ARRAY_FORMATS:
        raise Failure(errors.RUNTIME, f"The ArrayFormat '{_shown(array_format)}' is not one of "
                       f"{', '.join(ARRAY_FORMATS)}")
    return encoding, array_format


def _form_pairs(fields: dict, array_format: str) -> Iterator[str]:
    """``name=value`` items, percent-encoded (a space is %20, brackets are %5B %5D), as AWS's example shows."""
    for name, value in fields.items():
        yield from _field_pairs(str(name), value, array_format)


def _field_pairs(name: str, value: Any, array_format: str) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _field_pairs(f"{name}[{key}]", item, array_format)
    elif isinstance(value, list):
        scalars = not any(isinstance(item, dict | list) for item in value)
        if array_format == "COMMAS" and scalars:
            if value:
                yield f"{_encoded(name)}=" + ",".join(_encoded(_text(item)) for item in value)
            return
        for index, item in enumerate(value):
            key = {"REPEAT": name, "BRACKETS": f"{name}[]"}.get(array_format, f"{name}[{index}]")
            yield from _field_pairs(key, item, array_format)
    else:
        yield f"{_encoded(name)}={_encoded(_text(value))}"


def _encoded(text: str) -> str:
    return quote(text, safe="")


def _text(value: Any) -> str:
    """A JSON scalar as it appears in a header, a query or a form: strings as they are, the rest as JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else dumps(value)


def _parameter_pairs(container: dict, field: str) -> dict[str, str]:
    """EventBridge's ``[{"Key": k, "Value": v, "IsValueSecret": b}]`` lists as a dict."""
    return {str(item["Key"]): _text(item.get("Value")) for item in container.get(field) or []}


def _basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)


# ---- OAuth client credentials ------------------------------------------------------------------------------------


async def _fetch_token(oauth: dict) -> tuple[str, float | None]:
    """Exchange the client id and secret for an access token: (token, seconds it lasts, if the answer says)."""
    try:
        response = await exchange(_token_request(oauth))
    except Failure as failure:
        raise Failure(CONNECTION_STATE, f"The OAuth token request failed: {failure.cause}") from None
    if not 200 <= response.status < 300:
        raise Failure(CONNECTION_STATE, f"The authorization endpoint answered {response.status} {response.reason}")
    try:
        answer = loads(response.body)
        token = answer["access_token"]
    except (ValueError, TypeError, KeyError):
        token = None
    if not isinstance(token, str) or not token:
        raise Failure(CONNECTION_STATE, "The authorization endpoint's answer holds no access_token")
    expires_in = answer.get("expires_in")
    try:
        expires_in_s = float(expires_in) if expires_in is not None else None
    except (TypeError, ValueError):
        expires_in_s = None
    return token, expires_in_s


def _token_request(oauth: dict) -> Request:
    client = oauth["ClientParameters"]
    extra = oauth.get("OAuthHttpParameters") or {}
    method = oauth.get("HttpMethod", "POST")
    query = _parameter_pairs(extra, "QueryStringParameters")
    body = _parameter_pairs(extra, "BodyParameters")
    if "grant_type" not in query and "grant_type" not in body:
        (query if method == "GET" else body)["grant_type"] = "client_credentials"
    headers = [*_parameter_pairs(extra, "HeaderParameters").items(), ("Accept", "application/json"),
               ("Authorization", _basic(client["ClientID"], client["ClientSecret"]))]
    content = None
    if method != "GET":
        content = "&".join(_form_pairs(body, "REPEAT")).encode()
        headers.append(("Content-Type", FORM_TYPE))
    url = _with_query(oauth["AuthorizationEndpoint"], "&".join(_form_pairs(query, "REPEAT")))
    return Request(method, url, headers, content)


# ---- the wire ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    host: str
    port: int
    tls: bool
    authority: str  # the Host header
    path: str  # the request target: path and query


def _target(url: str) -> _Target:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise Failure(errors.RUNTIME, f"The ApiEndpoint '{url}' is not a valid http or https URL")
    try:
        host = parts.hostname.encode("idna").decode("ascii") if not parts.hostname.isascii() else parts.hostname
    except UnicodeError:
        raise Failure(errors.RUNTIME, f"The host of the ApiEndpoint '{url}' is not a valid name") from None
    authority = (f"[{host}]" if ":" in host else host) + (f":{port}" if port else "")
    path = quote(parts.path or "/", safe=URL_SAFE) + (f"?{quote(parts.query, safe=URL_SAFE)}" if parts.query else "")
    return _Target(host, port or (443 if parts.scheme == "https" else 80), parts.scheme == "https", authority, path)


async def exchange(request: Request, tls: ssl.SSLContext | None = None) -> Response:
    """Send one request on a new connection and read the whole response (at most RESPONSE_BYTES_MAX of body);
    ``tls``: the context an https connection is made with (default: the system's certificate authorities)."""
    target = _target(request.url)
    connection = h11.Connection(h11.CLIENT)
    try:  # serialized before connecting, so a request h11 refuses never reaches the network
        headers = [("Host", target.authority), *request.headers]
        if request.body is not None:
            headers.append(("Content-Length", str(len(request.body))))
        wire = connection.send(h11.Request(method=request.method, target=target.path, headers=headers))
        if request.body:
            wire += connection.send(h11.Data(data=request.body))
        wire += connection.send(h11.EndOfMessage())
    except (h11.LocalProtocolError, UnicodeEncodeError) as error:  # h11 takes ASCII text only
        raise Failure(errors.RUNTIME, f"The HTTP request is not valid: {error}") from None
    try:
        reader, writer = await asyncio.open_connection(
            target.host, target.port, ssl=(tls or _tls_context()) if target.tls else None,
            server_hostname=target.host if target.tls else None)
    except (OSError, UnicodeError) as error:
        raise Failure(SOCKET, f"Could not connect to {target.authority}: {_reason(error)}") from None
    try:
        writer.write(wire)
        await writer.drain()
        response = await _read_response(connection, reader)
        return dataclasses.replace(response, tls=target.tls)
    except OSError as error:
        raise Failure(SOCKET, f"The connection to {target.authority} failed: {_reason(error)}") from None
    except h11.RemoteProtocolError as error:
        raise Failure(SOCKET, f"{target.authority} sent a malformed HTTP response: {error}") from None
    finally:
        writer.close()


async def _read_response(connection: h11.Connection, reader: asyncio.StreamReader) -> Response:
    head: h11.Response | None = None
    chunks: list[bytes] = []
    size = 0
    while True:  # bounded by RESPONSE_BYTES_MAX and by the caller's deadline
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError:
            if head is None or not reader.at_eof():
                raise
            event = h11.EndOfMessage()  # a body ended by closing the connection (an HTTP/1.0 server's framing)
        if event is h11.NEED_DATA:
            connection.receive_data(await reader.read(READ_CHUNK_BYTES))
        elif isinstance(event, h11.Response):
            head = event
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > RESPONSE_BYTES_MAX:
                raise Failure(errors.DATA_LIMIT_EXCEEDED, f"The HTTP response body exceeds the maximum size of "
                               f"{RESPONSE_BYTES_MAX} bytes")
            chunks.append(event.data)
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in head.headers.raw_items()]
            return Response(head.status_code, _status_text(head), headers, b"".join(chunks))
        elif isinstance(event, h11.ConnectionClosed):
            raise h11.RemoteProtocolError("the connection closed before the response was complete")
        # an InformationalResponse (1xx) is skipped: the final response follows it


def _status_text(head: h11.Response) -> str:
    if head.reason:
        return head.reason.decode("latin-1")
    try:
        return HTTPStatus(head.status_code).phrase
    except ValueError:
        return ""


@functools.cache
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


def _reason(error: BaseException) -> str:
    if isinstance(error, ConnectionError) and error.errno:  # asyncio's own text hides the errno's meaning
        return os.strerror(error.errno)
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


# ---- the result ----------------------------------------------------------------------------------------------


def _result(response: Response) -> dict:
    headers: dict[str, list[str]] = {}
    for name, value in response.headers:  # names as sent; the HTTP Task's result has them in lower case
        headers.setdefault(name.lower(), []).append(value)
    media_type, charset = _content_type(headers)
    if media_type == "application/octet-stream" or media_type.partition("/")[0] in ("image", "video", "audio"):
        raise Failure(errors.RUNTIME, f"The HTTP response has the unsupported content type '{media_type}'")
    try:
        text = response.body.decode(charset)
    except UnicodeDecodeError:
        raise Failure(errors.RUNTIME, "The HTTP response body can't be read as a valid string") from None
    body: Any = text
    if (media_type == "application/json" or media_type.endswith("+json")) and text.strip():
        try:
            body = loads(text)
        except ValueError:
            body = text  # labelled JSON but is not: keep the text
    return {"Headers": headers, "ResponseBody": body, "StatusCode": response.status, "StatusText": response.reason}


def _content_type(headers: dict[str, list[str]]) -> tuple[str, str]:
    """(media type in lower case, a known codec name: the declared charset or utf-8)."""
    value = (headers.get("content-type") or [""])[0]
    media_type, *params = (part.strip() for part in value.split(";"))
    charset = "utf-8"
    for param in params:
        key, _, declared = param.partition("=")
        if key.strip().lower() == "charset":
            declared = declared.strip().strip('"')
            with contextlib.suppress(LookupError):  # an unknown charset: read it as UTF-8
                charset = codecs.lookup(declared).name
    return media_type.lower(), charset


# ---- the connections file ------------------------------------------------------------------------------------------


def _checked_connections(document: Any) -> dict[str, dict]:
    if not isinstance(document, dict):
        raise ValueError("a connections file holds a JSON object mapping ConnectionArn to connection")
    for arn, entry in document.items():
        _check_connection(arn, entry)
    return document


def _check_connection(arn: str, entry: Any) -> None:
    kind = entry.get("AuthorizationType") if isinstance(entry, dict) else None
    if kind not in AUTHORIZATION_TYPES:
        raise ValueError(f"connection {arn}: AuthorizationType must be one of {', '.join(AUTHORIZATION_TYPES)}")
    auth = entry.get("AuthParameters")
    detail = auth.get(AUTHORIZATION_TYPES[kind]) if isinstance(auth, dict) else None
    required = {"API_KEY": ("ApiKeyName", "ApiKeyValue"), "BASIC": ("Username", "Password"),
                "OAUTH_CLIENT_CREDENTIALS": ("AuthorizationEndpoint", "ClientParameters")}[kind]
    if not isinstance(detail, dict) or any(not detail.get(field) for field in required):
        raise ValueError(f"connection {arn}: AuthParameters.{AUTHORIZATION_TYPES[kind]} needs "
                         f"{' and '.join(required)}")
    _check_parameter_lists(arn, "InvocationHttpParameters", auth.get("InvocationHttpParameters"))
    if kind == "OAUTH_CLIENT_CREDENTIALS":
        _check_parameter_lists(arn, "OAuthHttpParameters", detail.get("OAuthHttpParameters"))
        client = detail["ClientParameters"]
        if not isinstance(client, dict) or not client.get("ClientID") or "ClientSecret" not in client:
            raise ValueError(f"connection {arn}: OAuthParameters.ClientParameters needs ClientID and ClientSecret")
        if detail.get("HttpMethod", "POST") not in ("GET", "POST", "PUT"):
            raise ValueError(f"connection {arn}: OAuthParameters.HttpMethod must be GET, POST or PUT")


def _check_parameter_lists(arn: str, where: str, container: Any) -> None:
    """InvocationHttpParameters and OAuthHttpParameters: lists of {"Key": ..., "Value": ...} under three names."""
    if container is None:
        return
    fields = ("HeaderParameters", "QueryStringParameters", "BodyParameters")
    items = [container.get(field) or [] for field in fields] if isinstance(container, dict) else [None]
    for listed in items:
        if not isinstance(listed, list) or not all(isinstance(item, dict) and isinstance(item.get("Key"), str)
                                                   for item in listed):
            raise ValueError(f"connection {arn}: {where} holds lists of {{\"Key\": ..., \"Value\": ...}} objects")


class HttpTasks:
    """Runs arn:aws:states:::http:invoke attempts: started first, then called, then reported.

    At most ``Limits.http_calls_concurrent_max`` calls are in flight; the others wait for a slot, in arrival
    order, their dispatches still in the outbox. A call waiting for a slot has not started its attempt:
    StartAttempt is recorded only once the call holds a slot, so TaskStarted (and any deadline counted from the
    start) leaves the wait out, and a call that never got a slot before a restart is replayed from the outbox
    like any dispatch not yet started. Its commands are never throttled: the outbox window bounds them.
    """

    def __init__(self, dispatcher: Dispatcher, connections: Connections, limits: Limits | None = None,
                 spans: CallSpans | None = None) -> None:
        self.dispatcher = dispatcher
        self.connections = connections
        self.spans = spans or CallSpans()
        self._slots = asyncio.Semaphore((limits or Limits()).http_calls_concurrent_max)
        dispatcher.register("http", self.run)

    async def run(self, dispatch: Dispatch) -> None:
        await self.dispatcher.call_once(dispatch, self._slots, lambda: self._call(dispatch.payload),
                                        ATTEMPT_TIMEOUT_S)

    async def _call(self, payload: dict) -> AttemptSucceeded | AttemptFailed:
        timeout_s = payload.get("call_s", ATTEMPT_TIMEOUT_S)  # the attempt's TimeoutSeconds, capped
        if "trace" not in payload:  # untraced: nothing to make on the hot path
            return await invoke(payload["input"], self.connections, timeout_s=timeout_s)
        given = payload["input"] if isinstance(payload["input"], dict) else {}
        method = str(given.get("Method", "")).upper()
        with self.spans.call(payload, f"HTTP {method}".strip(), {"http.request.method": method,
                                                                 "url.full": str(given.get("ApiEndpoint", ""))}
                             ) as traced:
            outcome = await invoke(payload["input"], self.connections, timeout_s=timeout_s,
                                   traceparent=None if traced is None else traced.traceparent)
            if traced is not None:
                traced.ended(outcome, _status_attribute(outcome))
            return outcome


def _status_attribute(outcome: AttemptSucceeded | AttemptFailed) -> dict[str, int]:
    """The response's status code as a span attribute (none when no response came)."""
    if isinstance(outcome, AttemptFailed):
        code = outcome.error.removeprefix(STATUS_CODE)
        return {"http.response.status_code": int(code)} if code.isdigit() else {}
    status = loads(outcome.output).get("StatusCode")
    return {"http.response.status_code": status} if isinstance(status, int) else {}
