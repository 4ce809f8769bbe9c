"""API handlers keep the event loop free: their store calls run on the service's store threads.

The real ASGI app on a real SQLite store; one store method is wrapped to block until the test lets it go. While
it blocks, another request must be answered: had the handler called the store on the loop, nothing else could
run, the blocked read would give up after GATE_S, and the test would fail on ``released``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from asgi import ACCOUNT, build, call, close
from server import ROLE_ARN

GATE_S = 30  # only breaks a deadlock: a healthy run releases the gate at once
REGION = "us-east-1"
MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:gated"
ACTIVITY = f"arn:aws:states:{REGION}:{ACCOUNT}:activity:gated"
PASS = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})


class Gate:
    """Wraps a store method: the first call blocks until ``release``; later calls go straight through."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self.method = method
        self.entered = threading.Event()
        self.release = threading.Event()
        self.released: bool | None = None
        self.threads: list[str] = []

    def __call__(self, *args: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        if not self.entered.is_set():
            self.entered.set()
            self.released = self.release.wait(GATE_S)
        return self.method(*args)


@pytest.fixture
def app(tmp_path):
    app = build(tmp_path)
    yield app
    close(app)


def gate(app, method: str) -> Gate:
    store = app.service.store
    wrapper = Gate(getattr(store, method))
    setattr(store, method, wrapper)  # handlers look the method up on the store at every call
    return wrapper


CASES = {
    "DescribeExecution": ("load_execution", {"executionArn": MACHINE.replace("stateMachine", "execution") + ":x"},
                          "ExecutionDoesNotExist"),
    "GetExecutionHistory": ("load_execution", {"executionArn": MACHINE.replace("stateMachine", "execution") + ":x"},
                            "ExecutionDoesNotExist"),
    "StartExecution": ("get_state_machine", {"stateMachineArn": MACHINE}, "StateMachineDoesNotExist"),
    "ListExecutions": ("get_state_machine", {"stateMachineArn": MACHINE}, "StateMachineDoesNotExist"),
    "DescribeStateMachine": ("get_state_machine", {"stateMachineArn": MACHINE}, "StateMachineDoesNotExist"),
    "CreateStateMachine": ("create_state_machine", {"name": "gated", "definition": PASS, "roleArn": ROLE_ARN}, ""),
    "ListTagsForResource": ("get_state_machine", {"resourceArn": MACHINE}, "ResourceNotFound"),
    "CreateActivity": ("create_activity", {"name": "gated"}, ""),
}


@pytest.mark.parametrize("operation", sorted(CASES))
def test_a_blocked_store_call_leaves_the_loop_free(app, operation):
    method, params, error = CASES[operation]
    blocked = gate(app, method)

    async def scenario() -> tuple[int, dict]:
        pending = asyncio.ensure_future(call(app, operation, params))
        await asyncio.to_thread(blocked.entered.wait, GATE_S)
        status, body = await call(app, "ListActivities", {})  # answered while the other one's store call blocks
        assert (status, body) == (200, {"activities": []})
        assert not pending.done()
        blocked.release.set()
        return await pending

    status, body = asyncio.run(scenario())
    assert blocked.released, "the store call blocked the event loop"
    assert blocked.threads[0].startswith("statewright-api-store")
    assert body.get("__type", "").endswith(error) if error else status == 200


def test_a_cached_state_machine_is_answered_without_suspending(app):
    reads = gate(app, "get_state_machine")
    reads.entered.set()  # no blocking here: only count the reads

    async def scenario() -> None:
        status, _ = await call(app, "CreateStateMachine", {"name": "gated", "definition": PASS, "roleArn": ROLE_ARN})
        assert status == 200
        first = await app.service.state_machine(MACHINE)  # a miss: read on a store thread
        hit = app.service.state_machine(MACHINE)
        with pytest.raises(StopIteration) as done:
            hit.send(None)  # finishes in its first step: no await on another thread
        assert done.value.value == first
        assert first is not None and first.arn == MACHINE

    asyncio.run(scenario())
    assert len(reads.threads) == 1


def test_concurrent_misses_share_one_read_and_a_forget_drops_a_read_in_flight(app):
    blocked = gate(app, "get_state_machine")

    async def scenario() -> None:
        first = [asyncio.ensure_future(app.service.state_machine(MACHINE)) for _ in range(3)]
        await asyncio.to_thread(blocked.entered.wait, GATE_S)
        app.service.forget_state_machine(MACHINE)  # as an update does while the read is in flight
        blocked.release.set()
        assert await asyncio.gather(*first) == [None, None, None]
        await app.service.state_machine(MACHINE)  # the read from before the forget was not cached

    asyncio.run(scenario())
    assert len(blocked.threads) == 2


def test_test_state_evaluates_off_the_loop_on_its_own_threads(app, monkeypatch):
    from statewright.api import test_state as test_state_api

    blocked = Gate(test_state_api.start_test)
    monkeypatch.setattr(test_state_api, "start_test", blocked)
    heavy = {"Type": "Pass", "QueryLanguage": "JSONata", "End": True,
             "Output": "{% $reduce([1..400000], function($a, $b) { $a + $b }) %}"}

    async def scenario() -> tuple[int, dict]:
        pending = asyncio.ensure_future(call(app, "TestState", {"definition": json.dumps(heavy), "roleArn": ROLE_ARN}))
        await asyncio.to_thread(blocked.entered.wait, GATE_S)
        status, body = await call(app, "ListStateMachines", {})  # answered while TestState evaluates
        assert (status, body) == (200, {"stateMachines": []})
        assert not pending.done()
        blocked.release.set()
        return await pending

    status, body = asyncio.run(scenario())
    assert blocked.released, "TestState's evaluation blocked the event loop"
    assert blocked.threads[0].startswith("statewright-api-evaluation")
    assert (status, body["status"], body["error"]) == (200, "FAILED", "States.QueryEvaluationError")
    assert "evaluation budget of one transition step ran out" in body["cause"]
