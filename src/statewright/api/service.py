"""The service behind the API: the operation registry and what every handler needs (store, engine, clock)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..engine.commands import Command
from ..engine.core import Engine, answer
from ..integrations.activities import ActivityMatcher
from ..integrations.dispatcher import Dispatcher
from ..integrations.http import Connections, HttpTasks
from ..store.base import StateMachineRecord, Store
from .arns import Scope

_MACHINE_CACHE_S = 1.0
_MACHINE_CACHE_SIZE = 10_000
Handler = Callable[["Service", dict, Scope], dict | Awaitable[dict]]
HANDLERS: dict[str, Handler] = {}


def handler(operation: str) -> Callable[[Handler], Handler]:
    """Register the function that serves ``operation`` (its name as in the AWS API)."""

    def register(function: Handler) -> Handler:
        HANDLERS[operation] = function
        return function

    return register


def seconds(epoch_ms: int) -> float:
    """AWS's JSON protocol sends timestamps as epoch seconds."""
    return epoch_ms / 1000


class Service:
    def __init__(self, store: Store, engine: Engine, account_id: str, connections: Connections | None = None) -> None:
        self.store = store
        self.engine = engine
        self.account_id = account_id
        self.clock = engine.clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._machines: dict[str, tuple[StateMachineRecord | None, float]] = {}
        self.dispatcher = Dispatcher(lambda command: self.run(command, throttle=False), engine.give_back)
        self.matcher = ActivityMatcher(self.dispatcher.start_attempt)
        self.dispatcher.register("activity", self.matcher.offer)
        self.connections = connections or Connections()
        HttpTasks(self.dispatcher, self.connections)
        engine.on_dispatch = self.dispatcher.submit

    def state_machine(self, arn: str) -> StateMachineRecord | None:
        """The state machine record, cached for a second: StartExecution reads it on every call, and an update
        or delete through this server drops it at once."""
        cached = self._machines.get(arn)
        now = time.monotonic()
        if cached is not None and now - cached[1] < _MACHINE_CACHE_S:
            return cached[0]
        record = self.store.get_state_machine(arn)
        if len(self._machines) >= _MACHINE_CACHE_SIZE:
            self._machines.clear()
        self._machines[arn] = (record, now)
        return record

    def forget_state_machine(self, arn: str) -> None:
        self._machines.pop(arn, None)

    async def run(self, command: Command, *, throttle: bool = True) -> Any:
        """Hand a command to the engine and wait for the commit that holds it (InboxFull: the engine is full)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the first request: the engine now replies through this loop
            self._loop = loop
            self.engine.deliver_replies = self._deliver_replies
        return await self.engine.submit(command, loop.create_future(), throttle=throttle)

    def _deliver_replies(self, replies: list[tuple[asyncio.Future, object]]) -> None:
        """On the engine thread: pass a tick's replies to the event loop in one hop."""
        self._loop.call_soon_threadsafe(answer, replies)
