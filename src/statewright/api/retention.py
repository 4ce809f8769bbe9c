"""Retention in the server: the sweep (engine/retention.py) run in the background, and whether an execution is
past its retention for the API.

A timer on the event loop runs one bounded sweep at a time on the service's store threads, never on the engine
thread, over the shards this node's engine owns, at the range ids it holds them at. Time is the engine's clock
(virtual with ``--clock virtual``). Catching up (a full batch), the sweep takes at most ``SWEEP_SHARE`` of the time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..engine.retention import RetentionSettings, Sweep
from ..store.base import StoreUnavailable
from ..store.payloads import Histories

if TYPE_CHECKING:
    from ..decider.execution import ExecutionState
    from ..engine.engine import Engine

log = logging.getLogger("statewright.retention")

SWEEP_S = 1.0  # how often a sweep runs while there is nothing to catch up on
# Catching up (a full batch), the sweep takes at most this share of the time, so W1 keeps its pace beside it: it
# shares the process (the GIL) and the disk with the engine, and the work it does is never urgent.
SWEEP_SHARE = 0.2


class Retention:
    def __init__(self, engine: Engine, histories: Histories, settings: RetentionSettings) -> None:
        """``histories``: where histories are read from and compacted to (no payload store: no compaction, as in
        a server of the tests)."""
        self._engine = engine
        self.histories = histories
        self.settings = settings
        self._sweep = Sweep(histories, settings)
        self._store_call: Callable[..., Awaitable[Any]] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._sweeping: asyncio.Task | None = None
        self._failing = False  # the last sweep failed on the store: the next failure is not said again

    @property
    def compacts(self) -> bool:
        return self._sweep.compacts

    @property
    def payloads_location(self) -> str | None:
        payloads = self.histories.payloads
        return None if payloads is None else payloads.location

    def expired(self, execution: ExecutionState, now_ms: int) -> bool:
        """Whether a closed execution is past its retention: gone for the API, whether or not deleted yet."""
        return execution.stop_ms is not None and not execution.is_open \
            and now_ms - execution.stop_ms >= self.settings.retention_ms

    # -- the background sweep

    def attach(self, loop: asyncio.AbstractEventLoop, store_call: Callable[..., Awaitable[Any]]) -> None:
        """Sweep from ``loop``, through ``store_call`` (Service.store_call: the API's store threads)."""
        self._store_call = store_call
        self._timer = loop.call_later(SWEEP_S, self._start_sweep)

    def detach(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._sweeping is not None:
            self._sweeping.cancel()

    def _start_sweep(self) -> None:
        self._sweeping = asyncio.ensure_future(self._sweep_and_schedule())

    async def _sweep_and_schedule(self) -> None:
        busy = False
        began = time.monotonic()
        try:
            assert self._store_call is not None
            busy = await self._store_call(self.sweep, self._engine.clock())
            self._failing = False
        except StoreUnavailable as exc:  # the store or the payload store: try again next time (said once)
            self._engine.metrics.retention_failures.inc()
            if not self._failing:
                log.warning("retention sweep failed, retrying until it works: %s", exc)
            self._failing = True
        except Exception:
            self._engine.metrics.retention_failures.inc()
            log.exception("retention sweep failed, retrying")
        pause_s = (time.monotonic() - began) * (1 / SWEEP_SHARE - 1) if busy else SWEEP_S
        self._timer = asyncio.get_running_loop().call_later(pause_s, self._start_sweep)

    def sweep(self, now_ms: int) -> bool:
        """One bounded sweep of the shards owned now; whether a batch was full (more is waiting)."""
        swept = self._sweep(self._engine.range_ids.copy(), now_ms)
        self._engine.metrics.retention_swept.labels("deleted").inc(len(swept.deleted))
        self._engine.metrics.retention_swept.labels("compacted").inc(len(swept.compacted))
        return swept.busy
