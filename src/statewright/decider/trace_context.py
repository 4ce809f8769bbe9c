"""Trace context: which trace an execution belongs to, the ids of its spans, and the headers that carry them.

An execution of a state machine whose ``tracingConfiguration`` is enabled keeps a trace context from its start to
its end (``ExecutionState.trace``): the trace id, and the span it continues when StartExecution was given a
``traceHeader`` (or an ``X-Amzn-Trace-Id`` HTTP header) that joins an existing trace. Every span id is derived from
the execution ARN and the history event that opens the span (``span_id``): the node that records a state's exit
after a crash or a shard move names the span the first node opened, the spans a commit records need no state kept
anywhere, and an integration names the span of the attempt it serves from its dispatch alone.

The trace id follows X-Ray's rule (its first 32 bits are the epoch second it was made in), so one id reads as a
W3C ``traceparent`` and as an X-Ray ``Root``. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re

_XRAY_ROOT = re.compile(r"1-([0-9a-f]{8})-([0-9a-f]{24})")
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")


def new_trace(now_s: int, random_bits: int) -> str:
    """A fresh trace id (32 hex digits): the epoch second, then 96 random bits, as X-Ray makes them."""
    return f"{now_s & 0xFFFFFFFF:08x}{random_bits & ((1 << 96) - 1):024x}"


def derived_trace(execution_arn: str) -> str:
    """A trace id made from an execution's ARN, where no clock or random draw is at hand (the same each time it is
    made: a transfer may run twice)."""
    return hashlib.blake2b(execution_arn.encode(), digest_size=16, person=b"trace").hexdigest()


def joined(header: str) -> str | bool | None:
    """The trace context a ``traceHeader`` asks an execution to join: ``"TRACE-PARENT"`` (or ``"TRACE"`` when it
    names no parent span), False when it says not to sample (``Sampled=0``), None when it names no trace (the
    execution starts its own). X-Ray's form (``Root=1-...;Parent=...;Sampled=1``) and W3C's ``traceparent`` are
    read."""
    header = header.strip()
    match = _TRACEPARENT.fullmatch(header)
    if match is not None:
        trace, parent, flags = match.groups()
        if int(flags, 16) & 1 == 0:
            return False
        if set(trace) == {"0"}:
            return None
        return trace if set(parent) == {"0"} else f"{trace}-{parent}"
    fields = {}
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        fields[key.strip().lower()] = value.strip().lower()
    if fields.get("sampled") == "0":
        return False
    root = _XRAY_ROOT.fullmatch(fields.get("root", ""))
    if root is None or set(root.group(1) + root.group(2)) == {"0"}:  # all zero: no trace (W3C's rule)
        return None
    trace = root.group(1) + root.group(2)
    parent = fields.get("parent", "")
    return f"{trace}-{parent}" if _SPAN_ID.fullmatch(parent) and set(parent) != {"0"} else trace


def trace_id(trace: str) -> str:
    """The trace id (32 hex digits) of an execution's trace context."""
    return trace[:32]


def parent_span(trace: str) -> str | None:
    """The span an execution's trace context continues (16 hex digits), if it joined one."""
    return trace[33:] or None


def span_id(execution_arn: str, event_id: int) -> str:
    """The span opened by history event ``event_id`` of an execution (16 hex digits, never all zero): the
    execution's run (ExecutionStarted, ExecutionRedriven), a state (its Entered event), a Map iteration, a task
    attempt (its Scheduled event)."""
    digest = hashlib.blake2b(f"{execution_arn}#{event_id}".encode(), digest_size=8).hexdigest()
    return digest if digest != "0" * 16 else "0" * 15 + "1"


def child_of(trace: str, execution_arn: str, event_id: int) -> str:
    """The trace context of an execution started under span ``event_id`` of a traced one (a map run's child, under
    its MapRunStarted)."""
    return f"{trace_id(trace)}-{span_id(execution_arn, event_id)}"


def traceparent(trace: str, span: str) -> str:
    """W3C's ``traceparent`` header naming ``span`` of the trace, sampled."""
    return f"00-{trace_id(trace)}-{span}-01"


def xray_header(trace: str, span: str | None = None) -> str:
    """X-Ray's ``X-Amzn-Trace-Id`` header naming ``span`` of the trace, sampled (what Lambda and the AWS services
    read); without a span, as DescribeExecution shows a traced execution's (AWS's recordings:
    ``Root=1-612601bf-c54eff48a04f8cc9ce170772;Sampled=1``)."""
    trace = trace_id(trace)
    parent = "" if span is None else f";Parent={span}"
    return f"Root=1-{trace[:8]}-{trace[8:]}{parent};Sampled=1"
