"""PostgreSQL's schema: its migrations, one entry per schema version (see schema.py), applied by
``PostgresStore`` under an advisory lock so that nodes starting at once take turns.

Invariant: an entry that shipped is never edited; a change is a new entry. ARNs and ids are "C"-collated: their
order is byte order, as in SQLite and Python, whatever the database's locale. Must not import the store modules that
use it (postgresql.py), nor anything above the store.
"""

from __future__ import annotations

import orjson

from .dialect import POSTGRESQL, Connection, Dialect
from .schema import Migration, compaction, initial_revisions, recompaction
from .shared import activity_of


def _file_activity_tasks(db: Connection, dialect: Dialect) -> None:
    """Migration 2: the tasks already in the outbox under their activity. Parsed here: PostgreSQL's JSON refuses a
    payload holding an escaped NUL."""
    rows = db.execute("SELECT shard_id, execution_arn, dispatch_id, payload FROM outbox").fetchall()
    filed = [(activity, shard, arn, dispatch_id) for shard, arn, dispatch_id, payload in rows
             if (activity := activity_of(orjson.loads(payload))) is not None]
    db.cursor().executemany("UPDATE outbox SET activity_arn = %s WHERE shard_id = %s AND execution_arn = %s "
                            "AND dispatch_id = %s", filed)


MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
        # Rows updated on every acquisition and renewal: room on the page keeps those updates HOT.
        "CREATE TABLE shards (shard_id integer PRIMARY KEY, range_id bigint NOT NULL, owner text, "
        "lease_until_ms bigint) WITH (fillfactor = 50)",
        'CREATE TABLE nodes (node_id text COLLATE "C" PRIMARY KEY, address text NOT NULL, '
        "lease_until_ms bigint NOT NULL)",
        'CREATE TABLE state_machines (arn text COLLATE "C" PRIMARY KEY, name text NOT NULL, record bytea NOT NULL)',
        'CREATE TABLE revisions (state_machine_arn text COLLATE "C" NOT NULL, revision_id text COLLATE "C" NOT NULL, '
        "definition text NOT NULL, role_arn text NOT NULL, PRIMARY KEY (state_machine_arn, revision_id))",
        'CREATE TABLE executions (arn text COLLATE "C" PRIMARY KEY, state_machine_arn text COLLATE "C" NOT NULL, '
        "name text NOT NULL, shard_id integer NOT NULL, status text NOT NULL, start_ms bigint NOT NULL, "
        "stop_ms bigint, version bigint NOT NULL, state bytea NOT NULL) WITH (fillfactor = 80)",
        "CREATE INDEX executions_by_machine ON executions (state_machine_arn, start_ms DESC, arn DESC)",
        'CREATE TABLE history (execution_arn text COLLATE "C" NOT NULL, first_event_id bigint NOT NULL, '
        "last_event_id bigint NOT NULL, events bytea NOT NULL, PRIMARY KEY (execution_arn, first_event_id))",
        'CREATE TABLE timers (shard_id integer NOT NULL, fire_at_ms bigint NOT NULL, execution_arn text COLLATE "C" '
        'NOT NULL, timer_id text COLLATE "C" NOT NULL, PRIMARY KEY (shard_id, fire_at_ms, execution_arn, timer_id))',
        'CREATE TABLE outbox (shard_id integer NOT NULL, execution_arn text COLLATE "C" NOT NULL, dispatch_id text '
        'COLLATE "C" NOT NULL, payload bytea NOT NULL, seq bigint NOT NULL, '
        "PRIMARY KEY (shard_id, execution_arn, dispatch_id))",
        "CREATE INDEX outbox_by_seq ON outbox (shard_id, seq)",
        'CREATE TABLE activities (arn text COLLATE "C" PRIMARY KEY, name text NOT NULL, created_ms bigint NOT NULL)',
        'CREATE TABLE tags (resource_arn text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, '
        "value text NOT NULL, PRIMARY KEY (resource_arn, key))",
    ),
    (  # 2: activity tasks claimed by their activity's ARN from any node (claim_activity_task)
        'ALTER TABLE outbox ADD COLUMN activity_arn text COLLATE "C", '
        "ADD COLUMN claimed_until_ms bigint NOT NULL DEFAULT 0",
        _file_activity_tasks,
        "CREATE INDEX outbox_by_activity ON outbox (activity_arn, claimed_until_ms) WHERE activity_arn IS NOT NULL",
    ),
    (  # 3: versions and aliases; what an execution was started through; an activity's encryption configuration
        "ALTER TABLE state_machines ADD COLUMN last_version integer NOT NULL DEFAULT 0",
        'CREATE TABLE versions (state_machine_arn text COLLATE "C" NOT NULL, number integer NOT NULL, '
        'revision_id text COLLATE "C" NOT NULL, record bytea NOT NULL, PRIMARY KEY (state_machine_arn, number))',
        'CREATE TABLE aliases (state_machine_arn text COLLATE "C" NOT NULL, name text COLLATE "C" NOT NULL, '
        "record bytea NOT NULL, PRIMARY KEY (state_machine_arn, name))",
        'ALTER TABLE executions ADD COLUMN version_arn text COLLATE "C", ADD COLUMN alias_arn text COLLATE "C"',
        # Partial: executions started on the latest revision cost nothing.
        "CREATE INDEX executions_by_version ON executions (version_arn, start_ms DESC, arn DESC) "
        "WHERE version_arn IS NOT NULL",
        "CREATE INDEX executions_by_alias ON executions (alias_arn, start_ms DESC, arn DESC) "
        "WHERE alias_arn IS NOT NULL",
        "ALTER TABLE activities ADD COLUMN encryption bytea",
        initial_revisions,
    ),
    (  # 4: asynchronous express starts, run again by a shard's next owner
        'CREATE TABLE express_starts (shard_id integer NOT NULL, execution_arn text COLLATE "C" NOT NULL, '
        "command bytea NOT NULL, PRIMARY KEY (shard_id, execution_arn))",
    ),
    (  # 5: redrives, counted on the execution row (ListExecutions' redriveCount, redriveDate and redriveFilter)
        "ALTER TABLE executions ADD COLUMN redrive_count integer NOT NULL DEFAULT 0, ADD COLUMN redrive_ms bigint",
    ),
    compaction("text"),  # 6
    (  # 7: recompaction; and the default payload store, a table of objects (already compressed: stored as they are,
        # out of line)
        *recompaction(POSTGRESQL, "bigint"),
        'CREATE TABLE payloads (key text COLLATE "C" PRIMARY KEY, body bytea NOT NULL)',
        "ALTER TABLE payloads ALTER COLUMN body SET STORAGE EXTERNAL",
    ),
    (  # 8: a commit's statements as functions, so that the usual commit is one statement (see commit)
        # statewright_rows: the execution rows in bulk, as one INSERT and one UPDATE; how many rows they changed.
        "CREATE FUNCTION statewright_rows(i_arn text[], i_machine text[], i_name text[], i_shard integer[], "
        "i_status text[], i_start bigint[], i_stop bigint[], i_version bigint[], i_state bytea[], "
        "i_version_arn text[], i_alias_arn text[], i_redrive_count integer[], i_redrive_ms bigint[], "
        "u_arn text[], u_expected bigint[], u_status text[], u_stop bigint[], u_version bigint[], u_state bytea[], "
        "u_redrive_count integer[], u_redrive_ms bigint[]) RETURNS bigint LANGUAGE plpgsql AS $$ "
        "DECLARE inserted bigint := 0; updated bigint := 0; "
        "BEGIN "
        "IF cardinality(i_arn) > 0 THEN "
        "INSERT INTO executions (arn, state_machine_arn, name, shard_id, status, start_ms, stop_ms, version, state, "
        "version_arn, alias_arn, redrive_count, redrive_ms) SELECT * FROM unnest(i_arn, i_machine, i_name, i_shard, "
        "i_status, i_start, i_stop, i_version, i_state, i_version_arn, i_alias_arn, i_redrive_count, i_redrive_ms) "
        "ON CONFLICT DO NOTHING; "
        "GET DIAGNOSTICS inserted = ROW_COUNT; "
        "END IF; "
        "IF cardinality(u_arn) > 0 THEN "
        "UPDATE executions e SET status = u.status, stop_ms = u.stop_ms, version = u.version, state = u.state, "
        "redrive_count = u.redrive_count, redrive_ms = u.redrive_ms FROM unnest(u_arn, u_expected, u_status, "
        "u_stop, u_version, u_state, u_redrive_count, u_redrive_ms) AS u(arn, expected, status, stop_ms, version, "
        "state, redrive_count, redrive_ms) WHERE e.arn = u.arn AND e.version = u.expected; "
        "GET DIAGNOSTICS updated = ROW_COUNT; "
        "END IF; "
        "RETURN inserted + updated; "
        "END $$",
        # statewright_rest: history, timers and outbox of the rows that landed, deletes before inserts; a NOTIFY
        # per activity given tasks, delivered at COMMIT to every node listening.
        "CREATE FUNCTION statewright_rest(h_arn text[], h_first bigint[], h_last bigint[], h_events bytea[], "
        "tr_shard integer[], tr_fire bigint[], tr_arn text[], tr_id text[], "
        "ta_shard integer[], ta_fire bigint[], ta_arn text[], ta_id text[], "
        "dr_shard integer[], dr_arn text[], dr_id text[], "
        "da_shard integer[], da_arn text[], da_id text[], da_payload bytea[], da_seq bigint[], da_activity text[], "
        "activities text[], channel text) RETURNS void LANGUAGE plpgsql AS $$ "
        "BEGIN "
        "IF cardinality(h_arn) > 0 THEN "
        "INSERT INTO history SELECT * FROM unnest(h_arn, h_first, h_last, h_events) "
        "ON CONFLICT (execution_arn, first_event_id) DO UPDATE "
        "SET last_event_id = EXCLUDED.last_event_id, events = EXCLUDED.events; "
        "END IF; "
        "IF cardinality(tr_shard) > 0 THEN "
        "DELETE FROM timers t USING unnest(tr_shard, tr_fire, tr_arn, tr_id) AS u(shard_id, fire_at_ms, "
        "execution_arn, timer_id) WHERE t.shard_id = u.shard_id AND t.fire_at_ms = u.fire_at_ms "
        "AND t.execution_arn = u.execution_arn AND t.timer_id = u.timer_id; "
        "END IF; "
        "IF cardinality(ta_shard) > 0 THEN "
        "INSERT INTO timers SELECT * FROM unnest(ta_shard, ta_fire, ta_arn, ta_id) ON CONFLICT DO NOTHING; "
        "END IF; "
        "IF cardinality(dr_shard) > 0 THEN "
        "DELETE FROM outbox o USING unnest(dr_shard, dr_arn, dr_id) AS u(shard_id, execution_arn, dispatch_id) "
        "WHERE o.shard_id = u.shard_id AND o.execution_arn = u.execution_arn AND o.dispatch_id = u.dispatch_id; "
        "END IF; "
        "IF cardinality(da_shard) > 0 THEN "
        "INSERT INTO outbox (shard_id, execution_arn, dispatch_id, payload, seq, activity_arn) "
        "SELECT * FROM unnest(da_shard, da_arn, da_id, da_payload, da_seq, da_activity) "
        "ON CONFLICT (shard_id, execution_arn, dispatch_id) DO UPDATE SET payload = EXCLUDED.payload, "
        "seq = EXCLUDED.seq, activity_arn = EXCLUDED.activity_arn, claimed_until_ms = 0; "
        "END IF; "
        "IF cardinality(activities) > 0 THEN "
        "PERFORM pg_notify(channel, activity) FROM unnest(activities) AS activity; "
        "END IF; "
        "END $$",
        # statewright_commit: a whole commit when every shard is still the caller's and every row lands. Otherwise
        # it raises (SW001: a shard moved; SW002: a row's condition failed), which undoes it all.
        "CREATE FUNCTION statewright_commit(shards integer[], range_ids bigint[], expected bigint, "
        "i_arn text[], i_machine text[], i_name text[], i_shard integer[], "
        "i_status text[], i_start bigint[], i_stop bigint[], i_version bigint[], i_state bytea[], "
        "i_version_arn text[], i_alias_arn text[], i_redrive_count integer[], i_redrive_ms bigint[], "
        "u_arn text[], u_expected bigint[], u_status text[], u_stop bigint[], u_version bigint[], u_state bytea[], "
        "u_redrive_count integer[], u_redrive_ms bigint[], "
        "h_arn text[], h_first bigint[], h_last bigint[], h_events bytea[], "
        "tr_shard integer[], tr_fire bigint[], tr_arn text[], tr_id text[], "
        "ta_shard integer[], ta_fire bigint[], ta_arn text[], ta_id text[], "
        "dr_shard integer[], dr_arn text[], dr_id text[], "
        "da_shard integer[], da_arn text[], da_id text[], da_payload bytea[], da_seq bigint[], da_activity text[], "
        "activities text[], channel text) RETURNS void LANGUAGE plpgsql AS $$ "
        "DECLARE held bigint; "
        "BEGIN "
        "SELECT count(*) INTO held FROM (SELECT 1 FROM shards s JOIN unnest(shards, range_ids) AS u(shard_id, "
        "range_id) ON s.shard_id = u.shard_id AND s.range_id = u.range_id ORDER BY s.shard_id FOR SHARE OF s) AS h; "
        "IF held <> cardinality(shards) THEN RAISE EXCEPTION 'a shard moved' USING ERRCODE = 'SW001'; END IF; "
        "IF statewright_rows(i_arn, i_machine, i_name, i_shard, i_status, i_start, i_stop, i_version, i_state, "
        "i_version_arn, i_alias_arn, i_redrive_count, i_redrive_ms, u_arn, u_expected, u_status, u_stop, u_version, "
        "u_state, u_redrive_count, u_redrive_ms) <> expected THEN "
        "RAISE EXCEPTION 'a row changed' USING ERRCODE = 'SW002'; END IF; "
        "PERFORM statewright_rest(h_arn, h_first, h_last, h_events, tr_shard, tr_fire, tr_arn, tr_id, ta_shard, "
        "ta_fire, ta_arn, ta_id, dr_shard, dr_arn, dr_id, da_shard, da_arn, da_id, da_payload, da_seq, da_activity, "
        "activities, channel); "
        "END $$",
    ),
    (  # 9: the shard assignment rule each node speaks, and its weight (cluster/membership.py). A node of the previous
        # release still registers with INSERT ... VALUES of the first three columns: these take their defaults
        "ALTER TABLE nodes ADD COLUMN assignment_rule integer NOT NULL DEFAULT 1, "
        "ADD COLUMN weight integer NOT NULL DEFAULT 1",
    ),
    (  # 10: the newest storage format each node reads (store/base.py STORAGE_FORMAT); a node of the previous release
        # registers without it: 1, and while it is live no node writes a newer format
        "ALTER TABLE nodes ADD COLUMN storage_format integer NOT NULL DEFAULT 1",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
