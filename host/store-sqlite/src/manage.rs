//! Keeping a store bounded and moving it: deleting finished runs with
//! everything stored of them (`weft runs delete`, `weft runs prune`, the
//! retention reaper), and storing runs and templates exported from another
//! store as they were (`weft store copy`). The writes run on the writer's
//! connection, in its transactions (see `writer::Op`).

use rusqlite::{Connection, params};
use weft_engine::store::{RunExport, RunFilter, TemplateRecord, Write};
use weft_engine::{RunId, StoreError};

use crate::map_err;

/// The terminal states, as stored (the `runs_ended` index's condition).
pub(crate) const TERMINAL: &str = "('completed', 'failed', 'canceled', 'rejected')";

/// Deletes the finished runs among `ids` and what belongs to them; an
/// artifact's bytes go once no run refers to them. Returns how many runs
/// were deleted.
pub(crate) fn delete_runs(c: &Connection, ids: &[RunId]) -> Result<u32, StoreError> {
    let mut deleted = 0;
    for id in ids {
        let id = id.as_str();
        let n = c
            .prepare_cached(&format!("DELETE FROM runs WHERE id = ?1 AND state IN {TERMINAL}"))
            .and_then(|mut s| s.execute([id]))
            .map_err(map_err)?;
        if n == 0 {
            continue;
        }
        deleted += 1;
        for sql in [
            "DELETE FROM run_plans WHERE id = ?1",
            "DELETE FROM steps WHERE run_id = ?1",
            "DELETE FROM attempts WHERE run_id = ?1",
            "DELETE FROM events WHERE run_id = ?1",
            "DELETE FROM waits WHERE run_id = ?1",
            "DELETE FROM inbox WHERE json_extract(body, '$.run') = ?1",
            "DELETE FROM deliveries WHERE run_id = ?1",
            "DELETE FROM start_keys WHERE run_id = ?1",
        ] {
            c.prepare_cached(sql).and_then(|mut s| s.execute([id])).map_err(map_err)?;
        }
        let shas: Vec<String> = c
            .prepare_cached("DELETE FROM artifacts WHERE run_id = ?1 RETURNING sha256")
            .and_then(|mut s| s.query_map([id], |r| r.get(0))?.collect())
            .map_err(map_err)?;
        for sha in shas {
            c.prepare_cached(
                "DELETE FROM blobs WHERE sha256 = ?1 AND NOT EXISTS (SELECT 1 FROM artifacts WHERE sha256 = ?1)",
            )
            .and_then(|mut s| s.execute([sha]))
            .map_err(map_err)?;
        }
    }
    Ok(deleted)
}

/// Finished runs that ended before `before_ms`, oldest first.
pub(crate) fn finished_before(c: &Connection, before_ms: i64, f: &RunFilter) -> Result<Vec<RunId>, StoreError> {
    let limit = f.limit.map(|l| l.min(i64::MAX as usize) as i64).unwrap_or(-1);
    let rows: Vec<String> = c
        .prepare_cached(&format!(
            "SELECT id FROM runs WHERE state IN {TERMINAL} AND updated_at < ?1 AND (?2 IS NULL OR state = ?2)
               AND (?3 IS NULL OR template = ?3)
             ORDER BY updated_at, id LIMIT ?4"
        ))
        .and_then(|mut s| {
            s.query_map(params![before_ms, f.state.map(|s| s.as_str()), f.template, limit], |r| r.get(0))?.collect()
        })
        .map_err(map_err)?;
    rows.into_iter().map(|s| s.parse().map_err(|e| StoreError::Corrupt(format!("{e}")))).collect()
}

/// Stores an exported run as it was: its row, plan, steps, attempts,
/// events, waits and artifacts. A run of that id exists: refused.
pub(crate) fn import_run(c: &Connection, e: &RunExport) -> Result<(), StoreError> {
    let r = &e.run;
    let id = r.id.as_str();
    let opt_json = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string());
    let err_json =
        |e: &Option<weft_engine::StepError>| e.as_ref().map(|e| serde_json::to_string(e).unwrap_or_default());
    let n = c
        .prepare_cached(
            "INSERT OR IGNORE INTO runs (id, template, version, state, output, error, parent, depth,
                concurrency_key, created_at, updated_at, deadline_at, last_seq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                r.template,
                r.version,
                r.state.as_str(),
                opt_json(&r.output),
                err_json(&r.error),
                r.parent.as_ref().map(|p| p.as_str().to_owned()),
                r.depth,
                r.concurrency_key,
                r.created_at,
                r.updated_at,
                r.deadline_at,
                r.last_seq.0 as i64,
            ])
        })
        .map_err(map_err)?;
    if n == 0 {
        return Err(StoreError::Conflict(format!("run {id} exists")));
    }
    c.prepare_cached("INSERT INTO run_plans (id, definition, input, traceparent, labels) VALUES (?1, ?2, ?3, ?4, ?5)")
        .and_then(|mut s| {
            let labels = crate::read::labels_text(&r.labels);
            s.execute(params![id, r.definition.to_string(), r.input.to_string(), r.traceparent, labels])
        })
        .map_err(map_err)?;
    for (i, st) in r.steps.iter().enumerate() {
        c.prepare_cached(
            "INSERT INTO steps (run_id, name, idx, state, output, error, started_at, ended_at, next_attempt_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                st.name,
                i as i64,
                st.state.as_str(),
                opt_json(&st.output),
                err_json(&st.error),
                st.started_at,
                st.ended_at,
                st.next_attempt_at
            ])
        })
        .map_err(map_err)?;
    }
    for a in &r.attempts {
        c.prepare_cached(
            "INSERT INTO attempts (run_id, step, item, attempt, state, lease_until, started_at, ended_at, output,
                error, interruptions, blame, fuel, input)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                a.step,
                a.item.map(|i| i.0 as i64).unwrap_or(-1),
                a.attempt.get(),
                a.state.as_str(),
                a.lease_until,
                a.started_at,
                a.ended_at,
                opt_json(&a.output),
                err_json(&a.error),
                a.interruptions,
                a.blame,
                a.fuel.map(|f| f.min(i64::MAX as u64) as i64),
                opt_json(&a.input),
            ])
        })
        .map_err(map_err)?;
    }
    for ev in &e.events {
        c.prepare_cached(
            "INSERT INTO events (run_id, seq, at, kind, step, item, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                ev.seq.0 as i64,
                ev.at,
                ev.kind,
                ev.step,
                ev.item.map(|i| i.0 as i64),
                ev.data.to_string()
            ])
        })
        .map_err(map_err)?;
    }
    for w in &r.waits {
        crate::outside::apply(c, &Write::OpenWait(w.clone()))?;
    }
    crate::outbox::import(c, &e.deliveries, e.start_key.as_ref())?;
    for (a, data) in &e.artifacts {
        c.prepare_cached("INSERT OR IGNORE INTO blobs (sha256, data) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![a.sha256, &data[..]]))
            .map_err(map_err)?;
        c.prepare_cached(
            "INSERT INTO artifacts (run_id, name, mime, size, sha256, step, item, attempt, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                a.name,
                a.mime,
                a.size as i64,
                a.sha256,
                a.step,
                a.item.map(|i| i.0 as i64).unwrap_or(-1),
                a.attempt.get(),
                a.created_at
            ])
        })
        .map_err(map_err)?;
    }
    Ok(())
}

/// Stores a template version as it was.
pub(crate) fn import_template(c: &Connection, t: &TemplateRecord) -> Result<(), StoreError> {
    let n = c
        .execute(
            "INSERT OR IGNORE INTO templates (name, version, definition, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![t.name, t.version, t.definition.to_string(), t.created_at],
        )
        .map_err(map_err)?;
    if n == 0 {
        return Err(StoreError::Conflict(format!("template {} version {} exists", t.name, t.version)));
    }
    Ok(())
}

/// Every version of a template, oldest first.
pub(crate) fn template_versions(c: &Connection, name: &str) -> Result<Vec<TemplateRecord>, StoreError> {
    let rows: Vec<(String, u32, String, i64)> = c
        .prepare_cached("SELECT name, version, definition, created_at FROM templates WHERE name = ?1 ORDER BY version")
        .and_then(|mut s| s.query_map([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect())
        .map_err(map_err)?;
    rows.into_iter()
        .map(|(name, version, d, created_at)| {
            Ok(TemplateRecord { name, version, definition: crate::read::value(&d)?, created_at })
        })
        .collect()
}
