"""Timers: written and removed by commits, read in fire order by due_timers: the contract written at the top of
statewright.store.base (timers), one rule per test. Mixed into ``store_contract.StoreContract``; talks to the Store
interface only."""

from __future__ import annotations

from statewright.store.base import Store, TimerRow
from store_contract_blocks import ContractBase, all_timers, committed, execution_arn, own, write


class TimersContract(ContractBase):
    """Timers: written and removed by commits, read in fire order by due_timers."""

    # -- timers

    def test_due_timers_come_in_fire_order(self, store: Store) -> None:
        range_ids = own(store, 1)
        arns = [execution_arn(f"sleeper-{index}") for index in range(3)]
        fire_times = [700, 100, 400, 300, 600, 200, 500]
        committed(store, [write(arns[0], shard=1, added=[("a", 700), ("b", 100)])], range_ids)
        committed(store, [write(arns[1], shard=1, start_ms=1_500, added=[("c", 400), ("d", 300)]),
                          write(arns[2], shard=1, added=[("e", 600)])], range_ids)
        committed(store, [write(arns[0], shard=1, expected=1, added=[("f", 200), ("g", 500)])], range_ids)
        rows = store.due_timers(1, 0, 10_000)
        assert [row.fire_at_ms for row in rows] == sorted(fire_times)
        assert [row.timer_id for row in rows] == ["b", "f", "d", "c", "g", "e", "a"]
        assert all(row.shard_id == 1 for row in rows)
        assert rows[0] == TimerRow(1, 100, arns[0], "b")
        assert rows[2] == TimerRow(1, 300, arns[1], "d")
        assert [row.start_ms for row in rows[:3]] == [1_000, 1_000, 1_500]  # their executions' (the engine's order)

    def test_due_timers_bounds_exclude_after_and_include_until(self, store: Store) -> None:
        arn = execution_arn("bounds")
        committed(store, [write(arn, added=[("t100", 100), ("t200", 200), ("t300", 300)])], own(store, 0))

        def due(after_ms: int, until_ms: int) -> list[str]:
            return [row.timer_id for row in store.due_timers(0, after_ms, until_ms)]

        assert due(0, 99) == []
        assert due(99, 100) == ["t100"]
        assert due(100, 100) == []
        assert due(100, 200) == ["t200"]
        assert due(100, 299) == ["t200"]
        assert due(200, 300) == ["t300"]
        assert due(300, 10_000) == []
        assert due(0, 300) == ["t100", "t200", "t300"]

    def test_timers_at_the_same_time_are_all_due(self, store: Store) -> None:
        first, second = execution_arn("same-1"), execution_arn("same-2")
        committed(store, [write(first, added=[("x", 100), ("y", 100)]), write(second, added=[("x", 100)])],
                  own(store, 0))
        assert sorted((row.execution_arn, row.timer_id) for row in store.due_timers(0, 99, 100)) == [
            (first, "x"), (first, "y"), (second, "x")]

    def test_removed_timers_disappear(self, store: Store) -> None:
        range_ids = own(store, 0)
        arn = execution_arn("cancelled")
        committed(store, [write(arn, added=[("wait", 100), ("heartbeat", 150), ("timeout", 900)])], range_ids)
        committed(store, [write(arn, expected=1, removed=[("wait", 100), ("timeout", 900)])], range_ids)
        assert all_timers(store, 0) == [(150, arn, "heartbeat")]
        committed(store, [write(arn, expected=2, removed=[("heartbeat", 150)])], range_ids)
        assert store.due_timers(0, 0, 10_000) == []

    def test_timer_removed_and_added_again_in_one_write_moves(self, store: Store) -> None:
        range_ids = own(store, 0)
        arn = execution_arn("rescheduled")
        committed(store, [write(arn, added=[("heartbeat", 100)])], range_ids)
        committed(store, [write(arn, expected=1, removed=[("heartbeat", 100)], added=[("heartbeat", 400)])],
                  range_ids)
        assert all_timers(store, 0) == [(400, arn, "heartbeat")]

    def test_removing_another_executions_timer_id_leaves_it(self, store: Store) -> None:
        range_ids = own(store, 0)
        first, second = execution_arn("owner-1"), execution_arn("owner-2")
        committed(store, [write(first, added=[("wait", 100)]), write(second, added=[("wait", 100)])], range_ids)
        committed(store, [write(first, expected=1, removed=[("wait", 100)])], range_ids)
        assert all_timers(store, 0) == [(100, second, "wait")]

    def test_due_timers_are_per_shard(self, store: Store) -> None:
        range_ids = own(store, 0, 1, 3)
        arns = {shard: execution_arn(f"shard-{shard}") for shard in (0, 1, 3)}
        committed(store, [write(arn, shard=shard, added=[("wait", 100 + shard)]) for shard, arn in arns.items()],
                  range_ids)
        for shard, arn in arns.items():
            assert store.due_timers(shard, 0, 10_000) == [TimerRow(shard, 100 + shard, arn, "wait")]
        assert store.due_timers(2, 0, 10_000) == []

    def test_due_timers_page_through_timers_due_at_the_same_millisecond(self, store: Store) -> None:
        arns = [execution_arn(f"paged-{index}") for index in range(5)]
        committed(store, [write(arn, added=[("a", 100), ("b", 100)]) for arn in arns], own(store, 0))
        seen: list[tuple[str, str]] = []
        after_ms, after_key = -1, None
        while True:
            rows = store.due_timers(0, after_ms, 1_000, 3, after_key)
            seen += [(row.execution_arn, row.timer_id) for row in rows]
            if len(rows) < 3:
                break
            after_ms, after_key = rows[-1].fire_at_ms, rows[-1].after_key
        assert seen == sorted((arn, timer) for arn in arns for timer in "ab")
