"""The trace context an execution keeps: the headers it reads (X-Ray's and W3C's), the ids it makes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statewright.decider import trace_context

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
