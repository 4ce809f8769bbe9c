"""Which executions a console page watches, and a wake-up for each once a commit added to its history.

The engine calls ``offer`` on its thread once per tick with the history its commit landed (``Edges.history``), so a
page hears only of committed transitions; it then reads the new events through the public API, as it read the
first ones. A tick's cost while nobody watches is one truth test. Must not import the API or the engine.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


class HistoryFeed:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # execution ARN -> (event loop, event) of each page watching it
        self._watchers: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self.closed = False  # the server is stopping: streams end (uvicorn waits for every connection to close)

    def offer(self, logged: Sequence[tuple[Any, ...]]) -> None:
        """On the engine thread, after a commit: wake the pages watching an execution it wrote history for."""
        if not self._watchers:
            return
        with self._lock:
            woken = [watcher for item in logged for watcher in self._watchers.get(item[1], ())]
        for loop, event in woken:
            loop.call_soon_threadsafe(event.set)

    def close(self) -> None:
        """The server is stopping: wake every watcher, and the streams end."""
        self.closed = True
        with self._lock:
            woken = [watcher for watchers in self._watchers.values() for watcher in watchers]
        for loop, event in woken:
            loop.call_soon_threadsafe(event.set)

    @contextmanager
    def watch(self, execution_arn: str) -> Iterator[asyncio.Event]:
        """An event set whenever a commit adds to the execution's history (on the running event loop)."""
        watcher = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._watchers.setdefault(execution_arn, []).append(watcher)
        try:
            yield watcher[1]
        finally:
            with self._lock:
                watchers = self._watchers[execution_arn]
                watchers.remove(watcher)
                if not watchers:
                    del self._watchers[execution_arn]
