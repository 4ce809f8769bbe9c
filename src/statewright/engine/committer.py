"""Where a tick's batch is committed: on the engine thread itself, or on a thread of its own while the engine thread
applies the next tick's work (a pipelined group commit).

The engine hands over a job (the store calls of one commit, nothing of the engine's memory) and asks later whether it
is done; it acts on a commit only on its own thread, once the job has returned (core.py, ``Core._settle``). A commit
spends most of its time in the database (SQLite's statements and fsync, a PostgreSQL round trip), outside the
interpreter lock, so on a second core the next tick's decisions are made meanwhile. Must not import the API, the
integrations, the cluster or sim.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

Job = Callable[[], Any]  # returns the outcome; never raises (the engine's job catches what the store raises)


class Pending(Protocol):
    def done(self) -> bool: ...

    def result(self) -> Any: ...


class Committer(Protocol):
    def submit(self, job: Job) -> Pending: ...

    def close(self) -> None: ...


class InlineCommitter:
    """The job runs at once on the engine thread: each tick commits before it returns (tests driving ``tick``)."""

    def submit(self, job: Job) -> Pending:
        done: Future = Future()
        done.set_result(job())
        return done

    def close(self) -> None:
        pass


class ThreadCommitter:
    """One thread of its own: jobs run one after the other, in the order submitted (a shard's outbox seqs and every
    execution's versions follow commit order)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statewright-commit")

    def submit(self, job: Job) -> Pending:
        return self._pool.submit(job)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class _Deferred:
    def __init__(self, job: Job, polls: int) -> None:
        self._job: Job | None = job
        self._polls = polls
        self._outcome: Any = None

    def done(self) -> bool:
        if self._job is not None:
            if self._polls > 0:
                self._polls -= 1
                return False
            self._run()
        return True

    def result(self) -> Any:
        if self._job is not None:
            self._run()
        return self._outcome

    def _run(self) -> None:
        job, self._job = self._job, None
        assert job is not None
        self._outcome = job()


class DeferredCommitter:
    """The simulator's: a job runs on the engine thread, deterministically, only when the engine has asked whether
    it is done a seeded number of times (0-3) or waits for it, so the next tick's decisions are made, and the store
    read, with the earlier commit not yet written, as on a second thread."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def submit(self, job: Job) -> Pending:
        return _Deferred(job, self._rng.randrange(4))

    def close(self) -> None:
        pass
