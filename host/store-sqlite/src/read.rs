//! Queries and row decoding.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;
use weft_engine::store::*;
use weft_engine::{AttemptNo, ItemIndex, RunId, Seq, StepError};

use crate::map_err;

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

pub(crate) use weft_engine::stored::value;

fn json(s: Option<String>) -> Result<Option<Value>, StoreError> {
    s.map(|s| value(&s)).transpose()
}

fn json_req(s: String) -> Result<Value, StoreError> {
    value(&s)
}

fn error(s: Option<String>) -> Result<Option<StepError>, StoreError> {
    s.map(|s| serde_json::from_str(&s).map_err(corrupt)).transpose()
}

fn id(s: String) -> Result<RunId, StoreError> {
    s.parse().map_err(corrupt)
}

fn parse<T: std::str::FromStr>(s: String) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    s.parse().map_err(corrupt)
}

fn item(i: i64) -> Option<ItemIndex> {
    (i >= 0).then_some(ItemIndex(i as u32))
}

fn attempt_no(n: u32) -> Result<AttemptNo, StoreError> {
    AttemptNo::new(n).ok_or_else(|| corrupt("attempt 0"))
}

type Raw<T> = Result<T, rusqlite::Error>;

pub fn run(c: &Connection, run_id: &RunId) -> Result<Option<RunRecord>, StoreError> {
    #[allow(clippy::type_complexity)]
    let row = c
        .prepare_cached(
            "SELECT r.template, r.version, r.state, p.definition, p.input, r.output, r.error, r.parent, r.depth,
                    r.concurrency_key, r.created_at, MAX(r.updated_at, COALESCE(e.at, 0)), r.deadline_at,
                    MAX(r.last_seq, COALESCE(e.seq, 0)), p.traceparent, p.labels
             FROM runs r JOIN run_plans p ON p.id = r.id
             LEFT JOIN events e ON e.run_id = r.id AND e.seq = (SELECT MAX(seq) FROM events WHERE run_id = r.id)
             WHERE r.id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([run_id.as_str()], |r: &Row<'_>| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<u32>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                    r.get::<_, Option<String>>(7)?,
                    r.get::<_, u32>(8)?,
                    r.get::<_, Option<String>>(9)?,
                    (r.get::<_, i64>(10)?, r.get::<_, i64>(11)?, r.get::<_, Option<i64>>(12)?, r.get::<_, i64>(13)?),
                    (r.get::<_, Option<String>>(14)?, r.get::<_, Option<String>>(15)?),
                ))
            })
            .optional()
        })
        .map_err(map_err)?;
    let Some((
        template,
        version,
        state,
        definition,
        input,
        output,
        err,
        parent,
        depth,
        ckey,
        (created, updated, deadline, last_seq),
        (traceparent, labels),
    )) = row
    else {
        return Ok(None);
    };
    let steps = c
        .prepare_cached(
            // A step's attempts are counted, not kept on its row: a counter
            // there made every item's claim rewrite the step's row.
            "SELECT s.name, s.state,
                    (SELECT COUNT(*) FROM attempts a WHERE a.run_id = s.run_id AND a.step = s.name),
                    s.output, s.error, s.started_at, s.ended_at, s.next_attempt_at
             FROM steps s WHERE s.run_id = ?1 ORDER BY s.idx",
        )
        .and_then(|mut s| {
            s.query_map([run_id.as_str()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, u32>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<i64>>(5)?,
                    r.get::<_, Option<i64>>(6)?,
                    r.get::<_, Option<i64>>(7)?,
                ))
            })?
            .collect::<Raw<Vec<_>>>()
        })
        .map_err(map_err)?
        .into_iter()
        .map(|(name, state, attempts, output, err, started_at, ended_at, next_attempt_at)| {
            Ok(StepRecord {
                name,
                state: parse(state)?,
                attempts,
                output: json(output)?,
                error: error(err)?,
                started_at,
                ended_at,
                next_attempt_at,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let mut attempts = c
        .prepare_cached(
            // In key order, sorted by step position below: a join with
            // `steps` to order them would look up the step's row once per
            // attempt, and a finished `for_each` step's row carries every
            // item's output (read whole, overflow pages and all, per lookup).
            "SELECT step, item, attempt, state, lease_until, started_at, ended_at, output, error,
                    interruptions, fuel, blame, input
             FROM attempts WHERE run_id = ?1 ORDER BY step, item, attempt",
        )
        .and_then(|mut s| {
            s.query_map([run_id.as_str()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, u32>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, Option<i64>>(6)?,
                    r.get::<_, Option<String>>(7)?,
                    r.get::<_, Option<String>>(8)?,
                    r.get::<_, u32>(9)?,
                    r.get::<_, Option<i64>>(10)?,
                    r.get::<_, u32>(11)?,
                    r.get::<_, Option<String>>(12)?,
                ))
            })?
            .collect::<Raw<Vec<_>>>()
        })
        .map_err(map_err)?
        .into_iter()
        .map(
            |(
                step,
                it,
                n,
                state,
                lease_until,
                started_at,
                ended_at,
                output,
                err,
                interruptions,
                fuel,
                blame,
                input,
            )| {
                Ok(AttemptRecord {
                    step,
                    item: item(it),
                    attempt: attempt_no(n)?,
                    state: parse(state)?,
                    lease_until,
                    started_at,
                    ended_at,
                    output: json(output)?,
                    error: error(err)?,
                    interruptions,
                    blame,
                    fuel: fuel.map(|f| f.max(0) as u64),
                    input: json(input)?,
                })
            },
        )
        .collect::<Result<Vec<_>, StoreError>>()?;
    // Steps in definition order (a stable sort keeps item and attempt order).
    let position: std::collections::HashMap<&str, usize> =
        steps.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
    attempts.sort_by_key(|a| position.get(a.step.as_str()).copied().unwrap_or(usize::MAX));
    Ok(Some(RunRecord {
        id: run_id.clone(),
        template,
        version,
        state: parse(state)?,
        definition: std::sync::Arc::new(json_req(definition)?),
        input: json_req(input)?,
        output: json(output)?,
        error: error(err)?,
        parent: parent.map(id).transpose()?,
        depth,
        concurrency_key: ckey,
        created_at: created,
        updated_at: updated,
        deadline_at: deadline,
        traceparent,
        labels: labels_of(labels)?,
        steps,
        attempts,
        last_seq: Seq(last_seq as u64),
        waits: crate::outside::run_waits(c, run_id)?,
        artifacts: artifacts(c, run_id)?,
    }))
}

/// A run's state, or `None` when there is no such run.
pub fn run_state(c: &Connection, run: &RunId) -> Result<Option<weft_engine::RunState>, StoreError> {
    let s: Option<String> = c
        .prepare_cached("SELECT state FROM runs WHERE id = ?1")
        .and_then(|mut s| s.query_row([run.as_str()], |r| r.get(0)).optional())
        .map_err(map_err)?;
    s.map(parse).transpose()
}

pub fn list_runs(c: &Connection, f: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
    let limit = f.limit.map(|l| l as i64).unwrap_or(-1);
    let rows = c
        .prepare_cached(
            "SELECT runs.id, template, version, state, parent, created_at,
                    MAX(updated_at, COALESCE((SELECT at FROM events WHERE run_id = runs.id ORDER BY seq DESC LIMIT 1), 0)),
                    p.labels, runs.error
             FROM runs JOIN run_plans p ON p.id = runs.id
             WHERE (?1 IS NULL OR state = ?1) AND (?2 IS NULL OR template = ?2) AND (?4 IS NULL OR parent = ?4)
               AND (?5 IS NULL OR runs.id < ?5) AND (?6 IS NULL OR concurrency_key = ?6)
               AND (?8 IS NULL OR instr(lower(template), lower(?8)) > 0)
               AND (?9 IS NULL OR created_at >= ?9) AND (?10 IS NULL OR created_at < ?10)
               AND (?7 IS NULL OR NOT EXISTS (
                     SELECT 1 FROM json_each(?7) f
                     WHERE p.labels IS NULL OR json_extract(p.labels, '$.\"' || f.key || '\"') IS NOT f.value))
             ORDER BY runs.id DESC LIMIT ?3",
        )
        .and_then(|mut s| {
            let parent = f.parent.as_ref().map(|p| p.as_str());
            let before = f.before.as_ref().map(|b| b.as_str());
            let labels = labels_text(&f.labels);
            let args = params![
                f.state.map(|s| s.as_str()),
                f.template,
                limit,
                parent,
                before,
                f.key,
                labels,
                f.template_contains,
                f.created_from,
                f.created_until
            ];
            s.query_map(args, |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<u32>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, i64>(6)?,
                    r.get::<_, Option<String>>(7)?,
                    r.get::<_, Option<String>>(8)?,
                ))
            })?
            .collect::<Raw<Vec<_>>>()
        })
        .map_err(map_err)?;
    rows.into_iter()
        .map(|(rid, template, version, state, parent, created_at, updated_at, labels, err)| {
            Ok(RunSummary {
                id: id(rid)?,
                template,
                version,
                state: parse(state)?,
                parent: parent.map(id).transpose()?,
                created_at,
                updated_at,
                labels: labels_of(labels)?,
                error: error(err)?,
            })
        })
        .collect()
}

/// Labels as stored: a JSON object, `NULL` when there are none.
pub(crate) fn labels_text(labels: &weft_engine::Labels) -> Option<String> {
    (!labels.is_empty()).then(|| serde_json::to_string(labels).expect("labels serialize"))
}

fn labels_of(text: Option<String>) -> Result<weft_engine::Labels, StoreError> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(format!("labels: {e}: {t}"))))
        .transpose()
        .map(Option::unwrap_or_default)
}

pub fn events_after(c: &Connection, run: &RunId, after: Seq, limit: usize) -> Result<Vec<EventRecord>, StoreError> {
    let rows = c
        .prepare_cached(
            "SELECT seq, at, kind, step, item, data FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )
        .and_then(|mut s| {
            s.query_map(params![run.as_str(), after.0 as i64, limit.min(i64::MAX as usize) as i64], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                    r.get::<_, String>(5)?,
                ))
            })?
            .collect::<Raw<Vec<_>>>()
        })
        .map_err(map_err)?;
    rows.into_iter()
        .map(|(seq, at, kind, step, it, data)| {
            Ok(NewEvent {
                run: run.clone(),
                seq: Seq(seq as u64),
                at,
                kind,
                step,
                item: it.and_then(item),
                data: json_req(data)?,
            })
        })
        .collect()
}

pub fn unfinished_runs(c: &Connection) -> Result<Vec<RunId>, StoreError> {
    let rows = c
        .prepare_cached(
            // Through the `runs_state` index: the states that are not terminal.
            "SELECT id FROM runs WHERE state IN ('submitted', 'working', 'input-required', 'auth-required') ORDER BY id",
        )
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect::<Raw<Vec<_>>>())
        .map_err(map_err)?;
    rows.into_iter().map(id).collect()
}

pub fn expired_leases(c: &Connection, now_ms: i64) -> Result<Vec<ExpiredLease>, StoreError> {
    let rows = c
        .prepare_cached(
            // The unfinished runs (through `runs_state`), then their attempts.
            "SELECT a.run_id, a.step, a.item, a.attempt, a.lease_until FROM runs r JOIN attempts a ON a.run_id = r.id
             WHERE r.state IN ('submitted', 'working', 'input-required', 'auth-required')
               AND a.state = 'running' AND a.lease_until < ?1
             ORDER BY a.run_id, a.step, a.item",
        )
        .and_then(|mut s| {
            s.query_map([now_ms], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, u32>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })?
            .collect::<Raw<Vec<_>>>()
        })
        .map_err(map_err)?;
    rows.into_iter()
        .map(|(run, step, it, n, lease_until)| {
            Ok(ExpiredLease { run: id(run)?, step, item: item(it), attempt: attempt_no(n)?, lease_until })
        })
        .collect()
}

fn template_row(r: &Row<'_>) -> Raw<(String, u32, String, i64)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

fn to_template(
    (name, version, definition, created_at): (String, u32, String, i64),
) -> Result<TemplateRecord, StoreError> {
    Ok(TemplateRecord { name, version, definition: json_req(definition)?, created_at })
}

/// The number every change of a template makes grow (schema 15); `None`
/// if its row was deleted by hand (templates are then read each time).
pub fn template_changes(c: &Connection) -> Result<Option<i64>, StoreError> {
    c.prepare_cached("SELECT n FROM template_changes WHERE id = 1")
        .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
        .map_err(map_err)
}

pub fn template(c: &Connection, name: &str, version: Option<u32>) -> Result<Option<TemplateRecord>, StoreError> {
    let row = c
        .prepare_cached(
            "SELECT name, version, definition, created_at FROM templates
             WHERE name = ?1 AND (?2 IS NULL OR version = ?2) ORDER BY version DESC LIMIT 1",
        )
        .and_then(|mut s| s.query_row(params![name, version], template_row).optional())
        .map_err(map_err)?;
    row.map(to_template).transpose()
}

pub fn list_templates(c: &Connection) -> Result<Vec<TemplateRecord>, StoreError> {
    let rows = c
        .prepare_cached(
            "SELECT t.name, t.version, t.definition, t.created_at FROM templates t
             WHERE t.version = (SELECT MAX(version) FROM templates WHERE name = t.name) ORDER BY t.name",
        )
        .and_then(|mut s| s.query_map([], template_row)?.collect::<Raw<Vec<_>>>())
        .map_err(map_err)?;
    rows.into_iter().map(to_template).collect()
}

/// A run's artifacts, by name.
pub fn artifacts(c: &Connection, run: &RunId) -> Result<Vec<weft_engine::store::ArtifactRecord>, StoreError> {
    artifact_rows(c, run, None)
}

/// One artifact and its bytes.
pub fn artifact(
    c: &Connection,
    run: &RunId,
    name: &str,
) -> Result<Option<(weft_engine::store::ArtifactRecord, Vec<u8>)>, StoreError> {
    let Some(a) = artifact_rows(c, run, Some(name))?.pop() else { return Ok(None) };
    let data: Option<Vec<u8>> = c
        .prepare_cached("SELECT data FROM blobs WHERE sha256 = ?1")
        .and_then(|mut s| s.query_row([&a.sha256], |r| r.get(0)).optional())
        .map_err(map_err)?;
    let data = data.ok_or_else(|| StoreError::Corrupt(format!("the bytes of artifact {name} of {run} are missing")))?;
    Ok(Some((a, data)))
}

fn artifact_rows(
    c: &Connection,
    run: &RunId,
    name: Option<&str>,
) -> Result<Vec<weft_engine::store::ArtifactRecord>, StoreError> {
    let rows = c
        .prepare_cached(
            "SELECT name, mime, size, sha256, step, item, attempt, created_at FROM artifacts
             WHERE run_id = ?1 AND (?2 IS NULL OR name = ?2) ORDER BY name",
        )
        .and_then(|mut s| {
            s.query_map(rusqlite::params![run.as_str(), name], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, u32>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })?
            .collect::<Raw<Vec<_>>>()
        })
        .map_err(map_err)?;
    rows.into_iter()
        .map(|(name, mime, size, sha256, step, it, n, created_at)| {
            Ok(weft_engine::store::ArtifactRecord {
                run: run.clone(),
                name,
                mime,
                size: size.max(0) as u64,
                sha256,
                step,
                item: item(it),
                attempt: attempt_no(n)?,
                created_at,
            })
        })
        .collect()
}
