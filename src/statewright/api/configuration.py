"""The configuration members of state machines and activities: logging, tracing and encryption, checked and
filled in as AWS does. Execution logs are delivered (integrations/execution_logs.py, which also checks that the log
group exists); traces and keys are kept and shown, not used.

What AWS documents is checked: a log level other than OFF needs exactly one CloudWatch Logs group destination
(an ARN ending in ``:*``); a customer managed key needs its ``kmsKeyId`` (the reuse period's 60-900 s range is the
service model's, checked with the request). Nothing here reaches KMS or CloudWatch.
"""

from __future__ import annotations

import re
from typing import Any

from ..store.base import AWS_OWNED_KEY
from .errors import AwsError

DEFAULT_LOGGING = {"level": "OFF", "includeExecutionData": False}
DEFAULT_TRACING = {"enabled": False}
KEY_REUSE_DEFAULT_S = 300  # kmsDataKeyReusePeriodSeconds when a customer managed key is given without one
_LOG_GROUP_ARN = re.compile(r"^arn:aws[a-z-]*:logs:[a-z0-9-]+:\d{12}:log-group:[\w./#-]+:\*$")


def logging_of(given: dict[str, Any] | None) -> dict[str, Any]:
    """The loggingConfiguration to keep: AWS's default when none was given."""
    if given is None:
        return dict(DEFAULT_LOGGING)
    level = given.get("level", "OFF")
    destinations = given.get("destinations", [])
    if level != "OFF" and len(destinations) != 1:
        raise invalid_logging("Must specify exactly one Log Destination.")
    for destination in destinations:
        group = (destination.get("cloudWatchLogsLogGroup") or {}).get("logGroupArn", "")
        if not _LOG_GROUP_ARN.match(group):
            raise invalid_logging(f"Invalid log group ARN: '{group}'. The ARN must name a CloudWatch Logs log "
                                   f"group and end with ':*'.")
    kept: dict[str, Any] = {"level": level, "includeExecutionData": given.get("includeExecutionData", False)}
    if destinations:
        kept["destinations"] = destinations
    return kept


def tracing_of(given: dict[str, Any] | None) -> dict[str, Any]:
    return {"enabled": bool((given or DEFAULT_TRACING).get("enabled", False))}


def encryption_of(given: dict[str, Any] | None) -> dict[str, Any]:
    """The encryptionConfiguration to keep: an AWS owned key unless a customer managed one is named."""
    if given is None or given["type"] == "AWS_OWNED_KEY":
        return dict(AWS_OWNED_KEY)
    if not given.get("kmsKeyId"):
        raise AwsError("InvalidEncryptionConfiguration",
                       "Invalid Encryption Configuration: kmsKeyId is required when type is CUSTOMER_MANAGED_KMS_KEY")
    return {"type": given["type"], "kmsKeyId": given["kmsKeyId"],
            "kmsDataKeyReusePeriodSeconds": given.get("kmsDataKeyReusePeriodSeconds", KEY_REUSE_DEFAULT_S)}


def invalid_logging(reason: str) -> AwsError:
    return AwsError("InvalidLoggingConfiguration", f"Invalid Logging Configuration: {reason}")
