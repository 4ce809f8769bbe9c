"""Traces: the executions of state machines whose ``tracingConfiguration`` is enabled, exported as OpenTelemetry
spans over OTLP/HTTP (``--otlp-endpoint``, or the standard ``OTEL_EXPORTER_OTLP_ENDPOINT``), through the
OpenTelemetry SDK's batch processor and OTLP exporter.

Two sources of spans:
- **The history** (``ExecutionTraces``): once per tick the engine hands over the history events its commit landed
  (as it does for the execution logs); ``offer`` keeps those of traced executions, bounded, and a thread of its own
  sends them to the trace lane (trace_lane.py), a process at the lowest CPU priority that turns them into spans
  (trace_spans.py) as each ends and exports them. A span is therefore exported only once the event that ends it has
  committed. The open spans of an execution this node has not followed from its start (its shard came from
  another node, this node restarted, or it was evicted from ``TRACKS_MAX``) are rebuilt from the stored history
  before its new events are read, and those already ended are not sent again.
- **The calls** (``CallSpans``): an HTTP Task's request and an AWS call each get a client span under the
  attempt's span, and carry the context on: ``traceparent`` on HTTP requests, ``X-Amzn-Trace-Id`` on AWS requests
  (Lambda's, and every other service's, as X-Ray reads it; a nested StartExecution joins the trace by it).

Export is best effort, as AWS's X-Ray is: a span the exporter cannot deliver, or that overflows a queue, is dropped
and never holds up an execution. Without an endpoint no spans are made, and the context still travels on the calls.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from .. import logs
from ..decider import trace_context
from ..decider.outcomes import AttemptFailed
from ..engine.batch import Logged
from ..engine.pipe_messages import put
from .history_backlog import HistoryBacklog
from .trace_spans import RUN_ENDS, RUN_STARTS, FinishedSpan

log = logging.getLogger("statewright.traces")

CLOSE_S = 3.0  # how long a stopping server waits for the spans still queued to be exported
EXPORT_LOG_EVERY_S = 60.0  # the exporter's complaints (an endpoint down: several lines per batch), one this often
QUEUED_EVENTS_MAX = 100_000  # history events waiting to become spans; past it the oldest are dropped
TRACKS_MAX = 10_000  # executions whose open spans are kept; the least recently seen is rebuilt when it comes back
RESTART_PAUSE_S = 30.0  # a trace lane that died young (LANE_YOUNG_S) is started again only this long after
LANE_YOUNG_S = 5.0  # a lane that dies sooner after its start is taken to fail at starting, not to have been killed
# The lane process lowers its priority before it imports statewright; Ctrl-C is for the server, not for it
LANE_BOOT = ("import os, signal; os.nice(19); signal.signal(signal.SIGINT, signal.SIG_IGN); "
             "from statewright.integrations.trace_lane import serve; serve()")
SPANS_QUEUED_MAX = 65_536  # finished spans waiting for the exporter (the SDK's batch processor's queue)
ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"


def endpoint_of(given: str | None) -> str | None:
    """The OTLP/HTTP endpoint spans go to: ``--otlp-endpoint``, else the standard environment variable (None:
    no export). ValueError for one that is not an http(s) URL."""
    endpoint = given or os.environ.get(ENDPOINT_ENV) or None
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the OTLP endpoint {endpoint!r} is not an http or https URL (e.g. "
                             "http://127.0.0.1:4318); fix --otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT")
    return endpoint


class Tracing:
    """The OpenTelemetry SDK set up for one node: its tracer provider (resource: service ``statewright``, the
    node's address), a batch processor exporting over OTLP/HTTP to ``endpoint`` (the base URL, as
    OTEL_EXPORTER_OTLP_ENDPOINT gives it: ``/v1/traces`` is added)."""

    def __init__(self, endpoint: str, node_id: str) -> None:
        self.node_id = node_id
        # Imported here: a node that exports no traces does not load the SDK
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        url = endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"
        self.endpoint = url
        self.resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "statewright"),
                                         "service.instance.id": node_id})
        self.exporter = OTLPSpanExporter(endpoint=url)
        logging.getLogger(OTLPSpanExporter.__module__).addFilter(_Sparse(EXPORT_LOG_EVERY_S))
        self.processor = BatchSpanProcessor(self.exporter, max_queue_size=SPANS_QUEUED_MAX)
        # Stopped by ``close``, within CLOSE_S, not at the interpreter's exit (where an endpoint that does not
        # answer would hold the process for the exporter's retries of every batch)
        self.provider = TracerProvider(resource=self.resource, shutdown_on_exit=False)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("statewright")

    def export(self, span: FinishedSpan) -> None:
        """Hand a span read from the history to the batch processor."""
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
        from opentelemetry.trace.status import Status, StatusCode

        trace = int(trace_context.trace_id(span.trace), 16)
        flags = TraceFlags(TraceFlags.SAMPLED)
        parent = None if span.parent_id is None else SpanContext(trace, int(span.parent_id, 16), False, flags)
        status = Status(StatusCode.OK) if span.error is None else Status(StatusCode.ERROR,
                                                                          ": ".join(filter(None, span.error)))
        attributes = dict(span.attributes)
        if span.error is not None:
            attributes["aws.stepfunctions.error"], attributes["aws.stepfunctions.cause"] = span.error
        self.processor.on_end(ReadableSpan(
            span.name, SpanContext(trace, int(span.span_id, 16), False, flags), parent, self.resource, attributes,
            [Event(name, attrs, at_ms * 1_000_000) for name, at_ms, attrs in span.events],
            kind=SpanKind.SERVER if "aws.stepfunctions.execution.run" in span.attributes else SpanKind.INTERNAL,
            status=status, start_time=span.start_ms * 1_000_000, end_time=span.end_ms * 1_000_000,
            instrumentation_scope=InstrumentationScope("statewright")))

    def close(self) -> None:
        """Export what is queued, for CLOSE_S at most (what is left then is dropped), then stop."""
        closing = threading.Thread(target=self._close, name="statewright-traces-close", daemon=True)
        closing.start()
        closing.join(CLOSE_S)
        if closing.is_alive():
            log.warning("stopping without the traces still queued: %s did not take them within %g s",
                        self.endpoint, CLOSE_S)
            logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)  # a line per batch left otherwise
            self.exporter.shutdown()  # its retries end; the daemon threads go with the process

    def _close(self) -> None:
        self.provider.force_flush(int(CLOSE_S * 1000))
        self.provider.shutdown()


class _Sparse(logging.Filter):
    """Lets a record through once every ``every_s``, saying how many it held back meanwhile."""

    def __init__(self, every_s: float) -> None:
        super().__init__()
        self.every_s = every_s
        self._next_s = 0.0
        self._held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now_s = time.monotonic()
        if now_s < self._next_s:
            self._held += 1
            return False
        if self._held:
            record.msg = f"{record.msg} ({self._held} more such lines in the last {self.every_s:g} s held back)"
            self._held = 0
        self._next_s = now_s + self.every_s
        return True


class ExecutionTraces:
    """The history's spans (module docstring), made in a process of their own (the trace lane, trace_lane.py) at
    the lowest CPU priority: building and encoding a span costs more than the engine spends on the step that
    ended it, and on the server's interpreter lock it would slow every execution. A thread here takes the
    backlog and sends it on; ``history_of(execution ARN)`` (its stored history events, read on that thread) gives
    the lane what an execution did before this node followed it."""

    def __init__(self, tracing: Tracing, history_of: Callable[[str], list[dict[str, Any]]]) -> None:
        """``tracing``: where the spans go (the lane exports them itself, to the same endpoint)."""
        self._settings = (tracing.endpoint, tracing.node_id, *logs.configured)
        self._history_of = history_of
        self._known: OrderedDict[str, None] = OrderedDict()  # executions the lane follows (the same as its own)
        self._backlog = HistoryBacklog(QUEUED_EVENTS_MAX)
        self._wake = threading.Condition()
        self._stopping = False
        self._lane: subprocess.Popen | None = None
        self._lane_failed_at = -RESTART_PAUSE_S
        self._lane_started_at = 0.0
        self._thread = threading.Thread(target=self._run, name="statewright-traces", daemon=True)
        self._thread.start()

    def offer(self, logged: list[Logged]) -> None:
        """On the engine thread, once per tick: never blocks long (a lock held only to queue)."""
        traced = [item for item in logged if item[4] is not None]
        if not traced:
            return
        with self._wake:
            self._backlog.add(traced)
            self._wake.notify()

    def close(self) -> None:
        """Send what is queued, let the lane export it (CLOSE_S at most), stop."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join(timeout=CLOSE_S)
        lane = self._lane
        if lane is not None:
            with contextlib.suppress(OSError):
                lane.stdin.close()
            try:
                lane.wait(CLOSE_S + 2)
            except subprocess.TimeoutExpired:
                lane.kill()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._backlog and not self._stopping:
                    self._wake.wait()
                taken = self._backlog.take()
                stopping = self._stopping
            for item in taken:
                try:
                    self._send(item)
                except Exception:  # a bug here must not stop the spans of other executions
                    log.exception("tracing %s failed", item[1])
                    self._known.pop(item[1], None)
            if stopping:
                return

    def _send(self, item: Logged) -> None:
        """Send an entry to the lane; one that finds the lane dead goes to the next lane, started at once (unless
        the lane keeps dying young: then after RESTART_PAUSE_S, and what comes meanwhile is dropped)."""
        for _ in range(2):
            lane = self._lane_process()
            if lane is None or not item[3]:
                return
            try:
                for message in self._messages(item):
                    put(lane.stdin, message)
                return
            except (OSError, ValueError):
                young = time.monotonic() - self._lane_started_at < LANE_YOUNG_S
                log.warning("the trace lane's process stopped (exit status %s); %s", lane.poll(),
                            f"another starts in {RESTART_PAUSE_S:g} s, its spans dropped until then" if young
                            else "another starts now, and rebuilds the open spans")
                lane.kill()
                self._lane, self._known = None, OrderedDict()
                self._lane_failed_at = time.monotonic() if young else -RESTART_PAUSE_S

    def _messages(self, item: Logged) -> list[tuple]:
        machine_arn, execution_arn, _, events, trace = item
        messages: list[tuple] = []
        if execution_arn not in self._known and events[0]["type"] not in RUN_STARTS:
            # followed from the middle: its open spans from its history (those it ended were sent by whoever
            # recorded them)
            before = [event for event in self._history_of(execution_arn) if event["id"] < events[0]["id"]]
            messages.append(("replay", machine_arn, execution_arn, trace, before))
        messages.append(("events", machine_arn, execution_arn, trace, events))
        self._known[execution_arn] = None
        self._known.move_to_end(execution_arn)
        if events[-1]["type"] in RUN_ENDS:  # the lane drops it too
            del self._known[execution_arn]
        while len(self._known) > TRACKS_MAX:
            messages.append(("forget", self._known.popitem(last=False)[0]))
        return messages

    def _lane_process(self) -> subprocess.Popen | None:
        if self._lane is None and time.monotonic() - self._lane_failed_at >= RESTART_PAUSE_S:
            self._lane = subprocess.Popen([sys.executable, "-c", LANE_BOOT], stdin=subprocess.PIPE)
            self._lane_started_at = time.monotonic()
            put(self._lane.stdin, self._settings)
        return self._lane


class CallSpans:
    """Client spans for the calls a traced attempt makes, and the headers that carry their context. ``tracing``:
    None exports nothing (the headers then name the attempt's own span)."""

    def __init__(self, tracing: Tracing | None = None) -> None:
        self._tracing = tracing

    @contextlib.contextmanager
    def call(self, payload: dict[str, Any], name: str, attributes: dict[str, Any]) -> Iterator[CallTrace | None]:
        """Around one call of the attempt ``payload`` dispatches: its trace (None: untraced)."""
        trace = payload.get("trace")
        if trace is None or "scheduled_id" not in payload:
            yield None
            return
        attempt = trace_context.span_id(payload["execution"], payload["scheduled_id"])
        if self._tracing is None:
            yield CallTrace(trace, attempt, None)
            return
        from opentelemetry import trace as otel
        from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

        parent = SpanContext(int(trace_context.trace_id(trace), 16), int(attempt, 16), True,
                             TraceFlags(TraceFlags.SAMPLED))
        context = otel.set_span_in_context(NonRecordingSpan(parent))
        with self._tracing.tracer.start_as_current_span(name, context=context, kind=SpanKind.CLIENT,
                                                        attributes=attributes, end_on_exit=True) as span:
            yield CallTrace(trace, f"{span.get_span_context().span_id:016x}", span)


class CallTrace:
    """One traced call: the headers to send, and its outcome to record."""

    def __init__(self, trace: str, span_id: str, span: Any) -> None:
        self.trace = trace
        self.span_id = span_id
        self._span = span

    @property
    def traceparent(self) -> str:
        return trace_context.traceparent(self.trace, self.span_id)

    @property
    def xray_header(self) -> str:
        return trace_context.xray_header(self.trace, self.span_id)

    def ended(self, outcome: Any, attributes: dict[str, Any] | None = None) -> None:
        """Record the call's outcome (a failed attempt's error marks the span failed)."""
        if self._span is None:
            return
        from opentelemetry.trace.status import Status, StatusCode

        if attributes:
            self._span.set_attributes(attributes)
        if isinstance(outcome, AttemptFailed):
            self._span.set_status(Status(StatusCode.ERROR, f"{outcome.error}: {outcome.cause or ''}"))
            self._span.set_attribute("aws.stepfunctions.error", outcome.error)
