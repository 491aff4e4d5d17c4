//! Signals and events that arrive before their wait: a signal is checked
//! and queued, then taken when the wait starts (the first one; the others
//! are settled), across a restart; capped and expired. An event emitted
//! after the run began and before the wait started is taken once per run.

use super::*;
use crate::ItemIndex;
use crate::scheduler::SignalAnswer;
use crate::view::WaitView;

/// `first` (gated) runs before the wait `approve`, then `act` reads it.
fn gated_approval() -> Value {
    json!({"name": "early", "steps": [
        {"name": "first", "code": {"plugin": "p"}},
        {"name": "approve", "after": ["first"], "wait": {"prompt": "ok?",
            "schema": {"type": "object", "required": ["approved"],
                       "properties": {"approved": {"type": "boolean"}}}}},
        {"name": "act", "code": {"plugin": "p"}, "input": "@approve"}
    ]})
}

fn gate(h: &H, step: &str) -> Arc<Semaphore> {
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on(step, move |_| Act::Gate(g.clone(), json!("done")));
    gate
}

fn inbox_answer(h: &H, id: &str) -> Value {
    h.store.inbox_message(id).and_then(|m| m.answer).expect("the message's answer")
}

fn queued_id(a: &SignalAnswer) -> String {
    let SignalAnswer::Queued { message } = a else { panic!("not queued: {a:?}") };
    let i = message.find("m_").expect("the message id");
    message[i..].split(|c: char| c == ')' || c.is_whitespace()).next().unwrap().to_string()
}

#[tokio::test]
async fn a_signal_before_the_wait_is_queued_checked_and_taken_when_it_waits() {
    let h = harness();
    let g = gate(&h, "first");
    let id = h.submit(gated_approval()).await;
    h.until_calls("first", 1).await;

    let bad = h.engine.signal(&id, "approve", json!({"approved": "yes"})).await.unwrap();
    let SignalAnswer::Invalid { errors } = &bad else { panic!("checked at once: {bad:?}") };
    assert_eq!(errors[0].path, "/approved");
    let first = h.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap();
    let q1 = queued_id(&first);
    assert_eq!(inbox_answer(&h, &q1)["status"], "queued");
    // One per step: the second is not kept (and says which one is).
    let second = h.engine.signal(&id, "approve", json!({"approved": false})).await.unwrap();
    let SignalAnswer::NotWaiting { message } = &second else { panic!("{second:?}") };
    assert!(message.contains("already queued") && message.contains(&q1), "{message}");
    let code = h.engine.signal(&id, "act", json!({})).await.unwrap();
    assert!(matches!(code, SignalAnswer::NotWaiting { .. }), "a code step takes no signal: {code:?}");
    assert_eq!(h.rec(&id).await.state, RunState::Working, "nothing waits yet");

    g.add_permits(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(h.fake.calls_of("act")[0].input, json!({"approved": true}), "the queued signal was taken");
    assert_eq!(inbox_answer(&h, &q1)["status"], "accepted");
    let events = h.store.all_events(&id);
    assert_eq!(events.iter().filter(|e| e.kind == "signal.queued").count(), 1);
    check_log(&h, &r);
}

#[tokio::test]
async fn a_queued_signal_survives_a_restart() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    let _g = gate(&h1, "first");
    let id = h1.submit(gated_approval()).await;
    h1.until_calls("first", 1).await;
    let q = h1.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap();
    queued_id(&q);
    h1.engine.abort_all();

    let h2 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "the wait took the queued signal after the restart");
    assert_eq!(h2.fake.calls_of("act")[0].input, json!({"approved": true}));
}

#[tokio::test]
async fn queued_signals_are_capped_and_expire() {
    let cfg = EngineConfig { max_queued_signals: 1, early_ttl_ms: 60_000, ..EngineConfig::default() };
    let h = harness_config(Arc::new(MemStore::new()), Arc::new(Fake::default()), cfg);
    let g = gate(&h, "first");
    let mut d = gated_approval();
    d["steps"][1]["wait"]["timeout_ms"] = json!(3_600_000);
    d["steps"].as_array_mut().unwrap().push(json!({"name": "other", "after": ["first"], "wait": {"prompt": "?"}}));
    let id = h.submit(d).await;
    h.until_calls("first", 1).await;
    let q = queued_id(&h.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap());
    let full = h.engine.signal(&id, "other", json!("x")).await.unwrap();
    let SignalAnswer::NotWaiting { message } = &full else { panic!("{full:?}") };
    assert!(message.contains("max_queued_signals"), "{message}");

    h.clock.advance(61_000);
    g.add_permits(1);
    let r = h.until(&id, |r| r.state == RunState::InputRequired).await;
    assert!(step(&r, "approve").state == StepState::Waiting, "the expired signal was not taken");
    h.until(&id, |_| inbox_answer(&h, &q)["status"] == "not_waiting").await;
    assert!(inbox_answer(&h, &q)["message"].as_str().unwrap().contains("early_ttl_ms"));
    assert!(h.engine.signal(&id, "approve", json!({"approved": false})).await.unwrap().accepted());
    assert!(h.engine.signal(&id, "other", json!("y")).await.unwrap().accepted());
    assert_eq!(h.wait(&id).await.state, RunState::Completed);
}

#[tokio::test]
async fn a_for_each_wait_takes_queued_items_and_refuses_one_without_item() {
    let h = harness();
    let g = gate(&h, "first");
    let d = json!({"name": "each", "steps": [
        {"name": "first", "code": {"plugin": "p"}},
        {"name": "approve", "after": ["first"], "for_each": "@input.orders", "wait": {"prompt": "@item?"}}
    ]});
    let id = h.engine.submit(&def(d), json!({"orders": ["a", "b"]}), RunOptions::default()).await.unwrap();
    h.until_calls("first", 1).await;
    let none = h.engine.signal(&id, "approve", json!("x")).await.unwrap();
    assert!(matches!(none, SignalAnswer::NotWaiting { .. }), "{none:?}");
    let one = h.engine.signal_item(&id, "approve", Some(ItemIndex(1)), json!("B")).await.unwrap();
    let far = h.engine.signal_item(&id, "approve", Some(ItemIndex(7)), json!("?")).await.unwrap();
    let far = queued_id(&far);
    queued_id(&one);
    g.add_permits(1);
    let r = h.until(&id, |r| r.attempts.iter().any(|a| a.step == "approve" && a.item == Some(ItemIndex(1)))).await;
    assert_eq!(WaitView::all(&r).iter().map(|w| w.item).collect::<Vec<_>>(), vec![Some(0)], "item 1 took its answer");
    h.until(&id, |_| inbox_answer(&h, &far)["status"] == "not_found").await;
    assert!(h.engine.signal_item(&id, "approve", Some(ItemIndex(0)), json!("A")).await.unwrap().accepted());
    let r = h.wait(&id).await;
    assert_eq!(step(&r, "approve").output, Some(json!(["A", "B"])));
}

#[tokio::test]
async fn an_event_before_the_wait_is_taken_once_per_run() {
    let h = harness();
    let g = gate(&h, "first");
    let d = json!({"name": "replies", "steps": [
        {"name": "first", "code": {"plugin": "p"}},
        {"name": "r1", "after": ["first"], "wait": {"event": "reply", "match": {"raw": {"to": "m1"}}}},
        {"name": "r2", "after": ["r1"], "wait": {"event": "reply", "match": {"raw": {"to": "m1"}}}}
    ]});
    let before = h.engine.emit("reply", json!({"raw": {"to": "m1", "n": 0}}), None).await.unwrap();
    assert!(before.delivered.is_empty());
    h.clock.advance(1);
    let id = h.submit(d).await;
    h.until_calls("first", 1).await;
    h.clock.advance(1);
    h.engine.emit("reply", json!({"raw": {"to": "other", "n": 1}}), None).await.unwrap();
    let e2 = h.engine.emit("reply", json!({"raw": {"to": "m1", "n": 2}}), Some("e-2".into())).await.unwrap();
    assert!(e2.delivered.is_empty(), "nothing waits yet");
    g.add_permits(1);
    // r1 takes the event emitted after the run began (not the one before
    // it, nor the one whose match fails); r2 does not take it again.
    let r = h.until(&id, |r| step(r, "r2").state == StepState::Waiting).await;
    assert_eq!(step(&r, "r1").output, Some(json!({"raw": {"to": "m1", "n": 2}})));
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(step(&h.rec(&id).await, "r2").state, StepState::Waiting, "an event is taken once per run");
    h.engine.emit("reply", json!({"raw": {"to": "m1", "n": 3}}), None).await.unwrap();
    let r = h.wait(&id).await;
    assert_eq!(step(&r, "r2").output, Some(json!({"raw": {"to": "m1", "n": 3}})));
    let taken =
        h.store.all_events(&id).into_iter().find(|e| e.step.as_deref() == Some("r1") && e.kind == "step.succeeded");
    assert_eq!(taken.unwrap().data["event_id"], "e-2");
}

#[tokio::test]
async fn signals_still_queued_when_the_run_ends_are_answered() {
    let h = harness();
    let _g = gate(&h, "first");
    let id = h.submit(gated_approval()).await;
    h.until_calls("first", 1).await;
    let q = queued_id(&h.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap());
    h.engine.cancel(&id).await.unwrap();
    h.until(&id, |_| inbox_answer(&h, &q)["status"] != "queued").await;
    let a = inbox_answer(&h, &q);
    assert_eq!(a["status"], "already_resolved", "the step was canceled with its run: {a}");
    assert_eq!(a["state"], "canceled");
    let late = h.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap();
    assert!(matches!(late, SignalAnswer::AlreadyResolved { .. }), "{late:?}");
}
