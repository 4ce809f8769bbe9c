"""The heavy lane: the continuations of executions whose evaluation is heavy, decided in a process of their own.

One state's evaluation (pure-Python JSONata, under the interpreter lock) cannot be interrupted, so an execution
looping through heavy states on the engine thread delays the commands of every other execution in the ticks it
lands in, however far apart the fairness continuations (flows.py) space its steps. An execution whose last step
stopped on its evaluation share (``Engine.heavy``) takes its next continuation here instead: the lane decides it
in another process that runs at the lowest CPU priority (nice 19), so it spends what the other executions leave
idle, and the engine thread commits the decision like any other once it is back, if the execution has not moved
on meanwhile (then the timer is applied again, inline, to the state as it is: one decision per timer commits).

The lane holds nothing durable and decides as the engine would (the same decider over the same stored state, the
same services): a lane that dies loses only decisions not committed yet, whose timers are still rows, and the
engine decides inline until a new lane process has started.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

from ..asl.definition import Definition, parse_definition
from . import decider
from .commands import FireTimer
from .execution import ExecutionState
from .limits import Limits
from .step import Decision, Services
from .tokens import TaskTokens

log = logging.getLogger(__name__)

PARENT_CHECK_S = 1.0  # how often the lane's process checks that the server is still there
DEFINITIONS_MAX = 100  # parsed definitions the lane process keeps (least recently used leave first)


@dataclass(frozen=True, slots=True)
class Decided(FireTimer):
    """A continuation timer's firing the lane decided, back for the engine thread to apply: ``result`` is the
    Decision (None: the execution did not expect the timer) or the exception deciding it raised, on the state at
    ``version``."""

    version: int
    result: Decision | BaseException | None


class Lane(Protocol):
    def submit(self, state: ExecutionState, definition_key: tuple[str, str], text: Callable[[], str],
               mockable: bool, timer_id: str, now_ms: int, tokens: TaskTokens,
               activities: Collection[str]) -> None: ...

    def close(self) -> None: ...


# (the engine's services, its limits, where each Decided goes) -> a lane
LaneFactory = Callable[[Services, Limits, Callable[[Decided], None]], Lane]


class HeavyLane:
    """The engine's side of the lane: one process, started at the first heavy continuation and again after one
    died. ``services`` are the engine's; ``landed`` is called (on a thread of the pool) with each Decided."""

    def __init__(self, services: Services, limits: Limits, landed: Callable[[Decided], None]) -> None:
        # What the process needs to decide as the engine does, sent once: the budgets, the fairness bounds and
        # the mocks (the token keys and the activities change, so each job carries them).
        self._settings = (replace(services, mint_token=None, activities=frozenset(), budget=None,
                                  resource_check=None), limits)
        self._landed = landed
        self._pool: ProcessPoolExecutor | None = None
        self._sent: set[tuple[str, str]] = set()  # definitions the current process has parsed
        self._lock = threading.Lock()

    def submit(self, state: ExecutionState, definition_key: tuple[str, str], text: Callable[[], str],
               mockable: bool, timer_id: str, now_ms: int, tokens: TaskTokens, activities: Collection[str]) -> None:
        """Decide ``timer_id`` firing for ``state`` at ``now_ms`` in the lane. ``text`` reads the definition's
        text, called only when the lane process has not parsed it yet."""
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(1, multiprocessing.get_context("spawn"), _start,
                                                 self._settings)
                self._sent = set()
            pool, sent = self._pool, self._sent
        definition = None if definition_key in sent else text()
        sent.add(definition_key)
        keys, current = tokens.key_set
        job = (state.to_blob(), definition_key, definition, mockable, timer_id, now_ms, keys, current,
               frozenset(activities))
        try:
            future = pool.submit(_decide, job)
        except RuntimeError as exc:  # the process died (a broken pool refuses new work): start another
            self._lost(pool)
            future = Future()
            future.set_exception(exc)
        arn, version = state.arn, state.version
        future.add_done_callback(lambda done: self._done(pool, arn, timer_id, version, done))

    def _done(self, pool: ProcessPoolExecutor, arn: str, timer_id: str, version: int, done: Future) -> None:
        exc = done.exception()
        if exc is not None:
            self._lost(pool)
        self._landed(Decided(arn, timer_id, version, done.result() if exc is None else exc))

    def _lost(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                log.warning("the heavy lane's process failed; starting another at the next heavy step")
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


# -- in the lane process

_services: Services | None = None
_limits: Limits | None = None
_definitions: dict[tuple[str, str], Definition] = {}


def _start(services: Services, limits: Limits) -> None:
    global _services, _limits
    os.nice(19)  # the lowest priority: the lane runs on what the server's own threads leave idle
    _services, _limits = services, limits
    threading.Thread(target=_exit_with, args=(os.getppid(),), name="heavy-lane-parent", daemon=True).start()


def _exit_with(parent: int) -> None:
    """Exit once the server is gone, however it went (a SIGKILL leaves a pool's process waiting for ever)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _decide(job: tuple) -> Decision | None:
    blob, key, text, mockable, timer_id, now_ms, keys, current, activities = job
    assert _services is not None and _limits is not None
    definition = _definitions.pop(key, None)
    if definition is None:
        if text is None:
            raise LookupError(f"the heavy lane has not parsed definition {key}")
        definition = parse_definition(text, mockable=mockable)
    _definitions[key] = definition  # last: the most recently used
    while len(_definitions) > DEFINITIONS_MAX:
        del _definitions[next(iter(_definitions))]
    services = replace(_services, mint_token=TaskTokens(keys, current).mint, activities=activities,
                       budget=_limits.budgets(time.perf_counter))
    return decider.fire_timer(ExecutionState.from_blob(blob), definition, timer_id, now_ms, services)
