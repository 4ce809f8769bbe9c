"""Compaction and expiry of closed executions: the contract written at the top of statewright.store.retention, one rule
per test. Mixed into ``store_contract.StoreContract``; talks to the Store interface only."""

from __future__ import annotations

from dataclasses import replace

from statewright.store.base import Store
from store_contract_blocks import SHARDS, ContractBase, committed, events, execution_arn, own, write


class RetentionContract(ContractBase):
    """Compaction and expiry of closed executions."""

    def _closed(self, store: Store) -> dict[int, int]:
        """Four executions on shards 0 and 1: succeeded at 2s, failed at 3s, running, succeeded at 5s (shard 1)."""
        ranges = own(store, 0, 1)
        committed(store, [
            write(execution_arn("ok"), shard=0, status="SUCCEEDED", stop_ms=2_000, history=events(1, 3)),
            write(execution_arn("failed"), shard=0, status="FAILED", stop_ms=3_000, history=events(1, 2)),
            write(execution_arn("running"), shard=0, history=events(1, 2)),
            write(execution_arn("late"), shard=1, status="SUCCEEDED", stop_ms=5_000, history=events(1, 2)),
        ], ranges)
        return ranges

    def test_expired_executions_are_the_closed_ones_of_the_shards_asked_oldest_first(self, store: Store) -> None:
        self._closed(store)
        assert [e.arn for e in store.expired_executions([0, 1], 10_000, 10)] == [
            execution_arn("ok"), execution_arn("failed"), execution_arn("late")]
        assert [e.arn for e in store.expired_executions([0], 10_000, 1)] == [execution_arn("ok")]
        assert [e.arn for e in store.expired_executions([0, 1], 2_999, 10)] == [execution_arn("ok")]

    def test_an_execution_is_expired_only_once_nothing_of_its_own_is_left_in_the_outbox(self, store: Store) -> None:
        ranges = own(store, 0)
        closing = write(execution_arn("told"), shard=0, status="SUCCEEDED", stop_ms=2_000, history=events(1, 2))
        closing.effects.dispatches_added = [("status-2", {"kind": "status", "detail": {"status": "SUCCEEDED"}})]
        committed(store, [closing], ranges)
        assert store.expired_executions([0], 10_000, 10) == []  # its status event has not gone out yet
        sent = write(execution_arn("told"), shard=0, expected=1, status="SUCCEEDED", stop_ms=2_000)
        sent.effects.dispatches_removed = ["status-2"]
        committed(store, [sent], ranges)
        assert [e.arn for e in store.expired_executions([0], 10_000, 10)] == [execution_arn("told")]

    def test_executions_to_compact_are_the_closed_ones_failed_or_not_oldest_first(self, store: Store) -> None:
        self._closed(store)
        assert [e.arn for e in store.executions_to_compact([0, 1], 10_000, 10)] == [
            execution_arn("ok"), execution_arn("failed"), execution_arn("late")]
        assert [e.arn for e in store.executions_to_compact([0, 1], 2_999, 10)] == [execution_arn("ok")]
        assert [e.arn for e in store.executions_to_compact([1], 10_000, 1)] == [execution_arn("late")]

    def test_a_compacted_execution_redriven_and_closed_again_is_due_again(self, store: Store) -> None:
        ranges = self._closed(store)
        failed = store.executions_to_compact([0], 3_000, 10)[1]
        assert store.compact_histories([(failed, "history/failed/2")], ranges) == [failed]
        redriven = write(failed.arn, shard=0, expected=failed.version, history=events(3, 4))  # status RUNNING
        committed(store, [redriven], ranges)
        assert store.history_location(failed.arn) == "history/failed/2"  # the new events are in the table
        assert store.read_history(failed.arn, 0, 100, False) == events(3, 4)
        assert [e.arn for e in store.executions_to_compact([0], 10_000, 10)] == [execution_arn("ok")]
        closed = write(failed.arn, shard=0, expected=redriven.version, status="FAILED", stop_ms=6_000,
                       history=events(5, 5))
        committed(store, [closed], ranges)
        assert [e.arn for e in store.executions_to_compact([0], 5_999, 10)] == [execution_arn("ok")]
        again = store.executions_to_compact([0], 6_000, 10)[1]
        assert (again.arn, again.version, again.history_location) == (failed.arn, closed.version, "history/failed/2")
        assert store.compact_histories([(again, "history/failed/5")], ranges) == [again]
        assert store.history_location(failed.arn) == "history/failed/5"
        assert store.read_history(failed.arn, 0, 100, False) == []
        assert store.compact_histories([(again, "history/failed/6")], ranges) == []  # compacted since it closed
        assert [e.arn for e in store.executions_to_compact([0], 10_000, 10)] == [execution_arn("ok")]

    def test_compacting_moves_the_history_out_and_records_where_once(self, store: Store) -> None:
        ranges = self._closed(store)
        ok = store.executions_to_compact([0], 10_000, 1)[0]
        assert store.history_location(ok.arn) is None
        assert store.compact_histories([(ok, "history/ok")], ranges) == [ok]
        assert store.read_history(ok.arn, 0, 100, False) == []
        assert store.history_location(ok.arn) == "history/ok"
        assert store.compact_histories([(ok, "history/again")], ranges) == []  # compacted already
        assert store.history_location(ok.arn) == "history/ok"
        assert [e.arn for e in store.executions_to_compact([0], 2_000, 10)] == []
        assert [(e.arn, e.history_location) for e in store.expired_executions([0], 2_000, 10)] == [
            (ok.arn, "history/ok")]

    def test_compacting_a_row_that_changed_or_a_lost_shard_does_nothing(self, store: Store) -> None:
        ranges = self._closed(store)
        ok, failed = store.executions_to_compact([0], 10_000, 10)
        committed(store, [write(failed.arn, shard=0, expected=failed.version, status="RUNNING")], ranges)  # redriven
        assert store.compact_histories([(failed, "history/failed"), (ok, "history/ok")], ranges) == [ok]
        assert store.read_history(failed.arn, 0, 100, False) == events(1, 2)
        late = store.executions_to_compact([1], 10_000, 1)[0]
        assert store.compact_histories([(late, "history/late")], {1: ranges[1] - 1}) == []
        assert store.history_location(late.arn) is None

    def test_deleting_frees_the_name_and_takes_the_history_with_it(self, store: Store) -> None:
        ranges = self._closed(store)
        expired = store.expired_executions([0, 1], 10_000, 10)
        stale = [replace(expired[0], version=expired[0].version + 1)]
        assert store.delete_executions(stale, ranges) == []
        assert store.delete_executions(expired, {0: ranges[0]}) == expired[:2]  # shard 1 is not at that range id
        assert store.load_execution(execution_arn("ok")) is None
        assert store.read_history(execution_arn("ok"), 0, 100, False) == []
        assert store.load_execution(execution_arn("late")) is not None
        committed(store, [write(execution_arn("ok"), shard=0, history=events(1, 1))], ranges)  # the name again
        assert store.read_history(execution_arn("ok"), 0, 100, False) == events(1, 1)

    def test_its_own_payload_store_keeps_objects_for_every_handle_until_deleted(self, store: Store) -> None:
        key, body = "history/ab/abcd.7.json.gz", bytes(range(256)) * 3
        payloads = store.payloads()
        assert payloads.get(key) is None
        payloads.put(key, body)
        other = self.reopen_store(SHARDS)  # another process, or another node
        try:
            assert other.payloads().get(key) == body
            other.payloads().put(key, b"the name used again")  # after expiry: the same key, another history
        finally:
            other.close()
        assert payloads.get(key) == b"the name used again"
        payloads.delete(key)
        payloads.delete(key)  # none: nothing happens
        assert payloads.get(key) is None
