//! Committed changes are pushed to subscribers: every event a run logs
//! reaches a subscriber in order, as it commits, with nothing read from
//! the store.

use super::*;
use crate::scheduler::Change;
use crate::store::Write;

/// The events of `run` in the batches heard until the run ends.
async fn heard_until_end(changes: &mut Changes, run: &RunId) -> Vec<String> {
    let mut kinds = vec![];
    loop {
        let Some(Change::Committed(b)) = changes.next().await else {
            panic!("a change was missed or the engine ended")
        };
        let mut ended = false;
        for w in &b.writes {
            if let Write::Event(e) = w
                && &e.run == run
            {
                kinds.push(e.kind.clone());
            }
            if let Write::RunState { run: r, to, .. } = w
                && r == run
                && to.is_terminal()
            {
                ended = true;
            }
        }
        if ended {
            return kinds;
        }
    }
}

#[tokio::test]
async fn every_committed_event_of_a_run_is_pushed_in_order() {
    let h = harness();
    let mut changes = h.engine.subscribe();
    let id = h
        .submit(json!({"name": "w", "steps": [code("a"), {"name": "b", "code": {"plugin": "p"}, "after": ["a"]}]}))
        .await;
    let heard = tokio::time::timeout(Duration::from_secs(10), heard_until_end(&mut changes, &id)).await.unwrap();
    let stored: Vec<String> = h.store.all_events(&id).iter().map(|e| e.kind.clone()).collect();
    assert_eq!(heard, stored, "the subscriber heard exactly what was stored, in order");
    assert!(heard.contains(&"run.completed".to_string()), "{heard:?}");
}

#[tokio::test]
async fn a_run_state_change_wakes_only_its_own_waiter() {
    let h = harness();
    h.fake.on("slow", |_| Act::Hang);
    let mut changes = h.engine.subscribe();
    let hung = h.submit(json!({"name": "w", "steps": [code("slow")]})).await;
    // Its submission was heard (created, started).
    assert!(tokio::time::timeout(Duration::from_secs(5), changes.of_run_state(&hung)).await.unwrap());
    let quick = h.submit(json!({"name": "q", "steps": [code("a")]})).await;
    // Changes of another run do not wake a waiter of this one.
    let waited = tokio::time::timeout(Duration::from_millis(200), changes.of_run_state(&hung)).await;
    assert!(waited.is_err(), "nothing changed the hung run's state");
    h.wait(&quick).await;
    h.engine.cancel(&hung).await.unwrap();
}

#[tokio::test]
async fn a_subscriber_that_falls_behind_is_told_it_missed_changes() {
    let h = harness();
    let mut changes = h.engine.subscribe();
    // More batches than the backlog holds, none read meanwhile.
    for _ in 0..(super::super::changes::BACKLOG + 10) {
        let id = h.submit(json!({"name": "w", "steps": [code("a")]})).await;
        h.wait(&id).await;
    }
    assert!(matches!(changes.next().await, Some(Change::Missed)));
}

#[tokio::test]
async fn a_follower_hears_its_runs_batches_and_no_others() {
    let h = harness();
    h.fake.on("slow", |_| Act::Hang);
    let hung = h.submit(json!({"name": "w", "steps": [code("slow")]})).await;
    let two = json!({"name": "f", "steps": [code("a"), {"name": "b", "code": {"plugin": "p"}, "after": ["a"]}]});
    let (id, _end, mut followed) =
        h.engine.submit_watched(Arc::new(def(two)), json!({}), RunOptions::default()).await.unwrap();
    // Another run's changes meanwhile.
    let other = h.submit(json!({"name": "q", "steps": [code("a")]})).await;
    h.wait(&other).await;
    let mut kinds = vec![];
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), followed.next()).await.unwrap();
        let Some(Change::Committed(b)) = next else { panic!("a change was missed or the engine ended") };
        assert!(b.writes.iter().any(|w| w.run_id() == Some(&id)), "a batch of another run was heard: {b:?}");
        kinds.extend(b.writes.iter().filter_map(|w| match w {
            Write::Event(e) if e.run == id => Some(e.kind.clone()),
            _ => None,
        }));
        if kinds.last().is_some_and(|k| k == "run.completed") {
            break;
        }
    }
    let stored: Vec<String> = h.store.all_events(&id).iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds, stored, "the follower heard exactly what was stored, in order");
    assert!(h.engine.drives(&hung) && !h.engine.drives(&id), "the hung run is driven, the ended one is not");
    drop(followed);
    assert_eq!(h.engine.sh.followers.now(), 0, "a dropped follower is forgotten");
    h.engine.cancel(&hung).await.unwrap();
}
