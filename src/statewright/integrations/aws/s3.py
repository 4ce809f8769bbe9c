"""What a distributed Map's ItemReader and ResultWriter share: one S3 call made until S3 answers (or refuses, or
stays out of reach too long), and the refusal in words a cause can carry."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from .clients import AwsClients

log = logging.getLogger("statewright.integrations")
T = TypeVar("T")
RETRY_FIRST_S = 0.5  # the first pause after S3 could not be reached, doubling to RETRY_MAX_S
RETRY_MAX_S = 30.0
UNREACHABLE_S = 900.0  # S3 out of reach this long fails the Map (a map run has no deadline of its own)
REPORT_S = 3600.0  # an outcome is reported until the engine takes it


class S3Refused(Exception):
    """S3 refused the call (no such bucket or key, access denied, ...), botocore refused to make it (a parameter S3
    does not take), or S3 stayed out of reach: the message is the cause a Map fails with."""


async def until_answered(clients: AwsClients, region: str, what: str, call: Callable[[Any], T]) -> T:
    """``call(client)`` on a pool thread, in an S3 slot, again after a growing pause while S3 is out of reach (for
    UNREACHABLE_S at most). S3Refused for what S3 or botocore refused, or an outage that lasted."""
    pause_s = RETRY_FIRST_S
    give_up_at = asyncio.get_running_loop().time() + UNREACHABLE_S
    while True:
        async with clients.slot("s3"):
            try:
                return await clients.run(call, clients.client("s3", region))
            except ClientError as error:
                raise S3Refused(_refusal(error)) from None
            except (ParamValidationError, ValueError) as error:  # never sent: the parameters are wrong
                raise S3Refused(f"The S3 call's parameters are not valid: {error}") from None
            except (BotoCoreError, OSError) as error:
                if asyncio.get_running_loop().time() + pause_s > give_up_at:
                    raise S3Refused(f"S3 could not be reached for {UNREACHABLE_S:.0f} s: {error}") from None
                log.warning("%s failed (%s); trying again in %.1f s", what, error, pause_s)
        await asyncio.sleep(pause_s)
        pause_s = min(pause_s * 2, RETRY_MAX_S)


def _refusal(error: ClientError) -> str:
    """An S3 refusal as a cause: its message, and what S3 answered with."""
    details = error.response.get("Error", {})
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return f"{details.get('Message') or error} (Service: S3, Status Code: {status}, Error Code: {details.get('Code')})"
