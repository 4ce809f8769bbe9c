"""The engine's edges: how it reaches the world, given to it whole when it is built (node.build_node).

Each is called on the engine thread, only for what a landed commit (or a read-back outbox row) holds, and none may
block: an edge hands its work on to a thread or an event loop of its own. Must not import the API, the
integrations or the cluster: they implement the edges.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from ..store.base import Dispatch
from .batch import Logged, Reply
from .commands import Command


def answer(replies: list[tuple[Reply, object]]) -> None:
    """Resolve each reply future with its result (an exception is raised to the waiter)."""
    for reply, result in replies:
        if reply.done():  # the waiter gave up (its client went away)
            continue
        if isinstance(result, BaseException):
            reply.set_exception(result)
        else:
            reply.set_result(result)


def _nowhere(dispatch: Dispatch) -> None:
    """No integrations (the engine's own tests): a dispatch for outside I/O stays pending."""


@dataclass(slots=True)
class Edges:
    # Every dispatch for outside I/O (activities, HTTP, AWS calls, status events) once its commit has landed or
    # its row is read back. One the integration cannot take comes back through ``Engine.give_back``.
    dispatch: Callable[[Dispatch], None] = _nowhere
    # Several nodes: the (execution ARN, dispatch id) of the dispatches each commit removed, so the activity
    # matcher drops copies that a worker at another node started. None: nothing to tell.
    removed: Callable[[list[tuple[str, str]]], None] | None = None
    # Once per tick, every (reply, result) whose commit landed (or that needed none). The default resolves
    # concurrent futures; an event loop passes its own replies back in one hop.
    replies: Callable[[list[tuple[Reply, object]]], None] = answer
    # Once per tick, the history events its commit landed and its express executions recorded (the execution
    # logs). None: no logs.
    history: Callable[[list[Logged]], None] | None = None
    # Several nodes: sends a stage of engine-to-engine work to the node owning its execution (transfer_runner.py).
    forward: Callable[[list[Command]], Future] | None = None
