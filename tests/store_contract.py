"""The store contract: one suite that every Store implementation runs unchanged.

Each test is one rule of the contract written in ``statewright.store.base``. An implementation's test module
subclasses ``StoreContract`` under a ``Test*`` name and provides two hooks:

- ``make_store(shard_count)``: a new, EMPTY store (a fresh SQLite file, a fresh PostgreSQL schema);
- ``reopen_store(shard_count)``: another handle on the data of the last ``make_store`` (what a restarted
  process, or a second node, would open).

The suite talks to the ``Store`` interface only; it imports no implementation and no engine code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import orjson
import pytest

from statewright.store.base import (
    ActivityRecord,
    AliasRecord,
    CommitOutcomeUnknown,
    ExecutionSummary,
    ExecutionWrite,
    NoSuchStateMachine,
    NoSuchVersions,
    Page,
    QuotaExceeded,
    RevisionChanged,
    ShardCountMismatch,
    StateMachineRecord,
    Store,
    TimerRow,
    VersionRecord,
    VersionRouted,
)

SHARDS = 4
ACCOUNT = "123456789012"
MACHINE = f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:orders"
OTHER_MACHINE = f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:billing"
US_EAST = f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:"
DEFINITION = '{"StartAt": "A", "States": {"A": {"Type": "Pass", "End": true}}}'
ROLE = f"arn:aws:iam::{ACCOUNT}:role/statewright"
ACTIVITY = f"arn:aws:states:us-east-1:{ACCOUNT}:activity:charge"
OTHER_ACTIVITY = f"arn:aws:states:us-east-1:{ACCOUNT}:activity:ship"


# -- building blocks


def execution_arn(name: str, machine: str = MACHINE) -> str:
    return machine.replace(":stateMachine:", ":execution:") + ":" + name


def events(first: int, last: int) -> list[dict[str, Any]]:
    """Consecutive history events ``first..last`` with a nested detail, as the engine writes them."""
    return [{"id": event_id, "previousEventId": event_id - 1, "type": "PassStateEntered", "timestamp": 1_000 + event_id,
             "stateEnteredEventDetails": {"name": f"S{event_id}", "input": '{"n": [1, 2]}'}}
            for event_id in range(first, last + 1)]


def write(arn: str, *, shard: int = 0, expected: int = 0, version: int | None = None, status: str = "RUNNING",
          start_ms: int = 1_000, stop_ms: int | None = None, history: Sequence[dict[str, Any]] = (),
          added: Sequence[tuple[str, int]] = (), removed: Sequence[tuple[str, int]] = (),
          machine: str = MACHINE) -> ExecutionWrite:
    version = expected + 1 if version is None else version
    return ExecutionWrite(shard, arn, machine, arn.rsplit(":", 1)[1], status, start_ms, stop_ms, expected, version,
                          blob(arn, version), list(history), list(added), list(removed))


def task(activity_arn: str, n: int) -> dict[str, Any]:
    """An activity task's dispatch payload, as the engine writes it (the store reads its kind and resource)."""
    return {"kind": "activity", "resource": activity_arn, "scheduled_id": n, "attempt": 1, "input": {"n": n}, "n": n}


def blob(arn: str, version: int) -> bytes:
    """The mutable-state bytes a write at ``version`` carries (the store treats them as opaque)."""
    return f"{arn}@{version}".encode() + bytes(range(256))  # every byte value, so nothing is text-mangled


def machine_record(name: str, *, region: str = "us-east-1", revision: str = "rev-1", definition: str = DEFINITION,
                   created_ms: int = 1_000) -> StateMachineRecord:
    return StateMachineRecord(
        arn=f"arn:aws:states:{region}:{ACCOUNT}:stateMachine:{name}", name=name, type="STANDARD",
        definition=definition, role_arn=ROLE, revision_id=revision, created_ms=created_ms, updated_ms=created_ms,
        logging_configuration={"level": "OFF", "includeExecutionData": False, "destinations": []},
        tracing_configuration={"enabled": False}, description=f"the {name} machine", initial_revision_id=revision)


def write_schema_2_data(store: Store) -> None:
    """What a schema 2 database held, for the migration tests: a state machine never updated, one updated, an
    activity and an execution."""
    ranges = {0: store.acquire_shard(0, "node-a", 60_000)}
    store.create_state_machine(machine_record("fresh", revision="rev-1"))
    store.create_state_machine(machine_record("changed", revision="rev-1"))
    changed = machine_record("changed", revision="rev-2")
    changed.updated_ms = 2_000
    store.update_state_machine(changed)
    store.create_activity(ActivityRecord(ACTIVITY, "charge", 1_000))
    committed(store, [write(execution_arn("old"), shard=0)], ranges)


def as_schema_2(record: bytes) -> bytes:
    """A state machine record as schema 2 wrote it."""
    raw = orjson.loads(record)
    del raw["initial_revision_id"], raw["encryption_configuration"]
    return orjson.dumps(raw)


def check_migrated_from_schema_2(store: Store) -> None:
    assert store.get_state_machine(machine_record("fresh").arn).revised is False
    assert store.get_state_machine(machine_record("changed").arn).revised is True  # which was first is unknown
    assert store.get_activity(ACTIVITY).encryption_configuration is None
    assert [e.arn for e in store.list_executions(MACHINE, None, 10, None).items] == [execution_arn("old")]
    assert store.publish_version(machine_record("fresh").arn, "", 3_000).number == 1


def check_migrated_from_schema_3(store: Store) -> None:
    """A database from before redrives: its executions count none, and one redriven now is counted."""
    old = execution_arn("old")
    assert [(e.arn, e.redrive_count, e.redrive_ms) for e in store.list_executions(MACHINE, None, 10, None).items] == [
        (old, 0, None)]
    committed(store, [replace(write(old, shard=0, expected=1), redrive_count=1, redrive_ms=5_000)],
              {0: store.acquire_shard(0, "node-a", 60_000)})
    assert [e.arn for e in store.list_executions(MACHINE, None, 10, None, redriven=True).items] == [old]


def write_schema_5_data(store: Store) -> None:
    """What a schema 5 database held, for the migration test: a closed execution with its history in the table."""
    committed(store, [write(execution_arn("done"), shard=0, status="SUCCEEDED", stop_ms=2_000, history=events(1, 3))],
              {0: store.acquire_shard(0, "node-a", 60_000)})


def check_migrated_from_schema_5(store: Store) -> None:
    """Its closed execution is compacted and expired like one written now."""
    ranges = own(store, 0)
    [done] = store.executions_to_compact([0], 2_000, 10)
    assert store.compact_histories([(done, "history/done")], ranges) == [done]
    assert store.history_location(done.arn) == "history/done"
    assert [e.arn for e in store.delete_executions(store.expired_executions([0], 2_000, 10), ranges)] == [done.arn]


def write_schema_6_data(store: Store) -> None:
    """What a schema 6 database held: a closed execution compacted, and a failed one its redrive window kept in the
    table."""
    ranges = own(store, 0)
    committed(store, [write(execution_arn("done"), shard=0, status="SUCCEEDED", stop_ms=2_000, history=events(1, 3)),
                      write(execution_arn("failed"), shard=0, status="FAILED", stop_ms=2_500, history=events(1, 2))],
              ranges)
    [done] = store.executions_to_compact([0], 2_000, 10)
    assert store.compact_histories([(done, "history/done.json.gz")], ranges) == [done]


def check_migrated_from_schema_6(store: Store) -> None:
    """The compacted execution stays so; the failed one is compacted now."""
    assert store.history_location(execution_arn("done")) == "history/done.json.gz"
    [failed] = store.executions_to_compact([0], 10_000, 10)
    assert failed.arn == execution_arn("failed")
    assert store.compact_histories([(failed, "history/failed/2.json.gz")], own(store, 0)) == [failed]
    assert store.executions_to_compact([0], 10_000, 10) == []


def own(store: Store, *shards: int) -> dict[int, int]:
    """Acquire ``shards`` and return the range ids to commit with."""
    return {shard: store.acquire_shard(shard, "node-a", 60_000) for shard in shards}


def committed(store: Store, writes: Sequence[ExecutionWrite], range_ids: dict[int, int]) -> None:
    """Commit a batch that must land whole."""
    result = store.commit(writes, range_ids)
    assert result.lost_shards == set() and result.conflicts == []


def all_timers(store: Store, shard: int) -> list[tuple[int, str, str]]:
    return [(row.fire_at_ms, row.execution_arn, row.timer_id) for row in store.due_timers(shard, -1, 1 << 62)]


def page_through(fetch: Callable[[int, str | None], Page], limit: int) -> list[Any]:
    """Follow ``fetch(limit, cursor)`` to the last page and return every item."""
    items: list[Any] = []
    cursor = None
    for _ in range(100):  # bounded: a cursor that never ends is a failure, not a hang
        page = fetch(limit, cursor)
        assert len(page.items) <= limit
        items += page.items
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor
    raise AssertionError("pagination did not end")


class DispatchAndActivityContract:
    """The outbox, express starts, activities and shared settings; mixed into StoreContract."""

    def test_express_starts_are_kept_until_removed_and_survive_a_reopen(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        a, b, c = (f"arn:aws:states:us-east-1:123456789012:express:m:{name}:1" for name in "abc")
        assert store.write_express_starts([(0, b, b"B"), (0, a, b"A"), (1, c, b"C")], [], ranges) == set()
        assert store.express_starts(0) == [b"A", b"B"]
        assert store.write_express_starts([(0, a, b"A2")], [(1, c)], ranges) == set()
        assert self.reopen().express_starts(0) == [b"A2", b"B"]
        assert store.express_starts(1) == []

    def test_express_starts_of_a_lost_shard_are_not_written(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        store.acquire_shard(1, "node-b", 120_000)  # another node takes shard 1
        arn = "arn:aws:states:us-east-1:123456789012:express:m:x:1"
        assert store.write_express_starts([(0, arn, b"0"), (1, arn, b"1")], [], ranges) == {1}
        assert (store.express_starts(0), store.express_starts(1)) == ([b"0"], [])

    def test_dispatches_are_pending_until_removed_in_order(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        a, b = execution_arn("a"), execution_arn("b")
        first = write(a)
        first.dispatches_added = [("3", {"kind": "activity", "n": 1}), ("9", {"kind": "http"})]
        other = write(b, shard=1)
        other.dispatches_added = [("3", {"kind": "activity", "n": 2})]
        committed(store, [first, other], ranges)
        assert [(d.dispatch_id, d.payload) for d in store.pending_dispatches(0)] == [
            ("3", {"kind": "activity", "n": 1}), ("9", {"kind": "http"})]
        assert [d.execution_arn for d in store.pending_dispatches(1)] == [b]
        started = write(a, expected=1)
        started.dispatches_removed = ["3"]
        committed(store, [started], ranges)
        assert [d.dispatch_id for d in store.pending_dispatches(0)] == ["9"]

    def test_a_dispatch_added_and_removed_in_one_batch_never_shows(self, store: Store) -> None:
        ranges = own(store, 0)
        arn = execution_arn("quick")
        first = write(arn)
        first.dispatches_added = [("3", {"k": 1})]
        second = write(arn, expected=1)
        second.dispatches_removed = ["3"]
        committed(store, [first, second], ranges)
        assert store.pending_dispatches(0) == []

    def test_dispatches_page_by_seq_and_later_commits_sort_after(self, store: Store) -> None:
        ranges = own(store, 0)
        arn = execution_arn("paging")
        first = write(arn)
        first.dispatches_added = [(str(n), {"n": n}) for n in range(5)]
        committed(store, [first], ranges)
        page = store.pending_dispatches(0, 0, 3)
        assert [d.dispatch_id for d in page] == ["0", "1", "2"]
        removed = write(arn, expected=1)
        removed.dispatches_removed = ["0", "1", "2", "3", "4"]
        removed.dispatches_added = [("late", {"n": 9})]
        committed(store, [removed], ranges)
        assert [d.dispatch_id for d in store.pending_dispatches(0, page[-1].seq, 3)] == ["late"]

    def test_a_new_owner_that_removes_the_newest_row_still_writes_its_next_above_what_it_read(
            self, store: Store) -> None:
        arn = execution_arn("taken-over")
        first = write(arn)
        first.dispatches_added = [("1", {"n": 1}), ("2", {"n": 2})]
        committed(store, [first], own(store, 0))
        successor = self.reopen()  # another process takes the shard, reads its rows, acks the newest, adds one
        ranges = {0: successor.acquire_shard(0, "node-b", 120_000)}
        read = successor.pending_dispatches(0)
        acked = write(arn, expected=1)
        acked.dispatches_removed = ["2"]
        committed(successor, [acked], ranges)
        added = write(arn, expected=2)
        added.dispatches_added = [("3", {"n": 3})]
        committed(successor, [added], ranges)
        assert [d.dispatch_id for d in successor.pending_dispatches(0, read[-1].seq)] == ["3"]

    def test_a_conflicting_write_leaves_no_dispatch(self, store: Store) -> None:
        ranges = own(store, 0)
        bad = write(execution_arn("x"), expected=5)
        bad.dispatches_added = [("3", {"k": 1})]
        assert store.commit([bad], ranges).conflicts == [0]
        assert store.pending_dispatches(0) == []

    def test_a_claim_takes_a_task_of_that_activity_from_any_shard_once_until_it_ends(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        first, second = write(execution_arn("one")), write(execution_arn("two"), shard=1)
        first.dispatches_added = [("3", task(ACTIVITY, 1)), ("4", {"kind": "http", "resource": ACTIVITY}),
                                  ("5", task(OTHER_ACTIVITY, 2))]
        second.dispatches_added = [("3", task(ACTIVITY, 3))]
        committed(store, [first, second], ranges)
        claimed = [store.claim_activity_task(ACTIVITY, 1_000, 6_000) for _ in range(2)]
        assert sorted(claim.payload["n"] for claim in claimed) == [1, 3]
        assert {(claim.shard_id, claim.dispatch_id) for claim in claimed} == {(0, "3"), (1, "3")}
        assert store.claim_activity_task(ACTIVITY, 5_999, 9_000) is None  # both held; the HTTP row is no task
        assert store.claim_activity_task(ACTIVITY, 6_000, 9_000) is not None  # a claim that ended is free again
        assert store.claim_activity_task(OTHER_ACTIVITY, 1_000, 6_000).payload == task(OTHER_ACTIVITY, 2)

    def test_a_claim_skips_the_shards_asked_and_never_finds_a_removed_task(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        first, second = write(execution_arn("one")), write(execution_arn("two"), shard=1)
        first.dispatches_added = [("3", task(ACTIVITY, 1))]
        second.dispatches_added = [("3", task(ACTIVITY, 2))]
        committed(store, [first, second], ranges)
        assert store.claim_activity_task(ACTIVITY, 1_000, 2_000, [0, 1]) is None
        assert store.claim_activity_task(ACTIVITY, 1_000, 2_000, [1]).execution_arn == execution_arn("one")
        started = write(execution_arn("two"), shard=1, expected=1)
        started.dispatches_removed = ["3"]
        committed(store, [started], ranges)
        assert store.claim_activity_task(ACTIVITY, 9_000, 10_000, [0]) is None

    def test_a_claim_through_one_handle_holds_against_another(self, store: Store) -> None:
        ranges = own(store, 0)
        added = write(execution_arn("one"))
        added.dispatches_added = [("3", task(ACTIVITY, 1)), ("7", task(ACTIVITY, 2))]
        committed(store, [added], ranges)
        other = self.reopen_store(SHARDS)
        try:
            mine, theirs = store.claim_activity_task(ACTIVITY, 1_000, 5_000), other.claim_activity_task(
                ACTIVITY, 1_000, 5_000)
            assert {mine.dispatch_id, theirs.dispatch_id} == {"3", "7"}
            assert other.claim_activity_task(ACTIVITY, 1_000, 5_000) is None
        finally:
            other.close()

    def test_activities_create_get_list_delete(self, store: Store) -> None:
        prefix = f"arn:aws:states:us-east-1:{ACCOUNT}:activity:"
        for name in ("beta", "alpha", "gamma"):
            record = ActivityRecord(prefix + name, name, 5)
            assert store.create_activity(record) == record
        assert store.create_activity(ActivityRecord(prefix + "alpha", "alpha", 99)).created_ms == 5
        elsewhere = f"arn:aws:states:eu-west-1:{ACCOUNT}:activity:"
        store.create_activity(ActivityRecord(elsewhere + "alpha", "alpha", 7))
        items = page_through(lambda limit, cursor: store.list_activities(prefix, limit, cursor), 2)
        assert [item.name for item in items] == ["alpha", "beta", "gamma"]
        store.delete_activity(prefix + "beta")
        assert store.get_activity(prefix + "beta") is None
        assert store.get_activity(prefix + "gamma") == ActivityRecord(prefix + "gamma", "gamma", 5)

    def test_settings_keep_the_first_value_written_if_absent(self, store: Store) -> None:
        assert store.get_setting("k") is None
        assert store.put_setting_if_absent("k", "one") == "one"
        assert store.put_setting_if_absent("k", "two") == "one"
        store.put_setting("k", "three")
        assert store.get_setting("k") == "three"


class RetentionContract:
    """Compaction and expiry of closed executions; mixed into StoreContract."""

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
        closing.dispatches_added = [("status-2", {"kind": "status", "detail": {"status": "SUCCEEDED"}})]
        committed(store, [closing], ranges)
        assert store.expired_executions([0], 10_000, 10) == []  # its status event has not gone out yet
        sent = write(execution_arn("told"), shard=0, expected=1, status="SUCCEEDED", stop_ms=2_000)
        sent.dispatches_removed = ["status-2"]
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


class StoreContract(DispatchAndActivityContract, RetentionContract):
    """The contract suite; subclass it as ``Test<Backend>Store`` and implement the two hooks."""

    def make_store(self, shard_count: int) -> Store:
        raise NotImplementedError

    def reopen_store(self, shard_count: int) -> Store:
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> Iterator[Store]:
        self._opened: list[Store] = []
        store = self.make_store(SHARDS)
        self._opened.append(store)
        yield store
        for handle in reversed(self._opened):
            handle.close()

    def reopen(self, shard_count: int = SHARDS) -> Store:
        handle = self.reopen_store(shard_count)
        self._opened.append(handle)
        return handle

    # -- shards

    def test_shard_count_is_fixed_at_creation(self, store: Store) -> None:
        assert store.shard_count() == SHARDS
        assert self.reopen(SHARDS).shard_count() == SHARDS

    def test_reopen_with_another_shard_count_raises_shard_count_mismatch(self, store: Store) -> None:
        with pytest.raises(ShardCountMismatch):
            self.reopen(SHARDS + 1)
        with pytest.raises(ShardCountMismatch):
            self.reopen(1)
        assert self.reopen(SHARDS).shard_count() == SHARDS

    def test_acquire_shard_bumps_range_id_every_time(self, store: Store) -> None:
        seen = [store.acquire_shard(2, f"node-{attempt}", 1_000 * attempt) for attempt in range(5)]
        assert seen == sorted(set(seen)), f"range ids must strictly increase: {seen}"

    def test_range_id_keeps_increasing_after_reopen(self, store: Store) -> None:
        before = store.acquire_shard(1, "node-a", 1_000)
        assert self.reopen().acquire_shard(1, "node-b", 2_000) > before

    def test_acquire_shard_leaves_other_shards_range_ids_alone(self, store: Store) -> None:
        range_ids = own(store, 0, 1)
        store.acquire_shard(0, "node-b", 1_000)
        arn = execution_arn("on-shard-1")
        result = store.commit([write(arn, shard=1)], {1: range_ids[1]})
        assert result.lost_shards == set()
        assert store.load_execution(arn) == blob(arn, 1)

    # -- leases and nodes (several engine nodes on one store)

    def test_acquire_with_a_clock_takes_only_a_free_shard(self, store: Store) -> None:
        first = store.acquire_shard(2, "node-a", 10_000, now_ms=0)
        assert first is not None
        assert store.acquire_shard(2, "node-b", 20_000, now_ms=9_999) is None  # node-a's lease still runs
        assert store.acquire_shard(2, "node-a", 20_000, now_ms=9_999) > first  # its holder may take it again
        taken = store.acquire_shard(2, "node-b", 30_000, now_ms=20_000)  # the lease ended: anyone may take it
        assert taken is not None
        assert [(lease.owner, lease.lease_until_ms) for lease in store.shard_leases() if lease.shard_id == 2] \
            == [("node-b", 30_000)]

    def test_acquiring_several_takes_the_free_ones_and_leaves_a_running_lease_alone(self, store: Store) -> None:
        before = {shard: store.acquire_shard(shard, "node-a", 10_000, now_ms=0) for shard in (0, 1, 2)}
        store.acquire_shard(3, "node-b", 50_000, now_ms=0)
        taken = store.acquire_shards([0, 1, 3], "node-c", 40_000, now_ms=10_000)  # node-a's leases ended
        assert sorted(taken) == [0, 1] and all(taken[shard] > before[shard] for shard in taken)
        leases = {lease.shard_id: (lease.owner, lease.lease_until_ms) for lease in store.shard_leases()}
        assert [leases[shard] for shard in (0, 1, 2, 3)] == [
            ("node-c", 40_000), ("node-c", 40_000), ("node-a", 10_000), ("node-b", 50_000)]
        stale = store.commit([write(execution_arn("fenced"), shard=0)], {0: before[0]})
        assert stale.lost_shards == {0}
        assert store.acquire_shards([], "node-c", 40_000, now_ms=10_000) == {}

    def test_renew_extends_only_leases_still_held_at_their_range_id(self, store: Store) -> None:
        held = {shard: store.acquire_shard(shard, "node-a", 10_000, now_ms=0) for shard in (0, 1, 2)}
        store.acquire_shard(1, "node-b", 10_000)  # node-b takes shard 1 (unconditionally)
        assert store.renew_leases("node-a", held, 25_000) == {0, 2}
        leases = {lease.shard_id: lease for lease in store.shard_leases()}
        assert (leases[0].owner, leases[0].lease_until_ms, leases[0].range_id) == ("node-a", 25_000, held[0])
        assert (leases[1].owner, leases[1].lease_until_ms) == ("node-b", 10_000)
        assert store.renew_leases("node-a", {0: held[0] - 1}, 99_000) == set()

    def test_released_shard_is_free_at_once_and_its_range_id_keeps_rising(self, store: Store) -> None:
        held = store.acquire_shard(3, "node-a", 60_000, now_ms=0)
        store.release_shards("node-a", {3: held})
        lease = store.shard_leases()[3]
        assert (lease.owner, lease.lease_until_ms, lease.range_id) == (None, 0, held)
        assert store.acquire_shard(3, "node-b", 70_000, now_ms=1) == held + 1

    def test_release_by_a_fenced_owner_changes_nothing(self, store: Store) -> None:
        stale = store.acquire_shard(0, "node-a", 10_000, now_ms=0)
        fresh = store.acquire_shard(0, "node-b", 30_000, now_ms=20_000)
        store.release_shards("node-a", {0: stale})
        lease = store.shard_leases()[0]
        assert (lease.owner, lease.range_id, lease.lease_until_ms) == ("node-b", fresh, 30_000)

    def test_shard_leases_list_every_shard_in_order(self, store: Store) -> None:
        assert [lease.shard_id for lease in store.shard_leases()] == list(range(SHARDS))
        assert all(lease.owner is None for lease in store.shard_leases())

    def test_nodes_register_refresh_and_leave(self, store: Store) -> None:
        store.register_node("node-b", "http://127.0.0.1:9002", 5_000)
        store.register_node("node-a", "http://127.0.0.1:9001", 5_000)
        self.reopen().register_node("node-a", "http://10.0.0.1:9001", 8_000)  # refreshed, from another handle
        assert [(node.node_id, node.address, node.lease_until_ms) for node in store.nodes()] == [
            ("node-a", "http://10.0.0.1:9001", 8_000), ("node-b", "http://127.0.0.1:9002", 5_000)]
        store.remove_node("node-b")
        assert [node.node_id for node in store.nodes()] == ["node-a"]

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
        assert store.load_execution(stale_arn) == blob(stale_arn, 1)
        assert store.read_history(stale_arn, 0, 100, False) == events(1, 2)
        assert store.load_execution(execution_arn("stale-new")) is None
        assert all_timers(store, 0) == [(500, stale_arn, "t-old")]
        assert store.load_execution(fresh_arn) == blob(fresh_arn, 1)
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
        assert store.load_execution(arn) == blob(arn, 1)

    def test_empty_batch_commits_nothing(self, store: Store) -> None:
        result = store.commit([], own(store, 0))
        assert result.lost_shards == set() and result.conflicts == []

    # -- commit: version checks

    def test_expected_version_zero_inserts_the_execution(self, store: Store) -> None:
        arn = execution_arn("new")
        committed(store, [write(arn, shard=1, history=events(1, 2), added=[("wait", 5_000)])], own(store, 1))
        assert store.load_execution(arn) == blob(arn, 1)
        assert store.read_history(arn, 0, 100, False) == events(1, 2)
        assert all_timers(store, 1) == [(5_000, arn, "wait")]

    def test_second_insert_of_the_same_arn_is_a_conflict_and_writes_nothing(self, store: Store) -> None:
        range_ids = own(store, 0)
        arn = execution_arn("twice")
        committed(store, [write(arn, history=events(1, 2), added=[("first", 100)])], range_ids)
        again = write(arn, version=7, status="FAILED", history=events(3, 5), added=[("second", 200)])
        result = store.commit([again], range_ids)
        assert result.conflicts == [0] and not result.committed(0, again)
        assert store.load_execution(arn) == blob(arn, 1)
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
        assert store.load_execution(arn) == blob(arn, 3)
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
        assert store.load_execution(arn) == blob(arn, 2)
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
        assert store.load_execution(fresh) == blob(fresh, 1)
        assert store.load_execution(existing) == blob(existing, 1)
        assert store.load_execution(moved) == blob(moved, 2)
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
        assert store.load_execution(arn) == blob(arn, 3)
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
        reader = threading.Thread(target=lambda: seen.append(store.load_execution(good)))
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
        assert {arn: store.load_execution(arn) for arn in arns} == {arn: blob(arn, 1) for arn in arns}

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

    # -- timers

    def test_due_timers_come_in_fire_order(self, store: Store) -> None:
        range_ids = own(store, 1)
        arns = [execution_arn(f"sleeper-{index}") for index in range(3)]
        fire_times = [700, 100, 400, 300, 600, 200, 500]
        committed(store, [write(arns[0], shard=1, added=[("a", 700), ("b", 100)])], range_ids)
        committed(store, [write(arns[1], shard=1, added=[("c", 400), ("d", 300)]),
                          write(arns[2], shard=1, added=[("e", 600)])], range_ids)
        committed(store, [write(arns[0], shard=1, expected=1, added=[("f", 200), ("g", 500)])], range_ids)
        rows = store.due_timers(1, 0, 10_000)
        assert [row.fire_at_ms for row in rows] == sorted(fire_times)
        assert [row.timer_id for row in rows] == ["b", "f", "d", "c", "g", "e", "a"]
        assert all(row.shard_id == 1 for row in rows)
        assert rows[0] == TimerRow(1, 100, arns[0], "b")
        assert rows[2] == TimerRow(1, 300, arns[1], "d")

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
            after_ms, after_key = rows[-1].fire_at_ms, (rows[-1].execution_arn, rows[-1].timer_id)
        assert seen == sorted((arn, timer) for arn in arns for timer in "ab")

    # -- write groups

    def test_a_write_group_lands_whole_or_not_at_all(self, store: Store) -> None:
        ranges = own(store, 0, 1)
        first, second, alone = execution_arn("g-1"), execution_arn("g-2"), execution_arn("g-alone")
        committed(store, [write(first), write(second, shard=1)], ranges)
        group = [write(first, expected=1), write(second, shard=1, expected=5)]  # the second's check fails
        group[0].group = group[1].group = 7
        result = store.commit([*group, write(alone)], ranges)
        assert sorted(result.conflicts) == [0, 1]
        assert store.load_execution(first) == blob(first, 1)  # its write went back with its group's
        assert store.load_execution(alone) == blob(alone, 1)

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
        assert store.load_execution(arn) == blob(arn, 1)
        committed(store, [write(arn, expected=1)], range_ids)
        assert store.load_execution(arn) == blob(arn, 2)
        assert isinstance(store.load_execution(arn), bytes)

    def test_load_executions_returns_those_that_exist_in_one_call(self, store: Store) -> None:
        range_ids = own(store, 0, 1)
        arns = [execution_arn(f"many-{index}") for index in range(3)]
        committed(store, [write(arns[0]), write(arns[2])], range_ids)
        committed(store, [write(arns[2], expected=1)], range_ids)
        found = store.load_executions([*arns, execution_arn("never")])
        assert found == {arns[0]: blob(arns[0], 1), arns[2]: blob(arns[2], 2)}
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

    # -- state machines

    def test_create_then_get_returns_the_same_record(self, store: Store) -> None:
        record = machine_record("orders")
        assert store.create_state_machine(record) == record
        assert store.get_state_machine(record.arn) == record
        assert store.get_revision(record.arn, "rev-1") == (DEFINITION, ROLE)

    def test_get_of_an_unknown_machine_is_none(self, store: Store) -> None:
        assert store.get_state_machine(machine_record("nobody").arn) is None
        assert store.get_revision(machine_record("nobody").arn, "rev-1") is None

    def test_create_of_an_existing_arn_returns_the_existing_record_unchanged(self, store: Store) -> None:
        first = machine_record("orders")
        store.create_state_machine(first)
        second = machine_record("orders", revision="rev-2", definition='{"StartAt": "B"}', created_ms=5_000)
        assert store.create_state_machine(second) == first
        assert store.get_state_machine(first.arn) == first
        assert store.get_revision(first.arn, "rev-2") is None

    def test_update_writes_a_new_revision_and_keeps_the_old_one(self, store: Store) -> None:
        old = machine_record("orders")
        store.create_state_machine(old)
        new = machine_record("orders", revision="rev-2", definition='{"StartAt": "B"}')
        new.role_arn = f"arn:aws:iam::{ACCOUNT}:role/other"
        new.updated_ms = 7_000
        new.description = "changed"
        assert store.update_state_machine(new) is True
        assert store.get_state_machine(old.arn) == new
        assert store.get_revision(old.arn, "rev-1") == (DEFINITION, ROLE)
        assert store.get_revision(old.arn, "rev-2") == ('{"StartAt": "B"}', new.role_arn)

    def test_update_of_an_unknown_machine_returns_false_and_creates_nothing(self, store: Store) -> None:
        record = machine_record("nobody")
        assert store.update_state_machine(record) is False
        assert store.get_state_machine(record.arn) is None
        assert store.list_state_machines(US_EAST, 10, None).items == []

    def test_delete_removes_the_machine_but_its_revisions_stay_readable(self, store: Store) -> None:
        record = machine_record("orders")
        store.create_state_machine(record)
        store.update_state_machine(machine_record("orders", revision="rev-2", definition='{"StartAt": "B"}'))
        store.delete_state_machine(record.arn)
        assert store.get_state_machine(record.arn) is None
        assert store.list_state_machines(US_EAST, 10, None).items == []
        assert store.get_revision(record.arn, "rev-1") == (DEFINITION, ROLE)
        assert store.get_revision(record.arn, "rev-2") == ('{"StartAt": "B"}', ROLE)
        store.delete_state_machine(record.arn)  # deleting again is a no-op
        assert store.update_state_machine(record) is False

    def test_delete_then_create_again_starts_a_fresh_record(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        store.tag_resource(machine_record("orders").arn, {"team": "payments"})
        store.delete_state_machine(machine_record("orders").arn)
        fresh = machine_record("orders", revision="rev-9", created_ms=9_000)
        assert store.create_state_machine(fresh) == fresh
        assert store.get_state_machine(fresh.arn) == fresh
        assert store.list_tags(fresh.arn) == {}

    def test_a_new_resource_is_tagged_in_its_create_and_an_existing_one_is_not(self, store: Store) -> None:
        machine = machine_record("orders")
        assert store.create_state_machine(machine, {"team": "payments"}) == machine
        assert store.create_state_machine(machine_record("orders", revision="rev-2"), {"team": "other"}) == machine
        assert store.list_tags(machine.arn) == {"team": "payments"}
        activity = ActivityRecord(f"arn:aws:states:us-east-1:{ACCOUNT}:activity:work", "work", 5)
        assert store.create_activity(activity, {"team": "payments"}) == activity
        store.create_activity(ActivityRecord(activity.arn, "work", 9), {"team": "other", "env": "dev"})
        assert store.list_tags(activity.arn) == {"team": "payments"}

    def test_list_state_machines_sorted_by_name(self, store: Store) -> None:
        names = ["delta", "alpha", "charlie", "bravo", "echo"]
        for name in names:
            store.create_state_machine(machine_record(name))
        page = store.list_state_machines(US_EAST, 10, None)
        assert [record.name for record in page.items] == sorted(names)
        assert page.items[0] == machine_record("alpha")
        assert page.next_cursor is None

    @pytest.mark.parametrize("limit", [1, 2, 3, 4, 10])
    def test_list_state_machines_pages_within_one_region_and_account(self, store: Store, limit: int) -> None:
        records = [machine_record(name) for name in ("delta", "alpha", "charlie", "bravo")]
        elsewhere = [machine_record("bravo", region=region) for region in ("eu-west-1", "ap-south-1")]
        for record in records + elsewhere:
            store.create_state_machine(record)
        items = page_through(lambda limit, cursor: store.list_state_machines(US_EAST, limit, cursor), limit)
        assert [record.name for record in items] == ["alpha", "bravo", "charlie", "delta"]
        assert all(record.arn.startswith(US_EAST) for record in items)

    # -- versions and aliases

    def _revise(self, store: Store, name: str, revision: str) -> StateMachineRecord:
        record = machine_record(name, revision=revision, definition=f'{{"StartAt": "{revision}"}}')
        record.initial_revision_id = "rev-1"
        record.updated_ms = 2_000
        assert store.update_state_machine(record) is True
        return record

    def test_publishing_snapshots_the_current_revision_under_the_next_number(self, store: Store) -> None:
        first = store.create_state_machine(machine_record("orders"))
        version = store.publish_version(first.arn, "first cut", 5_000)
        assert version == VersionRecord(first, 1, "first cut", 5_000)
        assert version.arn == f"{first.arn}:1"
        changed = self._revise(store, "orders", "rev-2")
        assert store.publish_version(first.arn, "", 6_000) == VersionRecord(changed, 2, "", 6_000)
        assert store.get_version(first.arn, 1) == version  # immutable: the update did not touch it

    def test_publishing_a_revision_already_published_returns_its_version(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        version = store.publish_version(MACHINE, "once", 5_000)
        assert store.publish_version(MACHINE, "twice", 6_000) == version
        assert [v.number for v in store.list_versions(MACHINE, 10, None).items] == [1]

    def test_publishing_conditional_on_a_revision_that_moved_is_refused(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        assert store.publish_version(MACHINE, "", 5_000, revision_id="INITIAL").number == 1  # AWS's name for it
        self._revise(store, "orders", "rev-2")
        with pytest.raises(RevisionChanged) as refused:
            store.publish_version(MACHINE, "", 6_000, revision_id="rev-1")
        assert refused.value.current == "rev-2"
        assert store.publish_version(MACHINE, "", 6_000, revision_id="rev-2").number == 2

    def test_publishing_needs_the_state_machine(self, store: Store) -> None:
        with pytest.raises(NoSuchStateMachine):
            store.publish_version(MACHINE, "", 5_000)

    def test_version_numbers_are_never_reused_after_a_delete(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        store.publish_version(MACHINE, "", 5_000)
        self._revise(store, "orders", "rev-2")
        store.publish_version(MACHINE, "", 5_000)
        store.delete_version(MACHINE, 2)
        store.delete_version(MACHINE, 2)  # deleting again is a no-op
        assert store.get_version(MACHINE, 2) is None
        assert store.publish_version(MACHINE, "", 6_000).number == 3  # rev-2 again, under a new number

    def test_publishing_stops_at_the_versions_quota(self, store: Store) -> None:
        store.create_state_machine(machine_record("orders"))
        store.publish_version(MACHINE, "", 5_000, versions_max=2)
        self._revise(store, "orders", "rev-2")
        store.publish_version(MACHINE, "", 5_000, versions_max=2)
        self._revise(store, "orders", "rev-3")
        with pytest.raises(QuotaExceeded):
            store.publish_version(MACHINE, "", 5_000, versions_max=2)
        store.delete_version(MACHINE, 1)
        assert store.publish_version(MACHINE, "", 5_000, versions_max=2).number == 3

    @pytest.mark.parametrize("limit", [1, 2, 10])
    def test_list_versions_pages_newest_first(self, store: Store, limit: int) -> None:
        store.create_state_machine(machine_record("orders"))
        store.create_state_machine(machine_record("billing"))
        for revision in ("rev-1", "rev-2", "rev-3"):
            if revision != "rev-1":
                self._revise(store, "orders", revision)
            store.publish_version(MACHINE, "", 5_000)
        store.publish_version(OTHER_MACHINE, "", 5_000)
        items = page_through(lambda size, cursor: store.list_versions(MACHINE, size, cursor), limit)
        assert [version.number for version in items] == [3, 2, 1]

    def _versions(self, store: Store, count: int) -> None:
        store.create_state_machine(machine_record("orders"))
        for number in range(1, count + 1):
            if number > 1:
                self._revise(store, "orders", f"rev-{number}")
            store.publish_version(MACHINE, "", 5_000)

    def test_an_alias_is_created_once_and_read_back(self, store: Store) -> None:
        self._versions(store, 2)
        alias = AliasRecord(MACHINE, "live", "prod", ((1, 80), (2, 20)), 7_000, 7_000)
        assert store.create_alias(alias) == alias
        assert store.get_alias(MACHINE, "live") == alias
        assert alias.arn == f"{MACHINE}:live"
        other = AliasRecord(MACHINE, "live", "", ((2, 100),), 8_000, 8_000)
        assert store.create_alias(other) == alias  # the existing one, unchanged
        assert store.get_alias(MACHINE, "nobody") is None

    def test_an_alias_routes_only_to_versions_that_exist(self, store: Store) -> None:
        self._versions(store, 1)
        with pytest.raises(NoSuchVersions) as refused:
            store.create_alias(AliasRecord(MACHINE, "live", "", ((1, 50), (7, 50)), 7_000, 7_000))
        assert refused.value.numbers == [7]
        with pytest.raises(NoSuchStateMachine):
            store.create_alias(AliasRecord(OTHER_MACHINE, "live", "", ((1, 100),), 7_000, 7_000))
        store.create_alias(AliasRecord(MACHINE, "live", "", ((1, 100),), 7_000, 7_000))
        with pytest.raises(NoSuchVersions):
            store.update_alias(AliasRecord(MACHINE, "live", "", ((2, 100),), 7_000, 8_000))
        assert store.get_alias(MACHINE, "live").routing == ((1, 100),)

    def test_a_version_an_alias_routes_to_cannot_be_deleted(self, store: Store) -> None:
        self._versions(store, 2)
        store.create_alias(AliasRecord(MACHINE, "live", "", ((1, 50), (2, 50)), 7_000, 7_000))
        store.create_alias(AliasRecord(MACHINE, "beta", "", ((2, 100),), 7_000, 7_000))
        with pytest.raises(VersionRouted) as refused:
            store.delete_version(MACHINE, 2)
        assert sorted(refused.value.aliases) == ["beta", "live"]
        assert store.update_alias(AliasRecord(MACHINE, "live", "", ((1, 100),), 7_000, 8_000)) is True
        store.delete_alias(MACHINE, "beta")
        store.delete_alias(MACHINE, "beta")  # deleting again is a no-op
        store.delete_version(MACHINE, 2)
        assert store.get_version(MACHINE, 2) is None

    def test_update_of_an_unknown_alias_returns_false(self, store: Store) -> None:
        self._versions(store, 1)
        assert store.update_alias(AliasRecord(MACHINE, "nobody", "", ((1, 100),), 7_000, 7_000)) is False
        assert store.get_alias(MACHINE, "nobody") is None

    def test_creating_aliases_stops_at_the_aliases_quota(self, store: Store) -> None:
        self._versions(store, 1)
        for name in ("a", "b"):
            store.create_alias(AliasRecord(MACHINE, name, "", ((1, 100),), 7_000, 7_000), aliases_max=2)
        with pytest.raises(QuotaExceeded):
            store.create_alias(AliasRecord(MACHINE, "c", "", ((1, 100),), 7_000, 7_000), aliases_max=2)

    @pytest.mark.parametrize("limit", [1, 2, 10])
    def test_list_aliases_pages_by_name(self, store: Store, limit: int) -> None:
        self._versions(store, 1)
        for name in ("prod", "beta", "canary"):
            store.create_alias(AliasRecord(MACHINE, name, "", ((1, 100),), 7_000, 7_000))
        items = page_through(lambda size, cursor: store.list_aliases(MACHINE, size, cursor), limit)
        assert [alias.name for alias in items] == ["beta", "canary", "prod"]
        assert store.list_aliases(OTHER_MACHINE, 10, None).items == []

    def test_deleting_a_state_machine_deletes_its_versions_and_aliases_but_not_its_revisions(
            self, store: Store) -> None:
        self._versions(store, 2)
        store.create_alias(AliasRecord(MACHINE, "live", "", ((1, 100),), 7_000, 7_000))
        store.delete_state_machine(MACHINE)
        assert store.list_versions(MACHINE, 10, None).items == []
        assert store.list_aliases(MACHINE, 10, None).items == []
        assert store.get_revision(MACHINE, "rev-1") == (DEFINITION, ROLE)
        store.create_state_machine(machine_record("orders"))
        assert store.publish_version(MACHINE, "", 9_000).number == 1  # a new state machine counts afresh

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

    def test_an_activity_keeps_its_encryption_configuration(self, store: Store) -> None:
        key = {"type": "CUSTOMER_MANAGED_KMS_KEY", "kmsKeyId": "alias/mine", "kmsDataKeyReusePeriodSeconds": 60}
        store.create_activity(ActivityRecord(ACTIVITY, "charge", 1_000, key))
        store.create_activity(ActivityRecord(OTHER_ACTIVITY, "ship", 1_000))
        assert store.get_activity(ACTIVITY).encryption_configuration == key
        assert store.get_activity(OTHER_ACTIVITY).encryption_configuration is None

    # -- tags

    def test_tags_are_added_overwritten_and_removed(self, store: Store) -> None:
        arn = machine_record("orders").arn
        assert store.list_tags(arn) == {}
        store.tag_resource(arn, {"team": "payments", "env": "dev"})
        store.tag_resource(arn, {"env": "prod", "cost": "42"})
        assert store.list_tags(arn) == {"team": "payments", "env": "prod", "cost": "42"}
        store.untag_resource(arn, ["env", "not-there"])
        assert store.list_tags(arn) == {"team": "payments", "cost": "42"}
        store.untag_resource(arn, [])
        store.tag_resource(arn, {})
        assert store.list_tags(arn) == {"team": "payments", "cost": "42"}

    def test_tags_are_per_resource(self, store: Store) -> None:
        first, second = machine_record("orders").arn, machine_record("billing").arn
        store.tag_resource(first, {"team": "payments"})
        store.tag_resource(second, {"team": "finance", "env": "prod"})
        store.untag_resource(first, ["env"])
        assert store.list_tags(first) == {"team": "payments"}
        assert store.list_tags(second) == {"team": "finance", "env": "prod"}
