"""The outbox (dispatches) and express starts: the contract written at the top of statewright.store.base (dispatches,
express starts), one rule per test. Mixed into ``store_contract.StoreContract``; talks to the Store interface only."""

from __future__ import annotations

from statewright.store.base import Store
from store_contract_blocks import ContractBase, committed, execution_arn, own, write


class OutboxContract(ContractBase):
    """The outbox (dispatches) and express starts."""

    def test_express_starts_are_kept_until_removed_and_survive_a_reopen(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        a, b, c = (f"arn:aws:states:us-east-1:123456789012:express:m:{name}:1" for name in "abc")
        assert store.write_express_starts([(0, b, b"B"), (0, a, b"A"), (1, c, b"C")], [], ranges) == set()
        assert store.express_starts(0) == [b"A", b"B"]
        assert store.write_express_starts([(0, a, b"A2")], [(1, c)], ranges) == set()
        assert self.reopen().express_starts(0) == [b"A2", b"B"]
        assert store.express_starts(1) == []

    def test_express_starts_of_a_lost_shard_are_not_written(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        store.acquire_shard(1, "node-b", 120_000)  # another node takes shard 1
        arn = "arn:aws:states:us-east-1:123456789012:express:m:x:1"
        assert store.write_express_starts([(0, arn, b"0"), (1, arn, b"1")], [], ranges) == {1}
        assert (store.express_starts(0), store.express_starts(1)) == ([b"0"], [])

    def test_dispatches_are_pending_until_removed_in_order(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        a, b = execution_arn("a"), execution_arn("b")
        first = write(a)
        first.effects.dispatches_added = [("3", {"kind": "activity", "n": 1}), ("9", {"kind": "http"})]
        other = write(b, shard=1)
        other.effects.dispatches_added = [("3", {"kind": "activity", "n": 2})]
        committed(store, [first, other], ranges)
        assert [(d.dispatch_id, d.payload) for d in store.pending_dispatches(0)] == [
            ("3", {"kind": "activity", "n": 1}), ("9", {"kind": "http"})]
        assert [d.execution_arn for d in store.pending_dispatches(1)] == [b]
        started = write(a, expected=1)
        started.effects.dispatches_removed = ["3"]
        committed(store, [started], ranges)
        assert [d.dispatch_id for d in store.pending_dispatches(0)] == ["9"]

    def test_a_dispatch_added_and_removed_in_one_batch_never_shows(self, store: Store) -> None:
        ranges = own(store, 0)
        arn = execution_arn("quick")
        first = write(arn)
        first.effects.dispatches_added = [("3", {"k": 1})]
        second = write(arn, expected=1)
        second.effects.dispatches_removed = ["3"]
        committed(store, [first, second], ranges)
        assert store.pending_dispatches(0) == []

    def test_dispatches_page_by_seq_and_later_commits_sort_after(self, store: Store) -> None:
        ranges = own(store, 0)
        arn = execution_arn("paging")
        first = write(arn)
        first.effects.dispatches_added = [(str(n), {"n": n}) for n in range(5)]
        committed(store, [first], ranges)
        page = store.pending_dispatches(0, 0, 3)
        assert [d.dispatch_id for d in page] == ["0", "1", "2"]
        removed = write(arn, expected=1)
        removed.effects.dispatches_removed = ["0", "1", "2", "3", "4"]
        removed.effects.dispatches_added = [("late", {"n": 9})]
        committed(store, [removed], ranges)
        assert [d.dispatch_id for d in store.pending_dispatches(0, page[-1].seq, 3)] == ["late"]

    def test_a_new_owner_that_removes_the_newest_row_still_writes_its_next_above_what_it_read(
            self, store: Store) -> None:
        arn = execution_arn("taken-over")
        first = write(arn)
        first.effects.dispatches_added = [("1", {"n": 1}), ("2", {"n": 2})]
        committed(store, [first], own(store, 0))
        successor = self.reopen()  # another process takes the shard, reads its rows, acks the newest, adds one
        ranges = {0: successor.acquire_shard(0, "node-b", 120_000)}
        read = successor.pending_dispatches(0)
        acked = write(arn, expected=1)
        acked.effects.dispatches_removed = ["2"]
        committed(successor, [acked], ranges)
        added = write(arn, expected=2)
        added.effects.dispatches_added = [("3", {"n": 3})]
        committed(successor, [added], ranges)
        assert [d.dispatch_id for d in successor.pending_dispatches(0, read[-1].seq)] == ["3"]

    def test_a_conflicting_write_leaves_no_dispatch(self, store: Store) -> None:
        ranges = own(store, 0)
        bad = write(execution_arn("x"), expected=5)
        bad.effects.dispatches_added = [("3", {"k": 1})]
        assert store.commit([bad], ranges).conflicts == [0]
        assert store.pending_dispatches(0) == []
