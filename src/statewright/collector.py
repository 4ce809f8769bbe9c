"""When the garbage collector's full passes run: while the engine has nothing to do, not wherever CPython's count
falls.

A full pass walks every tracked object with every thread stopped: 80-110 ms on a server holding 20,000 waiting
executions, and CPython starts one whenever the objects promoted to the oldest generation since the last pass
reach a quarter of it. Under a burst (20,000 task results at once) that is every second or two, and each pass is a
neighbour's p99 (W15 (f): 57 passes, 3.4 s in all, during one run). The young generations are left to CPython
(their passes last 1-10 ms and collect nearly all cyclic garbage); the oldest generation's automatic pass is turned
off and ``Collector`` runs it itself:

- a pass is owed once the heap has grown by ``growth`` since the last one (pymalloc's allocated blocks, read at
  most once a second: reading them walks the arenas, about 2 ms for 18 million blocks), or ``every_s`` after it;
- an owed pass runs when the engine is about to sleep with nothing waiting (``quiet``), or, if the engine never
  is, ``defer_s`` after it became owed (``busy``, after each tick): a burst holds it back that long at most.

Process-wide (the collector's thresholds are the interpreter's): ``statewright serve`` installs one; tests and
embedded engines keep CPython's own.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import Callable

log = logging.getLogger("statewright.collector")

# gc.set_threshold takes C ints: a count of young passes the oldest generation never reaches.
NEVER = 2**31 - 1


class Collector:
    def __init__(self, *, growth: float = 0.25, every_s: float = 60.0, defer_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, blocks: Callable[[], int] = sys.getallocatedblocks,
                 collect: Callable[[], object] = gc.collect,
                 observed: Callable[[float], object] | None = None) -> None:
        """``observed``: told how long each pass took, in seconds (a metric)."""
        self.growth, self.every_s, self.defer_s = growth, every_s, defer_s
        self._clock, self._blocks, self._collect, self._observed = clock, blocks, collect, observed
        self._last_s = clock()
        self._base_blocks = blocks()
        self._checked_s = self._last_s
        self._owed_since_s: float | None = None
        self._thresholds: tuple[int, int, int] | None = None
        self.passes = 0

    def install(self) -> None:
        """Turn CPython's automatic full passes off (``uninstall`` turns them back on)."""
        self._thresholds = gc.get_threshold()
        gc.set_threshold(self._thresholds[0], self._thresholds[1], NEVER)

    def uninstall(self) -> None:
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None

    def quiet(self) -> bool:
        """The engine has nothing to do: run an owed pass now. Returns whether one ran (the engine looks at its
        inbox again before it sleeps)."""
        if self._owed():
            self._pass()
            return True
        return False

    def busy(self) -> None:
        """The engine ran a tick: run a pass owed for ``defer_s`` already."""
        if self._owed() and self._clock() - self._owed_since_s >= self.defer_s:
            self._pass()

    def _owed(self) -> bool:
        if self._owed_since_s is not None:
            return True
        now_s = self._clock()
        if now_s - self._last_s >= self.every_s:
            self._owed_since_s = now_s
        elif now_s - self._checked_s >= 1.0:
            self._checked_s = now_s
            if self._blocks() >= self._base_blocks * (1 + self.growth):
                self._owed_since_s = now_s
        return self._owed_since_s is not None

    def _pass(self) -> None:
        started_s = self._clock()
        self._collect()
        self._last_s = self._checked_s = self._clock()
        self._base_blocks = self._blocks()
        self._owed_since_s = None
        self.passes += 1
        if self._observed is not None:
            self._observed(self._last_s - started_s)
        log.debug("full collection: %.1f ms", (self._last_s - started_s) * 1000)
