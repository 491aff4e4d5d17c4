//! `workflow` steps (child runs: pinning, depth cap, cancel propagation,
//! a template that starts itself, a crash between parking and creating
//! the child), run queues by `concurrency_key`, and cron schedules.

use super::*;
use crate::scheduler::children::child_id;
use crate::store::{RunStore, TemplateStore};

async fn save(h: &H, d: Value) -> u32 {
    let name = d["name"].as_str().unwrap().to_string();
    h.store.save_template(&name, &d, 1).await.unwrap()
}

#[tokio::test]
async fn a_child_run_gives_its_output_to_the_parent_step() {
    let h = harness();
    h.fake.on("double", |r| Act::Ok(json!(r.input["n"].as_i64().unwrap() * 2)));
    save(
        &h,
        json!({"name": "doubler", "input_schema": {"type": "object", "required": ["n"]},
        "steps": [{"name": "double", "code": {"plugin": "p"}, "input": {"n": "@input.n"}}],
        "output": "@double"}),
    )
    .await;
    let d = json!({"name": "parent", "steps": [
        {"name": "child", "workflow": {"template": "doubler"}, "input": {"n": "@input.n"}},
        {"name": "after", "code": {"plugin": "p"}, "input": "@child"}]});
    let r = h.run(d, json!({"n": 21})).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "child").output, Some(json!(42)));
    assert_eq!(h.fake.calls_of("after")[0].input, json!(42));
    // The plan pinned the template's version; the child records its parent.
    assert_eq!(r.definition["steps"][0]["workflow"]["version"], 1);
    let c = h.rec(&child_id(&r.id, "child", None)).await;
    assert_eq!((c.parent.as_ref(), c.depth, c.state), (Some(&r.id), 1, RunState::Completed));
    assert_eq!(c.template, "doubler");
    let filter = crate::store::RunFilter { parent: Some(r.id.clone()), ..Default::default() };
    assert_eq!(h.store.list_runs(&filter).await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_unknown_template_is_refused_at_creation_and_a_bad_child_input_fails_the_step() {
    let h = harness();
    let d = json!({"name": "p", "steps": [{"name": "c", "workflow": {"template": "nope"}}]});
    let e = h.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap_err();
    assert!(e.to_string().contains("no template `nope`"), "{e}");
    save(
        &h,
        json!({"name": "strict", "input_schema": {"type": "object", "required": ["x"]},
        "steps": [{"name": "a", "code": {"plugin": "p"}}]}),
    )
    .await;
    let d = json!({"name": "p", "steps": [{"name": "c", "workflow": {"template": "strict"}, "input": {}}]});
    let r = h.run(d, json!({})).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "c").error.clone().unwrap();
    assert_eq!(e.kind, ErrorKind::Validation);
    assert!(e.message.contains("input_schema"), "{}", e.message);
}

#[tokio::test]
async fn a_template_that_starts_itself_counts_down_and_the_depth_is_capped() {
    let h = harness();
    // A code step decrements; the template starts itself while n > 0.
    save(
        &h,
        json!({"name": "countdown", "steps": [
        {"name": "dec", "code": {"plugin": "p"}, "input": {"n": "@input.n"}},
        {"name": "again", "when": {"ref": "@input.n", "gt": 0},
         "workflow": {"template": "countdown"}, "input": {"n": "@dec"}},
        {"name": "done", "return": true, "input": {"n": "@input.n", "below": "@again"}}]}),
    )
    .await;
    h.fake.on("dec", |r| Act::Ok(json!(r.input["n"].as_i64().unwrap() - 1)));
    let tmpl = h.store.template("countdown", None).await.unwrap().unwrap();
    let r = h.run(tmpl.definition.clone(), json!({"n": 3})).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(r.output, Some(json!({"n": 3, "below": {"n": 2, "below": {"n": 1, "below": {"n": 0, "below": null}}}})));
    // Too deep: the step at the cap fails, and so does each ancestor.
    let cfg = EngineConfig { max_depth: 2, ..EngineConfig::default() };
    let engine =
        Engine::new(h.store.clone(), h.fake.clone(), Arc::new(h.clock.clone()), Arc::new(SeededRng::new(1)), cfg);
    let id = engine.submit(&def(tmpl.definition), json!({"n": 5}), RunOptions::default()).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(10), engine.wait(&id)).await.unwrap().unwrap();
    assert_eq!(r.state, RunState::Failed);
    assert!(r.error.as_ref().unwrap().message.contains("at most 2 deep"), "{:?}", r.error);
}

#[tokio::test]
async fn canceling_a_parent_cancels_its_child() {
    let h = harness();
    save(&h, json!({"name": "slow", "steps": [{"name": "w", "wait": {"prompt": "go?"}}]})).await;
    let d = json!({"name": "p", "steps": [{"name": "c", "workflow": {"template": "slow"}}]});
    let id = h.submit(d).await;
    let kid = child_id(&id, "c", None);
    h.until(&id, |_| true).await;
    for _ in 0..2000 {
        if h.store.run(&kid).await.unwrap().is_some_and(|r| r.state == RunState::InputRequired) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(h.rec(&id).await.state, RunState::Working, "a parent waiting on a child is working");
    let r = h.engine.cancel(&id).await.unwrap();
    assert_eq!(r.state, RunState::Canceled);
    let c = h.until(&kid, |r| r.state.is_terminal()).await;
    assert_eq!(c.state, RunState::Canceled);
}

/// A child run stored after its parent ended (its creation was in flight
/// when the parent failed, so the parent's cancel found no run): it ends
/// canceled as its driver starts. Before, it ran on by itself.
#[tokio::test]
async fn a_child_stored_after_its_parent_ended_does_not_run_on() {
    let h = harness();
    h.fake.on("boom", |_| Act::Fail(StepError::new(ErrorKind::Validation, "bad input", false)));
    save(&h, json!({"name": "slow", "steps": [{"name": "w", "wait": {"prompt": "go?"}}]})).await;
    let r = h.run(json!({"name": "p", "steps": [{"name": "boom", "code": {"plugin": "p"}}]}), json!({})).await;
    assert_eq!(r.state, RunState::Failed);
    // The creation that was in flight, as `children::run_child` makes it.
    let kid = child_id(&r.id, "c", None);
    let opts = RunOptions { id: Some(kid.clone()), parent: Some(r.id.clone()), depth: 1, ..Default::default() };
    let slow = json!({"name": "slow", "steps": [{"name": "w", "wait": {"prompt": "go?"}}]});
    h.engine.create_run(&def(slow), json!({}), opts).await.unwrap();
    h.engine.start(&kid);
    let c = h.until(&kid, |c| c.state.is_terminal()).await;
    assert_eq!(c.state, RunState::Canceled, "the child of a failed parent does not run on");
    assert!(c.error.as_ref().unwrap().message.contains("parent run ended"), "{:?}", c.error);
    // A child whose parent goes on runs as before.
    let d = json!({"name": "p2", "steps": [{"name": "c", "workflow": {"template": "slow"}}]});
    let id = h.submit(d).await;
    let kid = child_id(&id, "c", None);
    for _ in 0..2000 {
        if h.store.run(&kid).await.unwrap().is_some_and(|r| r.state == RunState::InputRequired) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(h.rec(&kid).await.state, RunState::InputRequired);
}

#[tokio::test]
async fn a_child_is_created_once_across_a_crash() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    save(&h1, json!({"name": "kid", "steps": [{"name": "w", "wait": {"prompt": "go?"}}]})).await;
    let d = json!({"name": "p", "steps": [{"name": "c", "workflow": {"template": "kid"}}]});
    let id = h1.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    let kid = child_id(&id, "c", None);
    for _ in 0..2000 {
        if store.run(&kid).await.unwrap().is_some_and(|r| r.state == RunState::InputRequired) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    h1.engine.abort_all();
    let h2 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    h2.engine.recover().await.unwrap();
    assert!(h2.engine.signal(&kid, "w", json!("yes")).await.unwrap().accepted());
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "c").output, Some(json!({"w": "yes"})));
    let kids = store.list_runs(&crate::store::RunFilter { parent: Some(id), ..Default::default() }).await.unwrap();
    assert_eq!(kids.len(), 1, "one child, not two");
}

#[tokio::test]
async fn runs_with_one_concurrency_key_go_one_at_a_time_in_order() {
    let h = harness();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("a", move |r| Act::Gate(g.clone(), r.input.clone()));
    let d = def(json!({"name": "q", "steps": [{"name": "a", "code": {"plugin": "p"}, "input": "@input"}]}));
    let opts = || RunOptions { concurrency_key: Some("k".into()), ..Default::default() };
    let mut ids = vec![];
    for n in 0..3 {
        ids.push(h.engine.submit(&d, json!(n), opts()).await.unwrap());
        h.clock.advance(1);
    }
    let free = h.engine.submit(&d, json!("free"), RunOptions::default()).await.unwrap();
    h.until_calls("a", 2).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let inputs = |h: &H| h.fake.calls_of("a").iter().map(|c| c.input.clone()).collect::<Vec<_>>();
    assert_eq!(inputs(&h).len(), 2, "one of the key, plus the run without a key");
    assert!(inputs(&h).contains(&json!(0)) && inputs(&h).contains(&json!("free")));
    assert_eq!(h.rec(&ids[1]).await.state, RunState::Submitted, "the rest stay submitted");
    gate.add_permits(10);
    for id in &ids {
        assert_eq!(h.wait(id).await.state, RunState::Completed);
    }
    h.wait(&free).await;
    let order: Vec<Value> = inputs(&h).into_iter().filter(|v| v.is_number()).collect();
    assert_eq!(order, vec![json!(0), json!(1), json!(2)], "FIFO");
}

#[tokio::test]
async fn a_schedule_fires_once_per_time_across_restarts_and_catches_up_once() {
    let store = Arc::new(MemStore::new());
    let h1 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    save(
        &h1,
        json!({"name": "nightly", "input_schema": {"type": "object", "required": ["db"]},
        "steps": [{"name": "backup", "code": {"plugin": "p"}, "input": "@input"}]}),
    )
    .await;
    // 2026-11-22T12:00:00Z
    let noon = 1_795_348_800_000;
    h1.clock.set(noon + 667); // fire times are whole seconds whatever the clock's milliseconds
    let bad = h1.engine.add_schedule("n1", "nightly", "0 2 * * *", json!({})).await.unwrap_err();
    assert!(bad.to_string().contains("db"), "{bad}");
    let bad = h1.engine.add_schedule("n1", "nightly", "0 25 * * *", json!({"db": "x"})).await.unwrap_err();
    assert!(bad.to_string().contains("cron"), "{bad}");
    let s = h1.engine.add_schedule("n1", "nightly", "0 2 * * *", json!({"db": "x"})).await.unwrap();
    let two_am = noon + 14 * 3_600_000;
    assert_eq!(s.next_fire_at, two_am, "02:00:00.000 UTC the next night");
    assert!(
        h1.engine.add_schedule("n1", "nightly", "0 3 * * *", json!({"db": "x"})).await.is_err(),
        "names are unique"
    );

    let (fired, next) = h1.engine.fire_due_schedules().await.unwrap();
    assert!(fired.is_empty());
    assert_eq!(next, Some(two_am));
    h1.clock.set(two_am);
    let (fired, next) = h1.engine.fire_due_schedules().await.unwrap();
    assert_eq!(fired.len(), 1);
    assert_eq!(next, Some(two_am + 86_400_000));
    assert_eq!(h1.wait(&fired[0]).await.state, RunState::Completed);
    // A restarted process at the same instant (or one with a stale view)
    // cannot fire that night again.
    let h2 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    h2.clock.set(two_am + 10);
    assert!(h2.engine.fire_due_schedules().await.unwrap().0.is_empty());
    let stale = crate::outside::ScheduleRecord { next_fire_at: two_am, ..s.clone() };
    assert!(h2.engine.fire(&stale, two_am, two_am + 86_400_000).await.unwrap().is_none(), "a replayed fire conflicts");
    // Down for three nights: one catch-up run, for the latest night missed.
    h2.clock.set(two_am + 3 * 86_400_000 + 3_600_000);
    let (fired, next) = h2.engine.fire_due_schedules().await.unwrap();
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].timestamp_ms(), two_am + 3 * 86_400_000, "the latest missed night");
    assert_eq!(next, Some(two_am + 4 * 86_400_000));
    let sched = store.schedules().await.unwrap();
    assert_eq!(sched[0].last_run.as_ref(), Some(&fired[0]));
    let runs = store.list_runs(&Default::default()).await.unwrap();
    assert_eq!(runs.len(), 2, "one run per night fired, none twice");
    assert!(h2.engine.remove_schedule("n1").await.unwrap());
    assert!(!h2.engine.remove_schedule("n1").await.unwrap());
}
