"""Which version an alias starts an execution on, for StartExecution (api/executions.py) and for nested executions
started by a Task (transfers.py) alike.

The choice is drawn from a hash of the execution's ARN, not from a random source: a start repeated with the same
name lands on the same version (a start stays idempotent through an alias), and over many executions each version
gets its weight's share. Pure.
"""

from __future__ import annotations

import hashlib

Routing = tuple[tuple[int, int], ...]  # (version number, weight in percent)


def route(routing: Routing, execution_arn: str) -> int:
    """The version an alias starts ``execution_arn`` on: a draw in [0, 100) from the ARN's hash, placed among the
    routes' cumulative weights."""
    draw = int.from_bytes(hashlib.blake2b(execution_arn.encode(), digest_size=8).digest(), "big") % 100
    for number, weight in routing:
        if draw < weight:
            return number
        draw -= weight
    raise AssertionError(f"weights {routing} do not sum to 100")
