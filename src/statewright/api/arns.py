"""ARNs and resource names in AWS's formats."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import AwsError, invalid_arn, state_machine_does_not_exist

# Characters AWS refuses in state machine and execution names (see StartExecution's documentation).
_BAD_NAME = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f\ufffe\uffff]")
# CreateStateMachineAlias's name pattern in the service model (at least one character that is not a digit).
ALIAS_NAME_PATTERN = r"^(?=.*[a-zA-Z_\-\.])[a-zA-Z0-9_\-\.]+$"
_ALIAS_NAME = re.compile(ALIAS_NAME_PATTERN)
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")
REGION_NAME = re.compile(r"[a-z]{2}(?:-[a-z]{1,12}){1,3}-\d{1,2}")  # us-east-1, us-gov-west-1, cn-north-1, ...
# A Step Functions ARN's partition, region and 12-digit account
_STATES_SCOPE = re.compile(rf"^arn:aws(-[a-z]+)*:states:{REGION_NAME.pattern}:\d{{12}}:")


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a request acts: the partition, region and account its ARNs carry; ``caller``, the access key id of a
    signed caller (--auth sigv4), None when any caller is taken (--auth open)."""

    region: str
    account: str
    partition: str = "aws"
    caller: str | None = None

    def arn(self, resource: str) -> str:
        return f"arn:{self.partition}:states:{self.region}:{self.account}:{resource}"

    def state_machine_arn(self, name: str) -> str:
        return self.arn(f"stateMachine:{name}")


def is_alias_name(name: str) -> bool:
    return bool(_ALIAS_NAME.match(name))


def check_name(name: str) -> None:
    if _BAD_NAME.search(name):
        raise AwsError("InvalidName", f"Invalid Name: '{name}'")


def check_role(role_arn: str) -> None:
    """An IAM role ARN (CreateStateMachine's, UpdateStateMachine's, TestState's): statewright does not assume it,
    but AWS refuses anything that is not one, with InvalidArn."""
    if not role_arn.startswith("arn:"):
        raise invalid_arn(f"Invalid ARN prefix: {role_arn}")
    if not _ROLE_ARN.match(role_arn):
        raise invalid_arn(f"Resource type not valid in this context: {role_arn}")


def parse(arn: str, resource_type: str) -> list[str]:
    """Split a states ARN and check its resource type; returns the parts after the type.

    ``arn:aws:states:us-east-1:123456789012:execution:machine:run`` with type ``execution`` gives
    ``["machine", "run"]``.
    """
    parts = arn.split(":")
    if len(parts) < 7 or parts[0] != "arn" or parts[2] != "states":
        raise invalid_arn(f"Invalid ARN prefix: {arn}")
    check_scope(arn)
    if parts[5] != resource_type:
        raise invalid_arn(f"Resource type not valid in this context: {parts[5]}")
    rest = parts[6:]
    if not all(rest):
        raise invalid_arn(f"Invalid ARN: {arn}")
    return rest


def check_scope(arn: str) -> None:
    """A Step Functions ARN names a partition, a region and an account in their forms, or it is InvalidArn (a
    mistyped one would otherwise be a resource that does not exist, and its deletion would succeed)."""
    if not _STATES_SCOPE.match(arn):
        raise invalid_arn(f"Invalid ARN: {arn}")


@dataclass(frozen=True, slots=True)
class MachineArn:
    """A state machine ARN, unqualified or qualified by a version number or an alias name."""

    machine: str  # the unqualified ARN
    version: int | None = None
    alias: str | None = None


def qualified(arn: str) -> MachineArn:
    """Check a state machine, version or alias ARN (``...:stateMachine:name``, ``...:name:3``, ``...:name:PROD``).
    Alias names hold a character other than a digit, so the two never collide."""
    rest = parse(arn, "stateMachine")
    if len(rest) == 1:
        return MachineArn(arn)
    if len(rest) != 2:
        raise invalid_arn(f"Invalid ARN: {arn}")
    machine = arn.rsplit(":", 1)[0]
    if rest[1].isdigit():
        if int(rest[1]) < 1 or rest[1] != str(int(rest[1])):
            raise invalid_arn(f"Invalid ARN: {arn}")
        return MachineArn(machine, version=int(rest[1]))
    if not is_alias_name(rest[1]):
        raise invalid_arn(f"Invalid ARN: {arn}")
    return MachineArn(machine, alias=rest[1])


def state_machine(arn: str) -> str:
    """Check an unqualified state machine ARN, for the operations that take no version or alias: AWS answers those
    that name one as a state machine that does not exist."""
    if qualified(arn).machine != arn:
        raise state_machine_does_not_exist(arn)
    return arn


def version(arn: str) -> tuple[str, int]:
    """The state machine ARN and version number of a version ARN."""
    target = qualified(arn)
    if target.version is None:
        raise invalid_arn(f"Invalid ARN: {arn}: not a state machine version ARN")
    return target.machine, target.version


def alias(arn: str) -> tuple[str, str]:
    """The state machine ARN and alias name of an alias ARN."""
    target = qualified(arn)
    if target.alias is None:
        raise invalid_arn(f"Invalid ARN: {arn}: not a state machine alias ARN")
    return target.machine, target.alias


def execution(arn: str) -> tuple[str, str]:
    """The state machine ARN and execution name of an execution ARN."""
    rest = parse(arn, "execution")
    if len(rest) != 2:
        raise invalid_arn(f"Invalid ARN: {arn}")
    prefix = arn.rsplit(":", 3)[0]
    return f"{prefix}:stateMachine:{rest[0]}", rest[1]
