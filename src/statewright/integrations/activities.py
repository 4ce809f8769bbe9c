"""Task matching for activities: hand each dispatched activity task to one long-polling worker.

A task that arrives while a worker is polling goes straight to it (sync match); otherwise it waits in the
activity's backlog. The backlog in memory is a cache: the durable backlog is the outbox, replayed when the engine
starts. Before a task is returned, the owning shard records the attempt as started; a duplicate copy, or a task
whose execution moved on, is refused there and the poll goes on, so one attempt reaches one worker.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable

from ..store.base import Dispatch

# (dispatch, worker name) -> whether the attempt is now started for this worker
StartAttempt = Callable[[Dispatch, str | None], Awaitable[bool]]


class ActivityMatcher:
    """Lives on the event loop: ``offer`` and ``poll`` are both called there."""

    def __init__(self, start_attempt: StartAttempt) -> None:
        self._start_attempt = start_attempt
        self._backlog: dict[str, deque[Dispatch]] = defaultdict(deque)
        self._pollers: dict[str, deque[asyncio.Future]] = defaultdict(deque)

    def offer(self, dispatch: Dispatch) -> None:
        """A committed activity dispatch: hand it to a waiting poller, or keep it in the backlog."""
        activity_arn = dispatch.payload["resource"]
        pollers = self._pollers[activity_arn]
        while pollers:
            waiter = pollers.popleft()
            if not waiter.done():
                waiter.set_result(dispatch)
                return
        self._backlog[activity_arn].append(dispatch)

    def backlog_size(self) -> int:
        return sum(len(queue) for queue in self._backlog.values())

    async def poll(self, activity_arn: str, worker_name: str | None, timeout_s: float) -> Dispatch | None:
        """Wait up to ``timeout_s`` for a task of this activity; the returned attempt is started for this worker."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            backlog = self._backlog[activity_arn]
            if backlog:
                dispatch = backlog.popleft()
            else:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return None
                waiter = loop.create_future()
                self._pollers[activity_arn].append(waiter)
                try:
                    dispatch = await asyncio.wait_for(waiter, remaining)
                except TimeoutError:
                    return None
                finally:
                    if waiter in self._pollers[activity_arn]:
                        self._pollers[activity_arn].remove(waiter)
            if await self._start_attempt(dispatch, worker_name):
                return dispatch
