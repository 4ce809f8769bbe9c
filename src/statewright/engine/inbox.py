"""The engine's inbox: everything other threads hand the engine thread, under one lock.

Commands from the API and the integrations (the API's bounded by ``Limits.inbox_commands_max``: past it InboxFull,
and callers back off), dispatches an integration could not take, word that the integrations have room again,
shard changes from the membership, stages another node answered, and continuations back from the heavy lane. The
engine thread takes the changes at the start of each tick (``take_changes``), then commands within the tick's
budget (``take_work``), and sleeps on the inbox when there is nothing to do (``wait``). Every method is
thread-safe. Must not import the API, the integrations or the cluster.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ..store.base import Dispatch
from .batch import Reply
from .commands import Command, InboxFull


@dataclass(slots=True)
class Changes:
    """What the engine thread applies before a tick's work: given back dispatches, room again, shard changes
    (each a function of the tick's time) and remote stages answered (the transfer and its future)."""

    given_back: list[Dispatch] = field(default_factory=list)
    room_again: bool = False
    ownership: list[Callable[[int], None]] = field(default_factory=list)
    forwarded: list[tuple[Any, Future]] = field(default_factory=list)


class Inbox:
    def __init__(self, commands_max: int) -> None:
        self._commands_max = commands_max
        self._lock = threading.Condition()
        self._commands: deque[tuple[Command, Reply]] = deque()
        self._decided: deque[Command] = deque()  # continuations back from the heavy lane
        self._changes = Changes()
        self._stopping = False

    def __len__(self) -> int:
        return len(self._commands)

    def submit(self, command: Command, reply: Reply, throttle: bool) -> None:
        with self._lock:
            if throttle and len(self._commands) >= self._commands_max:
                raise InboxFull(f"the engine has {len(self._commands)} commands waiting")
            self._commands.append((command, reply))
            self._lock.notify()

    def decided(self, command: Command) -> None:
        with self._lock:
            self._decided.append(command)
            self._lock.notify()

    def give_back(self, dispatch: Dispatch) -> None:
        with self._lock:
            self._changes.given_back.append(dispatch)
            self._lock.notify()

    def room_again(self) -> None:
        with self._lock:
            self._changes.room_again = True
            self._lock.notify()

    def change_ownership(self, change: Callable[[int], None]) -> None:
        with self._lock:
            self._changes.ownership.append(change)
            self._lock.notify()

    def forwarded(self, transfer: Any, done: Future) -> None:
        with self._lock:
            self._changes.forwarded.append((transfer, done))
            self._lock.notify()

    def wake(self) -> None:
        with self._lock:
            self._lock.notify()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify()

    def wait(self, timeout_s: Callable[[], float], busy: bool) -> bool:
        """Sleep until something arrives (``timeout_s()`` at most) unless something waits already or the engine
        is ``busy``; returns False once the engine is stopping."""
        with self._lock:
            if self._stopping:
                return False
            changes = self._changes
            if not (busy or self._commands or self._decided or changes.given_back or changes.room_again
                    or changes.ownership or changes.forwarded):
                self._lock.wait(timeout_s())
            return not self._stopping

    def take_changes(self) -> Changes:
        with self._lock:
            changes, self._changes = self._changes, Changes()
        return changes

    def take_work(self, work: list[tuple[Any, Reply]], budget: int) -> None:
        """Append to ``work``, within ``budget`` items in all: the lane's continuations, then commands in order."""
        with self._lock:
            while self._decided and len(work) < budget:
                work.append((self._decided.popleft(), None))
            while self._commands and len(work) < budget:
                work.append(self._commands.popleft())

    def decided_waiting(self) -> bool:
        with self._lock:
            return bool(self._decided)
