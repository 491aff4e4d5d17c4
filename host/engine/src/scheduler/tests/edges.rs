//! Edges that follow a skip (`on: skipped`) or hold a condition (`when`),
//! and joins that tolerate failures: `join: any` goes on at the first
//! success and fails with every error only when none succeeded; `race`
//! cancels the dependencies that lost.

use super::*;

fn states(r: &RunRecord) -> Vec<(String, StepState)> {
    r.steps.iter().map(|s| (s.name.clone(), s.state)).collect()
}

#[tokio::test]
async fn an_edge_on_skipped_fires_only_after_a_skip() {
    let h = harness();
    let d = |flag: bool| {
        json!({"name": "w", "steps": [
            {"name": "maybe", "code": {"plugin": "p"}, "when": {"ref": "@input.go", "eq": flag}},
            {"name": "fallback", "code": {"plugin": "p"}, "after": [{"step": "maybe", "on": "skipped"}]}
        ]})
    };
    let r = h.run(d(true), json!({"go": false})).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "maybe").state, StepState::Skipped);
    assert_eq!(step(&r, "fallback").state, StepState::Succeeded, "the skip fired the edge");
    let r = h.run(d(true), json!({"go": true})).await;
    assert_eq!(step(&r, "maybe").state, StepState::Succeeded);
    assert_eq!(step(&r, "fallback").state, StepState::Skipped, "no skip, no edge");
    check_log(&h, &r);
}

#[tokio::test]
async fn an_edge_with_a_false_when_does_not_fire_and_its_skip_does_not_cascade() {
    let h = harness();
    h.fake.on("check", |r| Act::Ok(json!({"ok": r.input["n"].as_i64().unwrap() > 10})));
    let d = json!({"name": "w", "steps": [
        {"name": "check", "code": {"plugin": "p"}, "input": {"n": "@input.n"}},
        {"name": "big", "code": {"plugin": "p"}, "after": [{"step": "check", "when": {"ref": "@check.ok", "eq": true}}]},
        {"name": "small", "code": {"plugin": "p"}, "after": [{"step": "check", "when": {"ref": "@check.ok", "eq": false}}]},
        {"name": "report", "code": {"plugin": "p"}, "input": {"big": "@big", "small": "@small"}}
    ]});
    let r = h.run(d.clone(), json!({"n": 50})).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    let want = vec![
        ("check".to_string(), StepState::Succeeded),
        ("big".to_string(), StepState::Succeeded),
        ("small".to_string(), StepState::Skipped),
        ("report".to_string(), StepState::Succeeded),
    ];
    assert_eq!(states(&r), want, "a false edge `when` skips like a false `when`: `report` still runs");
    let skip = h.store.all_events(&r.id).into_iter().find(|e| e.kind == "step.skipped").unwrap();
    assert_eq!(skip.data["reason"], "edge when");
    assert_eq!((skip.data["edge"].clone(), skip.data["value"].clone()), (json!("check"), json!(true)));
    let r = h.run(d, json!({"n": 5})).await;
    assert_eq!(step(&r, "big").state, StepState::Skipped);
    assert_eq!(step(&r, "small").state, StepState::Succeeded);

    // A `when` that cannot be evaluated fails the step, naming the edge.
    let bad = json!({"name": "w", "steps": [
        {"name": "first", "code": {"plugin": "p"}},
        {"name": "next", "code": {"plugin": "p"}, "after": [{"step": "first", "when": {"ref": "@first.nope", "gt": 1}}]}
    ]});
    let r = h.run(bad, json!({})).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "next").error.clone().unwrap();
    assert!(e.message.starts_with("the `when` of the edge from `first`"), "{}", e.message);
}

#[tokio::test]
async fn join_any_goes_on_at_the_first_success_and_fails_only_when_none_can() {
    let h = harness();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("bad", |_| fail(ErrorKind::GuestError, false));
    h.fake.on("slow", move |_| Act::Gate(g.clone(), json!("late but fine")));
    let d = json!({"name": "w", "steps": [
        {"name": "bad", "code": {"plugin": "p"}},
        {"name": "slow", "code": {"plugin": "p"}},
        {"name": "either", "code": {"plugin": "p"}, "join": "any", "after": ["bad", "slow"]}
    ]});
    let id = h.submit(d.clone()).await;
    h.until(&id, |r| step(r, "bad").state == StepState::Failed).await;
    assert_eq!(h.rec(&id).await.state, RunState::Working, "one failure does not end an `any`");
    gate.add_permits(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "either").state, StepState::Succeeded);

    // Both fail: the join fails with each error, and so does the run.
    h.fake.on("slow", |_| Act::Fail(StepError::new(ErrorKind::Timeout, "too slow", false)));
    let r = h.run(d, json!({})).await;
    assert_eq!(r.state, RunState::Failed);
    let e = step(&r, "either").error.clone().unwrap();
    assert_eq!(e.kind, ErrorKind::DependencyFailed);
    assert!(e.message.contains("`bad` failed: boom") && e.message.contains("`slow` failed: too slow"), "{}", e.message);
    assert!(r.error.unwrap().message.contains("no dependency of this `join: any` step succeeded"));
}

#[tokio::test]
async fn a_race_cancels_the_steps_that_lost() {
    let h = harness();
    h.fake.on("slow", |_| Act::Hang);
    let d = json!({"name": "w", "steps": [
        {"name": "fast", "code": {"plugin": "p"}},
        {"name": "slow", "code": {"plugin": "p"}},
        {"name": "first", "code": {"plugin": "p"}, "join": "race", "after": ["fast", "slow"],
         "input": {"slow": "@slow.$status"}}
    ]});
    let r = h.run(d, json!({})).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "slow").state, StepState::Canceled, "the loser is canceled, not waited for");
    let slow: Vec<AttemptState> = r.attempts.iter().filter(|a| a.step == "slow").map(|a| a.state).collect();
    assert!(slow.iter().all(|s| *s == AttemptState::Canceled), "{slow:?}");
    assert_eq!(h.fake.calls_of("first")[0].input, json!({"slow": "canceled"}));
    check_log(&h, &r);
}
