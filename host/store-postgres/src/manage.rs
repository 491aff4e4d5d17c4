//! Deleting finished runs with everything stored of them, and storing
//! runs exported from another store as they were. Each runs as a
//! transaction of its own on the writer's connection.

use weft_engine::store::RunExport;
use weft_engine::{RunId, StoreError};

use crate::read::{TERMINAL, wait_columns};
use crate::{Conn, Me, map_err};

/// Deletes the finished runs among `ids`; an artifact's bytes go once no
/// run refers to them, a plan once no run follows it.
pub(crate) async fn delete_runs(c: &Conn, ids: &[RunId]) -> Result<u32, StoreError> {
    let ids: Vec<&str> = ids.iter().map(RunId::as_str).collect();
    let sql = format!(
        "WITH gone AS (DELETE FROM runs WHERE id = ANY($1) AND state IN {TERMINAL} RETURNING id),
              inputs AS (DELETE FROM run_inputs WHERE id IN (SELECT id FROM gone) RETURNING plan),
              s AS (DELETE FROM steps WHERE run_id IN (SELECT id FROM gone)),
              a AS (DELETE FROM attempts WHERE run_id IN (SELECT id FROM gone)),
              e AS (DELETE FROM event_batches WHERE run_id IN (SELECT id FROM gone)),
              w AS (DELETE FROM waits WHERE run_id IN (SELECT id FROM gone)),
              i AS (DELETE FROM inbox WHERE run IN (SELECT id FROM gone)),
              d AS (DELETE FROM deliveries WHERE run_id IN (SELECT id FROM gone)),
              k AS (DELETE FROM start_keys WHERE run_id IN (SELECT id FROM gone)),
              arts AS (DELETE FROM artifacts WHERE run_id IN (SELECT id FROM gone) RETURNING sha256)
         SELECT (SELECT count(*) FROM gone),
                ARRAY(SELECT DISTINCT sha256 FROM arts), ARRAY(SELECT DISTINCT plan FROM inputs)"
    );
    c.client.batch_execute("BEGIN").await.map_err(map_err)?;
    let r = async {
        let row = c.client.query_one(&sql, &[&ids]).await.map_err(map_err)?;
        let n: i64 = row.get(0);
        let shas: Vec<String> = row.get(1);
        let plans: Vec<String> = row.get(2);
        c.client
            .execute(
                "DELETE FROM blobs b WHERE sha256 = ANY($1)
                   AND NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.sha256 = b.sha256)",
                &[&shas],
            )
            .await
            .map_err(map_err)?;
        Ok::<_, StoreError>((n as u32, plans))
    }
    .await;
    match r {
        Ok((n, plans)) => {
            c.client.batch_execute("COMMIT").await.map_err(map_err)?;
            // A plan no run follows any more goes too; a run created with it
            // meanwhile keeps it (its reference makes this delete fail).
            let _ = c
                .client
                .execute(
                    "DELETE FROM plans p WHERE sha256 = ANY($1)
                       AND NOT EXISTS (SELECT 1 FROM run_inputs i WHERE i.plan = p.sha256)",
                    &[&plans],
                )
                .await;
            Ok(n)
        }
        Err(e) => {
            let _ = c.client.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// Stores an exported run as it was (refused when its id exists). It is
/// nobody's: a worker claims it if it is unfinished.
pub(crate) async fn import_run(c: &Conn, _me: &Me, e: &RunExport) -> Result<(), StoreError> {
    c.client.batch_execute("BEGIN").await.map_err(map_err)?;
    let r = import(c, e).await;
    match r {
        Ok(()) => c.client.batch_execute("COMMIT").await.map_err(map_err),
        Err(err) => {
            let _ = c.client.batch_execute("ROLLBACK").await;
            Err(err)
        }
    }
}

async fn import(c: &Conn, e: &RunExport) -> Result<(), StoreError> {
    let r = &e.run;
    let id = r.id.as_str();
    let opt = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string());
    let err = |e: &Option<weft_engine::StepError>| e.as_ref().map(|e| serde_json::to_string(e).unwrap_or_default());
    let n = c
        .client
        .execute(
            "INSERT INTO runs (id, template, version, state, output, error, parent, depth, concurrency_key,
                created_at, updated_at, deadline_at, last_seq)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING",
            &[
                &id,
                &r.template,
                &r.version.map(|v| v as i32),
                &r.state.as_str(),
                &opt(&r.output),
                &err(&r.error),
                &r.parent.as_ref().map(|p| p.as_str()),
                &(r.depth as i32),
                &r.concurrency_key,
                &r.created_at,
                &r.updated_at,
                &r.deadline_at,
                &(r.last_seq.0 as i64),
            ],
        )
        .await
        .map_err(map_err)?;
    if n == 0 {
        return Err(StoreError::Conflict(format!("run {id} exists")));
    }
    let (sha, text) = crate::apply::plan_of(&r.definition);
    c.client
        .execute("INSERT INTO plans (sha256, definition) VALUES ($1, $2) ON CONFLICT DO NOTHING", &[&sha, &text])
        .await
        .map_err(map_err)?;
    c.client
        .execute(
            "INSERT INTO run_inputs (id, plan, input, traceparent, labels) VALUES ($1, $2, $3, $4, $5::text::jsonb)",
            &[&id, &sha, &r.input.to_string(), &r.traceparent, &crate::read::labels_text(&r.labels)],
        )
        .await
        .map_err(map_err)?;
    for (i, s) in r.steps.iter().enumerate() {
        c.client
            .execute(
                "INSERT INTO steps (run_id, name, idx, state, output, error, started_at, ended_at, next_attempt_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    &id,
                    &s.name,
                    &(i as i32),
                    &s.state.as_str(),
                    &opt(&s.output),
                    &err(&s.error),
                    &s.started_at,
                    &s.ended_at,
                    &s.next_attempt_at,
                ],
            )
            .await
            .map_err(map_err)?;
    }
    for a in &r.attempts {
        c.client
            .execute(
                "INSERT INTO attempts (run_id, step, item, attempt, state, lease_until, started_at, ended_at,
                    output, error, interruptions, blame, fuel, input)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                &[
                    &id,
                    &a.step,
                    &a.item.map(|i| i.0 as i32).unwrap_or(-1),
                    &(a.attempt.get() as i32),
                    &a.state.as_str(),
                    &a.lease_until,
                    &a.started_at,
                    &a.ended_at,
                    &opt(&a.output),
                    &err(&a.error),
                    &(a.interruptions as i32),
                    &(a.blame as i32),
                    &a.fuel.map(|f| f.min(i64::MAX as u64) as i64),
                    &opt(&a.input),
                ],
            )
            .await
            .map_err(map_err)?;
    }
    for row in crate::event_rows::rows_of(&e.events) {
        c.client
            .execute(
                "INSERT INTO event_batches (run_id, first_seq, last_seq, last_at, events) VALUES ($1, $2, $3, $4, $5)",
                &[&row.run, &row.first_seq, &row.last_seq, &row.last_at, &row.events],
            )
            .await
            .map_err(map_err)?;
    }
    for w in &r.waits {
        let (kind, event) = wait_columns(&w.kind);
        c.client
            .execute(
                "INSERT INTO waits (run_id, step, kind, event, spec, until, since) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[&id, &w.step, &kind, &event, &serde_json::to_string(&w.kind).unwrap_or_default(), &w.until, &w.since],
            )
            .await
            .map_err(map_err)?;
    }
    crate::outbox::import(&c.client, &e.deliveries, e.start_key.as_ref()).await?;
    for (a, data) in &e.artifacts {
        c.client
            .execute("INSERT INTO blobs (sha256, data) VALUES ($1, $2) ON CONFLICT DO NOTHING", &[&a.sha256, data])
            .await
            .map_err(map_err)?;
        c.client
            .execute(
                "INSERT INTO artifacts (run_id, name, mime, size, sha256, step, item, attempt, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    &id,
                    &a.name,
                    &a.mime,
                    &(a.size.min(i64::MAX as u64) as i64),
                    &a.sha256,
                    &a.step,
                    &a.item.map(|i| i.0 as i32).unwrap_or(-1),
                    &(a.attempt.get() as i32),
                    &a.created_at,
                ],
            )
            .await
            .map_err(map_err)?;
    }
    Ok(())
}
