//! The tables of the outbox: `deliveries` (notifications to send, with
//! their tries) and `start_keys` (the run each idempotency key started).
//! A delivery is stored as JSON with the columns its queries and updates
//! need beside it (state, tries, due time, lease, FIFO key); the columns
//! are the truth for those fields.

use rusqlite::{Connection, OptionalExtension, params};
use weft_engine::store::{DeliveryFilter, DeliveryRecord, DeliveryState, StartKeyRecord, Write};
use weft_engine::{RunId, StoreError};

use crate::map_err;

fn conflict(what: String) -> StoreError {
    StoreError::Conflict(what)
}

/// Applies one of the writes this module owns; `false` when `w` is not one.
pub(crate) fn apply(c: &Connection, w: &Write) -> Result<bool, StoreError> {
    let changed = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> Result<usize, StoreError> {
        c.prepare_cached(sql).and_then(|mut s| s.execute(p)).map_err(map_err)
    };
    match w {
        Write::PutStartKey(k) => {
            let n = changed(
                "INSERT OR IGNORE INTO start_keys (key, run_id, digest, created_at) VALUES (?1, ?2, ?3, ?4)",
                &[&k.key, &k.run.as_str(), &k.digest, &k.created_at],
            )?;
            if n == 0 {
                return Err(conflict(format!("idempotency key {} is taken", k.key)));
            }
        }
        Write::PutDelivery(d) => {
            let body = serde_json::to_string(d).unwrap_or_default();
            let n = changed(
                "INSERT OR IGNORE INTO deliveries (id, run_id, fifo_key, state, attempts, next_at, lease_until,
                    error, updated_at, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?9, ?7, ?8)",
                &[
                    &d.id,
                    &d.run.as_str(),
                    &d.key,
                    &d.state.as_str(),
                    &d.attempts,
                    &d.next_at,
                    &d.updated_at,
                    &body,
                    &d.error,
                ],
            )?;
            if n == 0 {
                return Err(conflict(format!("delivery {} exists", d.id)));
            }
        }
        Write::DeliveryLease { id, attempts, until, now } => {
            let n = changed(
                "UPDATE deliveries SET lease_until = ?3 WHERE id = ?1 AND state = 'pending' AND attempts = ?2
                    AND (lease_until IS NULL OR lease_until < ?4)",
                &[id, attempts, until, now],
            )?;
            if n == 0 {
                return Err(conflict(format!("delivery {id} is not free to send")));
            }
        }
        Write::DeliveryTried { id, attempts, state, next_at, error, at } => {
            let n = changed(
                "UPDATE deliveries SET attempts = attempts + 1, state = ?3, next_at = ?4, error = ?5,
                    lease_until = NULL, updated_at = ?6 WHERE id = ?1 AND state = 'pending' AND attempts = ?2",
                &[id, attempts, &state.as_str(), next_at, error, at],
            )?;
            if n == 0 {
                return Err(conflict(format!("delivery {id} is not pending after {attempts} tries")));
            }
        }
        Write::DeliveryResend { id, at } => {
            let n = changed(
                "UPDATE deliveries SET state = 'pending', attempts = 0, next_at = ?2, lease_until = NULL,
                    error = NULL, updated_at = ?2 WHERE id = ?1 AND state = 'failed'",
                &[id, at],
            )?;
            if n == 0 {
                return Err(conflict(format!("delivery {id} did not fail")));
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

const COLUMNS: &str = "body, state, attempts, next_at, lease_until, error, updated_at";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
}

type Row = (String, String, u32, i64, Option<i64>, Option<String>, i64);

fn record((body, state, attempts, next_at, lease_until, error, updated_at): Row) -> Result<DeliveryRecord, StoreError> {
    let mut d: DeliveryRecord =
        serde_json::from_str(&body).map_err(|e| StoreError::Corrupt(format!("delivery: {e}")))?;
    d.state = state.parse::<DeliveryState>().map_err(StoreError::Corrupt)?;
    (d.attempts, d.next_at, d.lease_until, d.error, d.updated_at) = (attempts, next_at, lease_until, error, updated_at);
    Ok(d)
}

fn rows(c: &Connection, sql: &str, p: impl rusqlite::Params) -> Result<Vec<DeliveryRecord>, StoreError> {
    let rows: Vec<Row> = c.prepare_cached(sql).and_then(|mut s| s.query_map(p, row)?.collect()).map_err(map_err)?;
    rows.into_iter().map(record).collect()
}

pub(crate) fn deliveries_due(c: &Connection, now: i64, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError> {
    rows(
        c,
        &format!(
            "SELECT {COLUMNS} FROM deliveries d WHERE state = 'pending' AND next_at <= ?1
               AND (lease_until IS NULL OR lease_until < ?1)
               AND (fifo_key IS NULL OR NOT EXISTS (SELECT 1 FROM deliveries e
                    WHERE e.fifo_key = d.fifo_key AND e.state = 'pending' AND e.seq < d.seq))
             ORDER BY seq LIMIT ?2"
        ),
        params![now, limit.min(i64::MAX as usize) as i64],
    )
}

pub(crate) fn deliveries(c: &Connection, f: &DeliveryFilter) -> Result<Vec<DeliveryRecord>, StoreError> {
    let limit = f.limit.map(|l| l.min(i64::MAX as usize) as i64).unwrap_or(-1);
    rows(
        c,
        &format!(
            "SELECT {COLUMNS} FROM deliveries WHERE (?1 IS NULL OR run_id = ?1) AND (?2 IS NULL OR state = ?2)
             ORDER BY seq DESC LIMIT ?3"
        ),
        params![f.run.as_ref().map(|r| r.as_str()), f.state.map(DeliveryState::as_str), limit],
    )
}

pub(crate) fn delivery(c: &Connection, id: &str) -> Result<Option<DeliveryRecord>, StoreError> {
    let r: Option<Row> = c
        .prepare_cached(&format!("SELECT {COLUMNS} FROM deliveries WHERE id = ?1"))
        .and_then(|mut s| s.query_row([id], row).optional())
        .map_err(map_err)?;
    r.map(record).transpose()
}

pub(crate) fn start_key(c: &Connection, key: &str) -> Result<Option<StartKeyRecord>, StoreError> {
    let r: Option<(String, String, i64)> = c
        .prepare_cached("SELECT run_id, digest, created_at FROM start_keys WHERE key = ?1")
        .and_then(|mut s| s.query_row([key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .map_err(map_err)?;
    r.map(|(run, digest, created_at)| {
        let run = run.parse().map_err(|e| StoreError::Corrupt(format!("{e}")))?;
        Ok(StartKeyRecord { key: key.to_string(), run, digest, created_at })
    })
    .transpose()
}

pub(crate) fn start_key_of(c: &Connection, run: &RunId) -> Result<Option<StartKeyRecord>, StoreError> {
    let key: Option<String> = c
        .prepare_cached("SELECT key FROM start_keys WHERE run_id = ?1")
        .and_then(|mut s| s.query_row([run.as_str()], |r| r.get(0)).optional())
        .map_err(map_err)?;
    match key {
        Some(k) => start_key(c, &k),
        None => Ok(None),
    }
}

/// A run's notifications as another store exported them (their state,
/// tries and error kept; no lease) and its idempotency key.
pub(crate) fn import(
    c: &Connection,
    deliveries: &[DeliveryRecord],
    key: Option<&StartKeyRecord>,
) -> Result<(), StoreError> {
    for d in deliveries {
        let body = serde_json::to_string(d).unwrap_or_default();
        c.prepare_cached(
            "INSERT INTO deliveries (id, run_id, fifo_key, state, attempts, next_at, lease_until, error, updated_at, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?8, ?9)",
        )
        .and_then(|mut s| {
            s.execute(params![
                d.id,
                d.run.as_str(),
                d.key,
                d.state.as_str(),
                d.attempts,
                d.next_at,
                d.error,
                d.updated_at,
                body
            ])
        })
        .map_err(map_err)?;
    }
    if let Some(k) = key {
        apply(c, &Write::PutStartKey(k.clone()))?;
    }
    Ok(())
}
