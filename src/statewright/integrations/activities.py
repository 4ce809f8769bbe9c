"""Task matching for activities: hand each dispatched activity task to one long-polling worker.

A task that arrives while a worker is polling goes straight to it (sync match); otherwise it waits in the
activity's backlog. The backlog in memory is a cache: the durable backlog is the outbox, replayed when the engine
starts. Before a task is returned, the owning shard records the attempt as started; a duplicate copy, or a task
whose execution moved on, is refused there and the poll goes on, so one attempt reaches one worker.

With several nodes, the tasks of executions another node owns are claimed from the store (``claim``): a poll
that finds no task here looks there while the store may hold one, and waits to be told to look again: when the
store says another node committed a task of its activity (``notice``), and now and then in case such a word was
lost (``look_again``). A claim that came back empty means the store holds none until the next word, so the polls
after it wait instead of each asking the store again. A poll that claimed a task wakes the next waiting one,
since there may be more. Claimed or local, a task is handed out only once its owner recorded the start.

The backlog holds at most ``Limits.activity_backlog_tasks_max`` tasks over all activities. At the limit ``offer``
refuses a task no poller is waiting for; it stays in the outbox, and ``on_room`` tells the caller when to offer
again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Awaitable, Callable
from typing import Any

from ..engine.commands import EngineUnavailable
from ..engine.limits import Limits
from ..store.base import Dispatch, StoreUnavailable

log = logging.getLogger("statewright.integrations")

# (dispatch, worker name) -> whether the attempt is now started for this worker
StartAttempt = Callable[[Dispatch, str | None], Awaitable[bool]]
# activity ARN -> a task of another node's claimed from the store for a while, or None
Claim = Callable[[str], Awaitable[Dispatch | None]]
_LOOK = object()  # what a waiting poll is woken with to look in the store
Key = tuple[str, str]  # (execution ARN, dispatch id)


class ActivityMatcher:
    """Lives on the event loop: ``offer`` and ``poll`` are both called there.

    ``on_room`` is called (on the event loop, at most once per refusal spell) when the backlog, after ``offer``
    refused a task, has drained to half the limit: the caller then re-offers what it kept in the outbox, a batch at
    a time rather than one task per poll. The backlog holds each dispatch once: the engine offers a shard's tasks
    again whenever it re-reads the shard, and a copy already waiting is not queued twice.
    """

    def __init__(self, start_attempt: StartAttempt, limits: Limits | None = None, claim: Claim | None = None) -> None:
        self._start_attempt = start_attempt
        self._claim = claim
        self._word: dict[str, int] = defaultdict(int)  # per activity: how often word came of a task in the store
        self._empty: dict[str, int] = {}  # per activity: the word under which a claim last came back empty
        self._tasks_max = (limits or Limits()).activity_backlog_tasks_max
        self._backlog: dict[str, OrderedDict[Key, Dispatch]] = defaultdict(OrderedDict)  # per activity, oldest first
        self._activity_of: dict[Key, str] = {}  # every task in a backlog
        self._refused = False  # an offer was refused since the backlog last had room
        self._pollers: dict[str, deque[asyncio.Future]] = defaultdict(deque)
        self._polling: dict[str, Counter[str]] = defaultdict(Counter)  # per activity: the workers polling, by name
        self._closed = False
        self.on_room: Callable[[], None] = lambda: None

    def offer(self, dispatch: Dispatch) -> bool:
        """A committed activity dispatch: hand it to a waiting poller or keep it in the backlog (True), or refuse
        it because the backlog is full (False): the caller keeps it in the outbox and offers it after ``on_room``."""
        activity_arn = dispatch.payload["resource"]
        key = (dispatch.execution_arn, dispatch.dispatch_id)
        if key in self._activity_of:
            return True  # offered again after a re-read: the copy here stands
        pollers = self._pollers[activity_arn]
        while pollers:
            waiter = pollers.popleft()
            if not waiter.done():
                waiter.set_result(dispatch)
                return True
        if len(self._activity_of) >= self._tasks_max:
            self._refused = True
            return False
        self._backlog[activity_arn][key] = dispatch
        self._activity_of[key] = activity_arn
        return True

    def backlog_size(self) -> int:
        return len(self._activity_of)

    def discard(self, keys: list[Key]) -> None:
        """These dispatches' rows are gone (their attempts started, maybe for a worker at another node, or ended):
        drop the copies waiting here, which nobody could start any more."""
        for key in keys:
            activity_arn = self._activity_of.pop(key, None)
            if activity_arn is not None:
                del self._backlog[activity_arn][key]
                self._left()

    async def poll(self, activity_arn: str, worker_name: str | None, timeout_s: float) -> Dispatch | None:
        """Wait up to ``timeout_s`` for a task of this activity; the returned attempt is started for this worker.

        A poll cancelled (its client went away) while it holds a task not yet started puts the task back, so no
        task is lost with a departed worker. A start the engine could not commit drops this copy and polls on:
        the engine re-reads the shard's outbox and offers the task again.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        polling, name = self._polling[activity_arn], worker_name or ""
        polling[name] += 1
        try:
            while True:
                dispatch = await self._next(activity_arn, deadline)
                if dispatch is None:
                    return None
                try:
                    started = await self._start_attempt(dispatch, worker_name)
                except asyncio.CancelledError:
                    self._put_back(dispatch)  # the attempt may have started: then its second start is refused
                    raise
                except EngineUnavailable:
                    continue
                if started:
                    return dispatch
        finally:
            polling[name] -= 1
            if not polling[name]:
                del polling[name]
            if not polling:
                self._polling.pop(activity_arn, None)

    def waiting(self) -> dict[str, dict[str, Any]]:
        """Per activity with either: the tasks waiting here for a worker, and the workers polling here (by name,
        with how many polls each; "" for a poll that gave no name). On the event loop's thread."""
        arns = {arn for arn, backlog in self._backlog.items() if backlog} | set(self._polling)
        return {arn: {"tasksWaiting": len(self._backlog.get(arn, ())),
                      "workersPolling": dict(self._polling.get(arn, {}))} for arn in sorted(arns)}

    def notice(self, activity_arn: str) -> None:
        """Another node committed a task of this activity: one waiting poll looks in the store."""
        self._word[activity_arn] += 1
        self._wake(activity_arn)

    def look_again(self) -> None:
        """Word of a task may have been lost (a watch reconnecting, a claim that ran out): the next poll of each
        activity looks in the store, and one waiting poll of each looks now."""
        self._empty.clear()
        for activity_arn in list(self._pollers):
            self._wake(activity_arn)

    def _wake(self, activity_arn: str) -> None:
        pollers = self._pollers.get(activity_arn)
        while pollers:
            waiter = pollers.popleft()
            if not waiter.done():
                waiter.set_result(_LOOK)
                return

    async def _next(self, activity_arn: str, deadline: float) -> Dispatch | None:
        loop = asyncio.get_running_loop()
        while True:
            backlog = self._backlog[activity_arn]
            if backlog:
                return self._take(backlog)
            word = self._word[activity_arn]
            if self._claim is not None and self._empty.get(activity_arn) != word:
                claimed = await self._claimed(activity_arn)
                if claimed is not None:
                    self._wake(activity_arn)  # there may be more: the next poll looks too
                    return claimed
                self._empty[activity_arn] = word  # word that came while it looked has the next poll look again
                continue  # a task of this node's may have come meanwhile
            remaining_s = deadline - loop.time()
            if remaining_s <= 0 or self._closed:
                return None
            found = await self._wait(activity_arn, remaining_s)
            if found is not _LOOK:
                return found  # a task, or None: the time is up or the server is stopping

    async def _claimed(self, activity_arn: str) -> Dispatch | None:
        try:
            return await self._claim(activity_arn)
        except StoreUnavailable as exc:  # this poll waits; the next look (or notice) tries again
            log.warning("could not claim a task of %s: %s", activity_arn, exc)
            return None

    async def _wait(self, activity_arn: str, remaining_s: float) -> object:
        """A task offered here, _LOOK, or None (time is up, or the server is stopping)."""
        waiter = asyncio.get_running_loop().create_future()
        self._pollers[activity_arn].append(waiter)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), remaining_s)
        except TimeoutError:
            return waiter.result() if waiter.done() and not waiter.cancelled() else None
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and isinstance(waiter.result(), Dispatch):
                self._put_back(waiter.result())
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            if waiter in self._pollers[activity_arn]:
                self._pollers[activity_arn].remove(waiter)

    def _take(self, backlog: OrderedDict[Key, Dispatch]) -> Dispatch:
        key, dispatch = backlog.popitem(last=False)
        del self._activity_of[key]
        self._left()
        return dispatch

    def _left(self) -> None:
        """A task left the backlog: after a refusal, say when it has drained to half."""
        if self._refused and len(self._activity_of) <= self._tasks_max // 2:
            self._refused = False
            self.on_room()

    def _put_back(self, dispatch: Dispatch) -> None:
        """A task taken but not handed out goes first in line again, even over the limit: it was accepted once."""
        key, activity_arn = (dispatch.execution_arn, dispatch.dispatch_id), dispatch.payload["resource"]
        backlog = self._backlog[activity_arn]
        backlog[key] = dispatch
        backlog.move_to_end(key, last=False)
        self._activity_of[key] = activity_arn

    def release(self) -> None:
        """The server is stopping: answer every waiting poll with no task, and take no new waits."""
        self._closed = True
        for waiters in self._pollers.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
