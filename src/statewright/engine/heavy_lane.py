"""The heavy lane: the evaluating steps of executions whose evaluation is heavy, decided in a process of their own.

One state's evaluation (pure-Python JSONata, under the interpreter lock) cannot be interrupted, so a heavy step on
the engine thread delays the commands of every other execution in the tick it lands in. The engine thread tries a
step on a small slice of the evaluation budget (``Limits.evaluation_slice_steps``); a step past it, and every
evaluating step of an execution known to be heavy (engine/heavy_routing.py), is decided here instead: a fired
timer (a continuation, a Wait's end, a retry, a deadline), a task's result, a redrive. The lane decides in another
process that runs at the lowest CPU priority (nice 19), so it spends what the other executions leave idle, and the
engine thread commits the decision like any other once it is back, if the execution has not moved on meanwhile
(then the command is applied again to the state as it is: one decision per command commits). A command that
waits for a reply (SendTaskSuccess, RedriveExecution) is answered after that commit, as when decided inline.

The lane holds nothing durable and decides as the engine would (the same decider over the same stored state, the
same services): a lane that dies loses only decisions not committed yet, whose timers are still rows and whose
callers are answered once the engine decided them itself. The process reads its jobs from a pipe, so it exits when
the server does, however the server went (the messages: engine/pipe_messages.py).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from .. import decider
from ..asl.definition import Definition, parse_definition
from ..decider.execution import ExecutionState
from ..decider.step import Decision, Services
from .batch import Reply
from .commands import CompleteAttempt, FireTimer, RedriveExecution
from .inbox import AccountQueues
from .limits import Limits
from .pipe_messages import put, take
from .tokens import TaskTokens
from .transitions import Budget, within

log = logging.getLogger(__name__)

DEFINITIONS_MAX = 100  # parsed definitions the lane process keeps (least recently used leave first)
JOBS_MAX = 10_000  # steps in the lane's hands at once (one per execution); past it the engine thread decides them
IN_PROCESS_MAX = 2  # of those, sent to the process (the rest wait per account): one deciding, the next ready
RESTART_PAUSE_S = 30.0  # after a process that failed before it answered anything (it cannot run here)
# The lane process lowers its priority (nice 19) and keeps its stdout for the results before it imports
# statewright (most of its start): what an import prints goes to stderr. Ctrl-C is for the server, not for it.
BOOT = ("import os, signal; os.nice(19); signal.signal(signal.SIGINT, signal.SIG_IGN); results = os.dup(1); "
        "os.dup2(2, 1); from statewright.engine.heavy_lane import serve; serve(results)")

# The commands whose step evaluates states (StartExecution's first step is deferred instead: see Core._start).
Evaluating = FireTimer | CompleteAttempt | RedriveExecution


def decide(command: Evaluating, state: ExecutionState, definition: Definition, now_ms: int, services: Services,
           inputs: Mapping[int, str] | None = None) -> Decision | None:
    """The step an evaluating command makes (None: the execution does not expect it), wherever it is decided.
    ``inputs``: a redrive's (decider.redrive_reads)."""
    if isinstance(command, FireTimer):
        return decider.fire_timer(state, definition, command.timer_id, now_ms, services)
    if isinstance(command, CompleteAttempt):
        return decider.complete_attempt(state, definition, command.scheduled_id, command.result, now_ms, services)
    return decider.redrive(state, definition, now_ms, command.client_token, inputs or {}, services)


@dataclass(frozen=True, slots=True)
class Job:
    """One step for the lane: ``command`` applied to ``state`` at ``now_ms``. ``text`` reads the definition's text
    (called only when the lane has not parsed it yet); ``tokens`` and ``activities`` are the engine's as they are."""

    command: Evaluating
    state: ExecutionState
    definition_key: tuple[str, str]
    text: Callable[[], str]
    now_ms: int
    tokens: TaskTokens
    activities: Collection[str]
    inputs: Mapping[int, str] | None = None
    budget: Budget | None = None  # its account's StateTransition budget, when short of a whole step (transitions.py)


@dataclass(frozen=True, slots=True)
class Decided:
    """A step the lane decided, back for the engine thread to apply: ``result`` is the Decision (None: the execution
    did not expect the command), or the exception deciding it raised, on the state whose (version, start_ms,
    redrive_count) is ``identity`` (a version alone would not tell apart an execution deleted by retention and
    started again under its name)."""

    command: Evaluating
    identity: tuple[int, int, int]
    result: Decision | BaseException | None
    inputs: Mapping[int, str] | None = None  # the job's

    @property
    def arn(self) -> str:
        return self.command.arn

    @staticmethod
    def of(job: Job, result: Decision | BaseException | None) -> Decided:
        state = job.state
        return Decided(job.command, (state.version, state.start_ms, state.redrive_count), result, job.inputs)


class Lane(Protocol):
    def submit(self, job: Job, reply: Reply) -> bool: ...

    def close(self) -> None: ...


# (the engine's services, its limits, where each Decided goes with its command's reply) -> a lane
LaneFactory = Callable[[Services, Limits, Callable[[Decided, Reply], None]], Lane]


class HeavyLane:
    """The engine's side of the lane: one child process (``python -c BOOT``), started at the first heavy
    continuation and again after one died, fed jobs by a writer thread (the engine thread never waits on the pipe)
    and read by a reader thread, which calls ``landed`` with each Decided. ``services`` are the engine's."""

    def __init__(self, services: Services, limits: Limits, landed: Callable[[Decided, Reply], None]) -> None:
        # What the process needs to decide as the engine does, sent once: the budgets, the fairness bounds and
        # the mocks (the token keys and the activities change, so each job carries them).
        self._settings = (replace(services, mint_token=None, activities=frozenset(), budget=None,
                                  resource_check=None), limits)
        self._landed = landed
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._closed = False
        self._start_after = 0.0  # monotonic: after a process that died at once, the next waits until then

    def submit(self, job: Job, reply: Reply) -> bool:
        """Decide ``job`` in the lane, ``reply`` handed back with its Decided; False when the lane has
        ``JOBS_MAX`` in hand already or cannot start (then the engine decides it)."""
        with self._lock:
            if self._closed:
                return False
            if self._child is None or not self._child.alive:
                if self._child is not None and self._child.died_early:
                    self._start_after = time.monotonic() + RESTART_PAUSE_S
                    log.warning("the heavy lane's process died as it started; heavy steps run on the engine "
                                "thread for %.0f s", RESTART_PAUSE_S)
                self._child = None
                if time.monotonic() < self._start_after:
                    return False
                self._child = _Child(self._settings, self._landed)
            child = self._child
        if len(child.pending) >= JOBS_MAX:
            return False
        keys, current = job.tokens.key_set
        # ``now_ms`` moves on by the time the job waits in the lane, so that the decision is of when it is made
        # (a timeout it sets is not spent queueing): the monotonic clock is the same in both processes. The
        # definition's text (None here) goes with it if the process has not parsed it (``_Child._write``).
        message = (job.state.to_blob(), job.definition_key, None, job.command, job.inputs, job.now_ms,
                   time.monotonic(), keys, current, frozenset(job.activities), job.budget)
        return child.send(Decided.of(job, None), reply, job.text, message)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            child, self._child = self._child, None
        if child is not None:
            child.close()


class _Child:
    """One lane process and its two threads. Jobs wait here per account, served in turn (the lane is no FIFO in
    which one account's runaway steps hold another's back), and the process holds at most ``IN_PROCESS_MAX`` at a
    time. Jobs it had in hand when it died come back failed."""

    def __init__(self, settings: tuple[Services, Limits], landed: Callable[[Decided, Reply], None]) -> None:
        self._landed = landed
        # The definitions this process holds parsed: the same LRU as its own, kept in the same order (the jobs
        # reach it in the order they are sent), so a definition it dropped is sent again with its text.
        self.parsed: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.pending: dict[int, tuple[Decided, Reply]] = {}  # job id -> what it decides (its result not in yet)
        self.alive = True
        self.died_early = False  # it failed (exited with an error, or broke its stream) before it answered anything
        self._answered = False
        # A job is either in pending before the process is found dead, or refused; the writer waits on it for a
        # job and for room in the process
        self._lock = threading.Condition()
        self._ids = itertools.count()
        self._waiting = AccountQueues(None, _job_arn)  # (job id, definition text, job) not sent yet
        self._in_process = 0  # jobs sent whose result is not back yet
        self._stopping = False
        self._process = subprocess.Popen([sys.executable, "-c", BOOT], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE)
        self._settings = settings
        threading.Thread(target=self._write, name="heavy-lane-writer", daemon=True).start()
        threading.Thread(target=self._read, name="heavy-lane-reader", daemon=True).start()

    def send(self, decided: Decided, reply: Reply, text: Callable[[], str], job: tuple) -> bool:
        """Hand the job to the process (``text``: its definition's, read if the process has not parsed it); False
        if it has died meanwhile."""
        with self._lock:
            if not self.alive:
                return False
            job_id = next(self._ids)
            self.pending[job_id] = (decided, reply)
            self._waiting.append((job_id, text, job))
            self._lock.notify()
        return True

    def _next(self) -> tuple[int, tuple] | None:
        """The next job to write, the accounts in turn, once the process has room (None: stop writing)."""
        with self._lock:
            while not self._stopping and (not self._waiting or self._in_process >= IN_PROCESS_MAX):
                self._lock.wait()
            if self._stopping:
                return None
            taken: list[tuple[int, Callable[[], str], tuple]] = []
            self._waiting.take(taken, 1)
            self._in_process += 1
        (job_id, text, job), = taken
        # The definitions the process holds, in the order it is sent them: its own LRU's
        key = job[1]
        if key in self.parsed:
            self.parsed.move_to_end(key)
        else:
            self.parsed[key] = None
            job = (job[0], key, text(), *job[3:])
            while len(self.parsed) > DEFINITIONS_MAX:
                self.parsed.popitem(last=False)
        return job_id, job

    def _write(self) -> None:
        pipe = self._process.stdin
        assert pipe is not None
        try:
            put(pipe, (-1, self._settings))
            while (message := self._next()) is not None:
                put(pipe, message)
        except (OSError, ValueError):  # the process died: the reader sees it too
            pass
        finally:
            with contextlib.suppress(OSError):
                pipe.close()

    def _stop_writing(self) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify()

    def _read(self) -> None:
        pipe = self._process.stdout
        assert pipe is not None
        broken = False
        try:
            while (message := take(pipe)) is not None:
                job_id, result, error = message
                with self._lock:
                    decided, reply = self.pending.pop(job_id)
                    self._in_process -= 1
                    self._lock.notify()
                self._answered = True
                self._landed(replace(decided, result=result if error is None else RuntimeError(error)), reply)
        except Exception:  # a broken stream (anything but our messages on it): the process is done for
            log.exception("the heavy lane's results could not be read")
            broken = True
        finally:
            pipe.close()
        with self._lock:
            self.alive = False
            orphans, self.pending = list(self.pending.values()), {}
        self._stop_writing()
        self._process.kill()  # it may be alive still, its stream broken
        self.died_early = (self._process.wait() > 0 or broken) and not self._answered
        if self._process.returncode not in (0, -9):
            log.warning("the heavy lane's process exited with %s; another starts at the next heavy step",
                        self._process.returncode)
        for decided, reply in orphans:
            self._landed(replace(decided, result=RuntimeError("the heavy lane's process died")), reply)

    def close(self) -> None:
        """Stop the process now: what it still has in hand is for nobody."""
        self._stop_writing()
        with contextlib.suppress(OSError):
            self._process.kill()


# -- in the lane process

def serve(results_fd: int) -> None:
    """The lane process (see BOOT): decide each job read from stdin and write its result to ``results_fd`` (its
    stdout, which nothing else writes to), until stdin closes: the server stopped or died."""
    out = os.fdopen(results_fd, "wb")
    source = sys.stdin.buffer
    first = take(source)
    if first is None:
        return
    services, limits = first[1]
    definitions: dict[tuple[str, str], Definition] = {}
    while (message := take(source)) is not None:
        job_id, job = message
        try:
            result, error = _decide(job, services, limits, definitions), None
        except Exception as exc:  # a bug: the engine decides the step again itself, and logs it there
            result, error = None, f"{type(exc).__name__}: {exc}"
        try:
            put(out, (job_id, result, error))
        except BrokenPipeError:  # the server is gone
            return


def _decide(job: tuple, services: Services, limits: Limits,
            definitions: dict[tuple[str, str], Definition]) -> Decision | None:
    blob, key, text, command, inputs, now_ms, sent, keys, current, activities, budget = job
    now_ms += max(0, round((time.monotonic() - sent) * 1000))
    definition = definitions.pop(key, None)
    if definition is None:
        if text is None:
            raise LookupError(f"the heavy lane has not parsed definition {key}")
        definition = parse_definition(text)
    definitions[key] = definition  # last: the most recently used
    while len(definitions) > DEFINITIONS_MAX:
        del definitions[next(iter(definitions))]
    # Wall time is what a state's evaluation may take on the engine thread; here, at nice 19, the process waits
    # whenever the server is busy, so the same bound is counted in the CPU time it gets.
    services = within(replace(services, mint_token=TaskTokens(keys, current).mint, activities=activities,
                              budget=limits.budgets(time.thread_time)), budget)
    return decide(command, ExecutionState.from_blob(blob), definition, now_ms, services, inputs)


def _job_arn(waiting: tuple[int, Callable[[], str], tuple]) -> str:
    return waiting[2][3].arn  # the job's command's execution
