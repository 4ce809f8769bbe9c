"""``statewright import`` and ``statewright export``: state machines (their definition, type, role, logging and
tracing settings, tags, versions and aliases) and activities (with their tags) copied from one Step Functions
endpoint to another through boto3, so a team can run its real workflows locally, or take them back.

What is copied and how:
- activities by name (CreateActivity is idempotent by name), with their tags;
- each state machine that the target does not have yet (one that exists is left as it is, and said so): created
  with its oldest published version's definition, then each later version published in turn (UpdateStateMachine
  with ``publish``), then its current definition; so the target's version numbers count the source's versions in
  order (a source whose numbers have gaps, from deleted versions, is renumbered: said in the report);
- aliases, with their routing weights, pointing at the target's versions of the same definitions;
- in every definition, the ARNs of the source's activities and state machines (its account and region) are made
  the target's, so a Task of an activity or a nested execution finds the copy.

Executions and their histories are not copied: they belong to the endpoint that ran them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError


@dataclass
class Report:
    activities: list[str] = field(default_factory=list)
    machines: list[str] = field(default_factory=list)
    versions: int = 0
    aliases: int = 0
    skipped: list[str] = field(default_factory=list)  # what the target had already, or could not take
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        said = [f"copied {len(self.activities)} activities, {len(self.machines)} state machines with "
                f"{self.versions} versions and {self.aliases} aliases"]
        said += [f"skipped {what}" for what in self.skipped]
        return said + self.notes


def copy(source: Any, target: Any) -> Report:
    """Copy from the boto3 Step Functions client ``source`` to ``target``."""
    report = Report()
    rename = _Renames()
    for activity in _all(source, "list_activities", "activities"):
        created = target.create_activity(name=activity["name"], tags=_tags(source, activity["activityArn"]))
        rename.add(activity["activityArn"], created["activityArn"])
        report.activities.append(activity["name"])
    machines = list(_all(source, "list_state_machines", "stateMachines"))
    existing = {machine["name"]: machine["stateMachineArn"] for machine in _all(target, "list_state_machines",
                                                                                "stateMachines")}
    if machines and not rename.prefixes:  # nothing copied yet: learn the target's account and region
        rename.prefixes[_prefix(machines[0]["stateMachineArn"])] = _target_prefix(target)
    for machine in machines:  # every ARN first: definitions may name each other
        name = machine["name"]
        if name in existing:
            rename.add(machine["stateMachineArn"], existing[name])
    for machine in machines:
        if machine["name"] in existing:
            report.skipped.append(f"state machine {machine['name']}: the target has one of that name")
            continue
        _copy_machine(source, target, machine["stateMachineArn"], rename, report)
    return report


def _copy_machine(source: Any, target: Any, arn: str, rename: _Renames, report: Report) -> None:
    current = source.describe_state_machine(stateMachineArn=arn)
    versions = sorted(_versions(source, arn, report), key=_number)
    described = [source.describe_state_machine(stateMachineArn=version["stateMachineVersionArn"])
                 for version in versions]
    first = described[0] if described else current
    settings = {"roleArn": current["roleArn"], "type": current.get("type", "STANDARD")}
    for key in ("loggingConfiguration", "tracingConfiguration"):
        if current.get(key):
            settings[key] = current[key]
    created = target.create_state_machine(
        name=current["name"], definition=rename.definition(first["definition"]), tags=_tags(source, arn),
        publish=bool(described), **({"versionDescription": first["description"]}
                                    if described and first.get("description") else {}), **settings)
    target_arn = created["stateMachineArn"]
    rename.add(arn, target_arn)
    mapped = {}  # the source's version ARN -> the target's
    if described:
        mapped[versions[0]["stateMachineVersionArn"]] = created["stateMachineVersionArn"]
    for version, details in zip(versions[1:], described[1:], strict=True):
        updated = target.update_state_machine(
            stateMachineArn=target_arn, definition=rename.definition(details["definition"]), publish=True,
            **({"versionDescription": details["description"]} if details.get("description") else {}))
        mapped[version["stateMachineVersionArn"]] = updated["stateMachineVersionArn"]
    if described and (described[-1]["definition"] != current["definition"]):  # edited since its last version
        target.update_state_machine(stateMachineArn=target_arn, definition=rename.definition(current["definition"]))
    numbers = [_number(version) for version in versions]
    if numbers != list(range(1, len(numbers) + 1)):
        report.notes.append(f"{current['name']}: versions {numbers} are numbered 1 to {len(numbers)} on the target")
    report.versions += len(versions)
    report.machines.append(current["name"])
    for alias in _aliases(source, arn):
        details = source.describe_state_machine_alias(stateMachineAliasArn=alias["stateMachineAliasArn"])
        routes = [{"stateMachineVersionArn": mapped[route["stateMachineVersionArn"]], "weight": route["weight"]}
                  for route in details["routingConfiguration"] if route["stateMachineVersionArn"] in mapped]
        if len(routes) != len(details["routingConfiguration"]):
            report.skipped.append(f"alias {details['name']} of {current['name']}: it routes to a version not copied")
            continue
        target.create_state_machine_alias(name=details["name"], routingConfiguration=routes,
                                          **({"description": details["description"]}
                                             if details.get("description") else {}))
        report.aliases += 1


class _Renames:
    """The source's ARNs of what was copied, and the target's for them; and their account and region prefixes."""

    def __init__(self) -> None:
        self.arns: dict[str, str] = {}
        self.prefixes: dict[str, str] = {}

    def add(self, source_arn: str, target_arn: str) -> None:
        self.arns[source_arn] = target_arn
        self.prefixes[_prefix(source_arn)] = _prefix(target_arn)

    def definition(self, text: str) -> str:
        """``text`` with the source's ``arn:<partition>:states:<region>:<account>:`` made the target's."""
        for source_prefix, target_prefix in self.prefixes.items():
            text = text.replace(source_prefix, target_prefix)
        return text


def _target_prefix(target: Any) -> str:
    """The target's ``arn:<partition>:states:<region>:<account>:``, from an activity made and deleted for it."""
    probe = target.create_activity(name=f"statewright-import-{uuid.uuid4().hex[:12]}")["activityArn"]
    target.delete_activity(activityArn=probe)
    return _prefix(probe)


def _prefix(arn: str) -> str:
    return ":".join(arn.split(":")[:5]) + ":"


def _number(version: dict[str, Any]) -> int:
    return int(version["stateMachineVersionArn"].rsplit(":", 1)[1])


def _all(client: Any, operation: str, key: str, **params: Any) -> list[dict[str, Any]]:
    found, token = [], None
    while True:
        page = getattr(client, operation)(**params, **({"nextToken": token} if token else {}))
        found += page[key]
        token = page.get("nextToken")
        if not token:
            return found


def _tags(client: Any, arn: str) -> list[dict[str, str]]:
    try:
        return client.list_tags_for_resource(resourceArn=arn)["tags"]
    except ClientError:  # an endpoint that keeps no tags (or not of this kind)
        return []


def _versions(client: Any, arn: str, report: Report) -> list[dict[str, Any]]:
    try:
        return _all(client, "list_state_machine_versions", "stateMachineVersions", stateMachineArn=arn)
    except ClientError as error:  # an endpoint without versions (an older emulator): the current definition only
        report.notes.append(f"{arn}: its versions could not be listed ({error.response['Error'].get('Code')})")
        return []


def _aliases(client: Any, arn: str) -> list[dict[str, Any]]:
    try:
        return _all(client, "list_state_machine_aliases", "stateMachineAliases", stateMachineArn=arn)
    except ClientError:
        return []
