//! Schema migrations, tracked in `weft_schema` (one row: the version).
//! Every opener migrates under an advisory lock, so many workers starting
//! at once apply each migration once; each migration commits with its
//! version bump.

use tokio_postgres::Client;
use weft_engine::StoreError;

use crate::map_err;

/// Each entry brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: what the SQLite store holds (its migrations 1 to 10, folded), plus who
    // drives which run: `workers` (a lease each, renewed by heartbeat;
    // `epoch` is the fencing token) and `runs.owner`. The tables updated in
    // place as a run goes (runs, steps, attempts) leave room in their pages
    // for heap-only updates.
    r#"
    CREATE TABLE workers (
        epoch BIGSERIAL PRIMARY KEY,
        name TEXT NOT NULL,
        started_at BIGINT NOT NULL,
        lease_until TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        template TEXT NOT NULL,
        version INTEGER,
        state TEXT NOT NULL,
        output TEXT,
        error TEXT,
        parent TEXT,
        depth INTEGER NOT NULL DEFAULT 0,
        concurrency_key TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        deadline_at BIGINT,
        last_seq BIGINT NOT NULL DEFAULT 0,
        owner BIGINT
    ) WITH (fillfactor = 70);
    -- No index has `owner`: a claim or a takeover changes no indexed
    -- column (a heap-only update), and the runs it looks among are the
    -- unfinished ones, found through `runs_state`.
    CREATE INDEX runs_template ON runs(template, id);
    CREATE INDEX runs_state ON runs(state, id);
    CREATE INDEX runs_queue ON runs(concurrency_key, created_at, id)
        WHERE concurrency_key IS NOT NULL AND state IN ('submitted', 'working', 'input-required', 'auth-required');
    CREATE INDEX runs_parent ON runs(parent) WHERE parent IS NOT NULL;
    CREATE INDEX runs_ended ON runs(updated_at) WHERE state IN ('completed', 'failed', 'canceled', 'rejected');
    -- A run's plan by digest: the runs of one definition share one row.
    CREATE TABLE plans (
        sha256 TEXT PRIMARY KEY,
        definition TEXT NOT NULL
    );
    CREATE TABLE run_inputs (
        id TEXT PRIMARY KEY,
        plan TEXT NOT NULL REFERENCES plans (sha256),
        input TEXT NOT NULL
    );
    CREATE INDEX run_inputs_plan ON run_inputs(plan);
    CREATE TABLE steps (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        idx INTEGER NOT NULL,
        state TEXT NOT NULL,
        output TEXT,
        error TEXT,
        started_at BIGINT,
        ended_at BIGINT,
        next_attempt_at BIGINT,
        PRIMARY KEY (run_id, name)
    ) WITH (fillfactor = 70);
    -- item is -1 for a step without for_each
    CREATE TABLE attempts (
        run_id TEXT NOT NULL,
        step TEXT NOT NULL,
        item INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        state TEXT NOT NULL,
        lease_until BIGINT NOT NULL,
        started_at BIGINT NOT NULL,
        ended_at BIGINT,
        output TEXT,
        error TEXT,
        interruptions INTEGER NOT NULL DEFAULT 0,
        blame INTEGER NOT NULL DEFAULT 0,
        fuel BIGINT,
        input TEXT,
        PRIMARY KEY (run_id, step, item, attempt)
    ) WITH (fillfactor = 80);
    CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        at BIGINT NOT NULL,
        kind TEXT NOT NULL,
        step TEXT,
        item INTEGER,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE templates (
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        definition TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (name, version)
    );
    CREATE TABLE waits (
        run_id TEXT NOT NULL,
        step TEXT NOT NULL,
        kind TEXT NOT NULL,
        event TEXT,
        spec TEXT NOT NULL,
        until BIGINT,
        since BIGINT NOT NULL,
        PRIMARY KEY (run_id, step)
    );
    CREATE INDEX waits_event ON waits(event, since) WHERE event IS NOT NULL;
    -- `run`: the run a message is for (its owner handles it); `taken_until`:
    -- a worker handles it until then (another may after).
    CREATE TABLE inbox (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        event_id TEXT UNIQUE,
        run TEXT,
        body TEXT NOT NULL,
        at BIGINT NOT NULL,
        answer TEXT,
        taken_until TIMESTAMPTZ
    );
    CREATE INDEX inbox_pending ON inbox(seq) WHERE answer IS NULL;
    CREATE INDEX inbox_run ON inbox(run) WHERE run IS NOT NULL;
    CREATE TABLE schedules (
        name TEXT PRIMARY KEY,
        body JSONB NOT NULL,
        next_fire_at BIGINT NOT NULL
    );
    CREATE TABLE blobs (
        sha256 TEXT PRIMARY KEY,
        data BYTEA NOT NULL
    );
    CREATE TABLE artifacts (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        mime TEXT NOT NULL,
        size BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        step TEXT NOT NULL,
        item INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (run_id, name)
    );
    CREATE INDEX artifacts_blob ON artifacts(sha256);
    "#,
    // 2: the W3C traceparent a run was started under (docs/observability.md),
    // beside its input: written once, with the run.
    r#"
    ALTER TABLE run_inputs ADD COLUMN traceparent TEXT;
    "#,
    // 3: the runs nobody drives, as claims look for them (its predicate is
    // the claim's own): a claim reads only those, not the whole history of
    // runs. A claim or takeover now updates this index too (no longer a
    // heap-only update). Measured in W10 (2 workers, 10,000 runs), a claim
    // went from ~3.6 ms to ~1.1 ms of database time.
    r#"
    CREATE INDEX runs_free ON runs(id)
        WHERE owner IS NULL AND state IN ('submitted', 'working', 'input-required', 'auth-required');
    "#,
    // 4: a run's labels (a JSON object of strings; NULL when none), beside
    // its input: written once, with the run; run lists filter on them.
    r#"
    ALTER TABLE run_inputs ADD COLUMN labels JSONB;
    "#,
    // 5: emitted events by name, for a wait that starts after them
    // (docs/waits.md). Queued signals are found by `inbox_run`.
    r#"
    CREATE INDEX inbox_events ON inbox((body::jsonb->>'event'), seq) WHERE kind = 'event';
    "#,
    // 6: the outbox (notifications to send, written with the transition
    // that causes them; docs/notifications.md) and the idempotency keys of
    // starts (the run each started; deleted with it).
    r#"
    CREATE TABLE deliveries (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL,
        fifo_key TEXT,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        next_at BIGINT NOT NULL,
        lease_until BIGINT,
        error TEXT,
        updated_at BIGINT NOT NULL,
        body TEXT NOT NULL
    );
    CREATE INDEX deliveries_pending ON deliveries(seq) WHERE state = 'pending';
    CREATE INDEX deliveries_fifo ON deliveries(fifo_key, seq) WHERE state = 'pending' AND fifo_key IS NOT NULL;
    CREATE INDEX deliveries_run ON deliveries(run_id);
    CREATE TABLE start_keys (
        key TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        digest TEXT NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE INDEX start_keys_run ON start_keys(run_id);
    "#,
    // 7: a run's events of one transaction in one row (`event_rows`); the
    // `events` view lists them one per row, as the table did.
    r#"
    CREATE TABLE event_batches (
        run_id TEXT NOT NULL,
        first_seq BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        last_at BIGINT NOT NULL,
        events TEXT NOT NULL,
        PRIMARY KEY (run_id, first_seq)
    );
    INSERT INTO event_batches (run_id, first_seq, last_seq, last_at, events)
        SELECT run_id, seq, seq, at, json_build_array(json_build_array(seq, at, kind, step, item, data::json))::text
        FROM events;
    DROP TABLE events;
    CREATE VIEW events AS
        SELECT b.run_id, (e.value->>0)::bigint AS seq, (e.value->>1)::bigint AS at, e.value->>2 AS kind,
               e.value->>3 AS step, (e.value->>4)::integer AS item, (e.value->5)::text AS data
        FROM event_batches b CROSS JOIN LATERAL json_array_elements(b.events::json) AS e;
    "#,
    // 8: a number that grows with every change of a template, in the
    // change's own transaction (a trigger: any process, any statement), so
    // a template read can be answered from memory while it stays the same
    // (`weft_engine::template_cache`).
    r#"
    CREATE TABLE template_changes (id BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id), n BIGINT NOT NULL);
    INSERT INTO template_changes (n) VALUES (0);
    CREATE FUNCTION weft_template_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN UPDATE template_changes SET n = n + 1 WHERE id; RETURN NULL; END $$;
    CREATE TRIGGER templates_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON templates
        FOR EACH STATEMENT EXECUTE FUNCTION weft_template_changed();
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// An advisory-lock key of weft's migrations ("weft" in ASCII).
const LOCK: i64 = 0x7765_6674;

/// Brings the database to [`SCHEMA_VERSION`]: under a session advisory
/// lock (concurrent `CREATE TABLE IF NOT EXISTS` can collide), each
/// migration in a transaction with its version bump.
pub async fn migrate(c: &mut Client) -> Result<u32, StoreError> {
    c.execute("SELECT pg_advisory_lock($1)", &[&LOCK]).await.map_err(map_err)?;
    let r = migrate_locked(c, SCHEMA_VERSION).await;
    let unlocked = c.execute("SELECT pg_advisory_unlock($1)", &[&LOCK]).await.map_err(map_err);
    let v = r?;
    unlocked?;
    Ok(v)
}

/// Brings a fresh database to schema `version` only, as an older build
/// left it (to test the migrations after it).
#[cfg(test)]
pub(crate) async fn migrate_until(c: &mut Client, version: u32) -> Result<u32, StoreError> {
    migrate_locked(c, version).await
}

async fn migrate_locked(c: &mut Client, target: u32) -> Result<u32, StoreError> {
    c.batch_execute("CREATE TABLE IF NOT EXISTS weft_schema (version INTEGER NOT NULL)").await.map_err(map_err)?;
    loop {
        let tx = c.transaction().await.map_err(map_err)?;
        let found: i32 =
            tx.query_opt("SELECT version FROM weft_schema", &[]).await.map_err(map_err)?.map(|r| r.get(0)).unwrap_or(0);
        let found = found.max(0) as u32;
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew { found, supported: SCHEMA_VERSION });
        }
        if found >= target {
            tx.commit().await.map_err(map_err)?;
            return Ok(found);
        }
        tx.batch_execute(MIGRATIONS[found as usize]).await.map_err(map_err)?;
        if found == 0 {
            tx.execute("INSERT INTO weft_schema (version) VALUES (1)", &[]).await.map_err(map_err)?;
        } else {
            tx.execute("UPDATE weft_schema SET version = $1", &[&(found as i32 + 1)]).await.map_err(map_err)?;
        }
        tx.commit().await.map_err(map_err)?;
    }
}
