//! Queries and row decoding. A run's record takes one round trip: its
//! queries are sent pipelined on one connection.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use weft_engine::store::*;
use weft_engine::stored::value;
use weft_engine::{AttemptNo, ItemIndex, RunId, RunState, Seq, StepError};

use crate::map_err;

/// The states a run can still leave, as a SQL list.
pub(crate) const UNFINISHED: &str = "('submitted', 'working', 'input-required', 'auth-required')";
/// The terminal states, as a SQL list.
pub(crate) const TERMINAL: &str = "('completed', 'failed', 'canceled', 'rejected')";

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

fn json(s: Option<String>) -> Result<Option<serde_json::Value>, StoreError> {
    s.map(|s| value(&s)).transpose()
}

fn error(s: Option<String>) -> Result<Option<StepError>, StoreError> {
    s.map(|s| serde_json::from_str(&s).map_err(corrupt)).transpose()
}

pub(crate) fn id(s: String) -> Result<RunId, StoreError> {
    s.parse().map_err(corrupt)
}

fn parse<T: std::str::FromStr>(s: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    s.parse().map_err(corrupt)
}

fn item(i: i32) -> Option<ItemIndex> {
    (i >= 0).then_some(ItemIndex(i as u32))
}

fn attempt_no(n: i32) -> Result<AttemptNo, StoreError> {
    AttemptNo::new(n.max(0) as u32).ok_or_else(|| corrupt("attempt 0"))
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(format!("{e}: {s}")))
}

/// A wait's `kind` and `event` columns.
pub(crate) fn wait_columns(k: &WaitKind) -> (&'static str, Option<String>) {
    let (kind, event) = k.index_columns();
    (kind, event.map(str::to_string))
}

pub(crate) async fn query<C: GenericClient>(
    c: &C,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let st = c.prepare_cached(sql).await.map_err(map_err)?;
    c.query(&st, params).await.map_err(map_err)
}

/// The records of runs `ids` (those that exist, in no particular order):
/// five queries, pipelined, however many runs — a worker reads the runs it
/// just claimed at once instead of one by one.
pub async fn runs<C: GenericClient>(c: &C, ids: &[RunId]) -> Result<Vec<RunRecord>, StoreError> {
    use std::collections::HashMap;
    if ids.is_empty() {
        return Ok(vec![]);
    }
    let list: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
    let by_run: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&list];
    let (heads, steps, attempts, waits, artifacts) = futures::try_join!(
        query(
            c,
            "SELECT r.id, r.template, r.version, r.state, pl.definition, ri.input, r.output, r.error, r.parent,
                    r.depth, r.concurrency_key, r.created_at, GREATEST(r.updated_at, COALESCE(e.at, 0)),
                    r.deadline_at, GREATEST(r.last_seq, COALESCE(e.seq, 0)), pl.sha256, ri.traceparent,
                    ri.labels::text
             FROM runs r JOIN run_inputs ri ON ri.id = r.id JOIN plans pl ON pl.sha256 = ri.plan
             LEFT JOIN LATERAL (SELECT last_at AS at, last_seq AS seq FROM event_batches
                                WHERE run_id = r.id ORDER BY first_seq DESC LIMIT 1) e ON true
             WHERE r.id = ANY($1)",
            &by_run,
        ),
        query(
            c,
            "SELECT s.run_id, s.name, s.state,
                    (SELECT COUNT(*) FROM attempts a WHERE a.run_id = s.run_id AND a.step = s.name),
                    s.output, s.error, s.started_at, s.ended_at, s.next_attempt_at
             FROM steps s WHERE s.run_id = ANY($1) ORDER BY s.run_id, s.idx",
            &by_run,
        ),
        query(
            c,
            "SELECT run_id, step, item, attempt, state, lease_until, started_at, ended_at, output, error,
                    interruptions, fuel, blame, input
             FROM attempts WHERE run_id = ANY($1) ORDER BY run_id, step, item, attempt",
            &by_run,
        ),
        query(
            c,
            "SELECT w.run_id, w.step, w.spec, w.until, w.since FROM waits w
             JOIN steps s ON s.run_id = w.run_id AND s.name = w.step WHERE w.run_id = ANY($1)
             ORDER BY w.run_id, s.idx",
            &by_run,
        ),
        query(
            c,
            "SELECT run_id, name, mime, size, sha256, step, item, attempt, created_at FROM artifacts
             WHERE run_id = ANY($1) ORDER BY run_id, name",
            &by_run,
        ),
    )?;
    let mut steps_of: HashMap<String, Vec<StepRecord>> = HashMap::new();
    for r in &steps {
        steps_of.entry(r.get(0)).or_default().push(StepRecord {
            name: r.get(1),
            state: parse(r.get(2))?,
            attempts: r.get::<_, i64>(3) as u32,
            output: json(r.get(4))?,
            error: error(r.get(5))?,
            started_at: r.get(6),
            ended_at: r.get(7),
            next_attempt_at: r.get(8),
        });
    }
    let mut attempts_of: HashMap<String, Vec<AttemptRecord>> = HashMap::new();
    for r in &attempts {
        attempts_of.entry(r.get(0)).or_default().push(AttemptRecord {
            step: r.get(1),
            item: item(r.get(2)),
            attempt: attempt_no(r.get(3))?,
            state: parse(r.get(4))?,
            lease_until: r.get(5),
            started_at: r.get(6),
            ended_at: r.get(7),
            output: json(r.get(8))?,
            error: error(r.get(9))?,
            interruptions: r.get::<_, i32>(10).max(0) as u32,
            fuel: r.get::<_, Option<i64>>(11).map(|f| f.max(0) as u64),
            blame: r.get::<_, i32>(12).max(0) as u32,
            input: json(r.get(13))?,
        });
    }
    let mut waits_of: HashMap<String, Vec<WaitRecord>> = HashMap::new();
    for r in &waits {
        let run = id(r.get(0))?;
        waits_of.entry(r.get(0)).or_default().push(WaitRecord {
            run,
            step: r.get(1),
            kind: from_json(r.get(2))?,
            until: r.get(3),
            since: r.get(4),
        });
    }
    let mut artifacts_of: HashMap<String, Vec<ArtifactRecord>> = HashMap::new();
    for r in &artifacts {
        artifacts_of.entry(r.get(0)).or_default().push(artifact_of(&id(r.get(0))?, r, 1)?);
    }
    // Runs of one plan share its parsed definition.
    let mut plans: HashMap<String, std::sync::Arc<serde_json::Value>> = HashMap::new();
    let mut out = Vec::with_capacity(heads.len());
    for h in &heads {
        let rid: String = h.get(0);
        let sha: String = h.get(15);
        let definition = match plans.get(&sha) {
            Some(d) => d.clone(),
            None => {
                let d = std::sync::Arc::new(value(h.get(4))?);
                plans.insert(sha, d.clone());
                d
            }
        };
        let steps = steps_of.remove(&rid).unwrap_or_default();
        let mut attempts = attempts_of.remove(&rid).unwrap_or_default();
        let position: HashMap<&str, usize> = steps.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
        attempts.sort_by_key(|a| position.get(a.step.as_str()).copied().unwrap_or(usize::MAX));
        out.push(RunRecord {
            id: id(rid.clone())?,
            template: h.get(1),
            version: h.get::<_, Option<i32>>(2).map(|v| v.max(0) as u32),
            state: parse(h.get(3))?,
            definition,
            input: value(h.get(5))?,
            output: json(h.get(6))?,
            error: error(h.get(7))?,
            parent: h.get::<_, Option<String>>(8).map(id).transpose()?,
            depth: h.get::<_, i32>(9).max(0) as u32,
            concurrency_key: h.get(10),
            created_at: h.get(11),
            updated_at: h.get(12),
            deadline_at: h.get(13),
            traceparent: h.get(16),
            labels: labels_of(h.get(17))?,
            steps,
            attempts,
            last_seq: Seq(h.get::<_, i64>(14).max(0) as u64),
            waits: waits_of.remove(&rid).unwrap_or_default(),
            artifacts: artifacts_of.remove(&rid).unwrap_or_default(),
        });
    }
    Ok(out)
}

/// A run's state, or `None` when there is no such run.
pub async fn run_state<C: GenericClient>(c: &C, run: &RunId) -> Result<Option<RunState>, StoreError> {
    let rows = query(c, "SELECT state FROM runs WHERE id = $1", &[&run.as_str()]).await?;
    rows.first().map(|r| parse(r.get(0))).transpose()
}

/// The filter's conditions (parameters $1..$6) and limit ($7).
const FILTER: &str = "($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR template = $2)
    AND ($3::text IS NULL OR parent = $3) AND ($4::text IS NULL OR id < $4)
    AND ($5::text IS NULL OR concurrency_key = $5)
    AND ($6::text IS NULL OR (SELECT ri.labels FROM run_inputs ri WHERE ri.id = runs.id) @> $6::text::jsonb)
    AND ($7::text IS NULL OR strpos(lower(template), lower($7)) > 0)
    AND ($8::bigint IS NULL OR created_at >= $8) AND ($9::bigint IS NULL OR created_at < $9)";

/// Labels as stored: a JSON object, `NULL` when there are none.
pub(crate) fn labels_text(labels: &weft_engine::Labels) -> Option<String> {
    (!labels.is_empty()).then(|| serde_json::to_string(labels).expect("labels serialize"))
}

fn labels_of(text: Option<String>) -> Result<weft_engine::Labels, StoreError> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(format!("labels: {e}: {t}"))))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// The nine parameters of [`FILTER`], as a filter fills them.
struct FilterArgs<'a> {
    f: &'a RunFilter,
    state: Option<&'static str>,
    parent: Option<&'a str>,
    before: Option<&'a str>,
    labels: Option<String>,
}

impl<'a> FilterArgs<'a> {
    fn of(f: &'a RunFilter) -> Self {
        FilterArgs {
            f,
            state: f.state.map(|s| s.as_str()),
            parent: f.parent.as_ref().map(|p| p.as_str()),
            before: f.before.as_ref().map(|b| b.as_str()),
            labels: labels_text(&f.labels),
        }
    }

    fn params(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
        vec![
            &self.state,
            &self.f.template,
            &self.parent,
            &self.before,
            &self.f.key,
            &self.labels,
            &self.f.template_contains,
            &self.f.created_from,
            &self.f.created_until,
        ]
    }
}

pub async fn list_runs<C: GenericClient>(c: &C, f: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
    let limit = f.limit.map(|l| l.min(i64::MAX as usize) as i64);
    let args = FilterArgs::of(f);
    let mut params = args.params();
    params.push(&limit);
    let rows = query(
        c,
        &format!(
            "SELECT id, template, version, state, parent, created_at,
                    GREATEST(updated_at, COALESCE((SELECT last_at FROM event_batches WHERE run_id = runs.id
                                                   ORDER BY first_seq DESC LIMIT 1), 0)),
                    (SELECT ri.labels::text FROM run_inputs ri WHERE ri.id = runs.id), error
             FROM runs WHERE {FILTER} ORDER BY id DESC LIMIT $10"
        ),
        &params,
    )
    .await?;
    rows.iter()
        .map(|r| {
            Ok(RunSummary {
                id: id(r.get(0))?,
                template: r.get(1),
                version: r.get::<_, Option<i32>>(2).map(|v| v.max(0) as u32),
                state: parse(r.get(3))?,
                parent: r.get::<_, Option<String>>(4).map(id).transpose()?,
                created_at: r.get(5),
                updated_at: r.get(6),
                labels: labels_of(r.get(7))?,
                error: error(r.get(8))?,
            })
        })
        .collect()
}

pub async fn count_runs<C: GenericClient>(c: &C, f: &RunFilter) -> Result<u64, StoreError> {
    let args = FilterArgs::of(f);
    let rows = query(c, &format!("SELECT COUNT(*) FROM runs WHERE {FILTER}"), &args.params()).await?;
    Ok(rows.first().map(|r| r.get::<_, i64>(0)).unwrap_or(0).max(0) as u64)
}

pub async fn events_after<C: GenericClient>(
    c: &C,
    run: &RunId,
    after: Seq,
    limit: usize,
) -> Result<Vec<EventRecord>, StoreError> {
    // The rows from the one holding seq `after + 1` (the last that starts
    // at or before it, which may end before it), found by an index probe;
    // one row more than `limit`, since that first row may hold none.
    let rows = query(
        c,
        "SELECT events FROM event_batches
         WHERE run_id = $1 AND first_seq >= COALESCE((SELECT first_seq FROM event_batches
                                                      WHERE run_id = $1 AND first_seq <= $2::bigint + 1
                                                      ORDER BY first_seq DESC LIMIT 1), 0)
         ORDER BY first_seq LIMIT $3::bigint + 1",
        &[&run.as_str(), &(after.0.min(i64::MAX as u64 - 1) as i64), &(limit.min(i64::MAX as usize - 1) as i64)],
    )
    .await?;
    let mut out = vec![];
    for r in &rows {
        let events = crate::event_rows::decode(run, r.get(0))?;
        out.extend(events.into_iter().filter(|e| e.seq > after));
        if out.len() >= limit {
            break;
        }
    }
    out.truncate(limit);
    Ok(out)
}

pub async fn unfinished_runs<C: GenericClient>(c: &C) -> Result<Vec<RunId>, StoreError> {
    let rows = query(c, &format!("SELECT id FROM runs WHERE state IN {UNFINISHED} ORDER BY id"), &[]).await?;
    rows.into_iter().map(|r| id(r.get(0))).collect()
}

pub async fn expired_leases<C: GenericClient>(c: &C, now_ms: i64) -> Result<Vec<ExpiredLease>, StoreError> {
    let rows = query(
        c,
        &format!(
            "SELECT a.run_id, a.step, a.item, a.attempt, a.lease_until FROM runs r JOIN attempts a ON a.run_id = r.id
             WHERE r.state IN {UNFINISHED} AND a.state = 'running' AND a.lease_until < $1
             ORDER BY a.run_id, a.step, a.item"
        ),
        &[&now_ms],
    )
    .await?;
    rows.iter()
        .map(|r| {
            Ok(ExpiredLease {
                run: id(r.get(0))?,
                step: r.get(1),
                item: item(r.get(2)),
                attempt: attempt_no(r.get(3))?,
                lease_until: r.get(4),
            })
        })
        .collect()
}

fn template_of(r: &Row) -> Result<TemplateRecord, StoreError> {
    Ok(TemplateRecord {
        name: r.get(0),
        version: r.get::<_, i32>(1).max(0) as u32,
        definition: value(r.get(2))?,
        created_at: r.get(3),
    })
}

/// The number every change of a template makes grow (schema 8); `None`
/// if its row was deleted by hand (templates are then read each time).
pub async fn template_changes<C: GenericClient>(c: &C) -> Result<Option<i64>, StoreError> {
    let rows = query(c, "SELECT n FROM template_changes WHERE id", &[]).await?;
    Ok(rows.first().map(|r| r.get(0)))
}

pub async fn template<C: GenericClient>(
    c: &C,
    name: &str,
    version: Option<u32>,
) -> Result<Option<TemplateRecord>, StoreError> {
    let rows = query(
        c,
        "SELECT name, version, definition, created_at FROM templates
         WHERE name = $1 AND ($2::int IS NULL OR version = $2) ORDER BY version DESC LIMIT 1",
        &[&name, &version.map(|v| v.min(i32::MAX as u32) as i32)],
    )
    .await?;
    rows.first().map(template_of).transpose()
}

pub async fn list_templates<C: GenericClient>(c: &C) -> Result<Vec<TemplateRecord>, StoreError> {
    let rows = query(
        c,
        "SELECT DISTINCT ON (name) name, version, definition, created_at FROM templates
         ORDER BY name, version DESC",
        &[],
    )
    .await?;
    rows.iter().map(template_of).collect()
}

pub async fn template_versions<C: GenericClient>(c: &C, name: &str) -> Result<Vec<TemplateRecord>, StoreError> {
    let rows = query(
        c,
        "SELECT name, version, definition, created_at FROM templates WHERE name = $1 ORDER BY version",
        &[&name],
    )
    .await?;
    rows.iter().map(template_of).collect()
}

pub async fn event_waits<C: GenericClient>(c: &C, event: &str) -> Result<Vec<WaitRecord>, StoreError> {
    let rows = query(
        c,
        "SELECT run_id, step, spec, until, since FROM waits WHERE event = $1 ORDER BY since, run_id",
        &[&event],
    )
    .await?;
    rows.iter()
        .map(|r| {
            Ok(WaitRecord {
                run: id(r.get(0))?,
                step: r.get(1),
                kind: from_json(r.get(2))?,
                until: r.get(3),
                since: r.get(4),
            })
        })
        .collect()
}

pub(crate) fn inbox_row(body: &str, answer: Option<&str>) -> Result<InboxRecord, StoreError> {
    let mut m: InboxRecord = from_json(body)?;
    m.answer = answer.map(from_json).transpose()?;
    Ok(m)
}

/// Signals queued for steps of `run` that do not wait yet, oldest first.
pub async fn inbox_queued<C: GenericClient>(c: &C, run: &RunId) -> Result<Vec<InboxRecord>, StoreError> {
    let sql = "SELECT body, answer FROM inbox WHERE run = $1 AND kind = 'signal'
                 AND answer::jsonb->>'status' = 'queued' ORDER BY seq";
    let rows = query(c, sql, &[&run.as_str()]).await?;
    rows.iter().map(|r| inbox_row(r.get(0), r.get(1))).collect()
}

/// Events named `name` emitted at or after `since_ms`, oldest first.
pub async fn events_emitted<C: GenericClient>(
    c: &C,
    name: &str,
    since_ms: i64,
    limit: usize,
) -> Result<Vec<InboxRecord>, StoreError> {
    let sql = "SELECT body, answer FROM inbox WHERE kind = 'event' AND body::jsonb->>'event' = $1
                 AND at >= $2 ORDER BY seq LIMIT $3";
    let rows = query(c, sql, &[&name, &since_ms, &(limit as i64)]).await?;
    rows.iter().map(|r| inbox_row(r.get(0), r.get(1))).collect()
}

pub async fn inbox_get<C: GenericClient>(
    c: &C,
    key: &str,
    by_event_id: bool,
) -> Result<Option<InboxRecord>, StoreError> {
    let sql = if by_event_id {
        "SELECT body, answer FROM inbox WHERE event_id = $1"
    } else {
        "SELECT body, answer FROM inbox WHERE id = $1"
    };
    let rows = query(c, sql, &[&key]).await?;
    rows.first().map(|r| inbox_row(r.get(0), r.get(1))).transpose()
}

pub async fn schedules<C: GenericClient>(c: &C) -> Result<Vec<ScheduleRecord>, StoreError> {
    let rows = query(c, "SELECT body::text FROM schedules ORDER BY name", &[]).await?;
    rows.iter().map(|r| from_json(r.get(0))).collect()
}

pub async fn queue_head<C: GenericClient>(c: &C, key: &str) -> Result<Option<RunId>, StoreError> {
    let rows = query(
        c,
        &format!(
            "SELECT id FROM runs WHERE concurrency_key = $1 AND state IN {UNFINISHED}
             ORDER BY created_at, id LIMIT 1"
        ),
        &[&key],
    )
    .await?;
    rows.into_iter().next().map(|r| id(r.get(0))).transpose()
}

pub async fn artifact_rows<C: GenericClient>(
    c: &C,
    run: &RunId,
    name: Option<&str>,
) -> Result<Vec<ArtifactRecord>, StoreError> {
    let rows = query(
        c,
        "SELECT name, mime, size, sha256, step, item, attempt, created_at FROM artifacts
         WHERE run_id = $1 AND ($2::text IS NULL OR name = $2) ORDER BY name",
        &[&run.as_str(), &name],
    )
    .await?;
    rows.iter().map(|r| artifact_of(run, r, 0)).collect()
}

/// An artifact from a row whose columns from `at` on are name, mime, size,
/// sha256, step, item, attempt, created_at.
fn artifact_of(run: &RunId, r: &Row, at: usize) -> Result<ArtifactRecord, StoreError> {
    Ok(ArtifactRecord {
        run: run.clone(),
        name: r.get(at),
        mime: r.get(at + 1),
        size: r.get::<_, i64>(at + 2).max(0) as u64,
        sha256: r.get(at + 3),
        step: r.get(at + 4),
        item: item(r.get(at + 5)),
        attempt: attempt_no(r.get(at + 6))?,
        created_at: r.get(at + 7),
    })
}

pub async fn artifacts<C: GenericClient>(
    c: &C,
    run: &RunId,
    name: Option<&str>,
) -> Result<Vec<ArtifactRecord>, StoreError> {
    artifact_rows(c, run, name).await
}

pub async fn artifact<C: GenericClient>(
    c: &C,
    run: &RunId,
    name: &str,
) -> Result<Option<(ArtifactRecord, Vec<u8>)>, StoreError> {
    let Some(a) = artifact_rows(c, run, Some(name)).await?.pop() else { return Ok(None) };
    let rows = query(c, "SELECT data FROM blobs WHERE sha256 = $1", &[&a.sha256]).await?;
    let data = rows
        .first()
        .map(|r| r.get::<_, Vec<u8>>(0))
        .ok_or_else(|| StoreError::Corrupt(format!("the bytes of artifact {name} of {run} are missing")))?;
    Ok(Some((a, data)))
}

pub async fn finished_before<C: GenericClient>(c: &C, before_ms: i64, f: &RunFilter) -> Result<Vec<RunId>, StoreError> {
    let limit = f.limit.map(|l| l.min(i64::MAX as usize) as i64);
    let rows = query(
        c,
        &format!(
            "SELECT id FROM runs WHERE state IN {TERMINAL} AND updated_at < $1 AND ($2::text IS NULL OR state = $2)
               AND ($3::text IS NULL OR template = $3)
             ORDER BY updated_at, id LIMIT $4"
        ),
        &[&before_ms, &f.state.map(|s| s.as_str()), &f.template, &limit],
    )
    .await?;
    rows.into_iter().map(|r| id(r.get(0))).collect()
}
