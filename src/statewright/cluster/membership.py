"""Shard membership: which node serves which shard, kept in the store that every node shares.

Each node registers itself (its id and the address the others reach it at) with a lease of its own, and every
``renew_ms`` it renews that record and the leases of the shards it holds. The shards a node should hold are a
deterministic function of the live nodes (``assignment``: rendezvous hashing bounded so that every node holds its
share), so every node computes the same assignment from the same rows, and a node joining or leaving moves little
more than the shards it gains or gives up. A node takes a shard assigned to it once the shard is free: released by its
holder, or its lease ended. Taking a shard bumps its range id, which fences out every write of an earlier holder
(the store checks the range id inside each commit); the engine also stops serving a shard on its own before the
lease ends unless it is renewed in time (``LeaseSettings.margin_ms``).

A node that holds a shard now assigned to another hands it over: the engine stops serving it (no commit of it in
flight), then the lease is released, and the new holder takes it at its next step, which comes at once when it is
waiting for a hand-over (``step`` returns when it wants to run again).

Everything here is driven by ``step(now_ms)`` with the caller's clock: a thread in ``statewright serve``, the
virtual clock in the simulator. It must not import the engine; the engine is reached through the callbacks.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from ..logs import event
from ..logs import shards as shard_list
from ..store.base import STORAGE_FORMAT, NodeRecord, ShardLease, Store, StoreUnavailable

log = logging.getLogger("statewright.cluster")

HANDOVER_POLL_MS = 50  # how soon a node waiting for a shard to be released looks again


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    lease_ms: int = 10_000  # how long a node record and a shard lease last without renewal
    renew_ms: int = 3_000  # how often they are renewed
    # The engine stops serving a shard this long before its lease ends unless renewed by then: room for a slow
    # tick and for clocks that differ between nodes. Past the lease, the range id fences out whatever a paused
    # node still tries.
    margin_ms: int = 2_000

    def __post_init__(self) -> None:
        if not 0 < self.renew_ms * 2 < self.lease_ms - self.margin_ms or self.margin_ms < 0:
            raise ValueError(f"the renewal interval ({self.renew_ms} ms) must be under half of the lease "
                             f"({self.lease_ms} ms) less its margin ({self.margin_ms} ms), so one missed renewal "
                             "does not lose the shards")

    def serve_until_ms(self, lease_until_ms: int) -> int:
        return lease_until_ms - self.margin_ms


@dataclass(slots=True)
class EngineHooks:
    """What membership tells the engine (each thread-safe; see Engine.gain_shard, renewed, drop_shards)."""

    gained: Callable[[int, int, int], None]  # (shard, range id, serve until ms)
    renewed: Callable[[set[int], int], None]  # (shards, serve until ms)
    drop: Callable[[set[int]], Future]  # resolves once no commit of these shards is in flight
    counted: Callable[[str, int], None] = lambda outcome, shards: None  # renewals: renewed, lost or failed


ASSIGNMENT_RULE = 2  # the newest shard assignment rule this release speaks (the rules: ``assignment``)
# How long a node's record still counts for the storage format after its lease ended: a node of an earlier release
# that was paused or cut off comes back to rows it can read, unless it was gone this long (a node that stops leaves
# at once: it removes its record).
FORMAT_GRACE_MS = 3_600_000


def rule_in_use(rules: Iterable[int]) -> int:
    """The rule a cluster assigns shards by: the oldest any live node speaks. Every node computes it from the same
    node rows, so they agree; a rolling upgrade turns a new rule on once the last node of the release before it has
    gone, and a release keeps every older rule so it can run beside the one before it."""
    return min(rules, default=ASSIGNMENT_RULE)


def assignment(shard_count: int, node_ids: Sequence[str], weights: Mapping[str, int] | None = None,
               rule: int = ASSIGNMENT_RULE) -> tuple[str, ...]:
    """The node that should hold each shard (indexed by shard id) under ``rule``: rendezvous hashing over the live
    nodes' ids, bounded so that each holds its share, rounded down or one more.

    Plain rendezvous hashing (each shard to the node of its highest weight) moves only the shards a joining node
    gains, but its shares are uneven: with 64 shards, one of three nodes often held 26 and sometimes 32, and since
    a named execution's shard comes from its name, that node then did up to half the work. Here (node, shard) pairs
    are taken by descending hash weight, each shard by the first node with room left, so a join or a leave moves
    10-20 % more shards than it must, and no node holds more than its share rounded up.

    Rule 1 (every release before rule 2): equal shares. Rule 2: each node's share is in proportion to its
    ``weights`` entry (``--shard-weight``, default 1), so a larger machine can hold more; with equal weights it is
    rule 1 exactly, so turning it on moves nothing until a weight differs."""
    ids = tuple(sorted(set(node_ids)))
    given = weights if rule >= 2 and weights else {}
    return _assignment(shard_count, ids, tuple(given.get(node, 1) for node in ids))


@functools.lru_cache(maxsize=16)  # the same live nodes at every step, on every node
def _assignment(shard_count: int, node_ids: tuple[str, ...], weights: tuple[int, ...]) -> tuple[str, ...]:
    if not node_ids:
        return ()
    total = sum(weights)
    shares = {node: shard_count * weight // total for node, weight in zip(node_ids, weights, strict=True)}
    extra = shard_count - sum(shares.values())  # `extra` nodes hold one shard more than their share rounded down
    pairs = sorted(((_weight(node, shard), shard, node) for shard in range(shard_count) for node in node_ids),
                   reverse=True)
    owners: list[str | None] = [None] * shard_count
    counts = dict.fromkeys(node_ids, 0)
    for _, shard, node in pairs:
        count, share = counts[node], shares[node]
        if owners[shard] is None and (count < share or (count == share and extra > 0)):
            owners[shard] = node
            counts[node] = count + 1
            if count == share:
                extra -= 1
    return tuple(owners)  # type: ignore[arg-type]  # every shard found a node: the shares add up


def _weight(node_id: str, shard_id: int) -> bytes:
    return hashlib.blake2b(f"{node_id}/{shard_id}".encode(), digest_size=8).digest()


class Membership:
    def __init__(self, store: Store, node_id: str, address: str, hooks: EngineHooks,
                 settings: LeaseSettings | None = None, *, wait_for_drops_s: float = 0.0, weight: int = 1,
                 rule: int = ASSIGNMENT_RULE, storage_format: int = STORAGE_FORMAT) -> None:
        """``wait_for_drops_s``: how long ``step`` waits for the engine to let go of a shard being handed over
        (a server waits a little so the new holder takes it at once; the simulator, ticking the engine itself,
        does not wait and releases at its next step). ``weight``: this node's share relative to the others'
        (under rule 2); ``rule`` and ``storage_format``: the newest assignment rule it speaks and storage format
        it reads (a test's stand-in for an older release)."""
        self.store = store
        self.node_id = node_id
        self.address = address
        self.hooks = hooks
        self.settings = settings or LeaseSettings()
        self.weight = weight
        self.rule = rule
        self.rule_in_use: int | None = None  # the cluster's, as of the last step
        self.storage_format = storage_format
        self.format_in_use: int | None = None  # the oldest a live node reads, as of the last step
        self.wait_for_drops_s = wait_for_drops_s
        self.held: dict[int, tuple[int, int]] = {}  # shard -> (range id, lease until ms)
        self._dropping: dict[int, tuple[int, Future]] = {}  # shard -> (range id, the engine's drop)
        self._leases: list[ShardLease] = []
        self._nodes: dict[str, NodeRecord] = {}
        self._left = False
        self._released = False  # a shard handed over was released since ``released_any`` last said so

    # -- what other parts ask

    def owner_address(self, shard_id: int) -> str | None:
        """The address of the node holding the shard, as of the last read of the store (None: unknown, free)."""
        leases = self._leases
        if shard_id >= len(leases) or leases[shard_id].owner is None:
            return None
        node = self._nodes.get(leases[shard_id].owner)
        return node.address if node is not None else None

    def live_nodes(self, now_ms: int) -> list[NodeRecord]:
        return [node for node in self._nodes.values() if node.lease_until_ms > now_ms]

    def refresh(self) -> None:
        """Read the leases and nodes again now (after a call found a shard moved)."""
        self._leases = self.store.shard_leases()
        self._nodes = {node.node_id: node for node in self.store.nodes()}

    # -- the upkeep

    def step(self, now_ms: int) -> int:
        """Renew, hand over and take shards; returns the ms until the next step is wanted."""
        if self._left:
            return self.settings.renew_ms
        until_ms = now_ms + self.settings.lease_ms
        try:
            self.store.register_node(self.node_id, self.address, until_ms, self.rule, self.weight,
                                     self.storage_format)
            self._renew(now_ms, until_ms)
            self.refresh()
        except StoreUnavailable as exc:  # the engine stops serving the shards itself before their leases end
            log.debug("could not renew leases: %s", exc)  # the store said it is out of reach
            self.hooks.counted("failed", len(self.held))
            self._forget_expired(now_ms)
            return self.settings.renew_ms
        others = [node for node in self.live_nodes(now_ms) if node.node_id != self.node_id]
        rule = rule_in_use([self.rule, *(node.rule for node in others)])
        if rule != self.rule_in_use:
            if self.rule_in_use is not None or rule != self.rule:
                event(log, "assignment_rule", "assigning shards by rule %d: the oldest a live node speaks (this "
                      "node speaks %d)", rule, self.rule, rule=rule, speaks=self.rule)
            self.rule_in_use = rule
        self._follow_format([self.storage_format, *(node.storage_format for node in self._nodes.values()
                                                     if node.lease_until_ms > now_ms - FORMAT_GRACE_MS)])
        owners = assignment(len(self._leases), [self.node_id, *(node.node_id for node in others)],
                            {self.node_id: self.weight, **{node.node_id: node.weight for node in others}}, rule)
        wanted = {shard for shard, owner in enumerate(owners) if owner == self.node_id}
        self._hand_over(set(self.held) - wanted)
        if self._take(wanted, now_ms, until_ms) or self._dropping:
            return HANDOVER_POLL_MS
        # A node that stopped renewing drops out when its record's lease ends: step right then, so its shards
        # move one lease after it died rather than up to a renewal later.
        return min([self.settings.renew_ms, *(node.lease_until_ms - now_ms + 1 for node in others)])

    def _follow_format(self, formats: list[int]) -> None:
        """Write the oldest storage format that a node alive in the last FORMAT_GRACE_MS reads: a node of the
        previous release, still running on a migrated database, must read every row, and so must one that was
        paused past its lease and renews."""
        in_use = min(formats)
        if in_use != self.format_in_use:
            if self.format_in_use is not None or in_use != self.storage_format:
                event(log, "storage_format", "writing storage format %d: the oldest a live node reads (this node "
                      "reads %d)", in_use, self.storage_format, format=in_use, reads=self.storage_format)
            self.store.use_storage_format(in_use)
            self.format_in_use = in_use

    def released_any(self) -> bool:
        """Whether a shard handed over was released since the last call: its new holder, told at once, takes it
        now rather than at its next step (a leave or a join can move shards between the nodes that stay)."""
        released, self._released = self._released, False
        return released

    def leave(self) -> Future:
        """Graceful stop, first half: leave the membership (the others reassign at once) and have the engine let
        go of every shard; once the returned future resolves, ``release_all`` lets the new holders take them."""
        self._left = True
        self.store.remove_node(self.node_id)
        return self.hooks.drop(set(self.held) | set(self._dropping))

    def release_all(self) -> None:
        """Graceful stop, second half (the engine has let go): release every lease this node holds."""
        range_ids = {shard: range_id for shard, (range_id, _) in self.held.items()}
        range_ids.update((shard, range_id) for shard, (range_id, _) in self._dropping.items())
        self.store.release_shards(self.node_id, range_ids)
        self.held.clear()
        self._dropping.clear()

    def _renew(self, now_ms: int, until_ms: int) -> None:
        if not self.held:
            return
        serving = {shard: range_id for shard, (range_id, _) in self.held.items()}
        renewed = self.store.renew_leases(self.node_id, serving, until_ms)
        lost = set(serving) - renewed
        for shard in lost:
            del self.held[shard]
        if lost:
            event(log, "shards_lost", "lost the leases of %s to another node: it took them while this one could not "
                  "renew", shard_list(lost), level=logging.ERROR, shards=sorted(lost), cause="taken")
            self.hooks.counted("lost", len(lost))
            self.hooks.drop(lost)
        self._forget_expired(now_ms)  # renewed too late: the engine stopped serving them; take them afresh
        for shard in renewed & self.held.keys():
            self.held[shard] = (serving[shard], until_ms)
        self.hooks.counted("renewed", len(renewed))
        self.hooks.renewed(renewed & self.held.keys(), self.settings.serve_until_ms(until_ms))

    def _forget_expired(self, now_ms: int) -> None:
        """Shards whose serving deadline passed unrenewed: the engine let go of them itself."""
        for shard, (_, until_ms) in list(self.held.items()):
            if now_ms >= self.settings.serve_until_ms(until_ms):
                del self.held[shard]
    def _hand_over(self, shards: set[int]) -> None:
        handed = shards - self._dropping.keys()
        dropped = self.hooks.drop(handed) if handed else None  # one drop for them all: one line in the log
        for shard in handed:
            range_id, _ = self.held.pop(shard)
            self._dropping[shard] = (range_id, dropped)
        for shard, (range_id, dropped) in list(self._dropping.items()):
            try:
                dropped.result(timeout=self.wait_for_drops_s)
            except TimeoutError:
                continue  # the engine has not let go yet: release at a later step
            self.store.release_shards(self.node_id, {shard: range_id})
            del self._dropping[shard]
            self._released = True

    def _take(self, wanted: set[int], now_ms: int, until_ms: int) -> bool:
        """Acquire the wanted shards that are free; True if some are still held by another node."""
        free = []
        waiting = False
        for shard in sorted(wanted - self.held.keys() - self._dropping.keys()):
            lease = self._leases[shard]
            if lease.owner not in (None, self.node_id) and lease.lease_until_ms > now_ms:
                waiting = True  # its holder hands it over at its next step, or its lease runs out
            else:
                free.append(shard)
        taken = self.store.acquire_shards(free, self.node_id, until_ms, now_ms) if free else {}
        causes: dict[str, list[int]] = {}
        for shard in free:
            if shard not in taken:
                waiting = True
                continue
            owner = self._leases[shard].owner
            cause = ("free" if owner is None else "this node's own, from before" if owner == self.node_id
                     else f"{owner}'s lease ran out")
            causes.setdefault(cause, []).append(shard)
            self.held[shard] = (taken[shard], until_ms)
            self.hooks.gained(shard, taken[shard], self.settings.serve_until_ms(until_ms))
        for cause, shards in causes.items():
            event(log, "shards_gained", "took %s: %s", shard_list(shards), cause, shards=shards, cause=cause,
                  range_ids=[taken[shard] for shard in shards])
        return waiting
