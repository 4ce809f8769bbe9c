"""The HTTP/1.1 connections the API is served on: uvicorn's httptools protocol with the guards it lacks.

uvicorn closes a keep-alive connection only once it has answered a request on it: a connection that never sends
a full request head, or sends one a byte at a time, is held forever, and enough of them exhaust the process's
file descriptors. Here, a new connection must send its first byte within ``first_byte_timeout_ms``, every request
head must be complete within ``request_head_timeout_ms`` of the connection opening (or of its first byte, on a
connection kept alive), its body within ``request_body_timeout_ms`` of the head (a body trickled in a byte at a
time holds the connection as well), and an idle kept-alive connection closes after ``keep_alive_ms`` (uvicorn's
own timer). Open connections are bounded in all (``connections_max``) and per client address
(``connections_per_address_max``): a connection past a bound closes an idle one to make room (one that has sent
nothing yet, or is kept alive between requests: of its own address past the address's bound, else of the address
holding most, the longest idle first), so idle sockets cannot lock other clients out; only when every connection
is busy with a request is the new one closed as soon as it is accepted (clients see a reset and retry; SDKs do).
A request the HTTP parser refuses (a NUL byte in a header, say) is answered in AWS's JSON error shape rather than
uvicorn's plain text: the parser rejects it before the application could see it.

uvicorn writes a response's head and its body to the socket apart; here the writes of one event-loop turn go out
as one (``_Corked``): on these virtual machines a system call costs tens of microseconds, a fifth of a request.

Imports nothing from the rest of statewright but the error shape.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
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
    connections_max: int = 500  # open connections at once; past it an idle one is closed, else the new one
    # Open connections from one client address (W1's load generator holds 256 from one); past it, that address's
    # longest idle connection is closed, else the new one.
    connections_per_address_max: int = 400
    first_byte_timeout_ms: int = 2_000  # a new connection that has sent nothing by then is closed


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
        self._first_byte: asyncio.TimerHandle | None = None
        self._address: str | None = None
        self._idle_since: float | None = None  # None while a request is on its way or being answered

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Corked(transport, self.loop))  # type: ignore[arg-type]
        self._address = self.client[0] if self.client else None
        self._idle_since = time.monotonic()
        if not self._make_room():
            log.warning("%d connections open and none idle (--connections-max %d, --connections-per-address-max "
                        "%d): closing a new one", len(self.connections) - 1, self._limits.connections_max,
                        self._limits.connections_per_address_max)
            transport.abort()  # at once, so its descriptor is free again
            return
        self._first_byte = self.loop.call_later(self._limits.first_byte_timeout_ms / 1000, self._late)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        self._idle_since = None
        if self._first_byte is not None:
            self._first_byte.cancel()
            self._first_byte = None
        super().data_received(data)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.pipeline:
            self._idle_since = time.monotonic()

    def _make_room(self) -> bool:
        """This connection is open: if it is past a bound, close an idle one in its place. Returns False if every
        candidate is busy (this one must go)."""
        limits = self._limits
        if len(self.connections) <= min(limits.connections_max, limits.connections_per_address_max):
            return True  # within both bounds whoever holds them: nothing to count
        # The server's connections include the cluster's channels (websockets, never idle here).
        open_ = [other for other in self.connections if not other.transport.is_closing()]
        same = [other for other in open_ if _address(other) == self._address]
        if len(same) > limits.connections_per_address_max:
            return self._close_longest_idle(same)
        if len(open_) > limits.connections_max:
            held = Counter(_address(other) for other in open_)
            most = max(held.values())
            return self._close_longest_idle([other for other in open_ if held[_address(other)] == most]) or \
                self._close_longest_idle(open_)
        return True

    def _close_longest_idle(self, candidates: list[Any]) -> bool:
        idle = [other for other in candidates if other is not self and _idle_since(other) is not None]
        if not idle:
            return False
        victim = min(idle, key=_idle_since)
        _evicted.note(victim._address)
        victim.transport.close()
        return True

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
        for deadline in (self._head_deadline, self._body_deadline, self._first_byte):
            if deadline is not None:
                deadline.cancel()
        self._head_deadline = self._body_deadline = self._first_byte = None

    def _late(self) -> None:
        """The first byte, the head or the body did not arrive in time: close the connection."""
        self._stop_waiting()
        if not self.transport.is_closing():
            self.transport.close()


def _address(connection: Any) -> str | None:
    return getattr(connection, "_address", None)


def _idle_since(connection: Any) -> float | None:
    return getattr(connection, "_idle_since", None)


class _Evictions:
    """Idle connections closed to make room, logged at most every 10 s (a client reopening hundreds of sockets
    would otherwise write a line for each)."""

    def __init__(self) -> None:
        self._since: Counter[str | None] = Counter()
        self._logged_s = 0.0

    def note(self, address: str | None) -> None:
        self._since[address] += 1
        now_s = time.monotonic()
        if now_s - self._logged_s >= 10:
            log.warning("at the connection limits: closed %d idle connections to admit new ones (most from %s)",
                        sum(self._since.values()), self._since.most_common(1)[0][0])
            self._since.clear()
            self._logged_s = now_s


_evicted = _Evictions()


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
