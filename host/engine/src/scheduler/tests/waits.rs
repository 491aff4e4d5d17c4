//! `wait` steps: signals (validated, first valid wins), events (match,
//! dedupe by id), timeouts, joins over waits, crash and restart, and the
//! path for runs no driver drives.

use super::*;
use crate::scheduler::{Delivered, EmitAnswer, SignalAnswer};
use crate::store::Write;

fn approval() -> Value {
    json!({"name": "approve-flow", "steps": [
        {"name": "notify", "code": {"plugin": "p"}, "input": {"who": "@input.who"}},
        {"name": "approve", "after": ["notify"], "wait": {"prompt": "Approve the refund for @input.who?",
            "schema": {"type": "object", "required": ["approved"],
                       "properties": {"approved": {"type": "boolean"}}},
            "timeout_ms": 86400000}},
        {"name": "act", "code": {"plugin": "p"}, "input": "@approve"},
        {"name": "escalate", "code": {"plugin": "p"}, "after": [{"step": "approve", "on": "failure"}]}
    ]})
}

async fn waiting(h: &H, id: &RunId, step_name: &str) -> RunRecord {
    h.until(id, |r| step(r, step_name).state == StepState::Waiting).await
}

#[tokio::test]
async fn a_signal_is_validated_and_the_first_valid_one_wins() {
    let h = harness();
    let id = h.engine.submit(&def(approval()), json!({"who": "ann"}), RunOptions::default()).await.unwrap();
    let r = waiting(&h, &id, "approve").await;
    let r =
        if r.state == RunState::InputRequired { r } else { h.until(&id, |r| r.state == RunState::InputRequired).await };
    assert_eq!(r.waits.len(), 1, "the wait is stored");
    match &r.waits[0].kind {
        crate::outside::WaitKind::Signal { prompt, schema, reason, .. } => {
            assert_eq!(prompt.as_deref(), Some("Approve the refund for ann?"), "the prompt's refs are resolved");
            assert_eq!(schema.as_ref().unwrap()["required"], json!(["approved"]));
            assert_eq!(*reason, RunState::InputRequired);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.waits[0].until, Some(step(&r, "approve").next_attempt_at.unwrap()));

    let bad = h.engine.signal(&id, "approve", json!({"approved": "yes"})).await.unwrap();
    let SignalAnswer::Invalid { errors } = &bad else { panic!("{bad:?}") };
    assert_eq!(errors[0].path, "/approved", "the schema error names the field");
    assert_eq!(h.rec(&id).await.state, RunState::InputRequired, "still waiting");

    let wrong_step = h.engine.signal(&id, "act", json!({})).await.unwrap();
    assert!(matches!(wrong_step, SignalAnswer::NotWaiting { .. }), "{wrong_step:?}");
    let no_step = h.engine.signal(&id, "nope", json!({})).await.unwrap();
    assert!(matches!(no_step, SignalAnswer::NotFound { .. }), "{no_step:?}");

    let ok = h.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap();
    assert_eq!(ok, SignalAnswer::Accepted { output: json!({"approved": true}) });
    let again = h.engine.signal(&id, "approve", json!({"approved": false})).await.unwrap();
    assert_eq!(again, SignalAnswer::AlreadyResolved { state: StepState::Succeeded });

    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(h.fake.calls_of("act")[0].input, json!({"approved": true}));
    assert_eq!(step(&r, "escalate").state, StepState::Skipped);
    assert!(r.waits.is_empty(), "the wait closed with its step");
    check_log(&h, &r);
    let kinds: Vec<String> = h.store.all_events(&id).into_iter().map(|e| e.kind).collect();
    let i = kinds.iter().position(|k| k == "run.input-required").expect("input-required logged");
    assert_eq!(kinds[i + 1..].iter().find(|k| k.starts_with("run.")).map(String::as_str), Some("run.working"));
}

#[tokio::test]
async fn fifty_concurrent_signals_one_accepted() {
    let h = harness();
    let id = h.engine.submit(&def(approval()), json!({"who": "x"}), RunOptions::default()).await.unwrap();
    waiting(&h, &id, "approve").await;
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..50 {
        let e = h.engine.clone();
        let id = id.clone();
        tasks.spawn(async move { e.signal(&id, "approve", json!({"approved": k % 2 == 0})).await.unwrap() });
    }
    let answers: Vec<SignalAnswer> = tasks.join_all().await;
    assert_eq!(answers.iter().filter(|a| a.accepted()).count(), 1, "{answers:?}");
    assert_eq!(answers.iter().filter(|a| matches!(a, SignalAnswer::AlreadyResolved { .. })).count(), 49);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(h.fake.calls_of("act").len(), 1);
}

#[tokio::test]
async fn a_wait_timeout_is_a_timeout_error_a_failure_edge_handles() {
    let h = harness();
    let mut d = approval();
    d["steps"][1]["wait"]["timeout_ms"] = json!(5000);
    let id = h.engine.submit(&def(d), json!({"who": "x"}), RunOptions::default()).await.unwrap();
    waiting(&h, &id, "approve").await;
    h.clock.advance(4999);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(step(&h.rec(&id).await, "approve").state, StepState::Waiting);
    h.clock.advance(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    let e = step(&r, "approve").error.clone().unwrap();
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert_eq!(step(&r, "escalate").state, StepState::Succeeded);
    assert_eq!(step(&r, "act").state, StepState::Skipped);
    assert!(r.waits.is_empty());
    let late = h.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap();
    assert_eq!(late, SignalAnswer::AlreadyResolved { state: StepState::Failed });
}

#[tokio::test]
async fn events_match_their_fields_and_an_id_resolves_once() {
    let h = harness();
    h.fake.on("send", |r| Act::Ok(json!({"channel": r.input["channel"], "message_id": 7})));
    let d = json!({"name": "chat", "steps": [
        {"name": "send", "code": {"plugin": "p"}, "input": {"channel": "@input.channel"}},
        {"name": "reply", "wait": {"event": "chat.reply",
            "match": {"channel": "@send.channel", "reply_to": "@send.message_id"}}}]});
    let a = h.engine.submit(&def(d.clone()), json!({"channel": "c1"}), RunOptions::default()).await.unwrap();
    let b = h.engine.submit(&def(d), json!({"channel": "c2"}), RunOptions::default()).await.unwrap();
    waiting(&h, &a, "reply").await;
    waiting(&h, &b, "reply").await;
    assert_eq!(h.rec(&a).await.state, RunState::Working, "an event wait is not input-required");

    let none = h.engine.emit("chat.reply", json!({"channel": "c3", "reply_to": 7}), Some("e1".into())).await.unwrap();
    assert!(none.delivered.is_empty());
    let other = h.engine.emit("chat.other", json!({"channel": "c1", "reply_to": 7}), None).await.unwrap();
    assert!(other.delivered.is_empty());
    let hit: EmitAnswer = h
        .engine
        .emit("chat.reply", json!({"channel": "c1", "reply_to": 7, "text": "hi"}), Some("e2".into()))
        .await
        .unwrap();
    assert_eq!(hit.delivered.len(), 1);
    assert_eq!(hit.delivered[0].run, a);
    let ra = h.wait(&a).await;
    assert_eq!(ra.state, RunState::Completed);
    assert_eq!(step(&ra, "reply").output, Some(json!({"channel": "c1", "reply_to": 7, "text": "hi"})));

    // The same id again, now with data that would match b: nothing.
    let dup = h.engine.emit("chat.reply", json!({"channel": "c2", "reply_to": 7}), Some("e2".into())).await.unwrap();
    assert!(dup.duplicate);
    assert_eq!(dup.delivered.len(), 1, "the first emit's deliveries are reported");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(step(&h.rec(&b).await, "reply").state, StepState::Waiting, "a repeated id resolves nothing");
    let fresh = h.engine.emit("chat.reply", json!({"channel": "c2", "reply_to": 7}), Some("e3".into())).await.unwrap();
    assert_eq!(fresh.delivered.len(), 1);
    assert_eq!(h.wait(&b).await.state, RunState::Completed);
}

/// An event `emit` stores is delivered by that call, which answers what it
/// resolved. The owner's poll (`process_inbox`), which the very commit that
/// stores the event wakes, must not handle it first: the `emit` then found
/// the wait closed and answered `delivered: []` (seen once as a flaky
/// end-to-end test: `serve_waits`, run B of `waits_check.py`).
#[tokio::test]
async fn an_emit_answers_what_it_delivered_though_the_inbox_poll_runs_meanwhile() {
    let h = harness();
    let d = json!({"name": "paid", "output": "@paid",
        "steps": [{"name": "paid", "wait": {"event": "order.paid", "match": {"order": "@input.order"}}}]});
    let b = h.engine.submit(&def(d), json!({"order": "B"}), RunOptions::default()).await.unwrap();
    waiting(&h, &b, "paid").await;
    // As soon as an event is stored, the poll runs: at once if it can take
    // the inbox, else (as it does) after whoever holds it.
    let sh = Arc::downgrade(&h.engine.sh);
    let polled = Arc::new(AtomicUsize::new(0));
    let p = polled.clone();
    h.store.after_commit(move |batch| {
        let event = batch.writes.iter().any(|w| matches!(w, Write::InboxPut(m) if m.kind.event_id().is_some()));
        let sh = sh.upgrade().filter(|sh| event && sh.inbox.try_lock().is_ok())?;
        let p = p.clone();
        Some(Box::pin(async move {
            p.fetch_add(Engine::from_shared(sh).process_inbox().await.unwrap(), Ordering::SeqCst);
        }))
    });
    let r = h.engine.emit("order.paid", json!({"order": "B", "amount": 4}), None).await.unwrap();
    assert_eq!(r.delivered, vec![Delivered { run: b.clone(), step: "paid".into() }], "{r:?}");
    assert_eq!(polled.load(Ordering::SeqCst), 0, "the poll did not handle the emitted event");
    assert_eq!(h.engine.process_inbox().await.unwrap(), 0, "the event is answered");
    let rec = h.wait(&b).await;
    assert_eq!((rec.state, rec.output), (RunState::Completed, Some(json!({"order": "B", "amount": 4}))));
}

#[tokio::test]
async fn join_any_over_two_approvers_cancels_the_other_wait() {
    let h = harness();
    let w = |who: &str| json!({"name": who, "wait": {"prompt": format!("{who}?")}});
    let d = json!({"name": "two", "steps": [w("ann"), w("bob"),
        {"name": "act", "code": {"plugin": "p"}, "after": ["ann", "bob"], "join": "any"}]});
    let id = h.submit(d).await;
    h.until(&id, |r| r.waits.len() == 2).await;
    assert!(h.engine.signal(&id, "bob", json!("ok")).await.unwrap().accepted());
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "ann").state, StepState::Canceled, "the other approver's wait is no longer needed");
    assert_eq!(step(&r, "act").state, StepState::Succeeded);
    assert!(r.waits.is_empty());
}

#[tokio::test]
async fn race_between_a_reply_and_a_timer() {
    let h = harness();
    let d = json!({"name": "race", "steps": [
        {"name": "reply", "wait": {"event": "reply"}},
        {"name": "timer", "sleep": {"ms": 1000}},
        {"name": "next", "code": {"plugin": "p"}, "after": ["reply", "timer"], "join": "race",
         "input": {"reply": "@reply", "timer": "@timer"}}]});
    // The timer wins.
    let id = h.submit(d.clone()).await;
    h.until(&id, |r| r.waits.len() == 2).await;
    h.clock.advance(1000);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "reply").state, StepState::Canceled);
    assert_eq!(step(&r, "next").state, StepState::Succeeded);
    // The reply wins.
    let id = h.submit(d).await;
    h.until(&id, |r| r.waits.len() == 2).await;
    assert_eq!(h.engine.emit("reply", json!({"t": 1}), None).await.unwrap().delivered.len(), 1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "timer").state, StepState::Canceled);
    assert_eq!(h.fake.calls_of("next").last().unwrap().input["reply"], json!({"t": 1}));
}

#[tokio::test]
async fn a_waiting_run_resumes_after_a_crash_and_undriven_signals_apply_in_the_store() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    let id = h1.engine.submit(&def(approval()), json!({"who": "x"}), RunOptions::default()).await.unwrap();
    waiting(&h1, &id, "approve").await;
    h1.engine.abort_all(); // the crash

    // A process that drives nothing (like `weft signal` with no worker):
    // the answer is committed straight to the store.
    let fake2 = Arc::new(Fake::default());
    let h2 = harness_with(store.clone(), fake2.clone(), 4);
    let bad = h2.engine.signal(&id, "approve", json!({})).await.unwrap();
    assert!(matches!(bad, SignalAnswer::Invalid { .. }));
    assert!(h2.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap().accepted());
    let r = h2.rec(&id).await;
    assert_eq!(step(&r, "approve").state, StepState::Succeeded);
    assert_eq!(r.state, RunState::Working, "no signal wait left");
    assert!(r.waits.is_empty());
    assert!(fake2.calls_of("act").is_empty(), "nothing runs until an owner drives the run");
    // The next owner resumes it.
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(fake2.calls_of("act").len(), 1);
    assert_eq!(fake2.calls_of("notify").len(), 0, "succeeded steps never run again");
    check_log(&h2, &r);
}

#[tokio::test]
async fn a_wait_timeout_is_rearmed_after_a_restart() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    let mut d = approval();
    d["steps"][1]["wait"]["timeout_ms"] = json!(10_000);
    let id = h1.engine.submit(&def(d), json!({"who": "x"}), RunOptions::default()).await.unwrap();
    waiting(&h1, &id, "approve").await;
    let due = h1.clock.now_ms() + 10_000;
    h1.engine.abort_all();
    let h2 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    h2.clock.set(due + 60_000);
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(step(&r, "approve").error.as_ref().unwrap().kind, ErrorKind::Timeout);
    assert_eq!(step(&r, "escalate").state, StepState::Succeeded);
}

#[tokio::test]
async fn the_inbox_carries_signals_and_events_from_other_processes() {
    let h = harness();
    let id = h.engine.submit(&def(approval()), json!({"who": "x"}), RunOptions::default()).await.unwrap();
    waiting(&h, &id, "approve").await;
    // Another process (same store, no driver of its own) posts.
    let other = harness_with(h.store.clone(), Arc::new(Fake::default()), 1);
    let bad = other.engine.post_signal(&id, "approve", None, json!({"approved": 1})).await.unwrap();
    let good = other.engine.post_signal(&id, "approve", None, json!({"approved": true})).await.unwrap();
    let late = other.engine.post_signal(&id, "approve", None, json!({"approved": false})).await.unwrap();
    assert_eq!(other.engine.inbox_answer(&good).await.unwrap(), None, "pending until the owner looks");
    assert_eq!(h.engine.process_inbox().await.unwrap(), 3);
    let answer = |v: Option<Value>| serde_json::from_value::<SignalAnswer>(v.unwrap()).unwrap();
    assert!(matches!(answer(other.engine.inbox_answer(&bad).await.unwrap()), SignalAnswer::Invalid { .. }));
    assert!(answer(other.engine.inbox_answer(&good).await.unwrap()).accepted());
    assert!(matches!(answer(other.engine.inbox_answer(&late).await.unwrap()), SignalAnswer::AlreadyResolved { .. }));
    assert_eq!(h.engine.process_inbox().await.unwrap(), 0, "answered messages are not handled again");
    assert_eq!(h.wait(&id).await.state, RunState::Completed);
    // A duplicate event id is refused at the door.
    assert!(other.engine.post_event("x", json!({}), Some("same".into())).await.unwrap().is_ok());
    h.engine.process_inbox().await.unwrap();
    let dup = other.engine.post_event("x", json!({}), Some("same".into())).await.unwrap();
    assert!(dup.unwrap_err().duplicate);
}

#[tokio::test]
async fn canceling_a_waiting_run_closes_its_wait() {
    let h = harness();
    let id = h.engine.submit(&def(approval()), json!({"who": "x"}), RunOptions::default()).await.unwrap();
    h.until(&id, |r| r.state == RunState::InputRequired).await;
    let r = h.engine.cancel(&id).await.unwrap();
    assert_eq!(r.state, RunState::Canceled);
    assert!(r.waits.is_empty());
    let late = h.engine.signal(&id, "approve", json!({"approved": true})).await.unwrap();
    assert_eq!(late, SignalAnswer::AlreadyResolved { state: StepState::Canceled });
}
