"""Retry and Catch: which rule an error matches, and how long a retry waits.

Jitter is drawn from a seed the caller derives from the execution, state and attempt, so a replay decides the
same delay.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from .errors import DATA_LIMIT_EXCEEDED, RUNTIME, TIMEOUT
from .paths import ReferencePath

ALL = "States.ALL"
TASK_FAILED = "States.TaskFailed"
# States.ALL matches any error except these terminal ones (they match only when named).
_TERMINAL = frozenset({RUNTIME, DATA_LIMIT_EXCEEDED})


def matches(error_equals: list[str], error: str | None, alias: str | None = None) -> bool:
    """Whether an ErrorEquals list names the error: exactly (or by its ``alias``), by States.ALL, or by
    States.TaskFailed (every error but the terminal ones and States.Timeout). A failure without an error name (a
    SendTaskFailure without one) is matched by States.ALL alone: AWS catches it so, with a null Error
    (LocalStack's AWS-validated test_sqs_failure_in_wait_for_task_tok_no_error_field); that a States.ALL Retry
    takes it too, and States.TaskFailed does not, is inferred."""
    if error is None:
        return ALL in error_equals
    if error in error_equals or (alias is not None and alias in error_equals):
        return True
    if error in _TERMINAL:
        return False
    return ALL in error_equals or (TASK_FAILED in error_equals and error != TIMEOUT)


@dataclass(slots=True)
class Retrier:
    error_equals: list[str]
    interval_seconds: int = 1
    max_attempts: int = 3
    backoff_rate: float = 2.0
    max_delay_seconds: int | None = None
    jitter: bool = False  # JitterStrategy FULL

    def delay_ms(self, attempt: int, seed: bytes) -> int:
        """The wait before retry number ``attempt`` (1 for the first retry)."""
        delay_s = self.interval_seconds * self.backoff_rate ** (attempt - 1)
        if self.max_delay_seconds is not None:
            delay_s = min(delay_s, self.max_delay_seconds)
        delay_ms = int(delay_s * 1000)
        if self.jitter:
            fraction = int.from_bytes(hashlib.blake2b(seed, digest_size=8).digest(), "big") / 2**64
            delay_ms = int(delay_ms * fraction)
        return delay_ms


@dataclass(slots=True)
class Catcher:
    error_equals: list[str]
    next: str
    result_path: ReferencePath | None
    assign: Any = None  # variables set when this catcher routes (a Template, or JSONata's compiled value)
    output: Any = None  # JSONata only: the state's output when this catcher routes (default: the error output)


def error_output(error: str | None, cause: str | None) -> dict[str, str | None]:
    """The object a Catch places at its ResultPath: a failure without an error name has a null Error and Cause
    (as AWS records it: see ``matches``)."""
    return {"Error": error, "Cause": cause} if cause is not None or error is None else {"Error": error}
