"""Retention of closed executions: their histories compacted into the payload store after ``compact_after_ms``,
then the executions deleted after ``retention_ms`` (their names free again), both in the background; and reading
a history wherever it is.

A timer on the event loop runs one bounded sweep at a time on the service's store threads, never on the engine
thread: at most ``EXPIRED_BATCH_MAX`` deletions and ``COMPACTED_BATCH_MAX`` compactions, each batch one transaction,
over the shards this node's engine owns, at the range ids it holds them at (the store refuses the rows of a shard
a new owner took since, so only the owner sweeps a shard). Time is the engine's clock (virtual with
``--clock virtual``).

Crash safety. Compaction writes the object durably first, then one transaction deletes the history rows and records
the object's key on the execution row: killed before that commit, the rows stay and the next sweep writes the same
object again; killed after, the row points at a complete object. Deletion removes the rows first, the object after:
killed between, an object nobody points at is left behind (overwritten if the name is used and compacted again),
never a history that reads wrong.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.execution import DAY_MS
from ..integrations.payload_store import PayloadStore, decode_history, encode_history, history_key
from ..store.base import ClosedExecution, Store, StoreUnavailable

if TYPE_CHECKING:
    from ..engine.core import Engine
    from ..engine.execution import ExecutionState

log = logging.getLogger("statewright.retention")

RETENTION_DAYS = 90  # as AWS: a closed execution's history and name are kept this long
COMPACT_AFTER_DAYS = 2
SWEEP_S = 1.0  # how often a sweep runs while there is nothing to catch up on
# Catching up (a full batch), the sweep takes at most this share of the time, so W1 keeps its pace beside it: it
# shares the process (the GIL) and the disk with the engine, and the work it does is never urgent.
SWEEP_SHARE = 0.2
EXPIRED_BATCH_MAX = 500  # executions deleted per sweep (one transaction)
COMPACTED_BATCH_MAX = 100  # histories compacted per sweep (as many objects, then one transaction)
HISTORY_EVENTS_MAX = 1 << 62  # a compaction reads the whole history (at most 25,000 events)


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    retention_ms: int = RETENTION_DAYS * DAY_MS
    compact_after_ms: int | None = COMPACT_AFTER_DAYS * DAY_MS  # None: histories stay in the store's tables


class Retention:
    def __init__(self, store: Store, engine: Engine, payloads: PayloadStore | None,
                 settings: RetentionSettings) -> None:
        """``payloads`` None: no payload store, so no compaction (a server of the tests)."""
        self._store = store
        self._engine = engine
        self._payloads = payloads
        self.settings = settings
        self._store_call: Callable[..., Awaitable[Any]] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._sweeping: asyncio.Task | None = None

    @property
    def compacts(self) -> bool:
        return self._payloads is not None and self.settings.compact_after_ms is not None

    @property
    def payloads_location(self) -> str | None:
        return None if self._payloads is None else self._payloads.location

    def expired(self, execution: ExecutionState, now_ms: int) -> bool:
        """Whether a closed execution is past its retention: gone for the API, whether or not deleted yet."""
        return execution.stop_ms is not None and not execution.is_open \
            and now_ms - execution.stop_ms >= self.settings.retention_ms

    def read_history(self, arn: str, after_event_id: int, limit: int, reverse: bool) -> list[dict[str, Any]]:
        """On a store thread: Store.read_history's page, from the payload store once the history is compacted."""
        location = self._store.history_location(arn)
        if location is None:
            return self._store.read_history(arn, after_event_id, limit, reverse)
        if self._payloads is None:
            raise StoreUnavailable(f"the history of {arn} is in a payload store; start the server with it")
        events = decode_history(self._payloads.get(location))  # ids ascending, as the store read them
        if reverse:
            bound = after_event_id or HISTORY_EVENTS_MAX
            return [event for event in reversed(events) if event["id"] < bound][:limit]
        return [event for event in events if event["id"] > after_event_id][:limit]

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
        except (StoreUnavailable, OSError) as exc:  # the store or the payload store: try again next time
            self._engine.metrics.retention_failures.inc()
            log.warning("retention sweep failed, retrying: %s", exc)
        except Exception:
            self._engine.metrics.retention_failures.inc()
            log.exception("retention sweep failed, retrying")
        pause_s = (time.monotonic() - began) * (1 / SWEEP_SHARE - 1) if busy else SWEEP_S
        self._timer = asyncio.get_running_loop().call_later(pause_s, self._start_sweep)

    def sweep(self, now_ms: int) -> bool:
        """One bounded sweep of the shards owned now; whether a batch was full (more is waiting)."""
        range_ids = self._engine.range_ids.copy()  # a snapshot: the store checks it again
        if not range_ids:
            return False
        busy = self._delete_expired(range_ids, now_ms)
        if self.compacts:
            busy = self._compact(range_ids, now_ms) or busy
        return busy

    def _delete_expired(self, range_ids: dict[int, int], now_ms: int) -> bool:
        store = self._store
        expired = store.expired_executions(list(range_ids), now_ms - self.settings.retention_ms, EXPIRED_BATCH_MAX)
        deleted = store.delete_executions(expired, range_ids)
        for execution in deleted:
            if execution.history_location is not None and self._payloads is not None:
                self._payloads.delete(execution.history_location)
        self._engine.metrics.retention_swept.labels("deleted").inc(len(deleted))
        return len(expired) == EXPIRED_BATCH_MAX

    def _compact(self, range_ids: dict[int, int], now_ms: int) -> bool:
        store, payloads, compact_after_ms = self._store, self._payloads, self.settings.compact_after_ms
        assert payloads is not None and compact_after_ms is not None
        ready = store.executions_to_compact(list(range_ids), now_ms - compact_after_ms,
                                            now_ms - self._engine.redrivable_ms, COMPACTED_BATCH_MAX)
        written: list[tuple[ClosedExecution, str]] = []
        for execution in ready:
            key = history_key(execution.arn)
            payloads.put(key, encode_history(store.read_history(execution.arn, 0, HISTORY_EVENTS_MAX, False)))
            written.append((execution, key))
        if written:
            compacted = store.compact_histories(written, range_ids)
            self._engine.metrics.retention_swept.labels("compacted").inc(len(compacted))
        return len(ready) == COMPACTED_BATCH_MAX
