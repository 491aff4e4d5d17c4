//! Tests against a real PostgreSQL: a fresh database per test on the
//! cluster `tests/postgres` starts. The conformance suite (the same checks
//! as SQLite's, against the reference store), then what only a store shared
//! by many workers does: claims, leases, fencing, takeover, notifications.

use std::sync::Arc;

use weft_engine::store::*;

use super::*;

/// A client store on a fresh database.
pub(super) async fn fresh() -> PgStore {
    let url = tokio::task::spawn_blocking(weft_test_postgres::database).await.unwrap();
    PgStore::connect(&url, Options::default()).await.unwrap()
}

weft_engine::conformance_suite!(async { (Arc::new(fresh().await) as Arc<dyn Store>, ()) });

mod reads;
mod schema;
mod sets;
mod workers;
