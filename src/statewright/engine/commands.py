"""What the engine is asked to do (commands) and the errors it answers with.

Commands are plain frozen data, so they can be queued, replayed by the simulator and later forwarded to another
node. Whoever submits one keeps its reply handle beside it (``Engine.submit(command, reply)``); the engine answers
``(reply, result)`` only after the commit that holds the command's transition has landed (or with an error, when
there is nothing to commit).
"""

from __future__ import annotations

from dataclasses import dataclass

from .outcomes import AttemptResult


class EngineError(Exception):
    """A command the engine refuses; ``arn`` names the execution."""

    def __init__(self, arn: str) -> None:
        super().__init__(arn)
        self.arn = arn


class ExecutionAlreadyExists(EngineError):
    pass


class ExecutionDoesNotExist(EngineError):
    pass


class TaskNotPending(EngineError):
    """The attempt a token or dispatch names is not pending any more (finished, timed out, or never was)."""


class EngineUnavailable(Exception):
    """The commit failed or this node no longer owns the shard: the caller may retry."""


class InboxFull(Exception):
    """The engine holds ``Limits.inbox_commands_max`` commands already: the caller must back off and retry."""


@dataclass(frozen=True, slots=True)
class StartExecution:
    """Reply: the start time (ms), or ExecutionAlreadyExists."""

    arn: str
    state_machine_arn: str
    name: str
    revision_id: str
    role_arn: str
    input: str
    parent: dict | None = None  # {"token", "pattern"} when a .sync Task of another execution waits on this one


@dataclass(frozen=True, slots=True)
class StopExecution:
    """Reply: the stop time (ms), or ExecutionDoesNotExist."""

    arn: str
    error: str | None
    cause: str | None


@dataclass(frozen=True, slots=True)
class FireTimer:
    arn: str
    timer_id: str


@dataclass(frozen=True, slots=True)
class StartAttempt:
    """Record a task attempt as started before it is handed out (to a worker, an HTTP call, ...).
    Reply: True, or TaskNotPending."""

    arn: str
    scheduled_id: int
    worker_name: str | None = None


@dataclass(frozen=True, slots=True)
class CompleteAttempt:
    """An attempt's result: it succeeded, failed, or (a .sync or callback call) was submitted.
    Reply: True, or TaskNotPending."""

    arn: str
    scheduled_id: int
    result: AttemptResult


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Reply: True, or TaskNotPending."""

    arn: str
    scheduled_id: int


@dataclass(frozen=True, slots=True)
class AckDispatch:
    """The work a dispatch asked for is done (a parent notified, a child stopped): delete its outbox row.
    Reply: True."""

    arn: str
    dispatch_id: str


Command = StartExecution | StopExecution | FireTimer | StartAttempt | CompleteAttempt | Heartbeat | AckDispatch
