//! Set-based statements (see `sets`): what they commit is checked against
//! the reference by the conformance suite; here, that they are used, and
//! that their counts hold when no write is refused (a count that does not
//! would roll the group back and apply it again batch by batch).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use weft_engine::conformance::{apply_all, life, rid};
use weft_engine::store::*;

use super::fresh;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lives_commit_in_sets_without_a_retry() {
    let store = Arc::new(fresh().await);
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..32 {
        let s = store.clone();
        tasks.spawn(async move {
            let id = rid(3000 + n);
            apply_all(&*s, &life(&id)).await;
            id
        });
    }
    let mut ids = vec![];
    while let Some(id) = tasks.join_next().await {
        ids.push(id.unwrap());
    }
    let stats = store.stats();
    let (in_sets, retried) = (stats.in_sets.load(Ordering::Relaxed), stats.retried.load(Ordering::Relaxed));
    // Every life starts two attempts of one step in one batch: at least
    // those share a statement, whatever the grouping.
    assert!(in_sets >= 2 * 32, "writes in set statements: {in_sets}");
    assert_eq!(retried, 0, "a group was applied again: a set statement's count did not hold");
    for id in &ids {
        let r = store.run(id).await.unwrap().unwrap();
        assert_eq!(r.attempts.len(), 4, "{id}: {:?}", r.attempts);
    }
}
