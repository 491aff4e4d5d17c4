//! Schema migrations, tracked by `PRAGMA user_version`.

use rusqlite::Connection;
use weft_engine::StoreError;

use crate::map_err;

/// Each entry brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: runs, steps, attempts, events, templates
    r#"
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        template TEXT NOT NULL,
        version INTEGER,
        state TEXT NOT NULL,
        definition TEXT NOT NULL,
        input TEXT NOT NULL,
        output TEXT,
        error TEXT,
        parent TEXT,
        depth INTEGER NOT NULL DEFAULT 0,
        concurrency_key TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        deadline_at INTEGER,
        last_seq INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX runs_unfinished ON runs(id)
        WHERE state NOT IN ('completed', 'failed', 'canceled', 'rejected');
    CREATE INDEX runs_template ON runs(template, id);
    CREATE INDEX runs_state ON runs(state, id);
    CREATE TABLE steps (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        idx INTEGER NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        output TEXT,
        error TEXT,
        started_at INTEGER,
        ended_at INTEGER,
        next_attempt_at INTEGER,
        PRIMARY KEY (run_id, name)
    ) WITHOUT ROWID;
    -- item is -1 for a step without for_each (NULL would not be unique)
    CREATE TABLE attempts (
        run_id TEXT NOT NULL,
        step TEXT NOT NULL,
        item INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        state TEXT NOT NULL,
        lease_until INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        ended_at INTEGER,
        output TEXT,
        error TEXT,
        PRIMARY KEY (run_id, step, item, attempt)
    ) WITHOUT ROWID;
    -- at most one running attempt per (run, step, item)
    CREATE UNIQUE INDEX attempts_one_running ON attempts(run_id, step, item) WHERE state = 'running';
    CREATE INDEX attempts_leases ON attempts(lease_until) WHERE state = 'running';
    CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at INTEGER NOT NULL,
        kind TEXT NOT NULL,
        step TEXT,
        item INTEGER,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE templates (
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        definition TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (name, version)
    ) WITHOUT ROWID;
    "#,
    // 2: a run's plan (definition, input) in its own table. A run's row is
    // updated at every transition (state, updated_at, last_seq), and SQLite
    // rewrites the whole row on update: with a large definition in it,
    // every update copied its overflow pages.
    r#"
    CREATE TABLE run_plans (
        id TEXT PRIMARY KEY,
        definition TEXT NOT NULL,
        input TEXT NOT NULL
    );
    INSERT INTO run_plans (id, definition, input) SELECT id, definition, input FROM runs;
    ALTER TABLE runs DROP COLUMN definition;
    ALTER TABLE runs DROP COLUMN input;
    "#,
    // 3: waits (what parked steps wait for), the inbox of signals and
    // events for the store's owner, cron schedules; run queues by key.
    r#"
    CREATE TABLE waits (
        run_id TEXT NOT NULL,
        step TEXT NOT NULL,
        kind TEXT NOT NULL,
        event TEXT,
        spec TEXT NOT NULL,
        until INTEGER,
        since INTEGER NOT NULL,
        PRIMARY KEY (run_id, step)
    ) WITHOUT ROWID;
    CREATE INDEX waits_event ON waits(event, since) WHERE event IS NOT NULL;
    CREATE TABLE inbox (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        event_id TEXT UNIQUE,
        body TEXT NOT NULL,
        at INTEGER NOT NULL,
        answer TEXT
    );
    CREATE INDEX inbox_pending ON inbox(seq) WHERE answer IS NULL;
    CREATE TABLE schedules (
        name TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        next_fire_at INTEGER NOT NULL
    );
    CREATE INDEX runs_queue ON runs(concurrency_key)
        WHERE concurrency_key IS NOT NULL AND state NOT IN ('completed', 'failed', 'canceled', 'rejected');
    CREATE INDEX runs_parent ON runs(parent) WHERE parent IS NOT NULL;
    "#,
    // 4: fewer pages written per transition. Running attempts are few and
    // `attempts_one_running` lists them, so a lease index only cost one more
    // page per claim and per outcome; `steps.attempts` is no longer kept
    // (readers count the step's attempts), so an item's claim leaves its
    // step's row alone.
    r#"
    DROP INDEX attempts_leases;
    "#,
    // 5: unfinished runs are found through `runs_state`; an index of
    // their own cost two more pages per run (one as it starts, one as it
    // ends).
    r#"
    DROP INDEX runs_unfinished;
    "#,
    // 6: the writer checks that no other attempt of a step (or item) is
    // running by a read of the step's attempts; the index of running
    // attempts cost a page as each attempt started and another as it ended.
    r#"
    DROP INDEX attempts_one_running;
    "#,
    // 7: an attempt cut short by a crash runs again as itself (same number,
    // same idempotency key) and counts its interruptions, so a step that
    // kills its process again and again is stopped; the fuel its guest
    // used counts against its run's budget (`limits.run_fuel`).
    r#"
    ALTER TABLE attempts ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE attempts ADD COLUMN blame INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE attempts ADD COLUMN fuel INTEGER;
    "#,
    // 8: artifacts, kept with their run; their bytes once per sha256.
    r#"
    CREATE TABLE blobs (
        sha256 TEXT PRIMARY KEY,
        data BLOB NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE artifacts (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        mime TEXT NOT NULL,
        size INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        step TEXT NOT NULL,
        item INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (run_id, name)
    ) WITHOUT ROWID;
    CREATE INDEX artifacts_blob ON artifacts(sha256);
    "#,
    // 9: retention. Finished runs by the time they ended (`weft runs
    // prune`, the reaper): a page written as each run ends.
    r#"
    CREATE INDEX runs_ended ON runs(updated_at) WHERE state IN ('completed', 'failed', 'canceled', 'rejected');
    "#,
    // 10: each attempt keeps its input with refs resolved (as shown: large
    // inputs as a note of their size), for `runs show` and `runs diff`.
    r#"
    ALTER TABLE attempts ADD COLUMN input TEXT;
    "#,
    // 11: the W3C traceparent a run was started under (docs/observability.md),
    // beside the plan: written once, with the run.
    r#"
    ALTER TABLE run_plans ADD COLUMN traceparent TEXT;
    "#,
    // 12: a run's labels (a JSON object of strings; NULL when none),
    // written once, with the run; `runs list --label` reads them.
    r#"
    ALTER TABLE run_plans ADD COLUMN labels TEXT;
    "#,
    // 13: signals queued for a step that does not wait yet, by run (few:
    // a queued signal is settled when its wait starts), and emitted events
    // by name, for a wait that starts after them (docs/waits.md).
    r#"
    CREATE INDEX inbox_queued ON inbox(json_extract(body, '$.run'))
        WHERE kind = 'signal' AND json_extract(answer, '$.status') = 'queued';
    CREATE INDEX inbox_events ON inbox(json_extract(body, '$.event'), seq) WHERE kind = 'event';
    "#,
    // 14: the outbox (notifications to send, written with the transition
    // that causes them; docs/notifications.md) and the idempotency keys of
    // starts (the run each started; deleted with it).
    r#"
    CREATE TABLE deliveries (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL,
        fifo_key TEXT,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        next_at INTEGER NOT NULL,
        lease_until INTEGER,
        error TEXT,
        updated_at INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX deliveries_pending ON deliveries(seq) WHERE state = 'pending';
    CREATE INDEX deliveries_fifo ON deliveries(fifo_key, seq) WHERE state = 'pending' AND fifo_key IS NOT NULL;
    CREATE INDEX deliveries_run ON deliveries(run_id);
    CREATE TABLE start_keys (
        key TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        digest TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX start_keys_run ON start_keys(run_id);
    "#,
    // 15: a number that grows with every change of a template, in the
    // change's own transaction (triggers: any process, any statement), so
    // a template read can be answered from memory while it stays the same
    // (`weft_engine::template_cache`).
    r#"
    CREATE TABLE template_changes (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
    INSERT INTO template_changes (id, n) VALUES (1, 0);
    CREATE TRIGGER templates_inserted AFTER INSERT ON templates
        BEGIN UPDATE template_changes SET n = n + 1 WHERE id = 1; END;
    CREATE TRIGGER templates_updated AFTER UPDATE ON templates
        BEGIN UPDATE template_changes SET n = n + 1 WHERE id = 1; END;
    CREATE TRIGGER templates_deleted AFTER DELETE ON templates
        BEGIN UPDATE template_changes SET n = n + 1 WHERE id = 1; END;
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Bring the database to [`SCHEMA_VERSION`]; each migration commits with
/// its version bump, so a crash mid-way leaves a consistent older version.
pub fn migrate(conn: &mut Connection) -> Result<u32, StoreError> {
    let found: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(map_err)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew { found, supported: SCHEMA_VERSION });
    }
    for (v, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(map_err)?;
        // Another opener may have migrated meanwhile.
        let now: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(map_err)?;
        if now > v as u32 {
            continue;
        }
        tx.execute_batch(sql).map_err(map_err)?;
        tx.pragma_update(None, "user_version", v as u32 + 1).map_err(map_err)?;
        tx.commit().map_err(map_err)?;
    }
    Ok(SCHEMA_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-1 store with a run keeps its plan when migrated.
    #[test]
    fn version_1_runs_keep_their_plan_in_version_2() {
        let mut c = Connection::open_in_memory().unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        c.execute(
            "INSERT INTO runs (id, template, state, definition, input, created_at, updated_at)
             VALUES ('r_1', 't', 'working', '{\"name\":\"t\"}', '{\"a\":1}', 1, 1)",
            [],
        )
        .unwrap();
        assert_eq!(migrate(&mut c).unwrap(), SCHEMA_VERSION);
        let (d, i): (String, String) = c
            .query_row("SELECT definition, input FROM run_plans WHERE id = 'r_1'", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!((d.as_str(), i.as_str()), ("{\"name\":\"t\"}", "{\"a\":1}"));
        let state: String = c.query_row("SELECT state FROM runs WHERE id = 'r_1'", [], |r| r.get(0)).unwrap();
        assert_eq!(state, "working");
        assert!(c.prepare("SELECT definition FROM runs").is_err(), "the column moved");
        // Version 11: runs stored before have no trace context.
        let tp: Option<String> =
            c.query_row("SELECT traceparent FROM run_plans WHERE id = 'r_1'", [], |r| r.get(0)).unwrap();
        assert_eq!(tp, None);
    }

    /// Version 4 drops the lease index, version 6 the index of running
    /// attempts; the tables keep their rows.
    #[test]
    fn versions_4_and_6_drop_the_indexes_of_attempts() {
        let mut c = Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..3] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", 3).unwrap();
        let index = |c: &Connection, name: &str| -> bool {
            c.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?1", [name], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
                == 1
        };
        assert!(index(&c, "attempts_leases"));
        assert!(index(&c, "attempts_one_running"));
        c.execute(
            "INSERT INTO attempts (run_id, step, item, attempt, state, lease_until, started_at)
             VALUES ('r_1', 'a', -1, 1, 'running', 5, 1)",
            [],
        )
        .unwrap();
        assert_eq!(migrate(&mut c).unwrap(), SCHEMA_VERSION);
        assert!(!index(&c, "attempts_leases"));
        assert!(!index(&c, "attempts_one_running"));
        let n: i64 = c.query_row("SELECT count(*) FROM attempts WHERE state = 'running'", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1);
    }
}
