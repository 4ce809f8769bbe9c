"""AWS's quotas as a setting: how many of each resource an account may hold, and the token buckets its API calls
draw from.

``--limits aws`` applies every quota as AWS sets it, the buckets included (the default with ``--auth sigv4``);
``--limits local`` the same without the buckets and the open-execution cap, so local tests and benchmarks are never
throttled (the default with ``--auth open``); ``--limits relaxed`` none of the quotas below. ``--limit NAME=VALUE``
sets one on top of the mode, and an account of the accounts file may set its own (``"limits": {NAME: VALUE}``).
The quotas AWS never raises (256 KiB payloads, 25,000 history events, a year's execution, 1 MiB definitions, the
name rules) hold in every mode, elsewhere in the code.

A bucket holds ``bucket`` tokens and gains ``refill`` a second; a call takes one, and a call that finds none is
answered ThrottlingException before anything is read or written. Buckets are kept per account, region and action
(at most BUCKETS_MAX of them, the least recently used forgotten: a forgotten bucket comes back full). On a cluster
each node keeps ``1/N`` of every bucket and of its refill (N the nodes it sees alive).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import AwsError, throttled

LIMIT_MODES = ("aws", "local", "relaxed")
BUCKETS_MAX = 100_000
# The regions where AWS's buckets are larger (its quota table: US East (N. Virginia), US West (Oregon), Europe
# (Ireland)); every other region has the smaller ones.
LARGE_REGIONS = frozenset({"us-east-1", "us-west-2", "eu-west-1"})


@dataclass(frozen=True, slots=True)
class Rate:
    bucket: float  # tokens when full
    refill: float  # tokens a second

    def __str__(self) -> str:
        return f"{self.bucket:g}/{self.refill:g}"


# AWS's default buckets per API action, (large regions, other regions), from "Quotas related to API action
# throttling" in the Step Functions developer guide. Actions it does not list are not throttled.
AWS_RATES: dict[str, tuple[Rate, Rate]] = {}


def _rates(table: str) -> dict[str, tuple[Rate, Rate]]:
    rates = {}
    for line in table.strip().splitlines():
        action, large, other = line.split()
        rates[action] = (Rate(*map(float, large.split("/"))), Rate(*map(float, other.split("/"))))
    return rates


# The newest copy of AWS's table (TestState in the main table at 50/10; an older one made it 1 a second, hard).
# StartSyncExecution has no bucket ("capacity on demand"). Express's StartExecution draws from a bucket of its own.
# StateTransition is no API action: the engine holds each account's Standard executions to it (engine/transitions.py).
AWS_RATES.update(_rates("""
CreateActivity 100/1 100/1
CreateStateMachine 100/1 100/1
CreateStateMachineAlias 100/1 100/1
DeleteActivity 100/1 100/1
DeleteStateMachine 100/1 100/1
DeleteStateMachineAlias 100/1 100/1
DeleteStateMachineVersion 100/1 100/1
DescribeActivity 200/1 200/1
DescribeExecution 300/15 250/10
DescribeMapRun 200/1 200/1
DescribeStateMachine 200/20 200/20
DescribeStateMachineAlias 200/1 200/1
DescribeStateMachineForExecution 200/1 200/1
GetActivityTask 3000/500 1500/300
GetExecutionHistory 400/20 400/20
ListActivities 100/10 100/5
ListExecutions 200/5 100/2
ListMapRuns 100/1 100/1
ListStateMachineAliases 100/1 100/1
ListStateMachines 100/5 100/5
ListStateMachineVersions 100/1 100/1
ListTagsForResource 100/1 100/1
PublishStateMachineVersion 100/1 100/1
RedriveExecution 1300/300 800/150
SendTaskFailure 3000/500 1500/300
SendTaskHeartbeat 3000/500 1500/300
SendTaskSuccess 3000/500 1500/300
StartExecution 1300/300 800/150
StartExecution.Express 6000/6000 6000/6000
StopExecution 1000/200 500/25
TagResource 200/1 200/1
TestState 50/10 50/10
UntagResource 200/1 200/1
UpdateMapRun 100/1 100/1
UpdateStateMachine 100/1 100/1
UpdateStateMachineAlias 100/1 100/1
ValidateStateMachineDefinition 100/1 100/1
StateTransition 5000/5000 800/800
"""))
# Actions whose bucket depends on the resource (StartExecution: Standard or Express): their handlers take the token.
TAKEN_BY_HANDLER = frozenset({"StartExecution"})


@dataclass(frozen=True, slots=True)
class QuotaSet:
    """The quotas in force for one account (None: no bound)."""

    state_machines: int | None = None
    activities: int | None = None
    tags_per_resource: int | None = None
    open_executions: int | None = None
    versions_per_state_machine: int | None = None
    aliases_per_state_machine: int | None = None
    rates: Mapping[str, tuple[Rate, Rate]] | None = None  # None: no bucket at all

    def rate(self, action: str, region: str) -> Rate | None:
        pair = None if self.rates is None else self.rates.get(action)
        return None if pair is None else pair[0 if region in LARGE_REGIONS else 1]


# The counted quotas: setting name -> (QuotaSet field, AWS's value)
COUNTS = {
    "state-machines": ("state_machines", 100_000),
    "activities": ("activities", 100_000),
    "tags-per-resource": ("tags_per_resource", 50),
    "open-executions": ("open_executions", 1_000_000),
    "versions-per-state-machine": ("versions_per_state_machine", 1_000),
    "aliases-per-state-machine": ("aliases_per_state_machine", 100),
}
UNBOUNDED = 1 << 62  # a count quota of None, where the store takes a number


def preset(mode: str) -> QuotaSet:
    if mode == "aws":
        return QuotaSet(**{name: value for name, value in COUNTS.values()}, rates=AWS_RATES)
    if mode == "local":
        return replace(preset("aws"), open_executions=None, rates=None)
    if mode == "relaxed":
        return QuotaSet()
    raise ValueError(f"--limits is one of {', '.join(LIMIT_MODES)}, not {mode!r}")


class InvalidLimit(ValueError):
    """A --limit (or an accounts file's limit) that names no quota or gives it no usable value."""


def with_settings(base: QuotaSet, settings: Mapping[str, Any]) -> QuotaSet:
    """``base`` with each of ``settings`` applied: ``state-machines``, ``activities``, ``tags-per-resource``,
    ``open-executions`` (a count, or ``none``), ``rates`` (``aws`` or ``none``), ``rate.ACTION`` (``BUCKET/REFILL``
    for both region groups, or ``none``)."""
    changes: dict[str, Any] = {}
    rates = dict(base.rates) if base.rates is not None else None
    for name, value in settings.items():
        text = str(value).strip().lower()
        if name in COUNTS:
            changes[COUNTS[name][0]] = None if text == "none" else _count(name, text)
        elif name == "rates":
            if text not in ("aws", "none"):
                raise InvalidLimit(f"rates: expected aws or none, not {value!r}")
            rates = dict(AWS_RATES) if text == "aws" else None
        elif name.startswith("rate."):
            action = name.removeprefix("rate.")
            if action not in AWS_RATES:
                raise InvalidLimit(f"{name}: no bucket is named {action!r}; the buckets are AWS's API actions, "
                                   "such as rate.StartExecution, rate.DescribeExecution or rate.StartExecution.Express")
            rates = {} if rates is None else rates
            if text == "none":
                rates.pop(action, None)
            else:
                rate = _rate(name, text)
                rates[action] = (rate, rate)
        else:
            raise InvalidLimit(f"unknown limit {name!r}; the limits are {', '.join(COUNTS)}, rates and "
                               "rate.ACTION (see the README's table)")
    return replace(base, **changes, rates=rates)


def _count(name: str, text: str) -> int:
    if not text.isdigit():
        raise InvalidLimit(f"{name}: expected a whole number or none, not {text!r}")
    return int(text)


def _rate(name: str, text: str) -> Rate:
    bucket, slash, refill = text.partition("/")
    try:
        rate = Rate(float(bucket), float(refill)) if slash else None
    except ValueError:
        rate = None
    if rate is None or rate.bucket < 1 or rate.refill <= 0:
        raise InvalidLimit(f"{name}: expected BUCKET/REFILL (at least 1 token, a refill above 0), not {text!r}")
    return rate


@dataclass(slots=True)
class Quotas:
    """The server's quotas (``base``, from --limits and --limit) and each account's own (``accounts``: account id
    to its settings, read with the accounts file)."""

    base: QuotaSet
    accounts: Callable[[str], Mapping[str, Any] | None] = lambda account: None
    _resolved: dict[tuple[str, int], QuotaSet] = field(default_factory=dict)

    def of(self, account: str) -> QuotaSet:
        settings = self.accounts(account)
        if not settings:
            return self.base
        key = (account, id(settings))  # an accounts file read again gives new settings objects
        found = self._resolved.get(key)
        if found is None:
            if len(self._resolved) > 10_000:
                self._resolved.clear()
            found = self._resolved[key] = with_settings(self.base, settings)
        return found


class _Bucket:
    __slots__ = ("at", "tokens")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens = tokens
        self.at = at


class RateLimiter:
    """Token buckets per account, region and action; ``share()``: this node's part of each (1/N on N nodes)."""

    def __init__(self, quotas: Quotas, clock: Callable[[], float] = time.monotonic,
                 share: Callable[[], float] = lambda: 1.0) -> None:
        self.quotas = quotas
        self._clock = clock
        self._share = share
        self._buckets: OrderedDict[tuple[str, str, str], _Bucket] = OrderedDict()

    def admit(self, account: str, region: str, action: str) -> None:
        """Take a token of the caller's bucket for ``action``, or raise ThrottlingException."""
        rate = self.quotas.of(account).rate(action, region)
        if rate is None:
            return
        share = self._share()
        size, refill = max(rate.bucket * share, 1.0), rate.refill * share  # a node's share holds one call at least
        now = self._clock()
        key = (account, region, action)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(size, now)
            if len(self._buckets) > BUCKETS_MAX:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(size, bucket.tokens + (now - bucket.at) * refill)
            bucket.at = now
        if bucket.tokens < 1:
            raise throttled()
        bucket.tokens -= 1



def check_tags(quotas: QuotaSet, arn: str, count: int) -> None:
    """TooManyTags when a resource would hold more tags than the tags-per-resource quota."""
    if quotas.tags_per_resource is not None and count > quotas.tags_per_resource:
        raise AwsError("TooManyTags", f"The resource '{arn}' would have {count} tags; a resource has at most "
                       f"{quotas.tags_per_resource} (tags-per-resource): untag some first", resourceName=arn)


def account_full(error: str, limit: int, what: str) -> AwsError:
    """AWS's ``error`` for an account that holds ``limit`` of ``what`` already."""
    return AwsError(error, f"The account already has {limit} {what} in this region, the most it may have: delete one "
                           f"first")
