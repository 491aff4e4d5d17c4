//! `for_each` on `wait` and `workflow` steps: one wait per item, each
//! answered on its own (signals name the item, events match per item),
//! one child run per item; a restart or a process that drives nothing
//! picks up the items still open; the first failed item fails the step
//! and cancels the children still running.

use super::*;
use crate::ids::ItemIndex;
use crate::outside::WaitKind;
use crate::scheduler::SignalAnswer;
use crate::scheduler::children::child_id;
use crate::store::TemplateStore;
use crate::view::WaitView;

fn per_order() -> Value {
    json!({"name": "approve-each", "steps": [
        {"name": "orders", "code": {"plugin": "p"}},
        {"name": "approve", "for_each": "@orders", "where": {"ref": "@item.total", "gt": 10},
         "wait": {"prompt": "Ship order @item.id?",
            "schema": {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}}},
        {"name": "after", "code": {"plugin": "p"}, "input": "@approve"}
    ]})
}

fn orders(h: &H) {
    h.fake.on("orders", |_| {
        Act::Ok(json!([{"id": "a", "total": 50}, {"id": "b", "total": 5}, {"id": "c", "total": 20}]))
    });
}

async fn item(h: &H, id: &RunId, k: u32, data: Value) -> SignalAnswer {
    h.engine.signal_item(id, "approve", Some(ItemIndex(k)), data).await.unwrap()
}

#[tokio::test]
async fn a_for_each_wait_is_answered_item_by_item() {
    let h = harness();
    orders(&h);
    let id = h.submit(per_order()).await;
    let r = h.until(&id, |r| r.state == RunState::InputRequired).await;
    // One wait per kept item, each with its own prompt (`b` is left out).
    let views = WaitView::all(&r);
    let seen: Vec<(Option<u32>, Option<&str>)> = views.iter().map(|w| (w.item, w.prompt.as_deref())).collect();
    assert_eq!(seen, vec![(Some(0), Some("Ship order a?")), (Some(1), Some("Ship order c?"))]);
    let Some(WaitKind::Items { items }) = r.waits.first().map(|w| &w.kind) else { panic!("{:?}", r.waits) };
    assert_eq!(items.len(), 2);

    // Without an item, with a wrong one, with bad data: refused, nothing changes.
    let no_item = h.engine.signal(&id, "approve", json!({"ok": true})).await.unwrap();
    let SignalAnswer::NotWaiting { message } = &no_item else { panic!("{no_item:?}") };
    assert!(message.contains("say which with `item` (waiting: 0, 1)"), "{message}");
    let SignalAnswer::NotFound { message } = item(&h, &id, 2, json!({"ok": true})).await else { panic!() };
    assert!(message.contains("2 item(s), numbered from 0: there is no item 2"), "{message}");
    assert!(matches!(item(&h, &id, 1, json!({"ok": "yes"})).await, SignalAnswer::Invalid { .. }));

    // Out of order: the second item first. The run still waits for the first.
    assert!(item(&h, &id, 1, json!({"ok": false})).await.accepted());
    let r = h.rec(&id).await;
    assert_eq!(r.state, RunState::InputRequired, "item 0 still waits");
    let open: Vec<Option<u32>> = WaitView::all(&r).iter().map(|w| w.item).collect();
    assert_eq!(open, vec![Some(0)], "an answered item no longer shows as waiting");
    let again = item(&h, &id, 1, json!({"ok": true})).await;
    assert_eq!(again, SignalAnswer::AlreadyResolved { state: StepState::Succeeded });

    assert!(item(&h, &id, 0, json!({"ok": true})).await.accepted());
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    let want = json!([{"ok": true}, {"ok": false}]);
    assert_eq!(step(&r, "approve").output, Some(want.clone()), "the answers in item order");
    assert_eq!(h.fake.calls_of("after")[0].input, want);
    let items: Vec<(Option<ItemIndex>, AttemptState)> =
        r.attempts.iter().filter(|a| a.step == "approve").map(|a| (a.item, a.state)).collect();
    assert_eq!(items.len(), 2, "each answer is an attempt of its item: {items:?}");
    let view = crate::view::RunView::of(&r);
    let counts = crate::view::ItemCounts { succeeded: 2, ..Default::default() };
    assert_eq!(view.steps[1].items, Some(counts), "run_get counts the items");
    check_log(&h, &r);
}

#[tokio::test]
async fn an_item_signal_survives_a_crash_and_applies_where_nothing_drives_the_run() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    orders(&h1);
    let id = h1.submit(per_order()).await;
    h1.until(&id, |r| r.state == RunState::InputRequired).await;
    assert!(item(&h1, &id, 0, json!({"ok": true})).await.accepted());
    h1.engine.abort_all(); // the crash

    // A process that drives nothing (`weft signal` with no worker).
    let fake2 = Arc::new(Fake::default());
    let h2 = harness_with(store.clone(), fake2.clone(), 4);
    let again = item(&h2, &id, 0, json!({"ok": false})).await;
    assert_eq!(again, SignalAnswer::AlreadyResolved { state: StepState::Succeeded }, "the first answer was kept");
    assert!(item(&h2, &id, 1, json!({"ok": true})).await.accepted());
    let r = h2.rec(&id).await;
    assert_eq!(step(&r, "approve").state, StepState::Succeeded);
    assert_eq!(step(&r, "approve").output, Some(json!([{"ok": true}, {"ok": true}])));
    assert_eq!(r.state, RunState::Working, "no signal wait left");
    assert!(r.waits.is_empty());
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(fake2.calls_of("after")[0].input, json!([{"ok": true}, {"ok": true}]));
    check_log(&h2, &r);
}

#[tokio::test]
async fn a_restarted_driver_keeps_the_answered_items() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    orders(&h1);
    let mut d = per_order();
    d["steps"][1]["wait"]["timeout_ms"] = json!(60_000);
    let id = h1.submit(d).await;
    h1.until(&id, |r| r.state == RunState::InputRequired).await;
    assert!(item(&h1, &id, 1, json!({"ok": true})).await.accepted());
    h1.engine.abort_all();
    // The next owner loads the run: item 1 answered, item 0 waits; then
    // the timeout passes and names the item that had no answer.
    let h2 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    h2.engine.recover().await.unwrap();
    h2.engine.start(&id);
    let again = item(&h2, &id, 1, json!({"ok": false})).await;
    assert_eq!(again, SignalAnswer::AlreadyResolved { state: StepState::Succeeded });
    h2.clock.advance(61_000);
    h2.engine.start(&id);
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "approve").error.clone().unwrap();
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(e.message.contains("no signal for item(s) 0 within timeout_ms = 60000"), "{}", e.message);
}

#[tokio::test]
async fn events_resolve_the_items_whose_match_holds() {
    let h = harness();
    let d = json!({"name": "paid", "steps": [
        {"name": "pay", "for_each": "@input.orders", "wait": {"event": "paid", "match": {"order": "@item"}}}
    ]});
    let id = h.engine.submit(&def(d), json!({"orders": ["o1", "o2"]}), RunOptions::default()).await.unwrap();
    h.until(&id, |r| !r.waits.is_empty()).await;
    let a = h.engine.emit("paid", json!({"order": "o2", "amount": 2}), None).await.unwrap();
    assert_eq!(a.delivered.len(), 1);
    let none = h.engine.emit("paid", json!({"order": "o9"}), None).await.unwrap();
    assert!(none.delivered.is_empty(), "no item matches");
    let r = h.rec(&id).await;
    assert_eq!(WaitView::all(&r).iter().map(|w| w.item).collect::<Vec<_>>(), vec![Some(0)]);
    h.engine.emit("paid", json!({"order": "o1", "amount": 1}), None).await.unwrap();
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "pay").output, Some(json!([{"order": "o1", "amount": 1}, {"order": "o2", "amount": 2}])));
}

async fn save(h: &H, d: Value) {
    let name = d["name"].as_str().unwrap().to_string();
    h.store.save_template(&name, &d, 1).await.unwrap();
}

#[tokio::test]
async fn one_child_run_per_item() {
    let h = harness();
    h.fake.on("double", |r| Act::Ok(json!(r.input["n"].as_i64().unwrap() * 2)));
    save(
        &h,
        json!({"name": "doubler", "steps": [{"name": "double", "code": {"plugin": "p"}, "input": {"n": "@input.n"}}],
        "output": "@double"}),
    )
    .await;
    let d = json!({"name": "parent", "steps": [
        {"name": "each", "for_each": "@input.ns", "workflow": {"template": "doubler"}, "input": {"n": "@item"}}]});
    let r = h.run(d.clone(), json!({"ns": [1, 2, 3]})).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "each").output, Some(json!([2, 4, 6])));
    for k in 0..3u32 {
        let c = h.rec(&child_id(&r.id, "each", Some(ItemIndex(k)))).await;
        assert_eq!((c.parent.as_ref(), c.state, &c.input), (Some(&r.id), RunState::Completed, &json!({"n": k + 1})));
    }
    let r = h.run(d, json!({"ns": []})).await;
    assert_eq!(step(&r, "each").output, Some(json!([])), "no item: no child, an empty list");
}

#[tokio::test]
async fn a_failed_child_fails_the_step_and_cancels_the_others() {
    let h = harness();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("work", move |r| match r.input["n"].as_i64() {
        Some(2) => Act::Fail(StepError::new(ErrorKind::GuestError, "bad item", false)),
        _ => Act::Gate(g.clone(), json!("done")),
    });
    save(
        &h,
        json!({"name": "worker", "steps": [{"name": "work", "code": {"plugin": "p"}, "input": {"n": "@input.n"}}]}),
    )
    .await;
    let d = json!({"name": "parent", "steps": [
        {"name": "each", "for_each": [1, 2, 3], "workflow": {"template": "worker"}, "input": {"n": "@item"}}]});
    let r = h.run(d, json!({})).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "each").error.clone().unwrap();
    assert!(e.message.starts_with("item 1: child run"), "{}", e.message);
    for k in [0u32, 2] {
        let kid = child_id(&r.id, "each", Some(ItemIndex(k)));
        let c = h.until(&kid, |c| c.state.is_terminal()).await;
        assert_eq!(c.state, RunState::Canceled, "item {k}'s child is canceled with the step");
    }
}

#[tokio::test]
async fn concurrency_caps_the_child_runs_and_a_restart_keeps_the_finished_ones() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 8);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    h1.fake.on("work", move |r| Act::Gate(g.clone(), json!(r.input["n"].as_i64().unwrap() * 10)));
    save(
        &h1,
        json!({"name": "worker", "steps": [{"name": "work", "code": {"plugin": "p"}, "input": {"n": "@input.n"}}],
        "output": "@work"}),
    )
    .await;
    let d = json!({"name": "parent", "steps": [{"name": "each", "for_each": [1, 2, 3, 4], "concurrency": 2,
        "workflow": {"template": "worker"}, "input": {"n": "@item"}}]});
    let id = h1.submit(d).await;
    let children = |h: &H| {
        let filter = crate::store::RunFilter { parent: Some(id.clone()), ..Default::default() };
        let s = h.store.clone();
        async move { s.list_runs(&filter).await.unwrap().len() }
    };
    h1.until_calls("work", 2).await;
    assert_eq!(children(&h1).await, 2, "two children at a time");
    gate.add_permits(1);
    h1.until_calls("work", 3).await;
    let r = h1.until(&id, |r| r.attempts.iter().any(|a| a.step == "each")).await;
    assert_eq!(children(&h1).await, 3, "the third starts when one ends");
    let done: Vec<Option<ItemIndex>> = r.attempts.iter().filter(|a| a.step == "each").map(|a| a.item).collect();
    h1.engine.abort_all(); // the crash: one item answered, two children running

    let fake2 = Arc::new(Fake::default());
    let h2 = harness_with(store.clone(), fake2.clone(), 8);
    fake2.on("work", |r| Act::Ok(json!(r.input["n"].as_i64().unwrap() * 10)));
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "each").output, Some(json!([10, 20, 30, 40])));
    assert_eq!(children(&h2).await, 4, "one child per item, none twice");
    let k = done[0].unwrap().0 as i64 + 1;
    let again: Vec<i64> = fake2.calls_of("work").iter().map(|c| c.input["n"].as_i64().unwrap()).collect();
    assert!(!again.contains(&k), "the item answered before the crash did not run again: {again:?}");
}
