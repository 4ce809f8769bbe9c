"""A shard's timer window: the timers due in the next minutes, held in memory as a cache of the timer rows.

The rows are the truth (written and deleted in transition commits). The window loads rows ahead of time and a
commit offers its new timers to it; a timer due beyond the loaded horizon stays on disk until the horizon
moves, so months-away timers cost no memory. Firing a timer only proposes an event: the decider ignores it if
the execution no longer expects that timer.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from ..store.base import TimerRow

WINDOW_MS = 120_000  # how far ahead rows are loaded
REFILL_MARGIN_MS = 30_000  # load the next stretch when the horizon is this close


class TimerWindow:
    def __init__(self, shard_id: int) -> None:
        self.shard_id = shard_id
        self._heap: list[tuple[int, str, str]] = []
        self.loaded_until_ms: int | None = None  # None: nothing loaded yet, every row is still on disk

    def __len__(self) -> int:
        return len(self._heap)

    def refill(self, now_ms: int, load: Callable[[int, int, int], list[TimerRow]]) -> None:
        """Load rows due up to now + WINDOW_MS when the horizon is near; overdue rows come in on the first load."""
        if self.loaded_until_ms is not None and now_ms + REFILL_MARGIN_MS < self.loaded_until_ms:
            return
        after = -1 if self.loaded_until_ms is None else self.loaded_until_ms
        until = now_ms + WINDOW_MS
        for row in load(self.shard_id, after, until):
            heapq.heappush(self._heap, (row.fire_at_ms, row.execution_arn, row.timer_id))
        self.loaded_until_ms = until

    def offer(self, fire_at_ms: int, execution_arn: str, timer_id: str) -> None:
        """A newly committed timer: keep it if it falls inside the loaded horizon (later ones load in time)."""
        if self.loaded_until_ms is not None and fire_at_ms <= self.loaded_until_ms:
            heapq.heappush(self._heap, (fire_at_ms, execution_arn, timer_id))

    def pop_due(self, now_ms: int, limit: int) -> list[tuple[int, str, str]]:
        due = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms and len(due) < limit:
            due.append(heapq.heappop(heap))
        return due

    def next_due_ms(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def forget(self) -> None:
        """Drop the cache (the shard was lost); the rows stay on disk for the next owner."""
        self._heap.clear()
        self.loaded_until_ms = None
