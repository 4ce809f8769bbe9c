"""The shards an engine serves: the range id it holds each at (every commit is conditional on it), how long its
lease lets it serve each, and each one's timer window; and ``shard_for``, the shard an execution lives on.

A single node serves every shard for good; in a cluster the membership (cluster/) hands shards to the engine as it
acquires them, and a shard whose lease was not renewed in time is no longer served. Used on the engine thread only
(changes asked for by other threads come through the inbox). Must not import the API, the integrations or the
cluster.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from .limits import Limits
from .timers import TimerWindow

LEASE_MS = 10_000  # a single node's lease on each shard, renewed by serving it


def shard_for(execution_arn: str, shard_count: int) -> int:
    """The shard an execution lives on: a stable hash of its ARN (account, state machine and name)."""
    return zlib.crc32(execution_arn.encode()) % shard_count


class Shards:
    def __init__(self, shard_count: int, limits: Limits) -> None:
        self.count = shard_count
        self._limits = limits
        self.range_ids: dict[int, int] = {}
        self.serve_until_ms: dict[int, int] = {}  # shards held by a lease (several nodes): served until then
        self.windows: dict[int, TimerWindow] = {}

    def of(self, execution_arn: str) -> int:
        return shard_for(execution_arn, self.count)

    def serves(self, shard_id: int) -> bool:
        return shard_id in self.range_ids

    def serve(self, shard_id: int, range_id: int, serve_until_ms: int | None) -> None:
        """Serve a shard acquired at ``range_id`` (until ``serve_until_ms``; None: for good), with an empty timer
        window that loads its rows as time goes."""
        self.range_ids[shard_id] = range_id
        if serve_until_ms is None:
            self.serve_until_ms.pop(shard_id, None)
        else:
            self.serve_until_ms[shard_id] = serve_until_ms
        self.windows[shard_id] = TimerWindow(shard_id, self._limits)

    def unserve(self, shard_id: int) -> None:
        self.range_ids.pop(shard_id, None)
        self.serve_until_ms.pop(shard_id, None)
        window = self.windows.pop(shard_id, None)
        if window is not None:
            window.forget()

    def renewed(self, shard_ids: Iterable[int], serve_until_ms: int) -> None:
        for shard_id in set(shard_ids) & self.serve_until_ms.keys():
            self.serve_until_ms[shard_id] = max(self.serve_until_ms[shard_id], serve_until_ms)

    def expired(self, now_ms: int) -> list[int]:
        """Shards whose lease was not renewed in time."""
        return [shard_id for shard_id, until_ms in self.serve_until_ms.items() if now_ms >= until_ms]

    def next_due_ms(self) -> int | None:
        """The earliest of the windows' next timers and the leases' ends."""
        due = [until_ms for until_ms in self.serve_until_ms.values()]
        due += [due_ms for window in self.windows.values() if (due_ms := window.next_due_ms()) is not None]
        return min(due, default=None)
