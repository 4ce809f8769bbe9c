"""What the engine is asked to do (commands) and the errors it answers with.

Commands that come from the API carry a ``reply`` future, resolved only after the commit that holds the
command's transition has landed (or with an error, when there is nothing to commit).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

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


@dataclass(slots=True)
class StartExecution:
    arn: str
    state_machine_arn: str
    name: str
    revision_id: str
    role_arn: str
    input: str
    parent: dict | None = None  # {"token", "pattern"} when a .sync Task of another execution waits on this one
    reply: Future = field(default_factory=Future)  # -> start_ms


@dataclass(slots=True)
class StopExecution:
    arn: str
    error: str | None
    cause: str | None
    reply: Future = field(default_factory=Future)  # -> stop_ms


@dataclass(slots=True)
class FireTimer:
    arn: str
    timer_id: str
    reply: None = None


@dataclass(slots=True)
class StartAttempt:
    """Record a task attempt as started before it is handed out (to a worker, an HTTP call, ...)."""

    arn: str
    scheduled_id: int
    worker_name: str | None = None
    reply: Future = field(default_factory=Future)  # -> True, or TaskNotPending


@dataclass(slots=True)
class CompleteAttempt:
    """An attempt's result: it succeeded, failed, or (a .sync or callback call) was submitted."""

    arn: str
    scheduled_id: int
    result: AttemptResult
    reply: Future = field(default_factory=Future)  # -> True, or TaskNotPending


@dataclass(slots=True)
class Heartbeat:
    arn: str
    scheduled_id: int
    reply: Future = field(default_factory=Future)  # -> True, or TaskNotPending


@dataclass(slots=True)
class AckDispatch:
    """An integration is done with a dispatch (a parent notified, a child stopped): delete its outbox row."""

    arn: str
    dispatch_id: str
    reply: Future = field(default_factory=Future)  # -> True


Command = StartExecution | StopExecution | FireTimer | StartAttempt | CompleteAttempt | Heartbeat | AckDispatch
