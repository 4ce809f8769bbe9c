"""The decider, pure: history event sequences, previousEventId rules, Wait timers, timeouts, stop and failures.

Expected event lists follow what AWS records (see the AWS reference notes: first StateEntered and
ExecutionAborted point at event 0, a Fail state has no Exited event, runtime failures go straight from
StateEntered to ExecutionFailed).
"""

from __future__ import annotations

import json

import pytest

from statewright import decider
from statewright.asl.definition import parse_definition
from statewright.asl.timestamps import format_ms
from statewright.decider.effects import TimerKind
from statewright.decider.execution import ABORTED, FAILED, OPEN_MS_MAX, RUNNING, SUCCEEDED, TIMED_OUT, ExecutionState
from statewright.decider.outcomes import AttemptSucceeded

START_MS = 1_700_000_000_000
MACHINE_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:machine"
EXECUTION_ARN = "arn:aws:states:us-east-1:123456789012:execution:machine:run-1"
ROLE_ARN = "arn:aws:iam::123456789012:role/test"
PREFIX = "An error occurred while executing the state '{}' (entered at the event id #{}). "
# Every Standard execution times out a year after its start at the latest: its timer, set as it starts
YEAR = ("execution-timeout", START_MS + OPEN_MS_MAX)


def execution(input_text: str = "{}") -> ExecutionState:
    return ExecutionState(EXECUTION_ARN, MACHINE_ARN, "run-1", "rev-1", ROLE_ARN, input_text, START_MS, 0)


def definition(states: dict, start_at: str | None = None, **top):
    return parse_definition(json.dumps({"StartAt": start_at or next(iter(states)), "States": states, **top}))


def start(states: dict, input_text: str = "{}", now_ms: int = START_MS, **top) -> decider.Decision:
    return decider.start(execution(input_text), definition(states, **top), now_ms)


def types(events: list[dict]) -> list[str]:
    return [event["type"] for event in events]


def previous_ids(events: list[dict]) -> list[int]:
    return [event["previousEventId"] for event in events]


def failure(decision: decider.Decision) -> dict:
    assert decision.effects.events[-1]["type"] == "ExecutionFailed"
    return decision.effects.events[-1]["executionFailedEventDetails"]


PASS_END = {"Type": "Pass", "End": True}


# -- event sequences and ids


def test_single_pass_state_history():
    decision = start({"P": {"Type": "Pass", "Result": {"Arg1": "argument1"}, "End": True}})
    assert decision.effects.events == [
        {"timestamp": START_MS, "type": "ExecutionStarted", "id": 1, "previousEventId": 0,
         "executionStartedEventDetails": {"input": "{}", "inputDetails": {"truncated": False}, "roleArn": ROLE_ARN}},
        {"timestamp": START_MS, "type": "PassStateEntered", "id": 2, "previousEventId": 0,
         "stateEnteredEventDetails": {"name": "P", "input": "{}", "inputDetails": {"truncated": False}}},
        {"timestamp": START_MS, "type": "PassStateExited", "id": 3, "previousEventId": 2,
         "stateExitedEventDetails": {"name": "P", "output": '{"Arg1":"argument1"}',
                                     "outputDetails": {"truncated": False}}},
        {"timestamp": START_MS, "type": "ExecutionSucceeded", "id": 4, "previousEventId": 3,
         "executionSucceededEventDetails": {"output": '{"Arg1":"argument1"}', "outputDetails": {"truncated": False}}},
    ]
    state = decision.state
    assert not decision.state.is_open
    assert state.status == SUCCEEDED
    assert state.output == '{"Arg1":"argument1"}'
    assert state.stop_ms == START_MS
    assert state.next_event_id == 5
    assert decision.effects.timers_added == decision.effects.timers_removed == []


def test_pass_choice_succeed_chain():
    decision = start({
        "P": {"Type": "Pass", "Next": "C"},
        "C": {"Type": "Choice", "Choices": [{"Variable": "$.go", "BooleanEquals": True, "Next": "S"}]},
        "S": {"Type": "Succeed"},
    }, '{"go":true}')
    assert types(decision.effects.events) == [
        "ExecutionStarted", "PassStateEntered", "PassStateExited", "ChoiceStateEntered", "ChoiceStateExited",
        "SucceedStateEntered", "SucceedStateExited", "ExecutionSucceeded"]
    assert [event["id"] for event in decision.effects.events] == list(range(1, 9))
    assert previous_ids(decision.effects.events) == [0, 0, 2, 3, 4, 5, 6, 7]
    assert decision.state.output == '{"go":true}'


def test_choice_default_is_taken_when_no_rule_matches():
    decision = start({
        "C": {"Type": "Choice", "Choices": [{"Variable": "$.n", "NumericEquals": 1, "Next": "One"}],
              "Default": "Other"},
        "One": {"Type": "Pass", "Result": "one", "End": True},
        "Other": {"Type": "Pass", "Result": "other", "End": True},
    }, '{"n":2}')
    assert decision.state.output == '"other"'
    assert decision.effects.events[3]["stateEnteredEventDetails"]["name"] == "Other"


def test_first_matching_choice_rule_wins():
    decision = start({
        "C": {"Type": "Choice", "Choices": [
            {"Variable": "$.n", "NumericGreaterThan": 0, "Next": "A"},
            {"Variable": "$.n", "NumericGreaterThan": 1, "Next": "B"}]},
        "A": {"Type": "Pass", "Result": "A", "End": True},
        "B": {"Type": "Pass", "Result": "B", "End": True},
    }, '{"n":5}')
    assert decision.state.output == '"A"'


def test_succeed_state_applies_input_and_output_paths():
    decision = start({"S": {"Type": "Succeed", "InputPath": "$.a", "OutputPath": "$.b"}}, '{"a":{"b":[1,2]}}')
    assert types(decision.effects.events) == ["ExecutionStarted", "SucceedStateEntered", "SucceedStateExited",
                                      "ExecutionSucceeded"]
    assert decision.state.output == "[1,2]"


def test_pass_data_flow():
    decision = start({"P": {"Type": "Pass", "InputPath": "$.in", "Parameters": {"v.$": "$.x", "lit": [1]},
                            "ResultPath": "$.out.r", "OutputPath": "$.out", "End": True}}, '{"in":{"x":7},"keep":1}')
    assert json.loads(decision.state.output) == {"r": {"v": 7, "lit": [1]}}


# -- raw input text vs compact JSON


RAW = '{ "b" : 1,\n  "a": [ 1, 2 ] }'


def test_untouched_input_keeps_its_text_through_the_whole_history():
    decision = start({"P": {"Type": "Pass", "Next": "C"},
                      "C": {"Type": "Choice", "Choices": [{"Variable": "$.b", "NumericEquals": 1, "Next": "S"}]},
                      "S": {"Type": "Succeed"}}, RAW)
    texts = []
    for event in decision.effects.events:
        details = next(value for key, value in event.items() if key.endswith("EventDetails"))
        texts.append(details.get("input", details.get("output")))
    assert texts == [RAW] * len(decision.effects.events)
    assert decision.state.output == RAW


@pytest.mark.parametrize("state", [
    {"Type": "Pass", "Result": {"b": 1, "a": [1, 2]}, "End": True},
    {"Type": "Pass", "Parameters": {"b.$": "$.b", "a.$": "$.a"}, "End": True},
    {"Type": "Pass", "ResultPath": "$.c", "End": True},
    {"Type": "Pass", "InputPath": "$.a", "End": True},
    {"Type": "Pass", "OutputPath": "$.a", "End": True},
])
def test_transformed_output_is_compact_json(state):
    decision = start({"P": state}, RAW)
    assert decision.effects.events[1]["stateEnteredEventDetails"]["input"] == RAW
    output = decision.effects.events[2]["stateExitedEventDetails"]["output"]
    assert output == json.dumps(json.loads(output), separators=(",", ":"))
    assert decision.state.output == output


@pytest.mark.parametrize(("input_text", "state", "output"), [
    (" 1 ", {"Type": "Pass", "Parameters": {"x": 1}, "OutputPath": "$.x", "End": True}, "1"),
    (" true ", {"Type": "Pass", "Result": True, "End": True}, "true"),
    (" null ", {"Type": "Pass", "Parameters": {"n": None}, "OutputPath": "$.n", "End": True}, "null"),
])
def test_computed_scalar_equal_to_the_input_is_still_compact(input_text, state, output):
    # The value is computed, not the input passed through: it must not borrow the input's text.
    decision = start({"P": state}, input_text)
    assert decision.state.output == output


def test_untouched_input_keeps_its_text_across_steps_and_the_stored_state():
    states = {"W": {"Type": "Wait", "Seconds": 5, "Next": "P"},
              "P": {"Type": "Parallel", "Next": "S", "Branches": [
                  {"StartAt": "Echo", "States": {"Echo": PASS_END}},
                  {"StartAt": "Nap", "States": {"Nap": {"Type": "Wait", "Seconds": 5, "End": True}}}]},
              "S": {"Type": "Succeed"}}
    first = start(states, RAW)
    stored = ExecutionState.from_blob(first.state.to_blob())
    napping = decider.fire_timer(stored, definition(states), "wait-2", START_MS + 5_000)
    stored = ExecutionState.from_blob(napping.state.to_blob())
    assert stored.flows[""].fan.texts == {"0": RAW} and stored.flows["4.1"].text == RAW  # Echo ended, Nap naps
    fired = decider.fire_timer(stored, definition(states), "wait-8", START_MS + 10_000)
    assert napping.effects.events[0]["stateExitedEventDetails"]["output"] == RAW
    assert fired.state.output == f"[{RAW},{RAW}]"


def test_non_ascii_output_is_not_escaped():
    decision = start({"P": {"Type": "Pass", "Result": {"name": "Zoë ✓"}, "End": True}})
    assert decision.state.output == '{"name":"Zoë ✓"}'


# -- context object


def test_context_object_fields():
    decision = start({"P": {"Type": "Pass", "Parameters": {
        "id.$": "$$.Execution.Id", "name.$": "$$.Execution.Name", "input.$": "$$.Execution.Input",
        "role.$": "$$.Execution.RoleArn", "start.$": "$$.Execution.StartTime", "machine.$": "$$.StateMachine.Id",
        "machineName.$": "$$.StateMachine.Name", "state.$": "$$.State.Name", "entered.$": "$$.State.EnteredTime",
        "redrives.$": "$$.Execution.RedriveCount"}, "End": True}}, '{"k":"v"}', now_ms=START_MS + 5)
    assert json.loads(decision.state.output) == {
        "id": EXECUTION_ARN, "name": "run-1", "input": {"k": "v"}, "role": ROLE_ARN,
        "start": "2023-11-14T22:13:20.000Z", "machine": MACHINE_ARN, "machineName": "machine", "state": "P",
        "entered": "2023-11-14T22:13:20.005Z", "redrives": 0}


def test_pass_state_context_has_no_retry_count():
    decision = start({"P": {"Type": "Pass", "Parameters": {"s.$": "$$.State"}, "End": True}})
    assert set(json.loads(decision.state.output)["s"]) == {"Name", "EnteredTime"}


def test_state_after_a_wait_sees_its_own_entered_time():
    states = {"W": {"Type": "Wait", "Seconds": 2, "Next": "P"},
              "P": {"Type": "Pass", "Parameters": {"t.$": "$$.State.EnteredTime"}, "End": True}}
    first = start(states)
    fired = decider.fire_timer(first.state, definition(states), "wait-2", START_MS + 2_345)
    assert json.loads(fired.state.output) == {"t": format_ms(START_MS + 2_345)}


# -- Wait


def test_wait_seconds_sets_a_timer_and_resumes_on_it():
    states = {"W": {"Type": "Wait", "Seconds": 5, "Next": "P"}, "P": {"Type": "Pass", "End": True}}
    first = start(states, '{"x":1}')
    assert types(first.effects.events) == ["ExecutionStarted", "WaitStateEntered"]
    assert previous_ids(first.effects.events) == [0, 0]
    assert first.effects.timers_added == [YEAR, ("wait-2", START_MS + 5_000)]
    assert first.effects.timers_removed == []
    assert first.state.status == RUNNING and first.state.is_open
    assert first.state.timers == {"wait-2": START_MS + 5_000, YEAR[0]: YEAR[1]}
    assert first.state.next_event_id == 3

    fired = decider.fire_timer(first.state, definition(states), "wait-2", START_MS + 5_000)
    assert types(fired.effects.events) == ["WaitStateExited", "PassStateEntered", "PassStateExited",
                                           "ExecutionSucceeded"]
    assert [event["id"] for event in fired.effects.events] == [3, 4, 5, 6]
    assert previous_ids(fired.effects.events) == [2, 3, 4, 5]
    assert fired.effects.timers_removed == [("wait-2", START_MS + 5_000), YEAR]  # the year's too, as it closes
    assert fired.effects.timers_added == []
    assert fired.state.timers == {}
    assert fired.state.status == SUCCEEDED
    assert json.loads(fired.state.output) == {"x": 1}


def test_firing_does_not_change_the_given_state():
    states = {"W": {"Type": "Wait", "Seconds": 5, "End": True}}
    first = start(states)
    before = first.state.to_blob()
    decider.fire_timer(first.state, definition(states), "wait-2", START_MS + 5_000)
    assert first.state.to_blob() == before


def test_start_does_not_change_the_given_state():
    given = execution()
    before = given.to_blob()
    decider.start(given, definition({"W": {"Type": "Wait", "Seconds": 5, "End": True}}, TimeoutSeconds=60),
                  START_MS)
    assert given.to_blob() == before


def test_two_waits_in_a_row_get_distinct_timers():
    states = {"A": {"Type": "Wait", "Seconds": 1, "Next": "B"}, "B": {"Type": "Wait", "Seconds": 1, "End": True}}
    compiled = definition(states)
    first = start(states)
    second = decider.fire_timer(first.state, compiled, "wait-2", START_MS + 1_000)
    assert types(second.effects.events) == ["WaitStateExited", "WaitStateEntered"]
    assert second.effects.timers_removed == [("wait-2", START_MS + 1_000)]
    assert second.effects.timers_added == [("wait-4", START_MS + 2_000)]
    third = decider.fire_timer(second.state, compiled, "wait-4", START_MS + 2_000)
    assert types(third.effects.events) == ["WaitStateExited", "ExecutionSucceeded"]
    assert [event["id"] for event in third.effects.events] == [5, 6]


@pytest.mark.parametrize("state", [
    {"Type": "Wait", "Seconds": 0, "End": True},
    {"Type": "Wait", "Timestamp": "2020-01-01T00:00:00Z", "End": True},
    {"Type": "Wait", "TimestampPath": "$.t", "End": True},
    {"Type": "Wait", "SecondsPath": "$.zero", "End": True},
])
def test_already_due_wait_continues_inline(state):
    decision = start({"W": state}, '{"t":"2001-02-03T04:05:06.789Z","zero":0}')
    assert types(decision.effects.events) == ["ExecutionStarted", "WaitStateEntered", "WaitStateExited",
                                      "ExecutionSucceeded"]
    assert decision.effects.timers_added == decision.effects.timers_removed == []
    assert decision.state.status == SUCCEEDED


def test_wait_until_exactly_now_continues_inline():
    decision = start({"W": {"Type": "Wait", "Timestamp": "2023-11-14T22:13:20Z", "End": True}})
    assert decision.state.status == SUCCEEDED


@pytest.mark.parametrize(("state", "fire_at_ms"), [
    ({"Type": "Wait", "Timestamp": "2023-11-14T22:13:30Z", "End": True}, START_MS + 10_000),
    ({"Type": "Wait", "Timestamp": "2023-11-14T23:13:30.250+01:00", "End": True}, START_MS + 10_250),
    ({"Type": "Wait", "TimestampPath": "$.t", "End": True}, START_MS + 60_000),
    ({"Type": "Wait", "SecondsPath": "$.s", "End": True}, START_MS + 3_000),
    ({"Type": "Wait", "InputPath": "$.nested", "SecondsPath": "$.s", "End": True}, START_MS + 7_000),
])
def test_wait_variants_set_their_timer(state, fire_at_ms):
    decision = start({"W": state}, '{"t":"2023-11-14T22:14:20Z","s":3,"nested":{"s":7}}')
    assert decision.effects.timers_added == [YEAR, ("wait-2", fire_at_ms)]


@pytest.mark.parametrize("value", ['-1', '"3"', "1.5", "null", "true"])
def test_seconds_path_to_an_invalid_value_fails(value):
    decision = start({"W": {"Type": "Wait", "SecondsPath": "$.s", "End": True}}, f'{{"s":{value}}}')
    assert types(decision.effects.events) == ["ExecutionStarted", "WaitStateEntered", "ExecutionFailed"]
    assert failure(decision)["error"] == "States.Runtime"
    assert failure(decision)["cause"].startswith(PREFIX.format("W", 2))


def test_seconds_path_missing_fails_saying_it_references_no_input_value():
    decision = start({"W": {"Type": "Wait", "SecondsPath": "$.s", "End": True}})
    assert failure(decision) == {"error": "States.Runtime", "cause": PREFIX.format("W", 2) +
                                 "The SecondsPath parameter does not reference an input value: $.s"}


@pytest.mark.parametrize("stamp", ["2016-03-14T01:59:00", "2016-03-14T01:59:00.000", "", "yesterday"])
def test_timestamp_path_to_an_invalid_value_fails_as_aws_records(stamp):
    decision = start({"State_1": {"Type": "Wait", "TimestampPath": "$.start_at", "End": True}},
                     json.dumps({"start_at": stamp}))
    assert types(decision.effects.events) == ["ExecutionStarted", "WaitStateEntered", "ExecutionFailed"]
    assert previous_ids(decision.effects.events) == [0, 0, 2]
    assert failure(decision) == {
        "error": "States.Runtime",
        "cause": PREFIX.format("State_1", 2) + "The TimestampPath parameter does not reference a valid ISO-8601 "
        f"extended offset date-time format string: $.start_at == {stamp}"}


@pytest.mark.parametrize("suffix", ["Z", ".000Z", ".000000Z", ".0000000Z", ".00Z", "+00:00"])
def test_timestamp_path_accepts_the_formats_aws_accepts(suffix):
    decision = start({"W": {"Type": "Wait", "TimestampPath": "$.t", "End": True}},
                     json.dumps({"t": "2016-03-14T01:59:00" + suffix}))
    assert decision.state.status == SUCCEEDED


def test_failure_after_a_wait_names_the_state_and_its_entered_event():
    states = {"W": {"Type": "Wait", "Seconds": 1, "OutputPath": "$.missing", "End": True}}
    first = start(states)
    fired = decider.fire_timer(first.state, definition(states), "wait-2", START_MS + 1_000)
    assert types(fired.effects.events) == ["ExecutionFailed"]
    assert fired.effects.events[0]["previousEventId"] == 2
    assert failure(fired) == {"error": "States.Runtime", "cause": PREFIX.format("W", 2) +
                              "Invalid path '$.missing' : No results for path: $['missing']"}


def test_unknown_timer_is_ignored():
    states = {"W": {"Type": "Wait", "Seconds": 5, "End": True}}
    first = start(states)
    assert decider.fire_timer(first.state, definition(states), "wait-99", START_MS + 5_000) is None
    assert decider.fire_timer(first.state, definition(states), "continue-2", START_MS + 5_000) is None


def test_an_execution_still_running_a_year_after_its_start_times_out():
    states = {"W": {"Type": "Wait", "Seconds": 400 * 86_400, "End": True}}  # longer than an execution may run
    first = start(states)
    assert first.state.timers == {"wait-2": START_MS + 400 * 86_400_000, YEAR[0]: YEAR[1]}
    timed_out = decider.fire_timer(first.state, definition(states), *YEAR)
    assert types(timed_out.effects.events) == ["ExecutionTimedOut"]
    assert timed_out.state.status == TIMED_OUT and timed_out.state.timers == {}
    # ... and a definition's shorter TimeoutSeconds comes first, a longer one does not
    assert start(states, TimeoutSeconds=60).state.timers[YEAR[0]] == START_MS + 60_000
    assert start(states, TimeoutSeconds=99_999_999).state.timers[YEAR[0]] == YEAR[1]


def test_timer_on_a_closed_execution_is_ignored():
    states = {"W": {"Type": "Wait", "Seconds": 5, "End": True}}
    first = start(states)
    done = decider.fire_timer(first.state, definition(states), "wait-2", START_MS + 5_000)
    assert not done.state.is_open
    assert decider.fire_timer(done.state, definition(states), "wait-2", START_MS + 5_000) is None


# -- execution timeout


def test_definition_timeout_sets_a_timer_and_times_out():
    states = {"W": {"Type": "Wait", "Seconds": 5, "End": True}}
    compiled = definition(states, TimeoutSeconds=1)
    first = decider.start(execution(), compiled, START_MS)
    assert sorted(first.effects.timers_added) == sorted([("execution-timeout", START_MS + 1_000),
                                                 ("wait-2", START_MS + 5_000)])
    timed_out = decider.fire_timer(first.state, compiled, decider.EXECUTION_TIMEOUT_TIMER, START_MS + 1_000)
    # As AWS records it (measured, see floci-io/floci#2733): States.Timeout in the event, pointing at event 0
    assert timed_out.effects.events == [{"timestamp": START_MS + 1_000, "type": "ExecutionTimedOut", "id": 3,
                                 "previousEventId": 0,
                                 "executionTimedOutEventDetails": {"error": "States.Timeout"}}]
    assert sorted(timed_out.effects.timers_removed) == sorted([("execution-timeout", START_MS + 1_000),
                                                       ("wait-2", START_MS + 5_000)])
    assert timed_out.effects.timers_added == []
    state = timed_out.state
    assert state.status == TIMED_OUT and state.timers == {}
    assert state.error is None and state.cause is None and state.output is None
    assert state.stop_ms == START_MS + 1_000
    assert decider.fire_timer(state, compiled, "wait-2", START_MS + 5_000) is None


def test_timeout_timer_is_cancelled_when_the_execution_ends_first():
    states = {"W": {"Type": "Wait", "Seconds": 1, "End": True}}
    compiled = definition(states, TimeoutSeconds=60)
    first = decider.start(execution(), compiled, START_MS)
    done = decider.fire_timer(first.state, compiled, "wait-2", START_MS + 1_000)
    assert done.state.status == SUCCEEDED
    assert sorted(done.effects.timers_removed) == sorted([("wait-2", START_MS + 1_000),
                                                  ("execution-timeout", START_MS + 60_000)])
    assert done.state.timers == {}


def test_execution_that_ends_inline_writes_no_timeout_timer():
    decision = start({"P": PASS_END}, TimeoutSeconds=10)
    assert decision.effects.timers_added == decision.effects.timers_removed == []
    assert decision.state.timers == {}


def test_timeout_is_measured_from_the_execution_start():
    given = execution()
    decision = decider.start(given, definition({"W": {"Type": "Wait", "Seconds": 100, "End": True}},
                                               TimeoutSeconds=30), START_MS + 7)
    assert ("execution-timeout", START_MS + 30_000) in decision.effects.timers_added


# -- stop


def test_stop_aborts_with_previous_event_zero_and_removes_timers():
    states = {"W": {"Type": "Wait", "Seconds": 5, "End": True}}
    first = decider.start(execution(), definition(states, TimeoutSeconds=100), START_MS)
    stopped = decider.stop(first.state, None, None, START_MS + 10)
    assert stopped.effects.events == [{"timestamp": START_MS + 10, "type": "ExecutionAborted", "id": 3,
                               "previousEventId": 0, "executionAbortedEventDetails": {}}]
    assert sorted(stopped.effects.timers_removed) == sorted([("wait-2", START_MS + 5_000),
                                                     ("execution-timeout", START_MS + 100_000)])
    assert stopped.state.status == ABORTED and stopped.state.timers == {}
    assert stopped.state.error is None and stopped.state.cause is None
    assert stopped.state.stop_ms == START_MS + 10


def test_stop_with_error_and_cause():
    first = start({"W": {"Type": "Wait", "Seconds": 5, "End": True}})
    stopped = decider.stop(first.state, "Halt", "operator asked", START_MS + 10)
    assert stopped.effects.events[0]["executionAbortedEventDetails"] == {"error": "Halt", "cause": "operator asked"}
    assert (stopped.state.error, stopped.state.cause) == ("Halt", "operator asked")


def test_stop_with_only_a_cause():
    first = start({"W": {"Type": "Wait", "Seconds": 5, "End": True}})
    stopped = decider.stop(first.state, None, "why", START_MS + 10)
    assert stopped.effects.events[0]["executionAbortedEventDetails"] == {"cause": "why"}


def test_stop_of_a_closed_execution_does_nothing():
    done = start({"P": PASS_END})
    assert decider.stop(done.state, None, None, START_MS + 10) is None


def test_stopped_execution_ignores_its_old_timer():
    states = {"W": {"Type": "Wait", "Seconds": 5, "End": True}}
    first = start(states)
    stopped = decider.stop(first.state, None, None, START_MS + 10)
    assert decider.fire_timer(stopped.state, definition(states), "wait-2", START_MS + 5_000) is None


def test_a_negative_max_concurrency_path_stalls_its_flow_until_a_stop_and_again_after_a_redrive():
    stalling = {"Type": "Map", "MaxConcurrencyPath": "$.n", "ItemsPath": "$.items", "End": True,
                "ItemProcessor": {"StartAt": "I", "States": {"I": PASS_END}}}
    states = {"P": {"Type": "Parallel", "End": True, "Branches": [
        {"StartAt": "A", "States": {"A": PASS_END}}, {"StartAt": "M", "States": {"M": stalling}}]}}
    first = start(states, '{"n": -1, "items": [1]}')
    assert types(first.effects.events) == ["ExecutionStarted", "ParallelStateEntered", "ParallelStateStarted",
                                   "PassStateEntered", "PassStateExited"]
    # Nothing wakes it but its year's end
    assert first.state.status == RUNNING and first.state.timers == {YEAR[0]: YEAR[1]}
    assert not first.effects.dispatches_added
    stopped = decider.stop(first.state, None, None, START_MS + 10)
    again = decider.redrive(stopped.state, definition(states), START_MS + 20, None, {})
    assert types(again.effects.events) == ["ExecutionRedriven", "ParallelStateEntered", "ParallelStateStarted"]
    assert again.state.status == RUNNING and again.state.timers == {YEAR[0]: YEAR[1]}  # from its start, still


# -- Fail


def test_fail_with_error_and_cause():
    decision = start({"F": {"Type": "Fail", "Error": "SomeFailure", "Cause": "It broke."}})
    assert types(decision.effects.events) == ["ExecutionStarted", "FailStateEntered", "ExecutionFailed"]
    assert previous_ids(decision.effects.events) == [0, 0, 2]
    assert failure(decision) == {"error": "SomeFailure", "cause": "It broke."}
    assert (decision.state.status, decision.state.error, decision.state.cause) == (FAILED, "SomeFailure",
                                                                                   "It broke.")
    assert decision.state.output is None


def test_fail_with_neither_error_nor_cause_has_empty_details():
    decision = start({"F": {"Type": "Fail"}})
    assert failure(decision) == {}
    assert decision.state.error is None and decision.state.cause is None


def test_fail_with_only_an_error():
    decision = start({"F": {"Type": "Fail", "Error": "E"}})
    assert failure(decision) == {"error": "E"}


def test_fail_with_error_path_and_cause_path():
    decision = start({"F": {"Type": "Fail", "ErrorPath": "$.e", "CausePath": "$$.Execution.Input.c"}},
                     '{"e":"Custom","c":"from the context"}')
    assert failure(decision) == {"error": "Custom", "cause": "from the context"}


def test_fail_error_path_that_is_missing_is_a_runtime_error():
    decision = start({"F": {"Type": "Fail", "ErrorPath": "$.e", "Cause": "c"}})
    assert types(decision.effects.events) == ["ExecutionStarted", "FailStateEntered", "ExecutionFailed"]
    assert failure(decision) == {"error": "States.Runtime", "cause": PREFIX.format("F", 2) +
                                 "The JSONPath '$.e' specified for the field 'ErrorPath' could not be found in the "
                                 "input '{}'"}


def test_fail_cause_path_to_a_non_string_is_a_runtime_error():
    decision = start({"F": {"Type": "Fail", "Error": "E", "CausePath": "$.c"}}, '{"c":{"not":"a string"}}')
    assert failure(decision)["error"] == "States.Runtime"


def test_fail_after_other_states():
    decision = start({"P": {"Type": "Pass", "Next": "F"}, "F": {"Type": "Fail", "Error": "E", "Cause": "C"}})
    assert types(decision.effects.events) == ["ExecutionStarted", "PassStateEntered", "PassStateExited",
                                      "FailStateEntered", "ExecutionFailed"]
    assert previous_ids(decision.effects.events) == [0, 0, 2, 3, 4]


# -- runtime errors


def test_no_choice_matched():
    decision = start({"C": {"Type": "Choice", "Choices": [{"Variable": "$.n", "NumericEquals": 1, "Next": "S"}]},
                      "S": {"Type": "Succeed"}}, '{"n":2}')
    assert types(decision.effects.events) == ["ExecutionStarted", "ChoiceStateEntered", "ExecutionFailed"]
    assert previous_ids(decision.effects.events) == [0, 0, 2]
    assert failure(decision)["error"] == "States.NoChoiceMatched"
    assert decision.state.status == FAILED


def test_choice_on_a_missing_variable_fails_without_falling_to_default():
    decision = start({"IsDataset": {"Type": "Choice", "Default": "S", "Choices": [
        {"Variable": "$.processing_type", "StringEquals": "x", "Next": "S"}]}, "S": {"Type": "Succeed"}})
    assert types(decision.effects.events) == ["ExecutionStarted", "ChoiceStateEntered", "ExecutionFailed"]
    assert failure(decision) == {"error": "States.Runtime", "cause": PREFIX.format("IsDataset", 2) +
                                 "Invalid path '$.processing_type': The choice state's condition path references "
                                 "an invalid value."}


@pytest.mark.parametrize("field", ["InputPath", "OutputPath"])
def test_missing_input_or_output_path(field):
    decision = start({"P": {"Type": "Pass", "Next": "AggregateIdentityResults"},
                      "AggregateIdentityResults": {"Type": "Pass", field: "$.Payload", "End": True}})
    assert types(decision.effects.events) == ["ExecutionStarted", "PassStateEntered", "PassStateExited",
                                      "PassStateEntered", "ExecutionFailed"]
    assert failure(decision) == {"error": "States.Runtime", "cause": PREFIX.format("AggregateIdentityResults", 4) +
                                 "Invalid path '$.Payload' : No results for path: $['Payload']"}


def test_missing_parameters_field():
    decision = start({"Check Address": {"Type": "Pass", "Parameters": {"address.$": "$.application.address"},
                                        "End": True}}, '{ "flagged": false }')
    assert failure(decision) == {
        "error": "States.Runtime",
        "cause": PREFIX.format("Check Address", 2) + "The JSONPath '$.application.address' specified for the field "
        "'address.$' could not be found in the input '{\"flagged\":false}'"}


def test_result_path_through_a_non_object_fails():
    decision = start({"P": {"Type": "Pass", "Result": 1, "ResultPath": "$.a.b", "End": True}}, '{"a":"text"}')
    assert types(decision.effects.events) == ["ExecutionStarted", "PassStateEntered", "ExecutionFailed"]
    assert decision.state.status == FAILED


def test_data_limit_exceeded():
    big = "x" * (decider.PAYLOAD_BYTES_MAX + 1)
    decision = start({"P": {"Type": "Pass", "Result": {"big": big}, "End": True}})
    assert types(decision.effects.events) == ["ExecutionStarted", "PassStateEntered", "ExecutionFailed"]
    assert failure(decision)["error"] == "States.DataLimitExceeded"
    assert decision.state.status == FAILED


def test_payload_just_under_the_limit_is_fine():
    big = "x" * (decider.PAYLOAD_BYTES_MAX - 20)
    decision = start({"P": {"Type": "Pass", "Result": {"big": big}, "End": True}})
    assert decision.state.status == SUCCEEDED


LOOP = {"A": {"Type": "Pass", "Next": "B"},
        "B": {"Type": "Choice", "Choices": [{"Variable": "$.never", "IsPresent": True, "Next": "Done"}],
              "Default": "A"},
        "Done": {"Type": "Succeed"}}


def run_by_continuations(states: dict, services: decider.Services) -> list[decider.Decision]:
    """Start an execution, then fire each continuation timer it sets when due, until it closes."""
    compiled = definition(states)
    decisions = [decider.start(execution(), compiled, START_MS, services)]
    while decisions[-1].state.is_open:
        (timer_id, due_ms), = [timer for timer in decisions[-1].effects.timers_added if timer != YEAR]
        assert timer_id.startswith("continue-")
        decisions.append(decider.fire_timer(decisions[-1].state, compiled, timer_id, due_ms, services))
    return decisions


def test_endless_loop_of_pure_states_ends_at_the_history_limit():
    decisions = run_by_continuations(LOOP, decider.Services(lambda *claims: "token", ()))
    events = [event for decision in decisions for event in decision.effects.events]
    # AWS (measured, see floci-io/floci#2734): event 25,000 itself is the ExecutionFailed, 24,999 the last real one.
    assert decisions[-1].state.status == FAILED
    assert [event["id"] for event in events] == list(range(1, decider.HISTORY_EVENTS_MAX + 1))
    assert events[-1] == {
        "timestamp": START_MS, "type": "ExecutionFailed", "id": 25_000, "previousEventId": 24_999,
        "executionFailedEventDetails": {
            "error": "States.Runtime", "cause": "The execution reached the maximum number of history events (25000)."}}


def test_a_loop_enters_a_bounded_number_of_states_per_step():
    services = decider.Services(lambda *claims: "token", (), apply_states_max=7)
    decisions = run_by_continuations(LOOP, services)
    entered = [sum(event["type"].endswith("StateEntered") for event in decision.effects.events)
               for decision in decisions]
    assert max(entered) == 7 and len(decisions) > 1000


def test_continuing_later_changes_no_event():
    chain = {f"S{index}": {"Type": "Pass", "Result": index, "ResultPath": f"$.s{index}", "Next": f"S{index + 1}"}
             for index in range(30)}
    chain["S30"] = {"Type": "Succeed"}
    inline = decider.start(execution(), definition(chain), START_MS)
    assert not inline.effects.timers_added  # 31 states fit one step (its year's timer set and cancelled)
    sliced = run_by_continuations(chain, decider.Services(lambda *claims: "token", (), apply_states_max=4))
    assert len(sliced) == 8
    assert [event for decision in sliced for event in decision.effects.events] == inline.effects.events
    assert sliced[-1].state.output == inline.state.output


def test_a_step_that_spent_its_evaluation_steps_continues_later():
    heavy = {"P": {"Type": "Pass", "QueryLanguage": "JSONata", "Output": "{% $sum([1..3000]) %}", "Next": "Q"},
             "Q": {"Type": "Pass", "End": True}}
    decisions = run_by_continuations(heavy, decider.Services(lambda *claims: "token", (), apply_steps_max=1,
                                                              heavy_pause_ms=250))
    assert decisions[0].effects.timers_added[1][1] == START_MS + 250  # a heavy step's execution waits its turn
    assert [types(decision.effects.events) for decision in decisions] == [
        ["ExecutionStarted", "PassStateEntered", "PassStateExited"],
        ["PassStateEntered", "PassStateExited", "ExecutionSucceeded"]]


# -- purity


def test_same_inputs_give_the_same_decision():
    states = {"P": {"Type": "Pass", "Parameters": {"c.$": "$$.Execution.StartTime"}, "Next": "W"},
              "W": {"Type": "Wait", "Seconds": 3, "End": True}}
    one = decider.start(execution('{"a":1}'), definition(states, TimeoutSeconds=9), START_MS)
    two = decider.start(execution('{"a":1}'), definition(states, TimeoutSeconds=9), START_MS)
    assert one.effects.events == two.effects.events
    assert one.effects.timers_added == two.effects.timers_added
    assert one.state.to_blob() == two.state.to_blob()


def test_runs_sharing_a_compiled_definition_do_not_leak_into_each_other():
    states = {"P": {"Type": "Pass", "Result": {"l": [1]}, "Next": "Q"},
              "Q": {"Type": "Pass", "Result": 9, "ResultPath": "$.l[0]", "End": True}}
    compiled = definition(states)
    first = decider.start(execution(), compiled, START_MS)
    again = decider.start(execution(), compiled, START_MS)
    assert first.state.output == again.state.output == '{"l":[9]}'
    assert first.effects.events == again.effects.events


# -- fixed in the typed state: paths that used to raise inside the decider


def test_a_fan_out_inside_a_failed_branch_stops_with_it():
    branches = [{"StartAt": "Inner", "States": {"Inner": {"Type": "Parallel", "End": True, "Branches": [
                    {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 5, "End": True}}}]}}},
                {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "E"}}}]
    decision = start({"P": {"Type": "Parallel", "Branches": branches, "End": True}})
    assert types(decision.effects.events)[-3:] == ["FailStateEntered", "ParallelStateFailed", "ExecutionFailed"]
    assert decision.effects.timers_added == [] and decision.effects.timers_removed == []
    assert decision.state.flows == {}


def test_a_task_input_over_the_size_limit_fails_the_state_and_schedules_nothing():
    activity = "arn:aws:states:us-east-1:123456789012:activity:a"
    states = {"T": {"Type": "Task", "Resource": activity, "Parameters": {"a.$": "$.s", "b.$": "$.s"},
                    "Catch": [{"ErrorEquals": ["States.DataLimitExceeded"], "Next": "Rest"}], "End": True},
              "Rest": {"Type": "Wait", "Seconds": 5, "End": True}}
    services = decider.Services(lambda *claims: "token", {activity})
    decision = decider.start(execution(json.dumps({"s": "x" * 150_000})), definition(states), START_MS, services)
    assert types(decision.effects.events)[-2:] == ["TaskStateExited", "WaitStateEntered"]
    assert decision.effects.dispatches_added == [] and decision.state.flows[""].task is None
    stopped = decider.stop(decision.state, None, None, START_MS + 1)
    assert types(stopped.effects.events) == ["ExecutionAborted"] and stopped.effects.dispatches_removed == []


def test_an_activity_the_services_do_not_know_fails_the_task():
    activity = "arn:aws:states:us-east-1:123456789012:activity:gone"
    compiled = definition({"T": {"Type": "Task", "Resource": activity, "End": True}})
    decision = decider.start(execution(), compiled, START_MS, decider.Services(lambda *claims: "token", frozenset()))
    assert failure(decision) == {"error": "States.Runtime", "cause": PREFIX.format("T", 2)
                                 + f"The activity {activity} does not exist."}
    known = decider.start(execution(), compiled, START_MS, decider.Services(lambda *claims: "token", {activity}))
    assert types(known.effects.events)[-1] == "ActivityScheduled"


def test_timer_ids_keep_their_stored_text_and_name_their_kind():
    assert TimerKind.WAIT.id(2) == "wait-2"
    assert TimerKind.RETRY.id(8, 1) == "retry-8-1"
    assert TimerKind.EXECUTION_TIMEOUT.id() == decider.EXECUTION_TIMEOUT_TIMER == "execution-timeout"
    for kind in set(TimerKind) - {TimerKind.EXECUTION_TIMEOUT}:
        assert TimerKind.of(kind.id(7)) is kind
    assert TimerKind.of(TimerKind.EXECUTION_TIMEOUT.id()) is TimerKind.EXECUTION_TIMEOUT
    with pytest.raises(ValueError, match="not a timer id"):
        TimerKind.of("soon-7")


def test_a_result_before_its_start_records_the_start_and_the_result_in_one_decision():
    states = {"T": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "HeartbeatSeconds": 5,
                    "TimeoutSeconds": 60, "Parameters": {"FunctionName": "f"}, "End": True}}
    services = decider.Services(lambda *claims: "token", ())
    scheduled = start(states)
    (scheduled_id,) = decider.pending_attempts(scheduled.state)
    assert decider.pending_attempts(scheduled.state) == {scheduled_id: False}
    done = decider.complete_attempt(scheduled.state, definition(states), scheduled_id,
                                    AttemptSucceeded('{"ok":1}'), START_MS + 10, services)
    assert types(done.effects.events) == ["TaskStarted", "TaskSucceeded", "TaskStateExited", "ExecutionSucceeded"]
    assert done.effects.dispatches_removed == [str(scheduled_id)]
    # the heartbeat timer the start set is cancelled in the same decision: no row is written for it
    assert [timer for timer, _ in done.effects.timers_removed] == [TimerKind.TIMEOUT.id(scheduled_id), YEAR[0]]
    assert done.effects.timers_added == []


def test_a_start_again_stands_only_as_the_same_start():
    running = start({"W": {"Type": "Wait", "Seconds": 5, "End": True}}, '{"a":1}').state
    running.start_token = "token-1"
    assert decider.started_again(running, "token-1", "{}", None, None, True) == START_MS  # this very start
    assert decider.started_again(running, None, '{"a":1}', None, None, False) == START_MS  # idempotent
    assert decider.started_again(running, None, '{"a":2}', None, None, False) is None  # other input
    assert decider.started_again(running, None, '{"a":1}', None, None, True) is None  # a synchronous start
    assert decider.started_again(running, None, '{"a":1}', None, "case", False) is None  # another test case
    closed = decider.stop(running, None, None, START_MS + 1).state
    assert decider.started_again(closed, None, '{"a":1}', None, None, False) is None
    assert decider.started_again(closed, "token-1", '{"a":1}', None, None, False) == START_MS
