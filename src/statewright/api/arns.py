"""ARNs and resource names in AWS's formats."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import AwsError, invalid_arn

# Characters AWS refuses in state machine and execution names (see StartExecution's documentation).
_BAD_NAME = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f\ufffe\uffff]")


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a request acts: the partition, region and account its ARNs carry."""

    region: str
    account: str
    partition: str = "aws"

    def arn(self, resource: str) -> str:
        return f"arn:{self.partition}:states:{self.region}:{self.account}:{resource}"

    def state_machine_arn(self, name: str) -> str:
        return self.arn(f"stateMachine:{name}")


def check_name(name: str) -> None:
    if _BAD_NAME.search(name):
        raise AwsError("InvalidName", f"Invalid Name: '{name}'")


def parse(arn: str, resource_type: str) -> list[str]:
    """Split a states ARN and check its resource type; returns the parts after the type.

    ``arn:aws:states:us-east-1:123456789012:execution:machine:run`` with type ``execution`` gives
    ``["machine", "run"]``.
    """
    parts = arn.split(":")
    if len(parts) < 7 or parts[0] != "arn" or parts[2] != "states":
        raise invalid_arn(f"Invalid ARN prefix: {arn}")
    if parts[5] != resource_type:
        raise invalid_arn(f"Resource type not valid in this context: {parts[5]}")
    rest = parts[6:]
    if not all(rest):
        raise invalid_arn(f"Invalid ARN: {arn}")
    return rest


def state_machine(arn: str) -> str:
    """Check a state machine ARN; versions and aliases are not served yet."""
    rest = parse(arn, "stateMachine")
    if len(rest) != 1:
        raise invalid_arn(f"Invalid ARN: {arn}: versions and aliases are not supported yet")
    return arn


def execution(arn: str) -> tuple[str, str]:
    """The state machine ARN and execution name of an execution ARN."""
    rest = parse(arn, "execution")
    if len(rest) != 2:
        raise invalid_arn(f"Invalid ARN: {arn}")
    prefix = arn.rsplit(":", 3)[0]
    return f"{prefix}:stateMachine:{rest[0]}", rest[1]
