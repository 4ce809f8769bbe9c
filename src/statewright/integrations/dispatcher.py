"""The bridge from the engine's commits to the integrations: dispatches cross from the engine thread to the
event loop here, and each goes to the handler registered for its kind.

Dispatches that arrive before the event loop runs (the outbox read back at start) wait in a buffer. Only outside
I/O comes here (activity matching, HTTP and AWS calls); the engine applies its own engine-to-engine dispatches
itself.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from ..asl.jsonio import dumps
from ..decider.outcomes import AttemptFailed, AttemptResult, AttemptSucceeded
from ..engine.commands import AckDispatch, Command, CompleteAttempt, EngineUnavailable, StartAttempt, TaskNotPending
from ..store.base import Dispatch

log = logging.getLogger("statewright.integrations")

Handler = Callable[[Dispatch], Awaitable[None] | bool | None]  # False: full now, give the dispatch back
REPORT_RETRY_FIRST_S = 0.05  # the first pause before an outcome the engine could not commit is sent again
REPORT_RETRY_MAX_S = 2.0
MOCK_REPORT_S = 60.0  # how long a mocked outcome is offered again while the engine cannot commit it (then the
# dispatch is still in the outbox: the engine offers it again once it re-reads)


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
        kind = dispatch.payload["kind"]
        handler = (self.answer_mocked if "mocked" in dispatch.payload
                   else self._handlers.get(kind) or self._handlers.get(kind.partition(":")[0]))  # aws-sdk:<service>
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

    async def report(self, completion: CompleteAttempt | AckDispatch, within_s: float) -> None:
        """Hand an attempt's outcome (or the end of a dispatch's work) to the engine until it lands, for up to
        ``within_s`` (the attempt's own deadline ends it anyway); an attempt no longer pending (its deadline fired
        first) takes nothing."""
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + within_s
        pause_s = REPORT_RETRY_FIRST_S
        while True:
            try:
                await self.run(completion)
                return
            except TaskNotPending:
                return
            except EngineUnavailable:
                if loop.time() + pause_s > give_up_at:
                    raise
            await asyncio.sleep(pause_s)
            pause_s = min(pause_s * 2, REPORT_RETRY_MAX_S)

    async def answer_mocked(self, dispatch: Dispatch) -> None:
        """A Task of a test case (decider/mocks.py): answered with the mocked outcome its dispatch carries, as its
        resource would have answered. The engine records the attempt's start and its result in one commit, which
        also removes the dispatch: until then the dispatch stays in the outbox, so a crash loses no answer (a
        second answer to an attempt that is over is refused)."""
        mocked = dispatch.payload["mocked"]
        outcome = (AttemptSucceeded(dumps(mocked["Return"])) if "Return" in mocked
                   else AttemptFailed(mocked["Throw"]["Error"], mocked["Throw"].get("Cause")))
        await self.report(CompleteAttempt(dispatch.execution_arn, dispatch.payload["scheduled_id"], outcome),
                          MOCK_REPORT_S)

    async def call_once(self, dispatch: Dispatch, slot: AbstractAsyncContextManager[Any],
                        call: Callable[[], Awaitable[AttemptResult]], report_within_s: float) -> None:
        """An outbound call's attempt: wait for a ``slot``, record the attempt started, make the call once, report.

        The start is recorded only once the call holds its slot (the attempt's deadline, counted from its
        scheduling, includes the wait); a call still waiting when the server stops is offered again from the
        outbox. Once the call was made it is never made again for this attempt: a Retry is a new attempt."""
        async with slot:
            try:
                if not await self.start_attempt(dispatch):
                    return  # a duplicate, or the attempt moved on: it must not be called twice
            except EngineUnavailable:
                return  # the start did not land: the engine re-reads the shard and offers the call again
            outcome = await call()
        await self.report(CompleteAttempt(dispatch.execution_arn, dispatch.payload["scheduled_id"], outcome),
                          report_within_s)

    async def start_attempt(self, dispatch: Dispatch, worker_name: str | None = None) -> bool:
        """Record the attempt as started; False when the owning shard refuses (a duplicate, or moved on)."""
        try:
            await self.run(StartAttempt(dispatch.execution_arn, dispatch.payload["scheduled_id"], worker_name))
        except TaskNotPending:
            return False
        return True
