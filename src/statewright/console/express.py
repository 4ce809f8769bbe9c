"""The last Express executions of each state machine on this node, with their events, for the console: an Express
execution keeps no history (AWS sends it to CloudWatch Logs), so a local user would otherwise see nothing of it.

Fed on the engine thread from the same committed-history edge as the execution logs (``offer``): the events of each
running Express execution gather until its closing event, and it then takes its place in its state machine's ring.
Bounded everywhere: ``size`` closed executions per state machine (0: nothing kept, nothing gathered),
``EVENTS_MAX`` events each, ``MACHINES_MAX`` state machines (the least recently run leaves first) and
``RUNNING_MAX`` executions gathering at once. Must not import the API.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any

from ..decider.step import FLOW_KEY  # a traced execution's own bookkeeping in an event: not shown

EVENTS_MAX = 1_000  # events kept of one execution (the rest are counted)
MACHINES_MAX = 1_000
RUNNING_MAX = 10_000
CLOSES = {"ExecutionSucceeded": "SUCCEEDED", "ExecutionFailed": "FAILED", "ExecutionTimedOut": "TIMED_OUT",
          "ExecutionAborted": "ABORTED"}


class ExpressRing:
    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._running: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._rings: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()

    def offer(self, logged: Sequence[tuple[Any, ...]]) -> None:
        """On the engine thread, once per tick: the history a tick recorded (``engine.batch.Logged``)."""
        if self.size <= 0:
            return
        with self._lock:
            for machine_arn, arn, _, events, _ in logged:
                if ":express:" in arn:
                    self._gather(machine_arn, arn, events)

    def _gather(self, machine_arn: str, arn: str, events: list[dict[str, Any]]) -> None:
        run = self._running.get(arn)
        if run is None:
            if len(self._running) >= RUNNING_MAX:
                self._running.popitem(last=False)
            run = self._running[arn] = {"executionArn": arn, "stateMachineArn": machine_arn,
                                        "name": arn.rsplit(":", 2)[1], "status": "RUNNING", "events": [],
                                        "eventsLeftOut": 0}
        for event in events:
            shown = {key: value for key, value in event.items() if key != FLOW_KEY}
            shown["timestamp"] = event["timestamp"] / 1000
            if len(run["events"]) < EVENTS_MAX:
                run["events"].append(shown)
            else:
                run["eventsLeftOut"] += 1
            if event["type"] == "ExecutionStarted":
                run["startDate"] = shown["timestamp"]
                run["input"] = event.get("executionStartedEventDetails", {}).get("input")
            closed = CLOSES.get(event["type"])
            if closed is not None:
                details = next((value for key, value in event.items() if key.endswith("EventDetails")), {})
                run.update(status=closed, stopDate=shown["timestamp"], output=details.get("output"),
                           error=details.get("error"), cause=details.get("cause"))
                self._close(machine_arn, self._running.pop(arn))
                return

    def _close(self, machine_arn: str, run: dict[str, Any]) -> None:
        ring = self._rings.pop(machine_arn, None)
        if ring is None:
            ring = deque(maxlen=self.size)
            if len(self._rings) >= MACHINES_MAX:
                self._rings.popitem(last=False)
        ring.append(run)
        self._rings[machine_arn] = ring  # the most recently run last

    def recent(self, machine_arn: str) -> list[dict[str, Any]]:
        """The machine's closed Express executions kept here, newest first, without their events."""
        with self._lock:
            ring = list(self._rings.get(machine_arn, ()))
        return [{key: value for key, value in run.items() if key != "events"} for run in reversed(ring)]

    def execution(self, arn: str) -> dict[str, Any] | None:
        """One kept execution, with its events (None: not kept here, or gone from its ring)."""
        with self._lock:
            return next((dict(run) for ring in self._rings.values() for run in ring if run["executionArn"] == arn),
                        None)
