"""The engine's inbox: everything other threads hand the engine thread, under one lock.

Commands from the API, its calls on executions (StartExecution, StopExecution, RedriveExecution) apart from its
task answers (SendTaskSuccess, SendTaskFailure, SendTaskHeartbeat, an activity task handed to a worker), each
bounded by ``Limits.inbox_commands_max`` (past it InboxFull, and callers back off), and from the integrations (their
results, tied to dispatches the outbox window bounds already), each in a queue of its own so that a tick serves
them in turn (scheduler.py): a flood of task answers does not hold a start back. Every queue is split by account
(the account an execution's ARN names) and the accounts are served in turn the same way; the API's two are bounded
per account: one account's flood of starts waits behind itself and is throttled alone, not in front of another
account's calls, and its integrations' results and the lane's decisions for it wait behind its own.
Also dispatches an integration
could not take, word that the integrations have room again, shard changes from the membership, stages another node
answered, and decisions back from the heavy lane. The engine thread takes the changes at the start of each tick
(``take_changes``), then work within the tick's budget (``take_commands``, ``take_answers``, ``take_results``,
``take_decided``), and sleeps on the inbox when there is nothing to do (``wait``). Every method is thread-safe.
Must not import the API, the integrations or the cluster.
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
from .commands import Command, InboxFull, RedriveExecution, StartExecution, StopExecution
from .scheduler import InTurn, Taker, account_of

_CALLS = (StartExecution, StopExecution, RedriveExecution)  # the API's calls on executions; the rest answer tasks


@dataclass(slots=True)
class Changes:
    """What the engine thread applies before a tick's work: given back dispatches, room again, shard changes
    (each a function of the tick's time) and remote stages answered (the transfer and its future)."""

    given_back: list[Dispatch] = field(default_factory=list)
    room_again: bool = False
    ownership: list[Callable[[int], None]] = field(default_factory=list)
    forwarded: list[tuple[Any, Future]] = field(default_factory=list)


def _command_arn(item: tuple[Any, Reply]) -> str:
    return item[0].arn


class AccountQueues:
    """One queue per account, served in turn (``take_fairly`` between them), each holding at most ``each_max``
    (None: unbounded); ``arn_of``: the ARN an item is of, whose account it waits for. Not thread-safe: the inbox's
    lock guards it (the transfers' is the engine thread's alone)."""

    def __init__(self, each_max: int | None, arn_of: Callable[[Any], str] = _command_arn) -> None:
        self._each_max = each_max
        self._arn_of = arn_of
        self._queues: dict[str, deque[Any]] = {}
        self._in_turn = InTurn()

    def __bool__(self) -> bool:
        return bool(self._queues)

    def counts(self) -> dict[str, int]:
        """What each account has waiting."""
        return {account: len(queue) for account, queue in self._queues.items()}

    def prepend(self, items: list[Any]) -> None:
        """Put ``items`` back at the head of their accounts' queues, in their order."""
        for item in reversed(items):
            account = account_of(self._arn_of(item))
            queue = self._queues.get(account)
            if queue is None:
                queue = self._queues[account] = deque()
            queue.appendleft(item)

    def keep(self, wanted: Callable[[Any], bool]) -> None:
        """Drop every item not ``wanted``."""
        for account, queue in list(self._queues.items()):
            kept = deque(item for item in queue if wanted(item))
            if kept:
                self._queues[account] = kept
            else:
                del self._queues[account]

    def append(self, item: Any) -> None:
        account = account_of(self._arn_of(item))
        queue = self._queues.get(account)
        waiting = 0 if queue is None else len(queue)
        if self._each_max is not None and waiting >= self._each_max:
            raise InboxFull(f"the engine has {waiting} commands of this kind waiting for this account")
        if queue is None:
            queue = self._queues[account] = deque()
        queue.append(item)

    def take(self, work: list[Any], n: int) -> int:
        """At most ``n`` items into ``work``, the accounts' shares equal (what one leaves going to the others),
        each account's oldest first."""
        def taker(queue: deque[Any]) -> Taker:
            def take(asked: int) -> int:
                got = min(asked, len(queue))
                work.extend(queue.popleft() for _ in range(got))
                return got
            return take
        return self._in_turn.take(self._queues, taker, n)


class Inbox:
    def __init__(self, commands_max: int) -> None:
        self._lock = threading.Condition()
        self._commands = AccountQueues(commands_max)  # the API's calls on executions (throttled, per account)
        self._answers = AccountQueues(commands_max)  # the API's task answers (throttled, per account)
        self._results = AccountQueues(None)  # the integrations' (never throttled: bounded by the outbox window)
        self._decided = AccountQueues(None)  # decisions back from the heavy lane (bounded by its jobs)
        self._changes = Changes()
        self._stopping = False
        self.calls_submitted = 0  # the API's commands so far (read without the lock: a tick only compares it)

    def submit(self, command: Command, reply: Reply, throttle: bool) -> None:
        with self._lock:
            if not throttle:
                self._results.append((command, reply))
            else:
                (self._commands if isinstance(command, _CALLS) else self._answers).append((command, reply))
                self.calls_submitted += 1
            self._lock.notify()

    def decided(self, command: Command, reply: Reply) -> None:
        with self._lock:
            self._decided.append((command, reply))
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

    def wait(self, timeout_s: Callable[[], float], busy: bool, idle: Callable[[], bool] | None = None) -> bool:
        """Sleep until something arrives (``timeout_s()`` at most) unless something waits already or the engine
        is ``busy``; returns False once the engine is stopping. ``idle``: called first when nothing waits (outside
        the lock, so that commands keep arriving); if it did something, return without sleeping."""
        with self._lock:
            if self._stopping or busy or self._waiting():
                return not self._stopping
        if idle is not None and idle():
            return True
        with self._lock:
            if not (self._stopping or self._waiting()):
                self._lock.wait(timeout_s())
            return not self._stopping

    def _waiting(self) -> bool:
        changes = self._changes
        return bool(self._commands or self._answers or self._results or self._decided or changes.given_back
                    or changes.room_again or changes.ownership or changes.forwarded)

    def counts(self) -> list[dict[str, int]]:
        """What each account has waiting in each queue: the API's calls and task answers, the integrations'
        results, the lane's decisions (the simulator's fairness checker)."""
        with self._lock:
            return [queues.counts() for queues in (self._commands, self._answers, self._results, self._decided)]

    def take_changes(self) -> Changes:
        with self._lock:
            changes, self._changes = self._changes, Changes()
        return changes

    def take_commands(self, work: list[tuple[Any, Reply]], n: int) -> int:
        """Append at most ``n`` of the API's calls on executions to ``work``, the accounts in turn; returns how
        many."""
        with self._lock:
            return self._commands.take(work, n)

    def take_answers(self, work: list[tuple[Any, Reply]], n: int) -> int:
        """Append at most ``n`` of the API's task answers to ``work``, the accounts in turn; returns how many."""
        with self._lock:
            return self._answers.take(work, n)

    def calls_waiting(self) -> bool:
        """Whether any of the API's commands wait (read without the lock: a hint for the tick's length)."""
        return bool(self._commands) or bool(self._answers)

    def take_results(self, work: list[tuple[Any, Reply]], n: int) -> int:
        """Append at most ``n`` of the integrations' commands to ``work``, the accounts in turn; returns how many."""
        with self._lock:
            return self._results.take(work, n)

    def take_decided(self, work: list[tuple[Any, Reply]], n: int) -> int:
        """Append at most ``n`` of the lane's continuations to ``work``, the accounts in turn; returns how many."""
        with self._lock:
            return self._decided.take(work, n)

    def decided_waiting(self) -> bool:
        with self._lock:
            return bool(self._decided)
