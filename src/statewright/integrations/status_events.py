"""Execution status change events, delivered from the outbox: to an EventBridge bus and to HTTP webhooks.

The engine dispatches one event per status change of a Standard execution (RUNNING, SUCCEEDED, FAILED, TIMED_OUT,
ABORTED, PENDING_REDRIVE) in the commit that makes it (``Step.status_changed``): an event is never sent for a
transition that did not commit, and one whose commit landed is sent even if the server dies first (the outbox row
is read back). So delivery is at least once: a crash after sending and before the acknowledgement sends it again.

Each event goes to every destination: EventBridge's PutEvents through botocore (``serve --status-events-bus``;
source ``aws.states``, detail type "Step Functions Execution Status Change", the execution's ARN as its resource,
in the execution's region), and a POST of the whole event as EventBridge would deliver it (``version``, ``id``,
``detail-type``, ``source``, ``account``, ``time``, ``region``, ``resources``, ``detail``) to each webhook of the
``serve --webhooks`` file (a JSON array of http(s) URLs). The event's ``time`` is when the status changed, and its
``id`` is the same every time the event is sent, so a consumer can drop a repeat. An execution's events go out one
at a time, in the order of their commits (events of different executions go out side by side). A destination
that fails is tried again with backoff (1 s doubling to 60 s) for up to DELIVERY_S, a day, as EventBridge retries a
target; an event still undelivered then is dropped and counted. At most IN_FLIGHT_MAX events are being delivered
at once; more stay in the outbox until there is room (backpressure, so a dead destination never crowds the other
integrations out of the engine's outbox window).

Sources: AWS's "Step Functions events in EventBridge" page (the source, the detail type, the detail's fields).
Real EventBridge refuses a PutEvents source starting with ``aws.``; this is for the buses of local emulators
(moto, LocalStack) and for webhooks.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import Counter

from ..asl.jsonio import dumps, loads
from ..engine.commands import AckDispatch
from ..store.base import Dispatch
from .aws.clients import AwsClients
from .dispatcher import Dispatcher
from .http import Failure, Request, exchange

log = logging.getLogger("statewright.integrations")

SOURCE = "aws.states"
DETAIL_TYPE = "Step Functions Execution Status Change"
IN_FLIGHT_MAX = 1_000
DELIVERY_S = 24 * 3600.0  # how long one event is tried before it is dropped (EventBridge's default retry policy)
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0
WEBHOOK_TIMEOUT_S = 10.0


class InvalidWebhooks(ValueError):
    """The --webhooks file cannot be used: the message says why."""


def read_webhooks(path: str | os.PathLike[str]) -> list[str]:
    try:
        with open(path, "rb") as stream:
            urls = loads(stream.read())
    except (OSError, ValueError) as error:
        raise InvalidWebhooks(f"cannot read the webhooks file {path}: {error}") from None
    if not isinstance(urls, list) or not all(
            isinstance(url, str) and urlsplit(url).scheme in ("http", "https") and urlsplit(url).hostname
            for url in urls):
        raise InvalidWebhooks(f"the webhooks file {path} must hold a JSON array of http or https URLs")
    return urls


class StatusEvents:
    def __init__(self, dispatcher: Dispatcher, clients: AwsClients, room_again: Callable[[], None], registry: Any, *,
                 bus: str | None = None, webhooks: list[str] | None = None) -> None:
        self.dispatcher = dispatcher
        self.clients = clients
        self.room_again = room_again
        self.bus = bus
        self.webhooks = webhooks or []
        self._in_flight = 0
        self._last: dict[str, asyncio.Future] = {}  # per execution, the delivery the next one waits for
        self._delivered = Counter("statewright_status_events_delivered", "Execution status change events a "
                                  "destination took, by destination", ["destination"], registry=registry)
        self._failed = Counter("statewright_status_events_failed", "Attempts to deliver a status change event "
                               "that failed (each is tried again), by destination", ["destination"],
                               registry=registry)
        self._dropped = Counter("statewright_status_events_dropped", "Status change events given up on after "
                                "DELIVERY_S of failures, by destination", ["destination"], registry=registry)
        dispatcher.register("status", self.offer)

    @property
    def enabled(self) -> bool:
        return self.bus is not None or bool(self.webhooks)

    def offer(self, dispatch: Dispatch) -> Any:
        if self._in_flight >= IN_FLIGHT_MAX:
            return False  # stays in the outbox; ``room_again`` when one is done
        self._in_flight += 1
        arn = dispatch.execution_arn
        before = self._last.get(arn)
        done = self._last[arn] = asyncio.get_running_loop().create_future()
        return self._deliver(dispatch, before, done)

    async def _deliver(self, dispatch: Dispatch, before: asyncio.Future | None, done: asyncio.Future) -> None:
        try:
            if before is not None:
                await asyncio.shield(before)  # the execution's earlier event first
            event = self.event(dispatch)
            pending = ([("eventbridge", self._put_events)] if self.bus is not None else []) + [
                (url, self._post) for url in self.webhooks]
            loop = asyncio.get_running_loop()
            give_up_at, pause_s = loop.time() + DELIVERY_S, RETRY_FIRST_S
            while pending:
                pending = [(name, send) for name, send in pending if not await self._sent(name, send, event)]
                if pending and loop.time() + pause_s > give_up_at:
                    for name, _ in pending:
                        self._dropped.labels(_label(name)).inc()
                    log.error("gave up delivering the %s event of %s to %s", event["detail"]["status"],
                              dispatch.execution_arn, ", ".join(name for name, _ in pending))
                    break
                if pending:
                    await asyncio.sleep(pause_s)
                    pause_s = min(pause_s * 2, RETRY_MAX_S)
            await self.dispatcher.report(AckDispatch(dispatch.execution_arn, dispatch.dispatch_id), DELIVERY_S)
        finally:
            done.set_result(None)
            if self._last.get(dispatch.execution_arn) is done:
                del self._last[dispatch.execution_arn]
            self._in_flight -= 1
            self.room_again()

    def event(self, dispatch: Dispatch) -> dict[str, Any]:
        """The event as EventBridge delivers it to a target: its id fixed by its outbox row, its time the commit's."""
        detail = dispatch.payload["detail"]
        region, account = detail["executionArn"].split(":")[3:5]  # the execution's (--auth sigv4: one of several)
        at = datetime.datetime.fromtimestamp(dispatch.payload["time"] / 1000, datetime.UTC)
        event_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{dispatch.execution_arn}/{dispatch.dispatch_id}")
        return {"version": "0", "id": str(event_id), "detail-type": DETAIL_TYPE, "source": SOURCE,
                "account": account, "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": region,
                "resources": [detail["executionArn"]], "detail": detail}

    async def _sent(self, name: str, send: Callable[..., Any], event: dict[str, Any]) -> bool:
        try:
            await send(name, event)
        except Exception as error:  # any failure of a destination: try it again later
            self._failed.labels(_label(name)).inc()
            log.warning("status event for %s not delivered to %s: %s", event["resources"][0], name, error)
            return False
        self._delivered.labels(_label(name)).inc()
        return True

    async def _put_events(self, name: str, event: dict[str, Any]) -> None:
        entry = {"Source": SOURCE, "DetailType": DETAIL_TYPE, "Detail": dumps(event["detail"]),
                 "Resources": event["resources"], "EventBusName": self.bus}

        def put() -> dict:
            return self.clients.client("events", event["region"]).put_events(Entries=[entry])

        async with self.clients.slot("events"):
            answer = await self.clients.run(put)
        if answer.get("FailedEntryCount"):
            raise RuntimeError(f"EventBridge refused the event: {answer['Entries'][0]}")

    async def _post(self, url: str, event: dict[str, Any]) -> None:
        try:
            async with asyncio.timeout(WEBHOOK_TIMEOUT_S):
                reply = await exchange(Request("POST", url, [("Content-Type", "application/json")],
                                               dumps(event).encode()))
        except Failure as failure:
            raise RuntimeError(failure.cause) from None
        if not 200 <= reply.status < 300:
            raise RuntimeError(f"the webhook answered {reply.status} {reply.reason}")


def _label(name: str) -> str:
    return "eventbridge" if name == "eventbridge" else "webhook"
