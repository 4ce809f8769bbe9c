"""A shard's timer window: the timers due in the next minutes, held in memory as a cache of the timer rows.

The rows are the truth (written and deleted in transition commits). The window loads rows ahead of time and a
commit offers its new timers to it. Invariant: every row whose key (fire_at_ms, then the store's order) is within
the loaded bound is in the heap or has been popped; a row beyond it stays on disk until a refill reaches it, so
months-away timers cost no memory. Loads are paged (``Limits.refill_rows_max``), so a shard with a million
overdue timers after an outage loads them oldest first, a page at a time as the heap drains. Firing a timer only
proposes an event: the decider ignores it if the execution no longer expects that timer, so a timer in the heap
twice (a reload after ``forget``) is harmless.

The timers due are served per account (the account their execution's ARN names), in turn: a burst of one account's
timers due in the same second takes its turn beside another account's, not the whole window ahead of them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from ..store.base import TimerRow
from .limits import Limits
from .scheduler import InTurn, Taker, account_of

WINDOW_MS = 120_000  # how far ahead rows are loaded
REFILL_MARGIN_MS = 30_000  # load the next stretch when the horizon is this close

TimerKey = tuple[int, str, str]  # (fire_at_ms, execution_arn, timer_id)
# How a heap holds a timer: (fire_at_ms, start_ms of its execution, execution_arn, timer_id), the order timers fire
# in. Timers due together fire in the order their executions started, which is the order of the executions' rows:
# a burst's commits then write rows that lie close together, not scattered over the table (a quarter of the pages
# per commit, on SQLite).
Entry = tuple[int, int, str, str]
# (shard, after_ms, until_ms, limit, after_key) -> rows, as Store.due_timers
Loader = Callable[[int, int, int, int, tuple[Any, str] | None], list[TimerRow]]


class TimerWindow:
    def __init__(self, shard_id: int, limits: Limits | None = None) -> None:
        self.shard_id = shard_id
        self._limits = limits or Limits()
        self._heaps: dict[str, list[Entry]] = {}  # by account; an account with no timer loaded holds none
        self._size = 0
        # The loaded bound: with a key, the last row of a full page (rows after it are not loaded yet); otherwise
        # every row due up to ``_until_ms`` is loaded. Both None: nothing loaded, every row is on disk.
        self._until_ms: int | None = None
        self._last_key: tuple[int, Any, str] | None = None  # (fire_at_ms, *TimerRow.after_key)
        # Timers offered at the loaded bound's millisecond: the next page may hold them too, and skips them
        self._at_bound: set[tuple[str, str]] = set()

    def __len__(self) -> int:
        return self._size

    @property
    def loaded(self) -> bool:
        return self._until_ms is not None or self._last_key is not None

    @property
    def horizon_ms(self) -> int:
        """Every row due up to this is loaded (-1 before the first load)."""
        if self._last_key is not None:
            return self._last_key[0] - 1
        return -1 if self._until_ms is None else self._until_ms

    def refill(self, now_ms: int, load: Loader) -> None:
        """Load the next page of rows when the horizon is near or the last page was full, unless the heap already
        holds a page's worth (it drains first: memory stays bounded by the page size, not by what is due)."""
        limit = self._limits.refill_rows_max
        if self._size >= limit:
            return
        if self._last_key is None and self._until_ms is not None and now_ms + REFILL_MARGIN_MS < self._until_ms:
            return
        until_ms = now_ms + WINDOW_MS
        if self._last_key is not None:
            rows = load(self.shard_id, self._last_key[0], until_ms, limit, self._last_key[1:])
        else:
            rows = load(self.shard_id, -1 if self._until_ms is None else self._until_ms, until_ms, limit, None)
        bound_ms = None if self._last_key is None else self._last_key[0]
        for row in rows:
            if row.fire_at_ms != bound_ms or (row.execution_arn, row.timer_id) not in self._at_bound:
                self._push((row.fire_at_ms, row.start_ms, row.execution_arn, row.timer_id))
        if len(rows) == limit:
            last = rows[-1]
            self._last_key = (last.fire_at_ms, *last.after_key)
        else:
            self._last_key, self._until_ms = None, until_ms
        if self._last_key is None or self._last_key[0] != bound_ms:
            self._at_bound.clear()

    def offer(self, fire_at_ms: int, execution_arn: str, timer_id: str, start_ms: int) -> None:
        """A newly committed timer: keep it if it falls within the loaded bound (later ones load in time). A heap
        at ``timer_window_max`` is dropped and reloaded page by page instead of growing. One due at the loaded
        bound's millisecond is kept (where it sorts among that millisecond's rows is the store's order), and the
        next page, which may hold it too, skips it."""
        if self._last_key is not None:
            inside = fire_at_ms <= self._last_key[0]
            if fire_at_ms == self._last_key[0]:
                self._at_bound.add((execution_arn, timer_id))
        else:
            inside = self._until_ms is not None and fire_at_ms <= self._until_ms
        if not inside:
            return
        if self._size >= self._limits.timer_window_max:
            self.forget()
            return
        self._push((fire_at_ms, start_ms, execution_arn, timer_id))

    def _push(self, entry: Entry) -> None:
        account = account_of(entry[2])
        heap = self._heaps.get(account)
        if heap is None:
            heap = self._heaps[account] = []
        heapq.heappush(heap, entry)
        self._size += 1

    def due_counts(self, now_ms: int) -> dict[str, int]:
        """How many timers due by ``now_ms`` each account has loaded (the simulator's fairness checker)."""
        counts = {account: sum(1 for key in heap if key[0] <= now_ms) for account, heap in self._heaps.items()}
        return {account: count for account, count in counts.items() if count}

    def next_due_ms(self) -> int | None:
        return min((heap[0][0] for heap in self._heaps.values() if heap), default=None)

    def earliest(self) -> dict[str, int]:
        """Each account's earliest timer loaded (the simulator's order checker)."""
        return {account: heap[0][0] for account, heap in self._heaps.items() if heap}

    def planted_lose_rows(self, until_ms: int) -> None:
        """Test-only planted bugs (Engine.planted "refill-skips-overdue", "skip-timers-at-start"): act as if every
        row due up to ``until_ms`` were loaded and fired, losing them."""
        self._heaps.clear()
        self._size = 0
        self._until_ms, self._last_key = until_ms, None

    def forget(self) -> None:
        """Drop the cache (the shard was lost, or a commit's outcome is unknown); the next refill reloads it from
        the rows, overdue ones first."""
        self._heaps.clear()
        self._size = 0
        self._until_ms = self._last_key = None
        self._at_bound.clear()


def pop_due(windows: list[TimerWindow], now_ms: int, limit: int, in_turn: InTurn) -> list[TimerKey]:
    """At most ``limit`` timers due by ``now_ms`` from these windows (a node's shards): the accounts' shares equal
    (what one leaves going to the others, ``in_turn``), each account's earliest first whichever shard holds them.
    So a burst fires in due order across the shards, and those due together in the order of their rows (Entry)."""
    due: list[TimerKey] = []
    if limit <= 0:
        return due
    held: dict[str, list[tuple[TimerWindow, str, list[Entry]]]] = {}  # by account: the windows' heaps with one due
    for window in windows:
        if window._size:
            for account, heap in window._heaps.items():
                if heap[0][0] <= now_ms:
                    held.setdefault(account, []).append((window, account, heap))
    emptied: list[tuple[TimerWindow, str]] = []

    def taker(heaps: list[tuple[TimerWindow, str, list[Entry]]]) -> Taker:
        tops = [(heap[0], index) for index, (_, _, heap) in enumerate(heaps)]  # each heap's earliest, merged
        heapq.heapify(tops)

        def take(asked: int) -> int:
            got = 0
            while got < asked and tops:
                window, account, heap = heaps[tops[0][1]]
                fire_at_ms, _, arn, timer_id = heapq.heappop(heap)
                window._size -= 1
                due.append((fire_at_ms, arn, timer_id))
                got += 1
                if heap and heap[0][0] <= now_ms:
                    heapq.heapreplace(tops, (heap[0], tops[0][1]))
                else:
                    heapq.heappop(tops)
                    if not heap:
                        emptied.append((window, account))
            return got
        return take
    in_turn.take(held, taker, limit)
    for window, account in emptied:  # an account with no timer loaded holds no heap
        del window._heaps[account]
    return due
