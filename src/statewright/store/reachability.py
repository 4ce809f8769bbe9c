"""Whether the database answers, said in the log once each way: the first call that finds it out of reach logs
``store_unreachable``, the first that finds it back logs ``store_back``. Every user of the store (the engine, the
lease renewals, the activity watcher, retention) sees the same outage, so it is said here, not by each of them."""

from __future__ import annotations

import logging
import threading
import time

from ..logs import event

log = logging.getLogger("statewright.store")


AFTERMATH_S = 5.0  # after it is back, failures of connections that broke in the outage are not a new one


class Reachability:
    def __init__(self, where: str) -> None:
        self._where = where
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._said = False  # the outage under way was said (not one in the aftermath of the last)
        self._back_at = float("-inf")

    def failed(self, error: Exception) -> None:
        now = time.monotonic()
        with self._lock:
            if self._down_since is not None and (self._said or now - self._down_since <= AFTERMATH_S):
                return
            if self._down_since is None:
                self._down_since = now
            # Each thread's connection learns that the outage broke it at its first use after it: not news, unless
            # it goes on (a new outage soon after the last)
            said_now = not self._said and (now - self._back_at > AFTERMATH_S or now - self._down_since > AFTERMATH_S)
            self._said = self._said or said_now
        if said_now:
            event(log, "store_unreachable", "the store is out of reach (%s): every caller retries until it is back",
                  error, level=logging.ERROR, store=self._where, error=str(error))

    def answered(self) -> None:
        if self._down_since is None:  # the usual case, without the lock
            return
        now = time.monotonic()
        with self._lock:
            since, said, self._down_since, self._said = self._down_since, self._said, None, False
            if since is not None and said:
                self._back_at = now
        if since is not None and said:
            down_s = round(now - since, 1)
            event(log, "store_back", "the store is back after %.1f s", down_s, store=self._where, down_s=down_s)
