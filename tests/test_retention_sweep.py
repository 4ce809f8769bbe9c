"""The retention sweep over a real SQLite store and a payload directory, without a server: a crash between writing
the objects and the commit that moves the rows, a shard another node took, pages read from a compacted history
exactly as from the table, a compacted execution redriven (its new events in the table) and compacted again into
one object, and a history read while a compaction moves it."""

from __future__ import annotations

from pathlib import Path

import pytest

from statewright.decider.execution import DAY_MS
from statewright.engine.retention import COMPACTED_BATCH_MAX, RetentionSettings, Sweep
from statewright.store.base import StoreUnavailable
from statewright.store.payloads import DirectoryPayloads, Histories
from statewright.store.sqlite import SqliteStore
from store_contract_blocks import committed, events, execution_arn, own, write

CLOSED_MS = 1_000
LATER_MS = CLOSED_MS + 3 * DAY_MS  # compaction is due; retention is not


class CrashBeforeCommit:
    """The store, failing the compaction's commit as a process killed after writing the objects would."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def compact_histories(self, compacted, range_ids):
        raise StoreUnavailable("killed")


class CompactedWhileRead:
    """The store, running a real sweep (on the store itself) just before a reader's first read of history rows:
    the compaction commits between the reader's look at the row's location and its read of the rows."""

    def __init__(self, store: SqliteStore, sweep: Sweep, ranges: dict[int, int]) -> None:
        self._store = store
        self._sweep = sweep
        self._ranges = ranges
        self.reads = 0

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def read_history(self, *args):
        self.reads += 1
        if self.reads == 1:
            assert self._sweep(self._ranges, LATER_MS).compacted
        return self._store.read_history(*args)


@pytest.fixture
def store(tmp_path: Path):
    store = SqliteStore(tmp_path / "statewright.db", 2)
    yield store
    store.close()


def _closed(store: SqliteStore, count: int, history_events: int = 7, status: str = "SUCCEEDED"
            ) -> tuple[dict[int, int], list[str]]:
    ranges = own(store, 0, 1)
    arns = [execution_arn(f"e{n}") for n in range(count)]
    committed(store, [write(arn, shard=n % 2, status=status, stop_ms=CLOSED_MS, history=events(1, history_events))
                      for n, arn in enumerate(arns)], ranges)
    return ranges, arns


def _objects(payloads: DirectoryPayloads) -> list[Path]:
    return sorted(payloads.root.rglob("*.json.gz"))


def test_a_crash_between_the_objects_and_the_commit_loses_and_duplicates_nothing(store, tmp_path):
    ranges, arns = _closed(store, COMPACTED_BATCH_MAX + 20)
    payloads = DirectoryPayloads(tmp_path / "payloads")
    with pytest.raises(StoreUnavailable):
        Sweep(Histories(CrashBeforeCommit(store), payloads), RetentionSettings())(ranges, LATER_MS)
    assert len(_objects(payloads)) == COMPACTED_BATCH_MAX  # written, not yet pointed at
    assert all(store.read_history(arn, 0, 100, False) == events(1, 7) for arn in arns)  # the rows stayed
    histories = Histories(store, payloads)
    sweep = Sweep(histories, RetentionSettings())
    assert sweep(ranges, LATER_MS).busy is True  # a full batch: more waiting
    assert sweep(ranges, LATER_MS).busy is False
    assert len(_objects(payloads)) == len(arns)  # the first batch's objects written again, not twice
    for arn in arns:
        assert store.read_history(arn, 0, 100, False) == []
        assert histories.whole(arn) == events(1, 7)


def test_a_shard_another_node_took_is_left_alone(store, tmp_path):
    ranges, arns = _closed(store, 4)
    store.acquire_shard(1, "node-b", 60_000)  # shard 1 moved; this node's range id for it is stale
    Sweep(Histories(store, DirectoryPayloads(tmp_path / "payloads")), RetentionSettings())(ranges, LATER_MS)
    assert [store.history_location(arn) is None for arn in arns] == [False, True, False, True]


def test_pages_of_a_compacted_history_are_the_pages_of_the_table(store, tmp_path):
    ranges, [arn] = _closed(store, 1, history_events=9)
    histories = Histories(store, DirectoryPayloads(tmp_path / "payloads"))
    pages = {(after, limit, reverse): store.read_history(arn, after, limit, reverse)
             for after in range(0, 11) for limit in (1, 2, 4, 100) for reverse in (False, True)}
    Sweep(histories, RetentionSettings())(ranges, LATER_MS)
    assert store.history_location(arn) is not None
    assert {key: histories.read(arn, *key) for key in pages} == pages


def test_a_failed_execution_is_compacted_redriven_from_its_object_and_compacted_again_into_one(store, tmp_path):
    ranges, [arn] = _closed(store, 1, history_events=5, status="FAILED")
    payloads = DirectoryPayloads(tmp_path / "payloads")
    histories = Histories(store, payloads)
    sweep = Sweep(histories, RetentionSettings())
    assert [e.arn for e in sweep(ranges, CLOSED_MS + 2 * DAY_MS).compacted] == [arn]  # within its redrive window
    first = store.history_location(arn)
    assert histories.events(arn, [2, 4]) == {2: events(2, 2)[0], 4: events(4, 4)[0]}  # what a redrive reads
    redriven = write(arn, shard=0, expected=1, history=events(6, 8))  # reopened: its events go to the table
    committed(store, [redriven], ranges)
    pages = {(after, limit, reverse): (events(1, 8)[after:after + limit] if not reverse else
                                       events(1, 8)[:(after or 9) - 1][::-1][:limit])
             for after in range(0, 10) for limit in (1, 3, 100) for reverse in (False, True)}
    assert {key: histories.read(arn, *key) for key in pages} == pages
    assert sweep(ranges, CLOSED_MS + 10 * DAY_MS).compacted == []  # running again: nothing to compact
    committed(store, [write(arn, shard=0, expected=2, status="SUCCEEDED", stop_ms=5 * DAY_MS,
                            history=events(9, 9))], ranges)
    assert sweep(ranges, 6 * DAY_MS).compacted == []  # a day after its second close: not yet
    assert [e.arn for e in sweep(ranges, 7 * DAY_MS).compacted] == [arn]
    assert store.read_history(arn, 0, 100, False) == [] and store.history_location(arn) != first
    assert histories.whole(arn) == events(1, 9)
    assert len(_objects(payloads)) == 1  # the object it replaced is gone
    assert sweep(ranges, 5 * DAY_MS + 90 * DAY_MS).deleted
    assert _objects(payloads) == [] and store.load_execution(arn) is None


def test_a_history_compacted_while_it_is_read_reads_whole(store, tmp_path):
    ranges, [arn] = _closed(store, 1, history_events=6)
    payloads = DirectoryPayloads(tmp_path / "payloads")
    racing = CompactedWhileRead(store, Sweep(Histories(store, payloads), RetentionSettings()), ranges)
    assert Histories(racing, payloads).read(arn, 2, 3, False) == events(3, 5)
    assert racing.reads == 2  # the first read found the rows gone; the second read the object


def test_an_expired_execution_leaves_with_its_object(store, tmp_path):
    ranges, arns = _closed(store, 2)
    payloads = DirectoryPayloads(tmp_path / "payloads")
    sweep = Sweep(Histories(store, payloads), RetentionSettings())
    sweep(ranges, LATER_MS)
    assert len(_objects(payloads)) == 2
    assert len(sweep(ranges, CLOSED_MS + 90 * DAY_MS).deleted) == 2
    assert _objects(payloads) == []
    assert [store.load_execution(arn) for arn in arns] == [None, None]
