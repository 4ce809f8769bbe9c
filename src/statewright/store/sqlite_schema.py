"""SQLite's schema: its migrations, one entry per schema version (see schema.py), applied by ``SqliteStore`` in one
``BEGIN IMMEDIATE`` transaction (two processes opening a file at once take turns).

Invariant: an entry that shipped is never edited; a change is a new entry. Entry 1 creates its tables only where they
are missing: a file written before versions were recorded (version 0) holds some of them already. Must not import
the store modules that use it (sqlite.py), nor anything above the store.
"""

from __future__ import annotations

from .dialect import SQLITE
from .schema import Migration, compaction, initial_revisions, recompaction
from .shared import CLOSED, uncompacted

# The executions' columns that migration 9 copies (every column of version 8)
_KEPT = ("arn, state_machine_arn, name, shard_id, status, start_ms, stop_ms, version, state, version_arn, alias_arn, "
         "redrive_count, redrive_ms, history_location, compacted_stop_ms")

MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS shards (shard_id INTEGER PRIMARY KEY, range_id INTEGER NOT NULL, owner TEXT, "
        "lease_until_ms INTEGER)",
        "CREATE TABLE IF NOT EXISTS nodes (node_id TEXT PRIMARY KEY, address TEXT NOT NULL, "
        "lease_until_ms INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS state_machines (arn TEXT PRIMARY KEY, name TEXT NOT NULL, record BLOB NOT NULL)",
        "CREATE TABLE IF NOT EXISTS revisions (state_machine_arn TEXT NOT NULL, revision_id TEXT NOT NULL, "
        "definition TEXT NOT NULL, role_arn TEXT NOT NULL, PRIMARY KEY (state_machine_arn, revision_id)) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS executions (arn TEXT PRIMARY KEY, state_machine_arn TEXT NOT NULL, "
        "name TEXT NOT NULL, shard_id INTEGER NOT NULL, status TEXT NOT NULL, start_ms INTEGER NOT NULL, "
        "stop_ms INTEGER, version INTEGER NOT NULL, state BLOB NOT NULL)",
        "CREATE INDEX IF NOT EXISTS executions_by_machine ON executions (state_machine_arn, start_ms DESC, arn DESC)",
        "CREATE TABLE IF NOT EXISTS history (execution_arn TEXT NOT NULL, first_event_id INTEGER NOT NULL, "
        "last_event_id INTEGER NOT NULL, events BLOB NOT NULL, PRIMARY KEY (execution_arn, first_event_id)) "
        "WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS timers (shard_id INTEGER NOT NULL, fire_at_ms INTEGER NOT NULL, "
        "execution_arn TEXT NOT NULL, timer_id TEXT NOT NULL, "
        "PRIMARY KEY (shard_id, fire_at_ms, execution_arn, timer_id)) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS outbox (shard_id INTEGER NOT NULL, execution_arn TEXT NOT NULL, "
        "dispatch_id TEXT NOT NULL, payload BLOB NOT NULL, seq INTEGER NOT NULL, "
        "PRIMARY KEY (shard_id, execution_arn, dispatch_id)) WITHOUT ROWID",
        "CREATE INDEX IF NOT EXISTS outbox_by_seq ON outbox (shard_id, seq)",
        "CREATE TABLE IF NOT EXISTS activities (arn TEXT PRIMARY KEY, name TEXT NOT NULL, "
        "created_ms INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS tags (resource_arn TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
        "PRIMARY KEY (resource_arn, key)) WITHOUT ROWID",
    ),
    (  # 2: the outbox's activity ARN and claim time (Store.claim_activity_task). No index on them: one node on its
        # own file never claims (its matcher is fed by its engine), and an index would cost every task two writes.
        "ALTER TABLE outbox ADD COLUMN activity_arn TEXT",
        "ALTER TABLE outbox ADD COLUMN claimed_until_ms INTEGER NOT NULL DEFAULT 0",
        "UPDATE outbox SET activity_arn = json_extract(CAST(payload AS TEXT), '$.resource') "
        "WHERE json_extract(CAST(payload AS TEXT), '$.kind') = 'activity'",
    ),
    (  # 3: versions and aliases, the number of a state machine's last version, what an execution was started
        # through, an activity's encryption configuration; state machine records learn their first revision
        "CREATE TABLE versions (state_machine_arn TEXT NOT NULL, number INTEGER NOT NULL, revision_id TEXT NOT NULL, "
        "record BLOB NOT NULL, PRIMARY KEY (state_machine_arn, number)) WITHOUT ROWID",
        "CREATE TABLE aliases (state_machine_arn TEXT NOT NULL, name TEXT NOT NULL, record BLOB NOT NULL, "
        "PRIMARY KEY (state_machine_arn, name)) WITHOUT ROWID",
        "ALTER TABLE state_machines ADD COLUMN last_version INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE executions ADD COLUMN version_arn TEXT",
        "ALTER TABLE executions ADD COLUMN alias_arn TEXT",
        "ALTER TABLE activities ADD COLUMN encryption BLOB",
        initial_revisions,
        # Partial: executions started on the latest revision cost nothing.
        "CREATE INDEX executions_by_version ON executions (version_arn, start_ms DESC, arn DESC) "
        "WHERE version_arn IS NOT NULL",
        "CREATE INDEX executions_by_alias ON executions (alias_arn, start_ms DESC, arn DESC) "
        "WHERE alias_arn IS NOT NULL",
    ),
    (  # 4: asynchronous express starts, run again by a shard's next owner
        "CREATE TABLE express_starts (shard_id INTEGER NOT NULL, execution_arn TEXT NOT NULL, command BLOB NOT NULL, "
        "PRIMARY KEY (shard_id, execution_arn)) WITHOUT ROWID",
    ),
    (  # 5: redrives, counted on the execution row (ListExecutions' redriveCount, redriveDate and redriveFilter)
        "ALTER TABLE executions ADD COLUMN redrive_count INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE executions ADD COLUMN redrive_ms INTEGER",
    ),
    compaction("TEXT"),  # 6
    recompaction(SQLITE, "INTEGER"),  # 7
    (  # 8: the shard assignment rule each node speaks, and its weight (cluster/membership.py)
        "ALTER TABLE nodes ADD COLUMN assignment_rule INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE nodes ADD COLUMN weight INTEGER NOT NULL DEFAULT 1",
    ),
    (  # 9: executions keyed by an integer id, in start order (AUTOINCREMENT: an id is never handed out twice, so a
        # row left behind can never name a later execution); history and timer rows name their execution by it;
        # the listing indexes ascending (rows added at their end fill their pages: descending, pages split half
        # empty) with the id to break ties
        "CREATE TABLE executions_keyed (id INTEGER PRIMARY KEY AUTOINCREMENT, arn TEXT NOT NULL UNIQUE, "
        "state_machine_arn TEXT NOT NULL, name TEXT NOT NULL, shard_id INTEGER NOT NULL, status TEXT NOT NULL, "
        "start_ms INTEGER NOT NULL, stop_ms INTEGER, version INTEGER NOT NULL, state BLOB NOT NULL, version_arn TEXT, "
        "alias_arn TEXT, redrive_count INTEGER NOT NULL DEFAULT 0, redrive_ms INTEGER, history_location TEXT, "
        "compacted_stop_ms INTEGER)",
        f"INSERT INTO executions_keyed ({_KEPT}) SELECT {_KEPT} FROM executions ORDER BY start_ms, arn",
        "DROP TABLE executions",
        "ALTER TABLE executions_keyed RENAME TO executions",
        "CREATE INDEX executions_by_machine ON executions (state_machine_arn, start_ms, id)",
        "CREATE INDEX executions_by_version ON executions (version_arn, start_ms, id) WHERE version_arn IS NOT NULL",
        "CREATE INDEX executions_by_alias ON executions (alias_arn, start_ms, id) WHERE alias_arn IS NOT NULL",
        f"CREATE INDEX executions_closed ON executions (stop_ms) WHERE {CLOSED}",
        f"CREATE INDEX executions_uncompacted ON executions (stop_ms) WHERE {CLOSED} AND "
        f"{uncompacted(SQLITE.distinct)}",
        "CREATE TABLE history_keyed (execution_id INTEGER NOT NULL, first_event_id INTEGER NOT NULL, "
        "last_event_id INTEGER NOT NULL, events BLOB NOT NULL, PRIMARY KEY (execution_id, first_event_id)) "
        "WITHOUT ROWID",
        "INSERT INTO history_keyed SELECT executions.id, first_event_id, last_event_id, events FROM history "
        "JOIN executions ON executions.arn = history.execution_arn ORDER BY 1, 2",
        "DROP TABLE history",
        "ALTER TABLE history_keyed RENAME TO history",
        "CREATE TABLE timers_keyed (shard_id INTEGER NOT NULL, fire_at_ms INTEGER NOT NULL, "
        "execution_id INTEGER NOT NULL, timer_id TEXT NOT NULL, "
        "PRIMARY KEY (shard_id, fire_at_ms, execution_id, timer_id)) WITHOUT ROWID",
        "INSERT INTO timers_keyed SELECT timers.shard_id, fire_at_ms, executions.id, timer_id FROM timers "
        "JOIN executions ON executions.arn = timers.execution_arn ORDER BY 1, 2, 3, 4",
        "DROP TABLE timers",
        "ALTER TABLE timers_keyed RENAME TO timers",
        "ALTER TABLE nodes ADD COLUMN storage_format INTEGER NOT NULL DEFAULT 1",  # as PostgreSQL's (its 10)
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
