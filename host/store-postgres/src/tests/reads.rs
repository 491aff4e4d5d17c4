//! Reads on the pooled connections: a read dropped midway (its caller
//! gone) leaves its connection fit for the next.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};

use weft_engine::conformance::{b, create, rid};
use weft_engine::store::*;

use super::super::*;

/// `runs` reads in one snapshot. Dropped after a few polls (in its
/// `BEGIN`, between its queries, before its `COMMIT`), it must not leave
/// its connection inside that snapshot: with one reader connection, a run
/// committed afterwards is read at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_read_dropped_midway_leaves_its_connection_outside_it() {
    let url = tokio::task::spawn_blocking(weft_test_postgres::database).await.unwrap();
    let store = PgStore::connect(&url, Options { readers: 1, ..Options::default() }).await.unwrap();
    let old = rid(1);
    store.commit(b(vec![create(&old, &["a", "b"])])).await.unwrap();
    let mut dropped_inside = 0;
    for polls in 1..=12u32 {
        {
            let mut read = pin!(store.runs(std::slice::from_ref(&old)));
            let mut cx = Context::from_waker(std::task::Waker::noop());
            for _ in 0..polls {
                if let Poll::Ready(r) = read.as_mut().poll(&mut cx) {
                    r.unwrap();
                    break;
                }
                dropped_inside += 1;
                // The server answers meanwhile.
                tokio::time::sleep(std::time::Duration::from_millis(3)).await;
            }
        }
        let new = rid(100 + polls as i64);
        store.commit(b(vec![create(&new, &["a"])])).await.unwrap();
        assert!(store.run(&new).await.unwrap().is_some(), "after a read dropped at poll {polls}, a new run is unseen");
    }
    assert!(dropped_inside > 0, "no read was dropped midway");
}
