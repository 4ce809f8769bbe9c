"""How a state machine, one of its versions, and the state machine an execution runs are described: the members
AWS returns for each (DescribeStateMachine, DescribeStateMachineForExecution)."""

from __future__ import annotations

from typing import Any

import orjson

from ..asl.definition import raw_state
from ..asl.references import variable_references
from ..store.base import AWS_OWNED_KEY, StateMachineRecord, VersionRecord
from .configuration import DEFAULT_LOGGING, DEFAULT_TRACING
from .service import seconds


def state_machine(record: StateMachineRecord) -> dict[str, Any]:
    """DescribeStateMachine of an unqualified ARN."""
    described = _common(record, record.definition)
    described.update(stateMachineArn=record.arn, status="ACTIVE", type=record.type,
                     creationDate=seconds(record.created_ms))
    if record.revised:  # AWS shows a revision id only once there was a revision after the first
        described["revisionId"] = record.revision_id
    return described


def version(record: VersionRecord) -> dict[str, Any]:
    """DescribeStateMachine of a version ARN: the state machine as it was published, under the version's ARN,
    creation time and description."""
    described = state_machine(record.machine)
    described.update(stateMachineArn=record.arn, creationDate=seconds(record.created_ms))
    if record.description:
        described["description"] = record.description
    return described


def for_execution(machine_arn: str, definition: str, role_arn: str, revision_id: str,
                  machine: StateMachineRecord | None, update_ms: int) -> dict[str, Any]:
    """DescribeStateMachineForExecution: the definition and role the execution runs (its revision's), with the
    configuration of ``machine`` (the version it started on, else the state machine as it is now; None if it is
    gone)."""
    described = _common(machine, definition)
    described.update(stateMachineArn=machine_arn, name=machine_arn.rsplit(":", 1)[-1], roleArn=role_arn,
                     updateDate=seconds(update_ms))
    if machine is None or revision_id != machine.initial_revision_id:
        described["revisionId"] = revision_id
    return described


def _common(record: StateMachineRecord | None, definition: str) -> dict[str, Any]:
    described: dict[str, Any] = {"definition": definition}
    if record is not None:
        described.update(name=record.name, roleArn=record.role_arn,
                         loggingConfiguration=record.logging_configuration,
                         tracingConfiguration=record.tracing_configuration,
                         encryptionConfiguration=record.encryption_configuration)
    else:
        described.update(loggingConfiguration=DEFAULT_LOGGING, tracingConfiguration=DEFAULT_TRACING,
                         encryptionConfiguration=AWS_OWNED_KEY)
    references = variable_references(definition)
    if references:
        described["variableReferences"] = references
    return described


def processor_text(definition: str, map_state: str) -> str:
    """The ItemProcessor (or Iterator) of the Map state ``map_state`` in ``definition``, as JSON text: what a map
    run's children run."""
    state = raw_state(orjson.loads(definition), map_state) or {}
    processor = state.get("ItemProcessor", state.get("Iterator"))
    return orjson.dumps(processor).decode() if isinstance(processor, dict) else definition
