//! `sleep` steps: a durable timer that wakes the driver (no polling loop),
//! survives a crash (re-armed from the store), fires late rather than never,
//! and is canceled with its run.

use super::*;

#[tokio::test]
async fn a_sleep_waits_for_the_clock_then_the_next_step_runs() {
    let h = harness();
    let d = json!({"name": "w", "steps": [{"name": "nap", "sleep": {"ms": 500}},
        {"name": "b", "code": {"plugin": "p"}, "input": "@nap", "after": ["nap"]}]});
    let id = h.submit(d).await;
    let r = h.until(&id, |r| step(r, "nap").state == StepState::Waiting).await;
    let start = h.clock.now_ms();
    assert_eq!(step(&r, "nap").next_attempt_at, Some(start + 500), "the wake time is stored");
    h.clock.advance(499);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(h.fake.calls_of("b").is_empty(), "not before its time");
    assert_eq!(h.rec(&id).await.state, RunState::Working);
    h.clock.advance(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    let slept = step(&r, "nap").output.clone().unwrap();
    assert_eq!(slept["slept_until"], crate::clock::rfc3339(start + 500));
    assert_eq!(h.fake.calls_of("b")[0].input, slept, "the next step sees the sleep's output");
}

#[tokio::test]
async fn a_sleep_until_a_past_instant_fires_at_once() {
    let h = harness();
    let d = json!({"name": "w", "steps": [{"name": "nap", "sleep": {"until": "1970-01-01T00:00:01Z"}}]});
    let r = h.run(d, json!({})).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "nap").output.clone().unwrap()["slept_until"], "1970-01-01T00:00:01.000Z");
}

#[tokio::test]
async fn a_sleep_is_rearmed_after_a_crash_and_fires_late_rather_than_never() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    let d = json!({"name": "w", "steps": [{"name": "nap", "sleep": {"ms": 1000}},
        {"name": "b", "code": {"plugin": "p"}, "after": ["nap"]}]});
    let id = h1.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    h1.until(&id, |r| step(r, "nap").state == StepState::Waiting).await;
    let due = h1.clock.now_ms() + 1000;
    h1.engine.abort_all(); // the crash
    // Restarted before the time: it waits for the clock again.
    let fake2 = Arc::new(Fake::default());
    let h2 = harness_with(store.clone(), fake2.clone(), 4);
    h2.clock.set(due - 300);
    h2.engine.recover().await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(fake2.calls_of("b").is_empty());
    h2.engine.abort_all(); // another crash, and a long outage
    let fake3 = Arc::new(Fake::default());
    let h3 = harness_with(store.clone(), fake3.clone(), 4);
    h3.clock.set(due + 3_600_000);
    h3.engine.recover().await.unwrap();
    let r = h3.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "it fired late, not never");
    assert_eq!(fake3.calls_of("b").len(), 1);
    check_log(&h3, &r);
}

#[tokio::test]
async fn canceling_a_sleeping_run_cancels_the_sleep() {
    let h = harness();
    let d = json!({"name": "w", "steps": [{"name": "nap", "sleep": {"ms": 60000}}]});
    let id = h.submit(d).await;
    h.until(&id, |r| step(r, "nap").state == StepState::Waiting).await;
    let r = h.engine.cancel(&id).await.unwrap();
    assert_eq!(r.state, RunState::Canceled);
    assert_eq!(step(&r, "nap").state, StepState::Canceled);
}
