"""The retention sweep over a real SQLite store and a payload directory, without a server: a crash between writing
the objects and the commit that moves the rows, a shard another node took, and pages read from a compacted history
exactly as from the table."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from statewright.api.retention import COMPACTED_BATCH_MAX, Retention, RetentionSettings
from statewright.engine.execution import DAY_MS
from statewright.integrations.payload_store import DirectoryPayloads
from statewright.metrics import Metrics
from statewright.store.base import StoreUnavailable
from statewright.store.sqlite import SqliteStore
from store_contract import committed, events, execution_arn, own, write

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


@pytest.fixture
def store(tmp_path: Path):
    store = SqliteStore(tmp_path / "statewright.db", 2)
    yield store
    store.close()


def _closed(store: SqliteStore, count: int, history_events: int = 7) -> tuple[dict[int, int], list[str]]:
    ranges = own(store, 0, 1)
    arns = [execution_arn(f"e{n}") for n in range(count)]
    committed(store, [write(arn, shard=n % 2, status="SUCCEEDED", stop_ms=CLOSED_MS, history=events(1, history_events))
                      for n, arn in enumerate(arns)], ranges)
    return ranges, arns


def _retention(store, payloads: DirectoryPayloads, ranges: dict[int, int]) -> Retention:
    engine = SimpleNamespace(range_ids=ranges, clock=lambda: LATER_MS, redrivable_ms=14 * DAY_MS, metrics=Metrics())
    return Retention(store, engine, payloads, RetentionSettings())


def test_a_crash_between_the_objects_and_the_commit_loses_and_duplicates_nothing(store, tmp_path):
    ranges, arns = _closed(store, COMPACTED_BATCH_MAX + 20)
    payloads = DirectoryPayloads(tmp_path / "payloads")
    with pytest.raises(StoreUnavailable):
        _retention(CrashBeforeCommit(store), payloads, ranges).sweep(LATER_MS)
    assert len(list(payloads.root.rglob("*.json.gz"))) == COMPACTED_BATCH_MAX  # written, not yet pointed at
    assert all(store.read_history(arn, 0, 100, False) == events(1, 7) for arn in arns)  # the rows stayed
    retention = _retention(store, payloads, ranges)
    assert retention.sweep(LATER_MS) is True  # a full batch: more waiting
    assert retention.sweep(LATER_MS) is False
    assert len(list(payloads.root.rglob("*.json.gz"))) == len(arns)
    for arn in arns:
        assert store.read_history(arn, 0, 100, False) == []
        assert retention.read_history(arn, 0, 100, False) == events(1, 7)


def test_a_shard_another_node_took_is_left_alone(store, tmp_path):
    ranges, arns = _closed(store, 4)
    store.acquire_shard(1, "node-b", 60_000)  # shard 1 moved; this node's range id for it is stale
    _retention(store, DirectoryPayloads(tmp_path / "payloads"), ranges).sweep(LATER_MS)
    assert [store.history_location(arn) is None for arn in arns] == [False, True, False, True]


def test_pages_of_a_compacted_history_are_the_pages_of_the_table(store, tmp_path):
    ranges, [arn] = _closed(store, 1, history_events=9)
    retention = _retention(store, DirectoryPayloads(tmp_path / "payloads"), ranges)
    pages = {(after, limit, reverse): store.read_history(arn, after, limit, reverse)
             for after in range(0, 11) for limit in (1, 2, 4, 100) for reverse in (False, True)}
    retention.sweep(LATER_MS)
    assert store.history_location(arn) is not None
    assert {key: retention.read_history(arn, *key) for key in pages} == pages


def test_an_expired_execution_leaves_with_its_object(store, tmp_path):
    ranges, arns = _closed(store, 2)
    payloads = DirectoryPayloads(tmp_path / "payloads")
    _retention(store, payloads, ranges).sweep(LATER_MS)
    assert len(list(payloads.root.rglob("*.json.gz"))) == 2
    _retention(store, payloads, ranges).sweep(CLOSED_MS + 90 * DAY_MS)
    assert list(payloads.root.rglob("*.json.gz")) == []
    assert [store.load_execution(arn) for arn in arns] == [None, None]
