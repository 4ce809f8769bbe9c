"""The shards and nodes tables: who owns which shard, at which range id, until when; and which nodes are alive.

Contract (tests/store_contract_shards.py runs it against every implementation):
- The shard count is fixed when the store is created; opening it with another raises ShardCountMismatch.
- ``acquire_shard`` increments the shard's range id, which fences out every earlier owner's commits. It takes a
  shard only if it is free (no owner, a lease that has ended, or the caller holds it already); a commit reads the
  shard rows under a shared lock, so an acquisition waits for commits in flight and every later commit of an
  earlier owner sees the new range id. Lease times are the callers' clocks (integer ms).
- Renewing and releasing act only on the leases the caller still holds at its range ids: a fenced owner changes
  nothing. A released shard is free at once; its range id stays, and the next acquisition bumps it.
- A node's record counts as alive until its lease; the caller compares with its own clock.

Must not import statewright.store.base (base.Store is made of this interface, not the other way round), the
backends, or anything above the store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A registered engine node: where the others reach it, and until when it counts as alive."""

    node_id: str
    address: str  # the base URL of its API (forwarded calls go there)
    lease_until_ms: int
    rule: int = 1  # the newest shard assignment rule it speaks (cluster/membership.py; 1 in older releases)
    weight: int = 1  # its share of the shards relative to the others' (under rule 2 and later)
    storage_format: int = 1  # the newest storage format it reads (base.STORAGE_FORMAT; 1 in older releases)


@dataclass(frozen=True, slots=True)
class ShardLease:
    shard_id: int
    range_id: int
    owner: str | None  # None: released, free to take at once
    lease_until_ms: int


class ShardTable(ABC):
    """Shard leases with range ids, and the nodes of a cluster."""

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
    def register_node(self, node_id: str, address: str, lease_until_ms: int, rule: int = 1, weight: int = 1,
                      storage_format: int = 1) -> None:
        """Insert or refresh a node's record (it counts as alive until ``lease_until_ms``), with the newest shard
        assignment rule it speaks, its weight and the newest storage format it reads."""

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
