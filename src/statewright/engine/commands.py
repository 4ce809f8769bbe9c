"""What the engine is asked to do (commands) and the errors it answers with.

Commands that come from the API carry a ``reply`` future, resolved only after the commit that holds the
command's transition has landed (or with an error, when there is nothing to commit).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field


class EngineError(Exception):
    """A command the engine refuses; ``arn`` names the execution."""

    def __init__(self, arn: str) -> None:
        super().__init__(arn)
        self.arn = arn


class ExecutionAlreadyExists(EngineError):
    pass


class ExecutionDoesNotExist(EngineError):
    pass


class EngineUnavailable(Exception):
    """The commit failed or this node no longer owns the shard: the caller may retry."""


@dataclass(slots=True)
class StartExecution:
    arn: str
    state_machine_arn: str
    name: str
    revision_id: str
    role_arn: str
    input: str
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


Command = StartExecution | StopExecution | FireTimer
