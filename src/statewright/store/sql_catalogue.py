"""The catalogue (``catalogue.Catalogue``) written once in SQL for both stores, over a ``dialect.Dialect``: state
machines and their revisions, versions, aliases, tags, activities and settings. A store mixes in ``SqlCatalogue``
and implements ``dialect.SqlBackend``'s hooks; the catalogue writes in ``_metadata_write`` transactions.

Invariants: every write is one transaction of ``_metadata_write``; the writes of one state machine's versions and
aliases first read its row with ``Dialect.lock_row``, so they take turns (SQLite's write transactions take turns
anyway). Records are stored as JSON blobs of their dataclasses; the schema that holds them is each store's
migrations'. Must not import a backend, statewright.store.base, or anything above the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .catalogue import (
    ALIASES_MAX,
    VERSIONS_MAX,
    ActivityRecord,
    AliasRecord,
    Catalogue,
    Page,
    StateMachineRecord,
    VersionRecord,
)
from .dialect import Connection, SqlBackend
from .errors import NoSuchStateMachine, NoSuchVersions, QuotaExceeded, RevisionChanged, VersionRouted

_ACTIVITY_COLUMNS = "arn, name, created_ms, encryption"
_INSERT_REVISION = "INSERT INTO revisions VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
_UPSERT_TAG = "INSERT INTO tags VALUES (?, ?, ?) ON CONFLICT (resource_arn, key) DO UPDATE SET value = excluded.value"
_SETTING = "setting:{}"  # a setting's key in the meta table


class SqlCatalogue(SqlBackend, Catalogue):
    # -- activities

    def create_activity(self, record: ActivityRecord, tags: Mapping[str, str] | None = None) -> ActivityRecord:
        encryption = record.encryption_configuration
        with self._metadata_write() as db:
            if self._run(db, "INSERT INTO activities VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                         (record.arn, record.name, record.created_ms,
                          None if encryption is None else orjson.dumps(encryption))).rowcount:
                self._insert_tags(db, record.arn, tags)
                return record
        return self.get_activity(record.arn)

    def get_activity(self, arn: str) -> ActivityRecord | None:
        rows = self._read(f"SELECT {_ACTIVITY_COLUMNS} FROM activities WHERE arn = ?", (arn,))
        return _activity(rows[0]) if rows else None

    def delete_activity(self, arn: str) -> None:
        with self._metadata_write() as db:
            self._run(db, "DELETE FROM activities WHERE arn = ?", (arn,))
            self._run(db, "DELETE FROM tags WHERE resource_arn = ?", (arn,))

    def list_activities(self, arn_prefix: str, limit: int, cursor: str | None) -> Page:
        rows = self._read(f"SELECT {_ACTIVITY_COLUMNS} FROM activities WHERE arn > ? AND arn < ? ORDER BY arn "
                          f"LIMIT ?", (*_prefix_range(arn_prefix, cursor), limit + 1))
        items = [_activity(row) for row in rows[:limit]]
        return Page(items, items[-1].arn if len(rows) > limit else None)

    def count_activities(self, arn_prefix: str, at_most: int) -> int:
        return self._count("activities", arn_prefix, at_most)

    def _count(self, table: str, arn_prefix: str, at_most: int) -> int:
        return self._read(f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE arn > ? AND arn < ? LIMIT ?) AS listed",
                          (*_prefix_range(arn_prefix, None), at_most))[0][0]

    # -- settings

    def get_setting(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (_SETTING.format(key),))
        return rows[0][0] if rows else None

    def put_setting_if_absent(self, key: str, value: str) -> str:
        with self._metadata_write() as db:
            self._run(db, "INSERT INTO meta VALUES (?, ?) ON CONFLICT DO NOTHING", (_SETTING.format(key), value))
        return self.get_setting(key)

    def put_setting(self, key: str, value: str) -> None:
        with self._metadata_write() as db:
            self._run(db, "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                      (_SETTING.format(key), value))

    # -- state machines

    def create_state_machine(self, record: StateMachineRecord,
                             tags: Mapping[str, str] | None = None) -> StateMachineRecord:
        with self._metadata_write() as db:
            if self._run(db, "INSERT INTO state_machines (arn, name, record) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                         (record.arn, record.name, record_blob(record))).rowcount:
                self._run(db, _INSERT_REVISION, (record.arn, record.revision_id, record.definition, record.role_arn))
                self._insert_tags(db, record.arn, tags)
                return record
        return self.get_state_machine(record.arn)

    def get_state_machine(self, arn: str) -> StateMachineRecord | None:
        rows = self._read("SELECT record FROM state_machines WHERE arn = ?", (arn,))
        return record_of(rows[0][0]) if rows else None

    def update_state_machine(self, record: StateMachineRecord) -> bool:
        with self._metadata_write() as db:
            updated = self._run(db, "UPDATE state_machines SET record = ? WHERE arn = ?",
                                (record_blob(record), record.arn)).rowcount
            if updated:
                self._run(db, _INSERT_REVISION, (record.arn, record.revision_id, record.definition, record.role_arn))
        return bool(updated)

    def delete_state_machine(self, arn: str) -> None:
        with self._metadata_write() as db:
            self._run(db, "DELETE FROM state_machines WHERE arn = ?", (arn,))  # locks the row: see _lock_machine
            self._run(db, "DELETE FROM tags WHERE resource_arn = ?", (arn,))
            self._run(db, "DELETE FROM versions WHERE state_machine_arn = ?", (arn,))
            self._run(db, "DELETE FROM aliases WHERE state_machine_arn = ?", (arn,))

    def list_state_machines(self, arn_prefix: str, limit: int, cursor: str | None) -> Page:
        rows = self._read("SELECT record FROM state_machines WHERE arn > ? AND arn < ? ORDER BY arn LIMIT ?",
                          (*_prefix_range(arn_prefix, cursor), limit + 1))
        items = [record_of(row[0]) for row in rows[:limit]]
        return Page(items, items[-1].arn if len(rows) > limit else None)

    def count_state_machines(self, arn_prefix: str, at_most: int) -> int:
        return self._count("state_machines", arn_prefix, at_most)

    def get_revision(self, state_machine_arn: str, revision_id: str) -> tuple[str, str] | None:
        rows = self._read("SELECT definition, role_arn FROM revisions WHERE state_machine_arn = ? AND revision_id = ?",
                          (state_machine_arn, revision_id))
        return (rows[0][0], rows[0][1]) if rows else None

    # -- versions and aliases: each write locks its state machine's row first, so they take turns

    def publish_version(self, state_machine_arn: str, description: str, created_ms: int,
                        revision_id: str | None = None, versions_max: int = VERSIONS_MAX) -> VersionRecord:
        with self._metadata_write() as db:
            row = self._run(db, f"SELECT record, last_version FROM state_machines WHERE arn = ?"
                                f"{self._dialect.lock_row}", (state_machine_arn,)).fetchone()
            if row is None:
                raise NoSuchStateMachine(state_machine_arn)
            machine = record_of(row[0])
            _check_revision(machine, revision_id)
            published = self._run(db, "SELECT record FROM versions WHERE state_machine_arn = ? AND revision_id = ?",
                                  (state_machine_arn, machine.revision_id)).fetchone()
            if published is not None:
                return version_of(published[0])
            count = self._run(db, "SELECT COUNT(*) FROM versions WHERE state_machine_arn = ?",
                              (state_machine_arn,)).fetchone()[0]
            if count >= versions_max:
                raise QuotaExceeded(versions_max)
            version = VersionRecord(machine, row[1] + 1, description, created_ms)
            self._run(db, "INSERT INTO versions VALUES (?, ?, ?, ?)",
                      (state_machine_arn, version.number, machine.revision_id, version_blob(version)))
            self._run(db, "UPDATE state_machines SET last_version = ? WHERE arn = ?",
                      (version.number, state_machine_arn))
        return version

    def get_version(self, state_machine_arn: str, number: int) -> VersionRecord | None:
        rows = self._read("SELECT record FROM versions WHERE state_machine_arn = ? AND number = ?",
                          (state_machine_arn, number))
        return version_of(rows[0][0]) if rows else None

    def list_versions(self, state_machine_arn: str, limit: int, cursor: str | None) -> Page:
        try:
            below = int(cursor) if cursor else 1 << 62
        except ValueError:
            raise ValueError(f"not a cursor of list_versions: {cursor!r}") from None
        rows = self._read("SELECT record FROM versions WHERE state_machine_arn = ? AND number < ? "
                          "ORDER BY number DESC LIMIT ?", (state_machine_arn, below, limit + 1))
        items = [version_of(row[0]) for row in rows[:limit]]
        return Page(items, str(items[-1].number) if len(rows) > limit else None)

    def delete_version(self, state_machine_arn: str, number: int) -> None:
        with self._metadata_write() as db:
            self._lock_machine(db, state_machine_arn)
            routing = [alias.name for alias in self._aliases(db, state_machine_arn)
                       if any(routed == number for routed, _ in alias.routing)]
            if routing:
                raise VersionRouted(routing)
            self._run(db, "DELETE FROM versions WHERE state_machine_arn = ? AND number = ?",
                      (state_machine_arn, number))

    def create_alias(self, record: AliasRecord, aliases_max: int = ALIASES_MAX) -> AliasRecord:
        with self._metadata_write() as db:
            if not self._lock_machine(db, record.state_machine_arn):
                raise NoSuchStateMachine(record.state_machine_arn)
            existing = self._run(db, "SELECT record FROM aliases WHERE state_machine_arn = ? AND name = ?",
                                 (record.state_machine_arn, record.name)).fetchone()
            if existing is not None:
                return alias_of(existing[0])
            self._check_routes(db, record)
            if len(self._aliases(db, record.state_machine_arn)) >= aliases_max:
                raise QuotaExceeded(aliases_max)
            self._run(db, "INSERT INTO aliases VALUES (?, ?, ?)",
                      (record.state_machine_arn, record.name, alias_blob(record)))
        return record

    def get_alias(self, state_machine_arn: str, name: str) -> AliasRecord | None:
        rows = self._read("SELECT record FROM aliases WHERE state_machine_arn = ? AND name = ?",
                          (state_machine_arn, name))
        return alias_of(rows[0][0]) if rows else None

    def update_alias(self, record: AliasRecord) -> bool:
        with self._metadata_write() as db:
            self._lock_machine(db, record.state_machine_arn)
            if self._run(db, "SELECT 1 FROM aliases WHERE state_machine_arn = ? AND name = ?",
                         (record.state_machine_arn, record.name)).fetchone() is None:
                return False
            self._check_routes(db, record)
            self._run(db, "UPDATE aliases SET record = ? WHERE state_machine_arn = ? AND name = ?",
                      (alias_blob(record), record.state_machine_arn, record.name))
        return True

    def delete_alias(self, state_machine_arn: str, name: str) -> None:
        with self._metadata_write() as db:
            self._run(db, "DELETE FROM aliases WHERE state_machine_arn = ? AND name = ?", (state_machine_arn, name))

    def list_aliases(self, state_machine_arn: str, limit: int, cursor: str | None) -> Page:
        rows = self._read("SELECT record FROM aliases WHERE state_machine_arn = ? AND name > ? ORDER BY name LIMIT ?",
                          (state_machine_arn, cursor or "", limit + 1))
        items = [alias_of(row[0]) for row in rows[:limit]]
        return Page(items, items[-1].name if len(rows) > limit else None)

    def _lock_machine(self, db: Connection, arn: str) -> bool:
        """Lock a state machine's row for a version or alias write; whether it exists."""
        return self._run(db, f"SELECT 1 FROM state_machines WHERE arn = ?{self._dialect.lock_row}",
                         (arn,)).fetchone() is not None

    def _aliases(self, db: Connection, state_machine_arn: str) -> list[AliasRecord]:
        rows = self._run(db, "SELECT record FROM aliases WHERE state_machine_arn = ?", (state_machine_arn,))
        return [alias_of(row[0]) for row in rows.fetchall()]

    def _check_routes(self, db: Connection, alias: AliasRecord) -> None:
        """NoSuchVersions unless every version the alias routes to exists."""
        rows = self._run(db, "SELECT number FROM versions WHERE state_machine_arn = ?", (alias.state_machine_arn,))
        existing = {row[0] for row in rows.fetchall()}
        missing = [number for number, _ in alias.routing if number not in existing]
        if missing:
            raise NoSuchVersions(missing)

    # -- tags

    def tag_resource(self, arn: str, tags: Mapping[str, str]) -> None:
        with self._metadata_write() as db:
            self._insert_tags(db, arn, tags)

    def untag_resource(self, arn: str, keys: Sequence[str]) -> None:
        with self._metadata_write() as db:
            if keys:
                db.cursor().executemany(self._dialect.sql("DELETE FROM tags WHERE resource_arn = ? AND key = ?"),
                                        [(arn, key) for key in keys])

    def list_tags(self, arn: str) -> dict[str, str]:
        return dict(self._read("SELECT key, value FROM tags WHERE resource_arn = ? ORDER BY key", (arn,)))

    def _insert_tags(self, db: Connection, arn: str, tags: Mapping[str, str] | None) -> None:
        if tags:
            db.cursor().executemany(self._dialect.sql(_UPSERT_TAG), [(arn, key, value) for key, value in tags.items()])


def record_blob(record: StateMachineRecord) -> bytes:
    return orjson.dumps(_fields(record))


def record_of(blob: bytes) -> StateMachineRecord:
    return StateMachineRecord(**orjson.loads(blob))


def version_blob(version: VersionRecord) -> bytes:
    return orjson.dumps({"machine": _fields(version.machine), "number": version.number,
                         "description": version.description, "created_ms": version.created_ms})


def version_of(blob: bytes) -> VersionRecord:
    raw = orjson.loads(blob)
    return VersionRecord(StateMachineRecord(**raw["machine"]), raw["number"], raw["description"], raw["created_ms"])


def alias_blob(alias: AliasRecord) -> bytes:
    return orjson.dumps(_fields(alias))


def alias_of(blob: bytes) -> AliasRecord:
    raw = orjson.loads(blob)
    raw["routing"] = tuple(tuple(route) for route in raw["routing"])
    return AliasRecord(**raw)


def _fields(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}


def _activity(row: tuple) -> ActivityRecord:
    """An activity from its row (arn, name, created_ms, encryption)."""
    arn, name, created_ms, encryption = row
    return ActivityRecord(arn, name, created_ms, None if encryption is None else orjson.loads(encryption))


def _check_revision(machine: StateMachineRecord, revision_id: str | None) -> None:
    """Publishing conditional on ``revision_id`` (None: on nothing): RevisionChanged unless it is the current one."""
    if revision_id is not None and revision_id not in (machine.revision_id, _shown_revision(machine)):
        raise RevisionChanged(revision_id, _shown_revision(machine))


def _shown_revision(machine: StateMachineRecord) -> str:
    """The id a client compares with: AWS names a state machine's first revision INITIAL."""
    return machine.revision_id if machine.revised else "INITIAL"


def _prefix_range(arn_prefix: str, cursor: str | None) -> tuple[str, str]:
    """Bounds (exclusive) of the ARNs after ``cursor`` that start with ``arn_prefix``. Within one prefix ARN order
    is name order, and the bounds keep the scan on the primary key."""
    return max(cursor or "", arn_prefix), arn_prefix[:-1] + chr(ord(arn_prefix[-1]) + 1)
