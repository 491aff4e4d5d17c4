//! Keeping the store bounded: finished runs older than `retention` (30
//! days by default) are deleted with everything stored of them, by a task
//! of each store owner ([`Reaper`]); `weft runs prune` and `weft runs
//! delete` do the same on demand ([`prune`]). Unfinished runs are never
//! deleted. On a store shared by many workers each worker reaps; a run two
//! reapers pick is deleted once.

use std::sync::Arc;
use std::time::Duration;

use weft_engine::clock::system_now_ms;
use weft_engine::store::RunFilter;
use weft_engine::{RunId, Store, StoreError};

/// Runs deleted per transaction.
const PAGE: usize = 500;

/// Deletes the finished runs that ended before `before_ms` and match
/// `filter` (state, template), page by page; returns how many went. With
/// `dry_run`, deletes nothing and returns how many would go.
pub async fn prune(store: &dyn Store, before_ms: i64, filter: &RunFilter, dry_run: bool) -> Result<u64, StoreError> {
    if dry_run {
        let all = RunFilter { limit: None, ..filter.clone() };
        return Ok(store.finished_before(before_ms, &all).await?.len() as u64);
    }
    let page = RunFilter { limit: Some(PAGE), ..filter.clone() };
    let mut total = 0u64;
    loop {
        let ids: Vec<RunId> = store.finished_before(before_ms, &page).await?;
        if ids.is_empty() {
            return Ok(total);
        }
        let n = ids.len();
        total += store.delete_runs(&ids).await?.len() as u64;
        if n < PAGE {
            return Ok(total);
        }
    }
}

/// How often a reaper looks, for runs kept `keep`: a quarter of it,
/// between a second and ten minutes.
pub fn every(keep: Duration) -> Duration {
    (keep / 4).clamp(Duration::from_secs(1), Duration::from_secs(600))
}

/// Deletes finished runs older than the retention, now and then, until
/// dropped.
pub struct Reaper {
    task: tokio::task::JoinHandle<()>,
}

impl Reaper {
    pub fn start(store: Arc<dyn Store>, keep: Duration) -> Reaper {
        let task = tokio::spawn(async move {
            loop {
                let before = system_now_ms().saturating_sub(keep.as_millis().min(i64::MAX as u128) as i64);
                match prune(store.as_ref(), before, &RunFilter::default(), false).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(runs = n, "deleted finished runs older than the retention ({keep:?})"),
                    Err(e) => tracing::warn!(error = %e, "cannot delete old runs; trying again later"),
                }
                tokio::time::sleep(every(keep)).await;
            }
        });
        Reaper { task }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_engine::MemStore;
    use weft_engine::conformance::{b, create, rid};
    use weft_engine::store::Write;
    use weft_engine::store::{ArchiveStore, RunStore};

    /// `prune` pages through everything that matches, and `dry_run` only
    /// counts.
    #[tokio::test]
    async fn prune_pages_through_and_a_dry_run_deletes_nothing() {
        let s = MemStore::new();
        let n = PAGE + 20;
        for k in 0..n {
            let id = rid(k as i64);
            let end = Write::RunState {
                run: id.clone(),
                from: weft_engine::RunState::Submitted,
                to: weft_engine::RunState::Completed,
                output: Some(json!(k)),
                error: None,
                at: 1_000 + k as i64,
            };
            s.commit(b(vec![create(&id, &["a"]), end])).await.unwrap();
        }
        let all = RunFilter::default();
        assert_eq!(prune(&s, i64::MAX, &all, true).await.unwrap(), n as u64);
        assert_eq!(s.count_runs(&all).await.unwrap(), n as u64, "a dry run deletes nothing");
        assert_eq!(prune(&s, 1_010, &all, false).await.unwrap(), 10, "only those that ended before");
        assert_eq!(prune(&s, i64::MAX, &all, false).await.unwrap(), (n - 10) as u64);
        assert_eq!(s.count_runs(&all).await.unwrap(), 0);
        assert_eq!(every(Duration::from_secs(30 * 86_400)), Duration::from_secs(600));
        assert_eq!(every(Duration::from_secs(2)), Duration::from_secs(1));
    }
}
