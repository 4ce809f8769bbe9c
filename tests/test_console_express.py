"""The console's ring of Express executions, fed as the engine's history edge feeds it (fast tier)."""

from statewright.console import ExpressRing

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:quick"


def run(name: str, closing: str = "ExecutionSucceeded") -> tuple:
    arn = f"arn:aws:states:us-east-1:123456789012:express:quick:{name}:0000"
    return (MACHINE, arn, 0, [
        {"id": 1, "type": "ExecutionStarted", "timestamp": 1_000, "executionStartedEventDetails": {"input": "{}"}},
        {"id": 2, "type": closing, "timestamp": 3_000, "flow": "x",
         "executionSucceededEventDetails": {"output": '"done"'}}], None)


def test_the_ring_keeps_the_last_n_closed_executions_of_a_state_machine_newest_first():
    ring = ExpressRing(2)
    ring.offer([run("one"), run("two")])
    ring.offer([run("three")])
    kept = ring.recent(MACHINE)
    assert [execution["name"] for execution in kept] == ["three", "two"]
    assert kept[0]["status"] == "SUCCEEDED" and kept[0]["output"] == '"done"' and kept[0]["stopDate"] == 3.0
    whole = ring.execution(kept[0]["executionArn"])
    assert [event["type"] for event in whole["events"]] == ["ExecutionStarted", "ExecutionSucceeded"]
    assert "flow" not in whole["events"][1]  # the engine's own bookkeeping is not shown
    assert ring.execution(run("one")[1]) is None  # gone from its ring


def test_a_ring_of_size_zero_keeps_and_gathers_nothing():
    ring = ExpressRing(0)
    ring.offer([run("one")])
    assert ring.recent(MACHINE) == []


def test_an_execution_still_running_is_not_listed_and_standard_executions_are_passed_over():
    ring = ExpressRing(5)
    started = run("running")
    ring.offer([(started[0], started[1], 0, started[3][:1], None),
                (MACHINE, "arn:aws:states:us-east-1:123456789012:execution:quick:standard", 0, started[3], None)])
    assert ring.recent(MACHINE) == []
