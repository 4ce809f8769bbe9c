"""Forwarding: engine commands sent to the node that owns their execution's shard, over this node's channel to it
(channel.py; peers.py for what the receiver does with them).

``Forwarder.forward(command)`` is the API's way to a shard another node serves; ``Forwarder.engine_hook`` is the
engine's (``Engine.forward``), for engine-to-engine stages whose execution lives elsewhere. The owner comes from a
``Directory`` (the cluster's membership: shard leases and the nodes' addresses, as last read from the store).
Shards move (a node joins, leaves or dies), so a call that finds the owner gone (connection refused or closed, no
answer in time, or the node answering that it does not serve the shard) reads the directory again and tries again,
with a short backoff, until ``deadline_s``: longer than a lease period, so a shard whose node died is waited out
until another node takes it. Past the deadline the call raises EngineUnavailable, which the API answers as a
retryable error.

Sending a command again is safe: the engine applies each command at most once (a start is idempotent by name and
input, a stop by the execution's state, an attempt's start or result is refused once it is not pending).

Calls to one node are batched, as the engine batches commits: at most REQUESTS_PER_NODE_MAX requests are in flight
to a node, and whatever calls queue up meanwhile go together in the next request (up to BATCH_COMMANDS_MAX
commands), each caller getting its own replies back. Under load one request carries many commands, so the cost of
a request is shared instead of paid per call; a lone call still goes at once.

Imports the engine's commands and its shard function, never the API: the API and the engine both call in.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from concurrent.futures import Future
from typing import Any, Protocol

from ..engine.commands import (
    Command,
    EngineUnavailable,
    MalformedMessage,
    ShardNotOwned,
    decode_replies,
    encode_commands,
)
from ..engine.shards import shard_for
from ..metrics import Metrics
from .channel import CHANGED, COMMANDS, OK, Channel, Refused, Unreachable

log = logging.getLogger("statewright.cluster")

DEADLINE_S = 15.0  # more than one lease period (10 s): a dead owner's shards have moved by then
# One request's wait for its answer: a node paused mid-request (SIGSTOP) accepts connections but never answers;
# after this the call reads the directory again, where the shard's next owner shows once the lease ran out.
ATTEMPT_TIMEOUT_S = 5.0
FIRST_RETRY_S = 0.02
LAST_RETRY_S = 0.5  # the longest pause between tries, doubled from FIRST_RETRY_S
REQUESTS_PER_NODE_MAX = 4  # requests in flight to one node; calls arriving meanwhile wait for the next
BATCH_COMMANDS_MAX = 200  # commands in one request (within the channel's message size: see channel.py)
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
        self._channels: dict[str, Channel] = {}  # address -> this node's channel to it
        self._refreshing: asyncio.Future | None = None
        self._lanes: dict[tuple[str, bool], _Lane] = {}  # (address, throttle) -> calls waiting for a request

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Forward on ``loop`` (the server's event loop): the engine's calls are scheduled there."""
        self._loop = loop

    async def aclose(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        await asyncio.gather(*(channel.close() for channel in channels))

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
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.deadline_s
        pause = FIRST_RETRY_S
        while True:
            address = self.directory.owner_address(shard)
            if address is None:
                problem = f"no node holds shard {shard}"
            else:
                replies, problem = await self._send(address, commands, throttle, deadline - loop.time())
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
        """Send a change (see peers.py) to these nodes at once; waits ANNOUNCE_TIMEOUT_S for their answers, after
        opening a channel to a node it has none to (up to channel.CONNECT_TIMEOUT_S more, twice)."""
        answers = await asyncio.gather(*(self._channel(address).request(CHANGED, body, ANNOUNCE_TIMEOUT_S)
                                         for address in addresses), return_exceptions=True)
        for address, answer in zip(addresses, answers, strict=True):
            if isinstance(answer, BaseException) or answer[0] != OK:
                log.warning("could not tell %s of a change: %s", address,
                            answer if isinstance(answer, BaseException) else answer[1].decode(errors="replace"))

    def _channel(self, address: str) -> Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = Channel(address, self.secret)
        return channel

    async def _send(self, address: str, commands: list[Command], throttle: bool,
                    remaining_s: float) -> tuple[list[object] | None, str]:
        """One try, in the next request to ``address``: (the replies, "") or (None, what went wrong, to try
        again). Raises if trying again is no use."""
        lane = self._lanes.get((address, throttle))
        if lane is None:
            lane = self._lanes[(address, throttle)] = _Lane()
        waiter: asyncio.Future = asyncio.get_running_loop().create_future()
        lane.calls.append((commands, waiter))
        if lane.requests < REQUESTS_PER_NODE_MAX:
            lane.requests += 1
            sender = asyncio.ensure_future(self._drain(address, throttle, lane))
            lane.senders.add(sender)  # held, or the loop may drop the task before it ends
            sender.add_done_callback(lane.senders.discard)
        expiry = asyncio.get_running_loop().call_later(max(remaining_s, 0.001), _expire, waiter)
        try:  # a timer on the waiter, not wait_for: a forwarded call is hot, and wait_for adds a task per call
            replies, problem = await waiter
        except TimeoutError:
            return None, f"{address} did not answer in time"
        finally:
            expiry.cancel()
        if replies is not None and any(isinstance(reply, ShardNotOwned) for reply in replies):
            self._outcomes["not_owner"].inc()
            return None, f"{address} no longer serves the shard"
        return replies, problem

    async def _drain(self, address: str, throttle: bool, lane: _Lane) -> None:
        """Send the lane's waiting calls, a batch per request, until none wait."""
        try:
            while lane.calls:
                batch: list[tuple[list[Command], asyncio.Future]] = []
                count = 0
                while lane.calls and count < BATCH_COMMANDS_MAX:
                    batch.append(lane.calls.popleft())
                    count += len(batch[-1][0])
                try:
                    replies, problem = await self._post(
                        address, [command for commands, _ in batch for command in commands], throttle)
                except Exception as exc:  # a setup error (another secret) or a reply this node cannot read
                    for _, waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(exc)
                    continue
                offset = 0
                for commands, waiter in batch:
                    mine = None if replies is None else replies[offset:offset + len(commands)]
                    offset += len(commands)
                    if not waiter.done():
                        waiter.set_result((mine, problem))
        finally:
            lane.requests -= 1

    async def _post(self, address: str, commands: list[Command], throttle: bool) -> tuple[list[object] | None, str]:
        """One request: (the replies, "") or (None, what went wrong, to try again). Raises if trying again is no
        use."""
        try:
            status, body = await self._channel(address).request(
                COMMANDS, encode_commands(commands, throttle=throttle), ATTEMPT_TIMEOUT_S)
        except Unreachable as exc:  # refused, closed, no answer in time: the node is gone, going or paused
            self._outcomes["unreachable"].inc()
            return None, str(exc)
        except Refused as exc:  # another secret, or a node not in cluster mode: a setup to fix
            self._outcomes["refused"].inc()
            log.error("%s", exc)
            raise EngineUnavailable(f"the node serving this execution refused the call: {exc}") from None
        try:
            if status != OK:
                raise MalformedMessage(body.decode(errors="replace"))
            replies = decode_replies(body)
            if len(replies) != len(commands):
                raise MalformedMessage(f"{len(replies)} replies to {len(commands)} commands")
        except MalformedMessage as exc:
            raise EngineUnavailable(f"{address} and this node do not understand each other: {exc}") from None
        return replies, ""

    async def _refresh(self) -> None:
        """Read the directory again, off the loop; concurrent calls that found an owner gone share one read."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().run_in_executor(None, self.directory.refresh)
        try:
            await asyncio.shield(self._refreshing)
        except Exception as exc:  # the store is unreachable: the last read still stands; the deadline bounds this
            log.warning("reading the cluster's shard owners failed: %s", exc)


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Lane:
    """The calls waiting for the next request to one node, and how many requests to it are in flight."""

    def __init__(self) -> None:
        self.calls: deque[tuple[list[Command], asyncio.Future]] = deque()
        self.requests = 0
        self.senders: set[asyncio.Future] = set()
