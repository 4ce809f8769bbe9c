"""Redrive on the pure decider, property-based (hypothesis, derandomized): for random definitions of Pass, Task,
Parallel and Map states whose tasks fail (or whose execution is stopped) somewhere, a redrive keeps the old
history as it was and appends to it, runs no task that had succeeded again, enters no state that had succeeded
unless it is downstream of the failure (the simulator's checker), and ends with the output of a run that never
failed."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as label
from hypothesis import strategies as st

from statewright import decider
from statewright.asl.definition import parse_definition
from statewright.decider.execution import ABORTED, FAILED, SUCCEEDED, ExecutionState
from statewright.decider.outcomes import AttemptFailed, AttemptSucceeded
from statewright.decider.step import Services
from statewright.sim.checkers import history_problems, redrive_problems

START_MS = 1_700_000_000_000
ACTIVITY = "arn:aws:states:us-east-1:123456789012:activity:work"
SERVICES = Services(lambda arn, scheduled_id, attempt: f"token-{scheduled_id}", {ACTIVITY}, apply_states_max=4)
CI = settings(derandomize=True, deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
ITEMS = [0, 1, 2]


@st.composite
def chains(draw, names: itertools.count, depth: int = 0) -> dict:
    """A States collection: a chain of Pass, Task, Parallel and Map states (fan-outs nest up to two deep)."""
    kinds = ["Pass", "Task", "Task"] + (["Parallel", "Map"] if depth < 2 else [])
    plan = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=4))
    state_names = [f"{kind}{next(names)}" for kind in plan]
    states = {}
    for index, (kind, name) in enumerate(zip(plan, state_names, strict=True)):
        flow = {"Next": state_names[index + 1]} if index + 1 < len(plan) else {"End": True}
        if kind == "Pass":
            states[name] = {"Type": "Pass", "Result": name, "ResultPath": f"$.{name}", **flow}
        elif kind == "Task":
            states[name] = {"Type": "Task", "Resource": ACTIVITY, "ResultPath": f"$.{name}", **flow}
        elif kind == "Parallel":
            branches = draw(st.lists(chains(names, depth + 1), min_size=1, max_size=3))
            states[name] = {"Type": "Parallel", "Branches": branches, "ResultPath": f"$.{name}", **flow}
        else:
            states[name] = {"Type": "Map", "ItemsPath": "$.items", "ItemSelector": {"item.$": "$$.Map.Item.Value",
                                                                                    "items.$": "$.items"},
                            "MaxConcurrency": draw(st.integers(0, 2)), "ItemProcessor": draw(chains(names, depth + 1)),
                            "ResultPath": f"$.{name}", **flow}
    return {"StartAt": state_names[0], "States": states}


definitions = st.deferred(lambda: chains(itertools.count(1))).map(json.dumps)


def task_positions(machine: dict) -> int:
    """How many task attempts succeed in a run that never fails: each Task once, a Map's once per item."""
    count = 0
    for state in machine["States"].values():
        if state["Type"] == "Task":
            count += 1
        elif state["Type"] == "Parallel":
            count += sum(task_positions(branch) for branch in state["Branches"])
        elif state["Type"] == "Map":
            count += len(ITEMS) * task_positions(state["ItemProcessor"])
    return count


class Run:
    """An execution driven through the decider: every pending attempt is started and answered, in order."""

    def __init__(self, definition_text: str) -> None:
        self.definition = parse_definition(definition_text)
        execution = ExecutionState("arn:aws:states:us-east-1:123456789012:execution:m:e", "arn:aws:states:us-east-"
                                   "1:123456789012:stateMachine:m", "e", "rev", "arn:aws:iam::123456789012:role/r",
                                   json.dumps({"items": ITEMS}), START_MS, 0)
        self.now_ms = START_MS
        self.events: list[dict] = []
        self.state = self._apply(decider.start(execution, self.definition, START_MS, SERVICES))

    def _apply(self, decision: decider.Decision) -> ExecutionState:
        self.events += decision.effects.events
        self.state = ExecutionState.from_blob(decision.state.to_blob())  # as stored, and read back
        return self.state

    def to_end(self, failures: list[bool], stop_after: int | None = None) -> None:
        """Answer attempts until the execution closes: the n-th fails if ``failures[n]`` (later ones succeed);
        with ``stop_after`` the execution is stopped after that many answers."""
        for answered in itertools.count():
            if not self.state.is_open:
                return
            if answered == stop_after:
                self._apply(decider.stop(self.state, "Stopped", None, self.now_ms))
                return
            self.now_ms += 1
            pending = decider.pending_attempts(self.state)
            if not pending:  # a continuation timer (a flow that did its share of one step)
                timer_id = min(self.state.timers, key=self.state.timers.get)
                self._apply(decider.fire_timer(self.state, self.definition, timer_id, self.now_ms, SERVICES))
                continue
            scheduled_id = min(pending)
            self._apply(decider.start_attempt(self.state, self.definition, scheduled_id, None, self.now_ms))
            fails = answered < len(failures) and failures[answered]
            result = AttemptFailed("Broken", "it broke") if fails else AttemptSucceeded(self._echo(scheduled_id))
            self._apply(decider.complete_attempt(self.state, self.definition, scheduled_id, result, self.now_ms,
                                                 SERVICES))

    def _echo(self, scheduled_id: int) -> str:
        """A task's result: from the input it was scheduled with (its Map item), so a run's output does not depend
        on which attempt gave it."""
        scheduled = next(event for event in self.events if event["id"] == scheduled_id)
        return json.dumps({"of": json.loads(scheduled["activityScheduledEventDetails"]["input"]).get("item")})

    def redrive(self) -> None:
        self.now_ms += 1
        self._apply(decider.redrive(self.state, self.definition, self.now_ms, None, {}, SERVICES))


@pytest.mark.slow  # seconds of examples: not in the fast tier
@CI
@given(definition=definitions, failures=st.lists(st.booleans(), min_size=1, max_size=8),
       stop_after=st.none() | st.integers(0, 6))
def test_a_redrive_keeps_the_history_reruns_only_what_did_not_succeed_and_ends_as_a_run_without_failures(
        definition, failures, stop_after):
    run = Run(definition)
    run.to_end(failures, stop_after)
    if run.state.status == SUCCEEDED:
        label("succeeded without a redrive")
        return
    assert run.state.status in (FAILED, ABORTED)
    before = list(run.events)
    run.redrive()
    run.to_end([])
    label(f"redriven from {before[-1]['type']}")
    assert run.state.status == SUCCEEDED
    assert run.events[:len(before)] == before
    assert run.events[len(before)]["type"] == "ExecutionRedriven"
    assert history_problems("e", run.events, closed=True) == []
    assert redrive_problems("e", run.events, json.loads(definition)) == []
    succeeded = [event for event in run.events if event["type"] == "ActivitySucceeded"]
    assert len(succeeded) == task_positions(json.loads(definition)), "a task that had succeeded ran again"
    clean = Run(definition)
    clean.to_end([])
    assert json.loads(run.state.output) == json.loads(clean.state.output)


def _events(*specs: tuple) -> list[dict]:
    """A history from (type, details key, details) specs, each event following the one before."""
    return [{"id": index, "previousEventId": index - 1, "type": kind, **({key: details} if key else {})}
            for index, (kind, key, details) in enumerate(specs, 1)]


MAP_WITH_RETRY = {"StartAt": "Map1", "States": {"Map1": {
    "Type": "Map", "Retry": [{"ErrorEquals": ["States.ALL"]}], "End": True,
    "ItemProcessor": {"StartAt": "T", "States": {"T": {"Type": "Pass", "End": True}}}}}}


def _map_history(rerun_before_a_failure: bool) -> list[dict]:
    entered = ("MapStateEntered", "stateEnteredEventDetails", {"name": "Map1"})
    started = ("MapStateStarted", "mapStateStartedEventDetails", {"length": 2})

    def iteration(kind: str, index: int) -> tuple:
        return (f"MapIteration{kind}", f"mapIteration{kind}EventDetails", {"name": "Map1", "index": index})
    retried = [iteration("Started", 0)] if rerun_before_a_failure else [iteration("Failed", 1), started]
    return _events(("ExecutionStarted", None, None), entered, started, iteration("Started", 0),
                   iteration("Succeeded", 0), iteration("Started", 1), ("ExecutionTimedOut", None, None),
                   ("ExecutionRedriven", "executionRedrivenEventDetails", {"redriveCount": 1}), entered, started,
                   iteration("Started", 1), *retried, iteration("Started", 0), iteration("Succeeded", 0),
                   iteration("Started", 1), iteration("Succeeded", 1),
                   ("MapStateExited", "stateExitedEventDetails", {"name": "Map1"}),
                   ("ExecutionSucceeded", None, None))


def test_a_map_retried_after_a_redrive_may_run_every_iteration_again():
    assert redrive_problems("e", _map_history(rerun_before_a_failure=False), MAP_WITH_RETRY) == []
    assert redrive_problems("e", _map_history(rerun_before_a_failure=True), MAP_WITH_RETRY) == [
        "e: redrive 1 ran iterations [0] of Map1 again, which had succeeded"]
