"""A node's membership on a thread of its own, on the wall clock: what ``statewright serve`` runs in a cluster.

It steps as often as the membership asks (every ``renew_ms``; at once while a hand-over is under way) and when woken
(another node joined or left: ``wake``). Joining, leaving and releasing shards handed over tell the other nodes
through ``poke`` (peers.py's signed call), so shards move in milliseconds instead of waiting for the next
renewal or poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .membership import Membership

log = logging.getLogger("statewright.cluster")

LEAVE_TIMEOUT_S = 10.0  # how long a graceful stop waits for the engine to let go of its shards


class MembershipLoop:
    def __init__(self, membership: Membership, clock: Callable[[], int],
                 poke: Callable[[list[str]], None] = lambda addresses: None,
                 refresh: Callable[[], None] = lambda: None) -> None:
        self.membership = membership
        self.clock = clock
        self.poke = poke  # tells the nodes at these addresses to step now
        self.refresh = refresh  # what else the node reads again at every step (the task token keys)
        self._woken = threading.Event()
        self._stopping = False
        self._stop_lock = threading.Lock()
        self._left = threading.Event()  # the first stop finished
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="statewright-membership", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Step now (thread-safe): the membership changed."""
        self._woken.set()

    def stop(self) -> None:
        """Graceful: leave, let the engine drain and drop every shard, release the leases, tell the others. Safe to
        call again (and from several threads): later calls wait for the first to finish."""
        with self._stop_lock:
            if self._stopping:
                self._left.wait()
                return
            self._stopping = True
        try:
            self._leave()
        finally:
            self._left.set()

    def _leave(self) -> None:
        self._woken.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.membership.leave().result(timeout=LEAVE_TIMEOUT_S)
            self.membership.release_all()
        except Exception:  # the leases run out instead: the others take over after one lease period
            log.exception("could not hand the shards over")
        self.poke(self.others())

    def _run(self) -> None:
        first = True
        while not self._stopping:
            try:
                delay_ms = self.membership.step(self.clock())
            except Exception:  # a bug: keep renewing; the engine drops what it cannot renew in time
                log.exception("membership step failed")
                delay_ms = self.membership.settings.renew_ms
            try:
                self.refresh()
            except Exception as exc:  # the store is away: the last read stands until the next step
                log.debug("could not read the task token keys again: %s", exc)  # the store said it
            if first or self.membership.released_any():  # joined, or released shards: the others move now
                first = False
                self.poke(self.others())
            self._woken.wait(delay_ms / 1000)
            self._woken.clear()

    def others(self) -> list[str]:
        """The other live nodes' addresses, as last read."""
        return [node.address for node in self.membership.live_nodes(self.clock())
                if node.node_id != self.membership.node_id]
