"""The trace context an execution keeps: the headers it reads (X-Ray's and W3C's), the ids it makes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statewright.decider import trace_context
from statewright.integrations.trace_spans import Track

TRACE = "5759e988bd862e3fe1be46a994272793"


@pytest.mark.parametrize(("header", "context"), [
    ("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", f"{TRACE}-53995c3f42cd8ad8"),
    ("Root=1-5759e988-bd862e3fe1be46a994272793", TRACE),
    (" root=1-5759E988-BD862E3FE1BE46A994272793 ; parent=53995C3F42CD8AD8 ", f"{TRACE}-53995c3f42cd8ad8"),
    ("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=nothex;Sampled=1", TRACE),
    ("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=0", False),
    (f"00-{TRACE}-00f067aa0ba902b7-01", f"{TRACE}-00f067aa0ba902b7"),
    (f"00-{TRACE}-00f067aa0ba902b7-00", False),
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),
    ("Self=1-5759e988-bd862e3fe1be46a994272793", None),
    ("anything at all", None),
    ("", None),
])
def test_a_trace_header_names_the_trace_it_joins(header, context):
    assert trace_context.joined(header) == context


def test_a_new_trace_begins_with_its_epoch_second_as_x_ray_requires():
    made = trace_context.new_trace(0x5759E988, 0xBD862E3FE1BE46A994272793)
    assert made == TRACE
    assert trace_context.parent_span(made) is None


@given(st.text(min_size=1, max_size=80), st.integers(min_value=0, max_value=30_000))
def test_span_ids_are_sixteen_hex_digits_never_zero_and_the_same_each_time(arn, event_id):
    span = trace_context.span_id(arn, event_id)
    assert len(span) == 16 and int(span, 16) != 0
    assert span == trace_context.span_id(arn, event_id)


@given(st.integers(min_value=1, max_value=2**128 - 1), st.integers(min_value=1, max_value=2**64 - 1))
def test_the_headers_sent_on_calls_read_back_as_the_same_context(trace_bits, span_bits):
    trace, span = f"{trace_bits:032x}", f"{span_bits:016x}"
    assert trace_context.joined(trace_context.xray_header(trace, span)) == f"{trace}-{span}"
    assert trace_context.joined(trace_context.traceparent(trace, span)) == f"{trace}-{span}"
    child = trace_context.child_of(trace, "arn:aws:states:us-east-1:1:execution:m:e", 7)
    assert trace_context.trace_id(child) == trace
    assert trace_context.parent_span(child) == trace_context.span_id("arn:aws:states:us-east-1:1:execution:m:e", 7)


# -- the spans a history's events make (trace_spans.Track)

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:m"
EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:m:e"


def interleaved_history() -> list[dict]:
    """A Map (entered at event 2) of two iterations whose Waits end in the other order, then a Task retried once:
    previousEventId follows the commits, the flows say where each event happened."""
    rows = [
        ("ExecutionStarted", None, 0, {}), ("MapStateEntered", "", 0, {"name": "M"}), ("MapStateStarted", "", 0, {}),
        ("MapIterationStarted", "2.0", 0, {"index": 0}), ("WaitStateEntered", "2.0", 0, {"name": "W"}),
        ("MapIterationStarted", "2.1", 0, {"index": 1}), ("WaitStateEntered", "2.1", 0, {"name": "W"}),
        ("WaitStateExited", "2.1", 1000, {"name": "W"}), ("MapIterationSucceeded", "2.1", 1000, {"index": 1}),
        ("WaitStateExited", "2.0", 2000, {"name": "W"}), ("MapIterationSucceeded", "2.0", 2000, {"index": 0}),
        ("MapStateSucceeded", "", 2000, {}), ("MapStateExited", "", 2000, {"name": "M"}),
        ("TaskStateEntered", "", 2000, {"name": "T"}), ("TaskScheduled", "", 2000, {"resource": "invoke"}),
        ("TaskFailed", "", 2100, {"error": "Boom", "cause": "once"}), ("TaskScheduled", "", 3100, {}),
        ("TaskSucceeded", "", 3200, {}), ("TaskStateExited", "", 3200, {"name": "T"}),
        ("ExecutionSucceeded", None, 3200, {})]
    events = []
    for event_id, (kind, flow, at_ms, details) in enumerate(rows, start=1):
        key = ("stateEnteredEventDetails" if kind.endswith("StateEntered") else "stateExitedEventDetails"
               if kind.endswith("StateExited") else f"{kind[0].lower()}{kind[1:]}EventDetails")
        event = {"id": event_id, "previousEventId": event_id - 1, "type": kind, "timestamp": at_ms, key: details}
        if flow is not None:
            event["flow"] = flow
        events.append(event)
    return events


def spans_from(events: list[dict], cut: int = 0) -> list:
    track = Track(MACHINE, EXECUTION, TRACE)
    for event in events[:cut]:
        track.apply(event)
    return [span for event in events[cut:] for span in track.apply(event)]


def test_spans_nest_by_the_flow_each_event_happened_in_not_by_previous_event_id():
    made = spans_from(interleaved_history())
    spans = {(span.name, span.start_ms): span for span in made}
    by_id = {span.span_id: span for span in made}
    iteration_0, iteration_1 = spans[("iteration 0", 0)], spans[("iteration 1", 0)]
    assert (iteration_0.end_ms, iteration_1.end_ms) == (2000, 1000)
    waits = [span for span in made if span.name == "W"]
    assert sorted((by_id[span.parent_id].name, span.end_ms) for span in waits) == [
        ("iteration 0", 2000), ("iteration 1", 1000)]
    first, second = spans[("attempt 1", 2000)], spans[("attempt 2", 3100)]
    assert first.error == ("Boom", "once") and second.error is None
    assert by_id[first.parent_id].name == "T" and spans[("T", 2000)].error is None
    run = next(span for span in made if span.parent_id is None)
    assert run.name == "m" and (run.start_ms, run.end_ms) == (0, 3200)


def test_spans_rebuilt_from_any_point_are_the_rest_of_those_made_from_the_start():
    events = interleaved_history()
    whole = spans_from(events)
    ends = {}  # span id -> the index of the event that ended it
    track = Track(MACHINE, EXECUTION, TRACE)
    for index, event in enumerate(events):
        ends.update((span.span_id, index) for span in track.apply(event))
    for cut in range(len(events)):
        assert spans_from(events, cut) == [span for span in whole if ends[span.span_id] >= cut]
