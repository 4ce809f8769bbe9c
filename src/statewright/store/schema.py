"""Versioned schema migrations, as both stores apply them when they open a database: a list per backend
(``sqlite_schema.MIGRATIONS``, ``postgresql_schema.MIGRATIONS``), entry N bringing a database from version N-1 to
N, each a sequence of steps (a statement, or a function of the migrating transaction's connection and dialect).

Invariants: the version a database records (meta 'schema_version'; none: 0) says which migrations it holds, and
nothing else is looked at to decide what to apply; migrations run in order, in the opener's one transaction with the
recording of the new version, so a database is at one version or the next, never between; an entry that shipped is
never edited, a change is a new entry; a version above the code's is refused (SchemaTooNew) before anything is
written. Must not import a backend or anything above the store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import orjson

from .dialect import Connection, Dialect
from .errors import SchemaTooNew, ShardCountMismatch
from .shared import CLOSED, uncompacted

Step = str | Callable[[Connection, Dialect], None]
Migration = Sequence[Step]


def migrate(db: Connection, dialect: Dialect, migrations: Sequence[Migration], location: str) -> None:
    """Apply the migrations the database does not hold yet, in the caller's transaction, and record its version."""
    version = 0
    if db.execute(dialect.meta_exists).fetchone() is not None:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else 0
    latest = len(migrations)
    if version > latest:
        raise SchemaTooNew(f"{location} holds statewright schema version {version}, newer than this statewright's "
                           f"({latest}): upgrade statewright to open it")
    for steps in migrations[version:]:
        for step in steps:
            if callable(step):
                step(db, dialect)
            else:
                db.execute(step)
    if version < latest:
        db.execute(dialect.sql("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE "
                               "SET value = excluded.value"), (str(latest),))


def settle_shard_count(db: Connection, dialect: Dialect, shard_count: int | None, location: str, *,
                       missing: Exception, instead: str) -> int:
    """The database's shard count, recorded now if it has none and ``shard_count`` is given. ``missing`` is raised
    if it has none and none is given (the caller's transaction then rolls back: nothing is created); a count other
    than ``shard_count`` raises ShardCountMismatch, ``instead`` naming what else to use."""
    if shard_count is not None:
        db.execute(dialect.sql("INSERT INTO meta VALUES ('shard_count', ?) ON CONFLICT DO NOTHING"),
                   (str(shard_count),))
    row = db.execute("SELECT value FROM meta WHERE key = 'shard_count'").fetchone()
    if row is None:
        raise missing
    recorded = int(row[0])
    if shard_count is not None and recorded != shard_count:
        raise ShardCountMismatch(f"{location} was created with {recorded} shards; the shard count cannot change "
                                 f"(start with --shards {recorded}, or use {instead})")
    return recorded


def initial_revisions(db: Connection, dialect: Dialect) -> None:
    """Migration 3 of both: state machine records learn their first revision (``with_initial_revision``)."""
    rows = db.execute("SELECT arn, record FROM state_machines").fetchall()
    db.cursor().executemany(dialect.sql("UPDATE state_machines SET record = ? WHERE arn = ?"),
                            [(with_initial_revision(record), arn) for arn, record in rows])


def compaction(text: str) -> tuple[Step, ...]:
    """Migration 6 of both, retention and compaction (``text``: the backend's text type). Partial indexes: a running
    execution costs no entry, a compacted one leaves the index the compaction sweep reads."""
    return (f"ALTER TABLE executions ADD COLUMN history_location {text}",
            f"CREATE INDEX executions_closed ON executions (stop_ms) WHERE {CLOSED}",
            f"CREATE INDEX executions_to_compact ON executions (stop_ms) WHERE {CLOSED} AND history_location IS NULL")


def recompaction(dialect: Dialect, integer: str) -> tuple[Step, ...]:
    """Migration 7 of both, compaction of redrivable executions (``integer``: the backend's type of milliseconds):
    the row records the close it compacted (stop_ms then), so one redriven and closed again is due again
    (shared.uncompacted), its object holding the earlier events."""
    return (f"ALTER TABLE executions ADD COLUMN compacted_stop_ms {integer}",
            "UPDATE executions SET compacted_stop_ms = stop_ms WHERE history_location IS NOT NULL",
            "DROP INDEX executions_to_compact",
            f"CREATE INDEX executions_uncompacted ON executions (stop_ms) WHERE {CLOSED} AND "
            f"{uncompacted(dialect.distinct)}")


def with_initial_revision(blob: bytes) -> bytes:
    """A state machine record written before records knew their first revision. One never updated is at it; for one
    updated, which was first is unknown, and its revisions keep showing their ids, as they did."""
    raw = orjson.loads(blob)
    raw.setdefault("initial_revision_id", raw["revision_id"] if raw["updated_ms"] == raw["created_ms"] else "")
    return orjson.dumps(raw)
