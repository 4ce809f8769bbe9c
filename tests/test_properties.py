"""Property-based tests (hypothesis, derandomized): decider determinism and event-id laws, ResultPath and
template laws, and the timer window's promise that no timer is lost or fired twice."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as label
from hypothesis import strategies as st

from statewright import decider
from statewright.asl.definition import parse_definition
from statewright.asl.errors import StatesError
from statewright.asl.paths import Path, ReferencePath
from statewright.asl.templates import Template
from statewright.decider.execution import ExecutionState
from statewright.engine.limits import Limits
from statewright.engine.scheduler import InTurn
from statewright.engine.timers import WINDOW_MS, TimerWindow, pop_due
from statewright.store.base import TimerRow

START_MS = 1_700_000_000_000
CI = settings(derandomize=True, deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
CI_MORE = settings(CI, max_examples=250)

# -- JSON values

scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(-1e6, 1e6, allow_nan=False) | st.text(
    max_size=8)
# Keys that a path can name in bracket notation; the punctuation JSONPath treats specially is covered by unit tests.
keys = st.text(alphabet="abcxyz_- 019", min_size=1, max_size=5)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner,
                                                                                                 max_size=3),
                           max_leaves=12)
json_objects = st.dictionaries(keys, json_values, max_size=4)


def path_text(steps: list[str | int]) -> str:
    parts = []
    for step in steps:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        elif step.isidentifier():
            parts.append(f".{step}")
        else:
            parts.append(f"['{step}']")
    return "$" + "".join(parts)


# -- ReferencePath write then Path read


@CI
@given(data=json_objects, steps=st.lists(keys, min_size=1, max_size=4), value=json_values)
def test_result_path_write_then_read_gives_the_value_back(data, steps, value):
    before = copy.deepcopy(data)
    text = path_text(steps)
    try:
        out = ReferencePath(text).write(data, value)
    except StatesError:
        # Only allowed when some step on the way exists and is not an object.
        node, blocked = data, False
        for step in steps[:-1]:
            node = node.get(step) if isinstance(node, dict) else None
            if node is not None and not isinstance(node, dict):
                blocked = True
                break
        assert blocked, f"{text} could not be written into {data!r}"
    else:
        assert Path(text).resolve(out) == value
        for key in data:
            if key != steps[0]:
                assert out[key] == data[key]
    assert data == before


@CI
@given(items=st.lists(json_objects, min_size=1, max_size=4), index=st.integers(-4, 3), key=keys, value=json_values)
def test_result_path_write_into_array_element(items, index, key, value):
    data = {"items": items}
    before = copy.deepcopy(data)
    text = path_text(["items", index, key])
    if not -len(items) <= index < len(items):
        try:
            ReferencePath(text).write(data, value)
        except StatesError:
            pass
        else:
            raise AssertionError("writing past the end of an array must fail")
    else:
        out = ReferencePath(text).write(data, value)
        assert Path(text).resolve(out) == value
        assert len(out["items"]) == len(items)
    assert data == before


# -- templates


literal_keys = keys.filter(lambda k: not k.endswith(".$"))
literal_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    literal_keys, inner, max_size=3), max_leaves=12)


@CI
@given(raw=st.dictionaries(literal_keys, literal_values, max_size=5), data=json_values)
def test_literal_only_template_renders_to_an_equal_fresh_value(raw, data):
    template = Template(copy.deepcopy(raw))
    first = template.render(data, {})
    assert first == raw
    if isinstance(first, dict):
        first["__mutated__"] = True  # the next render must not see this
    assert template.render(data, {}) == raw


@CI
@given(raw=st.dictionaries(literal_keys, literal_values, max_size=4), data=json_objects)
def test_template_does_not_mutate_its_input(raw, data):
    fields = {**raw, "copied.$": "$"}
    before = copy.deepcopy(data)
    rendered = Template(fields).render(data, {})
    assert rendered["copied"] == data
    assert data == before


# -- decider: generated machines and drives


@st.composite
def machines(draw):
    """A forward-only machine (it always ends) over inputs shaped like {"n": int, "s": int, "t": timestamp}."""
    count = draw(st.integers(1, 6))
    names = [f"S{i}" for i in range(count)]
    states = {}
    for i, name in enumerate(names):
        later = names[i + 1:]
        last = not later
        kind = draw(st.sampled_from(["Pass", "Pass", "Choice", "Wait", "Wait"] if later else
                                    ["Pass", "Wait", "Succeed", "Fail"]))
        flow = {"End": True} if last else {"Next": later[0]}
        if kind == "Pass":
            state = {"Type": "Pass", **flow}
            variant = draw(st.sampled_from(["plain", "result", "parameters", "result_path", "input_path"]))
            if variant == "result":
                state["Result"] = draw(json_values)
                state["ResultPath"] = draw(st.sampled_from(["$.r", "$.deep.r", "$.r", "$.deep.r", "$"]))
            elif variant == "parameters":
                state["Parameters"] = {"n.$": "$.n", "s.$": "$.s", "t.$": "$.t", "at.$": "$$.State.EnteredTime",
                                       "lit": draw(json_values)}
            elif variant == "result_path":
                state["ResultPath"] = None
            elif variant == "input_path":
                state["InputPath"] = draw(st.sampled_from(["$", "$", "$", "$.missing"]))
        elif kind == "Choice":
            state = {"Type": "Choice", "Choices": [
                {"Variable": "$.n", "NumericLessThan": draw(st.integers(-5, 5)), "Next": later[0]},
                {"Not": {"Variable": "$.t", "IsTimestamp": True}, "Next": draw(st.sampled_from(later))}]}
            if draw(st.booleans()):
                state["Default"] = draw(st.sampled_from(later))
        elif kind == "Wait":
            state = {"Type": "Wait", **flow}
            field = draw(st.sampled_from(["Seconds", "SecondsPath", "TimestampPath", "Timestamp"]))
            if field == "Seconds":
                state["Seconds"] = draw(st.integers(0, 4))
            elif field == "SecondsPath":
                state["SecondsPath"] = "$.s"
            elif field == "TimestampPath":
                state["TimestampPath"] = "$.t"
            else:
                state["Timestamp"] = draw(st.sampled_from(["2023-11-14T22:13:22Z", "2020-01-01T00:00:00Z"]))
        elif kind == "Succeed":
            state = {"Type": "Succeed"}
        else:
            state = {"Type": "Fail", "Error": "E", "Cause": "C"}
        states[name] = state
    definition = {"StartAt": names[0], "States": states}
    if draw(st.booleans()):
        definition["TimeoutSeconds"] = draw(st.integers(1, 6))
    return json.dumps(definition)


inputs = st.fixed_dictionaries({
    "n": st.integers(-6, 6),
    "s": st.integers(0, 3),
    "t": st.sampled_from(["2023-11-14T22:13:21.500Z", "2000-01-01T00:00:00Z", "not a time"]),
}).map(json.dumps)

# What happens between decisions: fire the earliest timer, fire a timer nobody set, stop, or a late duplicate.
actions = st.lists(st.sampled_from(["fire", "fire", "fire", "bogus", "stop", "duplicate"]), max_size=8)


def fresh_execution(input_text: str) -> ExecutionState:
    return ExecutionState("arn:aws:states:us-east-1:123456789012:execution:m:e", "arn:aws:states:us-east-1:"
                          "123456789012:stateMachine:m", "e", "rev", "arn:aws:iam::123456789012:role/r", input_text,
                          START_MS, 0)


def drive(definition_text: str, input_text: str, plan: list[str], reload: bool = False) -> list[decider.Decision]:
    """Run an execution through ``plan`` and then to its end; every decision, in order. With ``reload`` each step
    starts from the state read back from its stored blob, as after a restart."""
    definition = parse_definition(definition_text)
    decisions = [decider.start(fresh_execution(input_text), definition, START_MS)]
    state = decisions[0].state
    now_ms = START_MS
    fired: list[str] = []
    for action in [*plan, *["fire"] * 20]:
        if not state.is_open:
            break
        decision = None
        if action == "fire" and state.timers:
            timer_id, fire_at_ms = min(state.timers.items(), key=lambda item: (item[1], item[0]))
            now_ms = max(now_ms, fire_at_ms)
            decision = decider.fire_timer(state, definition, timer_id, now_ms)
            fired.append(timer_id)
        elif action == "bogus":
            assert decider.fire_timer(state, definition, "wait-999999", now_ms) is None
        elif action == "duplicate" and fired:
            assert decider.fire_timer(state, definition, fired[-1], now_ms) is None or fired[-1] in state.timers
        elif action == "stop":
            now_ms += 1
            decision = decider.stop(state, "Stopped", None, now_ms)
        if decision is not None:
            decisions.append(decision)
            state = ExecutionState.from_blob(decision.state.to_blob()) if reload else decision.state
    assert not state.is_open, "a forward-only machine must end once its timers fire"
    label(f"{decisions[-1].effects.events[-1]['type']} after {len(decisions)} decisions")
    return decisions


def snapshot(decisions: list[decider.Decision]) -> list[tuple]:
    return [(d.effects.events, d.effects.timers_added, d.effects.timers_removed, d.state.to_blob()) for d in decisions]


@pytest.mark.slow  # seconds of examples: not in the fast tier
@CI_MORE
@given(definition=machines(), input_text=inputs, plan=actions)
def test_decider_is_deterministic(definition, input_text, plan):
    assert snapshot(drive(definition, input_text, plan)) == snapshot(drive(definition, input_text, plan))


@pytest.mark.slow  # seconds of examples: not in the fast tier
@CI_MORE
@given(definition=machines(), input_text=inputs, plan=actions)
def test_a_state_read_back_from_its_blob_decides_the_same(definition, input_text, plan):
    decisions = drive(definition, input_text, plan)
    for decision in decisions:
        assert ExecutionState.from_blob(decision.state.to_blob()) == decision.state == decision.state.copy()
    assert snapshot(drive(definition, input_text, plan, reload=True)) == snapshot(decisions)


@CI_MORE
@given(definition=machines(), input_text=inputs, plan=actions)
def test_event_ids_are_consecutive_and_previous_ids_follow_aws(definition, input_text, plan):
    events = [event for decision in drive(definition, input_text, plan) for event in decision.effects.events]
    assert [event["id"] for event in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "ExecutionStarted"
    assert sum(event["type"].startswith("Execution") and event["type"] != "ExecutionStarted"
               for event in events) == 1, "exactly one closing event"
    for index, event in enumerate(events):
        first_state = index == 1 and event["type"].endswith("StateEntered")
        if index == 0 or first_state or event["type"] in ("ExecutionAborted", "ExecutionTimedOut"):
            assert event["previousEventId"] == 0, event
        else:
            assert event["previousEventId"] == event["id"] - 1, event
        assert sum(key.endswith("EventDetails") for key in event) <= 1


@CI_MORE
@given(definition=machines(), input_text=inputs, plan=actions)
def test_timer_effects_match_the_state(definition, input_text, plan):
    """The timers a decision adds and removes are exactly the change in the state's pending timers."""
    decisions = drive(definition, input_text, plan)
    rows: dict[str, int] = {}
    for decision in decisions:
        for timer_id, fire_at_ms in decision.effects.timers_removed:
            assert rows.pop(timer_id) == fire_at_ms
        for timer_id, fire_at_ms in decision.effects.timers_added:
            assert timer_id not in rows
            rows[timer_id] = fire_at_ms
        assert rows == decision.state.timers
    assert rows == {}, "a closed execution keeps no timer rows"


# -- timer window


timer_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(-5_000, 4 * WINDOW_MS)),
        st.tuples(st.just("advance"), st.integers(0, 2 * WINDOW_MS)),
        st.tuples(st.just("tick"), st.integers(1, 4)),
        st.tuples(st.just("forget"), st.just(0)),
    ),
    max_size=40,
)


@CI_MORE
@given(preloaded=st.lists(st.integers(0, 5 * WINDOW_MS), max_size=10), ops=timer_ops)
def test_timer_window_fires_every_timer_exactly_once(preloaded, ops):
    store: dict[tuple[str, str], int] = {}  # the timer rows, the truth
    popped: Counter[tuple[str, str]] = Counter()
    created: set[tuple[str, str]] = set()
    window = TimerWindow(0, Limits(refill_rows_max=3, timer_window_max=6))  # small, so paging and reloads run
    in_turn = InTurn()
    now_ms = 0

    def load(shard_id: int, after_ms: int, until_ms: int, limit: int, after_key) -> list[TimerRow]:
        # The store's own order within a millisecond (as SQLite's execution ids): the order they were created in
        lower = (after_ms, *(after_key or (1 << 62,)))
        rows = [TimerRow(shard_id, fire_at_ms, arn, timer_id, (number[arn, timer_id], timer_id))
                for (arn, timer_id), fire_at_ms in store.items()
                if lower < (fire_at_ms, number[arn, timer_id], timer_id) and fire_at_ms <= until_ms]
        return sorted(rows, key=lambda row: (row.fire_at_ms, *row.after_key))[:limit]

    number: dict[tuple[str, str], int] = {}

    def add(fire_at_ms: int) -> None:
        n = len(created)  # three executions of two accounts: each account's timers are served in turn
        key = (f"arn:aws:states:us-east-1:{n % 2:012d}:execution:m:e{n % 3}", f"t{n}")
        created.add(key)
        number[key] = -n  # an order other than the ARNs'
        fire_at_ms -= fire_at_ms % 1_000  # many due at the same millisecond: pages end inside one
        store[key] = fire_at_ms  # committed first ...
        window.offer(fire_at_ms, *key, 0)  # ... then offered to the window

    def tick(limit: int) -> None:
        window.refill(now_ms, load)
        for fire_at_ms, arn, timer_id in pop_due([window], now_ms, limit, in_turn):
            assert fire_at_ms <= now_ms
            popped[(arn, timer_id)] += 1
            store.pop((arn, timer_id), None)  # the fire's commit deletes the row

    for fire_at_ms in preloaded:
        add(fire_at_ms)
    for op, arg in ops:
        if op == "add":
            add(max(0, now_ms + arg))
        elif op == "advance":
            now_ms += arg
        elif op == "tick":
            tick(arg)
        else:
            window.forget()
    now_ms = max([now_ms, *store.values()]) + 1
    for _ in range(2 * len(created) + 2):  # a page of 3 a tick drains the rest
        tick(1_000)
        now_ms += WINDOW_MS
    assert store == {}, "every timer row fired"
    assert set(popped) == created
    assert all(count == 1 for count in popped.values()), popped


def test_a_timer_offered_at_the_loaded_bounds_millisecond_is_not_loaded_again_with_the_next_page():
    arns = [f"arn:aws:states:us-east-1:123456789012:execution:m:e{n}" for n in range(4)]
    rows = {arn: n for n, arn in enumerate(arns)}  # the store's order: creation, not the ARN
    window = TimerWindow(0, Limits(refill_rows_max=2, timer_window_max=10))

    def load(shard_id: int, after_ms: int, until_ms: int, limit: int, after_key) -> list[TimerRow]:
        lower = (after_ms, *(after_key or (1 << 62,)))
        found = [TimerRow(shard_id, 100, arn, "t", (n, "t")) for arn, n in rows.items() if lower < (100, n, "t")]
        return found[:limit]

    window.refill(0, load)  # a full page: e0 and e1, bounded at (100, 1, "t")
    assert [key[1] for key in pop_due([window], 100, 10, InTurn())] == arns[:2]
    del rows[arns[0]], rows[arns[1]]  # their firings' commits removed their rows
    rows[arns[3]] = 3  # committed at the bound's millisecond, after the page was read ...
    window.offer(100, arns[3], "t", 0)  # ... and offered: kept
    window.refill(0, load)  # the next page: e2, and e3 again
    assert [key[1] for key in pop_due([window], 100, 10, InTurn())] == [arns[2], arns[3]]  # e3 once
