"""Named faults, switched on per run, and the store wrapper that injects them (FoundationDB's BUGGIFY, by name).

``FaultyStore`` wraps a real store. Each engine-facing call asks the run's ``Faults`` whether to fail it, and how:

  commit-fails      the commit is refused before anything is written (CommitFailed)
  outcome-unknown   the commit is written, then CommitOutcomeUnknown is raised
  version-conflict  one write of the batch is sent with a wrong expected version: the store reports it not committed
  busy              a read the engine serves from raises StoreUnavailable (SQLITE_BUSY, disk I/O)
  crash             the process dies right after a commit lands, before anyone hears of it (``Crash``)

The retention sweep's transactions (``compact_histories``, ``delete_executions``) are refused or followed by a crash
the same way, and the reads that start a sweep are busy as the engine's are. The wrapper tells the ledger which
commits landed (their events are what the histories must read back as) and what the sweep deleted, when.

  lease-stolen      (several nodes) just before a commit another owner takes one of its shards: the commit must be
                    fenced for that shard and the engine must stop serving it

The other faults (duplicated, late and reordered task results, clock jumps, workers dying, crash-restart at random
points, a burst of timers due together beside a client's call, a client's call arriving while a tick applies; with
several nodes a node paused past its lease, the store cut off from one node, a node leaving and coming back,
forwarded calls lost or duplicated) are the simulator's to inject; ``Faults`` only decides when and counts them.
Everything is drawn from one ``random.Random``, so a seed replays exactly.

With several nodes the wrapper also checks the store's fencing: every write of a shard whose range id moved must be
reported lost, never committed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson

from ..store.base import (
    ClosedExecution,
    CommitFailed,
    CommitOutcomeUnknown,
    CommitResult,
    Dispatch,
    ExecutionWrite,
    Store,
    StoreUnavailable,
    TimerRow,
)
from .checkers import Ledger

STORE_FAULTS = ("commit-fails", "outcome-unknown", "version-conflict", "busy", "crash")
ENGINE_FAULTS = ("lane-dies",)  # the heavy lane's process dies with a continuation in hand
CLIENT_FAULTS = ("duplicate-result", "late-result", "reordered-results", "clock-jump", "worker-dies", "restart",
                 "burst", "call-mid-tick")
CLUSTER_FAULTS = ("lease-stolen", "node-paused", "store-cut-off", "node-leaves", "forward-lost", "forward-duplicated")
SINGLE_NODE_FAULTS = STORE_FAULTS + ENGINE_FAULTS + CLIENT_FAULTS
ALL_FAULTS = SINGLE_NODE_FAULTS + CLUSTER_FAULTS
THIEF = "sim-thief"  # the owner a stolen lease goes to: never a live node, its lease ends at once


class Crash(BaseException):
    """The simulated process died here. A BaseException, so that no ``except Exception`` in the engine eats it."""


class Faults:
    """Which faults are on, how often each fires, and how many fired. ``quiet()`` stops them (the liveness phase)."""

    def __init__(self, rng: random.Random, enabled: Iterable[str], rate: float = 0.05) -> None:
        unknown = set(enabled) - set(ALL_FAULTS)
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {', '.join(ALL_FAULTS)}")
        self.rng = rng
        self.enabled = frozenset(enabled)
        self.rate = rate
        self.injected: Counter[str] = Counter()
        self._quiet = False

    def fire(self, name: str, rate: float | None = None) -> bool:
        """Whether fault ``name`` happens now (and count it if so)."""
        if self._quiet or name not in self.enabled:
            return False
        if self.rng.random() >= (self.rate if rate is None else rate):
            return False
        self.injected[name] += 1
        return True

    def quiet(self) -> None:
        self._quiet = True



class FaultyStore(Store):
    """A real store behind named faults. Only the calls the engine makes on its hot path fail; the rest pass through."""

    def __init__(self, inner: Store, faults: Faults, owner: str = "", ledger: Ledger | None = None,
                 cut_off: Callable[[], bool] = lambda: False, clock: Callable[[], int] = lambda: 0,
                 cluster: bool = False) -> None:
        self.inner = inner
        self.faults = faults
        self.owner = owner  # the node (and incarnation) committing through this store, for the range-id check
        self.ledger = ledger
        self.cut_off = cut_off  # True while the store is unreachable from this node
        self.clock = clock
        self.cluster = cluster  # several nodes: check fencing, steal leases

    @property
    def rows_hold_fields(self) -> bool:  # type: ignore[override]  # the real store's, as it follows the format
        return self.inner.rows_hold_fields

    def use_storage_format(self, storage_format: int) -> None:
        self.inner.use_storage_format(storage_format)

    def commit(self, writes: Sequence[ExecutionWrite], range_ids: Mapping[int, int]) -> CommitResult:
        faults = self.faults
        if self.cut_off():
            raise CommitFailed("injected: the store is unreachable from this node")
        if faults.fire("commit-fails"):
            raise CommitFailed("injected: the commit was refused before writing")
        if writes and faults.fire("version-conflict"):
            index = faults.rng.randrange(len(writes))
            writes = [*writes[:index], replace(writes[index], expected_version=writes[index].expected_version + 7),
                      *writes[index + 1:]]
        shards = {write.shard_id for write in writes}
        if self.cluster and shards and faults.fire("lease-stolen"):
            self.inner.acquire_shard(faults.rng.choice(sorted(shards)), THIEF, self.clock())
        current = {lease.shard_id: lease.range_id for lease in self.inner.shard_leases()} if self.cluster else {}
        result = self.inner.commit(writes, range_ids)
        if self.ledger is not None:
            self.ledger.landed(writes, [result.committed(index, write) for index, write in enumerate(writes)])
            for shard in shards - result.lost_shards:
                self.ledger.range_owners[(shard, range_ids[shard])].add(self.owner)
            fenced = {shard for shard in shards if self.cluster and current[shard] != range_ids.get(shard)}
            for shard in fenced - result.lost_shards:
                self.ledger.fence_problems.append(f"{self.owner} committed to shard {shard} at range id "
                                                  f"{range_ids.get(shard)} while the store held {current[shard]}")
            self.ledger.fenced_writes += sum(1 for write in writes if write.shard_id in fenced)
        if faults.fire("outcome-unknown"):
            raise CommitOutcomeUnknown("injected: written, then the connection dropped")
        if faults.fire("crash"):
            raise Crash("injected: the process died after the commit landed")
        return result

    def load_execution(self, arn: str) -> bytes | None:
        self._maybe_busy()
        return self.inner.load_execution(arn)

    def load_executions(self, arns: Sequence[str]) -> dict[str, bytes]:
        self._maybe_busy()
        return self.inner.load_executions(arns)

    def due_timers(self, shard_id: int, after_ms: int, until_ms: int, limit: int = 1 << 62,
                   after_key: tuple[str, str] | None = None) -> list[TimerRow]:
        self._maybe_busy()
        return self.inner.due_timers(shard_id, after_ms, until_ms, limit, after_key)

    def pending_dispatches(self, shard_id: int, after_seq: int = 0, limit: int = 1 << 62) -> list[Dispatch]:
        self._maybe_busy()
        return self.inner.pending_dispatches(shard_id, after_seq, limit)

    def write_express_starts(self, *args: Any) -> set[int]:
        self._reachable()
        return self.inner.write_express_starts(*args)

    def express_starts(self, shard_id: int) -> list[bytes]:
        self._reachable()
        return self.inner.express_starts(shard_id)

    def claim_activity_task(self, activity_arn: str, now_ms: int, until_ms: int,
                            skip_shards: Sequence[int] = ()) -> Dispatch | None:
        self._maybe_busy()
        return self.inner.claim_activity_task(activity_arn, now_ms, until_ms, skip_shards)

    def _maybe_busy(self) -> None:
        self._reachable()
        if self.faults.fire("busy"):
            raise StoreUnavailable("injected: database is locked")

    def _reachable(self) -> None:
        if self.cut_off():
            raise StoreUnavailable("injected: the store is unreachable from this node")

    # -- everything else passes through unchanged

    def shard_count(self) -> int:
        return self.inner.shard_count()

    # membership's calls fail while the node is cut off from the store

    def acquire_shard(self, shard_id: int, owner: str, lease_until_ms: int, now_ms: int | None = None) -> int | None:
        self._reachable()
        return self.inner.acquire_shard(shard_id, owner, lease_until_ms, now_ms)

    def renew_leases(self, owner: str, range_ids: Mapping[int, int], lease_until_ms: int) -> set[int]:
        self._reachable()
        return self.inner.renew_leases(owner, range_ids, lease_until_ms)

    def release_shards(self, owner: str, range_ids: Mapping[int, int]) -> None:
        self._reachable()
        self.inner.release_shards(owner, range_ids)

    def shard_leases(self) -> Any:
        self._reachable()
        return self.inner.shard_leases()

    def register_node(self, node_id: str, address: str, lease_until_ms: int, rule: int = 1, weight: int = 1,
                      storage_format: int = 1) -> None:
        self._reachable()
        self.inner.register_node(node_id, address, lease_until_ms, rule, weight, storage_format)

    def remove_node(self, node_id: str) -> None:
        self._reachable()
        self.inner.remove_node(node_id)

    def nodes(self) -> Any:
        self._reachable()
        return self.inner.nodes()

    def count_open_executions(self) -> int:
        return self.inner.count_open_executions()

    def list_executions(self, *args: Any) -> Any:
        return self.inner.list_executions(*args)

    def read_history(self, *args: Any) -> Any:
        return self.inner.read_history(*args)

    # the retention sweep's calls: the reads that start a sweep can be busy, its transactions fail or crash

    def expired_executions(self, *args: Any) -> Any:
        self._maybe_busy()
        return self.inner.expired_executions(*args)

    def executions_to_compact(self, *args: Any) -> Any:
        self._maybe_busy()
        return self.inner.executions_to_compact(*args)

    def compact_histories(self, compacted: Sequence[tuple[ClosedExecution, str]],
                          range_ids: Mapping[int, int]) -> list[ClosedExecution]:
        self._refuse_or_not()
        done = self.inner.compact_histories(compacted, range_ids)
        if self.ledger is not None:
            self.ledger.compactions += len(done)
        self._crash_or_not()
        return done

    def delete_executions(self, executions: Sequence[ClosedExecution],
                          range_ids: Mapping[int, int]) -> list[ClosedExecution]:
        self._refuse_or_not()
        blobs = self.inner.load_executions([execution.arn for execution in executions])
        deleted = self.inner.delete_executions(executions, range_ids)
        if self.ledger is not None:
            self.ledger.deleted(deleted, {arn: orjson.loads(blob)["stop_ms"] for arn, blob in blobs.items()},
                                self.clock())
        self._crash_or_not()
        return deleted

    def _refuse_or_not(self) -> None:
        if self.cut_off():
            raise CommitFailed("injected: the store is unreachable from this node")
        if self.faults.fire("commit-fails"):
            raise CommitFailed("injected: the transaction was refused before writing")

    def _crash_or_not(self) -> None:
        if self.faults.fire("crash"):
            raise Crash("injected: the process died after the transaction landed")

    def history_location(self, arn: str) -> str | None:
        return self.inner.history_location(arn)

    def payloads(self) -> Any:
        return self.inner.payloads()

    def create_activity(self, record: Any, tags: Any = None) -> Any:
        return self.inner.create_activity(record, tags)

    def get_activity(self, arn: str) -> Any:
        return self.inner.get_activity(arn)

    def delete_activity(self, arn: str) -> None:
        self.inner.delete_activity(arn)

    def list_activities(self, *args: Any) -> Any:
        return self.inner.list_activities(*args)

    def count_activities(self, arn_prefix: str, at_most: int) -> int:
        return self.inner.count_activities(arn_prefix, at_most)

    def get_setting(self, key: str) -> str | None:
        return self.inner.get_setting(key)

    def put_setting_if_absent(self, key: str, value: str) -> str:
        return self.inner.put_setting_if_absent(key, value)

    def put_setting(self, key: str, value: str) -> None:
        self.inner.put_setting(key, value)

    def create_state_machine(self, record: Any, tags: Any = None) -> Any:
        return self.inner.create_state_machine(record, tags)

    def get_state_machine(self, arn: str) -> Any:
        self._maybe_busy()
        return self.inner.get_state_machine(arn)

    def update_state_machine(self, record: Any) -> bool:
        return self.inner.update_state_machine(record)

    def delete_state_machine(self, arn: str) -> None:
        self.inner.delete_state_machine(arn)

    def list_state_machines(self, *args: Any) -> Any:
        return self.inner.list_state_machines(*args)

    def count_state_machines(self, arn_prefix: str, at_most: int) -> int:
        return self.inner.count_state_machines(arn_prefix, at_most)

    def get_revision(self, state_machine_arn: str, revision_id: str) -> Any:
        self._maybe_busy()
        return self.inner.get_revision(state_machine_arn, revision_id)

    def publish_version(self, *args: Any) -> Any:
        return self.inner.publish_version(*args)

    def get_version(self, state_machine_arn: str, number: int) -> Any:
        return self.inner.get_version(state_machine_arn, number)

    def list_versions(self, *args: Any) -> Any:
        return self.inner.list_versions(*args)

    def delete_version(self, state_machine_arn: str, number: int) -> None:
        self.inner.delete_version(state_machine_arn, number)

    def create_alias(self, *args: Any) -> Any:
        return self.inner.create_alias(*args)

    def get_alias(self, state_machine_arn: str, name: str) -> Any:
        return self.inner.get_alias(state_machine_arn, name)

    def update_alias(self, record: Any) -> bool:
        return self.inner.update_alias(record)

    def delete_alias(self, state_machine_arn: str, name: str) -> None:
        self.inner.delete_alias(state_machine_arn, name)

    def list_aliases(self, *args: Any) -> Any:
        return self.inner.list_aliases(*args)

    def tag_resource(self, arn: str, tags: Any) -> None:
        self.inner.tag_resource(arn, tags)

    def untag_resource(self, arn: str, keys: Any) -> None:
        self.inner.untag_resource(arn, keys)

    def list_tags(self, arn: str) -> dict[str, str]:
        return self.inner.list_tags(arn)

    def close(self) -> None:
        self.inner.close()
