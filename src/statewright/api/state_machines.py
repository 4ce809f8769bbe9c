"""State machine operations: create, describe, update, delete, list, validate; and tags."""

from __future__ import annotations

import re
import uuid

from ..asl.definition import InvalidDefinition, parse_definition
from ..store.base import StateMachineRecord
from . import arns, paging
from .arns import Scope
from .errors import AwsError, invalid_arn, state_machine_does_not_exist
from .service import STATE_MACHINE, Service, handler, seconds
from .tags import tag_map

_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")
_DEFAULT_LOGGING = {"level": "OFF", "includeExecutionData": False}
_DEFAULT_TRACING = {"enabled": False}


def _check_definition(text: str) -> None:
    try:
        parse_definition(text)
    except InvalidDefinition as exc:
        raise AwsError("InvalidDefinition", str(exc)) from None


def _check_role(role_arn: str) -> None:
    """An IAM role ARN: statewright does not assume it, but AWS refuses anything that is not one."""
    if not role_arn.startswith("arn:"):
        raise invalid_arn(f"Invalid ARN prefix: {role_arn}")
    if not _ROLE_ARN.match(role_arn):
        raise invalid_arn(f"Resource type not valid in this context: {role_arn}")


def _check_type(kind: str) -> None:
    if kind != "STANDARD":
        raise AwsError("StateMachineTypeNotSupported",
                       f"statewright runs STANDARD state machines only so far, not {kind}")


async def _load(service: Service, arn: str) -> StateMachineRecord:
    record = await service.store_call(service.store.get_state_machine, arns.state_machine(arn))
    if record is None:
        raise state_machine_does_not_exist(arn)
    return record


@handler("CreateStateMachine")
async def create_state_machine(service: Service, params: dict, scope: Scope) -> dict:
    name = params["name"]
    arns.check_name(name)
    kind = params.get("type", "STANDARD")
    _check_type(kind)
    _check_role(params["roleArn"])
    _check_definition(params["definition"])
    now_ms = service.clock()
    record = StateMachineRecord(
        arn=scope.state_machine_arn(name), name=name, type=kind, definition=params["definition"],
        role_arn=params["roleArn"], revision_id=str(uuid.uuid4()), created_ms=now_ms, updated_ms=now_ms,
        logging_configuration=params.get("loggingConfiguration") or _DEFAULT_LOGGING,
        tracing_configuration=params.get("tracingConfiguration") or _DEFAULT_TRACING,
        description=params.get("versionDescription", ""),
    )
    stored = await service.store_call(service.store.create_state_machine, record, tag_map(params.get("tags", [])))
    await service.changed(STATE_MACHINE, record.arn)  # every node's cache may hold "no such machine"
    if stored is not record and not _same_request(stored, record):
        raise AwsError("StateMachineAlreadyExists", f"State Machine Already Exists: '{record.arn}'")
    return {"stateMachineArn": stored.arn, "creationDate": seconds(stored.created_ms)}


def _same_request(a: StateMachineRecord, b: StateMachineRecord) -> bool:
    """CreateStateMachine is idempotent when these match (role and tags do not count, as on AWS)."""
    return (a.definition, a.type, a.logging_configuration, a.tracing_configuration) == (
        b.definition, b.type, b.logging_configuration, b.tracing_configuration)


@handler("DescribeStateMachine")
async def describe_state_machine(service: Service, params: dict, scope: Scope) -> dict:
    record = await _load(service, params["stateMachineArn"])
    described = {
        "stateMachineArn": record.arn,
        "name": record.name,
        "status": "ACTIVE",
        "definition": record.definition,
        "roleArn": record.role_arn,
        "type": record.type,
        "creationDate": seconds(record.created_ms),
        "loggingConfiguration": record.logging_configuration,
        "tracingConfiguration": record.tracing_configuration,
    }
    if record.updated_ms != record.created_ms:  # AWS shows a revision id only once there was an update
        described["revisionId"] = record.revision_id
    if record.description:
        described["description"] = record.description
    return described


@handler("UpdateStateMachine")
async def update_state_machine(service: Service, params: dict, scope: Scope) -> dict:
    record = await _load(service, params["stateMachineArn"])
    changes = {key: params[key] for key in ("definition", "roleArn", "loggingConfiguration",
                                            "tracingConfiguration") if key in params}
    if not changes:
        raise AwsError("MissingRequiredParameter", "Either the definition, the role ARN, the LoggingConfiguration, "
                       "or the TracingConfiguration must be specified")
    if "definition" in changes:
        _check_definition(changes["definition"])
    if "roleArn" in changes:
        _check_role(changes["roleArn"])
    updated = StateMachineRecord(
        arn=record.arn, name=record.name, type=record.type,
        definition=changes.get("definition", record.definition),
        role_arn=changes.get("roleArn", record.role_arn),
        revision_id=record.revision_id, created_ms=record.created_ms, updated_ms=service.clock(),
        logging_configuration=changes.get("loggingConfiguration", record.logging_configuration),
        tracing_configuration=changes.get("tracingConfiguration", record.tracing_configuration),
        description=record.description,
    )
    if (updated.definition, updated.role_arn) != (record.definition, record.role_arn):
        updated.revision_id = str(uuid.uuid4())
    if updated.updated_ms == record.created_ms:
        updated.updated_ms += 1
    if not await service.store_call(service.store.update_state_machine, updated):
        raise state_machine_does_not_exist(record.arn)
    await service.changed(STATE_MACHINE, record.arn)
    return {"updateDate": seconds(updated.updated_ms), "revisionId": updated.revision_id}


@handler("DeleteStateMachine")
async def delete_state_machine(service: Service, params: dict, scope: Scope) -> dict:
    # Deleting is idempotent on AWS; running executions finish on the revision they started with.
    arn = arns.state_machine(params["stateMachineArn"])
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
        parse_definition(params["definition"])
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


def _tag_resource(service: Service, arn: str, tags: dict[str, str]) -> None:
    service.store.tag_resource(_tagged_resource(service, arn), tags)


def _untag_resource(service: Service, arn: str, keys: list[str]) -> None:
    service.store.untag_resource(_tagged_resource(service, arn), keys)


def _list_tags(service: Service, arn: str) -> dict[str, str]:
    return service.store.list_tags(_tagged_resource(service, arn))


@handler("TagResource")
async def tag_resource(service: Service, params: dict, scope: Scope) -> dict:
    await service.store_call(_tag_resource, service, params["resourceArn"], tag_map(params["tags"]))
    return {}


@handler("UntagResource")
async def untag_resource(service: Service, params: dict, scope: Scope) -> dict:
    await service.store_call(_untag_resource, service, params["resourceArn"], params["tagKeys"])
    return {}


@handler("ListTagsForResource")
async def list_tags_for_resource(service: Service, params: dict, scope: Scope) -> dict:
    tags = await service.store_call(_list_tags, service, params["resourceArn"])
    return {"tags": [{"key": key, "value": value} for key, value in tags.items()]}
