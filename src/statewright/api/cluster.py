"""What nodes of a cluster ask each other. Over the channel (channel.py): forwarded engine commands, applied to this
node's engine and answered with their replies once committed (COMMANDS), and changes (CHANGED, a body
``{"kind": "stateMachine" | "activity", "arn": ...}``: a state machine or an activity changed through another node, so
this one drops or re-reads what it keeps of it before that node answers its client). Over HTTP, ``POST
/_statewright/membership`` (an empty body) tells a node that another joined or left, so it steps its membership at
once and shards move in milliseconds rather than at the next lease renewal: the membership thread sends it, without
an event loop, and it is rare.

That request is signed with the shared cluster secret, which never crosses the wire: the sender signs the request's
time and body with HMAC-SHA256 (header ``x-statewright-signature: <epoch ms>.<hex digest>``), and the receiver
accepts it only if the digest matches (``hmac.compare_digest``) and the time is within SIGNATURE_WINDOW_MS of its own
clock. A replay within that window only makes a node step its membership once more. Nodes' clocks must agree within
the window.

A node without a secret (not in cluster mode) answers 404, as for any path it does not serve; a missing, stale or
wrong signature is answered 403.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
import urllib.request
from typing import Any

import orjson

from ..engine.commands import InboxFull, MalformedMessage, decode_commands, encode_replies
from . import channel
from .errors import AwsError
from .service import CHANGED_KINDS, Service

log = logging.getLogger("statewright.api")

MEMBERSHIP_PATH = "/_statewright/membership"
POKE_TIMEOUT_S = 1.0
SIGNATURE_HEADER = "x-statewright-signature"
SIGNATURE_WINDOW_MS = 60_000  # how far a request's signed time may be from the receiver's clock, either way
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a proxy from the environment is for outside
_SIGNATURE = re.compile(r"(\d{1,15})\.([0-9a-f]{64})", re.ASCII)


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


def _digest(secret: bytes, signed_ms: int, body: bytes) -> str:
    return hmac.new(secret, b"%d." % signed_ms + body, hashlib.sha256).hexdigest()


async def serve_membership(service: Service, scope: dict, body: bytes) -> tuple[int, bytes]:
    """Answer ``POST /_statewright/membership`` from another node: (status, body)."""
    forwarder = service.forwarder
    if forwarder is None or scope["method"] != "POST":
        return _error(AwsError("UnknownOperationException",
                               f"{scope['method']} {scope['path']} is not served here", 404))
    signature = dict(scope["headers"]).get(SIGNATURE_HEADER.encode(), b"").decode("latin-1")
    refused = verify(forwarder.secret, signature, body)
    if refused is not None:
        log.warning("refused a call to %s from %s: %s", scope["path"], (scope.get("client") or ("?",))[0], refused)
        return _error(AwsError("AccessDeniedException", refused, 403))
    service.membership_changed()
    return 200, b"{}"


async def serve_channel(service: Service, scope: dict, receive: Any, send: Any) -> None:
    """Serve a channel another node opened (see channel.py)."""

    async def answer(kind: bytes, body: bytes) -> tuple[bytes, bytes]:
        if kind == channel.COMMANDS:
            return await _serve_commands(service, body)
        if kind == channel.CHANGED:
            return await _serve_changed(service, body)
        return channel.REFUSED, f"not a kind of request: {kind!r}".encode()

    forwarder = service.forwarder
    await channel.serve(scope, receive, send, None if forwarder is None else forwarder.secret, answer)


def poke(secret: bytes, addresses: list[str]) -> None:
    """Tell these nodes the membership changed (blocking, best effort: they step at their next renewal anyway)."""
    for address in addresses:
        request = urllib.request.Request(address.rstrip("/") + MEMBERSHIP_PATH, data=b"", method="POST",
                                         headers={SIGNATURE_HEADER: sign(secret, b"")})
        try:
            _DIRECT.open(request, timeout=POKE_TIMEOUT_S).close()
        except OSError as exc:  # refused, timed out, or an HTTP error status (urllib's HTTPError is an OSError)
            log.info("could not tell %s the membership changed: %s", address, exc)


async def _serve_changed(service: Service, body: bytes) -> tuple[bytes, bytes]:
    try:
        change = orjson.loads(body)
        kind, arn = change["kind"], change["arn"]
        if kind not in CHANGED_KINDS or not isinstance(arn, str):
            raise ValueError(f"not a change: {change!r}")
    except (ValueError, TypeError, KeyError) as exc:
        return channel.REFUSED, str(exc).encode()
    await service.refresh(kind, arn)
    return channel.OK, b""


async def _serve_commands(service: Service, body: bytes) -> tuple[bytes, bytes]:
    try:
        commands, throttle = decode_commands(body)
    except MalformedMessage as exc:
        return channel.REFUSED, str(exc).encode()
    replies: list[Any]
    try:
        replies = await service.run_here(commands, throttle=throttle)
    except InboxFull as full:  # the sender's caller hears ThrottlingException, as from its own node (throttled
        replies = [full] * len(commands)  # requests are the API's, one command each)
    return channel.OK, encode_replies(replies)


def _error(error: AwsError) -> tuple[int, bytes]:
    return error.status, orjson.dumps(error.body())
