"""The bridge from the engine's commits to the integrations: dispatches cross from the engine thread to the
event loop here, and each goes to the handler registered for its kind.

Dispatches that arrive before the event loop runs (the outbox read back at start) wait in a buffer. Only outside
I/O comes here (activity matching, HTTP calls); the engine applies its own engine-to-engine dispatches itself.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from ..engine.commands import Command, StartAttempt, TaskNotPending
from ..store.base import Dispatch

log = logging.getLogger("statewright.integrations")

Handler = Callable[[Dispatch], Awaitable[None] | bool | None]  # False: full now, give the dispatch back


class Dispatcher:
    def __init__(self, run: Callable[[Command], Awaitable[Any]],
                 give_back: Callable[[Dispatch], None] = lambda dispatch: None) -> None:
        self.run = run  # hand a command to the engine and await the commit that holds it
        self.give_back = give_back  # a dispatch no handler can take now: the engine reads it back later
        self._handlers: dict[str, Handler] = {}
        self._buffer: deque[Dispatch] = deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: set[asyncio.Task] = set()

    def register(self, kind: str, handler: Handler) -> None:
        self._handlers[kind] = handler

    def submit(self, dispatch: Dispatch) -> None:
        """Called on the engine thread after the dispatch's commit landed; never blocks."""
        with self._lock:
            loop = self._loop
            if loop is None:
                self._buffer.append(dispatch)
                return
        loop.call_soon_threadsafe(self._deliver, dispatch)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start delivering on ``loop`` (the server's event loop), beginning with what was buffered."""
        with self._lock:
            self._loop = loop
            buffered = list(self._buffer)
            self._buffer.clear()
        for dispatch in buffered:
            loop.call_soon_threadsafe(self._deliver, dispatch)

    def _deliver(self, dispatch: Dispatch) -> None:
        handler = self._handlers.get(dispatch.payload["kind"])
        if handler is None:
            log.error("no integration handles dispatches of kind %r", dispatch.payload["kind"])
            return
        result = handler(dispatch)
        if result is False:  # the handler is full: the dispatch stays in the outbox until it has room again
            self.give_back(dispatch)
        elif inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("an integration failed", exc_info=task.exception())

    async def start_attempt(self, dispatch: Dispatch, worker_name: str | None = None) -> bool:
        """Record the attempt as started; False when the owning shard refuses (a duplicate, or moved on)."""
        try:
            await self.run(StartAttempt(dispatch.execution_arn, dispatch.payload["scheduled_id"], worker_name))
        except TaskNotPending:
            return False
        return True
