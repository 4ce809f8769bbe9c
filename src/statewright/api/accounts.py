"""The accounts file of ``--auth sigv4``: who may call, with which keys, in which regions.

```json
{"accounts": [{"accountId": "111111111111",
               "keys": [{"accessKeyId": "AKIA...", "secretAccessKey": "..."},
                        {"accessKeyId": "ASIA...", "secretAccessKey": "...", "sessionToken": "...",
                         "expiration": "2027-01-01T00:00:00Z"}],
               "regions": ["us-east-1"], "limits": {"state-machines": 500, "rate.StartExecution": "100/10"}}]}
```

A key with a ``sessionToken`` is a temporary key: a request signed with it must carry that token
(``X-Amz-Security-Token``), and after its ``expiration`` it is refused as AWS refuses an expired session. An
account without ``regions`` may call in any region. An account's ``limits`` set its own quotas over the server's
(quotas.py). The file is read at start and again on SIGHUP; a file that does not parse leaves the accounts read
before in place.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .arns import REGION_NAME
from .quotas import InvalidLimit, QuotaSet, with_settings

ACCOUNT_ID = re.compile(r"\d{12}")
# Region names as AWS forms them (us-east-1, us-gov-west-1, ap-southeast-5): a region becomes part of every ARN.
ACCESS_KEY_ID = re.compile(r"[A-Za-z0-9]{16,128}")
_ACCOUNT_FIELDS = {"accountId", "keys", "regions", "limits"}
_KEY_FIELDS = {"accessKeyId", "secretAccessKey", "sessionToken", "expiration"}


class AccountsFileError(Exception):
    """The accounts file cannot be read or says something it may not; the message names the place."""


@dataclass(frozen=True, slots=True)
class Key:
    access_key_id: str
    secret: str
    account: Account
    session_token: str | None = None
    expires_s: float | None = None  # a temporary key's end, in Unix seconds


@dataclass(frozen=True, slots=True)
class Account:
    account_id: str
    regions: frozenset[str] | None  # None: every region
    limits: Mapping[str, Any] = field(default_factory=dict)  # its own quotas (quotas.py), over the server's

    def serves(self, region: str) -> bool:
        return self.regions is None or region in self.regions


class Accounts:
    """The accounts and their keys, looked up by access key id; ``reload`` swaps in what the file says now."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._keys: dict[str, Key] = {}
        self._limits: dict[str, Mapping[str, Any]] = {}
        self.accounts: tuple[Account, ...] = ()
        self.reload()

    def reload(self) -> None:
        """Read the file again; raises AccountsFileError (and keeps what it had) when the file is wrong."""
        accounts, keys = parse(_read(self.path), str(self.path))
        # one swap each: a request sees one file or the other
        self.accounts, self._keys = accounts, keys
        self._limits = {account.account_id: account.limits for account in accounts if account.limits}

    def key(self, access_key_id: str) -> Key | None:
        return self._keys.get(access_key_id)

    def limits_of(self, account_id: str) -> Mapping[str, Any] | None:
        return self._limits.get(account_id)

    def first_key(self, account_id: str) -> Key | None:
        """A key of the account that is not temporary (what the workflows' own Step Functions calls sign with)."""
        return next((key for key in self._keys.values()
                     if key.account.account_id == account_id and key.session_token is None), None)


def _read(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except OSError as exc:
        raise AccountsFileError(f"cannot read the accounts file {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise AccountsFileError(f"the accounts file {path} is not JSON: {exc}") from None


def parse(document: Any, where: str = "the accounts file") -> tuple[tuple[Account, ...], dict[str, Key]]:
    """The accounts and the keys by access key id, or AccountsFileError naming the first thing wrong."""
    if not isinstance(document, dict) or set(document) != {"accounts"} or not isinstance(document["accounts"], list):
        raise AccountsFileError(f'{where}: expected {{"accounts": [...]}}')
    if not document["accounts"]:
        raise AccountsFileError(f"{where}: lists no account, so no caller could sign in; list at least one")
    accounts: list[Account] = []
    keys: dict[str, Key] = {}
    for n, entry in enumerate(document["accounts"]):
        at = f"{where}: accounts[{n}]"
        if not isinstance(entry, dict):
            raise AccountsFileError(f"{at}: expected an object")
        _no_others(entry, _ACCOUNT_FIELDS, at)
        account_id = entry.get("accountId")
        if not isinstance(account_id, str) or not ACCOUNT_ID.fullmatch(account_id):
            raise AccountsFileError(f"{at}.accountId: expected 12 digits in a string")
        if any(account.account_id == account_id for account in accounts):
            raise AccountsFileError(f"{at}.accountId: {account_id} is listed twice")
        regions = entry.get("regions")
        if regions is not None and (not isinstance(regions, list) or not regions or not all(
                isinstance(region, str) and REGION_NAME.fullmatch(region) for region in regions)):
            raise AccountsFileError(f"{at}.regions: expected a list of region names such as us-east-1")
        limits = entry.get("limits") or {}
        if not isinstance(limits, dict):
            raise AccountsFileError(f"{at}.limits: expected an object of limits, such as {{\"state-machines\": 500}}")
        try:
            with_settings(QuotaSet(), limits)
        except InvalidLimit as exc:
            raise AccountsFileError(f"{at}.limits: {exc}") from None
        account = Account(account_id, None if regions is None else frozenset(regions), limits)
        accounts.append(account)
        listed = entry.get("keys")
        if not isinstance(listed, list) or not listed:
            raise AccountsFileError(f"{at}.keys: expected a list of at least one key")
        for k, raw in enumerate(listed):
            key = _key(raw, account, f"{at}.keys[{k}]")
            if key.access_key_id in keys:
                raise AccountsFileError(f"{at}.keys[{k}].accessKeyId: {key.access_key_id} is listed twice")
            keys[key.access_key_id] = key
    return tuple(accounts), keys


def _key(raw: Any, account: Account, at: str) -> Key:
    if not isinstance(raw, dict):
        raise AccountsFileError(f"{at}: expected an object")
    _no_others(raw, _KEY_FIELDS, at)
    key_id, secret = raw.get("accessKeyId"), raw.get("secretAccessKey")
    if not isinstance(key_id, str) or not ACCESS_KEY_ID.fullmatch(key_id):
        raise AccountsFileError(f"{at}.accessKeyId: expected 16 to 128 letters and digits")
    if not isinstance(secret, str) or not secret:
        raise AccountsFileError(f"{at}.secretAccessKey: expected a string that is not empty")
    token, expiration = raw.get("sessionToken"), raw.get("expiration")
    if token is not None and (not isinstance(token, str) or not token):
        raise AccountsFileError(f"{at}.sessionToken: expected a string")
    if expiration is not None and token is None:
        raise AccountsFileError(f"{at}.expiration: only a temporary key (one with a sessionToken) expires")
    return Key(key_id, secret, account, token, None if expiration is None else _instant(expiration, f"{at}.expiration"))


def _instant(text: Any, at: str) -> float:
    try:
        moment = datetime.datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise AccountsFileError(f"{at}: expected an ISO 8601 time with its zone, such as 2027-01-01T00:00:00Z")
    return moment.timestamp()


def _no_others(entry: dict, known: set[str], at: str) -> None:
    unknown = sorted(set(entry) - known)
    if unknown:
        raise AccountsFileError(f"{at}: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
