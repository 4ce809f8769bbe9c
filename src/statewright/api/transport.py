"""The HTTP/1.1 connections the API is served on: uvicorn's httptools protocol with the guards it lacks.

uvicorn closes a keep-alive connection only once it has answered a request on it: a connection that never sends
a full request head, or sends one a byte at a time, is held forever, and enough of them exhaust the process's
file descriptors. Here, every request head must be complete within ``request_head_timeout_ms`` of the connection
opening (or of its first byte, on a connection kept alive), its body within ``request_body_timeout_ms`` of the
head (a body trickled in a byte at a time holds the connection as well), an idle kept-alive connection closes after
``keep_alive_ms`` (uvicorn's own timer), and past ``connections_max`` open connections a new one is closed as
soon as it is accepted (clients see a reset and retry; SDKs do). A request the HTTP parser refuses (a NUL byte in
a header, say) is answered in AWS's JSON error shape rather than uvicorn's plain text: the parser rejects it
before the application could see it.

uvicorn writes a response's head and its body to the socket apart; here the writes of one event-loop turn go out
as one (``_Corked``): on these virtual machines a system call costs tens of microseconds, a fifth of a request.

Imports nothing from the rest of statewright but the error shape.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .errors import AwsError

log = logging.getLogger("statewright.api")
_MALFORMED = ("The HTTP request is malformed: its request line or a header holds a character HTTP does not allow "
              "(such as NUL)")


@dataclass(frozen=True, slots=True)
class HttpLimits:
    keep_alive_ms: int = 5_000  # an idle kept-alive connection is closed after this
    request_head_timeout_ms: int = 10_000  # the request line and headers must all have arrived by then
    request_body_timeout_ms: int = 10_000  # and then the body, within this of the head
    connections_max: int = 500  # open connections at once; more are closed as they are accepted


def protocol_class(limits: HttpLimits) -> type[HttpToolsProtocol]:
    """The protocol for ``uvicorn.Config(http=...)`` enforcing ``limits`` (keep_alive_ms goes to uvicorn's
    ``timeout_keep_alive``)."""

    class Guarded(_GuardedProtocol):
        _limits = limits

    return Guarded


class _GuardedProtocol(HttpToolsProtocol):
    _limits: HttpLimits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._body_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Corked(transport, self.loop))  # type: ignore[arg-type]
        if len(self.connections) > self._limits.connections_max:
            log.warning("%d connections open, the most allowed (--connections-max): closing a new one",
                        len(self.connections) - 1)
            transport.abort()  # at once, so its descriptor is free again
            return
        self._await_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_deadline is None:  # the next request on a kept-alive connection has begun
            self._await_head()

    def on_headers_complete(self) -> None:
        self._stop_waiting()
        self._body_deadline = self.loop.call_later(self._limits.request_body_timeout_ms / 1000, self._late)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._stop_waiting()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """The parser refused the request: answer in AWS's shape, then close (uvicorn's own 400 is plain text;
        ``msg`` is its fixed wording, the parser's detail is not passed on)."""
        body = orjson.dumps(AwsError("SerializationException", _MALFORMED).body())
        self.transport.write(b"".join([
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.0\r\n",
            b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body), body]))
        self.transport.close()

    def _await_head(self) -> None:
        self._head_deadline = self.loop.call_later(self._limits.request_head_timeout_ms / 1000, self._late)

    def _stop_waiting(self) -> None:
        for deadline in (self._head_deadline, self._body_deadline):
            if deadline is not None:
                deadline.cancel()
        self._head_deadline = self._body_deadline = None

    def _late(self) -> None:
        """The head or the body did not arrive in time: close the connection."""
        self._head_deadline = self._body_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


class _Corked:
    """A transport whose writes within one turn of the event loop reach the socket as one write, at the end of
    the turn; everything else goes to the transport itself. Closing sends what is waiting first."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._waiting: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._waiting:
            self._loop.call_soon(self._flush)
        self._waiting.append(data)

    def _flush(self) -> None:
        if self._waiting:
            data = b"".join(self._waiting)
            self._waiting.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._waiting.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
