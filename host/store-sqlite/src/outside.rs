//! The tables of what reaches runs from outside: `waits` (one row per
//! parked step), `inbox` (signals and events for the store's owner) and
//! `schedules`. Records are stored as JSON with the columns queries need
//! (event name, pending flag, next fire time) beside them.

use rusqlite::{Connection, OptionalExtension, params};
use weft_engine::RunId;
use weft_engine::StoreError;
use weft_engine::store::{InboxRecord, ScheduleRecord, WaitRecord, Write};

use crate::map_err;

fn conflict(what: String) -> StoreError {
    StoreError::Conflict(what)
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(format!("{e}: {s}")))
}

/// Applies one of the writes this module owns; `false` when `w` is not one.
pub(crate) fn apply(c: &Connection, w: &Write) -> Result<bool, StoreError> {
    match w {
        Write::OpenWait(wr) => {
            let (kind, event) = wr.kind.index_columns();
            let n = c
                .prepare_cached(
                    "INSERT OR IGNORE INTO waits (run_id, step, kind, event, spec, until, since)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .and_then(|mut s| {
                    s.execute(params![wr.run.as_str(), wr.step, kind, event, to_json(&wr.kind), wr.until, wr.since])
                })
                .map_err(map_err)?;
            if n == 0 {
                return Err(conflict(format!("step {}/{} already waits", wr.run, wr.step)));
            }
        }
        Write::CloseWait { run, step } => {
            c.prepare_cached("DELETE FROM waits WHERE run_id = ?1 AND step = ?2")
                .and_then(|mut s| s.execute(params![run.as_str(), step]))
                .map_err(map_err)?;
        }
        Write::InboxPut(m) => {
            let (kind, event_id) = (m.kind.name(), m.kind.event_id());
            let n = c
                .prepare_cached(
                    "INSERT OR IGNORE INTO inbox (id, kind, event_id, body, at, answer) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .and_then(|mut s| {
                    let answer = m.answer.as_ref().map(serde_json::Value::to_string);
                    s.execute(params![m.id, kind, event_id, to_json(m), m.at, answer])
                })
                .map_err(map_err)?;
            if n == 0 {
                return Err(conflict(match event_id {
                    Some(e) => format!("event id {e} was already emitted"),
                    None => format!("inbox message {} exists", m.id),
                }));
            }
        }
        // One process owns the store: nobody else takes messages.
        Write::InboxTake { .. } => {}
        Write::InboxAnswer { id, answer } => {
            let n = c
                .prepare_cached("UPDATE inbox SET answer = ?2 WHERE id = ?1 AND answer IS NULL")
                .and_then(|mut s| s.execute(params![id, answer.to_string()]))
                .map_err(map_err)?;
            if n == 0 {
                return Err(conflict(format!("inbox message {id} is not pending")));
            }
        }
        Write::InboxSettle { id, answer } => {
            c.prepare_cached(
                "UPDATE inbox SET answer = ?2 WHERE id = ?1 AND json_extract(answer, '$.status') = 'queued'",
            )
            .and_then(|mut s| s.execute(params![id, answer.to_string()]))
            .map_err(map_err)?;
        }
        Write::PutSchedule(s) => {
            let n = c
                .prepare_cached("INSERT OR IGNORE INTO schedules (name, body, next_fire_at) VALUES (?1, ?2, ?3)")
                .and_then(|mut st| st.execute(params![s.name, to_json(s), s.next_fire_at]))
                .map_err(map_err)?;
            if n == 0 {
                return Err(conflict(format!("schedule {} exists", s.name)));
            }
        }
        Write::DeleteSchedule { name } => {
            let n = c.execute("DELETE FROM schedules WHERE name = ?1", [name]).map_err(map_err)?;
            if n == 0 {
                return Err(conflict(format!("schedule {name} does not exist")));
            }
        }
        Write::SchedulePaused { name, paused, next } => {
            let body: Option<String> = c
                .query_row("SELECT body FROM schedules WHERE name = ?1", params![name], |r| r.get(0))
                .optional()
                .map_err(map_err)?;
            let Some(body) = body else {
                return Err(conflict(format!("schedule {name} does not exist")));
            };
            let mut s: ScheduleRecord = from_json(&body)?;
            s.paused = *paused;
            s.next_fire_at = *next;
            c.execute(
                "UPDATE schedules SET body = ?2, next_fire_at = ?3 WHERE name = ?1",
                params![name, to_json(&s), next],
            )
            .map_err(map_err)?;
        }
        Write::ScheduleFired { name, from, next, run } => {
            let body: Option<String> = c
                .query_row(
                    "SELECT body FROM schedules WHERE name = ?1 AND next_fire_at = ?2",
                    params![name, from],
                    |r| r.get(0),
                )
                .optional()
                .map_err(map_err)?;
            let Some(body) = body else {
                return Err(conflict(format!("schedule {name} does not fire at {from}")));
            };
            let mut s: ScheduleRecord = from_json(&body)?;
            s.next_fire_at = *next;
            s.last_fire_at = Some(*from);
            if run.is_some() {
                s.last_run = run.clone();
            }
            c.execute(
                "UPDATE schedules SET body = ?2, next_fire_at = ?3 WHERE name = ?1",
                params![name, to_json(&s), next],
            )
            .map_err(map_err)?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The waits of one run, in definition order.
pub(crate) fn run_waits(c: &Connection, run: &RunId) -> Result<Vec<WaitRecord>, StoreError> {
    let rows = c
        .prepare_cached(
            "SELECT w.step, w.spec, w.until, w.since FROM waits w JOIN steps s ON s.run_id = w.run_id AND s.name = w.step
             WHERE w.run_id = ?1 ORDER BY s.idx",
        )
        .and_then(|mut s| {
            s.query_map([run.as_str()], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<i64>>(2)?, r.get::<_, i64>(3)?))
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .map_err(map_err)?;
    rows.into_iter()
        .map(|(step, spec, until, since)| {
            Ok(WaitRecord { run: run.clone(), step, kind: from_json(&spec)?, until, since })
        })
        .collect()
}

pub(crate) fn event_waits(c: &Connection, event: &str) -> Result<Vec<WaitRecord>, StoreError> {
    let rows = c
        .prepare_cached("SELECT run_id, step, spec, until, since FROM waits WHERE event = ?1 ORDER BY since, run_id")
        .and_then(|mut s| {
            s.query_map([event], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .map_err(map_err)?;
    rows.into_iter()
        .map(|(run, step, spec, until, since)| {
            let run = run.parse().map_err(|e| StoreError::Corrupt(format!("{e}")))?;
            Ok(WaitRecord { run, step, kind: from_json(&spec)?, until, since })
        })
        .collect()
}

fn inbox_row(body: String, answer: Option<String>) -> Result<InboxRecord, StoreError> {
    let mut m: InboxRecord = from_json(&body)?;
    m.answer = answer.map(|a| from_json(&a)).transpose()?;
    Ok(m)
}

pub(crate) fn inbox_pending(c: &Connection) -> Result<Vec<InboxRecord>, StoreError> {
    let rows = c
        .prepare_cached("SELECT body FROM inbox WHERE answer IS NULL ORDER BY seq")
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>())
        .map_err(map_err)?;
    rows.into_iter().map(|b| inbox_row(b, None)).collect()
}

pub(crate) fn inbox_get(c: &Connection, id: &str, by_event_id: bool) -> Result<Option<InboxRecord>, StoreError> {
    let sql = if by_event_id {
        "SELECT body, answer FROM inbox WHERE event_id = ?1"
    } else {
        "SELECT body, answer FROM inbox WHERE id = ?1"
    };
    let row = c
        .prepare_cached(sql)
        .and_then(|mut s| {
            s.query_row([id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))).optional()
        })
        .map_err(map_err)?;
    row.map(|(b, a)| inbox_row(b, a)).transpose()
}

fn inbox_rows(c: &Connection, sql: &str, p: impl rusqlite::Params) -> Result<Vec<InboxRecord>, StoreError> {
    let rows = c
        .prepare_cached(sql)
        .and_then(|mut s| {
            s.query_map(p, |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(map_err)?;
    rows.into_iter().map(|(b, a)| inbox_row(b, a)).collect()
}

pub(crate) fn inbox_queued(c: &Connection, run: &RunId) -> Result<Vec<InboxRecord>, StoreError> {
    inbox_rows(
        c,
        "SELECT body, answer FROM inbox WHERE json_extract(body, '$.run') = ?1
           AND kind = 'signal' AND json_extract(answer, '$.status') = 'queued' ORDER BY seq",
        [run.as_str()],
    )
}

pub(crate) fn events_emitted(
    c: &Connection,
    name: &str,
    since_ms: i64,
    limit: usize,
) -> Result<Vec<InboxRecord>, StoreError> {
    inbox_rows(
        c,
        "SELECT body, answer FROM inbox WHERE json_extract(body, '$.event') = ?1 AND kind = 'event'
           AND at >= ?2 ORDER BY seq LIMIT ?3",
        params![name, since_ms, limit as i64],
    )
}

pub(crate) fn schedules(c: &Connection) -> Result<Vec<ScheduleRecord>, StoreError> {
    let rows = c
        .prepare_cached("SELECT body FROM schedules ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>())
        .map_err(map_err)?;
    rows.iter().map(|b| from_json(b)).collect()
}

pub(crate) fn queue_head(c: &Connection, key: &str) -> Result<Option<RunId>, StoreError> {
    let id: Option<String> = c
        .prepare_cached(
            "SELECT id FROM runs WHERE concurrency_key = ?1
               AND state NOT IN ('completed', 'failed', 'canceled', 'rejected')
             ORDER BY created_at, rowid LIMIT 1",
        )
        .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
        .map_err(map_err)?;
    id.map(|s| s.parse().map_err(|e| StoreError::Corrupt(format!("{e}")))).transpose()
}
