"""State machine aliases: Create/Describe/Update/Delete/ListStateMachineAliases. Which version an alias starts an
execution on is ``engine.routing.route``'s. Alias changes are announced like state machine changes, so every node
routes new starts by the alias as it is now.
"""

from __future__ import annotations

from typing import Any

from ..cluster.peers import STATE_MACHINE
from ..engine.routing import Routing
from ..store.base import AliasRecord, NoSuchStateMachine, NoSuchVersions, Page, QuotaExceeded
from . import arns, paging
from .arns import Scope
from .errors import (
    AwsError,
    conflict,
    invalid_routing,
    quota_exceeded,
    resource_not_found,
    state_machine_does_not_exist,
)
from .quotas import UNBOUNDED
from .service import Service, handler, seconds


def _routing(items: list[dict[str, Any]], machine: str | None = None) -> tuple[str, Routing]:
    """Check a routingConfiguration as AWS does (version ARNs, distinct, of one state machine, weights summing to
    100); the state machine and the routes. ``machine``: the one an existing alias belongs to."""
    versions = [item["stateMachineVersionArn"] for item in items]
    received = f"Received: [{', '.join(versions)}]"
    not_versions = f"Routing configuration must contain state machine version ARNs. {received}"
    try:
        targets = [arns.qualified(arn) for arn in versions]
    except AwsError:
        raise invalid_routing(not_versions) from None
    if any(target.version is None for target in targets):
        raise invalid_routing(not_versions)
    if len(set(versions)) != len(versions):
        raise invalid_routing(f"Routing configuration must contain distinct state machine version ARNs. {received}")
    machines = {target.machine for target in targets}
    if len(machines) != 1 or (machine is not None and machines != {machine}):
        raise invalid_routing("Routing configuration must contain versions of the same state machine"
                              f"{'' if machine is None else ' as the alias'}. {received}")
    weights = [item["weight"] for item in items]
    if sum(weights) != 100:
        raise invalid_routing(f"Sum of routing configuration weights must equal 100. "
                              f"Received: [{', '.join(map(str, weights))}]")
    return machines.pop(), tuple((target.version, weight) for target, weight in zip(targets, weights, strict=True))


def _routing_items(alias: AliasRecord) -> list[dict[str, Any]]:
    return [{"stateMachineVersionArn": f"{alias.state_machine_arn}:{number}", "weight": weight}
            for number, weight in alias.routing]


async def _write(service: Service, function: Any, record: AliasRecord) -> Any:
    """A store write of an alias, its refusals as AWS answers them."""
    try:
        return await service.store_call(function, record)
    except NoSuchStateMachine:
        raise resource_not_found(record.state_machine_arn) from None
    except NoSuchVersions as exc:
        raise resource_not_found(f"{record.state_machine_arn}:{exc.numbers[0]}") from None
    except QuotaExceeded as exc:
        raise quota_exceeded(f"The state machine '{record.state_machine_arn}' has {exc.limit} aliases, the most "
                             f"it may have: delete one to create another.") from None


@handler("CreateStateMachineAlias")
async def create_state_machine_alias(service: Service, params: dict, scope: Scope) -> dict:
    name = params["name"]  # its pattern is the model's (api/model.py)
    machine, routing = _routing(params["routingConfiguration"])
    now_ms = service.clock()
    record = AliasRecord(machine, name, params.get("description", ""), routing, now_ms, now_ms)
    limit = service.quotas.of(scope.account).aliases_per_state_machine
    stored = await _write(service, lambda alias: service.store.create_alias(alias, limit or UNBOUNDED), record)
    if (stored.description, stored.routing) != (record.description, record.routing):
        raise conflict("Failed to create alias because an alias with the same name and a different routing "
                       "configuration already exists.")
    await service.changed(STATE_MACHINE, stored.arn)  # a node may hold "no such alias" for its ARN
    return {"stateMachineAliasArn": stored.arn, "creationDate": seconds(stored.created_ms)}


async def _load(service: Service, arn: str) -> AliasRecord:
    machine, name = arns.alias(arn)
    alias = await service.store_call(service.store.get_alias, machine, name)
    if alias is None:
        raise resource_not_found(arn)
    return alias


@handler("DescribeStateMachineAlias")
async def describe_state_machine_alias(service: Service, params: dict, scope: Scope) -> dict:
    alias = await _load(service, params["stateMachineAliasArn"])
    described = {"stateMachineAliasArn": alias.arn, "name": alias.name, "routingConfiguration": _routing_items(alias),
                 "creationDate": seconds(alias.created_ms), "updateDate": seconds(alias.updated_ms)}
    if alias.description:
        described["description"] = alias.description
    return described


@handler("UpdateStateMachineAlias")
async def update_state_machine_alias(service: Service, params: dict, scope: Scope) -> dict:
    if "description" not in params and "routingConfiguration" not in params:
        raise AwsError("ValidationException", "Either the description or the routingConfiguration must be "
                       "specified", reason="MISSING_REQUIRED_PARAMETER")
    alias = await _load(service, params["stateMachineAliasArn"])
    routing = alias.routing
    if "routingConfiguration" in params:
        routing = _routing(params["routingConfiguration"], alias.state_machine_arn)[1]
    updated = AliasRecord(alias.state_machine_arn, alias.name, params.get("description", alias.description), routing,
                          alias.created_ms, service.clock())
    if not await _write(service, service.store.update_alias, updated):
        raise resource_not_found(alias.arn)  # deleted since it was read
    await service.changed(STATE_MACHINE, alias.arn)
    return {"updateDate": seconds(updated.updated_ms)}


@handler("DeleteStateMachineAlias")
async def delete_state_machine_alias(service: Service, params: dict, scope: Scope) -> dict:
    # Idempotent, as on AWS; executions started through the alias run on to the end on their version.
    arn = params["stateMachineAliasArn"]
    machine, name = arns.alias(arn)
    await service.store_call(service.store.delete_alias, machine, name)
    await service.changed(STATE_MACHINE, arn)
    return {}


@handler("ListStateMachineAliases")
async def list_state_machine_aliases(service: Service, params: dict, scope: Scope) -> dict:
    arn = arns.state_machine(params["stateMachineArn"])
    page = await service.store_call(_list_aliases, service, arn, paging.page_size(params.get("maxResults")),
                                    paging.decode(params.get("nextToken")))
    return paging.listing("stateMachineAliases", [
        {"stateMachineAliasArn": alias.arn, "creationDate": seconds(alias.created_ms)} for alias in page.items],
        page.next_cursor)


def _list_aliases(service: Service, arn: str, limit: int, cursor: str | None) -> Page:
    """On a store thread: the page, once the state machine is known to exist."""
    if service.store.get_state_machine(arn) is None:
        raise state_machine_does_not_exist(arn)
    return service.store.list_aliases(arn, limit, cursor)
