"""The channel between nodes: one WebSocket from a node to each other node it calls, at ``/_statewright/channel`` on
the API's own port, carrying forwarded engine commands and change announcements both ways of one connection.

A request is a binary message ``<8-byte id><kind><body>`` (``kind``: COMMANDS or CHANGED, see peers.py for what
each body holds); its answer is ``<the same id><status><body>``, status OK or REFUSED (a body the receiver cannot
read). Requests on one connection are answered in whatever order they finish, so a slow commit holds up no other.
Against HTTP requests (one per forwarded batch) this costs a few tens of microseconds per call instead of hundreds:
no request line, headers or signature per call, one connection kept open.

The connection is authenticated once, without the secret crossing the wire: the receiver opens with a fresh random
challenge and closes the connection (code 1008) unless the caller's first message, within a second, is its
HMAC-SHA256 under the cluster secret. Someone who only sees a connection can replay nothing: the next connection
gets another challenge. The messages after it carry no signature of their own, and the caller does not check who
answers: someone who can take over a TCP connection between nodes could send commands on it. Between nodes on a
network you do not trust, put TLS in front of each node (advertise an https:// URL: the channel is then wss://).
A node that is not in cluster mode refuses the handshake (HTTP 403).

Imports nothing from the rest of statewright: what a request means is peers.py's.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import logging
import secrets
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection, connect

log = logging.getLogger("statewright.cluster")

PATH = "/_statewright/channel"
COMMANDS, CHANGED = b"c", b"a"  # what a request carries
OK, REFUSED = b"0", b"!"  # how it was answered
POLICY_VIOLATION = 1008  # the close code for a caller that cannot prove it knows the secret
# A forwarded batch is at most BATCH_COMMANDS_MAX (200) commands of at most 256 KiB each (AWS's payload limit).
MESSAGE_BYTES_MAX = 64 * 1024 * 1024
MESSAGES_QUEUED_MAX = 4  # received and not yet read, per connection (uvicorn's ws_max_queue): bounds memory
CONNECT_TIMEOUT_S = 1.0
_ID_BYTES = 8
_PROOF_BYTES = 32  # an HMAC-SHA256 digest


class Unreachable(Exception):
    """The node could not be reached, went away, or did not answer in time: the call may go elsewhere or again."""


class Refused(Exception):
    """The node refused this node: another cluster secret, or not in cluster mode. A setup to fix."""


def proof(secret: bytes, challenge: bytes) -> bytes:
    return hmac.new(secret, b"statewright channel " + challenge, hashlib.sha256).digest()


def websocket_url(address: str) -> str:
    """A node's channel URL from its advertised base URL (http://host:port)."""
    scheme, _, rest = address.rstrip("/").partition("://")
    return ("wss" if scheme == "https" else "ws") + "://" + rest + PATH


class Channel:
    """This node's connection to one other node, opened on first use and again after it drops; any number of
    requests share it."""

    def __init__(self, address: str, secret: bytes) -> None:
        self.address = address
        self.secret = secret
        self._connection: ClientConnection | None = None
        self._connecting: asyncio.Future[ClientConnection] | None = None
        self._pending: dict[bytes, asyncio.Future[tuple[bytes, bytes]]] = {}
        self._ids = itertools.count()
        self._reader: asyncio.Task | None = None

    async def request(self, kind: bytes, body: bytes, timeout_s: float) -> tuple[bytes, bytes]:
        """(status, body) of the answer; Unreachable or Refused otherwise."""
        connection = await self._connected()
        request_id = next(self._ids).to_bytes(_ID_BYTES, "big")
        loop = asyncio.get_running_loop()
        answer = self._pending[request_id] = loop.create_future()
        expiry = loop.call_later(timeout_s, _expire, answer, self.address, timeout_s)  # cheaper than wait_for
        try:
            await connection.send(request_id + kind + body)
            return await answer
        except websockets.ConnectionClosed as exc:
            raise _closed(exc) from None
        finally:
            expiry.cancel()
            self._pending.pop(request_id, None)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)

    async def _connected(self) -> ClientConnection:
        if self._connection is not None:
            return self._connection
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
            self._connecting.add_done_callback(self._opened)
        return await asyncio.shield(self._connecting)  # a caller giving up does not cancel the others' connection

    def _opened(self, connecting: asyncio.Future) -> None:
        """An open finished (or failed): the next caller opens again if there is no connection by then."""
        if self._connecting is connecting:
            self._connecting = None
        if not connecting.cancelled():
            connecting.exception()  # retrieved: a failed open is each waiting caller's error, not the loop's

    async def _open(self) -> ClientConnection:
        try:
            connection = await connect(websocket_url(self.address), open_timeout=CONNECT_TIMEOUT_S, compression=None,
                                       max_size=MESSAGE_BYTES_MAX, proxy=None, user_agent_header=None)
        except websockets.InvalidStatus as exc:  # not in cluster mode: it has no channel to open
            raise Refused(f"{self.address} answered {exc.response.status_code} to this node's channel") from None
        except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
            raise Unreachable(f"{self.address}: {type(exc).__name__} {exc}".rstrip()) from None
        try:
            challenge = await asyncio.wait_for(connection.recv(decode=False), CONNECT_TIMEOUT_S)
            await connection.send(proof(self.secret, challenge))
        except (websockets.ConnectionClosed, TimeoutError) as exc:
            await connection.close()
            raise Unreachable(f"{self.address} closed this node's channel while opening it: {exc}") from None
        self._connection = connection
        self._reader = asyncio.ensure_future(self._read(connection))
        return connection

    async def _read(self, connection: ClientConnection) -> None:
        problem: Exception = Unreachable(f"{self.address} closed this node's channel")
        try:
            async for message in connection:
                answer = self._pending.pop(message[:_ID_BYTES], None)
                if answer is not None and not answer.done():
                    answer.set_result((message[_ID_BYTES:_ID_BYTES + 1], message[_ID_BYTES + 1:]))
        except websockets.ConnectionClosed as exc:
            problem = _closed(exc)
        finally:
            if self._connection is connection:
                self._connection = None
            for answer in self._pending.values():  # their requests are lost with the connection: sent again
                if not answer.done():
                    answer.set_exception(problem)


def _expire(answer: asyncio.Future, address: str, timeout_s: float) -> None:
    if not answer.done():
        answer.set_exception(Unreachable(f"{address} did not answer within {timeout_s:g} s"))


def _closed(exc: websockets.ConnectionClosed) -> Exception:
    if exc.rcvd is not None and exc.rcvd.code == POLICY_VIOLATION:
        return Refused("the other node refused this node's channel: check that every node has the same cluster "
                       "secret")
    return Unreachable(f"the channel closed: {exc}")


async def serve(scope: dict, receive: Any, send: Any, secret: bytes | None, answer: Any) -> None:
    """Serve one incoming channel (an ASGI websocket scope). ``answer(kind, body)`` is awaited per request and
    returns (status, body); None for ``secret``: this node is not in cluster mode and refuses the channel."""
    if (await receive())["type"] != "websocket.connect":
        return
    if secret is None:
        await send({"type": "websocket.close", "code": POLICY_VIOLATION})  # before accepting: HTTP 403
        return
    await send({"type": "websocket.accept"})
    challenge = secrets.token_bytes(32)
    await send({"type": "websocket.send", "bytes": challenge})
    try:  # a caller that does not answer at once is no node of this cluster: it holds no connection
        first = await asyncio.wait_for(receive(), CONNECT_TIMEOUT_S)
    except TimeoutError:
        first = {"type": "websocket.receive", "bytes": b""}
    answer_bytes = first.get("bytes") or b""
    if (first["type"] != "websocket.receive" or len(answer_bytes) != _PROOF_BYTES
            or not hmac.compare_digest(answer_bytes, proof(secret, challenge))):
        client = (scope.get("client") or ("?",))[0]
        log.warning("refused a channel from %s: it does not know this cluster's secret", client)
        await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": "wrong cluster secret"})
        return
    running: set[asyncio.Task] = set()

    async def respond(message: bytes) -> None:
        try:
            status, body = await answer(message[_ID_BYTES:_ID_BYTES + 1], message[_ID_BYTES + 1:])
        except Exception as exc:  # e.g. the store away while re-reading a change: the caller hears it at once
            log.warning("a channel request failed: %s", exc)
            status, body = REFUSED, f"{type(exc).__name__}: {exc}".encode()
        try:
            await send({"type": "websocket.send", "bytes": message[:_ID_BYTES] + status + body})
        except Exception:  # the caller went away: it sends the request again elsewhere
            log.debug("a channel closed before its answer went out", exc_info=True)

    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        data = message.get("bytes")
        if not data or len(data) <= _ID_BYTES:
            await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": "not a request"})
            return
        task = asyncio.ensure_future(respond(data))
        running.add(task)  # held, or the loop may drop the task before it ends
        task.add_done_callback(running.discard)
