//! `submit`: a run is created by its driver's first commit, together with
//! its start, and nothing of it is stored when that commit fails.

use super::*;
use crate::store::RunStore;

#[tokio::test]
async fn a_submitted_run_is_created_and_started_in_one_commit() {
    let h = harness();
    h.fake.on("a", |_| Act::Hang);
    let id = h.submit(json!({"name": "w", "steps": [code("a")]})).await;
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

/// A run's waiters get the record its driver kept (`driver::mirror`): no
/// read of the run, and the same record as the store's.
#[tokio::test]
async fn waiters_get_the_ended_run_without_a_read() {
    let h = harness();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("b", move |_| Act::Gate(g.clone(), json!({"b": true})));
    h.fake.on("flaky", |r| {
        if r.attempt == crate::ids::AttemptNo::FIRST { fail(ErrorKind::Transport, true) } else { Act::Ok(json!(2)) }
    });
    let d = def(json!({"name": "w", "steps": [code("a"), code("b"),
        {"name": "flaky", "code": {"plugin": "p"}, "retry": {"max_attempts": 2, "initial_delay_ms": 10, "jitter": false}},
        {"name": "items", "code": {"plugin": "p"}, "for_each": [1, 2], "input": "@item", "after": ["b"]},
        {"name": "never", "code": {"plugin": "p"}, "when": {"ref": "@input.go", "eq": true}}]}));
    let id = h.engine.submit(&d, json!({"go": false}), RunOptions::default()).await.unwrap();
    let waiter = {
        let e = h.engine.clone();
        let id = id.clone();
        tokio::spawn(async move { e.wait(&id).await })
    };
    h.until_calls("b", 1).await;
    h.until(&id, |r| step(r, "flaky").state == StepState::Retrying).await;
    h.clock.advance(10);
    h.until_calls("flaky", 2).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let reads = h.store.run_reads();
    gate.add_permits(1);
    let got = waiter.await.unwrap().unwrap();
    assert_eq!(h.store.run_reads(), reads, "answered from the driver's record");
    assert_eq!(got.state, RunState::Completed, "{:?}", got.error);
    assert_eq!(step(&got, "flaky").attempts, 2);
    assert_eq!(step(&got, "never").state, StepState::Skipped);
    assert_eq!(got, h.rec(&id).await, "the record is the store's");
}
