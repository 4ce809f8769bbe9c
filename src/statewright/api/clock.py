"""The virtual clock (``statewright serve --clock virtual``): the wall clock plus an offset that only grows, moved
forward on request, so a test of a 30-day flow runs in milliseconds with histories that read like the real thing.

The offset is a store setting, written before an advance is answered: a server killed after an advance starts
again at the advanced time, and since the clock never goes back no timer can fire twice. The engine, the API's
timestamps and the activity polls all read this clock. An advance moves it from one due timer to the next
(``advance_through``), so every timer the span passed fires, in due order and at its due time, including those
that timers fired within the span set (Waits, Retry backoffs, TimeoutSeconds, HeartbeatSeconds), and it is
answered once they have.

The operations ride on the API's own protocol with their own target prefix: ``X-Amz-Target:
Statewright.GetClock`` answers ``{"now": epoch seconds, "offsetMs": n}``; ``Statewright.AdvanceClock`` with
``{"by": "90d"}`` (a duration: a whole number and s, m, h or d) or ``{"milliseconds": n}`` moves it forward and
answers the same. ``statewright clock now|advance`` calls them (clock_client.py, the client's side).

Imports the engine's wall clock and the store; the service only for its type.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..engine.core import wall_clock_ms
from ..store.base import Store
from .errors import AwsError

if TYPE_CHECKING:
    from .service import Service

TARGET_PREFIX = "Statewright."
OPERATIONS = ("GetClock", "AdvanceClock")
_SETTING = "virtual_clock_offset_ms"
_DURATION = re.compile(r"(\d{1,12})([smhd])", re.ASCII)
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
ADVANCE_MS_MAX = 100 * 365 * 86_400_000  # a century per call: far enough for any test, short of overflows
SETTLE_S = 30.0  # how long an advance waits for the engine to fire what the span passed
SETTLE_POLL_S = 0.005


def parse_duration(text: str) -> int:
    """Milliseconds in a duration like ``30s``, ``15m``, ``36h`` or ``90d``; ValueError otherwise."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r}; write a whole number and s, m, h or d, such as 90d")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


class VirtualClock:
    """Callable like ``wall_clock_ms``: the time every part of the server reads."""

    def __init__(self, store: Store, wall: Callable[[], int] = wall_clock_ms) -> None:
        self._store = store
        self._wall = wall
        self._lock = threading.Lock()
        self.offset_ms = int(store.put_setting_if_absent(_SETTING, "0"))

    def __call__(self) -> int:
        return self._wall() + self.offset_ms

    def advance(self, by_ms: int) -> int:
        """Move the clock forward by ``by_ms`` (durably) and return the new time."""
        if not 0 <= by_ms <= ADVANCE_MS_MAX:
            raise ValueError(f"the clock moves forward by 0 to {ADVANCE_MS_MAX} ms at a time, not {by_ms}")
        with self._lock:  # advances from several requests add up; the write lands before the clock moves
            offset_ms = self.offset_ms + by_ms
            self._store.put_setting(_SETTING, str(offset_ms))
            self.offset_ms = offset_ms
        return self()


def iso(epoch_ms: int) -> str:
    """An instant as ISO 8601 in UTC with milliseconds, as the CLI prints it."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def advance_through(service: Service, clock: VirtualClock, by_ms: int) -> None:
    """Move the clock forward by ``by_ms`` one due timer at a time: to the next timer, until the engine has fired
    everything due by then (a fired timer may set another within the span: a Wait after a Wait, a retry's
    backoff), then on to the next, and last to the end of the span. So events carry their timers' due times, and
    the answer comes once every timer the span passed has fired (or after SETTLE_S, for an execution that keeps
    setting timers due at once). The span is counted on the offset, step by step: the wall clock moves on
    meanwhile, and a step sized from a later reading of the time would come short of ``by_ms`` by what it moved."""
    loop = asyncio.get_running_loop()
    left_ms = by_ms
    give_up_at = loop.time() + SETTLE_S
    while True:
        await _settle(service, clock, give_up_at)
        due_ms = await service.store_call(_next_due, service.store, clock() + left_ms)
        step_ms = left_ms if due_ms is None else min(max(due_ms - clock(), 0), left_ms)
        if step_ms:
            await service.store_call(clock.advance, step_ms)
            left_ms -= step_ms
            service.engine.wake()  # the timers now due fire at once, not at the engine's next look
        if not left_ms or loop.time() > give_up_at:
            if left_ms:  # given up on settling: the span is still moved whole
                await service.store_call(clock.advance, left_ms)
                service.engine.wake()
            await _settle(service, clock, give_up_at)
            return


async def _settle(service: Service, clock: VirtualClock, give_up_at: float) -> None:
    """Wait until no timer due by now is left unfired (a fired timer's row goes in its commit)."""
    loop = asyncio.get_running_loop()
    while await service.store_call(_next_due, service.store, clock()) is not None and loop.time() < give_up_at:
        await asyncio.sleep(SETTLE_POLL_S)


def _next_due(store: Store, until_ms: int) -> int | None:
    """The earliest time a timer of any shard fires at, if one fires by ``until_ms``."""
    due = [rows[0].fire_at_ms for shard in range(store.shard_count())
           if (rows := store.due_timers(shard, 0, until_ms, 1))]
    return min(due, default=None)


def reading(clock: VirtualClock) -> dict:
    return {"now": clock() / 1000, "offsetMs": clock.offset_ms}


def advance_by(params: dict) -> int:
    """The milliseconds an AdvanceClock request asks for; AwsError(ValidationException) for anything else."""
    by, milliseconds = params.get("by"), params.get("milliseconds")
    if (by is None) == (milliseconds is None):
        raise AwsError("ValidationException", "AdvanceClock takes one of 'by' (a duration such as \"90d\") or "
                                              "'milliseconds' (a whole number)")
    if by is not None:
        if not isinstance(by, str):
            raise AwsError("ValidationException", f"'by' must be a string such as \"90d\", not {by!r}")
        try:
            by_ms = parse_duration(by)
        except ValueError as exc:
            raise AwsError("ValidationException", str(exc)) from None
    elif isinstance(milliseconds, bool) or not isinstance(milliseconds, int) or milliseconds < 0:
        raise AwsError("ValidationException", f"'milliseconds' must be a whole number of 0 or more, not "
                                              f"{json.dumps(milliseconds)}")
    else:
        by_ms = milliseconds
    if by_ms > ADVANCE_MS_MAX:
        raise AwsError("ValidationException", f"The clock moves forward by at most {ADVANCE_MS_MAX // 86_400_000}d "
                                              "at a time; advance it in steps")
    return by_ms
