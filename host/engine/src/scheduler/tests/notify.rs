//! Notifications (a definition's `notify`): each is written in the batch
//! of the transition that causes it, sent through the deliverer with the
//! same id on every try, retried with its backoff, kept `failed` when its
//! tries run out (logged on the ended run) and sent again on demand; one
//! at a time per key, in order.

use super::*;
use crate::delivery::{Deliverer, DeliveryFailure, DeliveryRecord, DeliveryState};
use crate::store::{Batch, DeliveryFilter, Write};

#[derive(Default)]
struct FakeDeliverer {
    tries: Mutex<Vec<DeliveryRecord>>,
    /// Failures still to give, by `on`.
    fail: Mutex<HashMap<String, u32>>,
    always_fail: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl Deliverer for FakeDeliverer {
    async fn deliver(&self, d: &DeliveryRecord) -> Result<(), DeliveryFailure> {
        self.tries.lock().unwrap().push(d.clone());
        let mut fail = self.fail.lock().unwrap();
        let left = fail.entry(d.on.clone()).or_default();
        if self.always_fail.load(Ordering::SeqCst) || *left > 0 {
            *left = left.saturating_sub(1);
            return Err(DeliveryFailure { message: "503 from the receiver".into(), retryable: true });
        }
        Ok(())
    }
}

impl FakeDeliverer {
    fn tries_of(&self, on: &str) -> Vec<DeliveryRecord> {
        self.tries.lock().unwrap().iter().filter(|d| d.on == on).cloned().collect()
    }
}

fn approval(notify: Value) -> Value {
    json!({"name": "ask", "summary": "asked @run.labels.session",
    "notify": notify,
    "steps": [
        {"name": "approve", "wait": {"prompt": "ok?", "schema": {"type": "object"}}},
        {"name": "act", "code": {"plugin": "p"}, "input": "@approve"}
    ]})
}

fn labelled(session: &str) -> RunOptions {
    RunOptions { labels: [("session".to_string(), session.to_string())].into(), ..Default::default() }
}

/// Polls (real time, advancing the manual clock so retries fall due)
/// until `f` holds.
async fn eventually(h: &H, what: &str, f: impl Fn() -> bool) {
    for _ in 0..2000 {
        if f() {
            return;
        }
        h.clock.advance(50);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never: {what}");
}

#[tokio::test]
async fn notifications_commit_with_their_transition_and_go_out_once_delivered() {
    let h = harness();
    // Every batch that writes a delivery, for the atomicity check.
    let batches: Arc<Mutex<Vec<Batch>>> = Arc::default();
    let seen = batches.clone();
    h.store.after_commit(move |b| {
        if b.writes.iter().any(|w| matches!(w, Write::PutDelivery(_))) {
            seen.lock().unwrap().push(b.clone());
        }
        None
    });
    let fake = Arc::new(FakeDeliverer::default());
    fake.fail.lock().unwrap().insert("completed".into(), 2);
    h.engine.set_deliverer(fake.clone());
    let _outbox = h.engine.start_outbox().expect("a deliverer is set");
    let notify = json!([{"on": ["input-required", "resolved:approve", "completed"], "webhook": "ops",
        "key": "@run.labels.session", "retry": {"max_attempts": 5, "initial_delay_ms": 100}}]);
    let id = h.engine.submit(&def(approval(notify)), json!({}), labelled("s1")).await.unwrap();
    h.until(&id, |r| r.state == RunState::InputRequired).await;
    eventually(&h, "the input-required notification", || !fake.tries_of("input-required").is_empty()).await;
    let asked = &fake.tries_of("input-required")[0];
    assert_eq!(asked.body["waiting"][0], json!({"step": "approve", "prompt": "ok?", "schema": {"type": "object"}}));
    assert_eq!(asked.body["summary"], "asked s1");
    assert_eq!(asked.key.as_deref(), Some("s1"));

    h.engine.signal(&id, "approve", json!({"yes": true})).await.unwrap();
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    eventually(&h, "three tries of the completed notification", || fake.tries_of("completed").len() == 3).await;
    let done = fake.tries_of("completed");
    assert!(done.iter().all(|d| d.id == done[0].id), "one id on every try");
    assert_eq!(done[0].body["output"]["act"]["step"], "act", "{}", done[0].body);
    eventually(&h, "delivered", || {
        futures::executor::block_on(h.store.delivery(&done[0].id)).unwrap().unwrap().state == DeliveryState::Delivered
    })
    .await;
    let resolved = fake.tries_of("resolved:approve");
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].body["steps"][0]["result"], json!({"yes": true}), "the answer is in the context");
    // In order per key: each went out after the one before it was delivered.
    let order: Vec<String> = fake.tries.lock().unwrap().iter().map(|d| d.on.clone()).collect();
    assert_eq!(order, ["input-required", "resolved:approve", "completed", "completed", "completed"]);
    // Each delivery was committed in the batch of its transition.
    for b in batches.lock().unwrap().iter() {
        for w in &b.writes {
            let Write::PutDelivery(d) = w else { continue };
            let caused = b.writes.iter().any(|x| match (x, d.on.as_str()) {
                (Write::RunState { to, .. }, on) => to.as_str() == on,
                (Write::StepState { step, from, to, .. }, on) => {
                    on == format!("resolved:{step}") && *from == StepState::Waiting && *to == StepState::Succeeded
                }
                _ => false,
            });
            assert!(caused, "{} was written without its transition", d.on);
        }
    }
}

#[tokio::test]
async fn a_notification_out_of_tries_is_kept_failed_logged_and_sent_again() {
    let h = harness();
    let fake = Arc::new(FakeDeliverer::default());
    fake.always_fail.store(true, Ordering::SeqCst);
    h.engine.set_deliverer(fake.clone());
    let _outbox = h.engine.start_outbox().unwrap();
    let d = json!({"name": "n", "notify": [{"on": ["completed"], "webhook": "ops",
        "retry": {"max_attempts": 2, "initial_delay_ms": 100}}], "steps": [code("a")]});
    let r = h.run(d, json!({})).await;
    let failed = |h: &H| {
        let f = DeliveryFilter { run: Some(r.id.clone()), ..Default::default() };
        futures::executor::block_on(h.store.deliveries(&f)).unwrap()
    };
    eventually(&h, "failed", || failed(&h).first().is_some_and(|d| d.state == DeliveryState::Failed)).await;
    let d = failed(&h).remove(0);
    assert_eq!((d.attempts, d.error.as_deref()), (2, Some("503 from the receiver")));
    assert_eq!(fake.tries_of("completed").len(), 2, "no try past max_attempts");
    eventually(&h, "logged", || h.store.all_events(&r.id).iter().any(|e| e.kind == "notify.failed")).await;
    let ev = h.store.all_events(&r.id).into_iter().find(|e| e.kind == "notify.failed").unwrap();
    assert_eq!(ev.data["delivery"], d.id.as_str());

    fake.always_fail.store(false, Ordering::SeqCst);
    let again = h.engine.resend(&d.id).await.unwrap();
    assert_eq!((again.state, again.attempts), (DeliveryState::Pending, 0));
    eventually(&h, "delivered after the resend", || failed(&h)[0].state == DeliveryState::Delivered).await;
    assert!(fake.tries_of("completed").iter().all(|t| t.id == d.id), "the same id");
    let e = h.engine.resend(&d.id).await.unwrap_err();
    assert!(matches!(e, EngineError::Store(crate::StoreError::Conflict(_))), "only a failed one: {e:?}");
}

#[tokio::test]
async fn a_waiting_run_canceled_notifies_and_keys_go_one_at_a_time() {
    let h = harness();
    let fake = Arc::new(FakeDeliverer::default());
    let notify = json!([{"on": ["canceled"], "webhook": "ops", "key": "@run.labels.session"}]);
    // Two runs of one session: canceled in order, delivered in order.
    let a = h.engine.submit(&def(approval(notify.clone())), json!({}), labelled("s")).await.unwrap();
    let b = h.engine.submit(&def(approval(notify)), json!({}), labelled("s")).await.unwrap();
    for id in [&a, &b] {
        h.until(id, |r| r.state == RunState::InputRequired).await;
    }
    h.engine.cancel(&a).await.unwrap();
    h.engine.cancel(&b).await.unwrap();
    // Written while nobody sends: kept pending, then sent once a sender runs.
    let f = DeliveryFilter::default();
    let pending = h.store.deliveries(&f).await.unwrap();
    assert_eq!(pending.len(), 2, "{pending:?}");
    assert!(pending.iter().all(|d| d.state == DeliveryState::Pending && d.body["state"] == "canceled"));
    h.engine.set_deliverer(fake.clone());
    let _outbox = h.engine.start_outbox().unwrap();
    eventually(&h, "both delivered", || fake.tries_of("canceled").len() == 2).await;
    let runs: Vec<String> = fake.tries_of("canceled").iter().map(|d| d.run.to_string()).collect();
    assert_eq!(runs, [a.to_string(), b.to_string()], "in the order written");
}

#[tokio::test]
async fn each_wait_that_opens_asks_again_and_a_bad_ref_is_kept_failed_and_logged() {
    let h = harness();
    let fake = Arc::new(FakeDeliverer::default());
    h.engine.set_deliverer(fake.clone());
    let _outbox = h.engine.start_outbox().unwrap();
    let d = json!({"name": "two", "notify": [
            {"on": ["input-required"], "webhook": "ops"},
            {"on": ["completed"], "webhook": "ops", "input": {"session": "@run.labels.session"}}],
        "steps": [
            {"name": "a", "wait": {"prompt": "first?"}},
            {"name": "b", "after": ["a"], "wait": {"prompt": "then @a.x?"}}]});
    let id = h.submit(d).await;
    h.until(&id, |r| r.state == RunState::InputRequired).await;
    h.engine.signal(&id, "a", json!({"x": 7})).await.unwrap();
    h.until(&id, |r| r.steps[1].state == StepState::Waiting).await;
    eventually(&h, "asked twice", || fake.tries_of("input-required").len() == 2).await;
    let asked = fake.tries_of("input-required");
    assert_eq!(asked[1].body["waiting"], json!([{"step": "b", "prompt": "then 7?"}]), "the run stayed input-required");
    assert_ne!(asked[0].id, asked[1].id);
    h.engine.signal(&id, "b", json!({})).await.unwrap();
    let r = h.wait(&id).await;
    // The run has no label `session`: kept failed, not sent as null.
    let f = DeliveryFilter { run: Some(r.id.clone()), state: Some(DeliveryState::Failed), ..Default::default() };
    let failed = h.store.deliveries(&f).await.unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].error.as_deref().unwrap().contains("session"), "{:?}", failed[0].error);
    assert!(fake.tries_of("completed").is_empty(), "never sent");
    let ev = h.store.all_events(&r.id).into_iter().find(|e| e.kind == "notify.failed").expect("logged");
    assert_eq!(ev.data["delivery"], failed[0].id.as_str());
}

/// A notification added to a run that started (an A2A push config) goes
/// out with the transitions after it, driven or not; one removed does not;
/// steps cannot change; an ended run changes nothing.
#[tokio::test]
async fn a_runs_notify_changes_after_it_started_for_the_transitions_after() {
    let store = Arc::new(MemStore::new());
    let h = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    let fake = Arc::new(FakeDeliverer::default());
    h.engine.set_deliverer(fake.clone());
    let _outbox = h.engine.start_outbox().unwrap();
    let id = h.engine.submit(&def(approval(json!([]))), json!({}), labelled("s")).await.unwrap();
    let r = h.until(&id, |r| r.state == RunState::InputRequired).await;
    assert!(r.definition.get("notify").is_none_or(|n| n == &json!([])));
    let adding = |name: &'static str| {
        move |d: &Value| {
            let mut d = d.clone();
            let list = d.as_object_mut().unwrap().entry("notify").or_insert(json!([]));
            list.as_array_mut().unwrap().push(json!({"on": ["completed"], "webhook": name}));
            d
        }
    };
    let with = adding("late");
    let what = json!({"added": "late"});
    // Two changes at once: each applies to what the other left.
    let (a, b) =
        tokio::join!(h.engine.redefine(&id, with, what.clone()), h.engine.redefine(&id, adding("later"), what.clone()));
    assert!(a.unwrap() && b.unwrap());
    let names: Vec<Value> =
        h.rec(&id).await.definition["notify"].as_array().unwrap().iter().map(|n| n["webhook"].clone()).collect();
    assert_eq!(names.len(), 2, "neither change was lost: {names:?}");
    let moved = |d: &Value| {
        let mut d = d.clone();
        d["steps"][1]["name"] = json!("other");
        d
    };
    assert!(h.engine.redefine(&id, moved, what.clone()).await.is_err(), "steps cannot change");
    h.engine.signal(&id, "approve", json!({})).await.unwrap();
    assert_eq!(h.wait(&id).await.state, RunState::Completed);
    eventually(&h, "the added notifications", || fake.tries_of("completed").len() == 2).await;
    let evs = h.store.all_events(&id);
    assert_eq!(evs.iter().filter(|e| e.kind == "notify.changed").count(), 2);
    assert!(!h.engine.redefine(&id, with, what.clone()).await.unwrap(), "an ended run changes nothing");

    // With nobody driving the run: committed to the store with the run's
    // next event, and the next owner's driver follows it.
    let id = h.engine.submit(&def(approval(json!([]))), json!({}), labelled("t")).await.unwrap();
    h.until(&id, |r| r.state == RunState::InputRequired).await;
    h.engine.abort_all();
    let h2 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    let fake2 = Arc::new(FakeDeliverer::default());
    h2.engine.set_deliverer(fake2.clone());
    let _outbox2 = h2.engine.start_outbox().unwrap();
    assert!(h2.engine.redefine(&id, with, what).await.unwrap());
    assert_eq!(h2.rec(&id).await.definition["notify"][0]["webhook"], "late");
    h2.engine.recover().await.unwrap();
    h2.engine.signal(&id, "approve", json!({})).await.unwrap();
    assert_eq!(h2.wait(&id).await.state, RunState::Completed);
    eventually(&h2, "the added notification", || fake2.tries_of("completed").len() == 1).await;
}
