"""What the ``history`` edge hands over (the committed history events of a tick), waiting for a consumer off the
engine thread: the execution logs, the traces. Bounded by the events it holds: past the bound the oldest entries
are dropped, and counted. Not locked: its owner holds its own lock around it."""

from __future__ import annotations

from collections import deque

from ..engine.batch import Logged


class HistoryBacklog:
    def __init__(self, events_max: int) -> None:
        self.events_max = events_max
        self.dropped_events = 0
        self._entries: deque[Logged] = deque()
        self._events = 0

    def __bool__(self) -> bool:
        return bool(self._entries)

    def add(self, entries: list[Logged]) -> None:
        self._entries.extend(entries)
        self._events += sum(len(entry[3]) for entry in entries)
        while self._events > self.events_max:
            dropped = len(self._entries.popleft()[3])
            self._events -= dropped
            self.dropped_events += dropped

    def take(self) -> list[Logged]:
        """Everything waiting, oldest first; the backlog is then empty."""
        taken, self._entries, self._events = list(self._entries), deque(), 0
        return taken
