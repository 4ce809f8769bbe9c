"""What a distributed Map's ItemReader and ResultWriter share: one S3 call made until S3 answers, and S3's refusal
in words a cause can carry."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from .clients import AwsClients

log = logging.getLogger("statewright.integrations")
T = TypeVar("T")
RETRY_FIRST_S = 0.5  # the first pause after S3 could not be reached, doubling to RETRY_MAX_S
RETRY_MAX_S = 30.0
REPORT_S = 3600.0  # an outcome is reported until the engine takes it (a map run has no deadline of its own)


async def until_answered(clients: AwsClients, region: str, what: str, call: Callable[[Any], T]) -> T:
    """``call(client)`` on a pool thread, in an S3 slot, again after a growing pause while S3 is out of reach; an
    answer S3 gave (ClientError: no such bucket, access denied, ...) is raised."""
    pause_s = RETRY_FIRST_S
    while True:
        async with clients.slot("s3"):
            try:
                return await clients.run(call, clients.client("s3", region))
            except ClientError:
                raise
            except (BotoCoreError, OSError) as error:
                log.warning("%s failed (%s); trying again in %.1f s", what, error, pause_s)
        await asyncio.sleep(pause_s)
        pause_s = min(pause_s * 2, RETRY_MAX_S)


def s3_cause(error: ClientError) -> str:
    """An S3 refusal as a cause: its message, and what S3 answered with."""
    details = error.response.get("Error", {})
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return f"{details.get('Message') or error} (Service: S3, Status Code: {status}, Error Code: {details.get('Code')})"
