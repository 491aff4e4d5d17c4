//! Reads of the outbox: deliveries (notifications to send, with their
//! tries) and the idempotency keys of starts. Their writes are statements
//! of a batch (see `apply`). A delivery is stored as JSON with the columns
//! its queries and updates need beside it; the columns are the truth for
//! those fields.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use weft_engine::store::{DeliveryFilter, DeliveryRecord, DeliveryState, StartKeyRecord};
use weft_engine::{RunId, StoreError};

use crate::read::{id, query};

const COLUMNS: &str = "body, state, attempts, next_at, lease_until, error, updated_at";

fn record(r: &Row) -> Result<DeliveryRecord, StoreError> {
    let body: String = r.get(0);
    let mut d: DeliveryRecord =
        serde_json::from_str(&body).map_err(|e| StoreError::Corrupt(format!("delivery: {e}")))?;
    d.state = r.get::<_, String>(1).parse::<DeliveryState>().map_err(StoreError::Corrupt)?;
    d.attempts = r.get::<_, i32>(2).max(0) as u32;
    (d.next_at, d.lease_until, d.error, d.updated_at) = (r.get(3), r.get(4), r.get(5), r.get(6));
    Ok(d)
}

pub async fn deliveries_due<C: GenericClient>(
    c: &C,
    now: i64,
    limit: usize,
) -> Result<Vec<DeliveryRecord>, StoreError> {
    let limit = limit.min(i64::MAX as usize) as i64;
    let rows = query(
        c,
        &format!(
            "SELECT {COLUMNS} FROM deliveries d WHERE state = 'pending' AND next_at <= $1
               AND (lease_until IS NULL OR lease_until < $1)
               AND (fifo_key IS NULL OR NOT EXISTS (SELECT 1 FROM deliveries e
                    WHERE e.fifo_key = d.fifo_key AND e.state = 'pending' AND e.seq < d.seq))
             ORDER BY seq LIMIT $2"
        ),
        &[&now, &limit],
    )
    .await?;
    rows.iter().map(record).collect()
}

pub async fn deliveries<C: GenericClient>(c: &C, f: &DeliveryFilter) -> Result<Vec<DeliveryRecord>, StoreError> {
    let limit = f.limit.map(|l| l.min(i64::MAX as usize) as i64);
    let run = f.run.as_ref().map(|r| r.as_str().to_string());
    let state = f.state.map(|s| s.as_str().to_string());
    let rows = query(
        c,
        &format!(
            "SELECT {COLUMNS} FROM deliveries WHERE ($1::text IS NULL OR run_id = $1)
               AND ($2::text IS NULL OR state = $2) ORDER BY seq DESC LIMIT $3"
        ),
        &[&run, &state, &limit],
    )
    .await?;
    rows.iter().map(record).collect()
}

pub async fn delivery<C: GenericClient>(c: &C, id: &str) -> Result<Option<DeliveryRecord>, StoreError> {
    let rows = query(c, &format!("SELECT {COLUMNS} FROM deliveries WHERE id = $1"), &[&id]).await?;
    rows.first().map(record).transpose()
}

pub async fn start_key<C: GenericClient>(c: &C, key: &str) -> Result<Option<StartKeyRecord>, StoreError> {
    let rows = query(c, "SELECT run_id, digest, created_at FROM start_keys WHERE key = $1", &[&key]).await?;
    rows.first()
        .map(|r| {
            Ok(StartKeyRecord { key: key.to_string(), run: id(r.get(0))?, digest: r.get(1), created_at: r.get(2) })
        })
        .transpose()
}

pub async fn start_key_of<C: GenericClient>(c: &C, run: &RunId) -> Result<Option<StartKeyRecord>, StoreError> {
    let rows = query(c, "SELECT key, digest, created_at FROM start_keys WHERE run_id = $1", &[&run.as_str()]).await?;
    Ok(rows.first().map(|r| StartKeyRecord { key: r.get(0), run: run.clone(), digest: r.get(1), created_at: r.get(2) }))
}

/// A run's notifications as another store exported them (their state,
/// tries and error kept; no lease) and its idempotency key.
pub async fn import(
    c: &tokio_postgres::Client,
    deliveries: &[DeliveryRecord],
    key: Option<&StartKeyRecord>,
) -> Result<(), StoreError> {
    for d in deliveries {
        let body = serde_json::to_string(d).unwrap_or_default();
        c.execute(
            "INSERT INTO deliveries (id, run_id, fifo_key, state, attempts, next_at, error, updated_at, body)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &d.id,
                &d.run.as_str(),
                &d.key,
                &d.state.as_str(),
                &(d.attempts as i32),
                &d.next_at,
                &d.error,
                &d.updated_at,
                &body,
            ],
        )
        .await
        .map_err(crate::map_err)?;
    }
    if let Some(k) = key {
        c.execute(
            "INSERT INTO start_keys (key, run_id, digest, created_at) VALUES ($1, $2, $3, $4)",
            &[&k.key, &k.run.as_str(), &k.digest, &k.created_at],
        )
        .await
        .map_err(crate::map_err)?;
    }
    Ok(())
}
