"""One engine, driven by tick on a virtual clock over a real SQLite store that fails its Nth commit (before writing,
after writing, or on a version check) or its Nth read: every execution still completes exactly once with the right
output, and nothing waits for a restart (the engine is never re-created).
After an unknown outcome the engine reads back the rows it wrote: a StartAttempt that did land is answered as
started, so no attempt is left started with no worker told."""

from __future__ import annotations

import json
import random
from collections import Counter
from concurrent.futures import Future

import pytest

from statewright.decider.outcomes import AttemptSucceeded
from statewright.engine.commands import CompleteAttempt, EngineUnavailable, StartAttempt, StartExecution
from statewright.engine.edges import Edges
from statewright.engine.engine import Engine
from statewright.sim.checkers import Ledger, check_all
from statewright.sim.faults import Faults, FaultyStore
from statewright.store.base import ActivityRecord, Dispatch, StateMachineRecord
from statewright.store.payloads import Histories
from statewright.store.sqlite import SqliteStore

ARN = "arn:aws:states:us-east-1:123456789012"
ACTIVITY = f"{ARN}:activity:work"
MACHINES = {
    "sleepy": {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 2, "Next": "P"},
                                          "P": {"Type": "Pass", "Result": "slept", "End": True}}},
    "worked": {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": ACTIVITY, "TimeoutSeconds": 30,
                                                "ResultPath": "$.got", "End": True}}},
    "both": {"StartAt": "B", "States": {"B": {"Type": "Parallel", "End": True, "Branches": [
        {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 1, "End": True}}},
        {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": ACTIVITY, "TimeoutSeconds": 30,
                                          "End": True}}}]}}},
    "child": {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 1, "Next": "P"},
                                         "P": {"Type": "Pass", "Result": {"from": "child"}, "End": True}}},
    "parent": {"StartAt": "Run", "States": {"Run": {
        "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2", "OutputPath": "$.Output",
        "Parameters": {"StateMachineArn": f"{ARN}:stateMachine:child", "Input": {}}, "End": True}}},
}
EXPECTED = {"sleepy": "slept", "worked": {"n": 0, "got": {"done": True}}, "both": [{"n": 0}, {"done": True}],
            "parent": {"from": "child"}}
START_MS = 1_767_225_600_000


class NthCall(Faults):
    """Fires one named fault, on its Nth chance only."""

    def __init__(self, name: str, n: int) -> None:
        super().__init__(random.Random(0), [name], 1.0)
        self.name, self.n = name, n
        self.calls: Counter[str] = Counter()

    def fire(self, name: str, rate: float | None = None) -> bool:
        if name != self.name:
            return False
        self.calls[name] += 1
        if self.calls[name] != self.n:
            return False
        self.injected[name] += 1
        return True


class Driver:
    def __init__(self, store: FaultyStore) -> None:
        self.store = store
        self.now_ms = START_MS
        self.dispatches: list[Dispatch] = []
        self.engine = Engine(store, clock=lambda: self.now_ms, edges=Edges(dispatch=self.dispatches.append))
        self.engine.acquire_all_shards()
        self.ledger = Ledger()
        self.starts: dict[str, tuple[StartExecution, Future]] = {}
        self.work: list[tuple[str, Dispatch, Future]] = []  # (step, its dispatch, reply)

    def start(self, command: StartExecution) -> None:
        self.starts[command.arn] = (command, self.engine.submit(command))

    def run(self) -> None:
        for _ in range(2_000):
            worked = self.engine.tick(self.now_ms)
            self.answer_clients()
            self.answer_workers()
            if not worked and not self.dispatches and not self.work:
                if self.all_closed():
                    return
                self.now_ms += 500
        raise AssertionError("the executions did not close")

    def answer_clients(self) -> None:
        for arn, (command, reply) in list(self.starts.items()):
            if not reply.done():
                continue
            if isinstance(reply.exception(), EngineUnavailable):  # a client retries; the start is idempotent
                self.start(command)
            else:
                self.ledger.acknowledged[arn] = reply.result()
                del self.starts[arn]

    def answer_workers(self) -> None:
        dispatches, self.dispatches[:] = list(self.dispatches), []
        for dispatch in dispatches:
            started = self.engine.submit(StartAttempt(dispatch.execution_arn, dispatch.payload["scheduled_id"]),
                                         throttle=False)
            self.work.append(("started", dispatch, started))
        pending = []
        for step, dispatch, reply in self.work:
            if not reply.done():
                pending.append((step, dispatch, reply))
            elif step == "started" and reply.exception() is None:
                self.ledger.started_attempt(dispatch.execution_arn, dispatch.payload["scheduled_id"])
                pending.append(self.complete(dispatch))
            elif step == "completed" and isinstance(reply.exception(), EngineUnavailable):
                pending.append(self.complete(dispatch))  # the worker sends its result again
        self.work = pending

    def complete(self, dispatch: Dispatch) -> tuple[str, Dispatch, Future]:
        command = CompleteAttempt(dispatch.execution_arn, dispatch.payload["scheduled_id"],
                                  AttemptSucceeded('{"done": true}'))
        return "completed", dispatch, self.engine.submit(command, throttle=False)

    def all_closed(self) -> bool:
        return not self.starts and all(json.loads(self.store.inner.load_execution(arn))["status"] != "RUNNING"
                                       for arn in self.ledger.acknowledged)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("fault", ["commit-fails", "outcome-unknown", "version-conflict", "busy"])
def test_every_execution_completes_once_after_the_nth_store_call_fails(tmp_path, fault, n):
    inner = SqliteStore(tmp_path / "db.sqlite", shard_count=4)
    inner.create_activity(ActivityRecord(ACTIVITY, "work", START_MS))
    for name, definition in MACHINES.items():
        inner.create_state_machine(StateMachineRecord(f"{ARN}:stateMachine:{name}", name, "STANDARD",
                                                      json.dumps(definition), "role", "r1", 0, 0, {}, {}))
    faults = NthCall(fault, n)
    driver = Driver(FaultyStore(inner, faults))
    for name in EXPECTED:
        for index in range(3):
            arn = f"{ARN}:execution:{name}:{name}-{index}"
            driver.start(StartExecution(arn, f"{ARN}:stateMachine:{name}", f"{name}-{index}", "r1", "role",
                                        '{"n": 0}'))
    driver.run()
    assert faults.injected[fault] == 1
    assert check_all(Histories(inner, None), driver.ledger, liveness=True) == []
    for arn in driver.ledger.acknowledged:
        state = json.loads(inner.load_execution(arn))
        if ":child:" in arn:
            continue
        assert state["status"] == "SUCCEEDED", (arn, state["error"], state["cause"])
        assert json.loads(state["output"]) == EXPECTED[arn.split(":")[-2]], arn
    inner.close()
