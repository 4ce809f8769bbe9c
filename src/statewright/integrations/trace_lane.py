"""The trace lane: the process that turns traced executions' history events into spans and exports them
(traces.ExecutionTraces sends it the events; traces.py's docstring says what the spans are). It runs at the lowest
CPU priority, so what it costs comes out of what the engine leaves idle, and it reads its messages from a pipe, so
it exits when the server does, however the server went.

Its messages (engine/pipe_messages.py): first the settings (endpoint, node id, log level, log format); then
``("events", machine ARN, execution ARN, trace, events)``, ``("replay", machine ARN, execution ARN, trace,
events)`` (what the execution did before: its open spans rebuilt, nothing exported), ``("forget", execution ARN)``.
"""

from __future__ import annotations

import logging
import sys

from .. import logs
from ..engine.pipe_messages import take
from .trace_spans import Track
from .traces import Tracing

log = logging.getLogger("statewright.traces")


def serve() -> None:
    """The lane process (traces.LANE_BOOT): until its stdin closes."""
    source = sys.stdin.buffer
    settings = take(source)
    if settings is None:
        return
    endpoint, node_id, log_level, log_format = settings
    logs.configure(log_level, log_format)
    tracing = Tracing(endpoint, node_id)
    tracks: dict[str, Track] = {}
    try:
        while (message := take(source)) is not None:
            try:
                _apply(message, tracks, tracing)
            except Exception:  # a bug here must not stop the spans of other executions
                arn = message[2] if message[0] != "forget" else message[1]  # the execution's ARN
                log.exception("tracing %s failed", arn)
                tracks.pop(arn, None)
    finally:
        tracing.close()


def _apply(message: tuple, tracks: dict[str, Track], tracing: Tracing) -> None:
    kind = message[0]
    if kind == "forget":
        tracks.pop(message[1], None)
        return
    _, machine_arn, execution_arn, trace, events = message
    track = tracks.get(execution_arn)
    if track is None or track.trace != trace or kind == "replay":
        track = tracks[execution_arn] = Track(machine_arn, execution_arn, trace)
    for event in events:
        if event["id"] <= track.last_event_id:
            continue  # read already (in a replay)
        ended = track.apply(event)
        if kind == "events":
            for span in ended:
                tracing.export(span)
    if track.closed:
        del tracks[execution_arn]
