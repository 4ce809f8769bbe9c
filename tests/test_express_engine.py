"""Express executions in the engine core, on a virtual clock over a real SQLite store: no commit per step, a durable
row for asynchronous starts only, the five-minute limit, and a new engine running again what the last one held."""

from __future__ import annotations

import json
from concurrent.futures import Future

import pytest

from statewright.engine.commands import InboxFull, StartExecution
from statewright.engine.edges import Edges
from statewright.engine.engine import Engine
from statewright.engine.express import ASYNC, SYNC
from statewright.engine.limits import Limits
from statewright.store.base import StateMachineRecord, StoreUnavailable
from statewright.store.sqlite import SqliteStore

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:quick"
WAITING = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Next": "W"},
                                      "W": {"Type": "Wait", "SecondsPath": "$.s", "End": True}}}
T0_MS = 1_700_000_000_000


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=4)
    store.create_state_machine(StateMachineRecord(MACHINE, "quick", "EXPRESS", json.dumps(WAITING), "role", "r1",
                                                  0, 0, {}, {}))
    yield store
    store.close()


def engine_on(store, clock: list[int]) -> Engine:
    logged: list = []
    engine = Engine(store, clock=lambda: clock[0], edges=Edges(history=logged.extend))
    engine.acquire_all_shards()
    engine.logged = logged
    return engine


def start(engine: Engine, name: str, seconds: int, mode: str) -> tuple[str, Future]:
    arn = f"arn:aws:states:us-east-1:123456789012:express:quick:{name}:0f0e"
    return arn, engine.submit(StartExecution(arn, MACHINE, name, "r1", "role", json.dumps({"s": seconds}),
                                             express=mode))


def started(engine: Engine) -> list[str]:
    return [arn for _, arn, _, events, _ in engine.logged for event in events if event["type"] == "ExecutionStarted"]


def test_a_sync_start_answers_with_the_result_once_closed_and_writes_nothing(store):
    clock = [T0_MS]
    engine = engine_on(store, clock)
    arn, reply = start(engine, "s", 10, SYNC)
    engine.tick(clock[0])
    assert not reply.done()
    assert store.load_execution(arn) is None and all(not store.express_starts(s) for s in range(4))
    clock[0] += 10_000
    engine.tick(clock[0])
    assert reply.result() == {"status": "SUCCEEDED", "start_ms": T0_MS, "stop_ms": T0_MS + 10_000,
                              "input": '{"s": 10}', "output": '{"s": 10}', "error": None, "cause": None}
    assert arn not in engine.express.runs
    assert [event["type"] for _, _, _, events, _ in engine.logged for event in events] == [
        "ExecutionStarted", "PassStateEntered", "PassStateExited", "WaitStateEntered", "WaitStateExited",
        "ExecutionSucceeded"]


def test_an_express_execution_times_out_after_five_minutes(store):
    clock = [T0_MS]
    engine = engine_on(store, clock)
    _, reply = start(engine, "long", 3600, SYNC)
    engine.tick(clock[0])
    clock[0] += 5 * 60 * 1000
    engine.tick(clock[0])
    assert reply.result()["status"] == "TIMED_OUT"
    assert reply.result()["error"] == "States.Timeout"


def test_an_async_start_is_durable_before_its_reply_and_leaves_no_row_once_closed(store):
    clock = [T0_MS]
    engine = engine_on(store, clock)
    arn, reply = start(engine, "a", 10, ASYNC)
    engine.tick(clock[0])
    assert reply.result() == T0_MS
    shard = engine.express.runs[arn].state.shard_id
    assert len(store.express_starts(shard)) == 1
    clock[0] += 10_000
    engine.tick(clock[0])  # closes; its row goes with the next store write of express starts
    engine.tick(clock[0])
    assert arn not in engine.express.runs and store.express_starts(shard) == []


def test_a_new_engine_runs_again_the_async_starts_the_last_one_held(store):
    clock = [T0_MS]
    first = engine_on(store, clock)
    arn, _ = start(first, "again", 10, ASYNC)
    _, sync_reply = start(first, "once", 10, SYNC)
    first.tick(clock[0])  # then the engine is gone, as after kill -9
    clock[0] += 1_000
    second = engine_on(store, clock)
    second.tick(clock[0])
    assert started(second) == [arn]  # the synchronous one is not run again
    clock[0] += 10_000
    second.tick(clock[0])
    second.tick(clock[0])
    assert sorted(started(first)) == [arn, "arn:aws:states:us-east-1:123456789012:express:quick:once:0f0e"]
    assert started(second) == [arn]
    assert all(not store.express_starts(shard) for shard in range(4))
    assert not sync_reply.done()  # its caller's connection went down with the first engine


def test_starts_past_the_express_limit_are_throttled(store):
    clock = [T0_MS]
    engine = Engine(store, clock=lambda: clock[0], limits=Limits(express_runs_max=1))
    engine.acquire_all_shards()
    _, first = start(engine, "one", 10, SYNC)
    _, second = start(engine, "two", 10, ASYNC)
    engine.tick(clock[0])
    assert isinstance(second.exception(), InboxFull) and not first.done()


class FailingRevisions:
    """The store, except that the next ``failures`` definition reads fail as an unreachable store's do."""

    def __init__(self, store, failures: int) -> None:
        self._store, self.failures = store, failures

    def get_revision(self, *key):
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("injected: the store did not answer")
        return self._store.get_revision(*key)

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_an_async_start_whose_definition_cannot_be_read_runs_again_once_the_store_answers(store):
    clock = [T0_MS]
    first = engine_on(store, clock)
    arn, _ = start(first, "later", 10, ASYNC)
    first.tick(clock[0])  # its row landed; then the engine is gone, as after kill -9
    second = engine_on(FailingRevisions(store, failures=1), clock)
    second.tick(clock[0])  # the rerun cannot read the definition
    assert started(second) == []
    clock[0] += 1_000
    second.tick(clock[0])
    assert started(second) == [arn]
    clock[0] += 10_000
    second.tick(clock[0])
    assert all(not store.express_starts(shard) for shard in range(4))  # it ran to its end
