//! Hibernation: a run parked on signal or event waits keeps no driver; a
//! signal, an event, its timeout, the run's deadline or a cancel wakes it;
//! concurrent signals still resolve a step once, and none is lost while a
//! driver hibernates.

use super::*;
use crate::scheduler::SignalAnswer;
use crate::store::TemplateStore;

fn approval() -> Value {
    json!({"name": "approve-flow", "steps": [
        {"name": "approve", "wait": {"prompt": "ok?",
            "schema": {"type": "object", "required": ["approved"],
                       "properties": {"approved": {"type": "boolean"}}}}},
        {"name": "act", "code": {"plugin": "p"}, "input": "@approve"},
        {"name": "escalate", "code": {"plugin": "p"}, "after": [{"step": "approve", "on": "failure"}]}
    ]})
}

/// Polls (real time) until run `id` is hibernated in `h`'s engine.
async fn hibernated(h: &H, id: &RunId) -> RunRecord {
    for _ in 0..2000 {
        if h.engine.is_hibernated(id) {
            return h.rec(id).await;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("run {id} never hibernated: {:#?}", h.rec(id).await);
}

async fn submit(h: &H, d: Value) -> RunId {
    h.submit(d).await
}

#[tokio::test]
async fn a_hibernated_run_keeps_no_driver_and_resumes_on_a_signal() {
    let h = harness();
    let id = submit(&h, approval()).await;
    let r = hibernated(&h, &id).await;
    assert_eq!(r.state, RunState::InputRequired);
    assert_eq!((h.engine.active_runs(), h.engine.busy_runs(), h.engine.hibernated_runs()), (0, 0, 1));
    // `wait` waits across hibernation: it returns when the run ends.
    let waiter = {
        let (e, id) = (h.engine.clone(), id.clone());
        tokio::spawn(async move { e.wait(&id).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiter.is_finished(), "a hibernated run has not ended");
    let bad = h.engine.signal(&id, "approve", json!({"approved": 1})).await.unwrap();
    assert!(matches!(bad, SignalAnswer::Invalid { .. }), "{bad:?}");
    hibernated(&h, &id).await; // an invalid signal changes nothing: it sleeps again
    let ok = h.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap();
    assert_eq!(ok, SignalAnswer::Accepted { output: json!({"approved": true}) });
    let r = tokio::time::timeout(Duration::from_secs(10), waiter).await.unwrap().unwrap().unwrap();
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(h.fake.calls_of("act").len(), 1);
    assert_eq!(h.engine.hibernated_runs(), 0);
    check_log(&h, &r);
}

#[tokio::test]
async fn a_hibernated_run_resumes_on_an_event() {
    let h = harness();
    let d = json!({"name": "ev", "steps": [{"name": "reply", "wait": {"event": "go", "match": {"k": "@input.k"}}},
        {"name": "act", "code": {"plugin": "p"}, "input": "@reply"}]});
    let id = h.engine.submit(&def(d), json!({"k": 1}), RunOptions::default()).await.unwrap();
    let r = hibernated(&h, &id).await;
    assert_eq!(r.state, RunState::Working, "an event wait is not input-required");
    assert_eq!(h.engine.busy_runs(), 0);
    let miss = h.engine.emit("go", json!({"k": 2}), None).await.unwrap();
    assert!(miss.delivered.is_empty());
    assert!(h.engine.is_hibernated(&id), "an event that does not match wakes nothing");
    let hit = h.engine.emit("go", json!({"k": 1, "v": "x"}), None).await.unwrap();
    assert_eq!(hit.delivered.len(), 1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(h.fake.calls_of("act")[0].input, json!({"k": 1, "v": "x"}));
    check_log(&h, &r);
}

#[tokio::test]
async fn a_hibernated_waits_timeout_fires_on_time() {
    let h = harness();
    let mut d = approval();
    d["steps"][0]["wait"]["timeout_ms"] = json!(5000);
    let id = submit(&h, d).await;
    hibernated(&h, &id).await;
    h.clock.advance(4999);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(step(&h.rec(&id).await, "approve").state, StepState::Waiting);
    assert!(h.engine.is_hibernated(&id), "not woken before its time");
    h.clock.advance(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "approve").error.as_ref().unwrap().kind, ErrorKind::Timeout);
    assert_eq!(step(&r, "escalate").state, StepState::Succeeded);
    assert_eq!(step(&r, "act").state, StepState::Skipped);
    assert_eq!(h.engine.hibernated_runs(), 0);
    check_log(&h, &r);
}

#[tokio::test]
async fn a_hibernated_runs_deadline_fails_it_on_time() {
    let h = harness();
    let d = json!({"name": "dl", "timeout_ms": 3000, "steps": [{"name": "w", "wait": {"prompt": "?"}}]});
    let id = submit(&h, d).await;
    hibernated(&h, &id).await;
    h.clock.advance(3000);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Failed);
    assert_eq!(r.error.as_ref().unwrap().kind, ErrorKind::Deadline);
    assert!(r.waits.is_empty());
}

#[tokio::test]
async fn canceling_a_hibernated_run_drops_its_entry_and_timer() {
    let h = harness();
    let mut d = approval();
    d["steps"][0]["wait"]["timeout_ms"] = json!(5000);
    let id = submit(&h, d).await;
    hibernated(&h, &id).await;
    let r = h.engine.cancel(&id).await.unwrap();
    assert_eq!(r.state, RunState::Canceled);
    assert!(r.waits.is_empty());
    assert_eq!(step(&r, "approve").state, StepState::Canceled);
    assert_eq!(h.engine.hibernated_runs(), 0);
    let events = h.store.all_events(&id).len();
    h.clock.advance(10_000);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(h.store.all_events(&id).len(), events, "the timer is gone");
    assert_eq!(h.engine.active_runs(), 0);
    let late = h.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap();
    assert_eq!(late, SignalAnswer::AlreadyResolved { state: StepState::Canceled });
    check_log(&h, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_signals_to_a_hibernated_step_one_accepted() {
    let h = harness();
    let id = submit(&h, approval()).await;
    hibernated(&h, &id).await;
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..50 {
        let (e, id) = (h.engine.clone(), id.clone());
        tasks.spawn(async move { e.signal(&id, "approve", json!({"approved": k % 2 == 0})).await.unwrap() });
    }
    let answers: Vec<SignalAnswer> = tasks.join_all().await;
    assert_eq!(answers.iter().filter(|a| a.accepted()).count(), 1, "{answers:?}");
    assert_eq!(answers.iter().filter(|a| matches!(a, SignalAnswer::AlreadyResolved { .. })).count(), 49);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(h.fake.calls_of("act").len(), 1);
    check_log(&h, &r);
}

/// Signals `step` until it is accepted or queued (a step that does not
/// wait yet keeps it); returns how many were (must be one).
async fn signal_until_accepted(e: Engine, id: RunId, step: &str) -> usize {
    for _ in 0..100_000 {
        match e.signal(&id, step, json!({"approved": true})).await.unwrap() {
            SignalAnswer::Accepted { .. } | SignalAnswer::Queued { .. } => return 1,
            SignalAnswer::NotWaiting { .. } => tokio::task::yield_now().await,
            other => panic!("{other:?}"),
        }
    }
    0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_signal_is_lost_while_drivers_hibernate() {
    // Two waits in a row: the second is signaled while the driver that
    // took the first decides to hibernate, over and over.
    let h = harness();
    let w = |n: &str| json!({"name": n, "wait": {"prompt": "?"}});
    let mut second = w("b");
    second["after"] = json!(["a"]);
    let d = json!({"name": "two", "steps": [w("a"), second]});
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let id = submit(&h, d.clone()).await;
        let e = h.engine.clone();
        runs.spawn(async move {
            let a = signal_until_accepted(e.clone(), id.clone(), "a").await;
            let b = signal_until_accepted(e.clone(), id.clone(), "b").await;
            (id, a + b)
        });
    }
    for (id, accepted) in runs.join_all().await {
        assert_eq!(accepted, 2, "run {id}");
        let r = h.wait(&id).await;
        assert_eq!(r.state, RunState::Completed, "run {id}");
        check_log(&h, &r);
    }
    assert_eq!((h.engine.active_runs(), h.engine.hibernated_runs()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_event_is_lost_while_drivers_hibernate() {
    let h = harness();
    let d = json!({"name": "evs", "steps": [{"name": "a", "wait": {"event": "a", "match": {"id": "@input.id"}}},
        {"name": "b", "after": ["a"], "wait": {"event": "b", "match": {"id": "@input.id"}}}]});
    let mut runs = tokio::task::JoinSet::new();
    for n in 0..50 {
        let id = h.engine.submit(&def(d.clone()), json!({"id": n}), RunOptions::default()).await.unwrap();
        let e = h.engine.clone();
        // Each event once, whether its wait is open yet or not: one that
        // comes first is taken when the wait starts.
        runs.spawn(async move {
            for ev in ["a", "b"] {
                e.emit(ev, json!({"id": n}), None).await.unwrap();
                tokio::task::yield_now().await;
            }
            id
        });
    }
    for id in runs.join_all().await {
        assert_eq!(h.wait(&id).await.state, RunState::Completed, "run {id}");
    }
}

#[tokio::test]
async fn abort_all_forgets_hibernated_runs_and_the_next_owner_resumes_them() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    let id = submit(&h1, approval()).await;
    hibernated(&h1, &id).await;
    h1.engine.abort_all();
    assert_eq!(h1.engine.hibernated_runs(), 0);
    // Once forgotten, this engine answers the run in the store and does
    // not start it (it no longer owns it).
    let h2 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    h2.engine.recover().await.unwrap();
    hibernated(&h2, &id).await;
    assert!(h2.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap().accepted());
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(h2.fake.calls_of("act").len(), 1);
    assert!(h1.fake.calls_of("act").is_empty());
}

#[tokio::test]
async fn a_parent_waits_for_its_hibernated_child() {
    let h = harness();
    h.store
        .save_template("kid", &json!({"name": "kid", "steps": [{"name": "w", "wait": {"prompt": "go?"}}]}), 1)
        .await
        .unwrap();
    let d = json!({"name": "p", "steps": [{"name": "c", "workflow": {"template": "kid"}}]});
    let id = submit(&h, d).await;
    let kid = crate::scheduler::children::child_id(&id, "c", None);
    for _ in 0..2000 {
        if h.engine.is_hibernated(&kid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(h.engine.is_hibernated(&kid));
    assert!(!h.engine.is_hibernated(&id), "a parent awaiting a child keeps its driver");
    assert!(h.engine.signal(&kid, "w", json!(7)).await.unwrap().accepted());
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "c").output, Some(json!({"w": 7})));
}

#[tokio::test]
async fn runs_of_one_definition_share_one_parsed_plan() {
    let h = harness();
    let a = h.engine.create_run(&def(approval()), json!({}), RunOptions::default()).await.unwrap();
    let b = h.engine.create_run(&def(approval()), json!({}), RunOptions::default()).await.unwrap();
    let mut other = approval();
    other["steps"][0]["wait"]["prompt"] = json!("another?");
    let c = h.engine.create_run(&def(other), json!({}), RunOptions::default()).await.unwrap();
    let plan = |r: RunRecord| h.engine.sh.plans.get(&r).unwrap();
    let (pa, pb, pc) = (plan(h.rec(&a).await), plan(h.rec(&b).await), plan(h.rec(&c).await));
    assert!(Arc::ptr_eq(&pa, &pb), "one parse for equal definitions");
    assert!(!Arc::ptr_eq(&pa, &pc), "same name and version, other JSON: its own plan");
}
