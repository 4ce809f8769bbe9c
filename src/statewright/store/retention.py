"""Retention: closed executions' histories moved to the payload store (compaction), and closed executions deleted
once their retention window passed.

Contract (tests/store_contract_retention.py runs it against every implementation):
- A closed execution's history moves out of the history table only in ``compact_histories``' transaction, which
  also records where it went and the close it compacted; its row and history leave together in
  ``delete_executions``. Both act only on shards still at the caller's range ids and on rows still closed at the
  version the caller read, so a redrive or a new owner in between wins.
- An execution is expired only once nothing of its own is left in the outbox (a status event or a job's stop still
  going out must find its execution).
- A compacted execution that is redriven keeps its location; the rows of its new events make it due for compaction
  again once it closed again.
- ``payloads``: the payload store that goes with the store when none is configured (store/payloads.py); every handle
  on the same data sees the same objects.

Must not import statewright.store.base or the backends (base.Store is made of this interface), nor anything above
the store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .payloads import PayloadStore


@dataclass(frozen=True, slots=True)
class ClosedExecution:
    """A closed execution, as the retention sweep reads it: its row's version and where its history is."""

    arn: str
    shard_id: int
    version: int
    history_location: str | None  # None: in the history table; else its key in the payload store


class RetentionTable(ABC):
    """The sweep's reads and writes of closed executions, and where their histories went."""

    @abstractmethod
    def expired_executions(self, shard_ids: Sequence[int], stopped_before_ms: int,
                           limit: int) -> list[ClosedExecution]:
        """Up to ``limit`` executions of these shards closed at or before ``stopped_before_ms`` with no dispatch left
        in the outbox, oldest first."""

    @abstractmethod
    def executions_to_compact(self, shard_ids: Sequence[int], stopped_before_ms: int,
                              limit: int) -> list[ClosedExecution]:
        """Up to ``limit`` executions of these shards closed at or before ``stopped_before_ms`` and not compacted
        since they closed (never, or before a redrive); oldest first."""

    @abstractmethod
    def compact_histories(self, compacted: Sequence[tuple[ClosedExecution, str]],
                          range_ids: Mapping[int, int]) -> list[ClosedExecution]:
        """In one transaction, for each (execution, location) whose shard is at its range id in ``range_ids`` and
        whose row is still closed at ``execution.version``, not compacted since it closed: record that its history
        is at ``location`` (the object holds every event, those of an earlier object included) and delete its
        history rows. Returns those it compacted."""

    @abstractmethod
    def delete_executions(self, executions: Sequence[ClosedExecution],
                          range_ids: Mapping[int, int]) -> list[ClosedExecution]:
        """In one transaction: delete the rows and history rows of those executions whose shard is at its range id
        in ``range_ids`` and whose row is still at their version; returns those deleted (their names are free)."""

    @abstractmethod
    def history_location(self, arn: str) -> str | None:
        """Where a compacted execution's history is in the payload store (its events since a redrive are in the
        history table); None while it is all in the history table (or there is no such execution)."""

    @abstractmethod
    def payloads(self) -> PayloadStore:
        """The payload store compacted histories go to when none is configured."""
