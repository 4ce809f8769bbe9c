"""Executions and commit: fencing by range id, version checks, write groups, history, loading and listing: the contract
written at the top of statewright.store.base (commit and executions), one rule per test. Mixed into
``store_contract.StoreContract``; talks to the Store interface only."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import orjson
import pytest

from statewright.store.base import CommitOutcomeUnknown, ExecutionSummary, Store
from store_contract_blocks import (
    MACHINE,
    OTHER_MACHINE,
    SHARDS,
    ContractBase,
    all_timers,
    blob,
    committed,
    events,
    execution_arn,
    own,
    page_through,
    stored,
    write,
)


class ExecutionsContract(ContractBase):
    """Executions and commit: fencing by range id, version checks, write groups, history, loading and listing."""

    def test_count_open_executions_counts_running_rows(self, store: Store) -> None:
        range_ids = own(store, 0, 1)
        committed(store, [write(execution_arn("a"), shard=0), write(execution_arn("b"), shard=1),
                          write(execution_arn("c"), shard=1, status="SUCCEEDED", stop_ms=2_000)], range_ids)
        assert store.count_open_executions() == 2
    # -- commit: fencing by range id

    def test_stale_range_id_commits_nothing_for_that_shard_but_commits_the_other_shards(self, store: Store) -> None:
        range_ids = own(store, 0, 1)
        stale_arn, fresh_arn = execution_arn("stale"), execution_arn("fresh")
        committed(store, [write(stale_arn, shard=0, history=events(1, 2), added=[("t-old", 500)])], range_ids)
        store.acquire_shard(0, "node-b", 1_000)  # another node takes shard 0
        batch = [
            write(stale_arn, shard=0, expected=1, history=events(3, 4), added=[("t-new", 700)],
                  removed=[("t-old", 500)]),
            write(execution_arn("stale-new"), shard=0, history=events(1, 1), added=[("t-x", 800)]),
            write(fresh_arn, shard=1, history=events(1, 3), added=[("t-fresh", 900)]),
        ]
        result = store.commit(batch, range_ids)
        assert result.lost_shards == {0}
        assert [result.committed(index, item) for index, item in enumerate(batch)] == [False, False, True]
        assert stored(store.load_execution(stale_arn)) == blob(stale_arn, 1)
        assert store.read_history(stale_arn, 0, 100, False) == events(1, 2)
        assert store.load_execution(execution_arn("stale-new")) is None
        assert all_timers(store, 0) == [(500, stale_arn, "t-old")]
        assert stored(store.load_execution(fresh_arn)) == blob(fresh_arn, 1)
        assert store.read_history(fresh_arn, 0, 100, False) == events(1, 3)
        assert all_timers(store, 1) == [(900, fresh_arn, "t-fresh")]

    def test_commit_for_a_shard_missing_from_range_ids_is_ownership_lost(self, store: Store) -> None:
        range_ids = own(store, 0, 3)
        arn = execution_arn("unowned")
        result = store.commit([write(arn, shard=3)], {0: range_ids[0]})
        assert result.lost_shards == {3}
        assert store.load_execution(arn) is None

    def test_second_owner_fences_the_first_across_store_handles(self, store: Store) -> None:
        first = own(store, 2)
        other = self.reopen()
        second = own(other, 2)
        arn = execution_arn("contested")
        assert store.commit([write(arn, shard=2)], first).lost_shards == {2}
        assert other.load_execution(arn) is None
        committed(other, [write(arn, shard=2, history=events(1, 1))], second)
        assert stored(store.load_execution(arn)) == blob(arn, 1)

    def test_empty_batch_commits_nothing(self, store: Store) -> None:
        result = store.commit([], own(store, 0))
        assert result.lost_shards == set() and result.conflicts == []

    # -- commit: version checks

    def test_expected_version_zero_inserts_the_execution(self, store: Store) -> None:
        arn = execution_arn("new")
        committed(store, [write(arn, shard=1, history=events(1, 2), added=[("wait", 5_000)])], own(store, 1))
        assert stored(store.load_execution(arn)) == blob(arn, 1)
        assert store.read_history(arn, 0, 100, False) == events(1, 2)
        assert all_timers(store, 1) == [(5_000, arn, "wait")]

    def test_second_insert_of_the_same_arn_is_a_conflict_and_writes_nothing(self, store: Store) -> None:
        range_ids = own(store, 0)
        arn = execution_arn("twice")
        committed(store, [write(arn, history=events(1, 2), added=[("first", 100)])], range_ids)
        again = write(arn, version=7, status="FAILED", history=events(3, 5), added=[("second", 200)])
        result = store.commit([again], range_ids)
        assert result.conflicts == [0] and not result.committed(0, again)
        assert stored(store.load_execution(arn)) == blob(arn, 1)
        assert store.read_history(arn, 0, 100, False) == events(1, 2)
        assert all_timers(store, 0) == [(100, arn, "first")]
        assert [item.status for item in store.list_executions(MACHINE, None, 10, None).items] == ["RUNNING"]

    def test_update_with_the_expected_version_replaces_the_state(self, store: Store) -> None:
        range_ids = own(store, 0)
        arn = execution_arn("updated")
        committed(store, [write(arn, history=events(1, 2))], range_ids)
        committed(store, [write(arn, expected=1, history=events(3, 4))], range_ids)
        committed(store, [write(arn, expected=2, status="SUCCEEDED", stop_ms=9_000, history=events(5, 6))],
                  range_ids)
        assert stored(store.load_execution(arn)) == blob(arn, 3)
        assert store.read_history(arn, 0, 100, False) == events(1, 6)

    def test_update_with_a_wrong_expected_version_is_a_conflict_and_writes_nothing(self, store: Store) -> None:
        range_ids = own(store, 0)
        arn = execution_arn("raced")
        committed(store, [write(arn, history=events(1, 2), added=[("keep", 100)])], range_ids)
        committed(store, [write(arn, expected=1, history=events(3, 3))], range_ids)
        for expected in (1, 3, 99):  # behind, ahead, far ahead
            stale = write(arn, expected=expected, status="SUCCEEDED", stop_ms=5_000, history=events(4, 6),
                          added=[("new", 200)], removed=[("keep", 100)])
            result = store.commit([stale], range_ids)
            assert result.conflicts == [0] and result.lost_shards == set()
        assert stored(store.load_execution(arn)) == blob(arn, 2)
        assert store.read_history(arn, 0, 100, False) == events(1, 3)
        assert all_timers(store, 0) == [(100, arn, "keep")]
        summary = store.list_executions(MACHINE, None, 10, None).items[0]
        assert (summary.status, summary.stop_ms) == ("RUNNING", None)

    def test_update_of_a_missing_execution_is_a_conflict(self, store: Store) -> None:
        arn = execution_arn("ghost")
        result = store.commit([write(arn, expected=3, history=events(1, 1), added=[("t", 1)])], own(store, 0))
        assert result.conflicts == [0]
        assert store.load_execution(arn) is None
        assert store.read_history(arn, 0, 100, False) == []
        assert all_timers(store, 0) == []

    def test_batch_mixing_conflicts_and_good_writes_commits_only_the_good_ones(self, store: Store) -> None:
        range_ids = own(store, 0, 1)
        existing, moved = execution_arn("existing"), execution_arn("moved")
        committed(store, [write(existing, history=events(1, 1)), write(moved, shard=1, history=events(1, 1))],
                  range_ids)
        fresh = execution_arn("fresh")
        batch = [
            write(fresh, history=events(1, 2), added=[("f", 10)]),  # good insert
            write(existing, history=events(1, 2), added=[("dup", 20)]),  # insert of an existing ARN
            write(moved, shard=1, expected=1, history=events(2, 3), added=[("m", 30)]),  # good update
            write(existing, expected=5, history=events(2, 2), added=[("bad", 40)]),  # wrong version
        ]
        result = store.commit(batch, range_ids)
        assert result.conflicts == [1, 3] and result.lost_shards == set()
        assert [result.committed(index, item) for index, item in enumerate(batch)] == [True, False, True, False]
        assert stored(store.load_execution(fresh)) == blob(fresh, 1)
        assert stored(store.load_execution(existing)) == blob(existing, 1)
        assert stored(store.load_execution(moved)) == blob(moved, 2)
        assert store.read_history(existing, 0, 100, False) == events(1, 1)
        assert store.read_history(moved, 0, 100, False) == events(1, 3)
        assert all_timers(store, 0) == [(10, fresh, "f")]
        assert all_timers(store, 1) == [(30, moved, "m")]

    def test_writes_of_one_execution_in_one_batch_apply_in_order(self, store: Store) -> None:
        arn = execution_arn("chained")
        batch = [
            write(arn, history=events(1, 2), added=[("wait", 100)]),
            write(arn, expected=1, history=events(3, 4), removed=[("wait", 100)], added=[("retry", 200)]),
            write(arn, expected=2, history=events(5, 5), removed=[("retry", 200)], added=[("wait", 300)]),
        ]
        committed(store, batch, own(store, 0))
        assert stored(store.load_execution(arn)) == blob(arn, 3)
        assert store.read_history(arn, 0, 100, False) == events(1, 5)
        assert all_timers(store, 0) == [(300, arn, "wait")]

    def test_failed_commit_writes_nothing_and_leaves_the_store_usable(self, store: Store) -> None:
        range_ids = own(store, 0)
        good, broken = execution_arn("good"), execution_arn("broken")
        unserializable = [{"id": 1, "type": "ExecutionStarted", "details": {1, 2}}]  # a set is not JSON
        with pytest.raises((TypeError, CommitOutcomeUnknown)):
            store.commit([write(good, history=events(1, 1)), write(broken, history=unserializable)], range_ids)
        assert store.load_execution(good) is None and store.load_execution(broken) is None
        committed(store, [write(good, history=events(1, 1))], range_ids)
        seen: list[bytes | None] = []
        reader = threading.Thread(target=lambda: seen.append(stored(store.load_execution(good))))
        reader.start()
        reader.join(timeout=60)
        assert seen == [blob(good, 1)]

    def test_commits_are_visible_from_another_thread(self, store: Store) -> None:
        range_ids = own(store, 0)
        arns = [execution_arn(f"threaded-{index}") for index in range(4)]

        def commit_one(arn: str) -> None:
            committed(store, [write(arn, history=events(1, 1))], range_ids)

        threads = [threading.Thread(target=commit_one, args=(arn,)) for arn in arns]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert {arn: stored(store.load_execution(arn)) for arn in arns} == {arn: blob(arn, 1) for arn in arns}

    # -- history

    @pytest.fixture
    def nine_events(self, store: Store) -> str:
        """One execution whose events 1..9 arrived in three commits, 1-3, 4-5 and 6-9, next to a neighbour's."""
        range_ids = own(store, 0)
        arn, neighbour = execution_arn("history"), execution_arn("neighbour")
        committed(store, [write(arn, history=events(1, 3)), write(neighbour, history=events(1, 4))], range_ids)
        committed(store, [write(arn, expected=1, history=events(4, 5))], range_ids)
        committed(store, [write(arn, expected=2, history=[])], range_ids)  # a commit with no events
        committed(store, [write(arn, expected=3, history=events(6, 9)),
                          write(neighbour, expected=1, history=events(5, 6))], range_ids)
        return arn

    def test_history_reads_forward_across_commits(self, store: Store, nine_events: str) -> None:
        def ids(after: int, limit: int) -> list[int]:
            return [event["id"] for event in store.read_history(nine_events, after, limit, False)]

        assert store.read_history(nine_events, 0, 100, False) == events(1, 9)
        assert ids(0, 2) == [1, 2]
        assert ids(2, 3) == [3, 4, 5]
        assert ids(3, 1) == [4]
        assert ids(5, 100) == [6, 7, 8, 9]
        assert ids(4, 4) == [5, 6, 7, 8]
        assert ids(8, 100) == [9]
        assert ids(9, 100) == []
        assert ids(50, 100) == []

    def test_history_reads_in_reverse_with_zero_meaning_the_end(self, store: Store, nine_events: str) -> None:
        def ids(before: int, limit: int) -> list[int]:
            return [event["id"] for event in store.read_history(nine_events, before, limit, True)]

        assert store.read_history(nine_events, 0, 100, True) == events(1, 9)[::-1]
        assert ids(0, 2) == [9, 8]
        assert ids(7, 3) == [6, 5, 4]
        assert ids(6, 100) == [5, 4, 3, 2, 1]
        assert ids(4, 1) == [3]
        assert ids(2, 100) == [1]
        assert ids(1, 100) == []
        assert ids(50, 100) == list(range(9, 0, -1))

    @pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
    @pytest.mark.parametrize("limit", [1, 2, 4, 100])
    def test_history_paging_returns_every_event_once(self, store: Store, nine_events: str, limit: int,
                                                     reverse: bool) -> None:
        seen: list[dict[str, Any]] = []
        for _ in range(20):
            after = seen[-1]["id"] if seen else 0
            page = store.read_history(nine_events, after, limit, reverse)
            assert len(page) <= limit
            if not page:
                break
            seen += page
        assert seen == (events(1, 9)[::-1] if reverse else events(1, 9))

    def test_history_is_per_execution(self, store: Store, nine_events: str) -> None:
        assert store.read_history(execution_arn("neighbour"), 0, 100, False) == events(1, 6)
        assert store.read_history(execution_arn("nobody"), 0, 100, False) == []
        assert store.read_history(execution_arn("nobody"), 0, 100, True) == []

    # -- write groups

    def test_a_write_group_lands_whole_or_not_at_all(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        first, second, alone = execution_arn("g-1"), execution_arn("g-2"), execution_arn("g-alone")
        committed(store, [write(first), write(second, shard=1)], ranges)
        group = [write(first, expected=1), write(second, shard=1, expected=5)]  # the second's check fails
        group[0].group = group[1].group = 7
        result = store.commit([*group, write(alone)], ranges)
        assert sorted(result.conflicts) == [0, 1]
        assert stored(store.load_execution(first)) == blob(first, 1)  # its write went back with its group's
        assert stored(store.load_execution(alone)) == blob(alone, 1)

    def test_a_write_group_with_a_member_on_a_lost_shard_does_not_land(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        first, second = execution_arn("lost-1"), execution_arn("lost-2")
        stale = {**ranges, 1: ranges[1] - 1}  # shard 1 was taken by another owner since
        group = [write(first), write(second, shard=1)]
        group[0].group = group[1].group = 3
        result = store.commit(group, stale)
        assert result.lost_shards == {1} and not result.committed(0, group[0])
        assert store.load_execution(first) is None

    # -- executions

    def test_load_execution_returns_the_committed_blob(self, store: Store) -> None:
        range_ids = own(store, 0)
        arn = execution_arn("loaded")
        assert store.load_execution(arn) is None
        committed(store, [write(arn)], range_ids)
        assert stored(store.load_execution(arn)) == blob(arn, 1)
        committed(store, [write(arn, expected=1)], range_ids)
        assert stored(store.load_execution(arn)) == blob(arn, 2)
        assert isinstance(store.load_execution(arn), bytes)

    def test_a_loaded_blob_has_its_rows_fields_in_front(self, store: Store) -> None:
        """What a blob written beside its row leaves out (Store.rows_hold_fields), a read puts back from the
        columns; a field the blob holds itself comes later, and wins."""
        range_ids = own(store, 1)
        arn = execution_arn("beside")
        committed(store, [write(arn, shard=1, start_ms=1_234, status="SUCCEEDED", stop_ms=2_000)], range_ids)
        for raw in (store.load_execution(arn), store.load_executions([arn])[arn]):
            loaded = orjson.loads(raw)
            assert {name: loaded[name] for name in ("arn", "state_machine_arn", "name", "start_ms", "shard_id",
                                                    "status", "version")} == {
                "arn": arn, "state_machine_arn": MACHINE, "name": "beside", "start_ms": 1_234, "shard_id": 1,
                "status": "SUCCEEDED", "version": 1}
            assert orjson.dumps({"at": loaded["at"], "text": loaded["text"]}) == blob(arn, 1)

    def test_load_executions_returns_those_that_exist_in_one_call(self, store: Store) -> None:
        range_ids = own(store, 0, 1)
        arns = [execution_arn(f"many-{index}") for index in range(3)]
        committed(store, [write(arns[0]), write(arns[2])], range_ids)
        committed(store, [write(arns[2], expected=1)], range_ids)
        found = store.load_executions([*arns, execution_arn("never")])
        assert {arn: stored(raw) for arn, raw in found.items()} == {arns[0]: blob(arns[0], 1),
                                                                   arns[2]: blob(arns[2], 2)}
        assert all(isinstance(value, bytes) for value in found.values())
        assert store.load_executions([]) == {}

    def test_list_executions_is_newest_first_with_summaries(self, store: Store) -> None:
        range_ids = own(store, 0, 1)
        arns = [execution_arn(f"run-{index}") for index in range(4)]
        committed(store, [write(arn, shard=index % 2, start_ms=1_000 * (index + 1)) for index, arn in enumerate(arns)],
                  range_ids)
        committed(store, [write(arns[1], shard=1, expected=1, status="SUCCEEDED", stop_ms=9_000)], range_ids)
        page = store.list_executions(MACHINE, None, 10, None)
        assert page.next_cursor is None
        assert page.items == [
            ExecutionSummary(arns[3], MACHINE, "run-3", "RUNNING", 4_000, None),
            ExecutionSummary(arns[2], MACHINE, "run-2", "RUNNING", 3_000, None),
            ExecutionSummary(arns[1], MACHINE, "run-1", "SUCCEEDED", 2_000, 9_000),
            ExecutionSummary(arns[0], MACHINE, "run-0", "RUNNING", 1_000, None),
        ]

    def test_list_executions_filters_by_status(self, store: Store) -> None:
        range_ids = own(store, 0)
        arns = [execution_arn(f"mixed-{index}") for index in range(5)]
        committed(store, [write(arn, start_ms=100 * index) for index, arn in enumerate(arns)], range_ids)
        committed(store, [write(arns[1], expected=1, status="FAILED", stop_ms=1_000),
                          write(arns[3], expected=1, status="FAILED", stop_ms=1_000),
                          write(arns[4], expected=1, status="SUCCEEDED", stop_ms=1_000)], range_ids)

        def listed(status: str | None) -> list[str]:
            return [item.arn for item in store.list_executions(MACHINE, status, 10, None).items]

        assert listed("FAILED") == [arns[3], arns[1]]
        assert listed("SUCCEEDED") == [arns[4]]
        assert listed("RUNNING") == [arns[2], arns[0]]
        assert listed("ABORTED") == []
        assert listed(None) == arns[::-1]

    @pytest.mark.parametrize("limit", [1, 2, 3, 7, 50])
    def test_list_executions_pages_over_ties_in_start_ms(self, store: Store, limit: int) -> None:
        range_ids = own(store, 0, 1, 2, 3)
        start_times = [5_000, 3_000, 3_000, 3_000, 3_000, 3_000, 1_000, 1_000, 7_000, 3_000]
        arns = [execution_arn(f"tie-{index:02d}") for index in range(len(start_times))]
        committed(store, [write(arn, shard=index % SHARDS, start_ms=start_ms)
                          for index, (arn, start_ms) in enumerate(zip(arns, start_times, strict=True))], range_ids)
        committed(store, [write(execution_arn("elsewhere", OTHER_MACHINE), machine=OTHER_MACHINE, start_ms=3_000)],
                  range_ids)
        items = page_through(lambda size, cursor: store.list_executions(MACHINE, None, size, cursor), limit)
        assert sorted(item.arn for item in items) == sorted(arns)  # each exactly once, nothing from elsewhere
        assert [item.start_ms for item in items] == sorted(start_times, reverse=True)

    def test_list_executions_pages_with_a_status_filter(self, store: Store) -> None:
        range_ids = own(store, 0)
        arns = [execution_arn(f"filtered-{index}") for index in range(6)]
        committed(store, [write(arn, start_ms=2_000, status="RUNNING" if index % 2 else "SUCCEEDED",
                                stop_ms=None if index % 2 else 3_000) for index, arn in enumerate(arns)], range_ids)
        items = page_through(lambda size, cursor: store.list_executions(MACHINE, "RUNNING", size, cursor), 1)
        assert sorted(item.arn for item in items) == [arns[1], arns[3], arns[5]]

    def test_an_execution_row_counts_its_redrives_and_list_executions_filters_by_them(self, store: Store) -> None:
        range_ids = own(store, 0)
        arns = [execution_arn(f"redriven-{index}") for index in range(3)]
        committed(store, [write(arn, start_ms=100 * index, status="FAILED", stop_ms=500)
                          for index, arn in enumerate(arns)], range_ids)
        # Redriven: RUNNING again with its count and time, in an update (and, for arns[2], closed again after).
        committed(store, [replace(write(arn, expected=1), redrive_count=1, redrive_ms=600) for arn in arns[1:]],
                  range_ids)
        committed(store, [replace(write(arns[2], expected=2, status="FAILED", stop_ms=700), redrive_count=1,
                                  redrive_ms=600)], range_ids)

        def listed(redriven: bool | None) -> list[tuple[str, int, int | None]]:
            return [(item.arn, item.redrive_count, item.redrive_ms)
                    for item in store.list_executions(MACHINE, None, 10, None, redriven=redriven).items]

        assert listed(True) == [(arns[2], 1, 600), (arns[1], 1, 600)]
        assert listed(False) == [(arns[0], 0, None)]
        assert listed(None) == [(arns[2], 1, 600), (arns[1], 1, 600), (arns[0], 0, None)]
        assert [item.arn for item in store.list_executions(MACHINE, "FAILED", 10, None, redriven=True).items] == [
            arns[2]]

    def test_list_executions_of_an_unknown_machine_is_empty(self, store: Store) -> None:
        page = store.list_executions(OTHER_MACHINE, None, 10, None)
        assert page.items == [] and page.next_cursor is None

    def test_list_executions_by_version_or_alias(self, store: Store) -> None:
        range_ids = own(store, 0)
        version, alias = f"{MACHINE}:1", f"{MACHINE}:live"
        plain = write(execution_arn("plain"), start_ms=1_000)
        on_version = write(execution_arn("on-version"), start_ms=2_000)
        on_version.version_arn = version
        through_alias = write(execution_arn("through-alias"), start_ms=3_000)
        through_alias.version_arn, through_alias.alias_arn = version, alias
        committed(store, [plain, on_version, through_alias], range_ids)
        assert [e.name for e in store.list_executions(MACHINE, None, 10, None).items] == [
            "through-alias", "on-version", "plain"]
        assert store.list_executions(MACHINE, None, 10, None, version_arn=version).items == [
            ExecutionSummary(through_alias.arn, MACHINE, "through-alias", "RUNNING", 3_000, None, version, alias),
            ExecutionSummary(on_version.arn, MACHINE, "on-version", "RUNNING", 2_000, None, version, None)]
        assert [e.name for e in store.list_executions(MACHINE, None, 10, None, alias_arn=alias).items] == [
            "through-alias"]
        page = store.list_executions(MACHINE, None, 1, None, version_arn=version)
        rest = store.list_executions(MACHINE, None, 1, page.next_cursor, version_arn=version)
        assert [e.name for e in page.items + rest.items] == ["through-alias", "on-version"]
