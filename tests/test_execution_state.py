"""The stored mutable state, pure: every blob version loads to the same meaning, the current one round-trips, and a
copy is independent of the state it was taken from."""

from __future__ import annotations

import sqlite3
from dataclasses import fields
from pathlib import Path

import orjson
import pytest

from statewright.decider.execution import ROW_FIELDS, SCHEMA_VERSION, ExecutionState, FanOut, Flow, TaskAttempt
from statewright.store.shared import with_row_fields

FIXTURE_DB = Path(__file__).parent / "fixtures" / "state_v0" / "statewright.db"


def v0_blobs() -> dict[str, bytes]:
    """Every execution row of the checked-in data directory written by version-0 code."""
    with sqlite3.connect(f"file:{FIXTURE_DB}?immutable=1", uri=True) as db:  # immutable: no -shm/-wal beside it
        return {arn: blob for arn, blob in db.execute("SELECT arn, state FROM executions")}


def as_v0(state: ExecutionState) -> dict:
    """The typed state written back in version 0's shape, to compare meaning with a version-0 blob."""
    def flow(f: Flow) -> dict:
        fan = None if f.fan is None else {
            "kind": f.fan.kind, "inputs": f.fan.inputs, "results": f.fan.results, "next": f.fan.next_index,
            "pending": f.fan.running, "max": f.fan.max_concurrency, "raw": f.fan.state_input,
            "started": f.fan.started_id}
        task = None if f.task is None else {
            "scheduled_id": f.task.scheduled_id, "started": f.task.started, "heartbeat_ms": f.task.heartbeat_ms,
            "last_beat_ms": f.task.last_beat_ms, "timers": f.task.timers, "submitted": f.task.submitted,
            "child": f.task.child}
        return {"m": f.machine, "parent": f.parent, "slot": f.slot, "state": f.state, "data": f.data,
                "entered_id": f.entered_id, "entered_ms": f.entered_ms, "timer": f.timer, "retries": f.retries,
                "fan": fan, "vars": f.variables, "attempts": f.attempts, "task": task, "entered_prev": f.entered_prev}

    stored = {field.name: getattr(state, field.name) for field in fields(state) if field.name != "trace"}
    stored["flows"] = {flow_id: flow(f) for flow_id, f in state.flows.items()}
    return stored


def without_task_inputs(v0: dict) -> dict:
    """Version 0 kept a task's input in its record as well as in its dispatch; the dispatch alone needs it. It knew
    no versions, aliases, test cases, redrives, start tokens or map runs: its executions ran on the latest
    revision, unmocked, and closed ones kept nothing to redrive."""
    v0.update({"redrive_count": 0, "redrive_ms": None, "redrive_tokens": [], "halted": {}, "start_token": None,
               "processor": None, "run": None})
    v0.setdefault("version_arn", None)
    v0.setdefault("alias_arn", None)
    v0.setdefault("test_case", None)
    for flow in v0["flows"].values():
        if flow["task"] is not None:
            flow["task"].pop("input")
            flow["task"].setdefault("submitted", False)
            flow["task"].setdefault("child", None)
    return v0


@pytest.mark.parametrize("arn", sorted(v0_blobs()))
def test_a_version_0_blob_loads_to_the_same_meaning_and_round_trips(arn):
    blob = v0_blobs()[arn]
    state = ExecutionState.from_blob(blob)
    assert as_v0(state) == without_task_inputs(orjson.loads(blob))
    again = state.to_blob()
    assert again.startswith(b'{"v":%d,' % SCHEMA_VERSION)
    assert ExecutionState.from_blob(again) == state


def test_the_fixture_holds_every_kind_of_record():
    flows = [flow for blob in v0_blobs().values() for flow in ExecutionState.from_blob(blob).flows.values()]
    assert any(flow.fan is not None and flow.fan.kind == "map" for flow in flows)
    assert any(flow.fan is not None and flow.fan.kind == "parallel" for flow in flows)
    assert any(flow.task is not None and flow.task.child is not None for flow in flows)
    assert any(flow.task is not None and flow.task.heartbeat_ms is not None for flow in flows)
    assert any(flow.retries and flow.timer for flow in flows)
    assert any(flow.variables for flow in flows)


def test_a_version_0_flow_without_entered_prev_or_with_a_half_made_task_record():
    blob = orjson.loads(next(iter(v0_blobs().values())))
    blob["status"], blob["flows"] = "RUNNING", {"": {
        "m": 0, "parent": None, "slot": 0, "state": "T", "data": {}, "entered_id": 2, "entered_ms": 5,
        "timer": None, "retries": {}, "fan": None, "vars": {}, "attempts": 1, "task": {"scheduled_id": 3}}}
    flow = ExecutionState.from_blob(orjson.dumps(blob)).flows[""]
    assert (flow.entered_prev, flow.task, flow.attempts) == (0, None, 1)


def full_state() -> ExecutionState:
    """Every field set to something other than its default."""
    fan = FanOut("map", [1, 2, 3], [None, {"r": 1}, None], 2, 1, 2, {"items": [1, 2, 3]}, 3, {"1": '{"r": 1}'})
    task = TaskAttempt(9, True, 60_000, 1_000_123, ["timeout-9", "heartbeat-9"], True,
                       "arn:aws:states:us-east-1:123456789012:execution:child:c")
    return ExecutionState(
        "arn:aws:states:us-east-1:123456789012:execution:m:e", "arn:aws:states:us-east-1:123456789012:stateMachine:m",
        "e", "rev", "arn:aws:iam::123456789012:role/r", '{"items": [1, 2, 3]}', 1_000_000, 5, "RUNNING", 7, "o",
        "E", "c", 12, 10, 4,
        {"": Flow(0, None, 0, "Each", {"items": [1, 2, 3]}, '{"items": [1, 2, 3]}', 2, 1_000_000, 1, None, {}, 0,
                  {"x": 1}, fan),
         "2.1": Flow(1, "", 1, "Ask", 2, None, 8, 1_000_001, 7, "retry-8-1", {"0": 1}, 2, {"y": [True]}, None,
                     task)},
        {"token": "t", "pattern": "sync:2"}, {"timeout-9": 2_000_000, "retry-8-1": 1_000_500})


def test_the_current_version_round_trips_every_field():
    state = full_state()
    assert ExecutionState.from_blob(state.to_blob()) == state


def beside(state: ExecutionState) -> bytes:
    """``state`` as a store whose row holds its fields reads it back: the blob written beside the row, with the
    row's columns put in front."""
    return with_row_fields(state.to_blob(beside_row=True), state.arn, state.listed_under, state.name,
                           state.start_ms, state.shard_id, state.status, state.version)


def test_a_blob_written_beside_its_row_leaves_out_what_the_row_holds_and_reads_back_whole():
    state = full_state()
    written = orjson.loads(state.to_blob(beside_row=True))
    assert not {*ROW_FIELDS, "state_machine_arn"} & written.keys()
    assert ExecutionState.from_blob(beside(state)) == state


def test_a_map_run_child_keeps_its_state_machine_in_the_blob_beside_a_row_listed_under_its_run():
    state = full_state()
    state.parent = {**state.parent, "map_run": "arn:aws:states:us-east-1:123456789012:mapRun:m/Each:run"}
    assert state.listed_under != state.state_machine_arn
    assert orjson.loads(state.to_blob(beside_row=True))["state_machine_arn"] == state.state_machine_arn
    assert ExecutionState.from_blob(beside(state)) == state


def test_a_whole_blob_read_beside_its_row_keeps_its_own_fields():
    """A row written before its store left the fields out: the blob's own values are read, not the columns'."""
    state = full_state()
    assert ExecutionState.from_blob(with_row_fields(state.to_blob(), "other", "other", "other", 0, 0, "X", 0)) == state


def test_the_current_version_as_written():
    """The stored layout, spelled out: a change to it must come with a new version and a loader (except a field
    appended to a record with a default: rows written before it load with the default)."""
    assert orjson.loads(full_state().to_blob())["flows"] == {
        "": [0, None, 0, "Each", {"items": [1, 2, 3]}, '{"items": [1, 2, 3]}', 2, 1_000_000, 1, None, {}, 0, {"x": 1},
             ["map", [1, 2, 3], [None, {"r": 1}, None], 2, 1, 2, {"items": [1, 2, 3]}, 3, {"1": '{"r": 1}'}], None],
        "2.1": [1, "", 1, "Ask", 2, None, 8, 1_000_001, 7, "retry-8-1", {"0": 1}, 2, {"y": [True]}, None,
                [9, True, 60_000, 1_000_123, ["timeout-9", "heartbeat-9"], True,
                 "arn:aws:states:us-east-1:123456789012:execution:child:c", None, 0, False]]}


def test_a_task_record_written_before_aws_jobs_loads_without_one():
    blob = orjson.loads(full_state().to_blob())
    blob["flows"]["2.1"][-1] = blob["flows"]["2.1"][-1][:7]
    task = ExecutionState.from_blob(orjson.dumps(blob)).flows["2.1"].task
    assert task.job is None and task.polls == 0 and not task.polling and task.child.endswith(":child:c")


def test_a_version_2_blob_loads_with_no_kept_texts():
    """Version 2 rows have no text after the data, and fan-outs no texts."""
    blob = orjson.loads(full_state().to_blob())
    blob["v"] = 2
    for row in blob["flows"].values():
        del row[5]
    blob["flows"][""][-2] = blob["flows"][""][-2][:8]
    state = ExecutionState.from_blob(orjson.dumps(blob))
    root, child = state.flows[""], state.flows["2.1"]
    assert (root.text, root.fan.texts, child.text) == (None, {}, None)
    assert (root.entered_id, child.task.scheduled_id) == (2, 9)


def test_a_newer_version_is_refused():
    blob = orjson.loads(full_state().to_blob())
    blob["v"] = SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match="newer"):
        ExecutionState.from_blob(orjson.dumps(blob))


def test_a_copy_shares_no_record_or_container_the_decider_changes():
    state = full_state()
    before = state.to_blob()
    clone = state.copy()
    assert clone == state
    root, child = clone.flows[""], clone.flows["2.1"]
    root.variables["x"] = 2
    root.fan.results[0] = "done"
    root.fan.running += 1
    root.fan.texts["0"] = "[]"
    child.retries["0"] = 2
    child.task.timers.append("heartbeat-9")
    child.task.started = False
    clone.timers.clear()
    clone.parent["token"] = "other"
    del clone.flows["2.1"]
    assert state.to_blob() == before
