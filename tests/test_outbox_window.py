"""The outbox window: memory holds at most outbox_window_max dispatches, and every row of the outbox is handed out
(at least once, and again after a re-read) however commits, removals, re-reads and full windows interleave."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statewright.engine.limits import Limits
from statewright.engine.outbox import OutboxWindow
from statewright.store.base import Dispatch

LIMITS = Limits(outbox_window_max=3, outbox_page_rows_max=2)


class Rows:
    """The outbox rows of every shard (the truth), with seqs that only grow."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Dispatch] = {}
        self.seq = 0

    def add(self, shard: int, name: str, kind: str = "http") -> Dispatch:
        self.seq += 1
        dispatch = Dispatch(shard, f"arn-{name}", name, {"kind": kind}, self.seq)
        self.rows[(dispatch.execution_arn, dispatch.dispatch_id)] = dispatch
        return dispatch

    def read(self, shard: int, after_seq: int, limit: int) -> list[Dispatch]:
        found = sorted((d for d in self.rows.values() if d.shard_id == shard and d.seq > after_seq),
                       key=lambda d: d.seq)
        return found[:limit]


def test_a_full_window_leaves_new_dispatches_in_the_rows_until_there_is_room():
    rows, window = Rows(), OutboxWindow(LIMITS)
    handed = [rows.add(0, f"d{i}") for i in range(3)]
    assert all(window.committed(dispatch) for dispatch in handed)
    late = rows.add(0, "late")
    assert not window.committed(late) and window.behind() == [0]
    assert list(window.read(0, rows.read)) == []  # still full
    del rows.rows[("arn-d0", "d0")]
    window.release("arn-d0", "d0")
    assert list(window.read(0, rows.read)) == []  # the first page (d1, d2) is held already
    assert [d.dispatch_id for d in window.read(0, rows.read)] == ["late"]
    assert window.behind() == []


def test_a_reread_hands_out_again_what_memory_held():
    rows, window = Rows(), OutboxWindow(LIMITS)
    first = rows.add(1, "a")
    assert window.committed(first)
    window.reread(1)
    assert [d.dispatch_id for d in window.read(1, rows.read)] == ["a"]


def test_activity_tasks_are_not_held_so_a_backlog_of_them_blocks_nothing():
    rows, window = Rows(), OutboxWindow(LIMITS)
    tasks = [rows.add(0, f"t{i}", "activity") for i in range(10)]
    assert all(window.committed(task) for task in tasks)
    assert len(window) == 0 and window.committed(rows.add(0, "call"))


def test_a_task_the_matcher_gave_back_waits_with_its_shards_tasks_until_room_again():
    rows, window = Rows(), OutboxWindow(LIMITS)
    given = rows.add(2, "g", "activity")
    window.spill(given)
    assert not window.committed(rows.add(2, "later", "activity"))  # the spilled shard's tasks wait
    assert window.committed(rows.add(2, "call"))  # its other dispatches do not
    window.room_again()
    assert [d.dispatch_id for d in window.read(2, rows.read)] == ["g", "later"]


operations = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 2)),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("reread"), st.integers(0, 2)),
    st.tuples(st.just("read"), st.integers(0, 2)),
), max_size=60)


@pytest.mark.slow  # seconds of examples: not in the fast tier
@settings(max_examples=200, deadline=None)
@given(operations)
def test_memory_stays_bounded_and_every_row_goes_out(ops):
    rows, window = Rows(), OutboxWindow(LIMITS)
    out: dict[tuple[str, str], int] = {}  # handed out and not finished, as the integrations hold them

    def hand(dispatch: Dispatch) -> None:
        out[(dispatch.execution_arn, dispatch.dispatch_id)] = dispatch.shard_id

    for op, arg in ops:
        if op == "add":
            dispatch = rows.add(arg, f"n{rows.seq + 1}")
            if window.committed(dispatch):
                hand(dispatch)
        elif op == "finish" and out:  # an integration is done: the row goes in a commit
            key = sorted(out)[arg % len(out)]
            del out[key], rows.rows[key]
            window.release(*key)
        elif op == "reread":
            window.reread(arg)
        else:
            for dispatch in window.read(arg, rows.read):
                hand(dispatch)
        assert len(window) <= LIMITS.outbox_window_max
    for _ in range(4 * len(rows.rows) + 4):  # integrations finish what they hold; reads bring the rest
        for key in sorted(out):
            del out[key], rows.rows[key]
            window.release(*key)
        for shard in window.behind():
            for dispatch in window.read(shard, rows.read):
                hand(dispatch)
    assert rows.rows == {}, "every row was handed out and finished"
