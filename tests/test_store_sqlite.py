"""The store contract against SqliteStore, plus what only a file-backed store can show: kill -9 durability."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from statewright.store.base import ActivityRecord, SchemaTooNew, Store, StoreUnavailable
from statewright.store.sqlite import SCHEMA_VERSION, SqliteStore
from store_contract import (
    ACTIVITY,
    StoreContract,
    as_schema_2,
    check_migrated_from_schema_2,
    check_migrated_from_schema_3,
    check_migrated_from_schema_5,
    check_migrated_from_schema_6,
    committed,
    execution_arn,
    task,
    write,
    write_schema_2_data,
    write_schema_5_data,
    write_schema_6_data,
)

# Runs in a child process: commit one transition, then die by SIGKILL the moment commit returns, before any
# close, checkpoint or interpreter shutdown could flush anything.
_COMMIT_THEN_KILL = """
import os, signal, sys
from statewright.store.base import ExecutionWrite
from statewright.store.sqlite import SqliteStore

path, machine, arn = sys.argv[1:4]
store = SqliteStore(path, 2)
range_id = store.acquire_shard(1, "child", 60_000)
write = ExecutionWrite(1, arn, machine, "durable", "RUNNING", 5, None, 0, 1, b"committed-state",
                       [{"id": 1, "type": "ExecutionStarted"}, {"id": 2, "type": "WaitStateEntered"}],
                       [("wait", 9_000)])
result = store.commit([write], {1: range_id})
if result.committed(0, write):
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(3)
"""


class TestSqliteStore(StoreContract):
    @pytest.fixture(autouse=True)
    def _data_dir(self, tmp_path: Path) -> None:
        self.path = tmp_path / "statewright.db"

    def make_store(self, shard_count: int) -> Store:
        return SqliteStore(self.path, shard_count)

    def reopen_store(self, shard_count: int) -> Store:
        return SqliteStore(self.path, shard_count)


def test_commit_survives_sigkill_right_after_it_returns(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:orders"
    arn = execution_arn("durable", machine)
    child = subprocess.run([sys.executable, "-c", _COMMIT_THEN_KILL, str(path), machine, arn],
                           capture_output=True, text=True, timeout=60, check=False)
    assert child.returncode == -signal.SIGKILL, child.stderr
    store = SqliteStore(path, 2)
    try:
        assert store.load_execution(arn) == b"committed-state"
        assert [event["id"] for event in store.read_history(arn, 0, 10, False)] == [1, 2]
        assert [(row.execution_arn, row.timer_id) for row in store.due_timers(1, 0, 9_000)] == [(arn, "wait")]
        assert store.acquire_shard(1, "parent", 60_000) == 2  # the child's range id 1 survived too
    finally:
        store.close()


def test_database_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    SqliteStore(path, 1).close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()


def test_a_schema_newer_than_the_code_refuses_to_open(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    SqliteStore(path, 1).close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        with db:
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    finally:
        db.close()
    with pytest.raises(SchemaTooNew, match="upgrade statewright"):
        SqliteStore(path, 1)


def test_a_version_1_file_gets_its_tasks_filed_under_their_activity(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    store = SqliteStore(path, 2)
    ranges = {1: store.acquire_shard(1, "node-a", 60_000)}
    added = write(execution_arn("old"), shard=1)
    added.dispatches_added = [("3", task(ACTIVITY, 1)), ("4", {"kind": "http", "input": "\u0000"})]
    committed(store, [added], ranges)
    store.close()
    with sqlite3.connect(path) as db:  # as written before version 2: no claim columns
        db.execute("ALTER TABLE outbox DROP COLUMN activity_arn")
        db.execute("ALTER TABLE outbox DROP COLUMN claimed_until_ms")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    store = SqliteStore(path, 2)
    try:
        assert store.claim_activity_task(ACTIVITY, 1_000, 2_000).dispatch_id == "3"
        assert store.claim_activity_task(ACTIVITY, 1_000, 2_000) is None
    finally:
        store.close()


_UNDO_7 = ("DROP INDEX executions_uncompacted; ALTER TABLE executions DROP COLUMN compacted_stop_ms; "
           "CREATE INDEX executions_to_compact ON executions (stop_ms) WHERE stop_ms IS NOT NULL "
           "AND status <> 'RUNNING' AND history_location IS NULL")
_UNDO_6 = _UNDO_7 + ("; DROP INDEX executions_closed; DROP INDEX executions_to_compact; "
                     "ALTER TABLE executions DROP COLUMN history_location")


def test_a_version_6_file_compacts_its_redrivable_executions_too(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    store = SqliteStore(path, 2)
    write_schema_6_data(store)
    store.close()
    with sqlite3.connect(path) as db:  # as written before version 7
        db.executescript(_UNDO_7)
        db.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    store = SqliteStore(path, 2)
    try:
        check_migrated_from_schema_6(store)
    finally:
        store.close()
_UNDO_5 = _UNDO_6 + "; ALTER TABLE executions DROP COLUMN redrive_count; ALTER TABLE executions DROP COLUMN redrive_ms"


def test_a_version_5_file_compacts_and_expires_its_closed_executions(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    store = SqliteStore(path, 2)
    write_schema_5_data(store)
    store.close()
    with sqlite3.connect(path) as db:  # as written before version 6
        db.executescript(_UNDO_6)
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    store = SqliteStore(path, 2)
    try:
        check_migrated_from_schema_5(store)
    finally:
        store.close()


def test_a_version_4_file_counts_no_redrives_for_its_executions(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    store = SqliteStore(path, 2)
    write_schema_2_data(store)
    store.close()
    with sqlite3.connect(path) as db:  # as written before version 5
        db.executescript(_UNDO_5)
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    store = SqliteStore(path, 2)
    try:
        check_migrated_from_schema_3(store)
    finally:
        store.close()


def test_a_version_2_file_keeps_working_and_gets_versions(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    store = SqliteStore(path, 2)
    write_schema_2_data(store)
    store.close()
    with sqlite3.connect(path) as db:  # as written before version 3
        db.executescript(_UNDO_5)
        db.executescript("DROP TABLE versions; DROP TABLE aliases; DROP INDEX executions_by_version; "
                         "DROP INDEX executions_by_alias; ALTER TABLE executions DROP COLUMN version_arn; "
                         "ALTER TABLE executions DROP COLUMN alias_arn; "
                         "ALTER TABLE state_machines DROP COLUMN last_version; "
                         "ALTER TABLE activities DROP COLUMN encryption")
        db.executemany("UPDATE state_machines SET record = ? WHERE arn = ?", [
            (as_schema_2(record), arn) for arn, record in db.execute("SELECT arn, record FROM state_machines")])
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    store = SqliteStore(path, 2)
    try:
        check_migrated_from_schema_2(store)
    finally:
        store.close()


def test_a_server_whose_shards_another_took_writes_no_metadata(tmp_path: Path) -> None:
    first, second = SqliteStore(tmp_path / "db", 2), SqliteStore(tmp_path / "db", 2)
    try:
        for shard in range(2):
            first.acquire_shard(shard, "first", 60_000)  # the only server on the file: no lease
        first.tag_resource(ACTIVITY, {"team": "a"})
        second.acquire_shard(1, "second", 60_000)
        with pytest.raises(StoreUnavailable, match="another statewright server took over"):
            first.tag_resource(ACTIVITY, {"team": "b"})
        with pytest.raises(StoreUnavailable):
            first.create_activity(ActivityRecord(ACTIVITY + "-late", "late", 0))
        assert second.list_tags(ACTIVITY) == {"team": "a"}
        assert second.get_activity(ACTIVITY + "-late") is None
    finally:
        first.close()
        second.close()


def test_shards_held_by_lease_move_without_fencing_metadata_writes(tmp_path: Path) -> None:
    first, second = SqliteStore(tmp_path / "db", 2), SqliteStore(tmp_path / "db", 2)
    try:
        first.acquire_shard(0, "first", 1_000, now_ms=0)
        second.acquire_shard(0, "second", 3_000, now_ms=2_000)  # the lease ran out: a cluster's hand-over
        first.tag_resource(ACTIVITY, {"team": "a"})
        assert second.list_tags(ACTIVITY) == {"team": "a"}
    finally:
        first.close()
        second.close()
