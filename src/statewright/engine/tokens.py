"""Task tokens: self-describing and signed, so a reply routes itself and proves it was issued by us.

A token carries the execution ARN (which gives the shard), the attempt's scheduled event id and attempt number,
and the id of the key that signed it, with an HMAC-SHA256 over all of it. No index from token to execution
exists or is needed. New tokens use the current key; every key in the set still verifies, so a key retired
only after the longest task has passed breaks nothing.

The key set lives in the store, shared by every node. A node reads it again (``refresh``) at every membership step
(cluster nodes: a rotation or retirement reaches them within a renewal interval) and, at most once a second, when
a token names a key it does not know (a node that has read a newer key set signed it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

import orjson

from ..store.base import Store

_SETTING = "task_token_keys"
_MAC_BYTES = 20
UNKNOWN_KEY_REREAD_S = 1.0  # how often a token naming an unknown key may make this node read the key set again


class InvalidToken(Exception):
    """Not a token we issued, or one tampered with."""


class UnknownKey(InvalidToken):
    """The token names a key this node's key set does not hold: a newer key set may (``reread_for``)."""


@dataclass(frozen=True, slots=True)
class TokenClaims:
    execution_arn: str
    scheduled_id: int
    attempt: int


class TaskTokens:
    def __init__(self, keys: dict[str, bytes], current: str, store: Store | None = None) -> None:
        if current not in keys:
            raise ValueError(f"the current key {current!r} is not in the key set")
        self._set = (keys, current)  # one attribute: a refresh on another thread swaps both at once
        self._store = store
        self._reread_at = 0.0

    @property
    def keys(self) -> dict[str, bytes]:
        return self._set[0]

    @property
    def current(self) -> str:
        return self._set[1]

    @property
    def key_set(self) -> tuple[dict[str, bytes], str]:
        """The keys and the current key's id, read together (a refresh swaps both at once)."""
        return self._set

    def mint(self, execution_arn: str, scheduled_id: int, attempt: int) -> str:
        keys, current = self._set
        body = orjson.dumps([execution_arn, scheduled_id, attempt, current])
        return f"{_b64(body)}.{_b64(_mac(keys[current], body))}"

    def verify(self, token: str) -> TokenClaims:
        try:
            body_text, mac_text = token.split(".")
            body = _unb64(body_text)
            execution_arn, scheduled_id, attempt, key_id = orjson.loads(body)
            mac = _unb64(mac_text)
        except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError):
            raise InvalidToken("the token is malformed") from None
        if _b64(body) != body_text or _b64(mac) != mac_text:
            raise InvalidToken("the token is not in its one canonical spelling")
        key = self.keys.get(key_id) if isinstance(key_id, str) else None
        if key is None:
            raise UnknownKey("the token's signature does not verify")
        if not hmac.compare_digest(mac, _mac(key, body)):
            raise InvalidToken("the token's signature does not verify")
        if not (isinstance(execution_arn, str) and isinstance(scheduled_id, int) and isinstance(attempt, int)):
            raise InvalidToken("the token is malformed")
        return TokenClaims(execution_arn, scheduled_id, attempt)

    def refresh(self) -> None:
        """Read the key set from the store again (blocking: a store read)."""
        if self._store is not None:
            self._set = _read(self._store)

    def reread_for(self, token: str, *, limited: bool = True) -> TokenClaims:
        """``verify`` after reading the key set again, for a token that named an unknown key (blocking). A token
        from outside (``limited``) rereads at most once per UNKNOWN_KEY_REREAD_S, so forged key ids cannot make a
        node read the store per request; one the engine itself carries (a child's parent token) always rereads."""
        now = time.monotonic()
        if self._store is not None and (now >= self._reread_at or not limited):
            self._reread_at = now + UNKNOWN_KEY_REREAD_S
            self.refresh()
        return self.verify(token)

    # -- the key set, kept in the store so every node signs and verifies alike

    @classmethod
    def load(cls, store: Store) -> TaskTokens:
        """The stored key set (the first node to start creates it), read again by ``refresh``."""
        return cls(*_read(store), store)

    @classmethod
    def rotate(cls, store: Store) -> str:
        """Add a new key and sign with it from now on (cluster nodes within a membership step; a server on its own
        when it restarts)."""
        tokens = cls.load(store)
        key_id = f"k{max(int(kid[1:]) for kid in tokens.keys) + 1}"
        keys = {**{kid: _b64(key) for kid, key in tokens.keys.items()}, key_id: _b64(secrets.token_bytes(32))}
        store.put_setting(_SETTING, _encode({"current": key_id, "keys": keys}))
        return key_id

    @classmethod
    def retire(cls, store: Store, key_id: str) -> None:
        """Stop accepting tokens signed with ``key_id``; the current key cannot be retired."""
        tokens = cls.load(store)
        if key_id == tokens.current:
            raise ValueError(f"{key_id} is the current key; rotate first")
        if key_id not in tokens.keys:
            raise ValueError(f"no key {key_id}; keys are {', '.join(sorted(tokens.keys))}")
        keys = {kid: _b64(key) for kid, key in tokens.keys.items() if kid != key_id}
        store.put_setting(_SETTING, _encode({"current": tokens.current, "keys": keys}))


def _read(store: Store) -> tuple[dict[str, bytes], str]:
    text = store.get_setting(_SETTING)  # a read; only the first node to start writes the key set
    if text is None:
        text = store.put_setting_if_absent(_SETTING, _encode({"current": "k1",
                                                              "keys": {"k1": _b64(secrets.token_bytes(32))}}))
    stored = orjson.loads(text)
    return {kid: _unb64(key) for kid, key in stored["keys"].items()}, stored["current"]


def _mac(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, body, hashlib.sha256).digest()[:_MAC_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _encode(value: object) -> str:
    return orjson.dumps(value).decode()
