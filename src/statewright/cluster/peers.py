"""What nodes of a cluster ask each other, and how this node answers. Over the channel (channel.py): forwarded
engine commands, applied to this node's engine and answered with their replies once committed (COMMANDS), and
changes (CHANGED, a body ``{"kind": "stateMachine" | "activity", "arn": ...}``, written by ``change``: a state
machine or an activity changed through another node, so this one drops or re-reads what it keeps of it before that
node answers its client). Over HTTP, ``POST /_statewright/membership`` (an empty body) tells a node that another
joined or left, so it steps its membership at once and shards move in milliseconds rather than at the next lease
renewal: the membership thread sends it (``poke``), without an event loop, and it is rare.

That request is signed with the shared cluster secret, which never crosses the wire: the sender signs the request's
time and body with HMAC-SHA256 (header ``x-statewright-signature: <epoch ms>.<hex digest>``), and the receiver
accepts it only if the digest matches (``hmac.compare_digest``) and the time is within SIGNATURE_WINDOW_MS of its own
clock. A replay within that window only makes a node step its membership once more. Nodes' clocks must agree within
the window.

A node without a secret (not in cluster mode) answers 404, as for any path it does not serve; a missing, stale or
wrong signature is answered 403 (``refusal`` says why; the API answers both in AWS's error shape).

This node is reached through ``Here`` (the API's service): this module imports the engine's wire format and the
channel, never the API.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
import urllib.request
from typing import Any, Protocol

import orjson

from ..engine.commands import Command, InboxFull, MalformedMessage, decode_commands, encode_replies
from . import channel

log = logging.getLogger("statewright.cluster")

MEMBERSHIP_PATH = "/_statewright/membership"
POKE_TIMEOUT_S = 1.0
SIGNATURE_HEADER = "x-statewright-signature"
SIGNATURE_WINDOW_MS = 60_000  # how far a request's signed time may be from the receiver's clock, either way
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a proxy from the environment is for outside
_SIGNATURE = re.compile(r"(\d{1,15})\.([0-9a-f]{64})", re.ASCII)
# What a CHANGED request says changed: a state machine (its record, and its versions' and aliases'), or an activity.
STATE_MACHINE, ACTIVITY = "stateMachine", "activity"
CHANGED_KINDS = (STATE_MACHINE, ACTIVITY)


class Here(Protocol):
    """This node, as the other nodes' requests reach it."""

    async def run_here(self, commands: list[Command], *, throttle: bool) -> list[object]:
        """This node's engine's replies to ``commands`` once committed, in order, errors as exception instances
        (ShardNotOwned for a shard it does not serve)."""

    async def refresh(self, kind: str, arn: str) -> None:
        """Drop or re-read what this node keeps of a resource that changed (``kind``: CHANGED_KINDS)."""


def sign(secret: bytes, body: bytes, now_ms: int | None = None) -> str:
    """The signature header's value for ``body`` sent at ``now_ms`` (default: now)."""
    signed_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return f"{signed_ms}.{_digest(secret, signed_ms, body)}"


def verify(secret: bytes, signature: str, body: bytes) -> str | None:
    """None if ``signature`` signs ``body`` with ``secret`` at a time near now; else why not."""
    parsed = _SIGNATURE.fullmatch(signature)
    if parsed is None:
        return f"no valid {SIGNATURE_HEADER} header"
    signed_ms = int(parsed.group(1))
    if not hmac.compare_digest(parsed.group(2), _digest(secret, signed_ms, body)):
        return "the request is not signed with this cluster's secret"
    if abs(time.time_ns() // 1_000_000 - signed_ms) > SIGNATURE_WINDOW_MS:
        return "the request's signature is too old (or the nodes' clocks differ by more than a minute)"
    return None


def secret_check(secret: bytes) -> str:
    """What the database records of the cluster secret, so a node started with another one refuses to join: a
    digest, from which the secret cannot be read back."""
    return hmac.new(secret, b"statewright cluster secret check", hashlib.sha256).hexdigest()


def refusal(secret: bytes, scope: dict, body: bytes) -> str | None:
    """None if a membership call (an ASGI http scope and its body) is signed with ``secret`` at a time near now;
    else why it is refused (logged)."""
    signature = dict(scope["headers"]).get(SIGNATURE_HEADER.encode(), b"").decode("latin-1")
    refused = verify(secret, signature, body)
    if refused is not None:
        log.warning("refused a call to %s from %s: %s", scope["path"], (scope.get("client") or ("?",))[0], refused)
    return refused


async def serve_channel(scope: dict, receive: Any, send: Any, secret: bytes | None, here: Here) -> None:
    """Serve a channel another node opened (see channel.py); None for ``secret``: not in cluster mode, refused."""

    async def answer(kind: bytes, body: bytes) -> tuple[bytes, bytes]:
        if kind == channel.COMMANDS:
            return await _serve_commands(here, body)
        if kind == channel.CHANGED:
            return await _serve_changed(here, body)
        return channel.REFUSED, f"not a kind of request: {kind!r}".encode()

    await channel.serve(scope, receive, send, secret, answer)


def change(kind: str, arn: str) -> bytes:
    """The body of a CHANGED request: ``arn`` changed (``kind``: CHANGED_KINDS)."""
    return orjson.dumps({"kind": kind, "arn": arn})


def poke(secret: bytes, addresses: list[str]) -> None:
    """Tell these nodes the membership changed (blocking, best effort: they step at their next renewal anyway)."""
    for address in addresses:
        request = urllib.request.Request(address.rstrip("/") + MEMBERSHIP_PATH, data=b"", method="POST",
                                         headers={SIGNATURE_HEADER: sign(secret, b"")})
        try:
            _DIRECT.open(request, timeout=POKE_TIMEOUT_S).close()
        except OSError as exc:  # refused, timed out, or an HTTP error status (urllib's HTTPError is an OSError)
            log.info("could not tell %s the membership changed: %s", address, exc)


async def _serve_changed(here: Here, body: bytes) -> tuple[bytes, bytes]:
    try:
        changed = orjson.loads(body)
        kind, arn = changed["kind"], changed["arn"]
        if kind not in CHANGED_KINDS or not isinstance(arn, str):
            raise ValueError(f"not a change: {changed!r}")
    except (ValueError, TypeError, KeyError) as exc:
        return channel.REFUSED, str(exc).encode()
    await here.refresh(kind, arn)
    return channel.OK, b""


async def _serve_commands(here: Here, body: bytes) -> tuple[bytes, bytes]:
    try:
        commands, throttle = decode_commands(body)
    except MalformedMessage as exc:
        return channel.REFUSED, str(exc).encode()
    replies: list[Any]
    try:
        replies = await here.run_here(commands, throttle=throttle)
    except InboxFull as full:  # the sender's caller hears ThrottlingException, as from its own node (throttled
        replies = [full] * len(commands)  # requests are the API's, one command each)
    return channel.OK, encode_replies(replies)


def _digest(secret: bytes, signed_ms: int, body: bytes) -> str:
    return hmac.new(secret, b"%d." % signed_ms + body, hashlib.sha256).hexdigest()
