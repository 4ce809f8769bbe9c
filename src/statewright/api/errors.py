"""API errors in the shape AWS's JSON protocol uses, so SDKs raise their modelled exceptions."""

from __future__ import annotations

_PREFIX = "com.amazonaws.swf.service.v2.model#"
_PREFIXES = {"ValidationException": "com.amazon.coral.validate#",
             "ThrottlingException": "com.amazon.coral.availability#",
             "InvalidSignatureException": "com.amazon.coral.service#"}


class AwsError(Exception):
    """An error answered to the client: ``code`` is the AWS error name, ``status`` the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def body(self) -> dict[str, str]:
        return {"__type": _PREFIXES.get(self.code, _PREFIX) + self.code, "message": self.message}


def validation(message: str) -> AwsError:
    return AwsError("ValidationException", f"1 validation error detected: {message}")


def throttled() -> AwsError:
    """AWS's answer when a request is over a rate or a queue is full: SDKs back off and retry it."""
    return AwsError("ThrottlingException", "Rate exceeded")


def state_machine_does_not_exist(arn: str) -> AwsError:
    return AwsError("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")


def execution_does_not_exist(arn: str) -> AwsError:
    return AwsError("ExecutionDoesNotExist", f"Execution Does Not Exist: '{arn}'")


def invalid_arn(reason: str) -> AwsError:
    return AwsError("InvalidArn", f"Invalid Arn: '{reason}'")
