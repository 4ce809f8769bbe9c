"""The store contract against PostgresStore, plus what only a networked, shared database can show: migrations
racing, a newer schema, fencing across handles while a commit is in flight, and the server connection dying."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

from postgres import create_schema
from statewright.store import open_store, postgresql
from statewright.store.base import (
    STORAGE_FORMAT,
    CommitFailed,
    CommitOutcomeUnknown,
    ExecutionWrite,
    SchemaTooNew,
    Store,
    StoreUnavailable,
)
from statewright.store.postgresql import PostgresStore, session_name
from statewright.store.postgresql_schema import SCHEMA_VERSION
from store_contract import StoreContract
from store_contract_blocks import (
    ACTIVITY,
    as_schema_2,
    blob,
    check_migrated_from_schema_2,
    check_migrated_from_schema_3,
    check_migrated_from_schema_5,
    check_migrated_from_schema_6,
    committed,
    events,
    execution_arn,
    stored,
    task,
    write,
    write_schema_2_data,
    write_schema_5_data,
    write_schema_6_data,
)

WAIT_S = 30  # bounded waits for another connection to reach a state, not timing assertions


@pytest.fixture(scope="module")
def contract_schema(postgres_database: str) -> str:
    return create_schema(postgres_database)


def empty(url: str) -> None:
    """Delete every row a store wrote, except the schema version: the store opened next is as empty as on a new
    schema, without the cost of creating its tables again (DDL is the slow part of a PostgreSQL test)."""
    with psycopg.connect(url, autocommit=True) as db:
        tables = [row[0] for row in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                                               "AND tablename <> 'meta'")]
        with db.transaction():
            for table in tables:
                db.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))
            db.execute("DELETE FROM meta WHERE key <> 'schema_version'")


class TestPostgresStore(StoreContract):
    @pytest.fixture(autouse=True)
    def _schema(self, contract_schema: str) -> Iterator[None]:
        """One schema for the suite, emptied after each test (the first test finds it new and migrates it)."""
        self.url = contract_schema
        yield
        empty(contract_schema)

    def make_store(self, shard_count: int) -> Store:
        return PostgresStore(self.url, shard_count)

    def reopen_store(self, shard_count: int) -> Store:
        return open_store(self.url, shard_count)


@pytest.fixture
def admin(postgres_schema: str) -> Iterator[psycopg.Connection]:
    """A connection of the test's own, on the schema the stores use."""
    with psycopg.connect(postgres_schema, autocommit=True) as db:
        yield db


@contextmanager
def locked(url: str, table: str) -> Iterator[None]:
    """Hold ``table`` locked from a connection of its own (the admin connection keeps watching: inside a
    transaction pg_stat_activity would not change)."""
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("BEGIN")
        db.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        yield
        db.execute("ROLLBACK")


def named(url: str, application: str) -> str:
    """The URL with an application_name, so the test can find that store's backends in pg_stat_activity."""
    return f"{url}&application_name={application}"


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "the other connection never got there"
        time.sleep(0.01)


def waiting_on_a_lock(admin: psycopg.Connection, application: str) -> bool:
    return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                         "AND datname = current_database() AND wait_event_type = 'Lock'",
                         (application,)).fetchone()[0] > 0


def terminate(admin: psycopg.Connection, application: str, waiting: bool = False) -> int:
    """Kill the store's backends (``waiting``: only those waiting on a lock); how many there were."""
    return admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s "
                         "AND datname = current_database() AND (NOT %s OR wait_event_type = 'Lock')",
                         (application, waiting)).fetchone()[0]


def in_thread(function: Callable[[], object]) -> tuple[threading.Thread, list]:
    """Run ``function`` on a thread; the list gets its result or the exception it raised."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(function())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_nodes_migrating_at_once_end_with_one_schema(postgres_schema: str, admin: psycopg.Connection) -> None:
    barrier = threading.Barrier(4)

    def start() -> PostgresStore:
        barrier.wait()
        return PostgresStore(postgres_schema, 8)

    started = [in_thread(start) for _ in range(4)]
    for thread, _ in started:
        thread.join(WAIT_S)
    stores = [outcome[0] for _, outcome in started]
    try:
        assert all(isinstance(store, PostgresStore) for store in stores), stores
        assert admin.execute("SELECT key, value FROM meta ORDER BY key").fetchall() == [
            ("schema_version", str(SCHEMA_VERSION)), ("shard_count", "8")]
        assert admin.execute("SELECT count(*), min(range_id), max(range_id) FROM shards").fetchone() == (8, 0, 0)
        ranges = {store.acquire_shard(0, f"node-{index}", 1_000) for index, store in enumerate(stores)}
        assert ranges == {1, 2, 3, 4}  # one shards table: every node's acquisition bumps the same row
    finally:
        for store in stores:
            if isinstance(store, PostgresStore):
                store.close()


def test_a_schema_newer_than_the_code_refuses_to_open(postgres_schema: str, admin: psycopg.Connection) -> None:
    PostgresStore(postgres_schema, 4).close()
    admin.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(SchemaTooNew, match="upgrade statewright"):
        PostgresStore(postgres_schema, 4)
    with pytest.raises(SchemaTooNew):
        PostgresStore(postgres_schema, None)


def test_opening_an_empty_database_without_a_shard_count_creates_nothing(postgres_schema: str,
                                                                          admin: psycopg.Connection) -> None:
    with pytest.raises(LookupError, match="no statewright data"):
        PostgresStore(postgres_schema, None)
    assert admin.execute("SELECT to_regclass('meta')").fetchone()[0] is None


def test_acquisition_waits_for_a_commit_in_flight_and_fences_the_next(postgres_schema: str,
                                                                      admin: psycopg.Connection) -> None:
    first = PostgresStore(named(postgres_schema, "first"), 4)
    second = PostgresStore(named(postgres_schema, "second"), 4)
    try:
        ranges = {2: first.acquire_shard(2, "node-a", 60_000)}
        arn, later = execution_arn("in-flight"), execution_arn("after-the-move")
        # Hold the commit after it read the shard FOR SHARE: its history insert waits on this table lock.
        with locked(postgres_schema, "history"):
            commit, committing = in_thread(lambda: first.commit([write(arn, shard=2, history=[{"id": 1}])], ranges))
            wait_until(lambda: waiting_on_a_lock(admin, "first"))
            acquire, acquiring = in_thread(lambda: second.acquire_shard(2, "node-b", 60_000))
            wait_until(lambda: waiting_on_a_lock(admin, "second"))  # on the shard row, behind the commit
            assert acquiring == []
        commit.join(WAIT_S)
        acquire.join(WAIT_S)
        assert committing[0].lost_shards == set()  # it held the shard first: it landed
        assert acquiring == [ranges[2] + 1]
        assert stored(second.load_execution(arn)) == blob(arn, 1)
        result = first.commit([write(later, shard=2)], ranges)  # the earlier owner is fenced from now on
        assert result.lost_shards == {2}
        assert second.load_execution(later) is None
    finally:
        first.close()
        second.close()


def test_a_read_after_the_connection_was_killed_is_unavailable_and_a_later_one_succeeds(
        postgres_schema: str, admin: psycopg.Connection) -> None:
    store = PostgresStore(named(postgres_schema, "killed"), 4)
    try:
        arn = execution_arn("survivor")
        committed(store, [write(arn)], {0: store.acquire_shard(0, "node-a", 60_000)})
        assert terminate(admin, "killed") == 1
        with pytest.raises(StoreUnavailable):
            store.load_execution(arn)
        assert stored(store.load_execution(arn)) == blob(arn, 1)
    finally:
        store.close()


def test_a_commit_killed_before_it_wrote_failed_and_one_killed_while_writing_is_unknown(
        postgres_schema: str, admin: psycopg.Connection) -> None:
    """A commit is one statement (failed wherever it was killed: nothing was written) unless it must find out more,
    as when a batch's writes of one execution do not follow on, when it takes two round trips: killed in the second,
    after COMMIT was sent in the same pipeline, its outcome is unknown."""
    store = PostgresStore(named(postgres_schema, "commits"), 4)
    try:
        ranges = {0: store.acquire_shard(0, "node-a", 60_000)}

        def plain(arn: str) -> list[ExecutionWrite]:
            return [write(arn, history=[{"id": 1}])]

        def not_following_on(arn: str) -> list[ExecutionWrite]:
            return [*plain(arn), write(arn, expected=5)]

        cases = [("shards", CommitFailed, plain), ("history", CommitFailed, plain),
                 ("shards", CommitFailed, not_following_on), ("history", CommitOutcomeUnknown, not_following_on)]
        for number, (table, expected, batch) in enumerate(cases):
            arn = execution_arn(f"killed-{number}")
            with locked(postgres_schema, table):  # the commit stops at this table
                thread, outcome = in_thread(lambda arn=arn, batch=batch: store.commit(batch(arn), ranges))
                wait_until(lambda: waiting_on_a_lock(admin, "commits"))
                assert terminate(admin, "commits", waiting=True) == 1  # the committing thread's connection
                thread.join(WAIT_S)
            assert (number, type(outcome[0])) == (number, expected)
            assert store.load_execution(arn) is None  # killed before COMMIT either way; only some knew it
        after = execution_arn("after")
        committed(store, [write(after)], ranges)  # a new connection: the store goes on
        assert stored(store.load_execution(after)) == blob(after, 1)
    finally:
        store.close()


@pytest.fixture
def short_idle_limit(monkeypatch: pytest.MonkeyPatch) -> float:
    """Sessions idle in a transaction end after 0.1 s instead of a second: the seconds to wait past it."""
    monkeypatch.setattr(postgresql, "IDLE_IN_TRANSACTION_MS", 100)
    return 0.3


def test_the_open_count_sees_the_commits_before_its_snapshot(postgres_schema: str, short_idle_limit: float) -> None:
    store = PostgresStore(postgres_schema, 2)
    try:
        ranges = {0: store.acquire_shard(0, "node-a", 60_000)}
        committed(store, [write(execution_arn("early"))], ranges)
        count = store.open_count()
        count.snapshot()
        committed(store, [write(execution_arn("late"))], ranges)
        time.sleep(short_idle_limit)  # the count may come later than other transactions may stay idle
        assert count.count() == {("us-east-1", "123456789012"): 1}
        assert store.count_open_executions() == 2
    finally:
        store.close()


def test_a_session_ended_idle_in_a_transaction_is_unavailable_and_the_next_call_reconnects(
        postgres_schema: str, short_idle_limit: float) -> None:
    store = PostgresStore(postgres_schema, 2)
    try:
        arn = execution_arn("paused")
        committed(store, [write(arn)], {0: store.acquire_shard(0, "node-a", 60_000)})
        store._db().execute("BEGIN")  # as a node paused between two statements of a commit leaves it
        time.sleep(short_idle_limit)
        with pytest.raises(StoreUnavailable):
            store.load_execution(arn)
        assert stored(store.load_execution(arn)) == blob(arn, 1)
    finally:
        store.close()


def test_a_chain_of_one_executions_writes_lands_whole_and_a_broken_chain_row_by_row(postgres_schema: str) -> None:
    store = PostgresStore(postgres_schema, 2)
    try:
        ranges = {0: store.acquire_shard(0, "node-a", 60_000)}
        arn, other = execution_arn("chained"), execution_arn("other")
        committed(store, [write(arn), write(arn, expected=1), write(other), write(arn, expected=2)], ranges)
        assert stored(store.load_execution(arn)) == blob(arn, 3)
        # A write that does not follow on from the one before it is checked against the row as it is then.
        result = store.commit([write(arn, expected=3), write(arn, expected=3), write(other, expected=1)], ranges)
        assert result.conflicts == [1]
        assert [stored(store.load_execution(each)) for each in (arn, other)] == [blob(arn, 4), blob(other, 2)]
    finally:
        store.close()


def test_outbox_seqs_keep_rising_as_the_shard_moves_between_handles(postgres_schema: str) -> None:
    first, second = PostgresStore(postgres_schema, 2), PostgresStore(postgres_schema, 2)
    try:
        def dispatch(store: Store, name: str, ranges: dict[int, int]) -> None:
            added = write(execution_arn(name))
            added.effects.dispatches_added = [(name, {"n": name})]
            committed(store, [added], ranges)

        dispatch(first, "a", {0: first.acquire_shard(0, "node-a", 60_000)})
        dispatch(second, "b", {0: second.acquire_shard(0, "node-b", 60_000)})
        again = {0: first.acquire_shard(0, "node-a", 60_000)}  # first counted seqs under its old range id
        dispatch(first, "c", again)
        pending = second.pending_dispatches(0)
        assert [row.dispatch_id for row in pending] == ["a", "b", "c"]
        assert [row.seq for row in pending] == sorted({row.seq for row in pending})
    finally:
        first.close()
        second.close()


def test_a_server_that_refuses_connections_is_unavailable(postgres_database: str) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(StoreUnavailable):
        PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/nowhere", 4)


def test_a_commit_adding_tasks_wakes_every_watcher_with_their_activities(postgres_schema: str) -> None:
    committing, watching = PostgresStore(postgres_schema, 4), PostgresStore(postgres_schema, 4)
    seen: list[str] = []
    stop = watching.watch_activity_tasks(seen.append)
    try:
        wait_until(lambda: watching_listens(postgres_schema))
        ranges = {0: committing.acquire_shard(0, "node-a", 60_000)}
        added = write(execution_arn("watched"))
        added.effects.dispatches_added = [("3", task(ACTIVITY, 1)), ("4", task(ACTIVITY, 2)), ("5", {"kind": "http"})]
        committed(committing, [added], ranges)
        wait_until(lambda: seen == [ACTIVITY])  # one word per activity and commit, however many tasks
    finally:
        stop()
        committing.close()
        watching.close()


def test_a_watcher_is_not_woken_by_its_own_stores_commits(postgres_schema: str) -> None:
    committing, other = PostgresStore(postgres_schema, 4), PostgresStore(postgres_schema, 4)
    seen: list[str] = []
    stop = committing.watch_activity_tasks(seen.append)
    try:
        wait_until(lambda: watching_listens(postgres_schema))
        mine = write(execution_arn("mine"))
        mine.effects.dispatches_added = [("3", task(ACTIVITY, 1))]
        committed(committing, [mine], {0: committing.acquire_shard(0, "node-a", 60_000)})
        theirs = write(execution_arn("theirs"), shard=1)
        theirs.effects.dispatches_added = [("4", task(ACTIVITY + "-theirs", 2))]
        committed(other, [theirs], {1: other.acquire_shard(1, "node-b", 60_000)})
        wait_until(lambda: bool(seen))
        assert seen == [ACTIVITY + "-theirs"]  # notifications come in commit order: its own, sent first, was left out
    finally:
        stop()
        committing.close()
        other.close()


def watching_listens(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as db:
        return db.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' "
                          "AND datname = current_database()").fetchone()[0] > 0


def test_migration_2_files_the_tasks_already_in_the_outbox_under_their_activity(
        postgres_schema: str, admin: psycopg.Connection) -> None:
    store = PostgresStore(postgres_schema, 4)
    ranges = {1: store.acquire_shard(1, "node-a", 60_000)}
    added = write(execution_arn("old"), shard=1)
    added.effects.dispatches_added = [("3", task(ACTIVITY, 1)), ("4", {"kind": "http", "input": "\u0000"})]
    committed(store, [added], ranges)
    store.close()
    # Back to version 1, as a database written before it: no claim columns.
    _undo_migration_3(admin)
    admin.execute("DROP INDEX outbox_by_activity")
    admin.execute("ALTER TABLE outbox DROP COLUMN activity_arn, DROP COLUMN claimed_until_ms")
    admin.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    store = PostgresStore(postgres_schema, 4)
    try:
        assert store.claim_activity_task(ACTIVITY, 1_000, 2_000).dispatch_id == "3"
        assert admin.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            str(SCHEMA_VERSION),)
    finally:
        store.close()


def _undo_migration_10(admin: psycopg.Connection) -> None:
    """The schema as version 9 left it: nodes without a storage format."""
    admin.execute("ALTER TABLE nodes DROP COLUMN storage_format")
    admin.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")


def test_migration_10_counts_the_nodes_of_the_previous_release_as_reading_storage_format_one(
        postgres_schema: str, admin: psycopg.Connection) -> None:
    store = PostgresStore(postgres_schema, 4)
    store.close()
    _undo_migration_10(admin)
    admin.execute("INSERT INTO nodes (node_id, address, lease_until_ms, assignment_rule, weight) "
                  "VALUES ('http://old', 'http://old', 5000, 2, 1)")  # as the previous release registers
    store = PostgresStore(postgres_schema, 4)
    try:
        store.register_node("http://new", "http://new", 5_000, 2, 1, STORAGE_FORMAT)
        assert [(node.node_id, node.storage_format) for node in store.nodes()] == [
            ("http://new", STORAGE_FORMAT), ("http://old", 1)]
        assert not store.rows_hold_fields  # until its membership says no live node reads only format 1
    finally:
        store.close()


def _undo_migration_9(admin: psycopg.Connection) -> None:
    """The schema as version 8 left it: nodes without an assignment rule or a weight."""
    _undo_migration_10(admin)
    admin.execute("ALTER TABLE nodes DROP COLUMN assignment_rule, DROP COLUMN weight")
    admin.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")


def test_migration_9_counts_the_nodes_a_version_8_database_lists_as_speaking_rule_one(
        postgres_schema: str, admin: psycopg.Connection) -> None:
    store = PostgresStore(postgres_schema, 4)
    store.close()
    _undo_migration_9(admin)
    # a node of the previous release registers as it did: the first three columns
    admin.execute("INSERT INTO nodes VALUES ('http://old', 'http://old', 5000)")
    store = PostgresStore(postgres_schema, 4)
    try:
        assert [(node.node_id, node.rule, node.weight) for node in store.nodes()] == [("http://old", 1, 1)]
        admin.execute("INSERT INTO nodes VALUES ('http://older', 'http://older', 5000)")  # still works, upgraded
        assert [node.rule for node in store.nodes()] == [1, 1]
    finally:
        store.close()


def _undo_migration_8(admin: psycopg.Connection) -> None:
    """The schema as version 7 left it: no commit functions."""
    _undo_migration_9(admin)
    for function in ("statewright_commit", "statewright_rest", "statewright_rows"):
        admin.execute(f"DROP FUNCTION {function}")
    admin.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")


def _undo_migration_7(admin: psycopg.Connection) -> None:
    """The schema as version 6 left it: no payloads table, compaction only of histories never compacted."""
    _undo_migration_8(admin)
    admin.execute("DROP TABLE payloads")
    admin.execute("DROP INDEX executions_uncompacted")
    admin.execute("ALTER TABLE executions DROP COLUMN compacted_stop_ms")
    admin.execute("CREATE INDEX executions_to_compact ON executions (stop_ms) WHERE stop_ms IS NOT NULL "
                  "AND status <> 'RUNNING' AND history_location IS NULL")
    admin.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")


def test_migration_7_compacts_the_redrivable_executions_a_version_6_database_kept_in_the_table(
        postgres_schema: str, admin: psycopg.Connection) -> None:
    store = PostgresStore(postgres_schema, 4)
    write_schema_6_data(store)
    store.close()
    _undo_migration_7(admin)
    store = PostgresStore(postgres_schema, 4)
    try:
        check_migrated_from_schema_6(store)
        store.payloads().put("history/x/1.json.gz", b"x")  # the table of its own payload store
        assert store.payloads().get("history/x/1.json.gz") == b"x"
    finally:
        store.close()


def _undo_migration_6(admin: psycopg.Connection) -> None:
    """The schema as version 5 left it: no history locations, no indexes of closed executions."""
    _undo_migration_7(admin)
    admin.execute("DROP INDEX executions_closed, executions_to_compact")
    admin.execute("ALTER TABLE executions DROP COLUMN history_location")
    admin.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")


def test_migration_6_compacts_and_expires_the_closed_executions_a_version_5_database_holds(
        postgres_schema: str, admin: psycopg.Connection) -> None:
    store = PostgresStore(postgres_schema, 4)
    write_schema_5_data(store)
    store.close()
    _undo_migration_6(admin)
    store = PostgresStore(postgres_schema, 4)
    try:
        check_migrated_from_schema_5(store)
    finally:
        store.close()


def _undo_migration_5(admin: psycopg.Connection) -> None:
    """The schema as version 4 left it: no redrive counts on the execution rows."""
    _undo_migration_6(admin)
    admin.execute("ALTER TABLE executions DROP COLUMN redrive_count, DROP COLUMN redrive_ms")
    admin.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")


def _undo_migration_4(admin: psycopg.Connection) -> None:
    """The schema as version 3 left it: no express starts (nor what came after)."""
    _undo_migration_5(admin)
    admin.execute("DROP TABLE express_starts")
    admin.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")


def _undo_migration_3(admin: psycopg.Connection) -> None:
    """The schema as version 2 left it: no versions, aliases or their columns; records without a first revision."""
    _undo_migration_4(admin)
    admin.execute("DROP TABLE versions, aliases")
    admin.execute("DROP INDEX executions_by_version, executions_by_alias")
    admin.execute("ALTER TABLE executions DROP COLUMN version_arn, DROP COLUMN alias_arn")
    admin.execute("ALTER TABLE state_machines DROP COLUMN last_version")
    admin.execute("ALTER TABLE activities DROP COLUMN encryption")
    for arn, record in admin.execute("SELECT arn, record FROM state_machines").fetchall():
        admin.execute("UPDATE state_machines SET record = %s WHERE arn = %s", (as_schema_2(record), arn))
    admin.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def test_migration_3_keeps_a_version_2_database_working_and_adds_versions(
        postgres_schema: str, admin: psycopg.Connection) -> None:
    store = PostgresStore(postgres_schema, 4)
    write_schema_2_data(store)
    store.close()
    _undo_migration_3(admin)
    store = PostgresStore(postgres_schema, 4)
    try:
        check_migrated_from_schema_2(store)
    finally:
        store.close()


def test_migration_5_counts_no_redrives_for_the_executions_a_version_4_database_holds(
        postgres_schema: str, admin: psycopg.Connection) -> None:
    store = PostgresStore(postgres_schema, 4)
    write_schema_2_data(store)
    store.close()
    _undo_migration_5(admin)
    store = PostgresStore(postgres_schema, 4)
    try:
        check_migrated_from_schema_3(store)
    finally:
        store.close()


@contextmanager
def holder_paused_in_a_commit(url: str, shards: tuple[int, ...],
                              stuck_shard: int) -> Iterator[tuple[PostgresStore, dict[int, int], psycopg.Connection]]:
    """node-a holds ``shards`` until 1 s and stopped in the middle of a commit of ``stuck_shard``, its row locked (the
    server does not see the session idle: no idle-in-transaction limit applies to it). Yields node-b's store,
    node-a's range ids and node-a's stopped session."""
    paused = PostgresStore(url, 4, node_id="node-a")
    taker = PostgresStore(url, None, node_id="node-b")
    stuck = psycopg.connect(url, autocommit=True)
    try:
        held = {shard: paused.acquire_shard(shard, "node-a", 1_000, now_ms=0) for shard in shards}
        stuck.execute("SELECT set_config('application_name', %s, false)", (session_name("node-a"),))
        stuck.execute("BEGIN")
        stuck.execute("SELECT range_id FROM shards WHERE shard_id = %s FOR SHARE", (stuck_shard,))
        yield taker, held, stuck
    finally:
        stuck.close()
        paused.close()
        taker.close()


def test_a_holder_paused_inside_a_commit_past_its_lease_has_its_sessions_ended_so_the_shard_comes_free(
        postgres_schema: str) -> None:
    with holder_paused_in_a_commit(postgres_schema, (0,), 0) as (taker, held, stuck):
        assert taker.acquire_shard(0, "node-b", 9_000, now_ms=2_000) is None  # locked: its sessions are ended
        assert taker.acquire_shard(0, "node-b", 9_000, now_ms=2_000) == held[0] + 1
        with pytest.raises(psycopg.OperationalError):
            stuck.execute("SELECT 1")


def test_taking_several_shards_past_a_paused_holder_takes_the_others_and_ends_its_sessions(
        postgres_schema: str) -> None:
    with holder_paused_in_a_commit(postgres_schema, (0, 1), 1) as (taker, held, stuck):
        assert taker.acquire_shards([0, 1, 2], "node-b", 9_000, now_ms=2_000).keys() == {0, 2}
        assert taker.acquire_shards([1], "node-b", 9_000, now_ms=2_000) == {1: held[1] + 1}
        with pytest.raises(psycopg.OperationalError):
            stuck.execute("SELECT 1")


def test_a_holder_whose_lease_still_runs_keeps_its_sessions(postgres_schema: str) -> None:
    holder = PostgresStore(postgres_schema, 4, node_id="node-a")
    other = PostgresStore(postgres_schema, None, node_id="node-b")
    try:
        holder.acquire_shard(0, "node-a", 10_000, now_ms=0)
        with holder._transaction() as db:  # a commit in flight while node-b tries (its lease has not run out)
            db.execute("SELECT range_id FROM shards WHERE shard_id = 0 FOR SHARE")
            assert other.acquire_shard(0, "node-b", 9_000, now_ms=2_000) is None
            assert db.execute("SELECT 1").fetchone() == (1,)
    finally:
        holder.close()
        other.close()


def test_a_node_joins_with_the_recorded_cluster_secret_or_any_once_no_other_node_is_live(postgres_schema: str) -> None:
    store = PostgresStore(postgres_schema, 2)
    try:
        assert store.adopt_cluster_secret("check-a", "node-a", 1_000)  # the first records its secret
        store.register_node("node-a", "http://a", 11_000)
        assert store.adopt_cluster_secret("check-a", "node-b", 2_000)
        assert not store.adopt_cluster_secret("check-b", "node-c", 2_000)  # node-a is live with check-a
        assert store.adopt_cluster_secret("check-b", "node-a", 2_000)  # the live one itself, restarted
        assert store.adopt_cluster_secret("check-c", "node-c", 20_000)  # node-a's lease ran out: a new secret
        store.register_node("node-c", "http://c", 30_000)
        assert not store.adopt_cluster_secret("check-a", "node-a", 21_000)  # now check-c is the cluster's
    finally:
        store.close()


def test_an_ordinary_commit_is_one_statement_and_one_that_finds_a_conflict_takes_the_careful_way(
        postgres_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = PostgresStore(postgres_schema, 2)
    careful: list[int] = []
    two_round_trips = store._commit_carefully
    monkeypatch.setattr(store, "_commit_carefully", lambda writes, *rest: careful.append(len(writes)) or
                        two_round_trips(writes, *rest))
    try:
        ranges = {0: store.acquire_shard(0, "node-a", 60_000)}
        arn = execution_arn("one")
        first = write(arn, history=events(1, 3), added=[("wait-1", 5_000)])
        first.effects.dispatches_added = [("3", task(ACTIVITY, 1))]
        committed(store, [first], ranges)
        committed(store, [write(arn, expected=1, history=events(4, 5), removed=[("wait-1", 5_000)])], ranges)
        assert careful == []
        result = store.commit([write(arn, expected=1), write(execution_arn("two"))], ranges)  # a stale version
        assert (result.conflicts, careful) == ([0], [2])
        assert stored(store.load_execution(execution_arn("two"))) == blob(execution_arn("two"), 1)
        assert [row.timer_id for row in store.due_timers(0, 0, 10_000)] == []
        assert [d.dispatch_id for d in store.pending_dispatches(0)] == ["3"]
    finally:
        store.close()


def test_a_claim_first_run_on_an_empty_outbox_does_not_scan_it_once_it_filled(postgres_schema: str,
                                                                             admin: psycopg.Connection) -> None:
    """A claim's plan, made while the outbox was empty and cached, re-ran its locking subquery for every row of a
    sequential scan: once the outbox filled, each claim read it size-squared times (dispatches of other nodes'
    tasks took tens of seconds). Counted from PostgreSQL's table statistics."""
    store = PostgresStore(postgres_schema, 4)
    try:
        ranges = {1: store.acquire_shard(1, "node-a", 60_000)}
        admin.execute("VACUUM ANALYZE outbox")  # the statistics of an empty table, as a queue often has
        for _ in range(20):  # past the driver preparing the statement (5 runs) and the server caching a plan (5)
            assert store.claim_activity_task(ACTIVITY, 1_000, 2_000) is None
        tasks = 2_000
        added = [write(execution_arn(f"e{n}"), shard=1) for n in range(tasks)]
        for n, one in enumerate(added):
            one.effects.dispatches_added = [("1", task(ACTIVITY, n))]
        committed(store, added, ranges)

        def outbox_rows_scanned() -> int:
            store._db().execute("SELECT pg_stat_force_next_flush()")  # the claims' connection reports at once
            admin.execute("SELECT pg_stat_clear_snapshot()")
            return admin.execute("SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'outbox'").fetchone()[0]

        before = outbox_rows_scanned()
        for _ in range(3):
            assert store.claim_activity_task(ACTIVITY, 1_000, 2_000) is not None
        assert outbox_rows_scanned() - before < tasks
    finally:
        store.close()


def test_the_store_advises_turning_autovacuum_on_exactly_when_it_is_off(postgres_schema: str,
                                                                      admin: psycopg.Connection) -> None:
    store = PostgresStore(postgres_schema, 4)
    try:
        off = admin.execute("SHOW autovacuum").fetchone()[0] == "off"
        assert any("autovacuum is off" in advice for advice in store.advice()) == off
    finally:
        store.close()
