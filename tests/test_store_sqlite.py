"""The store contract against SqliteStore, plus what only a file-backed store can show: kill -9 durability."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest

from statewright.store.base import ActivityRecord, AliasRecord, SchemaTooNew, Store, StoreUnavailable
from statewright.store.sqlite import SqliteStore
from statewright.store.sqlite_schema import SCHEMA_VERSION
from store_contract import StoreContract
from store_contract_blocks import (
    ACTIVITY,
    MACHINE,
    as_schema_2,
    check_migrated_from_schema_2,
    check_migrated_from_schema_3,
    check_migrated_from_schema_5,
    check_migrated_from_schema_6,
    committed,
    execution_arn,
    machine_record,
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
from statewright.decider.effects import Effects
from statewright.store.base import ExecutionWrite
from statewright.store.sqlite import SqliteStore

path, machine, arn = sys.argv[1:4]
store = SqliteStore(path, 2)
range_id = store.acquire_shard(1, "child", 60_000)
write = ExecutionWrite(1, arn, machine, "durable", "RUNNING", 5, None, 0, 1, b'{"committed": 1}',
                       Effects([{"id": 1, "type": "ExecutionStarted"}, {"id": 2, "type": "WaitStateEntered"}],
                               [("wait", 9_000)]))
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
        assert orjson.loads(store.load_execution(arn))["committed"] == 1
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


# A new file as SqliteStore wrote it at schema 7 before its migrations were listed (it created every table, then
# probed for columns to add): its tables, its indexes, and the meta and shard rows of two shards.
_WRITTEN_AT_7 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS shards (
    shard_id INTEGER PRIMARY KEY, range_id INTEGER NOT NULL, owner TEXT, lease_until_ms INTEGER);
CREATE TABLE IF NOT EXISTS nodes (
    node_id TEXT PRIMARY KEY, address TEXT NOT NULL, lease_until_ms INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS state_machines (
    arn TEXT PRIMARY KEY, name TEXT NOT NULL, record BLOB NOT NULL, last_version INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS versions (
    state_machine_arn TEXT NOT NULL, number INTEGER NOT NULL, revision_id TEXT NOT NULL, record BLOB NOT NULL,
    PRIMARY KEY (state_machine_arn, number)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS aliases (
    state_machine_arn TEXT NOT NULL, name TEXT NOT NULL, record BLOB NOT NULL,
    PRIMARY KEY (state_machine_arn, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS revisions (
    state_machine_arn TEXT NOT NULL, revision_id TEXT NOT NULL, definition TEXT NOT NULL, role_arn TEXT NOT NULL,
    PRIMARY KEY (state_machine_arn, revision_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS executions (
    arn TEXT PRIMARY KEY, state_machine_arn TEXT NOT NULL, name TEXT NOT NULL, shard_id INTEGER NOT NULL,
    status TEXT NOT NULL, start_ms INTEGER NOT NULL, stop_ms INTEGER, version INTEGER NOT NULL,
    state BLOB NOT NULL, version_arn TEXT, alias_arn TEXT, redrive_count INTEGER NOT NULL DEFAULT 0,
    redrive_ms INTEGER, history_location TEXT, compacted_stop_ms INTEGER);
CREATE INDEX IF NOT EXISTS executions_by_machine ON executions (state_machine_arn, start_ms DESC, arn DESC);
CREATE TABLE IF NOT EXISTS history (
    execution_arn TEXT NOT NULL, first_event_id INTEGER NOT NULL, last_event_id INTEGER NOT NULL,
    events BLOB NOT NULL, PRIMARY KEY (execution_arn, first_event_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS timers (
    shard_id INTEGER NOT NULL, fire_at_ms INTEGER NOT NULL, execution_arn TEXT NOT NULL, timer_id TEXT NOT NULL,
    PRIMARY KEY (shard_id, fire_at_ms, execution_arn, timer_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outbox (
    shard_id INTEGER NOT NULL, execution_arn TEXT NOT NULL, dispatch_id TEXT NOT NULL, payload BLOB NOT NULL,
    seq INTEGER NOT NULL, activity_arn TEXT, claimed_until_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (shard_id, execution_arn, dispatch_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS outbox_by_seq ON outbox (shard_id, seq);
CREATE TABLE IF NOT EXISTS activities (
    arn TEXT PRIMARY KEY, name TEXT NOT NULL, created_ms INTEGER NOT NULL, encryption BLOB) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tags (
    resource_arn TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (resource_arn, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS express_starts (
    shard_id INTEGER NOT NULL, execution_arn TEXT NOT NULL, command BLOB NOT NULL,
    PRIMARY KEY (shard_id, execution_arn)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS executions_by_version ON executions (version_arn, start_ms DESC, arn DESC)
    WHERE version_arn IS NOT NULL;
CREATE INDEX IF NOT EXISTS executions_by_alias ON executions (alias_arn, start_ms DESC, arn DESC)
    WHERE alias_arn IS NOT NULL;
CREATE INDEX IF NOT EXISTS executions_closed ON executions (stop_ms) WHERE stop_ms IS NOT NULL AND status <> 'RUNNING';
CREATE INDEX IF NOT EXISTS executions_uncompacted ON executions (stop_ms)
    WHERE stop_ms IS NOT NULL AND status <> 'RUNNING' AND compacted_stop_ms IS NOT stop_ms;
INSERT INTO meta VALUES ('schema_version', '7'), ('shard_count', '2');
INSERT INTO shards (shard_id, range_id) VALUES (0, 0), (1, 0);
"""

# A file from before schema versions were recorded (the first releases): no nodes, outbox or activities tables yet.
_WRITTEN_UNVERSIONED = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS shards (
    shard_id INTEGER PRIMARY KEY, range_id INTEGER NOT NULL, owner TEXT, lease_until_ms INTEGER);
CREATE TABLE IF NOT EXISTS state_machines (
    arn TEXT PRIMARY KEY, name TEXT NOT NULL, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS revisions (
    state_machine_arn TEXT NOT NULL, revision_id TEXT NOT NULL, definition TEXT NOT NULL, role_arn TEXT NOT NULL,
    PRIMARY KEY (state_machine_arn, revision_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS executions (
    arn TEXT PRIMARY KEY, state_machine_arn TEXT NOT NULL, name TEXT NOT NULL, shard_id INTEGER NOT NULL,
    status TEXT NOT NULL, start_ms INTEGER NOT NULL, stop_ms INTEGER, version INTEGER NOT NULL,
    state BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS executions_by_machine ON executions (state_machine_arn, start_ms DESC, arn DESC);
CREATE TABLE IF NOT EXISTS history (
    execution_arn TEXT NOT NULL, first_event_id INTEGER NOT NULL, last_event_id INTEGER NOT NULL,
    events BLOB NOT NULL, PRIMARY KEY (execution_arn, first_event_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS timers (
    shard_id INTEGER NOT NULL, fire_at_ms INTEGER NOT NULL, execution_arn TEXT NOT NULL, timer_id TEXT NOT NULL,
    PRIMARY KEY (shard_id, fire_at_ms, execution_arn, timer_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tags (
    resource_arn TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (resource_arn, key)) WITHOUT ROWID;
INSERT INTO meta VALUES ('shard_count', '2');
INSERT INTO shards (shard_id, range_id) VALUES (0, 3), (1, 0);
"""

# Each takes a file of this version back to the one before (meta's schema_version is the caller's).
_EXECUTION_COLUMNS_8 = ("arn, state_machine_arn, name, shard_id, status, start_ms, stop_ms, version, state, "
                        "version_arn, alias_arn, redrive_count, redrive_ms, history_location, compacted_stop_ms")
_UNDO_9 = f"""
CREATE TABLE executions_8 (
    arn TEXT PRIMARY KEY, state_machine_arn TEXT NOT NULL, name TEXT NOT NULL, shard_id INTEGER NOT NULL,
    status TEXT NOT NULL, start_ms INTEGER NOT NULL, stop_ms INTEGER, version INTEGER NOT NULL,
    state BLOB NOT NULL, version_arn TEXT, alias_arn TEXT, redrive_count INTEGER NOT NULL DEFAULT 0,
    redrive_ms INTEGER, history_location TEXT, compacted_stop_ms INTEGER);
INSERT INTO executions_8 SELECT {_EXECUTION_COLUMNS_8} FROM executions;
CREATE TABLE history_8 (
    execution_arn TEXT NOT NULL, first_event_id INTEGER NOT NULL, last_event_id INTEGER NOT NULL,
    events BLOB NOT NULL, PRIMARY KEY (execution_arn, first_event_id)) WITHOUT ROWID;
INSERT INTO history_8 SELECT arn, first_event_id, last_event_id, events FROM history
    JOIN executions ON executions.id = history.execution_id;
CREATE TABLE timers_8 (
    shard_id INTEGER NOT NULL, fire_at_ms INTEGER NOT NULL, execution_arn TEXT NOT NULL, timer_id TEXT NOT NULL,
    PRIMARY KEY (shard_id, fire_at_ms, execution_arn, timer_id)) WITHOUT ROWID;
INSERT INTO timers_8 SELECT timers.shard_id, fire_at_ms, arn, timer_id FROM timers
    JOIN executions ON executions.id = timers.execution_id;
DROP TABLE history; DROP TABLE timers; DROP TABLE executions;
ALTER TABLE executions_8 RENAME TO executions;
ALTER TABLE history_8 RENAME TO history;
ALTER TABLE timers_8 RENAME TO timers;
CREATE INDEX executions_by_machine ON executions (state_machine_arn, start_ms DESC, arn DESC);
CREATE INDEX executions_by_version ON executions (version_arn, start_ms DESC, arn DESC) WHERE version_arn IS NOT NULL;
CREATE INDEX executions_by_alias ON executions (alias_arn, start_ms DESC, arn DESC) WHERE alias_arn IS NOT NULL;
CREATE INDEX executions_closed ON executions (stop_ms) WHERE stop_ms IS NOT NULL AND status <> 'RUNNING';
CREATE INDEX executions_uncompacted ON executions (stop_ms)
    WHERE stop_ms IS NOT NULL AND status <> 'RUNNING' AND compacted_stop_ms IS NOT stop_ms;
ALTER TABLE nodes DROP COLUMN storage_format;
"""
_UNDO_8 = _UNDO_9 + "ALTER TABLE nodes DROP COLUMN assignment_rule; ALTER TABLE nodes DROP COLUMN weight; "
_UNDO_7 = _UNDO_8 + ("DROP INDEX executions_uncompacted; ALTER TABLE executions DROP COLUMN compacted_stop_ms; "
           "CREATE INDEX executions_to_compact ON executions (stop_ms) WHERE stop_ms IS NOT NULL "
           "AND status <> 'RUNNING' AND history_location IS NULL")
_UNDO_6 = _UNDO_7 + ("; DROP INDEX executions_closed; DROP INDEX executions_to_compact; "
                     "ALTER TABLE executions DROP COLUMN history_location")
_UNDO_5 = _UNDO_6 + "; ALTER TABLE executions DROP COLUMN redrive_count; ALTER TABLE executions DROP COLUMN redrive_ms"
_UNDO_4 = _UNDO_5 + "; DROP TABLE express_starts"
_UNDO_3 = _UNDO_4 + ("; DROP TABLE versions; DROP TABLE aliases; DROP INDEX executions_by_version; "
                     "DROP INDEX executions_by_alias; ALTER TABLE executions DROP COLUMN version_arn; "
                     "ALTER TABLE executions DROP COLUMN alias_arn; "
                     "ALTER TABLE state_machines DROP COLUMN last_version; "
                     "ALTER TABLE activities DROP COLUMN encryption")
_UNDO_2 = _UNDO_3 + "; ALTER TABLE outbox DROP COLUMN activity_arn; ALTER TABLE outbox DROP COLUMN claimed_until_ms"


def test_a_version_1_file_gets_its_tasks_filed_under_their_activity(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    store = SqliteStore(path, 2)
    ranges = {1: store.acquire_shard(1, "node-a", 60_000)}
    added = write(execution_arn("old"), shard=1)
    added.effects.dispatches_added = [("3", task(ACTIVITY, 1)), ("4", {"kind": "http", "input": "\u0000"})]
    committed(store, [added], ranges)
    store.close()
    with sqlite3.connect(path) as db:  # as written before version 2: no claim columns
        db.executescript(_UNDO_2)
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    store = SqliteStore(path, 2)
    try:
        assert store.claim_activity_task(ACTIVITY, 1_000, 2_000).dispatch_id == "3"
        assert store.claim_activity_task(ACTIVITY, 1_000, 2_000) is None
    finally:
        store.close()


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
        db.executescript(_UNDO_3)
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


def _layout(path: Path) -> dict[str, Any]:
    """What a file's schema is: each table's columns (name, type, NOT NULL, default, key) and whether it has rowids,
    each index's definition (SQLite keeps the statement normalized, without IF NOT EXISTS)."""
    with closing(sqlite3.connect(path)) as db:
        objects = db.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                             "AND name <> 'sqlite_sequence'").fetchall()
        tables = {name: ([row[1:] for row in db.execute(f"PRAGMA table_info({name})")], "WITHOUT ROWID" in sql)
                  for kind, name, sql in objects if kind == "table"}
    return {"tables": tables, "indexes": {name: " ".join(sql.split()) for kind, name, sql in objects
                                          if kind == "index"}}


def test_a_file_the_code_wrote_before_migrations_were_listed_opens_as_it_is_and_works(tmp_path: Path) -> None:
    """Schema 7 as SqliteStore created it when it probed for columns: the migrations make a new file the same (to
    version 7), and the old one opens with only the later migrations to apply and serves every table."""
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    with closing(sqlite3.connect(old)) as db:
        db.executescript(_WRITTEN_AT_7)
    SqliteStore(new, 2).close()
    with closing(sqlite3.connect(new)) as db:
        db.executescript(_UNDO_8)
    assert _layout(old) == _layout(new)
    write_schema_6_data(store := SqliteStore(old, 2))
    try:
        check_migrated_from_schema_6(store)
        check_every_table_serves(store)
    finally:
        store.close()
    with closing(sqlite3.connect(old)) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)


def check_every_table_serves(store: Store) -> None:
    """State machines, versions, aliases, tags, settings, activities and their tasks, executions: written and read."""
    write_schema_2_data(store)
    fresh = machine_record("fresh").arn
    assert store.publish_version(fresh, "", 3_000).number == 1
    alias = AliasRecord(fresh, "live", "", ((1, 100),), 3_000, 3_000)
    assert store.create_alias(alias) == alias
    store.tag_resource(fresh, {"team": "a"})
    assert store.list_tags(fresh) == {"team": "a"}
    assert store.put_setting_if_absent("key", "one") == "one"
    added = write(execution_arn("tasked"), shard=1)
    added.effects.dispatches_added = [("7", task(ACTIVITY, 1))]
    committed(store, [added], {1: store.acquire_shard(1, "node-a", 60_000)})
    assert store.claim_activity_task(ACTIVITY, 1_000, 2_000).dispatch_id == "7"
    listed = {e.arn for e in store.list_executions(MACHINE, None, 10, None).items}
    assert {execution_arn("tasked"), execution_arn("old")} <= listed


def test_a_file_written_before_versions_were_recorded_gets_every_migration(tmp_path: Path) -> None:
    path = tmp_path / "statewright.db"
    with closing(sqlite3.connect(path)) as db:
        db.executescript(_WRITTEN_UNVERSIONED)
    store = SqliteStore(path, None)
    try:
        assert store.shard_count() == 2
        assert store.acquire_shard(0, "node-a", 60_000) == 4  # its shards as they were
        check_every_table_serves(store)
    finally:
        store.close()
    assert _layout(path)["indexes"] == _layout_of_a_new_file(tmp_path)["indexes"]


def _layout_of_a_new_file(tmp_path: Path) -> dict[str, Any]:
    SqliteStore(tmp_path / "new.db", 2).close()
    return _layout(tmp_path / "new.db")


def test_a_listing_cursor_of_the_release_before_naming_the_last_arn_goes_on_after_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "statewright.db", 2)
    try:
        ranges = {0: store.acquire_shard(0, "node", 60_000)}
        arns = [execution_arn(f"listed-{n}") for n in range(3)]
        committed(store, [write(arn, start_ms=1_000 + n) for n, arn in enumerate(arns)], ranges)
        before = orjson.dumps([1_002, arns[2]]).decode()  # as schema 8's store wrote it: the ARN, not the id
        assert [item.arn for item in store.list_executions(MACHINE, None, 10, before).items] == arns[1::-1]
        with pytest.raises(ValueError):
            store.list_executions(MACHINE, None, 10, orjson.dumps([1_002, execution_arn("gone")]).decode())
    finally:
        store.close()
