"""The service behind the API: the operation registry and what every handler needs (store, engine, clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..engine.commands import Command, StartAttempt, TaskNotPending
from ..engine.core import Engine
from ..integrations.activities import ActivityMatcher
from ..store.base import Dispatch, Store
from .arns import Scope

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
    def __init__(self, store: Store, engine: Engine, account_id: str) -> None:
        self.store = store
        self.engine = engine
        self.account_id = account_id
        self.clock = engine.clock
        self.matcher = ActivityMatcher(self._start_attempt)

    def dispatch(self, dispatch: Dispatch) -> None:
        """Route a committed dispatch to its integration (called on the engine thread; must not block)."""
        if dispatch.payload["kind"] == "activity":
            self.matcher.offer(dispatch)

    async def _start_attempt(self, dispatch: Dispatch, worker_name: str | None) -> bool:
        command = StartAttempt(dispatch.execution_arn, dispatch.payload["scheduled_id"], worker_name)
        try:
            await self.run(command)
        except TaskNotPending:
            return False
        return True

    async def run(self, command: Command) -> Any:
        """Hand a command to the engine and wait for the commit that holds it."""
        self.engine.submit(command)
        return await asyncio.wrap_future(command.reply)
