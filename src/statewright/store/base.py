"""The store interface: what the engine and the API need from durable storage, and nothing more.

Contract (tests/store_contract.py runs it against every implementation):
- ``commit`` writes each ExecutionWrite's mutable-state row, its history events and its timer changes in ONE
  transaction together with the other writes of the batch (group commit). A write is applied only if its shard's
  range id still matches and the row is still at ``expected_version`` (0: the row must not exist); writes that
  fail those conditions are left out and reported, the rest commit. Writes apply in batch order, timer changes
  included, so a batch may carry consecutive transitions of one execution. Consecutive writes that share a
  nonzero ``group`` commit together or not at all: if one fails its condition, all are reported. A commit that
  raises anything other than CommitOutcomeUnknown wrote nothing.
- ``acquire_shard`` increments the shard's range id, which fences out every earlier owner's commits. It takes a
  shard only if it is free (no owner, a lease that has ended, or the caller holds it already); a commit reads the
  shard rows under a shared lock, so an acquisition waits for commits in flight and every later commit of an
  earlier owner sees the new range id. Lease times are the callers' clocks (integer ms).
- Errors are classified: a write whose condition failed is *not committed* (CommitResult); a shard whose range id
  moved is *ownership lost* (CommitResult.lost_shards); a commit refused before writing is *not committed* too
  (CommitFailed); an I/O failure mid-commit is *outcome unknown* (CommitOutcomeUnknown): the caller must re-read
  before going on. The reads the engine serves from (``load_execution``, ``due_timers``, ``pending_dispatches``,
  ``get_state_machine``, ``get_revision``) raise StoreUnavailable when the database cannot answer.
- A database records its schema version; one newer than the code raises SchemaTooNew on opening.
- History rows are immutable; readers see only events below the row's committed next_event_id.
- Versions and aliases (``publish_version`` ... ``list_aliases``): a version is an immutable snapshot of its state
  machine, numbered from 1 per state machine and never renumbered, even after a delete (the state machine keeps its
  last number); publishing the revision a version already holds returns that version. At most ``versions_max``
  versions and ``aliases_max`` aliases per state machine (QuotaExceeded). An alias routes only to versions that
  exist, and a version an alias routes to cannot be deleted (VersionRouted): writes of one state machine's
  versions and aliases are serialized against each other. Deleting a state machine deletes its versions and aliases;
  its revisions stay, so executions started on them run to the end.
- Express starts (``write_express_starts``): the asynchronous starts of EXPRESS executions, one row each from
  before the caller hears of it until the execution closed, fenced by range id like commits.
- Dispatches (the outbox) are written and removed in the same commits as the transitions that create and
  consume them; ``pending_dispatches`` lists what a new owner must hand out again. An activity task's payload
  has ``kind`` "activity" and the activity's ARN in ``resource``: ``claim_activity_task`` finds it by that ARN,
  from any node.
- Retention (``expired_executions`` ... ``history_location``): a closed execution's history moves out of the
  history table only in ``compact_histories``' transaction, which also records where it went and the close it
  compacted; its row and history leave together in ``delete_executions``. Both act only on shards still at the
  caller's range ids and on rows still closed at the version the caller read, so a redrive or a new owner in
  between wins. A compacted execution that is redriven keeps its location; the rows of its new events make it due
  for compaction again once it closed again.
- ``payloads``: the payload store that goes with the store when none is configured (store/payloads.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .payloads import PayloadStore


class StoreUnavailable(Exception):
    """The store could not serve a call (disk full, database busy or gone); nothing changed. Retry later."""


class CommitFailed(StoreUnavailable):
    """The store refused a commit before writing anything: none of the batch landed."""


class CommitOutcomeUnknown(Exception):
    """The store failed mid-commit; the batch may or may not have landed."""


class ShardCountMismatch(Exception):
    """The data directory was created with another shard count, which cannot change."""


class SchemaTooNew(Exception):
    """The database was written by a newer statewright (a schema version above this code's): upgrade to open it."""


class MetadataConflict(Exception):
    """A version or alias write that what is stored refuses; nothing was written. The API answers each kind with
    AWS's error."""


class NoSuchStateMachine(MetadataConflict):
    pass


class RevisionChanged(MetadataConflict):
    """Publishing was conditional on a revision that is no longer the state machine's current one."""

    def __init__(self, expected: str, current: str) -> None:
        super().__init__(f"revision {expected} is not the current one ({current})")
        self.expected = expected
        self.current = current


class QuotaExceeded(MetadataConflict):
    """The state machine has as many versions (or aliases) as it may."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"at most {limit}")
        self.limit = limit


class VersionRouted(MetadataConflict):
    """The version cannot be deleted: these aliases (names) route to it."""

    def __init__(self, aliases: list[str]) -> None:
        super().__init__(f"routed to by {aliases}")
        self.aliases = aliases


class NoSuchVersions(MetadataConflict):
    """An alias names versions (numbers) the state machine does not have."""

    def __init__(self, numbers: list[int]) -> None:
        super().__init__(f"no versions {numbers}")
        self.numbers = numbers


VERSIONS_MAX = 1_000  # per state machine, as on AWS
ALIASES_MAX = 100  # per state machine, as on AWS
AWS_OWNED_KEY = {"type": "AWS_OWNED_KEY"}  # the encryption configuration of a resource created without one


@dataclass(slots=True)
class ExecutionWrite:
    shard_id: int
    arn: str
    state_machine_arn: str
    name: str
    status: str
    start_ms: int
    stop_ms: int | None
    expected_version: int
    version: int
    state: bytes  # the serialized mutable state
    events: list[dict[str, Any]]  # consecutive history events, ids ascending
    timers_added: list[tuple[str, int]] = field(default_factory=list)  # (timer id, fire_at_ms)
    timers_removed: list[tuple[str, int]] = field(default_factory=list)
    dispatches_added: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (dispatch id, payload)
    dispatches_removed: list[str] = field(default_factory=list)
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


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A registered engine node: where the others reach it, and until when it counts as alive."""

    node_id: str
    address: str  # the base URL of its API (forwarded calls go there)
    lease_until_ms: int


@dataclass(frozen=True, slots=True)
class ShardLease:
    shard_id: int
    range_id: int
    owner: str | None  # None: released, free to take at once
    lease_until_ms: int


@dataclass(frozen=True, slots=True)
class ActivityRecord:
    arn: str
    name: str
    created_ms: int
    encryption_configuration: dict[str, Any] | None = None  # None: AWS_OWNED_KEY


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


@dataclass(slots=True)
class StateMachineRecord:
    arn: str
    name: str
    type: str
    definition: str
    role_arn: str
    revision_id: str
    created_ms: int
    updated_ms: int
    logging_configuration: dict[str, Any]
    tracing_configuration: dict[str, Any]
    description: str = ""
    encryption_configuration: dict[str, Any] = field(default_factory=lambda: dict(AWS_OWNED_KEY))
    # The revision it was created with: AWS shows a revision id only for the revisions after it.
    initial_revision_id: str = ""

    @property
    def revised(self) -> bool:
        """Whether the current revision is a later one than the first (AWS then shows its id)."""
        return self.revision_id != self.initial_revision_id


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """A published version: its state machine as it was when published (definition, role, configuration and
    revision, in ``machine``), its number and its own description and creation time."""

    machine: StateMachineRecord
    number: int
    description: str
    created_ms: int

    @property
    def arn(self) -> str:
        return f"{self.machine.arn}:{self.number}"


@dataclass(frozen=True, slots=True)
class AliasRecord:
    """An alias: a name for one or two versions of one state machine, each with its share of new starts."""

    state_machine_arn: str
    name: str
    description: str
    routing: tuple[tuple[int, int], ...]  # (version number, weight in percent), weights summing to 100
    created_ms: int
    updated_ms: int

    @property
    def arn(self) -> str:
        return f"{self.state_machine_arn}:{self.name}"


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


@dataclass(frozen=True, slots=True)
class ClosedExecution:
    """A closed execution, as the retention sweep reads it: its row's version and where its history is."""

    arn: str
    shard_id: int
    version: int
    history_location: str | None  # None: in the history table; else its key in the payload store


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Any]
    next_cursor: str | None


class OpenCount:
    """A count of RUNNING executions as of one instant, in steps that may run on different threads: made by
    ``Store.open_count`` (it may connect), ``snapshot`` fixes the instant (cheap: call it where the count must line
    up with other books, e.g. between two commits), ``count`` counts what was committed before it (slow; once),
    ``close`` gives it up uncounted. This default, for a store without read snapshots, counts in ``snapshot``."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._running: int | None = None

    def snapshot(self) -> None:
        self._running = self._store.count_open_executions()

    def count(self) -> int:
        assert self._running is not None, "count() before snapshot()"
        return self._running

    def close(self) -> None:
        self._running = None


class Store(ABC):
    """Durable storage for one statewright cluster (one data directory or one database)."""

    location: str  # where the data is, for messages (a path, or a database URL without its password)

    # -- shards
    @abstractmethod
    def shard_count(self) -> int: ...

    @abstractmethod
    def acquire_shard(self, shard_id: int, owner: str, lease_until_ms: int, now_ms: int | None = None) -> int | None:
        """Take the shard: bump and return its range id. With ``now_ms``, only if it is free (no owner, a lease
        that ended at or before ``now_ms``, or ``owner`` holds it already); None if another owner's lease runs.
        Without, unconditionally (a single node taking every shard of its own data directory)."""

    def acquire_shards(self, shard_ids: Sequence[int], owner: str, lease_until_ms: int, now_ms: int) -> dict[int, int]:
        """``acquire_shard`` with ``now_ms`` of each of these shards: the new range ids of those that were free.
        A store may take them together, in one transaction."""
        taken = {}
        for shard_id in shard_ids:
            range_id = self.acquire_shard(shard_id, owner, lease_until_ms, now_ms)
            if range_id is not None:
                taken[shard_id] = range_id
        return taken

    @abstractmethod
    def renew_leases(self, owner: str, range_ids: Mapping[int, int], lease_until_ms: int) -> set[int]:
        """Extend the leases ``owner`` holds at these range ids to ``lease_until_ms``; returns the shards renewed
        (a shard taken by another node since is not)."""

    @abstractmethod
    def release_shards(self, owner: str, range_ids: Mapping[int, int]) -> None:
        """Give up shards (owner cleared, lease ended) where ``owner`` still holds them at these range ids, so the
        next owner takes them at once. The range id stays; the next acquisition bumps it."""

    @abstractmethod
    def shard_leases(self) -> list[ShardLease]:
        """Every shard's lease, by shard id."""

    # -- nodes
    @abstractmethod
    def register_node(self, node_id: str, address: str, lease_until_ms: int) -> None:
        """Insert or refresh a node's record (it counts as alive until ``lease_until_ms``)."""

    @abstractmethod
    def remove_node(self, node_id: str) -> None: ...

    @abstractmethod
    def nodes(self) -> list[NodeRecord]:
        """Every registered node, by id, live or not (the caller compares ``lease_until_ms`` with its clock)."""

    def adopt_cluster_secret(self, check: str, node_id: str, now_ms: int) -> bool:
        """Whether a node may join with the cluster secret whose check value is ``check``: the one recorded, or any
        while no other node is live (then it is recorded: the cluster starts again with another secret). A store
        only one process serves has no cluster: always."""
        return True

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

    @abstractmethod
    def due_timers(self, shard_id: int, after_ms: int, until_ms: int, limit: int = 1 << 62,
                   after_key: tuple[str, str] | None = None) -> list[TimerRow]:
        """Up to ``limit`` timers with after_ms < fire_at_ms <= until_ms, in (fire_at_ms, execution_arn, timer_id)
        order. With ``after_key`` (execution_arn, timer_id) the lower bound is that key: rows after
        (after_ms, *after_key) in the same order, so a caller pages through timers due at the same millisecond."""

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

    # -- activities
    @abstractmethod
    def create_activity(self, record: ActivityRecord, tags: Mapping[str, str] | None = None) -> ActivityRecord:
        """Insert, with its ``tags`` in the same transaction, or return the existing record of that ARN unchanged
        (and untagged by this call)."""

    @abstractmethod
    def get_activity(self, arn: str) -> ActivityRecord | None: ...

    @abstractmethod
    def delete_activity(self, arn: str) -> None: ...

    @abstractmethod
    def list_activities(self, arn_prefix: str, limit: int, cursor: str | None) -> Page:
        """ActivityRecord items whose ARN starts with ``arn_prefix``, by name."""

    # -- settings shared by every node (task token keys)
    @abstractmethod
    def get_setting(self, key: str) -> str | None: ...

    @abstractmethod
    def put_setting_if_absent(self, key: str, value: str) -> str:
        """Store ``value`` unless the key exists; return the stored value (so concurrent nodes agree)."""

    @abstractmethod
    def put_setting(self, key: str, value: str) -> None: ...

    # -- state machines
    @abstractmethod
    def create_state_machine(self, record: StateMachineRecord,
                             tags: Mapping[str, str] | None = None) -> StateMachineRecord:
        """Insert, with its ``tags`` in the same transaction, or return the existing record of that ARN unchanged
        (and untagged by this call)."""

    @abstractmethod
    def get_state_machine(self, arn: str) -> StateMachineRecord | None: ...

    @abstractmethod
    def update_state_machine(self, record: StateMachineRecord) -> bool:
        """Replace the record (a new revision when the definition changed); False if it does not exist."""

    @abstractmethod
    def delete_state_machine(self, arn: str) -> None:
        """Delete the state machine with its tags, versions and aliases (its revisions stay)."""

    @abstractmethod
    def list_state_machines(self, arn_prefix: str, limit: int, cursor: str | None) -> Page:
        """StateMachineRecord items whose ARN starts with ``arn_prefix`` (one region and account), by name."""

    @abstractmethod
    def get_revision(self, state_machine_arn: str, revision_id: str) -> tuple[str, str] | None:
        """(definition, role ARN) of one immutable revision; revisions outlive their state machine."""

    # -- versions and aliases
    @abstractmethod
    def publish_version(self, state_machine_arn: str, description: str, created_ms: int,
                        revision_id: str | None = None, versions_max: int = VERSIONS_MAX) -> VersionRecord:
        """Publish the current revision as the next version, or return the version that holds it already. With
        ``revision_id``, only if that is the current revision (else RevisionChanged). NoSuchStateMachine,
        QuotaExceeded."""

    @abstractmethod
    def get_version(self, state_machine_arn: str, number: int) -> VersionRecord | None: ...

    @abstractmethod
    def list_versions(self, state_machine_arn: str, limit: int, cursor: str | None) -> Page:
        """VersionRecord items, newest (highest number) first; ValueError for a cursor this store did not make."""

    @abstractmethod
    def delete_version(self, state_machine_arn: str, number: int) -> None:
        """Delete it (nothing if there is none); VersionRouted while an alias routes to it."""

    @abstractmethod
    def create_alias(self, record: AliasRecord, aliases_max: int = ALIASES_MAX) -> AliasRecord:
        """Insert, or return the existing alias of that name unchanged. NoSuchStateMachine, NoSuchVersions,
        QuotaExceeded."""

    @abstractmethod
    def get_alias(self, state_machine_arn: str, name: str) -> AliasRecord | None: ...

    @abstractmethod
    def update_alias(self, record: AliasRecord) -> bool:
        """Replace the alias; False if it does not exist. NoSuchVersions."""

    @abstractmethod
    def delete_alias(self, state_machine_arn: str, name: str) -> None: ...

    @abstractmethod
    def list_aliases(self, state_machine_arn: str, limit: int, cursor: str | None) -> Page:
        """AliasRecord items, by name."""

    # -- tags
    @abstractmethod
    def tag_resource(self, arn: str, tags: Mapping[str, str]) -> None: ...

    @abstractmethod
    def untag_resource(self, arn: str, keys: Sequence[str]) -> None: ...

    @abstractmethod
    def list_tags(self, arn: str) -> dict[str, str]: ...

    @abstractmethod
    def close(self) -> None: ...
