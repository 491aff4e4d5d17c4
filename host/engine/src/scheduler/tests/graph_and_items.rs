//! for_each, joins, priority, parallelism and recovery (the second half of
//! the scheduler's semantics tests; helpers live in the parent module).

use super::*;
use crate::store::RunStore;

#[tokio::test]
async fn for_each_runs_items_in_order_with_concurrency() {
    let h = harness();
    h.fake.on("each", |r| Act::Ok(json!([r.input["i"].clone(), r.input["x"].clone()])));
    let r = h
        .run(
            json!({"name": "w", "steps": [{"name": "each", "code": {"plugin": "p"}, "for_each": "@input.items",
                "concurrency": 2, "input": {"x": "@item", "i": "@index"}}]}),
            json!({"items": ["a", "b", "c", "d", "e"]}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "each").output, Some(json!([[0, "a"], [1, "b"], [2, "c"], [3, "d"], [4, "e"]])));
    assert_eq!(step(&r, "each").attempts, 5);
    assert!(h.fake.max_running.load(Ordering::SeqCst) <= 2);
    let mut keys = h.fake.keys();
    keys.sort();
    assert_eq!(keys, (0..5).map(|i| format!("{}/each/{i}/1", r.id)).collect::<Vec<_>>());
}

#[tokio::test]
async fn where_keeps_the_items_its_condition_holds_for_and_says_how_many_it_left_out() {
    let h = harness();
    h.fake.on("each", |r| Act::Ok(json!([r.input["i"].clone(), r.input["id"].clone()])));
    let def = json!({"name": "w", "steps": [{"name": "each", "code": {"plugin": "p"}, "for_each": "@input.orders",
        "where": {"ref": "@item.qty", "gt": 10}, "input": {"id": "@item.id", "i": "@index"}}]});
    // A numeric string from a CSV compares as a number.
    let orders =
        json!([{"id": "a", "qty": 4}, {"id": "b", "qty": "12.5"}, {"id": "c", "qty": 30}, {"id": "d", "qty": 10}]);
    let r = h.run(def.clone(), json!({"orders": orders})).await;
    assert_eq!(r.state, RunState::Completed);
    // One entry per kept item, in order; `@index` counts the kept items.
    assert_eq!(step(&r, "each").output, Some(json!([[0, "b"], [1, "c"]])));
    let claim = h.store.all_events(&r.id).into_iter().find(|e| e.kind == "step.running").unwrap();
    assert_eq!((&claim.data["items"], &claim.data["left_out"]), (&json!(2), &json!(2)), "{claim:?}");
    // An item the condition cannot compare fails the step, naming the item.
    let r = h.run(def, json!({"orders": [{"id": "a", "qty": 40}, {"id": "x", "qty": "lots"}]})).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "each").error.clone().unwrap();
    assert!(e.message.starts_with("`where`, item 1:"), "{}", e.message);
}

#[tokio::test]
async fn for_each_concurrency_caps_parallel_items() {
    let h = harness();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("each", move |_| Act::Gate(g.clone(), json!(1)));
    let d = json!({"name": "w", "steps": [{"name": "each", "code": {"plugin": "p"}, "for_each": [1, 2, 3, 4], "concurrency": 2}]});
    let id = h.submit(d).await;
    h.until_calls("each", 2).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(h.fake.calls_of("each").len(), 2, "only 2 at once");
    gate.add_permits(4);
    let r = h.wait(&id).await;
    assert_eq!(step(&r, "each").output, Some(json!([1, 1, 1, 1])));
}

#[tokio::test]
async fn for_each_empty_and_non_array() {
    let h = harness();
    let r = h
        .run(json!({"name": "w", "steps": [{"name": "e", "code": {"plugin": "p"}, "for_each": "@input"}]}), json!([]))
        .await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "e").output, Some(json!([])));
    let r = h
        .run(json!({"name": "w", "steps": [{"name": "e", "code": {"plugin": "p"}, "for_each": "@input"}]}), json!(5))
        .await;
    assert_eq!(r.state, RunState::Failed);
    assert_eq!(step(&r, "e").error.as_ref().unwrap().kind, ErrorKind::Validation);
}

#[tokio::test]
async fn for_each_item_failure_fails_the_step() {
    let h = harness();
    h.fake.on("e", |r| if r.input == json!(2) { fail(ErrorKind::Trap, false) } else { Act::Ok(r.input.clone()) });
    let r = h
        .run(json!({"name": "w", "steps": [{"name": "e", "code": {"plugin": "p"}, "for_each": [1, 2, 3], "concurrency": 1, "input": "@item"}]}), json!({}))
        .await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "e").error.clone().unwrap();
    assert!(e.message.starts_with("item 1:"), "{e:?}");
    assert_eq!(h.fake.calls_of("e").len(), 2, "item 3 never starts");
}

#[tokio::test]
async fn join_any_runs_at_the_first_success() {
    let h = harness();
    h.fake.on("slow", |_| Act::Hang);
    let id = h
        .engine
        .submit(
            &def(json!({"name": "w", "steps": [code("fast"), code("slow"),
                {"name": "j", "code": {"plugin": "p"}, "join": "any", "after": ["fast", "slow"], "input": {"f": "@fast.step", "s": "@slow"}}]})),
            json!({}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    h.until(&id, |r| step(r, "j").state == StepState::Succeeded).await;
    assert_eq!(
        h.fake.calls_of("j")[0].input,
        json!({"f": "fast", "s": null}),
        "an unfinished dependency reads as null"
    );
    h.engine.cancel(&id).await.unwrap();
}

#[tokio::test]
async fn join_race_fails_when_the_first_finisher_fails() {
    let h = harness();
    h.fake.on("bad", |_| fail(ErrorKind::Trap, false));
    h.fake.on("slow", |_| Act::Hang);
    let id = h
        .engine
        .submit(
            &def(json!({"name": "w", "steps": [code("bad"), code("slow"),
                {"name": "j", "code": {"plugin": "p"}, "join": "race", "after": ["bad", "slow"]},
                {"name": "h", "code": {"plugin": "p"}, "after": [{"step": "bad", "on": "failure"}]}]})),
            json!({}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let r = h.wait(&id).await;
    // The race is lost: `j` fails with `bad`'s error, and `slow` is not waited for.
    let e = step(&r, "j").error.clone().unwrap();
    assert_eq!((step(&r, "j").state, e.kind), (StepState::Failed, ErrorKind::DependencyFailed));
    assert!(e.message.contains("`bad` failed: boom"), "{}", e.message);
    assert_eq!(step(&r, "slow").state, StepState::Canceled);
    assert_eq!(r.state, RunState::Failed);
}

#[tokio::test]
async fn priority_then_topological_order() {
    let h = harness_with(Arc::new(MemStore::new()), Arc::new(Fake::default()), 1);
    let r = h
        .run(
            json!({"name": "w", "steps": [code("low1"), code("low2"),
                {"name": "high", "code": {"plugin": "p"}, "priority": 5}]}),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed);
    let order: Vec<String> = h.fake.calls.lock().unwrap().iter().map(|c| c.step.clone()).collect();
    assert_eq!(order, vec!["high", "low1", "low2"]);
    assert_eq!(h.fake.max_running.load(Ordering::SeqCst), 1);
}

/// `max_concurrency` bounds attempts from their claim to their end; those
/// the runner expects to finish in place draw on `max_in_place` first, and
/// on `max_concurrency` once that is used up.
#[tokio::test]
async fn attempts_expected_in_place_have_a_pool_of_their_own() {
    // (runner says in place, max_in_place) -> attempts of 4 parallel gated steps at once
    for (in_place, max_in_place, want) in [(false, 8, 1), (true, 8, 4), (true, 2, 3), (true, 0, 1)] {
        let fake = Arc::new(Fake::default());
        fake.in_place.store(in_place, Ordering::SeqCst);
        let gate = Arc::new(Semaphore::new(0));
        for s in ["a", "b", "c", "d"] {
            let g = gate.clone();
            fake.on(s, move |_| Act::Gate(g.clone(), json!(1)));
        }
        let cfg = EngineConfig { max_concurrency: 1, max_in_place, ..EngineConfig::default() };
        let h = harness_config(Arc::new(MemStore::new()), fake, cfg);
        let id = h
            .engine
            .submit(
                &def(json!({"name": "w", "steps": [code("a"), code("b"), code("c"), code("d")]})),
                json!({}),
                RunOptions::default(),
            )
            .await
            .unwrap();
        let started = || h.fake.calls.lock().unwrap().len();
        for _ in 0..2000 {
            if started() >= want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // No more start than the pools allow, even given time.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let case = format!("in place {in_place}, max_in_place {max_in_place}");
        assert_eq!(started(), want, "{case}");
        assert_eq!(h.fake.max_running.load(Ordering::SeqCst), want, "{case}");
        gate.add_permits(4);
        assert_eq!(h.wait(&id).await.state, RunState::Completed, "{case}");
        assert_eq!(started(), 4, "{case}");
    }
}

#[tokio::test]
async fn independent_steps_run_in_parallel() {
    let h = harness();
    let gate = Arc::new(Semaphore::new(0));
    for s in ["a", "b", "c"] {
        let g = gate.clone();
        h.fake.on(s, move |_| Act::Gate(g.clone(), json!(1)));
    }
    let id = h
        .engine
        .submit(
            &def(json!({"name": "w", "steps": [code("a"), code("b"), code("c")]})),
            json!({}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    for s in ["a", "b", "c"] {
        h.until_calls(s, 1).await;
    }
    assert_eq!(h.fake.max_running.load(Ordering::SeqCst), 3);
    gate.add_permits(3);
    assert_eq!(h.wait(&id).await.state, RunState::Completed);
}

#[tokio::test]
async fn invalid_input_stores_nothing() {
    let h = harness();
    let d = def(json!({"name": "w", "input_schema": {"type": "object", "required": ["email"]}, "steps": [code("a")]}));
    let e = h.engine.submit(&d, json!({}), RunOptions::default()).await.unwrap_err();
    assert!(matches!(e, EngineError::Invalid(_)), "{e}");
    assert_eq!(h.store.commits(), 0);
    assert!(h.store.list_runs(&Default::default()).await.unwrap().is_empty());
}

/// A crash is the engine's failure, never the step's: with no retry
/// policy written, the interrupted attempt runs again as itself (same
/// number, same idempotency key) and the run completes.
#[tokio::test]
async fn recovery_runs_an_interrupted_attempt_again_as_itself() {
    let store = Arc::new(MemStore::new());
    let fake1 = Arc::new(Fake::default());
    fake1.on("b", |_| Act::Hang);
    let h1 = harness_with(store.clone(), fake1.clone(), 4);
    let d = json!({"name": "w", "steps": [code("a"), {"name": "b", "code": {"plugin": "p"}, "input": "@a"}]});
    let id = h1.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    h1.until_calls("b", 1).await;
    h1.engine.abort_all(); // the crash: nothing more is written
    let r = h1.rec(&id).await;
    assert_eq!(step(&r, "b").state, StepState::Running);
    assert_eq!(store.expired_leases(i64::MAX).await.unwrap().len(), 1);

    let fake2 = Arc::new(Fake::default());
    let h2 = harness_with(store.clone(), fake2.clone(), 4);
    h2.clock.set(h1.clock.now_ms() + 5);
    assert_eq!(h2.engine.recover().await.unwrap(), vec![id.clone()]);
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert!(fake2.calls_of("a").is_empty(), "a succeeded before the crash: never again");
    assert_eq!(fake2.keys(), vec![format!("{id}/b/1")], "the same idempotency key");
    assert_eq!(step(&r, "b").attempts, 1, "an interruption is not an attempt");
    let b = r.attempts.iter().find(|a| a.step == "b").unwrap();
    assert_eq!((b.state, b.interruptions), (AttemptState::Succeeded, 1));
    let evs = h2.store.all_events(&id);
    let int = evs.iter().find(|e| e.kind == "attempt.interrupted").expect("an event of its own");
    assert_eq!(int.data["error"]["kind"], json!("interrupted"), "{}", int.data);
    assert!(!evs.iter().any(|e| e.data.to_string().contains("\"timeout\"")), "never labelled a timeout");
    check_log(&h2, &r);
}

/// A step that takes its process down every time is stopped after
/// `max_interruptions` (3) interruptions in a row, as `crashed`.
#[tokio::test]
async fn a_step_interrupted_again_and_again_fails_as_crashed() {
    let store = Arc::new(MemStore::new());
    let d = json!({"name": "w", "steps": [{"name": "a", "code": {"plugin": "p"},
        "retry": {"max_attempts": 5, "retry_on": ["crashed", "timeout"]}}]});
    // The first run and two recoveries each run attempt 1, and each time
    // the process dies while it runs.
    let mut id = None;
    let mut now = 0;
    for _ in 0..3 {
        let fake = Arc::new(Fake::default());
        fake.on("a", |_| Act::Hang);
        let h = harness_with(store.clone(), fake.clone(), 4);
        h.clock.set(now);
        match &id {
            None => id = Some(h.engine.submit(&def(d.clone()), json!({}), RunOptions::default()).await.unwrap()),
            Some(_) => assert_eq!(h.engine.recover().await.unwrap().len(), 1),
        }
        h.until_calls("a", 1).await;
        assert_eq!(fake.keys(), vec![format!("{}/a/1", id.as_ref().unwrap())], "always attempt 1");
        h.engine.abort_all();
        now = h.clock.now_ms() + 5;
    }
    // The third interruption fails the step instead of running it again.
    let h = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    h.clock.set(now);
    h.engine.recover().await.unwrap();
    let r = h.wait(id.as_ref().unwrap()).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "a").error.clone().unwrap();
    assert_eq!(e.kind, ErrorKind::Crashed, "{e:?}");
    assert!(e.message.contains("interrupted 3 times in a row"), "{e:?}");
    assert!(!e.retryable);
    assert_eq!(step(&r, "a").attempts, 1, "never retried, whatever the policy says");
}

#[tokio::test]
async fn recovery_of_a_for_each_keeps_finished_items() {
    let store = Arc::new(MemStore::new());
    let fake1 = Arc::new(Fake::default());
    fake1.on("e", |r| if r.input == json!(3) { Act::Hang } else { Act::Ok(json!(r.input.as_i64().unwrap() * 2)) });
    let h1 = harness_with(store.clone(), fake1.clone(), 1);
    let d = json!({"name": "w", "steps": [{"name": "e", "code": {"plugin": "p"}, "for_each": [1, 2, 3, 4], "input": "@item"}]});
    let id = h1.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    h1.until_calls("e", 3).await;
    h1.engine.abort_all();
    let fake2 = Arc::new(Fake::default());
    fake2.on("e", |r| Act::Ok(json!(r.input.as_i64().unwrap() * 2)));
    let h2 = harness_with(store.clone(), fake2.clone(), 1);
    h2.clock.set(h1.clock.now_ms() + 100);
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "e").output, Some(json!([2, 4, 6, 8])));
    let mut keys = fake2.keys();
    keys.sort();
    assert_eq!(keys, vec![format!("{id}/e/2/1"), format!("{id}/e/3/1")], "the interrupted item runs as itself");
    let item2 = r.attempts.iter().find(|a| a.item == Some(crate::ids::ItemIndex(2))).unwrap();
    assert_eq!((item2.attempt.get(), item2.interruptions), (1, 1));
}

#[tokio::test]
async fn global_concurrency_is_shared_by_runs() {
    let h = harness_with(Arc::new(MemStore::new()), Arc::new(Fake::default()), 2);
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("a", move |_| Act::Gate(g.clone(), json!(1)));
    let mut ids = vec![];
    for _ in 0..4 {
        ids.push(h.submit(json!({"name": "w", "steps": [code("a")]})).await);
    }
    h.until_calls("a", 2).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(h.fake.calls_of("a").len(), 2);
    gate.add_permits(4);
    for id in &ids {
        assert_eq!(h.wait(id).await.state, RunState::Completed);
    }
    assert_eq!(h.fake.max_running.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_store_failure_restarts_the_driver_from_the_stored_run() {
    let h = harness();
    let id = h
        .engine
        .create_run(&def(json!({"name": "w", "steps": [code("a")]})), json!({}), RunOptions::default())
        .await
        .unwrap();
    // A refusal no retry of the same batch cures (the driver's own
    // retries are for busy or failing devices).
    h.store.fail_next_commit(StoreError::Corrupt("disk says no".into()));
    h.engine.start(&id);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "the driver started again from the stored run: the run is not lost");
    assert_eq!(h.fake.calls_of("a").len(), 1, "the refused claim ran nothing; the restarted driver ran it once");
}

#[tokio::test]
async fn view_has_the_runs_show_shape() {
    let h = harness();
    let r = h.run(json!({"name": "w", "steps": [code("a")]}), json!({"q": 1})).await;
    let v = crate::view::run_json(&r);
    for k in [
        "id",
        "template",
        "version",
        "state",
        "input",
        "output",
        "error",
        "parent",
        "created_at",
        "updated_at",
        "steps",
    ] {
        assert!(v.get(k).is_some(), "{k}");
    }
    assert_eq!(v["state"], "completed");
    assert_eq!(v["template"], "w");
    assert_eq!(v["version"], 1);
    let s = &v["steps"][0];
    assert_eq!(s["name"], "a");
    assert_eq!(s["attempts"], 1);
    assert!(s["started_at"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn recover_again_skips_runs_already_driven_and_finished_drivers_are_forgotten() {
    let h = harness();
    h.fake.on("a", |_| Act::Hang);
    let id = h.submit(json!({"name": "w", "steps": [code("a")]})).await;
    h.until_calls("a", 1).await;
    assert_eq!(h.engine.active_runs(), 1);
    // created elsewhere (e.g. `weft run --detach` in another process)
    let other = h
        .engine
        .create_run(&def(json!({"name": "w", "steps": [code("b")]})), json!({}), RunOptions::default())
        .await
        .unwrap();
    let ids = h.engine.recover().await.unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(h.wait(&other).await.state, RunState::Completed);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(h.fake.calls_of("a").len(), 1, "the driven run was not restarted");
    let r = h.rec(&id).await;
    assert_eq!(r.attempts.len(), 1);
    assert_eq!(r.attempts[0].state, AttemptState::Running, "its attempt was not taken for an interrupted one");
    h.engine.cancel(&id).await.unwrap();
    for _ in 0..100 {
        if h.engine.active_runs() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(h.engine.active_runs(), 0);
}

#[tokio::test]
async fn a_due_retry_waiting_for_a_permit_runs_once_one_frees() {
    // one permit, taken by a hanging step; the retry of another step must
    // wait for it (without spinning) and run after it frees.
    let h = harness_with(Arc::new(MemStore::new()), Arc::new(Fake::default()), 1);
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("hold", move |_| Act::Gate(g.clone(), json!(1)));
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    h.fake.on("flaky", move |_| {
        if n2.fetch_add(1, Ordering::SeqCst) == 0 { fail(ErrorKind::Timeout, true) } else { Act::Ok(json!(2)) }
    });
    let d = json!({"name": "w", "steps": [
        {"name": "flaky", "code": {"plugin": "p"}, "priority": 9, "retry": {"max_attempts": 2, "backoff": "fixed", "initial_delay_ms": 10, "jitter": false}},
        code("hold")]});
    let id = h.submit(d).await;
    h.until_calls("hold", 1).await;
    h.clock.advance(10);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(h.fake.calls_of("flaky").len(), 1, "no permit yet");
    gate.add_permits(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "flaky").attempts, 2);
}

#[tokio::test]
async fn a_last_step_reads_the_runs_resume_and_every_view_shows_it() {
    let h = harness();
    h.fake.on("check", |r| Act::Ok(json!({"ok": r.input["n"].as_i64().unwrap() > 10})));
    let d = json!({"name": "w", "summary": "checked @input.n: ok = @check.ok",
    "steps": [
        {"name": "check", "description": "is it big?", "code": {"plugin": "p"}, "input": {"n": "@input.n"}},
        {"name": "tell", "description": "send the resume on", "code": {"plugin": "p"}, "input": "@run.resume",
         "after": ["check"]}
    ]});
    let r = h.run(d, json!({"n": 50})).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    let sent = &h.fake.calls_of("tell")[0].input;
    assert_eq!(sent["summary"], "checked 50: ok = true");
    assert_eq!(
        sent["steps"][0],
        json!({"name": "check", "description": "is it big?", "state": "succeeded", "result": {"ok": true}})
    );
    assert_eq!(sent["steps"][1]["state"], "running", "the step reading it is running");
    let view = crate::view::RunView::of(&r);
    assert_eq!(view.resume["summary"], "checked 50: ok = true");
    assert_eq!(view.resume["steps"][1]["state"], "succeeded");
    assert_eq!(view.steps[0].description.as_deref(), Some("is it big?"));
}
