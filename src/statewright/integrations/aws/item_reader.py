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

from typing import Any

from botocore.exceptions import ClientError

from ...asl.jsonio import dumps
from ...decider.distributed_map import READER_FAILED
from ...decider.outcomes import AttemptFailed, AttemptSubmitted
from ...engine.commands import CompleteAttempt
from ...store.base import Dispatch
from ..dispatcher import Dispatcher
from .clients import AwsClients
from .s3 import REPORT_S, s3_cause, until_answered


class ItemReader:
    def __init__(self, dispatcher: Dispatcher, clients: AwsClients) -> None:
        self.dispatcher = dispatcher
        self.clients = clients
        dispatcher.register("mapread", self.run)

    async def run(self, dispatch: Dispatch) -> None:
        payload = dispatch.payload
        region = dispatch.execution_arn.split(":")[3]
        try:
            text = await until_answered(self.clients, region, f"reading the items of {dispatch.execution_arn}",
                                        lambda client: read(client, payload["action"], payload["parameters"]))
            outcome: AttemptSubmitted | AttemptFailed = AttemptSubmitted({"read": text})
        except ClientError as error:  # S3 answered: no such bucket or key, access denied, ...
            outcome = AttemptFailed(READER_FAILED, s3_cause(error))
        except UnicodeDecodeError as error:
            outcome = AttemptFailed(READER_FAILED, f"The object is not UTF-8 text: {error}")
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
