//! Checkpoints off the writer's path (`checkpoint.rs`) and the leader of a
//! group commit (`Lead`): the WAL stays bounded whoever checkpoints, and
//! a batch whose leader went away is committed all the same.

use std::future::Future;
use std::time::Duration;

use crate::checkpoint::{Decision, WAKE_AT, WRITER_AT, decide};

use super::*;

/// A batch whose event carries `kib` KiB of data (a few overflow pages).
fn heavy(id: &RunId, seq: u64, kib: usize) -> Batch {
    let mut w = event(id, seq, "heavy");
    if let Write::Event(e) = &mut w {
        e.data = json!({"pad": "x".repeat(kib * 1024)});
    }
    b(vec![w])
}

/// Bytes of the store's WAL file.
fn wal_bytes(p: &std::path::Path) -> u64 {
    std::fs::metadata(p.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0)
}

/// A WAL of `frames` frames of the default 4 KiB page, in bytes.
fn frames_bytes(frames: i32) -> u64 {
    32 + frames as u64 * (4096 + 24)
}

#[test]
fn the_writer_checkpoints_when_idle_and_wakes_the_thread_when_not() {
    let mut next = WAKE_AT;
    let busy = || false;
    let idle = || true;
    assert_eq!(decide(10, &idle, &mut next), Decision::Nothing, "small WAL: nothing, even idle");
    assert_eq!(decide(WAKE_AT, &idle, &mut next), Decision::Checkpoint);
    assert_eq!(decide(WAKE_AT, &busy, &mut next), Decision::Wake);
    assert_eq!(decide(WAKE_AT + 1, &busy, &mut next), Decision::Nothing, "woken once per half threshold");
    assert_eq!(decide(WAKE_AT + WAKE_AT / 2, &busy, &mut next), Decision::Wake, "the WAL kept growing");
    assert_eq!(decide(WRITER_AT, &busy, &mut next), Decision::Checkpoint, "bounded even if never idle");
    // The WAL started over: the next crossing wakes again.
    assert_eq!(decide(5, &busy, &mut next), Decision::Nothing);
    assert_eq!(decide(WAKE_AT, &busy, &mut next), Decision::Wake);
}

/// One commit at a time (nobody waits): the writer checkpoints itself at
/// the threshold and the WAL starts over, so it stays near one threshold.
#[tokio::test]
async fn one_writer_at_a_time_keeps_the_wal_small() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    let id = rid(1);
    s.commit(b(vec![create(&id, &["a"])])).await.unwrap();
    // ~4 frames per batch: about four thresholds' worth.
    for seq in 1..=(WAKE_AT as u64) {
        s.commit(heavy(&id, seq, 10)).await.unwrap();
    }
    let st = s.stats();
    assert!(st.writer_checkpoints.load(Ordering::Relaxed) >= 3, "{st:?}");
    assert_eq!(st.checkpoints.load(Ordering::Relaxed), 0, "alone, the writer needs no thread");
    assert!(s.checkpointer.lock().unwrap().as_ref().is_some_and(|c| !c.started()), "nor was one started");
    let wal = wal_bytes(&p);
    assert!(wal < frames_bytes(WAKE_AT + 200), "the WAL grew to {wal} bytes");
    assert_eq!(s.events_after(&id, Seq::ZERO, 5000).await.unwrap().len(), WAKE_AT as usize);
}

/// Many concurrent writers: the checkpointer thread takes over, the WAL
/// stays bounded, and every commit is there after a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_concurrent_writers_the_checkpointer_thread_checkpoints() {
    let (_d, p) = tmp();
    let s = Arc::new(SqliteStore::open(&p, Durability::Normal).unwrap());
    let (callers, per) = (48u64, 100u64);
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..callers {
        let s = s.clone();
        tasks.spawn(async move {
            let id = rid(100 + c as i64);
            s.commit(b(vec![create(&id, &["a"])])).await.unwrap();
            for seq in 1..=per {
                s.commit(heavy(&id, seq, 6)).await.unwrap();
            }
            id
        });
    }
    let mut ids = vec![];
    while let Some(r) = tasks.join_next().await {
        ids.push(r.unwrap());
    }
    let st = s.stats();
    assert!(st.checkpoints.load(Ordering::Relaxed) >= 1, "the thread never checkpointed: {st:?}");
    let wal = wal_bytes(&p);
    assert!(wal <= frames_bytes(WRITER_AT + 1000), "the WAL grew to {wal} bytes");
    drop(Arc::try_unwrap(s).ok().expect("the only handle"));
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    for id in &ids {
        assert_eq!(s.events_after(id, Seq::ZERO, 1000).await.unwrap().len(), per as usize, "{id}");
    }
}

/// A caller that would lead its group commit under load and whose future
/// is dropped before it commits (its yield to the other tasks) still gets its batch
/// committed, and the next caller is not left waiting for that leader.
#[tokio::test]
async fn a_batch_whose_leader_went_away_is_committed() {
    let (_d, p) = tmp();
    let s = SqliteStore::open(&p, Durability::Normal).unwrap();
    let (a, c) = (rid(1), rid(2));
    // Alone, a leader commits at once, in its first poll.
    let lone = rid(3);
    {
        let mut first = std::pin::pin!(s.commit(b(vec![create(&lone, &["x"])])));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(first.as_mut().poll(&mut cx).is_ready(), "no load: no yield");
    }
    // Under load (as if the last transaction had carried two batches), a
    // leader yields before it commits: polled once (queued, then
    // yielding), then dropped.
    s.w.queue.lock().unwrap().last_group = 2;
    {
        let mut first = std::pin::pin!(s.commit(b(vec![create(&a, &["x"])])));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(first.as_mut().poll(&mut cx).is_pending(), "the first poll yields before committing");
    }
    let next = tokio::time::timeout(Duration::from_secs(10), s.commit(b(vec![create(&c, &["x"])]))).await;
    next.expect("the next commit is not stranded").unwrap();
    assert!(s.run(&a).await.unwrap().is_some(), "the dropped leader's batch was committed");
    assert!(s.run(&c).await.unwrap().is_some());
}
