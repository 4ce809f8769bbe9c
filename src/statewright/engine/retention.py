"""The retention sweep: closed executions' histories compacted into the payload store ``compact_after_ms`` after
they closed, and the executions deleted (their names free again) ``retention_ms`` after, in bounded batches over the
shards a node owns, at the range ids it holds them at (the store refuses the rows of a shard a new owner took since,
so only the owner sweeps a shard).

Synchronous, and given the time by its caller: the server runs one sweep at a time on the API's store threads
(api/retention.py), the simulator between its engines' ticks, on its virtual clock.

Compaction does not wait for the redrive window to end. A redrive of a compacted execution reads what it needs
through ``Histories`` (the object, then the rows), and its new events go to the history table as every
transition's do, with the ids that follow; once it closed again, the next compaction writes one object of all its
events (store/payloads.py). Bringing the history back into the table in the redrive's commit was the other way: it
would have made the commit path (and every ExecutionWrite) carry a history, a redrive race the sweep over the
row's location, and an execution redriven on day 13 rewrite thousands of rows; this way the commit path knows
nothing of compaction, and a redrive and a compaction may interleave in any order.

Crash safety. Compaction writes each object durably first, then one transaction deletes the history rows and points
the row at the object; the object it replaced (compacted before a redrive) is deleted after that commit. Killed
before the commit, the rows stay and the next sweep writes the same object again; killed after, the row points at a
complete object, and at worst the replaced one is left behind. Deletion removes the rows first, the object after:
killed between, an object nobody points at is left behind, never a history that reads wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..decider.execution import DAY_MS
from ..store.base import ClosedExecution
from ..store.payloads import Histories, encode_history, history_key

RETENTION_DAYS = 90  # as AWS: a closed execution's history and name are kept this long
COMPACT_AFTER_DAYS = 2
EXPIRED_BATCH_MAX = 500  # executions deleted per sweep (one transaction)
COMPACTED_BATCH_MAX = 100  # histories compacted per sweep (as many objects, then one transaction)


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    retention_ms: int = RETENTION_DAYS * DAY_MS
    compact_after_ms: int | None = COMPACT_AFTER_DAYS * DAY_MS  # None: histories stay in the store's tables


@dataclass(frozen=True, slots=True)
class Swept:
    deleted: list[ClosedExecution]
    compacted: list[ClosedExecution]
    busy: bool  # a batch was full: more is waiting


class Sweep:
    def __init__(self, histories: Histories, settings: RetentionSettings) -> None:
        """``histories``: the store and payload store to sweep (no payload store: no compaction)."""
        self.histories = histories
        self.settings = settings

    @property
    def compacts(self) -> bool:
        return self.histories.payloads is not None and self.settings.compact_after_ms is not None

    def __call__(self, range_ids: Mapping[int, int], now_ms: int) -> Swept:
        """One bounded sweep of the shards held at ``range_ids`` (a snapshot: the store checks it again)."""
        if not range_ids:
            return Swept([], [], False)
        deleted, more_expired = self._delete_expired(range_ids, now_ms)
        compacted, more_to_compact = self._compact(range_ids, now_ms) if self.compacts else ([], False)
        return Swept(deleted, compacted, more_expired or more_to_compact)

    def _delete_expired(self, range_ids: Mapping[int, int], now_ms: int) -> tuple[list[ClosedExecution], bool]:
        store, payloads = self.histories.store, self.histories.payloads
        expired = store.expired_executions(list(range_ids), now_ms - self._retention_ms(), EXPIRED_BATCH_MAX)
        deleted = store.delete_executions(expired, range_ids)
        for execution in deleted:
            if execution.history_location is not None and payloads is not None:
                payloads.delete(execution.history_location)
        return deleted, len(expired) == EXPIRED_BATCH_MAX

    def _retention_ms(self) -> int:
        return self.settings.retention_ms

    def _compacted_events(self, execution: ClosedExecution) -> list[dict[str, Any]]:
        """The whole history of a closed execution, compacted before (a redrive) or not."""
        return self.histories.whole(execution.arn)

    def _compact(self, range_ids: Mapping[int, int], now_ms: int) -> tuple[list[ClosedExecution], bool]:
        histories, payloads, compact_after_ms = self.histories, self.histories.payloads, self.settings.compact_after_ms
        assert payloads is not None and compact_after_ms is not None
        store = histories.store
        ready = store.executions_to_compact(list(range_ids), now_ms - compact_after_ms, COMPACTED_BATCH_MAX)
        written: list[tuple[ClosedExecution, str]] = []
        for execution in ready:
            events = self._compacted_events(execution)
            # A map run's row keeps no history: its empty object marks it compacted like any other
            key = history_key(execution.arn, events[-1]["id"] if events else 0)
            payloads.put(key, encode_history(events))
            written.append((execution, key))
        compacted = store.compact_histories(written, range_ids) if written else []
        keys = {execution.arn: key for execution, key in written}
        for execution in compacted:  # compacted before a redrive: that object is all in the new one
            if execution.history_location not in (None, keys[execution.arn]):
                payloads.delete(execution.history_location)
        return compacted, len(ready) == COMPACTED_BATCH_MAX
