"""The store interface: what the engine and the API need from durable storage, and nothing more. ``Store`` is made
of the per-table interfaces, each with its contract at its top: ``shards.ShardTable`` (shard leases, nodes),
``catalogue.Catalogue`` (state machines, revisions, versions, aliases, tags, activities, settings),
``retention.RetentionTable`` (compaction and expiry); and, here, the commit path's own tables: executions and their
history, timers, the outbox, express starts and activity claims. The exceptions are in ``errors``; this module
names them all again, so ``from statewright.store.base import X`` serves for every X of the store.

Contract (tests/store_contract.py runs every table's against every implementation; the executions' and commit's
are in tests/store_contract_executions.py):
- ``commit`` writes each ExecutionWrite's mutable-state row, its history events and its timer changes in ONE
  transaction together with the other writes of the batch (group commit). A write is applied only if its shard's
  range id still matches and the row is still at ``expected_version`` (0: the row must not exist); writes that
  fail those conditions are left out and reported, the rest commit. Writes apply in batch order, timer changes
  included, so a batch may carry consecutive transitions of one execution. Consecutive writes that share a
  nonzero ``group`` commit together or not at all: if one fails its condition, all are reported. A commit that
  raises anything other than CommitOutcomeUnknown wrote nothing.
- Errors are classified: a write whose condition failed is *not committed* (CommitResult); a shard whose range id
  moved is *ownership lost* (CommitResult.lost_shards); a commit refused before writing is *not committed* too
  (CommitFailed); an I/O failure mid-commit is *outcome unknown* (CommitOutcomeUnknown): the caller must re-read
  before going on. The reads the engine serves from (``load_execution``, ``due_timers``, ``pending_dispatches``,
  ``get_state_machine``, ``get_revision``) raise StoreUnavailable when the database cannot answer.
- A database records its schema version; one newer than the code raises SchemaTooNew on opening.
- History rows are immutable; readers see only events below the row's committed next_event_id.
- Timers (tests/store_contract_timers.py): rows written and removed in the commits of their transitions; a timer
  removed by a later write of the same batch does not come back. ``due_timers`` pages them in fire_at_ms order,
  per shard, those due at the same millisecond in the store's own order (``TimerRow.key``).
- Dispatches, the outbox (tests/store_contract_outbox.py): written and removed in the same commits as the
  transitions that create and consume them; ``pending_dispatches`` lists what a new owner must hand out again, by
  ``seq``, which only rises, even across owners and after the newest row was removed.
- Express starts: the asynchronous starts of EXPRESS executions, one row each from before the caller hears of it
  until the execution closed, fenced by range id like commits.
- Activity tasks (tests/store_contract_activities.py): an activity task's dispatch has ``kind`` "activity" and the
  activity's ARN in ``resource``: ``claim_activity_task`` finds it by that ARN, from any node and through any
  handle, and a claim holds until it ends.

Must not import the backends (sqlite, postgresql), statewright.engine or statewright.api.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .catalogue import (
    ALIASES_MAX,
    AWS_OWNED_KEY,
    VERSIONS_MAX,
    ActivityRecord,
    AliasRecord,
    Catalogue,
    Page,
    StateMachineRecord,
    VersionRecord,
)
from .errors import (
    CommitFailed,
    CommitOutcomeUnknown,
    MetadataConflict,
    NoSuchStateMachine,
    NoSuchVersions,
    QuotaExceeded,
    RevisionChanged,
    SchemaTooNew,
    ShardCountMismatch,
    StoreUnavailable,
    VersionRouted,
)
from .payloads import PayloadStore
from .retention import ClosedExecution, RetentionTable
from .shards import NodeRecord, ShardLease, ShardTable

# The newest storage format this release reads, recorded on its node's row: 1, state blobs whole; 2, state blobs
# beside their rows (``Store.rows_hold_fields``). Every node writes the oldest format a live node reads.
STORAGE_FORMAT = 2

__all__ = [  # the store's names, from the modules that define them
    "ALIASES_MAX", "AWS_OWNED_KEY", "VERSIONS_MAX", "ActivityRecord", "AliasRecord", "Catalogue", "ClosedExecution",
    "CommitFailed", "CommitOutcomeUnknown", "CommitResult", "Dispatch", "ExecutionSummary", "ExecutionWrite",
    "MetadataConflict", "NoSuchStateMachine", "NoSuchVersions", "NodeRecord", "OpenCount", "Page", "PayloadStore",
    "QuotaExceeded", "RetentionTable", "RevisionChanged", "SchemaTooNew", "ShardCountMismatch", "ShardLease",
    "ShardTable", "StateMachineRecord", "Store", "StoreUnavailable", "TimerRow", "VersionRecord", "VersionRouted",
]


class WriteEffects(Protocol):
    """What one write commits besides the mutable-state row: the decider's ``Effects`` (decider/effects.py), taken
    as it is (the store reads these fields and nothing else of it)."""

    events: list[dict[str, Any]]  # consecutive history events, ids ascending
    timers_added: list[tuple[str, int]]  # (timer id, fire_at_ms)
    timers_removed: list[tuple[str, int]]
    dispatches_added: list[tuple[str, dict[str, Any]]]  # (dispatch id, payload)
    dispatches_removed: list[str]


@dataclass(slots=True)
class ExecutionWrite:
    shard_id: int
    arn: str
    # What the row is listed under (ListExecutions): its state machine; a map run's child, its map run's ARN; a map
    # run's own row, its parent execution's ARN (ListMapRuns).
    state_machine_arn: str
    name: str
    status: str
    start_ms: int
    stop_ms: int | None
    expected_version: int
    version: int
    state: bytes  # the serialized mutable state
    effects: WriteEffects  # the decision's effects, as the decider made them
    group: int = 0  # nonzero: lands with the consecutive writes of the same group, or not at all
    # What the execution was started through, kept on its row (for ListExecutions); only the first write's count.
    version_arn: str | None = None
    alias_arn: str | None = None
    redrive_count: int = 0  # on the row too (ListExecutions' redriveCount, redriveDate and redriveFilter)
    redrive_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Dispatch:
    """An outbox row: work the engine committed to hand out (an activity task, an HTTP call, ...)."""

    shard_id: int
    execution_arn: str
    dispatch_id: str
    payload: dict[str, Any]
    seq: int = 0  # its place in the shard's outbox (ascending in commit order); 0 before it is read back


@dataclass(slots=True)
class CommitResult:
    conflicts: list[int] = field(default_factory=list)  # indexes of writes whose version check failed
    lost_shards: set[int] = field(default_factory=set)  # shards whose range id moved: their writes were skipped

    def committed(self, index: int, write: ExecutionWrite) -> bool:
        return write.shard_id not in self.lost_shards and index not in self.conflicts


@dataclass(frozen=True, slots=True)
class TimerRow:
    shard_id: int
    fire_at_ms: int
    execution_arn: str
    timer_id: str
    # Where the row sorts among those due at the same millisecond, as ``due_timers``' ``after_key`` takes it: the
    # store's key of its execution and the timer id (None: the execution's ARN).
    key: tuple[Any, str] | None = field(default=None, compare=False)
    start_ms: int = field(default=0, compare=False)  # when its execution started (the engine fires in that order)

    @property
    def after_key(self) -> tuple[Any, str]:
        return self.key or (self.execution_arn, self.timer_id)


@dataclass(frozen=True, slots=True)
class ExecutionSummary:
    arn: str
    state_machine_arn: str
    name: str
    status: str
    start_ms: int
    stop_ms: int | None
    version_arn: str | None = None
    alias_arn: str | None = None
    redrive_count: int = 0
    redrive_ms: int | None = None


# The SQL of a count of RUNNING executions by what they are listed under (grouped by scope_of in Python)
COUNT_OPEN_BY_LISTING = "SELECT state_machine_arn, count(*) FROM executions WHERE status = 'RUNNING' GROUP BY 1"


def scope_of(arn: str) -> tuple[str, str]:
    """The (region, account) of a Step Functions ARN."""
    parts = arn.split(":", 5)
    return parts[3], parts[4]


def open_by_scope(rows: Iterable[tuple[str, int]]) -> dict[tuple[str, str], int]:
    """RUNNING executions per (region, account), from counts per state machine (or map run, or parent)."""
    counted: dict[tuple[str, str], int] = {}
    for listed_under, running in rows:
        scope = scope_of(listed_under)
        counted[scope] = counted.get(scope, 0) + running
    return counted


class OpenCount:
    """A count of RUNNING executions as of one instant, per (region, account), in steps that may run on different
    threads: made by ``Store.open_count`` (it may connect), ``snapshot`` fixes the instant (cheap: call it where the
    count must line up with other books, e.g. between two commits), ``count`` counts what was committed before it
    (slow; once), ``close`` gives it up uncounted. This default, for a store without read snapshots, counts in
    ``snapshot``, all under one unnamed scope."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._running: int | None = None

    def snapshot(self) -> None:
        self._running = self._store.count_open_executions()

    def count(self) -> dict[tuple[str, str], int]:
        assert self._running is not None, "count() before snapshot()"
        return {("", ""): self._running}

    def close(self) -> None:
        self._running = None


class Store(ShardTable, Catalogue, RetentionTable):
    """Durable storage for one statewright cluster (one data directory or one database)."""

    location: str  # where the data is, for messages (a path, or a database URL without its password)
    # Whether a write's state blob may leave out what its row's columns hold (ExecutionState.to_blob's
    # ``beside_row``): ``load_execution`` puts it back. Only where no reader of an earlier release can read the rows
    # (storage format 2: ``use_storage_format``).
    rows_hold_fields = False

    def use_storage_format(self, storage_format: int) -> None:
        """Write in this storage format from now on: the oldest that a live node reads (cluster/membership.py)."""
        self.rows_hold_fields = storage_format >= 2

    def advice(self) -> list[str]:
        """What to change in the database's setup for it to serve well, as sentences to show at start."""
        return []

    # -- executions
    @abstractmethod
    def commit(self, writes: Sequence[ExecutionWrite], range_ids: Mapping[int, int]) -> CommitResult: ...

    @abstractmethod
    def load_execution(self, arn: str) -> bytes | None:
        """The committed mutable state of an execution, or None."""

    def load_executions(self, arns: Sequence[str]) -> dict[str, bytes]:
        """The committed states of those of ``arns`` that exist (a networked store reads them in one round trip:
        the engine asks for every execution of a tick it does not hold)."""
        found = {}
        for arn in arns:
            blob = self.load_execution(arn)
            if blob is not None:
                found[arn] = blob
        return found

    @abstractmethod
    def count_open_executions(self) -> int:
        """How many executions are RUNNING (for metrics; may take a while on a large store)."""

    def open_count(self) -> OpenCount:
        """Prepare an exact count of RUNNING executions at an instant the caller picks (see OpenCount)."""
        return OpenCount(self)

    @abstractmethod
    def list_executions(self, state_machine_arn: str, status: str | None, limit: int, cursor: str | None,
                        version_arn: str | None = None, alias_arn: str | None = None,
                        redriven: bool | None = None) -> Page:
        """ExecutionSummary items, newest start first; ValueError for a cursor this store did not make. With
        ``version_arn`` (or ``alias_arn``) only the executions started on that version (or through that alias);
        with ``redriven`` only those redriven at least once (True) or never (False)."""

    @abstractmethod
    def read_history(self, arn: str, after_event_id: int, limit: int, reverse: bool) -> list[dict[str, Any]]:
        """Up to ``limit`` events with ids above ``after_event_id`` (below it when ``reverse``; 0 means the end)."""

    @abstractmethod
    def due_timers(self, shard_id: int, after_ms: int, until_ms: int, limit: int = 1 << 62,
                   after_key: tuple[Any, str] | None = None) -> list[TimerRow]:
        """Up to ``limit`` timers with after_ms < fire_at_ms <= until_ms, in (fire_at_ms, TimerRow.key) order. With
        ``after_key`` (a row's ``after_key``) the lower bound is that row: rows after it in the same order, so a
        caller pages through timers due at the same millisecond."""

    @abstractmethod
    def pending_dispatches(self, shard_id: int, after_seq: int = 0, limit: int = 1 << 62) -> list[Dispatch]:
        """The shard's outbox: up to ``limit`` dispatches committed and not yet removed whose ``seq`` is above
        ``after_seq``, in the order they were written (seq ascending; a later commit's rows sort after)."""

    @abstractmethod
    def write_express_starts(self, added: Sequence[tuple[int, str, bytes]], removed: Sequence[tuple[int, str]],
                             range_ids: Mapping[int, int]) -> set[int]:
        """In one transaction: insert (or replace) the ``added`` express starts (shard, execution ARN, the encoded
        start command) and delete the ``removed`` ones (shard, execution ARN), leaving out the rows of shards whose
        range id is not the one in ``range_ids``; returns those shards. StoreUnavailable: nothing was written, or
        (mid-commit) maybe all of it."""

    @abstractmethod
    def express_starts(self, shard_id: int) -> list[bytes]:
        """The shard's express start commands, by execution ARN: what a new owner runs again."""

    @abstractmethod
    def claim_activity_task(self, activity_arn: str, now_ms: int, until_ms: int,
                            skip_shards: Sequence[int] = ()) -> Dispatch | None:
        """One pending task of this activity from any shard but ``skip_shards`` that no claim holds at ``now_ms``,
        claimed until ``until_ms``: no other claim, from any node, gets it before then. None if there is none.
        A claim only spares the others a useless start; the owner's StartAttempt still decides who gets it."""

    def watch_activity_tasks(self, seen: Callable[[str], None]) -> Callable[[], None]:
        """Call ``seen(activity ARN)`` (on a thread of the store's) soon after every commit by another node that
        adds a task of that activity, until the returned function is called (this node's own tasks reach its
        pollers from its engine). This default never calls it: the store has no way to tell other processes
        (pollers look again now and then instead)."""
        return lambda: None

    @abstractmethod
    def close(self) -> None: ...
