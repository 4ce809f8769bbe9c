"""The engine core driven directly with a virtual clock: no threads, no sleeping, a real SQLite store."""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import Future

import pytest

from statewright.engine.commands import (
    ExecutionAlreadyExists,
    FireTimer,
    Heartbeat,
    InboxFull,
    RedriveExecution,
    StartAttempt,
    StartExecution,
    StopExecution,
)
from statewright.engine.engine import Engine
from statewright.engine.limits import Limits
from statewright.store.base import StateMachineRecord
from statewright.store.sqlite import SqliteStore

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:sleepy"
SLEEPY = {"StartAt": "W", "States": {"W": {"Type": "Wait", "SecondsPath": "$.s", "Next": "P"},
                                     "P": {"Type": "Pass", "Parameters": {"slept.$": "$.s"}, "End": True}}}


class VirtualClock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "db.sqlite", shard_count=4)
    store.create_state_machine(StateMachineRecord(MACHINE, "sleepy", "STANDARD", json.dumps(SLEEPY), "role", "r1",
                                                  0, 0, {}, {}))
    yield store
    store.close()


def make_engine(store, clock, cache_size=10_000) -> Engine:
    engine = Engine(store, clock=clock, limits=Limits(cached_executions_max=cache_size))
    engine.acquire_all_shards()
    return engine


def start(engine: Engine, name: str, seconds: int) -> tuple[StartExecution, Future]:
    arn = f"arn:aws:states:us-east-1:123456789012:execution:sleepy:{name}"
    command = StartExecution(arn, MACHINE, name, "r1", "role", json.dumps({"s": seconds}))
    return command, engine.submit(command)


def status(store, arn: str) -> dict:
    return json.loads(store.load_execution(arn))


def test_reply_comes_only_after_the_commit(store):
    clock = VirtualClock()
    engine = make_engine(store, clock)
    command, reply = start(engine, "a", 5)
    assert not reply.done()
    engine.tick(clock.now_ms)
    assert reply.result() == clock.now_ms
    assert status(store, command.arn)["status"] == "RUNNING"


def test_idle_executions_leave_memory_but_still_wake(store):
    clock = VirtualClock()
    engine = make_engine(store, clock, cache_size=10)
    commands = [start(engine, f"e{i}", 60 + i)[0] for i in range(100)]
    while engine.tick(clock.now_ms):
        pass
    assert engine.cached_executions() <= 10
    clock.now_ms += 200_000
    while engine.tick(clock.now_ms):
        pass
    assert all(status(store, c.arn)["status"] == "SUCCEEDED" for c in commands)
    assert engine.cached_executions() == 0  # closed executions are not cached


def test_timers_due_beyond_the_window_stay_on_disk_until_their_time(store):
    clock = VirtualClock()
    engine = make_engine(store, clock)
    far, _ = start(engine, "far", 90 * 24 * 3600)
    engine.tick(clock.now_ms)
    assert sum(len(window) for window in engine.windows.values()) == 0
    clock.now_ms += 90 * 24 * 3600 * 1000
    while engine.tick(clock.now_ms):
        pass
    assert status(store, far.arn)["status"] == "SUCCEEDED"


def test_timer_due_while_down_fires_on_the_next_engine(store):
    clock = VirtualClock()
    first = make_engine(store, clock)
    command, _ = start(first, "sleeper", 30)
    first.tick(clock.now_ms)
    clock.now_ms += 3_600_000  # the process was gone for an hour
    second = make_engine(store, clock)  # takes the shards, fencing the first
    second.tick(clock.now_ms)
    assert status(store, command.arn)["status"] == "SUCCEEDED"


def test_a_fenced_engine_cannot_commit(store):
    clock = VirtualClock()
    old = make_engine(store, clock)
    make_engine(store, clock)  # a new owner bumps every range id
    command, reply = start(old, "late", 1)
    old.tick(clock.now_ms)
    with pytest.raises(Exception, match=r"another node|does not own|retry"):
        reply.result()
    assert store.load_execution(command.arn) is None


def test_duplicate_timer_fire_is_ignored(store):
    clock = VirtualClock()
    engine = make_engine(store, clock)
    command, _ = start(engine, "dup", 1)
    engine.tick(clock.now_ms)
    clock.now_ms += 1_000
    engine.tick(clock.now_ms)
    version = status(store, command.arn)["version"]
    timer_id = "wait-2"
    engine.submit(FireTimer(command.arn, timer_id))
    engine.tick(clock.now_ms)
    assert status(store, command.arn)["version"] == version


def test_second_start_with_other_input_is_refused(store):
    clock = VirtualClock()
    engine = make_engine(store, clock)
    start(engine, "x", 5)
    engine.tick(clock.now_ms)
    other = StartExecution("arn:aws:states:us-east-1:123456789012:execution:sleepy:x", MACHINE, "x", "r1", "role",
                           "{}")
    refused = engine.submit(other)
    engine.tick(clock.now_ms)
    with pytest.raises(ExecutionAlreadyExists):
        refused.result()


def test_a_start_sent_again_stands_once_its_execution_closed_and_another_is_refused(store):
    clock = VirtualClock()
    engine = make_engine(store, clock)
    arn = "arn:aws:states:us-east-1:123456789012:execution:sleepy:again"
    first = StartExecution(arn, MACHINE, "again", "r1", "role", '{"s": 1}', token="t-1")
    started = engine.submit(first)
    engine.tick(clock.now_ms)
    clock.now_ms += 1_000
    while engine.tick(clock.now_ms):
        pass
    assert status(store, arn)["status"] == "SUCCEEDED"
    again = engine.submit(first)
    other = engine.submit(StartExecution(arn, MACHINE, "again", "r1", "role", '{"s": 1}', token="t-2"))
    engine.tick(clock.now_ms)
    assert again.result() == started.result()  # a forward retried after its answer was lost
    with pytest.raises(ExecutionAlreadyExists):  # another call with the same name and input, after it closed
        other.result()


def test_a_tick_reads_the_executions_it_does_not_hold_in_one_store_call(store):
    reads: list[list[str]] = []
    load_executions = store.load_executions
    store.load_executions = lambda arns: reads.append(list(arns)) or load_executions(arns)
    store.load_execution = lambda arn: pytest.fail(f"read {arn} on its own")
    clock = VirtualClock()
    engine = make_engine(store, clock, cache_size=0)  # nothing stays in memory: the second tick reads them again
    replies = [start(engine, f"batched-{index}", 5)[1] for index in range(20)]
    engine.tick(clock.now_ms)
    assert [len(arns) for arns in reads] == [20] and all(reply.done() for reply in replies)
    again = [start(engine, f"batched-{index}", 5)[1] for index in range(20)]  # idempotent starts: found this time
    engine.tick(clock.now_ms)
    assert [len(arns) for arns in reads] == [20, 20]
    assert [reply.result() for reply in again] == [reply.result() for reply in replies]


def test_an_execution_row_this_build_cannot_read_fails_its_own_commands_and_no_others(store):
    clock = VirtualClock()
    engine = make_engine(store, clock, cache_size=0)
    command, started = start(engine, "unreadable", 3600)
    engine.tick(clock.now_ms)
    started.result()
    state = json.loads(store.load_execution(command.arn))
    state["v"] = 99  # as a newer statewright would write it
    with sqlite3.connect(store.path) as raw:  # behind the store's back, as another process would write it
        raw.execute("UPDATE executions SET state = ? WHERE arn = ?", (json.dumps(state).encode(), command.arn))
    stopped = engine.submit(StopExecution(command.arn, "E", "c"))
    _, fresh = start(engine, "readable", 5)
    engine.tick(clock.now_ms)
    assert isinstance(fresh.result(), int)
    with pytest.raises(ValueError, match="newer than this statewright reads"):
        stopped.result()


def test_commands_for_one_execution_apply_in_order_within_a_tick(store):
    clock = VirtualClock()
    engine = make_engine(store, clock)
    command, started = start(engine, "ordered", 5)
    stopped = engine.submit(StopExecution(command.arn, "E", "c"))
    while engine.tick(clock.now_ms):
        pass
    assert started.result() < stopped.result() + 1
    assert status(store, command.arn)["status"] == "ABORTED"
    events = store.read_history(command.arn, 0, 100, False)
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))


def test_a_ticks_decisions_on_one_execution_land_in_one_write_and_a_timer_set_and_cleared_is_never_written(store):
    clock = VirtualClock()
    engine = make_engine(store, clock)
    writes_per_commit: list[list[str]] = []
    commit = store.commit

    def counting(writes, range_ids):
        writes_per_commit.append([write.arn for write in writes])
        return commit(writes, range_ids)
    store.commit = counting
    command, started = start(engine, "folded", 5)  # enters its Wait: a timer 5 s out
    stopped = engine.submit(StopExecution(command.arn, "E", "c"))  # which the stop removes
    engine.tick(clock.now_ms)
    assert writes_per_commit == [[command.arn]]
    assert started.result(timeout=0) <= stopped.result(timeout=0)
    assert status(store, command.arn)["status"] == "ABORTED"
    assert not [row for shard in range(4) for row in store.due_timers(shard, 0, clock.now_ms + 60_000)
                if row.execution_arn == command.arn]
    clock.now_ms += 10_000
    while engine.tick(clock.now_ms):
        pass
    events = store.read_history(command.arn, 0, 100, False)
    assert [event["type"] for event in events][-1] == "ExecutionAborted"
    assert [event["id"] for event in events] == list(range(1, len(events) + 1))


def test_a_full_inbox_refuses_callers_but_not_the_integrations_work(store):
    engine = Engine(store, limits=Limits(inbox_commands_max=2))
    engine.acquire_all_shards()
    start(engine, "one", 5)
    start(engine, "two", 5)
    with pytest.raises(InboxFull):
        start(engine, "three", 5)
    arn = "arn:aws:states:us-east-1:123456789012:execution:sleepy:one"
    engine.submit(StopExecution(arn, None, None), throttle=False)  # tied to a dispatch the outbox bounds
    assert engine.tick(1_700_000_000_000) == 3


def test_a_parent_stopped_while_its_sync_child_starts_stops_the_child_too(store):
    child_arn = "arn:aws:states:us-east-1:123456789012:stateMachine:kid-machine"
    parent_arn = "arn:aws:states:us-east-1:123456789012:stateMachine:parent"
    store.create_state_machine(StateMachineRecord(child_arn, "kid-machine", "STANDARD", json.dumps(
        {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}), "role", "r1", 0, 0, {},
        {}))
    store.create_state_machine(StateMachineRecord(parent_arn, "parent", "STANDARD", json.dumps(
        {"StartAt": "Run", "States": {"Run": {
            "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2", "End": True,
            "Parameters": {"StateMachineArn": child_arn, "Name": "kid", "Input": {}}}}}), "role", "r1", 0, 0, {},
        {}))
    clock = VirtualClock()
    engine = make_engine(store, clock)
    parent = "arn:aws:states:us-east-1:123456789012:execution:parent:p"
    engine.submit(StartExecution(parent, parent_arn, "p", "r1", "role", "{}"))
    engine.tick(clock.now_ms)  # the parent schedules the nested start
    engine.submit(StopExecution(parent, "User", "stop"))
    engine.tick(clock.now_ms)  # the child starts in the same batch as the parent's stop
    for _ in range(5):
        clock.now_ms += 1_000
        engine.tick(clock.now_ms)
    assert status(store, parent)["status"] == "ABORTED"
    assert status(store, "arn:aws:states:us-east-1:123456789012:execution:kid-machine:kid")["status"] == "ABORTED"


LOOPING = "arn:aws:states:us-east-1:123456789012:stateMachine:looping"
LOOP = {"StartAt": "A", "States": {
    "A": {"Type": "Pass", "Next": "B"},
    "B": {"Type": "Choice", "Choices": [{"Variable": "$.never", "IsPresent": True, "Next": "Done"}], "Default": "A"},
    "Done": {"Type": "Succeed"}}}


def test_a_looping_execution_waits_behind_itself_while_another_one_finishes(store):
    store.create_state_machine(StateMachineRecord(LOOPING, "looping", "STANDARD", json.dumps(LOOP), "role", "r1",
                                                  0, 0, {}, {}))
    clock = VirtualClock()
    engine = Engine(store, clock=clock, limits=Limits(apply_states_max=10))
    engine.acquire_all_shards()
    loop_arn = "arn:aws:states:us-east-1:123456789012:execution:looping:runaway"
    runaway = engine.submit(StartExecution(loop_arn, LOOPING, "runaway", "r1", "role", "{}"))
    _, ordinary = start(engine, "beside", 0)  # queued behind the runaway's start
    for _ in range(3):
        engine.tick(clock.now_ms)
    assert ordinary.done() and runaway.done()  # both starts committed while the loop runs on
    assert status(store, loop_arn)["status"] == "RUNNING"
    arn = "arn:aws:states:us-east-1:123456789012:execution:sleepy:beside"
    assert status(store, arn)["status"] == "SUCCEEDED"
    history = [event["type"] for event in store.read_history(loop_arn, 0, 1000, False)]
    assert history.count("PassStateEntered") + history.count("ChoiceStateEntered") <= 3 * 10  # a slice a tick


def test_a_heartbeat_in_the_tick_its_old_deadline_falls_due_moves_the_deadline(store):
    """The heartbeat lands first (commands before timers); the deadline taken from the window is the old one, set
    again since: it does not fire, and the new one fires at its own time."""
    activity = "arn:aws:states:us-east-1:123456789012:activity:beating"
    machine = f"{MACHINE}-beats"
    store.create_state_machine(StateMachineRecord(machine, "beats", "STANDARD", json.dumps({
        "StartAt": "T", "States": {"T": {"Type": "Task", "Resource": activity, "HeartbeatSeconds": 10,
                                         "End": True}}}), "role", "r1", 0, 0, {}, {}))
    clock = VirtualClock()
    engine = make_engine(store, clock)
    engine.note_activity(activity, True)
    arn = "arn:aws:states:us-east-1:123456789012:execution:beats:b"
    engine.submit(StartExecution(arn, machine, "b", "r1", "role", "{}"))
    engine.tick(clock.now_ms)
    scheduled = next(event["id"] for event in store.read_history(arn, 0, 100, False)
                     if event["type"] == "ActivityScheduled")
    engine.submit(StartAttempt(arn, scheduled, "worker"))
    engine.tick(clock.now_ms)
    clock.now_ms += 10_000
    beat = engine.submit(Heartbeat(arn, scheduled))
    engine.tick(clock.now_ms)
    assert beat.result(timeout=0) is True
    assert status(store, arn)["status"] == "RUNNING"
    clock.now_ms += 9_999
    engine.tick(clock.now_ms)
    assert status(store, arn)["status"] == "RUNNING"
    clock.now_ms += 1
    engine.tick(clock.now_ms)
    assert status(store, arn)["status"] == "FAILED"  # the heartbeat's deadline, 10 s after it


def test_a_map_run_redriven_as_often_as_aws_allows_fails_its_map_with_states_runtime(store, monkeypatch):
    from statewright.decider import map_runs

    monkeypatch.setattr(map_runs, "REDRIVES_MAX", 1)  # AWS's is 1,000
    machine = f"{MACHINE}-fanning"
    store.create_state_machine(StateMachineRecord(machine, "fanning", "STANDARD", json.dumps({
        "StartAt": "M", "States": {"M": {
            "Type": "Map", "ItemProcessor": {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                                             "StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Broke"}}},
            "End": True}}}), "role", "r1", 0, 0, {}, {}))
    clock = VirtualClock()
    engine = make_engine(store, clock)
    arn = f"{MACHINE.replace(':stateMachine:', ':execution:')}-fanning:p"

    def settle() -> dict:
        for _ in range(10):
            clock.now_ms += 1_000
            engine.tick(clock.now_ms)
        return status(store, arn)

    engine.submit(StartExecution(arn, machine, "p", "r1", "role", "[1]"))
    assert settle()["error"] == "States.ExceedToleratedFailureThreshold"
    engine.submit(RedriveExecution(arn))
    assert settle()["error"] == "States.ExceedToleratedFailureThreshold"  # the run's first redrive
    engine.submit(RedriveExecution(arn))
    described = settle()
    assert (described["status"], described["error"]) == ("FAILED", "States.Runtime")
    assert "redriven 1 times" in described["cause"]


def test_a_map_still_reading_its_items_when_a_sibling_fails_is_abandoned_and_its_run_stopped(store):
    """The Map waits on its ItemReader's first page (no integration answers here) when the other branch fails:
    the Parallel fails, and the Map, abandoned with its read under way, stops its run."""
    machine = f"{MACHINE}-reading"
    reader = {"Resource": "arn:aws:states:::s3:getObject", "ReaderConfig": {"InputType": "JSONL"},
              "Parameters": {"Bucket": "b", "Key": "k"}}
    store.create_state_machine(StateMachineRecord(machine, "reading", "STANDARD", json.dumps({
        "StartAt": "Both", "States": {"Both": {"Type": "Parallel", "End": True, "Branches": [
            {"StartAt": "M", "States": {"M": {
                "Type": "Map", "ItemReader": reader, "End": True,
                "ItemProcessor": {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                                  "StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}}}},
            {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 1, "Next": "F"},
                                        "F": {"Type": "Fail", "Error": "Sibling"}}}]}}}), "role", "r1", 0, 0, {}, {}))
    clock = VirtualClock()
    engine = make_engine(store, clock)
    arn = f"{MACHINE.replace(':stateMachine:', ':execution:')}-reading:p"
    engine.submit(StartExecution(arn, machine, "p", "r1", "role", "{}"))
    for _ in range(10):
        clock.now_ms += 500
        engine.tick(clock.now_ms)
    described = status(store, arn)
    assert (described["status"], described["error"]) == ("FAILED", "Sibling")
    (run_arn,) = [row.arn for row in store.list_executions(arn, None, 10, None).items]
    assert status(store, run_arn)["status"] == "ABORTED"  # the run was stopped with its Map
