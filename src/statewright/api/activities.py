"""Activities and the task-token replies: CreateActivity ... GetActivityTask, SendTaskSuccess/Failure/Heartbeat."""

from __future__ import annotations

from collections.abc import Callable

from ..asl.jsonio import dumps
from ..cluster.peers import ACTIVITY
from ..decider.outcomes import AttemptFailed, AttemptSucceeded
from ..engine import commands
from ..engine.tokens import InvalidToken, TokenClaims, UnknownKey
from ..store.base import AWS_OWNED_KEY, ActivityRecord
from . import arns, configuration, paging
from .arns import Scope
from .errors import AwsError, invalid_arn
from .payloads import parse_json
from .quotas import account_full, check_tags
from .service import Service, handler, seconds
from .tags import tag_map

POLL_SECONDS = 60


async def _activity(service: Service, arn: str) -> ActivityRecord:
    rest = arns.parse(arn, "activity")
    if len(rest) != 1:
        raise invalid_arn(f"Invalid ARN: {arn}")
    record = await service.store_call(service.store.get_activity, arn)
    if record is None:
        raise AwsError("ActivityDoesNotExist", f"Activity Does Not Exist: '{arn}'")
    return record


@handler("CreateActivity")
async def create_activity(service: Service, params: dict, scope: Scope) -> dict:
    name = params["name"]
    arns.check_name(name)
    encryption = configuration.encryption_of(params.get("encryptionConfiguration"))
    tags = tag_map(params.get("tags", []))
    quotas = service.quotas.of(scope.account)
    check_tags(quotas, scope.arn(f"activity:{name}"), len(tags))
    record = await service.store_call(_create, service, ActivityRecord(
        scope.arn(f"activity:{name}"), name, service.clock(), None if encryption == AWS_OWNED_KEY else encryption),
        tags, quotas.activities, scope.arn("activity:"))
    await service.changed(ACTIVITY, record.arn)
    return {"activityArn": record.arn, "creationDate": seconds(record.created_ms)}


def _create(service: Service, record: ActivityRecord, tags: dict[str, str], limit: int | None,
            account_prefix: str) -> ActivityRecord:
    """On a store thread: the activity created (or the one of that name), unless the account holds its quota."""
    if limit is not None and service.store.count_activities(account_prefix, limit) >= limit and (
            service.store.get_activity(record.arn) is None):
        raise account_full("ActivityLimitExceeded", limit, "activities (activities)")
    return service.store.create_activity(record, tags)


@handler("DescribeActivity")
async def describe_activity(service: Service, params: dict, scope: Scope) -> dict:
    record = await _activity(service, params["activityArn"])
    return {"activityArn": record.arn, "name": record.name, "creationDate": seconds(record.created_ms),
            "encryptionConfiguration": record.encryption_configuration or AWS_OWNED_KEY}


@handler("DeleteActivity")
async def delete_activity(service: Service, params: dict, scope: Scope) -> dict:
    arn = params["activityArn"]
    arns.parse(arn, "activity")
    await service.store_call(service.store.delete_activity, arn)
    await service.changed(ACTIVITY, arn)
    return {}


@handler("ListActivities")
async def list_activities(service: Service, params: dict, scope: Scope) -> dict:
    page = await service.store_call(service.store.list_activities, scope.arn("activity:"),
                                    paging.page_size(params.get("maxResults")), paging.decode(params.get("nextToken")))
    return paging.listing("activities", [
        {"activityArn": r.arn, "name": r.name, "creationDate": seconds(r.created_ms)} for r in page.items],
        page.next_cursor)


@handler("GetActivityTask")
async def get_activity_task(service: Service, params: dict, scope: Scope) -> dict:
    arn = params["activityArn"]
    if len(arns.parse(arn, "activity")) != 1:
        raise invalid_arn(f"Invalid ARN: {arn}")
    if arn not in service.engine.activities:  # the set Task states see, kept with every Create/DeleteActivity
        await service.refresh(ACTIVITY, arn)  # word of its creation through another node may have been lost
    if arn not in service.engine.activities:
        raise AwsError("ActivityDoesNotExist", f"Activity Does Not Exist: '{arn}'")
    dispatch = await service.matcher.poll(arn, params.get("workerName"), POLL_SECONDS)
    if dispatch is None:
        return {}  # no task within the long poll: boto3 shows no taskToken
    payload = dispatch.payload
    token = service.engine.tokens.mint(dispatch.execution_arn, payload["scheduled_id"], payload["attempt"])
    return {"taskToken": token, "input": dumps(payload["input"])}


async def _reply(service: Service, token: str, scope: Scope, make: Callable[[TokenClaims], commands.Command]
                 ) -> dict:
    try:
        try:
            claims = service.engine.tokens.verify(token)
        except UnknownKey:  # signed with a key another node read before this one did
            claims = await service.store_call(service.engine.tokens.reread_for, token)
        if scope.caller is not None and claims.execution_arn.split(":")[3:5] != [scope.region, scope.account]:
            # bound to its account and region: to others, not a token
            raise InvalidToken("minted for another account or region")
    except InvalidToken:
        raise AwsError("InvalidToken", f"Invalid Token: '{token}'") from None
    try:
        await service.run(make(claims))
    except commands.TaskNotPending:
        raise AwsError("TaskTimedOut", "Task Timed Out: 'Provided task does not exist anymore'") from None
    return {}


@handler("SendTaskSuccess")
async def send_task_success(service: Service, params: dict, scope: Scope) -> dict:
    output = params["output"]
    parse_json(output, "InvalidOutput", "Invalid Output")
    return await _reply(service, params["taskToken"], scope, lambda claims: commands.CompleteAttempt(
        claims.execution_arn, claims.scheduled_id, AttemptSucceeded(output)))


@handler("SendTaskFailure")
async def send_task_failure(service: Service, params: dict, scope: Scope) -> dict:
    return await _reply(service, params["taskToken"], scope, lambda claims: commands.CompleteAttempt(
        claims.execution_arn, claims.scheduled_id, AttemptFailed(params.get("error"), params.get("cause"))))


@handler("SendTaskHeartbeat")
async def send_task_heartbeat(service: Service, params: dict, scope: Scope) -> dict:
    return await _reply(service, params["taskToken"], scope, lambda claims: commands.Heartbeat(
        claims.execution_arn, claims.scheduled_id))
