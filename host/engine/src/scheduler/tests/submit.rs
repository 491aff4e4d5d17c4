//! `submit`: a run is created by its driver's first commit, together with
//! its start, and nothing of it is stored when that commit fails.

use super::*;

#[tokio::test]
async fn a_submitted_run_is_created_and_started_in_one_commit() {
    let h = harness();
    h.fake.on("a", |_| Act::Hang);
    let id = h
        .engine
        .submit(&def(json!({"name": "w", "steps": [code("a")]})), json!({}), RunOptions::default())
        .await
        .unwrap();
    // Known to the submitter only once stored, already started.
    let r = h.rec(&id).await;
    assert_eq!(r.state, RunState::Working);
    assert_eq!(step(&r, "a").state, StepState::Running);
    assert_eq!(r.attempts.len(), 1);
    // Then the attempt's progress; two commits in all (three if the run
    // were created, then started).
    let r = h.until(&id, |r| r.last_seq == crate::ids::Seq(4)).await;
    let kinds: Vec<String> = h.store.all_events(&id).iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds, ["run.submitted", "run.working", "step.running", "progress"]);
    assert_eq!(h.store.commits(), 2, "creation and start share one commit");
    assert_eq!(r.state, RunState::Working);
    h.until_calls("a", 1).await;
    h.engine.cancel(&id).await.unwrap();
}

#[tokio::test]
async fn a_run_whose_creation_fails_leaves_nothing() {
    let h = harness();
    let id = RunId::derive(1_000_000, "creation-fails");
    h.store.fail_next_commit(StoreError::Corrupt("disk says no".into()));
    let opts = RunOptions { id: Some(id.clone()), ..RunOptions::default() };
    let e = h.engine.submit(&def(json!({"name": "w", "steps": [code("a")]})), json!({}), opts).await.unwrap_err();
    assert!(e.to_string().contains("disk says no"), "{e}");
    assert!(h.store.run(&id).await.unwrap().is_none(), "nothing of the run is stored");
    assert!(matches!(h.engine.wait(&id).await, Err(EngineError::NotFound(_))), "and no driver is left");
    assert!(h.fake.calls_of("a").is_empty());
}

#[tokio::test]
async fn a_second_run_of_the_same_id_is_refused() {
    let h = harness();
    h.fake.on("slow", |_| Act::Hang);
    let d = def(json!({"name": "w", "steps": [code("slow")]}));
    let id = RunId::derive(1_000_000, "twice");
    let opts = || RunOptions { id: Some(id.clone()), ..RunOptions::default() };
    h.engine.submit(&d, json!({"n": 1}), opts()).await.unwrap();
    h.until_calls("slow", 1).await;
    // While the first is driven here, and once it has ended.
    let e = h.engine.submit(&d, json!({"n": 2}), opts()).await.unwrap_err();
    assert!(matches!(e, EngineError::Store(StoreError::Conflict(_))), "{e}");
    h.engine.cancel(&id).await.unwrap();
    let e = h.engine.submit(&d, json!({"n": 3}), opts()).await.unwrap_err();
    assert!(matches!(e, EngineError::Store(StoreError::Conflict(_))), "{e}");
    let r = h.wait(&id).await;
    assert_eq!((r.state, &r.input), (RunState::Canceled, &json!({"n": 1})), "the first run is untouched");
    assert_eq!(h.fake.calls_of("slow").len(), 1);
}
