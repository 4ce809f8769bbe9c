"""What the engine is asked to do (commands), the errors it answers with, and their wire format between nodes.

Commands are plain frozen data, so they can be queued, replayed by the simulator and forwarded to another node.
Whoever submits one keeps its reply handle beside it (``Engine.submit(command, reply)``); the engine answers
``(reply, result)`` only after the commit that holds the command's transition has landed (or with an error, when
there is nothing to commit).

The wire format (``encode_commands`` ... ``decode_replies``) is JSON through orjson: each command and attempt result
an object naming its type and its fields by name, so a field added later with a default still reads what an older
node sent; the envelope carries a version, and a node refuses one it does not speak rather than guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import orjson

from ..decider.outcomes import AttemptFailed, AttemptPolled, AttemptResult, AttemptSubmitted, AttemptSucceeded


class EngineError(Exception):
    """A command the engine refuses; ``arn`` names the execution."""

    def __init__(self, arn: str) -> None:
        super().__init__(arn)
        self.arn = arn


class ExecutionAlreadyExists(EngineError):
    pass


class ExecutionDoesNotExist(EngineError):
    pass


class ExecutionNotRedrivable(EngineError):
    """RedriveExecution of an execution that cannot be redriven now; ``reason`` says why, in AWS's words."""

    def __init__(self, arn: str, reason: str) -> None:
        super().__init__(arn)
        self.reason = reason


class TaskNotPending(EngineError):
    """The attempt a token or dispatch names is not pending any more (finished, timed out, or never was)."""


class EngineUnavailable(Exception):
    """The commit failed or this node no longer owns the shard: the caller may retry."""


class ShardNotOwned(EngineUnavailable):
    """This node does not serve the command's shard (now): another node does, or will once it takes the lease."""

    def __init__(self, shard_id: int) -> None:
        super().__init__(f"this node does not own shard {shard_id}")
        self.shard_id = shard_id


class InboxFull(Exception):
    """The engine holds ``Limits.inbox_commands_max`` commands already: the caller must back off and retry."""


@dataclass(frozen=True, slots=True)
class StartExecution:
    """Reply: the start time (ms), or ExecutionAlreadyExists; for a synchronous express start, once it closed,
    its result (express.result)."""

    arn: str
    state_machine_arn: str
    name: str
    revision_id: str
    role_arn: str
    input: str
    parent: dict | None = None  # {"token", "pattern"} when a .sync Task of another execution waits on this one
    version_arn: str | None = None  # started on a version (directly or through an alias)
    alias_arn: str | None = None  # started through an alias
    test_case: str | None = None  # started on ARN#case: the mock configuration's test case it runs
    express: str | None = None  # an EXPRESS execution: "async" (StartExecution) or "sync" (StartSyncExecution)
    # The API call's own id: a copy of the start sent again (a forward retried after no answer came) is answered
    # as the first one was, even once the execution has closed.
    token: str | None = None
    processor: str | None = None  # a map run's child: the distributed Map whose ItemProcessor it runs
    trace: str | None = None  # traced: its trace context (decider/trace_context.py)


@dataclass(frozen=True, slots=True)
class StopExecution:
    """Reply: the stop time (ms), or ExecutionDoesNotExist."""

    arn: str
    error: str | None
    cause: str | None


@dataclass(frozen=True, slots=True)
class RedriveExecution:
    """Reply: the redrive time (ms; that of the earlier redrive a repeated client token made), or
    ExecutionDoesNotExist, or ExecutionNotRedrivable. ``by_map_run``: a map run redrives its child (only it may;
    its client token names the run's redrive round, map_runs.redrive_token)."""

    arn: str
    client_token: str | None = None
    by_map_run: bool = False


@dataclass(frozen=True, slots=True)
class FireTimer:
    """A due timer. ``due_ms``: the time it was due at when taken; a timer set again since (a heartbeat's) is
    another firing, whose own row fires it (None: whatever its time)."""

    arn: str
    timer_id: str
    due_ms: int | None = None


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


@dataclass(frozen=True, slots=True)
class StartMapRun:
    """Create a map run from its parent's ``maprun`` dispatch (``request``: its payload), or give it the items its
    parent read (``mapitems``: creating it if that came first), or redrive it. Reply: True, whether it was created
    now or before."""

    arn: str
    request: dict


@dataclass(frozen=True, slots=True)
class MapRunChildClosed:
    """A map run's child closed (``described``: as a parent hears of it, decider.describe_for_parent) in the run's
    ``round`` (its redrive count then; None: a child started before rounds were told). Reply: True."""

    arn: str  # the map run's
    index: int
    described: dict
    round: int | None = None


@dataclass(frozen=True, slots=True)
class MapRunWritten:
    """A map run's ResultWriter wrote its results (``error``: it could not). Reply: True."""

    arn: str
    error: str | None = None
    cause: str | None = None


@dataclass(frozen=True, slots=True)
class UpdateMapRun:
    """UpdateMapRun: what is not None changes. Reply: True, or ExecutionDoesNotExist."""

    arn: str
    max_concurrency: int | None = None
    tolerated_count: int | None = None
    tolerated_percentage: float | None = None


Command = (StartExecution | StopExecution | RedriveExecution | FireTimer | StartAttempt | CompleteAttempt | Heartbeat
           | AckDispatch | StartMapRun | MapRunChildClosed | MapRunWritten | UpdateMapRun)


# -- the wire format between nodes

WIRE_VERSION = 1
_COMMANDS: dict[str, type] = {cls.__name__: cls for cls in (
    StartExecution, StopExecution, RedriveExecution, FireTimer, StartAttempt, CompleteAttempt, Heartbeat, AckDispatch,
    StartMapRun, MapRunChildClosed, MapRunWritten, UpdateMapRun)}
_RESULTS: dict[str, type] = {cls.__name__: cls for cls in (AttemptSucceeded, AttemptFailed, AttemptSubmitted,
                                                            AttemptPolled)}
_REFUSALS: dict[str, type[EngineError]] = {cls.__name__: cls for cls in (
    ExecutionAlreadyExists, ExecutionDoesNotExist, TaskNotPending)}
_RETRYABLE: dict[str, type[Exception]] = {cls.__name__: cls for cls in (EngineUnavailable, InboxFull)}


class MalformedMessage(ValueError):
    """Bytes that are not a message of this wire format (or of another version of it)."""


def encode_commands(commands: Sequence[Command], *, throttle: bool = True) -> bytes:
    """Commands for the node owning their shard; ``throttle`` says whether a full inbox there refuses them
    (InboxFull) or takes them anyway, as ``Engine.submit`` does."""
    return orjson.dumps({"v": WIRE_VERSION, "throttle": throttle, "commands": [_fields(c) for c in commands]})


def decode_commands(data: bytes) -> tuple[list[Command], bool]:
    """The commands and the throttle flag of ``encode_commands``; MalformedMessage for anything else."""
    message = _envelope(data, "commands")
    try:
        throttle = message["throttle"]
        if not isinstance(throttle, bool):
            raise TypeError(f"throttle is {throttle!r}")
        return [_command(item) for item in message["commands"]], throttle
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MalformedMessage(f"not a list of commands: {exc!r}") from None


def encode_replies(replies: Sequence[object]) -> bytes:
    """The engine's replies, in order: values (ints, bools, None) or the exceptions it answered with. An exception
    that is not one of the engine's own (a bug at the owner) travels as EngineUnavailable with its message."""
    return orjson.dumps({"v": WIRE_VERSION, "replies": [_reply(reply) for reply in replies]})


def decode_replies(data: bytes) -> list[object]:
    """Replies of ``encode_replies``: values as they were, exceptions as instances (to raise or to pass on)."""
    message = _envelope(data, "replies")
    try:
        return [_unreply(item) for item in message["replies"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MalformedMessage(f"not a list of replies: {exc!r}") from None


def _envelope(data: bytes, what: str) -> dict:
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise MalformedMessage(f"not JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get(what), list):
        raise MalformedMessage(f"not a message of {what}")
    if message.get("v") != WIRE_VERSION:
        raise MalformedMessage(f"wire format version {message.get('v')!r}; this node speaks {WIRE_VERSION}")
    return message


def _fields(value: Any) -> dict:
    """A command (or result) as a dict; a field whose default is None is left out while it is None, so that a
    field added to a command is unseen by a node of the previous release until it is used (a rolling upgrade)."""
    kind = type(value)
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple((field.name, field.default is None) for field in fields(value))
    encoded = {"type": kind.__name__}
    for name, optional in names:
        item = getattr(value, name)
        if item is None and optional:
            continue
        encoded[name] = _fields(item) if isinstance(item, AttemptResult) else item
    return encoded


# dataclasses.fields() is slow for a call per forwarded command: (name, whether its default is None) by type
_FIELD_NAMES: dict[type, tuple[tuple[str, bool], ...]] = {}


def _command(item: dict) -> Command:
    item = dict(item)
    kind = _COMMANDS[item.pop("type")]
    if kind is CompleteAttempt:
        result = dict(item["result"])
        item["result"] = _RESULTS[result.pop("type")](**result)
    return kind(**item)


def _reply(reply: object) -> dict:
    if not isinstance(reply, BaseException):
        return {"ok": reply}
    name = type(reply).__name__
    if isinstance(reply, ShardNotOwned):
        return {"error": name, "shard": reply.shard_id}
    if isinstance(reply, ExecutionNotRedrivable):
        return {"error": name, "arn": reply.arn, "reason": reply.reason}
    if name in _REFUSALS:
        return {"error": name, "arn": reply.arn}
    if name in _RETRYABLE:
        return {"error": name, "message": str(reply)}
    return {"error": EngineUnavailable.__name__, "message": f"{name}: {reply}"}


def _unreply(item: dict) -> object:
    if "ok" in item:
        return item["ok"]
    name = item["error"]
    if name == ShardNotOwned.__name__:
        return ShardNotOwned(item["shard"])
    if name == ExecutionNotRedrivable.__name__:
        return ExecutionNotRedrivable(item["arn"], item["reason"])
    if name in _REFUSALS:
        return _REFUSALS[name](item["arn"])
    return _RETRYABLE.get(name, EngineUnavailable)(item["message"])
