"""The engine as other threads see it: its thread, the commands they submit, and the shards it serves.

``Engine`` is ``Core`` (core.py: the tick that runs on the engine thread) with what is called from elsewhere: the
API and the integrations submit commands and hand dispatches back; the cluster's membership (or, on a single
node, ``acquire_all_shards``) changes which shards it serves. Everything here is thread-safe: a change is handed to
the inbox and applied at the start of the next tick. Must not import the API, the integrations, the cluster or sim.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from ..store.base import Dispatch
from .batch import Reply
from .commands import Command
from .core import Core
from .shards import LEASE_MS

if TYPE_CHECKING:
    from ..collector import Collector

log = logging.getLogger("statewright.engine")


class Engine(Core):
    _thread: threading.Thread | None = None
    _collector: Collector | None = None

    # -- ownership

    def acquire_all_shards(self) -> None:
        """Single node: take every shard, fencing out any earlier owner; its timers and outbox load as it serves."""
        now_ms = self.clock()
        for shard in range(self.shard_count):
            self._serve(shard, self.store.acquire_shard(shard, self.node_id, now_ms + LEASE_MS), None, now_ms)

    def owns(self, shard_id: int) -> bool:
        """Whether this engine serves the shard now (it may change at the next tick)."""
        return self.shards.serves(shard_id)

    def gain_shard(self, shard_id: int, range_id: int, serve_until_ms: int | None) -> None:
        """Serve a shard just acquired at ``range_id`` (until ``serve_until_ms``; None: for good)."""
        self.inbox.change_ownership(lambda now_ms: self._serve(shard_id, range_id, serve_until_ms, now_ms))

    def renewed(self, shards: set[int], serve_until_ms: int) -> None:
        """The leases of these shards were renewed: serve them until ``serve_until_ms``."""
        self.inbox.change_ownership(lambda now_ms: self.shards.renewed(shards, serve_until_ms))

    def drop_shards(self, shards: set[int]) -> Future:
        """Stop serving these shards; the future resolves on the engine thread once no commit for them is in
        flight, so the caller may then release their leases."""
        done: Future = Future()

        def drop(now_ms: int) -> None:
            self._unserve_all(shards & self.range_ids.keys(), "handed over")
            done.set_result(None)
        self.inbox.change_ownership(drop)
        return done

    # -- running

    def start(self, *, all_shards: bool = True, collector: Collector | None = None) -> None:
        """Run ticks on a thread of the engine's own. ``all_shards``: a single node takes every shard first; in a
        cluster the membership hands shards to the engine as it acquires them. ``collector``: the garbage
        collector's full passes, run when the engine has nothing to do (collector.py)."""
        self._collector = collector
        if all_shards:
            self.acquire_all_shards()
        self._thread = threading.Thread(target=self._run, name="statewright-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.inbox.stop()
        if self._thread is not None:
            self._thread.join()
        self.heavy.close()

    def submit(self, command: Command, reply: Reply = None, *, throttle: bool = True) -> Reply:
        """Queue a command; returns its reply handle (a new Future when none is given). With ``throttle`` a full
        inbox raises InboxFull: the API's callers back off. Integrations pass False for work tied to a dispatch
        they hold, which the outbox window already bounds. Thread-safe."""
        if reply is None:
            reply = Future()
        self.inbox.submit(command, reply, throttle)
        return reply

    def wake(self) -> None:
        """Tick now rather than at the next timer (the clock moved forward). Thread-safe."""
        self.inbox.wake()

    def give_back(self, dispatch: Dispatch) -> None:
        """An integration could not take a dispatch (its memory is full): it stays in the outbox, read back later.
        Thread-safe."""
        self.inbox.give_back(dispatch)

    def room_again(self) -> None:
        """The integrations have room again for dispatches they gave back. Thread-safe."""
        self.inbox.room_again()

    def _run(self) -> None:
        collector = self._collector
        while self.inbox.wait(lambda: self.idle_wait_s(self.clock()), busy=bool(self.heavy.redo),
                              idle=None if collector is None else collector.quiet):
            try:
                self.tick(self.clock())
            except Exception:  # a bug must not stop the engine, nor strand what memory held: read it all again
                log.exception("engine tick failed; re-reading every shard")
                self._reread(set(self.range_ids), self._executions.all())
            if collector is not None:
                collector.busy()

    def idle_wait_s(self, now_ms: int) -> float:
        """How long the engine thread may sleep when its inbox is empty: until the next timer, at most a second."""
        if now_ms < self._store_retry_at_ms:  # the store failed a read: back off before trying again
            return (self._store_retry_at_ms - now_ms) / 1000
        if self.outbox.has_room() and any(self.shards.serves(shard) for shard in self.outbox.behind()):
            return 0
        due = [self.shards.next_due_ms(), self.express.next_due_ms(), self.transfers.next_due_ms(now_ms)]
        wait_ms = min([due_ms for due_ms in due if due_ms is not None], default=now_ms + 1_000) - now_ms
        return min(max(wait_ms, 0), 1_000) / 1000

    def note_activity(self, arn: str, exists: bool) -> None:
        """CreateActivity or DeleteActivity committed: Task states see the change from the next command on."""
        if exists:
            self.activities.add(arn)
        else:
            self.activities.discard(arn)

    def cached_executions(self) -> int:
        return len(self._executions)
