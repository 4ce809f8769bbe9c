"""State machine operations: create, describe (also of a version), update, delete, list, validate; and tags."""

from __future__ import annotations

import uuid
from dataclasses import replace

from ..asl.definition import InvalidDefinition, parse_definition
from ..cluster.peers import STATE_MACHINE
from ..integrations.execution_logs import check_destination
from ..store.base import StateMachineRecord
from . import arns, configuration, describe, paging
from .arns import Scope
from .errors import AwsError, invalid_arn, state_machine_does_not_exist
from .quotas import QuotaSet, account_full, check_tags
from .service import EXPRESS, STANDARD, Service, handler, seconds
from .tags import tag_map
from .versions import check_description, check_room, publish

# What UpdateStateMachine may change; a change to any of them is a new revision.
_CHANGEABLE = ("definition", "roleArn", "loggingConfiguration", "tracingConfiguration", "encryptionConfiguration")


def _check_definition(service: Service, text: str, kind: str) -> None:
    try:
        parse_definition(text, express=kind == EXPRESS,
                         resource_check=service.engine.services.resource_check)
    except InvalidDefinition as exc:
        raise AwsError("InvalidDefinition", str(exc)) from None


async def _logging_of(service: Service, given: dict | None) -> dict:
    """A loggingConfiguration checked as AWS checks it, its log group included."""
    kept = configuration.logging_of(given)
    problem = await check_destination(service.aws_clients, kept)
    if problem is not None:
        raise configuration.invalid_logging(problem)
    return kept


async def _load(service: Service, arn: str) -> StateMachineRecord:
    record = await service.store_call(service.store.get_state_machine, arns.state_machine(arn))
    if record is None:
        raise state_machine_does_not_exist(arn)
    return record


@handler("CreateStateMachine")
async def create_state_machine(service: Service, params: dict, scope: Scope) -> dict:
    name = params["name"]
    arns.check_name(name)
    kind = params.get("type", STANDARD)  # the service model allows only STANDARD and EXPRESS; fixed for good
    arns.check_role(params["roleArn"])
    _check_definition(service, params["definition"], kind)
    check_description(params)
    logging_configuration = await _logging_of(service, params.get("loggingConfiguration"))
    now_ms = service.clock()
    revision_id = str(uuid.uuid4())
    record = StateMachineRecord(
        arn=scope.state_machine_arn(name), name=name, type=kind, definition=params["definition"],
        role_arn=params["roleArn"], revision_id=revision_id, created_ms=now_ms, updated_ms=now_ms,
        logging_configuration=logging_configuration,
        tracing_configuration=configuration.tracing_of(params.get("tracingConfiguration")),
        encryption_configuration=configuration.encryption_of(params.get("encryptionConfiguration")),
        initial_revision_id=revision_id,
    )
    tags = tag_map(params.get("tags", []))
    quotas = service.quotas.of(scope.account)
    check_tags(quotas, record.arn, len(tags))
    stored = await service.store_call(_create, service, record, tags, quotas, scope.state_machine_arn(""))
    await service.changed(STATE_MACHINE, record.arn)  # every node's cache may hold "no such machine"
    if stored is not record and not _same_request(stored, record):
        raise AwsError("StateMachineAlreadyExists", f"State Machine Already Exists: '{record.arn}'")
    created = {"stateMachineArn": stored.arn, "creationDate": seconds(stored.created_ms)}
    if params.get("publish"):
        created["stateMachineVersionArn"] = (await publish(service, stored.arn,
                                                           params.get("versionDescription", ""))).arn
    return created


def _create(service: Service, record: StateMachineRecord, tags: dict[str, str], quotas: QuotaSet,
            account_prefix: str) -> StateMachineRecord:
    """On a store thread: the record created, unless the account holds its quota of state machines (creating one
    that exists answers as before: idempotently, or StateMachineAlreadyExists)."""
    limit = quotas.state_machines
    if limit is not None and service.store.count_state_machines(account_prefix, limit) >= limit and (
            service.store.get_state_machine(record.arn) is None):
        raise account_full("StateMachineLimitExceeded", limit, "state machines (state-machines)")
    return service.store.create_state_machine(record, tags)


def _same_request(a: StateMachineRecord, b: StateMachineRecord) -> bool:
    """CreateStateMachine is idempotent when these match (role and tags do not count, as on AWS)."""
    return (a.definition, a.type, a.logging_configuration, a.tracing_configuration, a.encryption_configuration) == (
        b.definition, b.type, b.logging_configuration, b.tracing_configuration, b.encryption_configuration)


@handler("DescribeStateMachine")
async def describe_state_machine(service: Service, params: dict, scope: Scope) -> dict:
    arn = params["stateMachineArn"]
    target = arns.qualified(arn)
    if target.version is not None:  # a version describes itself; an alias is no state machine to describe
        version = await service.store_call(service.store.get_version, target.machine, target.version)
        if version is None:
            raise state_machine_does_not_exist(arn)
        return describe.version(version)
    return describe.state_machine(await _load(service, arn))


@handler("UpdateStateMachine")
async def update_state_machine(service: Service, params: dict, scope: Scope) -> dict:
    changes = {key: params[key] for key in _CHANGEABLE if key in params}
    if not changes:
        raise AwsError("MissingRequiredParameter", "Either the definition, the role ARN, the LoggingConfiguration, "
                       "the EncryptionConfiguration or the TracingConfiguration must be specified")
    check_description(params)
    record = await _load(service, params["stateMachineArn"])
    if "definition" in changes:
        _check_definition(service, changes["definition"], record.type)
    if "roleArn" in changes:
        arns.check_role(changes["roleArn"])
    updated = replace(
        record, definition=changes.get("definition", record.definition),
        role_arn=changes.get("roleArn", record.role_arn), updated_ms=max(service.clock(), record.created_ms + 1),
        logging_configuration=await _logging_of(service, changes["loggingConfiguration"])
        if "loggingConfiguration" in changes else record.logging_configuration,
        tracing_configuration=configuration.tracing_of(changes.get("tracingConfiguration",
                                                                   record.tracing_configuration)),
        encryption_configuration=configuration.encryption_of(changes.get("encryptionConfiguration",
                                                                         record.encryption_configuration)))
    if _revision(updated) != _revision(record):  # an update that changes nothing leaves the revision as it was
        if params.get("publish"):  # its new version must fit: refused whole, not updated and then refused
            await check_room(service, record.arn)
        updated.revision_id = str(uuid.uuid4())
        if not await service.store_call(service.store.update_state_machine, updated):
            raise state_machine_does_not_exist(record.arn)
        await service.changed(STATE_MACHINE, record.arn)
    else:
        updated = record
    answer = {"updateDate": seconds(updated.updated_ms if updated is not record else service.clock())}
    if updated.revised:
        answer["revisionId"] = updated.revision_id
    if params.get("publish"):
        answer["stateMachineVersionArn"] = (await publish(service, record.arn, params.get("versionDescription", ""),
                                                          updated.revision_id)).arn
    return answer


def _revision(record: StateMachineRecord) -> tuple:
    return (record.definition, record.role_arn, record.logging_configuration, record.tracing_configuration,
            record.encryption_configuration)


@handler("DeleteStateMachine")
async def delete_state_machine(service: Service, params: dict, scope: Scope) -> dict:
    # Deleting is idempotent on AWS and takes the versions and aliases with it; running executions finish on the
    # revision they started with.
    arn = params["stateMachineArn"]
    if arns.qualified(arn).machine != arn:
        raise AwsError("ValidationException", f"Invalid ARN: '{arn}': DeleteStateMachine takes an unqualified "
                       f"state machine ARN; delete versions and aliases with DeleteStateMachineVersion and "
                       f"DeleteStateMachineAlias")
    await service.store_call(service.store.delete_state_machine, arn)
    await service.changed(STATE_MACHINE, arn)
    return {}


@handler("ListStateMachines")
async def list_state_machines(service: Service, params: dict, scope: Scope) -> dict:
    page = await service.store_call(service.store.list_state_machines, scope.state_machine_arn(""),
                                    paging.page_size(params.get("maxResults")), paging.decode(params.get("nextToken")))
    return paging.listing("stateMachines", [
        {"stateMachineArn": r.arn, "name": r.name, "type": r.type, "creationDate": seconds(r.created_ms)}
        for r in page.items], page.next_cursor)


@handler("ValidateStateMachineDefinition")
def validate_state_machine_definition(service: Service, params: dict, scope: Scope) -> dict:
    try:
        parse_definition(params["definition"], express=params.get("type") == EXPRESS,
                         resource_check=service.engine.services.resource_check)
        diagnostics = []
    except InvalidDefinition as exc:
        diagnostics = exc.diagnostics
    limit = paging.page_size(params.get("maxResults"), 100)
    shown = [{key: value for key, value in (("severity", d.severity), ("code", d.code), ("message", d.message),
                                            ("location", d.location)) if value}
             for d in diagnostics[:limit]]
    return {"result": "FAIL" if diagnostics else "OK", "diagnostics": shown, "truncated": len(diagnostics) > limit}


# -- tags (the store calls run on a store thread, each operation in one hop)


def _tagged_resource(service: Service, arn: str) -> str:
    """A state machine or an activity: the resources AWS lets you tag."""
    if service.store.get_state_machine(arn) is None and service.store.get_activity(arn) is None:
        if not arn.startswith("arn:"):
            raise invalid_arn(f"Invalid ARN prefix: {arn}")
        raise AwsError("ResourceNotFound", f"Resource not found: '{arn}'")
    return arn


def _tag_resource(service: Service, arn: str, tags: dict[str, str], quotas: QuotaSet) -> None:
    _tagged_resource(service, arn)
    if quotas.tags_per_resource is not None:
        check_tags(quotas, arn, len(service.store.list_tags(arn).keys() | tags.keys()))
    service.store.tag_resource(arn, tags)


def _untag_resource(service: Service, arn: str, keys: list[str]) -> None:
    service.store.untag_resource(_tagged_resource(service, arn), keys)


def _list_tags(service: Service, arn: str) -> dict[str, str]:
    return service.store.list_tags(_tagged_resource(service, arn))


@handler("TagResource")
async def tag_resource(service: Service, params: dict, scope: Scope) -> dict:
    await service.store_call(_tag_resource, service, params["resourceArn"], tag_map(params["tags"]),
                             service.quotas.of(scope.account))
    return {}


@handler("UntagResource")
async def untag_resource(service: Service, params: dict, scope: Scope) -> dict:
    await service.store_call(_untag_resource, service, params["resourceArn"], params["tagKeys"])
    return {}


@handler("ListTagsForResource")
async def list_tags_for_resource(service: Service, params: dict, scope: Scope) -> dict:
    tags = await service.store_call(_list_tags, service, params["resourceArn"])
    return {"tags": [{"key": key, "value": value} for key, value in tags.items()]}
