"""Shards, leases and nodes: the contract written at the top of statewright.store.shards, one rule per test. Mixed into
``store_contract.StoreContract``; talks to the Store interface only."""

from __future__ import annotations

import pytest

from statewright.store.base import ShardCountMismatch, Store
from store_contract_blocks import SHARDS, ContractBase, blob, execution_arn, own, stored, write


class ShardsContract(ContractBase):
    """Shards, leases and nodes."""

    # -- shards
    def test_shard_count_is_fixed_at_creation(self, store: Store) -> None:
        assert store.shard_count() == SHARDS
        assert self.reopen(SHARDS).shard_count() == SHARDS

    def test_reopen_with_another_shard_count_raises_shard_count_mismatch(self, store: Store) -> None:
        with pytest.raises(ShardCountMismatch):
            self.reopen(SHARDS + 1)
        with pytest.raises(ShardCountMismatch):
            self.reopen(1)
        assert self.reopen(SHARDS).shard_count() == SHARDS

    def test_acquire_shard_bumps_range_id_every_time(self, store: Store) -> None:
        seen = [store.acquire_shard(2, f"node-{attempt}", 1_000 * attempt) for attempt in range(5)]
        assert seen == sorted(set(seen)), f"range ids must strictly increase: {seen}"

    def test_range_id_keeps_increasing_after_reopen(self, store: Store) -> None:
        before = store.acquire_shard(1, "node-a", 1_000)
        assert self.reopen().acquire_shard(1, "node-b", 2_000) > before

    def test_acquire_shard_leaves_other_shards_range_ids_alone(self, store: Store) -> None:
        range_ids = own(store, 0, 1)
        store.acquire_shard(0, "node-b", 1_000)
        arn = execution_arn("on-shard-1")
        result = store.commit([write(arn, shard=1)], {1: range_ids[1]})
        assert result.lost_shards == set()
        assert stored(store.load_execution(arn)) == blob(arn, 1)

    # -- leases and nodes (several engine nodes on one store)

    def test_acquire_with_a_clock_takes_only_a_free_shard(self, store: Store) -> None:
        first = store.acquire_shard(2, "node-a", 10_000, now_ms=0)
        assert first is not None
        assert store.acquire_shard(2, "node-b", 20_000, now_ms=9_999) is None  # node-a's lease still runs
        assert store.acquire_shard(2, "node-a", 20_000, now_ms=9_999) > first  # its holder may take it again
        taken = store.acquire_shard(2, "node-b", 30_000, now_ms=20_000)  # the lease ended: anyone may take it
        assert taken is not None
        assert [(lease.owner, lease.lease_until_ms) for lease in store.shard_leases() if lease.shard_id == 2] \
            == [("node-b", 30_000)]

    def test_acquiring_several_takes_the_free_ones_and_leaves_a_running_lease_alone(self, store: Store) -> None:
        before = {shard: store.acquire_shard(shard, "node-a", 10_000, now_ms=0) for shard in (0, 1, 2)}
        store.acquire_shard(3, "node-b", 50_000, now_ms=0)
        taken = store.acquire_shards([0, 1, 3], "node-c", 40_000, now_ms=10_000)  # node-a's leases ended
        assert sorted(taken) == [0, 1] and all(taken[shard] > before[shard] for shard in taken)
        leases = {lease.shard_id: (lease.owner, lease.lease_until_ms) for lease in store.shard_leases()}
        assert [leases[shard] for shard in (0, 1, 2, 3)] == [
            ("node-c", 40_000), ("node-c", 40_000), ("node-a", 10_000), ("node-b", 50_000)]
        stale = store.commit([write(execution_arn("fenced"), shard=0)], {0: before[0]})
        assert stale.lost_shards == {0}
        assert store.acquire_shards([], "node-c", 40_000, now_ms=10_000) == {}

    def test_renew_extends_only_leases_still_held_at_their_range_id(self, store: Store) -> None:
        held = {shard: store.acquire_shard(shard, "node-a", 10_000, now_ms=0) for shard in (0, 1, 2)}
        store.acquire_shard(1, "node-b", 10_000)  # node-b takes shard 1 (unconditionally)
        assert store.renew_leases("node-a", held, 25_000) == {0, 2}
        leases = {lease.shard_id: lease for lease in store.shard_leases()}
        assert (leases[0].owner, leases[0].lease_until_ms, leases[0].range_id) == ("node-a", 25_000, held[0])
        assert (leases[1].owner, leases[1].lease_until_ms) == ("node-b", 10_000)
        assert store.renew_leases("node-a", {0: held[0] - 1}, 99_000) == set()

    def test_released_shard_is_free_at_once_and_its_range_id_keeps_rising(self, store: Store) -> None:
        held = store.acquire_shard(3, "node-a", 60_000, now_ms=0)
        store.release_shards("node-a", {3: held})
        lease = store.shard_leases()[3]
        assert (lease.owner, lease.lease_until_ms, lease.range_id) == (None, 0, held)
        assert store.acquire_shard(3, "node-b", 70_000, now_ms=1) == held + 1

    def test_release_by_a_fenced_owner_changes_nothing(self, store: Store) -> None:
        stale = store.acquire_shard(0, "node-a", 10_000, now_ms=0)
        fresh = store.acquire_shard(0, "node-b", 30_000, now_ms=20_000)
        store.release_shards("node-a", {0: stale})
        lease = store.shard_leases()[0]
        assert (lease.owner, lease.range_id, lease.lease_until_ms) == ("node-b", fresh, 30_000)

    def test_shard_leases_list_every_shard_in_order(self, store: Store) -> None:
        assert [lease.shard_id for lease in store.shard_leases()] == list(range(SHARDS))
        assert all(lease.owner is None for lease in store.shard_leases())

    def test_nodes_register_refresh_and_leave(self, store: Store) -> None:
        store.register_node("node-b", "http://127.0.0.1:9002", 5_000)
        store.register_node("node-a", "http://127.0.0.1:9001", 5_000)
        self.reopen().register_node("node-a", "http://10.0.0.1:9001", 8_000)  # refreshed, from another handle
        assert [(node.node_id, node.address, node.lease_until_ms) for node in store.nodes()] == [
            ("node-a", "http://10.0.0.1:9001", 8_000), ("node-b", "http://127.0.0.1:9002", 5_000)]
        store.remove_node("node-b")
        assert [node.node_id for node in store.nodes()] == ["node-a"]

    def test_a_node_records_the_assignment_rule_it_speaks_and_its_weight(self, store: Store) -> None:
        store.register_node("node-a", "http://a", 5_000)  # as a release before rules were recorded
        store.register_node("node-b", "http://b", 5_000, rule=2, weight=3)
        assert [(node.rule, node.weight) for node in store.nodes()] == [(1, 1), (2, 3)]
        store.register_node("node-b", "http://b", 9_000, rule=3, weight=1)  # restarted on another release
        assert [(node.rule, node.weight) for node in store.nodes()][1] == (3, 1)
