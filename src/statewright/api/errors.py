"""API errors in the shape AWS's JSON protocol uses, so SDKs raise their modelled exceptions."""

from __future__ import annotations

_PREFIX = "com.amazonaws.swf.service.v2.model#"
_PREFIXES = {"ValidationException": "com.amazon.coral.validate#",
             "ThrottlingException": "com.amazon.coral.availability#",
             "InvalidSignatureException": "com.amazon.coral.service#"}


class AwsError(Exception):
    """An error answered to the client: ``code`` is the AWS error name, ``status`` the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400, **members: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.members = members  # the error shape's other members (ValidationException's reason, ...)

    def body(self) -> dict[str, str]:
        return {"__type": _PREFIXES.get(self.code, _PREFIX) + self.code, "message": self.message, **self.members}


def validation(message: str) -> AwsError:
    return AwsError("ValidationException", f"1 validation error detected: {message}")


THROTTLING = "ThrottlingException"


def throttled() -> AwsError:
    """AWS's answer when a request is over a rate or a queue is full: SDKs back off and retry it."""
    return AwsError(THROTTLING, "Rate exceeded")


def state_machine_does_not_exist(arn: str) -> AwsError:
    return AwsError("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")


def execution_does_not_exist(arn: str) -> AwsError:
    return AwsError("ExecutionDoesNotExist", f"Execution Does Not Exist: '{arn}'")


def invalid_arn(reason: str) -> AwsError:
    return AwsError("InvalidArn", f"Invalid Arn: '{reason}'")


def type_not_supported() -> AwsError:
    """An operation that the state machine's type (STANDARD or EXPRESS) does not have, in AWS's words."""
    return AwsError("StateMachineTypeNotSupported", "This operation is not supported by this type of state machine")


def conflict(message: str) -> AwsError:
    return AwsError("ConflictException", message, 409)


def quota_exceeded(message: str) -> AwsError:
    return AwsError("ServiceQuotaExceededException", message, 402)


def resource_not_found(arn: str) -> AwsError:
    return AwsError("ResourceNotFound", "Request references a resource that does not exist.", resourceName=arn)


def invalid_routing(message: str) -> AwsError:
    return AwsError("ValidationException", message, reason="INVALID_ROUTING_CONFIGURATION")
