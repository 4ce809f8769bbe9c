"""State machine versions: PublishStateMachineVersion, ListStateMachineVersions, DeleteStateMachineVersion, and
the publishing that CreateStateMachine and UpdateStateMachine do with ``publish``.

A version is an immutable snapshot the store keeps (store.base.VersionRecord); every node may cache it, and a
publish or a delete is announced (``Service.changed``) like any change to a state machine, so no node keeps
starting executions on a deleted version or keeps "no such version" for one just published.
"""

from __future__ import annotations

from ..cluster.peers import STATE_MACHINE
from ..store.base import NoSuchStateMachine, QuotaExceeded, RevisionChanged, VersionRecord, VersionRouted
from . import arns, paging
from .arns import Scope
from .errors import AwsError, conflict, quota_exceeded, state_machine_does_not_exist
from .quotas import UNBOUNDED
from .service import Service, handler, seconds


def _versions_max(service: Service, arn: str) -> int | None:
    """The versions-per-state-machine quota of the state machine's account."""
    return service.quotas.of(arn.split(":")[4]).versions_per_state_machine


async def publish(service: Service, arn: str, description: str, revision_id: str | None = None) -> VersionRecord:
    """Publish the state machine's current revision (or find the version that holds it)."""
    try:
        version = await service.store_call(service.store.publish_version, arn, description, service.clock(),
                                           revision_id, _versions_max(service, arn) or UNBOUNDED)
    except NoSuchStateMachine:
        raise state_machine_does_not_exist(arn) from None
    except RevisionChanged as exc:
        raise conflict(f"Failed to publish the State Machine version for revision {exc.expected}. "
                       f"The current State Machine revision is {exc.current}.") from None
    except QuotaExceeded as exc:
        raise _too_many(arn, exc.limit) from None
    await service.changed(STATE_MACHINE, version.arn)  # a node may hold "no such version" for its ARN
    return version


async def check_room(service: Service, arn: str) -> None:
    """Before an UpdateStateMachine that publishes: refuse it whole, rather than update and then fail to publish."""
    limit = _versions_max(service, arn)
    if limit is None:
        return
    page = await service.store_call(service.store.list_versions, arn, limit, None)
    if len(page.items) >= limit:
        raise _too_many(arn, limit)


def _too_many(arn: str, limit: int) -> AwsError:
    return quota_exceeded(f"The state machine '{arn}' has {limit} versions, the most it may have: delete one to "
                          f"publish another.")


def check_description(params: dict) -> None:
    """CreateStateMachine and UpdateStateMachine take a versionDescription only with publish."""
    if "versionDescription" in params and not params.get("publish"):
        raise AwsError("ValidationException", "Version description can only be set when publish is true")


@handler("PublishStateMachineVersion")
async def publish_state_machine_version(service: Service, params: dict, scope: Scope) -> dict:
    arn = arns.state_machine(params["stateMachineArn"])
    version = await publish(service, arn, params.get("description", ""), params.get("revisionId"))
    return {"stateMachineVersionArn": version.arn, "creationDate": seconds(version.created_ms)}


@handler("ListStateMachineVersions")
async def list_state_machine_versions(service: Service, params: dict, scope: Scope) -> dict:
    arn = arns.state_machine(params["stateMachineArn"])
    try:
        page = await service.store_call(service.store.list_versions, arn, paging.page_size(params.get("maxResults")),
                                        paging.decode(params.get("nextToken")))
    except ValueError:  # a token that decodes but is no cursor of ours
        raise AwsError("InvalidToken", f"Invalid Token: '{params['nextToken']}'") from None
    return paging.listing("stateMachineVersions", [
        {"stateMachineVersionArn": version.arn, "creationDate": seconds(version.created_ms)}
        for version in page.items], page.next_cursor)


@handler("DeleteStateMachineVersion")
async def delete_state_machine_version(service: Service, params: dict, scope: Scope) -> dict:
    # Idempotent, as on AWS; executions running on the version finish on it (its revision stays).
    arn = params["stateMachineVersionArn"]
    machine, number = arns.version(arn)
    try:
        await service.store_call(service.store.delete_version, machine, number)
    except VersionRouted as exc:
        raise conflict("Version to be deleted must not be referenced by an alias. Current list of aliases "
                       f"referencing this version: [{', '.join(sorted(exc.aliases))}]") from None
    await service.changed(STATE_MACHINE, arn)
    return {}
