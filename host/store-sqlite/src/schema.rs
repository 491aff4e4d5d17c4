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
