"""Execution logs: the history events of executions whose state machine has a ``loggingConfiguration``, delivered
to its CloudWatch Logs log group as AWS's log records, with PutLogEvents through botocore (``AwsClients``).

Once per tick the engine hands over the history events its commit landed (for STANDARD executions, committed
history only) and those its EXPRESS executions recorded in memory: ``ExecutionLogs.offer``, on the engine thread,
drops at once what goes to no log (a state machine known to log nothing) and queues the rest, bounded
(``QUEUED_EVENTS_MAX``: past it the oldest are dropped and counted). On the event loop the queue is filtered by each
state machine's level, shaped as records and sent per log stream in batches (PutLogEvents' limits), each call on
the clients' threads, retried with backoff (``SEND_ATTEMPTS_MAX``) and then dropped: delivery is best effort, as
AWS documents it, and never blocks or fails an execution.

From AWS's documentation: the record's fields (ids, timestamps and the redrive count as strings), the event types
each level logs (the table of "Log levels"; moto's and LocalStack's copies agree), the validation of a destination
by creating a log stream in its group. Inferred: the log stream's name (AWS's streams are ``states/<state machine
name>/<date>/<id>``; the id here is fixed), and the configuration used being the state machine's current one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from botocore.exceptions import BotoCoreError, ClientError

from ..decider.step import without_data
from ..engine.batch import Logged
from .aws.clients import AwsClients
from .history_backlog import HistoryBacklog

log = logging.getLogger("statewright.logs")

FATAL_TYPES = frozenset({"ExecutionAborted", "ExecutionFailed", "ExecutionTimedOut"})
ERROR_TYPES = FATAL_TYPES | frozenset({
    "FailStateEntered", "LambdaFunctionFailed", "LambdaFunctionScheduleFailed", "LambdaFunctionStartFailed",
    "LambdaFunctionTimedOut", "MapStateAborted", "MapStateFailed", "MapIterationAborted", "MapIterationFailed",
    "MapRunAborted", "MapRunFailed", "ParallelStateAborted", "ParallelStateFailed", "TaskFailed", "TaskStartFailed",
    "TaskStateAborted", "TaskSubmitFailed", "TaskTimedOut", "WaitStateAborted", "ActivityFailed",
    "ActivityScheduleFailed", "ActivityTimedOut"})
QUEUED_EVENTS_MAX = 100_000  # history events waiting for delivery; past it the oldest are dropped
BATCH_EVENTS_MAX = 10_000  # PutLogEvents' limits: events per call, and bytes (each message plus 26)
BATCH_BYTES_MAX = 1_048_576
EVENT_OVERHEAD_BYTES = 26
SEND_ATTEMPTS_MAX = 5
RETRY_FIRST_S = 0.2
RETRY_MAX_S = 5.0
CONFIGURATION_CACHE_S = 1.0  # how long a state machine's destination is taken as known
VALIDATION_STREAM = "log_stream_created_by_aws_to_validate_log_delivery_subscriptions"  # as AWS names it


@dataclass(frozen=True, slots=True)
class Destination:
    region: str
    group: str
    level: str  # ALL, ERROR or FATAL
    include_data: bool

    def logs(self, event_type: str) -> bool:
        return self.level == "ALL" or event_type in (ERROR_TYPES if self.level == "ERROR" else FATAL_TYPES)


def destination_of(configuration: dict[str, Any] | None) -> Destination | None:
    """Where a checked loggingConfiguration sends records (None: level OFF)."""
    if not configuration or configuration.get("level", "OFF") == "OFF":
        return None
    arn = configuration["destinations"][0]["cloudWatchLogsLogGroup"]["logGroupArn"]
    parts = arn.split(":")  # arn:aws:logs:REGION:ACCOUNT:log-group:NAME:*
    return Destination(parts[3], parts[6], configuration["level"], configuration.get("includeExecutionData", False))


DATA_MAX = 248 * 1024  # escaped input or output a record carries; past it, truncated (AWS's rule)


def record(execution_arn: str, redrive_count: int, event: dict[str, Any], include_data: bool) -> dict[str, Any]:
    """One history event as AWS writes it to CloudWatch Logs."""
    details = next((value for key, value in event.items() if key.endswith("EventDetails")), {})
    return {"id": str(event["id"]), "type": event["type"],
            "details": _truncated(details) if include_data else without_data(details),
            "previous_event_id": str(event["previousEventId"]), "event_timestamp": str(event["timestamp"]),
            "execution_arn": execution_arn, "redrive_count": str(redrive_count)}


def _truncated(details: dict[str, Any]) -> dict[str, Any]:
    """An input or output whose escaped text passes DATA_MAX, cut to fit and marked truncated."""
    cut = dict(details)
    for key in ("input", "output"):
        text = cut.get(key)
        if isinstance(text, str) and len(orjson.dumps(text)) > DATA_MAX:
            while len(orjson.dumps(text)) > DATA_MAX:  # escapes make the cut shorter than DATA_MAX characters
                text = text[:len(text) * DATA_MAX // len(orjson.dumps(text)) - 1]
            cut[key], cut[f"{key}Details"] = text, {"truncated": True}
    return cut


async def check_destination(clients: AwsClients, configuration: dict[str, Any]) -> str | None:
    """Why the log group of a loggingConfiguration cannot take records (None: it can), found as AWS finds it: by
    creating a log stream in it."""
    destination = destination_of(configuration)
    if destination is None:
        return None

    def create() -> None:
        clients.client("logs", destination.region).create_log_stream(logGroupName=destination.group,
                                                                     logStreamName=VALIDATION_STREAM)
    try:
        await clients.run(create)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceAlreadyExistsException":
            return "Log Destination not found."
    except BotoCoreError as exc:  # no endpoint or credentials: say so rather than guess
        return f"Log Destination not reachable ({exc})."
    return None


class ExecutionLogs:
    def __init__(self, clients: AwsClients, configuration_of: Callable[[str], Awaitable[dict[str, Any] | None]]
                 ) -> None:
        """``configuration_of(state machine ARN)``: its loggingConfiguration now (None: it is gone)."""
        self._clients = clients
        self._configuration_of = configuration_of
        self._destinations: dict[str, tuple[Destination | None, float]] = {}  # written on the loop only
        self._backlog = HistoryBacklog(QUEUED_EVENTS_MAX)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining = False
        self._streams: set[tuple[str, str, str]] = set()  # (region, group, stream) known to exist

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Deliver on ``loop`` (the server's), beginning with what the engine logged before it ran."""
        with self._lock:
            self._loop = loop
        self._wake()

    def forget(self, machine_arn: str) -> None:
        """The state machine changed: read its configuration again before its next records."""
        self._destinations.pop(machine_arn, None)

    def offer(self, logged: list[Logged]) -> None:
        """On the engine thread, once per tick: never blocks."""
        now_s = time.monotonic()
        kept = [item for item in logged if not self._known_silent(item[0], now_s)]
        if not kept:
            return
        with self._lock:
            self._backlog.add(kept)
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            if self._loop is None or self._draining or not self._backlog:
                return
            self._draining = True
            loop = self._loop
        loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._drain()))

    def _known_silent(self, machine_arn: str, now_s: float) -> bool:
        known = self._destinations.get(machine_arn)
        return known is not None and known[0] is None and now_s - known[1] < CONFIGURATION_CACHE_S

    async def _drain(self) -> None:
        try:
            while True:
                with self._lock:
                    taken = self._backlog.take()
                    if not taken:
                        self._draining = False
                        return
                await self._deliver(taken)
        except Exception:  # a bug here must not stop later deliveries
            log.exception("delivering execution logs failed")
            with self._lock:
                self._draining = False

    async def _deliver(self, taken: list[Logged]) -> None:
        streams: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        day = datetime.now(UTC).strftime("%Y/%m/%d")
        for machine_arn, execution_arn, redrive_count, events, _ in taken:
            destination = await self._destination(machine_arn)
            if destination is None:
                continue
            stream = (destination.region, destination.group, f"states/{machine_arn.rsplit(':', 1)[1]}/{day}/sw")
            for event in events:
                if destination.logs(event["type"]):
                    message = orjson.dumps(record(execution_arn, redrive_count, event,
                                                  destination.include_data)).decode()
                    streams.setdefault(stream, []).append({"timestamp": event["timestamp"], "message": message})
        for stream, items in streams.items():
            items.sort(key=lambda item: item["timestamp"])  # PutLogEvents takes a batch in time order
            for batch in _batches(items):
                await self._send(stream, batch)

    async def _destination(self, machine_arn: str) -> Destination | None:
        known = self._destinations.get(machine_arn)
        if known is None or time.monotonic() - known[1] >= CONFIGURATION_CACHE_S:
            known = (destination_of(await self._configuration_of(machine_arn)), time.monotonic())
            self._destinations[machine_arn] = known
        return known[0]

    async def _send(self, stream: tuple[str, str, str], batch: list[dict[str, Any]]) -> None:
        region, group, name = stream

        def put() -> None:
            client = self._clients.client("logs", region)
            if stream not in self._streams:
                try:
                    client.create_log_stream(logGroupName=group, logStreamName=name)
                except ClientError as exc:
                    if exc.response["Error"]["Code"] != "ResourceAlreadyExistsException":
                        raise
                self._streams.add(stream)
            client.put_log_events(logGroupName=group, logStreamName=name, logEvents=batch)

        pause_s = RETRY_FIRST_S
        for attempt in range(SEND_ATTEMPTS_MAX):
            try:
                await self._clients.run(put)
                return
            except (ClientError, BotoCoreError) as exc:
                self._streams.discard(stream)  # a stream deleted meanwhile is made again
                if attempt + 1 == SEND_ATTEMPTS_MAX:
                    log.warning("dropping %d execution log records for %s: %s", len(batch), group, exc)
                    self._backlog.dropped_events += len(batch)
                    return
            await asyncio.sleep(pause_s)
            pause_s = min(pause_s * 2, RETRY_MAX_S)


def _batches(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split into PutLogEvents calls within its event and byte limits."""
    batches: list[list[dict[str, Any]]] = [[]]
    size = 0
    for item in items:
        cost = len(item["message"].encode()) + EVENT_OVERHEAD_BYTES
        if batches[-1] and (len(batches[-1]) >= BATCH_EVENTS_MAX or size + cost > BATCH_BYTES_MAX):
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += cost
    return batches
