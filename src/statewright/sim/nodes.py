"""A simulated node (one engine over its own faulty store handle, and what the simulator knows of its process),
and the replies of a forwarded stage gathered from the node that applied it."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ..cluster.membership import Membership
from ..engine.engine import Engine
from ..engine.retention import Sweep
from .faults import FaultyStore


@dataclass
class SimNode:
    index: int
    engine: Engine
    store: FaultyStore
    membership: Membership | None = None  # None: one node, which takes every shard
    replies: list[tuple[Any, object]] = field(default_factory=list)
    next_step_ms: int = 0  # when its membership wants to step again
    paused_until_ms: int = 0  # a paused process: it neither ticks nor steps
    paused_at_ms: int | None = None  # its clock reading when paused: its first tick after waking uses it
    cut_off_until_ms: int = 0  # the store is unreachable from it until then
    down_until_ms: int = 0  # it left and comes back (as a new process) then
    leaving: Future | None = None  # a graceful leave waiting for the engine to let go
    sweep: Sweep | None = None  # its retention sweep, over its store
    next_sweep_ms: int = 0

    @property
    def name(self) -> str:
        return f"node-{self.index}"

    def up(self, now_ms: int) -> bool:
        """Answering calls (a leaving node ticks on until its engine let go, but takes no new calls)."""
        return self.running(now_ms) and self.leaving is None

    def running(self, now_ms: int) -> bool:
        return now_ms >= self.down_until_ms and now_ms >= self.paused_until_ms


@dataclass
class Collected:
    """The replies of a forwarded stage, gathered from the target node's deliveries."""

    future: Future
    replies: list[object]
    missing: int
