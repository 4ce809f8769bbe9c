"""What running one state comes to (an Outcome), and what an integration reports about a task attempt.

Values only, never changed once made, shared by the decider's modules and by the edges that hand attempt results
to the engine. The outcomes are not frozen because one is made per state on the hot path, and a frozen
dataclass's constructor costs twice as much. Pure: no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Next:
    """The state exited: the flow goes on in ``state`` with ``data`` as its input."""

    state: str
    data: Any


@dataclass(slots=True)
class End:
    """The flow reached its end with ``output``."""

    output: Any


@dataclass(slots=True)
class Fail:
    """The flow failed (no Retry or Catch took the error)."""

    error: str | None
    cause: str | None


@dataclass(slots=True)
class Wait:
    """The flow waits: on a timer, a task attempt, or the children of a Parallel or Map."""


WAIT = Wait()
Outcome = Next | End | Fail | Wait


@dataclass(frozen=True, slots=True)
class AttemptSucceeded:
    output: str  # the result as JSON text, as the worker or the integration wrote it


@dataclass(frozen=True, slots=True)
class AttemptFailed:
    error: str | None
    cause: str | None


@dataclass(frozen=True, slots=True)
class AttemptSubmitted:
    """A .sync or .waitForTaskToken call was made; the attempt now waits for its result."""

    output: Any  # the call's response (for a nested execution: its ExecutionArn and StartDate)
    job: Any = None  # an AWS job to poll until it ends (.sync): what its describe call needs


@dataclass(frozen=True, slots=True)
class AttemptPolled:
    """A .sync task's AWS job was still running at this poll (its number, from the poll's dispatch)."""

    poll: int


AttemptResult = AttemptSucceeded | AttemptFailed | AttemptSubmitted | AttemptPolled
