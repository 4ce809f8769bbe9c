"""A distributed Map's ItemReader: the S3 object (``s3:getObject``) or listing (``s3:listObjectsV2``) its items
come from, read through botocore and handed to the parent's Map as its read (``decider/map_runs.py`` parses it
with ``distributed_map``, as TestState parses mapItemReaderData).

A read may repeat (the dispatch stays in the outbox until the parent records the read): it changes nothing. A
bucket or key that does not exist, or a refusal, fails the Map with States.ItemReaderFailed and S3's message; S3
out of reach is tried again with a growing pause until it answers, so the run goes on when S3 is back.

Inferred: the listing's items as AWS shapes them, ``{"Etag", "Key", "LastModified", "Size", "StorageClass"}``
(LocalStack's AWS-validated snapshots show these keys but rewrote Etag and LastModified; LastModified is written
here as the ISO 8601 text AWS uses for dates elsewhere in Step Functions' payloads), and the cause's wording.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ...asl.jsonio import dumps
from ...decider.distributed_map import READER_FAILED
from ...decider.outcomes import AttemptFailed, AttemptSubmitted
from ...engine.commands import CompleteAttempt
from ...store.base import Dispatch
from ..dispatcher import Dispatcher
from .clients import AwsClients

log = logging.getLogger("statewright.integrations")
RETRY_FIRST_S = 0.5  # the first pause after S3 could not be reached, doubling to RETRY_MAX_S
RETRY_MAX_S = 30.0
REPORT_S = 3600.0  # the read is reported until the engine takes it (a Map has no deadline of its own)


class ItemReader:
    def __init__(self, dispatcher: Dispatcher, clients: AwsClients) -> None:
        self.dispatcher = dispatcher
        self.clients = clients
        dispatcher.register("mapread", self.run)

    async def run(self, dispatch: Dispatch) -> None:
        payload = dispatch.payload
        region = dispatch.execution_arn.split(":")[3]
        pause_s = RETRY_FIRST_S
        while True:
            async with self.clients.slot("s3"):
                try:
                    text = await self.clients.run(read, self.clients.client("s3", region), payload["action"],
                                                  payload["parameters"])
                    outcome: AttemptSubmitted | AttemptFailed = AttemptSubmitted({"read": text})
                except ClientError as error:  # S3 answered: no such bucket or key, access denied, ...
                    outcome = AttemptFailed(READER_FAILED, _cause(error))
                except (BotoCoreError, OSError) as error:  # out of reach: try again
                    log.warning("reading the items of %s from S3 failed (%s); trying again in %.1f s",
                                dispatch.execution_arn, error, pause_s)
                    await asyncio.sleep(pause_s)
                    pause_s = min(pause_s * 2, RETRY_MAX_S)
                    continue
                except UnicodeDecodeError as error:
                    outcome = AttemptFailed(READER_FAILED, f"The object is not UTF-8 text: {error}")
            break
        await self.dispatcher.report(CompleteAttempt(dispatch.execution_arn, payload["scheduled_id"], outcome),
                                     REPORT_S)


def read(client: Any, action: str, parameters: Any) -> str:
    """The object's text, or the listing's objects as a JSON array (every page). Blocks: on a pool thread."""
    where = parameters if isinstance(parameters, dict) else {}
    if action == "getObject":
        arguments = {key: where[name] for name, key in (("Bucket", "Bucket"), ("Key", "Key"),
                                                         ("VersionId", "VersionId")) if name in where}
        return client.get_object(**arguments)["Body"].read().decode("utf-8")
    arguments = {key: value for key, value in where.items() if key in _LIST_PARAMETERS}
    items = []
    for page in client.get_paginator("list_objects_v2").paginate(**arguments):
        for found in page.get("Contents", []):
            items.append({"Etag": found.get("ETag"), "Key": found["Key"],
                          "LastModified": found["LastModified"].strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                          "Size": found.get("Size"), "StorageClass": found.get("StorageClass")})
    return dumps(items)


_LIST_PARAMETERS = {"Bucket", "Prefix", "Delimiter", "EncodingType", "FetchOwner", "StartAfter", "RequestPayer",
                    "ExpectedBucketOwner"}


def _cause(error: ClientError) -> str:
    details = error.response.get("Error", {})
    return f"{details.get('Message') or error} (Service: S3, Status Code: " \
           f"{error.response.get('ResponseMetadata', {}).get('HTTPStatusCode')}, Error Code: {details.get('Code')})"
