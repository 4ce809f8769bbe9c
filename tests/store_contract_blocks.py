"""The store contract's building blocks: the data every per-table contract (store_contract_*.py) writes, helpers
that commit and page, what older schemas held (for the migration tests of each backend), and ``ContractBase``, the
hooks and fixture every contract class has. Imports no implementation and no engine code."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import orjson
import pytest

from statewright.decider.effects import Effects
from statewright.store.base import (
    ActivityRecord,
    ExecutionWrite,
    Page,
    StateMachineRecord,
    Store,
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
                          blob(arn, version), Effects(list(history), list(added), list(removed)))


def task(activity_arn: str, n: int) -> dict[str, Any]:
    """An activity task's dispatch payload, as the engine writes it (the store reads its kind and resource)."""
    return {"kind": "activity", "resource": activity_arn, "scheduled_id": n, "attempt": 1, "input": {"n": n}, "n": n}


def blob(arn: str, version: int) -> bytes:
    """The mutable-state blob a write at ``version`` carries: a JSON object, which the store keeps as it is but for
    what its row's columns hold (Store.rows_hold_fields); every character up to 255, so nothing is text-mangled."""
    return orjson.dumps({"at": f"{arn}@{version}", "text": "".join(map(chr, range(256)))})


def stored(raw: bytes | None) -> bytes | None:
    """A blob as ``load_execution`` returned it, without the row's fields a store may have put in front of it."""
    if raw is None:
        return None
    parsed = orjson.loads(raw)
    return orjson.dumps({"at": parsed["at"], "text": parsed["text"]})


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


class ContractBase:
    """What each contract class may use: the two hooks a backend's test class implements, the ``store`` fixture
    and ``reopen`` (see store_contract.py)."""

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
