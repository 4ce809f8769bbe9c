"""The catalogue: state machines and their revisions, versions, aliases, tags, activities and shared settings (task
token keys). What the API reads and writes about resources, as opposed to executions.

Contract (tests/store_contract_catalogue.py runs it against every implementation, activities in
tests/store_contract_activities.py):
- Creating a state machine or an activity inserts it with its tags in one transaction, or returns the record already
  stored under that ARN unchanged (and untagged by this call). Lists are by ARN within one prefix (one region and
  account), which is name order, paged by the last ARN; ``list_versions`` and ``list_executions`` raise ValueError
  for a cursor this store did not make.
- Revisions are immutable and outlive their state machine: executions started on one run to the end.
- Versions and aliases (``publish_version`` ... ``list_aliases``): a version is an immutable snapshot of its state
  machine, numbered from 1 per state machine and never renumbered, even after a delete (the state machine keeps its
  last number); publishing the revision a version already holds returns that version. At most ``versions_max``
  versions and ``aliases_max`` aliases per state machine (QuotaExceeded). An alias routes only to versions that
  exist, and a version an alias routes to cannot be deleted (VersionRouted): writes of one state machine's
  versions and aliases are serialized against each other. Deleting a state machine deletes its versions, aliases
  and tags; its revisions stay.
- Settings keep the first value written by ``put_setting_if_absent``, so nodes starting at once agree.
- ``get_state_machine`` and ``get_revision`` are reads the engine serves from: StoreUnavailable when the database
  cannot answer.

Must not import statewright.store.base or the backends (base.Store is made of this interface), nor anything above
the store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

VERSIONS_MAX = 1_000  # per state machine, as on AWS
ALIASES_MAX = 100  # per state machine, as on AWS
AWS_OWNED_KEY = {"type": "AWS_OWNED_KEY"}  # the encryption configuration of a resource created without one


@dataclass(frozen=True, slots=True)
class ActivityRecord:
    arn: str
    name: str
    created_ms: int
    encryption_configuration: dict[str, Any] | None = None  # None: AWS_OWNED_KEY


@dataclass(slots=True)
class StateMachineRecord:
    arn: str
    name: str
    type: str
    definition: str
    role_arn: str
    revision_id: str
    created_ms: int
    updated_ms: int
    logging_configuration: dict[str, Any]
    tracing_configuration: dict[str, Any]
    description: str = ""
    encryption_configuration: dict[str, Any] = field(default_factory=lambda: dict(AWS_OWNED_KEY))
    # The revision it was created with: AWS shows a revision id only for the revisions after it.
    initial_revision_id: str = ""

    @property
    def revised(self) -> bool:
        """Whether the current revision is a later one than the first (AWS then shows its id)."""
        return self.revision_id != self.initial_revision_id


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """A published version: its state machine as it was when published (definition, role, configuration and
    revision, in ``machine``), its number and its own description and creation time."""

    machine: StateMachineRecord
    number: int
    description: str
    created_ms: int

    @property
    def arn(self) -> str:
        return f"{self.machine.arn}:{self.number}"


@dataclass(frozen=True, slots=True)
class AliasRecord:
    """An alias: a name for one or two versions of one state machine, each with its share of new starts."""

    state_machine_arn: str
    name: str
    description: str
    routing: tuple[tuple[int, int], ...]  # (version number, weight in percent), weights summing to 100
    created_ms: int
    updated_ms: int

    @property
    def arn(self) -> str:
        return f"{self.state_machine_arn}:{self.name}"


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Any]
    next_cursor: str | None


class Catalogue(ABC):
    """State machines, revisions, versions, aliases, tags, activities and settings."""

    # -- activities
    @abstractmethod
    def create_activity(self, record: ActivityRecord, tags: Mapping[str, str] | None = None) -> ActivityRecord:
        """Insert, with its ``tags`` in the same transaction, or return the existing record of that ARN unchanged
        (and untagged by this call)."""

    @abstractmethod
    def get_activity(self, arn: str) -> ActivityRecord | None: ...

    @abstractmethod
    def delete_activity(self, arn: str) -> None: ...

    @abstractmethod
    def list_activities(self, arn_prefix: str, limit: int, cursor: str | None) -> Page:
        """ActivityRecord items whose ARN starts with ``arn_prefix``, by name."""

    @abstractmethod
    def count_activities(self, arn_prefix: str, at_most: int) -> int:
        """How many activities' ARNs start with ``arn_prefix``, counted up to ``at_most`` (a quota's check)."""

    # -- settings shared by every node (task token keys)
    @abstractmethod
    def get_setting(self, key: str) -> str | None: ...

    @abstractmethod
    def put_setting_if_absent(self, key: str, value: str) -> str:
        """Store ``value`` unless the key exists; return the stored value (so concurrent nodes agree)."""

    @abstractmethod
    def put_setting(self, key: str, value: str) -> None: ...

    # -- state machines
    @abstractmethod
    def create_state_machine(self, record: StateMachineRecord,
                             tags: Mapping[str, str] | None = None) -> StateMachineRecord:
        """Insert, with its ``tags`` in the same transaction, or return the existing record of that ARN unchanged
        (and untagged by this call)."""

    @abstractmethod
    def get_state_machine(self, arn: str) -> StateMachineRecord | None: ...

    @abstractmethod
    def update_state_machine(self, record: StateMachineRecord) -> bool:
        """Replace the record (a new revision when the definition changed); False if it does not exist."""

    @abstractmethod
    def delete_state_machine(self, arn: str) -> None:
        """Delete the state machine with its tags, versions and aliases (its revisions stay)."""

    @abstractmethod
    def list_state_machines(self, arn_prefix: str, limit: int, cursor: str | None) -> Page:
        """StateMachineRecord items whose ARN starts with ``arn_prefix`` (one region and account), by name."""

    @abstractmethod
    def count_state_machines(self, arn_prefix: str, at_most: int) -> int:
        """How many state machines' ARNs start with ``arn_prefix``, counted up to ``at_most`` (a quota's check)."""

    @abstractmethod
    def get_revision(self, state_machine_arn: str, revision_id: str) -> tuple[str, str] | None:
        """(definition, role ARN) of one immutable revision; revisions outlive their state machine."""

    # -- versions and aliases
    @abstractmethod
    def publish_version(self, state_machine_arn: str, description: str, created_ms: int,
                        revision_id: str | None = None, versions_max: int = VERSIONS_MAX) -> VersionRecord:
        """Publish the current revision as the next version, or return the version that holds it already. With
        ``revision_id``, only if that is the current revision (else RevisionChanged). NoSuchStateMachine,
        QuotaExceeded."""

    @abstractmethod
    def get_version(self, state_machine_arn: str, number: int) -> VersionRecord | None: ...

    @abstractmethod
    def list_versions(self, state_machine_arn: str, limit: int, cursor: str | None) -> Page:
        """VersionRecord items, newest (highest number) first; ValueError for a cursor this store did not make."""

    @abstractmethod
    def delete_version(self, state_machine_arn: str, number: int) -> None:
        """Delete it (nothing if there is none); VersionRouted while an alias routes to it."""

    @abstractmethod
    def create_alias(self, record: AliasRecord, aliases_max: int = ALIASES_MAX) -> AliasRecord:
        """Insert, or return the existing alias of that name unchanged. NoSuchStateMachine, NoSuchVersions,
        QuotaExceeded."""

    @abstractmethod
    def get_alias(self, state_machine_arn: str, name: str) -> AliasRecord | None: ...

    @abstractmethod
    def update_alias(self, record: AliasRecord) -> bool:
        """Replace the alias; False if it does not exist. NoSuchVersions."""

    @abstractmethod
    def delete_alias(self, state_machine_arn: str, name: str) -> None: ...

    @abstractmethod
    def list_aliases(self, state_machine_arn: str, limit: int, cursor: str | None) -> Page:
        """AliasRecord items, by name."""

    # -- tags
    @abstractmethod
    def tag_resource(self, arn: str, tags: Mapping[str, str]) -> None: ...

    @abstractmethod
    def untag_resource(self, arn: str, keys: Sequence[str]) -> None: ...

    @abstractmethod
    def list_tags(self, arn: str) -> dict[str, str]: ...
