"""Who is calling: the front door's first step, before a request's body is even parsed.

``--auth open`` (the default, for local use) takes any credentials, or none: every caller is the one account of
``--account-id``, in the region its Authorization header names (the default region if unsigned). ``--auth sigv4``
verifies each request's signature against the accounts file (sigv4.py, accounts.py): the caller's account goes into
every ARN it creates and lists, and ``check_owned`` refuses the ARNs of every other account, as IAM refuses a
caller no policy lets in. Each region is a place of its own, as AWS's regional endpoints are: a signed caller's own
resources of another region are not found in the one it signs for.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from . import sigv4
from .accounts import Accounts
from .arns import REGION_NAME, Scope, check_scope
from .errors import AwsError, resource_not_found

_CREDENTIAL_REGION = re.compile(r"Credential=[^/,]*/[^/,]*/([^/,]*)/")  # AKID/date/REGION/service/aws4_request
AUTH_MODES = ("open", "sigv4")


class Door(Protocol):
    def admit(self, method: str, raw_path: bytes, query: bytes, headers: list[tuple[bytes, bytes]],
              body: bytes) -> Scope:
        """The scope a request acts in, or the AwsError that refuses it."""


class OpenDoor:
    """Any credentials: one account; the region the request was signed for."""

    def __init__(self, account_id: str, default_region: str) -> None:
        self.account_id = account_id
        self.default_region = default_region

    def admit(self, method: str, raw_path: bytes, query: bytes, headers: list[tuple[bytes, bytes]],
              body: bytes) -> Scope:
        authorization = next((value for name, value in headers if name == b"authorization"), b"")
        match = _CREDENTIAL_REGION.search(authorization.decode("latin-1"))
        if match is None:
            return Scope(self.default_region, self.account_id)
        region = match.group(1)
        if not REGION_NAME.fullmatch(region):
            raise AwsError("InvalidSignatureException",
                           f"Credential should be scoped to a valid region, not '{region[:64]}'.")
        return Scope(region, self.account_id)


class SigV4Door:
    """Signed requests only, by the keys of the accounts file; each caller in its own account."""

    def __init__(self, accounts: Accounts, clock: Callable[[], float] = time.time) -> None:
        self.accounts = accounts
        self._clock = clock  # the wall clock, always: signers sign with theirs, never a --clock virtual one

    def admit(self, method: str, raw_path: bytes, query: bytes, headers: list[tuple[bytes, bytes]],
              body: bytes) -> Scope:
        caller = sigv4.verify(self.accounts, method, raw_path, query, headers, body, self._clock())
        return Scope(caller.region, caller.account_id, caller=caller.key.access_key_id)

    def own_keys(self, account_id: str) -> dict[str, str] | None:
        """The credentials a workflow of ``account_id`` calls this server's Step Functions API with."""
        key = self.accounts.first_key(account_id)
        return None if key is None else {"aws_access_key_id": key.access_key_id,
                                         "aws_secret_access_key": key.secret}


def door(mode: str, account_id: str, default_region: str, accounts_file: Path | None) -> Door:
    """The door of ``--auth MODE`` (raises AccountsFileError for an accounts file that is wrong)."""
    if mode == "sigv4":
        if accounts_file is None:
            raise ValueError("--auth sigv4 needs --accounts FILE: the accounts and their keys (see the README)")
        return SigV4Door(Accounts(accounts_file))
    if mode != "open":
        raise ValueError(f"--auth is one of {', '.join(AUTH_MODES)}, not {mode!r}")
    return OpenDoor(account_id, default_region)


def check_owned(operation: str, params: dict, scope: Scope) -> dict | None:
    """Refuse a request naming a resource of another account, and answer one naming the caller's own resource of
    another region as if it did not exist (only signed callers are told apart). Returns the answer, if that is all
    there is to it (a deletion of nothing, an empty list)."""
    if scope.caller is None:
        return None
    elsewhere = None
    for arn in _states_arns(params):
        check_scope(arn)  # a mistyped account or region is InvalidArn, not another account's or region's
        parts = arn.split(":", 5)
        if len(parts) > 4 and parts[4] != scope.account:
            raise AwsError(
                "AccessDeniedException", f"User: arn:{scope.partition}:iam::{scope.account}:user/{scope.caller} is "
                f"not authorized to perform: states:{operation} on resource: {arn} because no resource-based policy "
                f"allows the states:{operation} action")
        if elsewhere is None and len(parts) > 3 and parts[3] != scope.region:
            elsewhere = arn
    return None if elsewhere is None else _not_here(operation, elsewhere)


# What each operation answers for a resource that does not exist (inferred: AWS's regional endpoints know nothing of
# one another's resources): deletions of nothing succeed, a list of nothing is empty, the rest name what is missing.
_ABSENT_ANSWERS: dict[str, Callable[[], dict]] = {
    "DeleteActivity": dict, "DeleteStateMachine": dict, "DeleteStateMachineAlias": dict,
    "DeleteStateMachineVersion": dict, "ListStateMachineVersions": lambda: {"stateMachineVersions": []}}
_MISSING = {
    "ActivityDoesNotExist": ("Activity Does Not Exist", ("DescribeActivity", "GetActivityTask")),
    "ExecutionDoesNotExist": ("Execution Does Not Exist", (
        "DescribeExecution", "DescribeStateMachineForExecution", "GetExecutionHistory", "ListMapRuns",
        "RedriveExecution", "StopExecution")),
    "StateMachineDoesNotExist": ("State Machine Does Not Exist", (
        "DescribeStateMachine", "ListStateMachineAliases", "PublishStateMachineVersion", "StartExecution",
        "StartSyncExecution", "UpdateStateMachine")),
}
_MISSING_BY_OPERATION = {operation: code for code, (_, operations) in _MISSING.items() for operation in operations}


def _not_here(operation: str, arn: str) -> dict:
    if operation in _ABSENT_ANSWERS:
        return _ABSENT_ANSWERS[operation]()
    if operation == "ListExecutions" and ":stateMachine:" in arn:
        code = "StateMachineDoesNotExist"
    else:
        code = _MISSING_BY_OPERATION.get(operation, "ResourceNotFound")
    if code == "ResourceNotFound":
        raise resource_not_found(arn)
    raise AwsError(code, f"{_MISSING[code][0]}: '{arn}'")


def _states_arns(value: Any, depth: int = 0) -> Iterator[str]:
    """The Step Functions ARNs among a request's members (``stateMachineArn``, ``routingConfiguration``'s version
    ARNs, ...): members named ``...Arn`` two levels deep at most, as the service model nests them."""
    if isinstance(value, dict):
        for name, member in value.items():
            if isinstance(member, str):
                if name.endswith("Arn") and member.startswith("arn:") and member.split(":", 3)[2:3] == ["states"]:
                    yield member
            elif depth < 2 and isinstance(member, dict | list):
                yield from _states_arns(member, depth + 1)
    elif isinstance(value, list):
        for member in value:
            yield from _states_arns(member, depth + 1)
