"""Two decisions' effects carried by one write (decider/effects.py, Effects.fold)."""

from __future__ import annotations

from statewright.decider.effects import Effects


def test_folded_effects_keep_both_decisions_events_in_order():
    first = Effects(events=[{"id": 1}, {"id": 2}])
    first.fold(Effects(events=[{"id": 3}]))
    assert [event["id"] for event in first.events] == [1, 2, 3]


def test_a_timer_set_then_cleared_is_not_inserted_but_its_delete_is_kept():
    first = Effects(timers_added=[("wait-2", 5_000), ("timeout-3", 9_000)])
    first.fold(Effects(timers_removed=[("wait-2", 5_000)], timers_added=[("wait-7", 6_000)]))
    assert first.timers_added == [("timeout-3", 9_000), ("wait-7", 6_000)]
    assert first.timers_removed == [("wait-2", 5_000)]


def test_a_timer_cleared_then_set_again_stays():
    first = Effects(timers_removed=[("heartbeat-3", 5_000)])
    first.fold(Effects(timers_added=[("heartbeat-3", 5_000)]))
    assert first.timers_removed == [("heartbeat-3", 5_000)]
    assert first.timers_added == [("heartbeat-3", 5_000)]  # the store deletes before it inserts: it stays


def test_a_dispatch_added_then_acknowledged_is_never_written():
    first = Effects(dispatches_added=[("d1", {"kind": "lambda"}), ("d2", {"kind": "http"})])
    first.fold(Effects(dispatches_removed=["d1"]))
    assert first.dispatches_added == [("d2", {"kind": "http"})]
    assert first.dispatches_removed == ["d1"]
