"""Forwarding: engine commands sent to the node that owns their execution's shard, over ``POST /_statewright/commands``
(see cluster.py for the endpoint and its signature).

``Forwarder.forward(command)`` is the API's way to a shard another node serves; ``Forwarder.engine_hook`` is the
engine's (``Engine.forward``), for engine-to-engine stages whose execution lives elsewhere. The owner comes from a
``Directory`` (the cluster's membership: shard leases and the nodes' addresses, as last read from the store).
Shards move (a node joins, leaves or dies), so a call that finds the owner gone (connection refused or reset, a 5xx,
or the node answering that it does not serve the shard) reads the directory again and tries again, with a short
backoff, until ``deadline_s``: longer than a lease period, so a shard whose node died is waited out until another
node takes it. Past the deadline the call raises EngineUnavailable, which the API answers as a retryable error.

Sending a command again is safe: the engine applies each command at most once (a start is idempotent by name and
input, a stop by the execution's state, an attempt's start or result is refused once it is not pending).

httpx carries the calls: an asyncio client with a pool of kept-alive connections per node, so a forwarded call
costs one request on an open connection, not a connection per call as the HTTP Task's h11 client makes.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Any, Protocol

import httpx

from ..engine.commands import (
    Command,
    EngineUnavailable,
    MalformedMessage,
    ShardNotOwned,
    decode_replies,
    encode_commands,
)
from ..engine.core import shard_for
from ..metrics import Metrics
from .cluster import CHANGED_PATH, PATH, SIGNATURE_HEADER, sign

log = logging.getLogger("statewright.api")

DEADLINE_S = 15.0  # more than one lease period (10 s): a dead owner's shards have moved by then
# One request's wait for its answer: a node paused mid-request (SIGSTOP) accepts connections but never answers;
# after this the call reads the directory again, where the shard's next owner shows once the lease ran out.
ATTEMPT_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 1.0
FIRST_RETRY_S = 0.02
LAST_RETRY_S = 0.5  # the longest pause between tries, doubled from FIRST_RETRY_S
CONNECTIONS_PER_NODE_MAX = 64
# How long a change waits for the other nodes to hear of it; one that does not hears of it through its next miss
# (activities) or its cache's expiry (state machine records, within a second).
ANNOUNCE_TIMEOUT_S = 1.0


class Directory(Protocol):
    """Where shards are served: the cluster's membership."""

    def owner_address(self, shard_id: int) -> str | None:
        """The base URL of the node holding the shard's lease, as last read; None if unknown or unowned."""

    def refresh(self) -> None:
        """Read the leases and nodes again now (blocking: called off the event loop)."""


class Forwarder:
    def __init__(self, directory: Directory, secret: str, shard_count: int, metrics: Metrics, *,
                 deadline_s: float = DEADLINE_S) -> None:
        if not secret:
            raise ValueError("forwarding between nodes needs a cluster secret")
        self.directory = directory
        self.secret = secret.encode()
        self.shard_count = shard_count
        self.deadline_s = deadline_s
        self._outcomes = {outcome: metrics.forwarded_calls.labels(outcome)
                          for outcome in ("answered", "not_owner", "unreachable", "refused", "gave_up")}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._refreshing: asyncio.Future | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Forward on ``loop`` (the server's event loop): the engine's calls are scheduled there."""
        self._loop = loop

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def forward(self, command: Command, *, throttle: bool = True) -> Any:
        """Apply ``command`` at the node owning its shard; returns its reply or raises the error it answered."""
        (reply,) = await self.call([command], throttle=throttle)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def engine_hook(self, commands: list[Command]) -> Future:
        """``Engine.forward``: called on the engine thread; never blocks. The future resolves with the replies."""
        loop = self._loop
        if loop is None or loop.is_closed():
            raise EngineUnavailable("the forwarder has no running event loop")
        return asyncio.run_coroutine_threadsafe(self.call(commands, throttle=False), loop)

    async def call(self, commands: list[Command], *, throttle: bool) -> list[object]:
        """The replies of the owning node to ``commands`` (all for one execution), in order; an error reply is an
        exception instance in the list. Raises EngineUnavailable if no owner answered within the deadline."""
        shard = shard_for(commands[0].arn, self.shard_count)
        body = encode_commands(commands, throttle=throttle)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.deadline_s
        pause = FIRST_RETRY_S
        while True:
            address = self.directory.owner_address(shard)
            if address is None:
                problem = f"no node holds shard {shard}"
            else:
                replies, problem = await self._send(address, body, len(commands), deadline - loop.time())
                if replies is not None:
                    self._outcomes["answered"].inc()
                    return replies
            remaining = deadline - loop.time()
            if remaining <= 0:
                self._outcomes["gave_up"].inc()
                raise EngineUnavailable(f"no node serving shard {shard} answered within {self.deadline_s:g} s "
                                        f"({problem}); retry the request")
            await self._refresh()
            if self.directory.owner_address(shard) == address:  # nothing new yet: give the move time
                await asyncio.sleep(min(pause, remaining))
                pause = min(pause * 2, LAST_RETRY_S)

    async def announce(self, addresses: list[str], body: bytes) -> None:
        """POST a change (see cluster.py) to these nodes at once; waits at most ANNOUNCE_TIMEOUT_S for them."""
        if not addresses:
            return
        client = self._http()
        headers = {SIGNATURE_HEADER: sign(self.secret, body)}
        answers = await asyncio.gather(*(
            client.post(address.rstrip("/") + CHANGED_PATH, content=body, headers=headers,
                        timeout=ANNOUNCE_TIMEOUT_S) for address in addresses), return_exceptions=True)
        for address, answer in zip(addresses, answers, strict=True):
            if isinstance(answer, BaseException) or answer.status_code != 200:
                log.warning("could not tell %s of a change: %s", address,
                            answer if isinstance(answer, BaseException) else answer.status_code)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                trust_env=False,  # a proxy from the environment is for outside calls, not between nodes
                limits=httpx.Limits(max_connections=CONNECTIONS_PER_NODE_MAX,
                                    max_keepalive_connections=CONNECTIONS_PER_NODE_MAX))
        return self._client

    async def _send(self, address: str, body: bytes, count: int,
                    remaining_s: float) -> tuple[list[object] | None, str]:
        """One try: (the replies, "") or (None, what went wrong, to try again). Raises if trying again is no use."""
        client = self._http()
        attempt_s = max(min(remaining_s, ATTEMPT_TIMEOUT_S), 0.001)
        try:
            response = await client.post(
                address.rstrip("/") + PATH, content=body, headers={SIGNATURE_HEADER: sign(self.secret, body)},
                timeout=httpx.Timeout(attempt_s, connect=min(attempt_s, CONNECT_TIMEOUT_S)))
        except httpx.TransportError as exc:  # refused, reset, timed out: the node is gone or going
            self._outcomes["unreachable"].inc()
            return None, f"{address}: {type(exc).__name__} {exc}".rstrip()
        if response.status_code >= 500:
            self._outcomes["unreachable"].inc()
            return None, f"{address} answered {response.status_code}"
        if response.status_code != 200:  # another secret, or a node not in cluster mode: a setup to fix
            self._outcomes["refused"].inc()
            log.error("%s refused forwarded commands (%d): %s", address, response.status_code, response.text)
            raise EngineUnavailable(f"the node serving this execution refused the call ({response.status_code}); "
                                    "check that every node has the same cluster secret")
        try:
            replies = decode_replies(response.content)
            if len(replies) != count:
                raise MalformedMessage(f"{len(replies)} replies to {count} commands")
        except MalformedMessage as exc:
            raise EngineUnavailable(f"{address} answered something this node cannot read: {exc}") from None
        if any(isinstance(reply, ShardNotOwned) for reply in replies):
            self._outcomes["not_owner"].inc()
            return None, f"{address} no longer serves the shard"
        return replies, ""

    async def _refresh(self) -> None:
        """Read the directory again, off the loop; concurrent calls that found an owner gone share one read."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().run_in_executor(None, self.directory.refresh)
        try:
            await asyncio.shield(self._refreshing)
        except Exception as exc:  # the store is unreachable: the last read still stands; the deadline bounds this
            log.warning("reading the cluster's shard owners failed: %s", exc)
