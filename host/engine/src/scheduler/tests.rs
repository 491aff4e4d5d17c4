//! Every semantic of workflow.md §5 with a ManualClock, a MemStore and a
//! fake runner.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::*;
use crate::clock::ManualClock;
use crate::error::{ErrorKind, StepError};
use crate::memstore::MemStore;
use crate::rng::SeededRng;
use crate::runner::{StepOutput, StepRequest, StepRunner};
use crate::state::{AttemptState, StepState};
use crate::store::RunRecord;

#[derive(Clone)]
enum Act {
    Ok(Value),
    Fail(StepError),
    Reject(String),
    /// Run until canceled.
    Hang,
    /// Wait for a permit of the semaphore, then succeed with the value.
    Gate(Arc<Semaphore>, Value),
}

type Behave = Arc<dyn Fn(&StepRequest) -> Act + Send + Sync>;

#[derive(Default)]
struct Fake {
    behave: Mutex<HashMap<String, Behave>>,
    calls: Mutex<Vec<StepRequest>>,
    canceled: Mutex<Vec<String>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
}

impl Fake {
    fn on(&self, step: &str, f: impl Fn(&StepRequest) -> Act + Send + Sync + 'static) -> &Self {
        self.behave.lock().unwrap().insert(step.to_string(), Arc::new(f));
        self
    }
    fn calls_of(&self, step: &str) -> Vec<StepRequest> {
        self.calls.lock().unwrap().iter().filter(|r| r.step == step).cloned().collect()
    }
    fn keys(&self) -> Vec<String> {
        self.calls.lock().unwrap().iter().map(|r| r.idempotency_key.clone()).collect()
    }
}

#[async_trait::async_trait]
impl StepRunner for Fake {
    async fn run(&self, req: StepRequest, cancel: CancelToken) -> Result<StepOutput, StepError> {
        self.calls.lock().unwrap().push(req.clone());
        let n = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(n, Ordering::SeqCst);
        let f = self.behave.lock().unwrap().get(&req.step).cloned();
        let act = match f {
            Some(f) => f(&req),
            None => Act::Ok(json!({"step": req.step, "input": req.input})),
        };
        req.events.progress(json!({"message": "working"}));
        let r = match act {
            Act::Ok(v) => Ok(StepOutput::Done(v)),
            Act::Fail(e) => Err(e),
            Act::Reject(r) => Ok(StepOutput::Reject(r)),
            Act::Hang => {
                cancel.canceled().await;
                self.canceled.lock().unwrap().push(req.idempotency_key.clone());
                Err(StepError::canceled("stopped"))
            }
            Act::Gate(s, v) => tokio::select! {
                p = s.acquire() => { p.unwrap().forget(); Ok(StepOutput::Done(v)) }
                _ = cancel.canceled() => {
                    self.canceled.lock().unwrap().push(req.idempotency_key.clone());
                    Err(StepError::canceled("stopped"))
                }
            },
        };
        self.running.fetch_sub(1, Ordering::SeqCst);
        r
    }
}

struct H {
    engine: Engine,
    store: Arc<MemStore>,
    fake: Arc<Fake>,
    clock: ManualClock,
}

fn harness_with(store: Arc<MemStore>, fake: Arc<Fake>, conc: usize) -> H {
    let clock = ManualClock::new(1_000_000);
    let cfg = EngineConfig { max_concurrency: conc, ..EngineConfig::default() };
    let engine = Engine::new(store.clone(), fake.clone(), Arc::new(clock.clone()), Arc::new(SeededRng::new(42)), cfg);
    H { engine, store, fake, clock }
}

fn harness() -> H {
    harness_with(Arc::new(MemStore::new()), Arc::new(Fake::default()), 8)
}

fn def(v: Value) -> Definition {
    weft_model::from_value(&v, &weft_model::NoSchemas).unwrap_or_else(|p| panic!("{p:?}"))
}

fn code(name: &str) -> Value {
    json!({"name": name, "code": {"plugin": "p"}})
}

fn fail(kind: ErrorKind, retryable: bool) -> Act {
    Act::Fail(StepError::new(kind, "boom", retryable))
}

impl H {
    async fn run(&self, d: Value, input: Value) -> RunRecord {
        let id = self.engine.submit(&def(d), input, RunOptions::default()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.engine.wait(&id)).await.expect("run did not finish").unwrap()
    }

    async fn rec(&self, id: &RunId) -> RunRecord {
        self.store.run(id).await.unwrap().unwrap()
    }

    /// Poll (real time) until `f` holds for the stored run.
    async fn until(&self, id: &RunId, f: impl Fn(&RunRecord) -> bool) -> RunRecord {
        for _ in 0..2000 {
            let r = self.rec(id).await;
            if f(&r) {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("condition never held: {:#?}", self.rec(id).await);
    }

    async fn until_calls(&self, step: &str, n: usize) {
        for _ in 0..2000 {
            if self.fake.calls_of(step).len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("{step} was called {} times, wanted {n}", self.fake.calls_of(step).len());
    }

    async fn wait(&self, id: &RunId) -> RunRecord {
        tokio::time::timeout(Duration::from_secs(10), self.engine.wait(id)).await.expect("run did not finish").unwrap()
    }
}

fn step<'a>(r: &'a RunRecord, name: &str) -> &'a crate::store::StepRecord {
    r.steps.iter().find(|s| s.name == name).unwrap()
}

fn states(r: &RunRecord) -> Vec<(String, StepState)> {
    r.steps.iter().map(|s| (s.name.clone(), s.state)).collect()
}

/// The log is 1..n without gaps, each run transition at most once.
fn check_log(h: &H, r: &RunRecord) {
    let evs = h.store.all_events(&r.id);
    for (k, e) in evs.iter().enumerate() {
        assert_eq!(e.seq.0, k as u64 + 1, "gap in the log");
    }
    let runs: Vec<&str> = evs.iter().filter(|e| e.kind.starts_with("run.")).map(|e| e.kind.as_str()).collect();
    let mut dedup = runs.clone();
    dedup.dedup();
    assert_eq!(runs, dedup, "a run transition logged twice");
    assert_eq!(runs.first(), Some(&"run.submitted"));
    assert_eq!(r.last_seq.0 as usize, evs.len());
}

#[tokio::test]
async fn chain_passes_outputs_and_sinks_form_output() {
    let h = harness();
    h.fake.on("a", |r| Act::Ok(json!({"n": r.input["x"].as_i64().unwrap() + 1})));
    h.fake.on("b", |r| Act::Ok(json!({"m": r.input["n"].as_i64().unwrap() * 10})));
    let r = h
        .run(
            json!({"name": "w", "steps": [
                {"name": "a", "code": {"plugin": "p"}, "input": {"x": "@input.x"}},
                {"name": "b", "code": {"plugin": "p"}, "input": {"n": "@a.n"}}]}),
            json!({"x": 1}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(r.output, Some(json!({"b": {"m": 20}})));
    assert_eq!(states(&r), vec![("a".into(), StepState::Succeeded), ("b".into(), StepState::Succeeded)]);
    assert_eq!(step(&r, "a").attempts, 1);
    assert!(step(&r, "a").started_at.is_some() && step(&r, "a").ended_at.is_some());
    assert_eq!(r.attempts.len(), 2);
    assert!(r.attempts.iter().all(|a| a.state == AttemptState::Succeeded));
    assert_eq!(h.fake.keys(), vec![format!("{}/a/1", r.id), format!("{}/b/1", r.id)]);
    check_log(&h, &r);
    let kinds: Vec<String> = h.store.all_events(&r.id).into_iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&"progress".to_string()), "runner progress is logged: {kinds:?}");
    assert_eq!(kinds.last().unwrap(), "run.completed");
}

#[tokio::test]
async fn output_template_is_resolved() {
    let h = harness();
    h.fake.on("a", |_| Act::Ok(json!({"id": 7})));
    let r =
        h.run(json!({"name": "w", "steps": [code("a")], "output": {"user": "@a.id", "in": "@input"}}), json!(3)).await;
    assert_eq!(r.output, Some(json!({"user": 7, "in": 3})));
}

#[tokio::test]
async fn when_false_skip_does_not_cascade() {
    let h = harness();
    let r = h
        .run(
            json!({"name": "w", "steps": [
                {"name": "a", "code": {"plugin": "p"}, "when": {"ref": "@input.go", "eq": true}},
                {"name": "b", "code": {"plugin": "p"}, "input": {"seen": "@a"}}]}),
            json!({"go": false}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "a").state, StepState::Skipped);
    assert_eq!(step(&r, "a").error, None);
    assert_eq!(step(&r, "b").state, StepState::Succeeded);
    assert_eq!(h.fake.calls_of("b")[0].input, json!({"seen": null}));
    assert!(h.fake.calls_of("a").is_empty());
}

#[tokio::test]
async fn failure_edge_handles_and_success_edges_cascade_skip() {
    let h = harness();
    h.fake.on("a", |_| fail(ErrorKind::Trap, false));
    let r = h
        .run(
            json!({"name": "w", "steps": [
                code("a"),
                {"name": "undo", "code": {"plugin": "p"}, "after": [{"step": "a", "on": "failure"}]},
                {"name": "b", "code": {"plugin": "p"}, "input": "@a.x"},
                {"name": "c", "code": {"plugin": "p"}, "input": "@b"},
                {"name": "fin", "code": {"plugin": "p"}, "after": [{"step": "c", "on": "always"}]}]}),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "a").state, StepState::Failed);
    assert_eq!(step(&r, "undo").state, StepState::Succeeded);
    assert_eq!(step(&r, "b").state, StepState::Skipped);
    assert_eq!(step(&r, "b").error.as_ref().unwrap().kind, ErrorKind::DependencyFailed);
    assert_eq!(step(&r, "c").state, StepState::Skipped, "the skip cascades along success edges");
    assert_eq!(step(&r, "fin").state, StepState::Succeeded, "always edges run after a skip");
    assert!(h.fake.calls_of("b").is_empty() && h.fake.calls_of("c").is_empty());
}

#[tokio::test]
async fn success_edge_to_a_succeeded_step_on_failure_is_skipped() {
    let h = harness();
    let r = h
        .run(
            json!({"name": "w", "steps": [code("a"),
                {"name": "undo", "code": {"plugin": "p"}, "after": [{"step": "a", "on": "failure"}]}]}),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "undo").state, StepState::Skipped);
}

#[tokio::test]
async fn unhandled_failure_fails_run_and_cancels_running() {
    let h = harness();
    h.fake.on("slow", |_| Act::Hang);
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("a", move |_| Act::Gate(g.clone(), json!(1)));
    h.fake.on("b", |_| fail(ErrorKind::ToolError, false));
    let id = h
        .engine
        .submit(
            &def(json!({"name": "w", "steps": [code("slow"), code("a"),
                {"name": "b", "code": {"plugin": "p"}, "input": "@a"},
                {"name": "c", "code": {"plugin": "p"}, "input": "@b"}]})),
            json!({}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    h.until_calls("slow", 1).await;
    gate.add_permits(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Failed);
    let e = r.error.clone().unwrap();
    assert_eq!(e.kind, ErrorKind::ToolError);
    assert!(e.message.contains("`b`"), "{e:?}");
    assert_eq!(step(&r, "slow").state, StepState::Canceled);
    assert_eq!(step(&r, "c").state, StepState::Skipped);
    let slow_att = r.attempts.iter().find(|a| a.step == "slow").unwrap();
    assert_eq!(slow_att.state, AttemptState::Canceled);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(h.fake.canceled.lock().unwrap().len(), 1, "the runner saw its token fire");
    check_log(&h, &r);
}

#[tokio::test]
async fn fail_open_lets_independent_branches_finish() {
    let h = harness();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("slow", move |_| Act::Gate(g.clone(), json!("done")));
    h.fake.on("bad", |_| fail(ErrorKind::Trap, false));
    let id = h
        .engine
        .submit(
            &def(json!({"name": "w", "fail_open": true, "steps": [code("slow"), code("bad"),
                {"name": "after_bad", "code": {"plugin": "p"}, "input": "@bad"},
                {"name": "after_slow", "code": {"plugin": "p"}, "input": "@slow"}]})),
            json!({}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    h.until(&id, |r| step(r, "bad").state == StepState::Failed).await;
    assert_eq!(h.rec(&id).await.state, RunState::Working, "fail_open: still working");
    gate.add_permits(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Failed);
    assert_eq!(step(&r, "slow").state, StepState::Succeeded);
    assert_eq!(step(&r, "after_slow").state, StepState::Succeeded);
    assert_eq!(step(&r, "after_bad").state, StepState::Skipped);
    assert!(r.error.unwrap().message.contains("`bad`"));
}

#[tokio::test]
async fn continue_on_error_passes_the_error_object() {
    let h = harness();
    h.fake.on("a", |_| fail(ErrorKind::Transport, true));
    let r = h
        .run(
            json!({"name": "w", "steps": [
                {"name": "a", "code": {"plugin": "p"}, "continue_on_error": true},
                {"name": "b", "code": {"plugin": "p"}, "input": {"k": "@a.kind", "m": "@a.message"}}]}),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "a").state, StepState::Failed);
    assert_eq!(h.fake.calls_of("b")[0].input, json!({"k": "transport", "m": "boom"}));
}

#[tokio::test]
async fn max_step_failures_fails_even_when_handled() {
    let h = harness();
    h.fake.on("a", |_| fail(ErrorKind::Trap, false));
    let r = h
        .run(
            json!({"name": "w", "max_step_failures": 1, "steps": [
                {"name": "a", "code": {"plugin": "p"}, "continue_on_error": true}, code("z")]}),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Failed);
    assert!(r.error.unwrap().message.contains("max_step_failures"));
}

#[tokio::test]
async fn retries_follow_the_policy_with_the_clock() {
    let h = harness();
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    h.fake.on("a", move |_| {
        if n2.fetch_add(1, Ordering::SeqCst) < 2 { fail(ErrorKind::Transport, false) } else { Act::Ok(json!("ok")) }
    });
    let d = json!({"name": "w", "steps": [{"name": "a", "code": {"plugin": "p"},
        "retry": {"max_attempts": 3, "backoff": "fixed", "initial_delay_ms": 100, "jitter": false}}]});
    let id = h.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    let r = h.until(&id, |r| step(r, "a").state == StepState::Retrying).await;
    assert_eq!(step(&r, "a").next_attempt_at, Some(h.clock.now_ms() + 100));
    h.clock.advance(99);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(h.fake.calls_of("a").len(), 1, "not before the delay");
    h.clock.advance(1);
    h.until_calls("a", 2).await;
    h.until(&id, |r| step(r, "a").state == StepState::Retrying && step(r, "a").attempts == 2).await;
    h.clock.advance(100);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "a").attempts, 3);
    let states: Vec<AttemptState> = r.attempts.iter().map(|a| a.state).collect();
    assert_eq!(states, vec![AttemptState::Failed, AttemptState::Failed, AttemptState::Succeeded]);
    assert_eq!(h.fake.keys(), (1..=3).map(|k| format!("{id}/a/{k}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn non_retryable_errors_are_not_retried() {
    let h = harness();
    h.fake.on("a", |_| fail(ErrorKind::ToolError, false));
    let r = h
        .run(
            json!({"name": "w", "steps": [{"name": "a", "code": {"plugin": "p"}, "retry": {"max_attempts": 5}}]}),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Failed);
    assert_eq!(step(&r, "a").attempts, 1);
}

#[tokio::test]
async fn attempt_timeout_fails_with_timeout() {
    let h = harness();
    h.fake.on("a", |_| Act::Hang);
    let d = json!({"name": "w", "steps": [{"name": "a", "code": {"plugin": "p"}, "timeout_ms": 50},
        {"name": "h", "code": {"plugin": "p"}, "after": [{"step": "a", "on": "failure"}], "input": "@a"}]});
    let id = h.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    h.until_calls("a", 1).await;
    assert_eq!(h.fake.calls_of("a")[0].deadline_ms, Some(h.clock.now_ms() + 50));
    h.clock.advance(50);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "the timeout is handled by a failure edge");
    assert_eq!(step(&r, "a").error.as_ref().unwrap().kind, ErrorKind::Timeout);
    assert_eq!(step(&r, "h").state, StepState::Succeeded);
}

#[tokio::test]
async fn run_deadline_fails_and_cancels() {
    let h = harness();
    h.fake.on("a", |_| Act::Hang);
    let d = json!({"name": "w", "timeout_ms": 1000, "steps": [code("a"), {"name": "b", "code": {"plugin": "p"}, "input": "@a"}]});
    let id = h.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    h.until_calls("a", 1).await;
    h.clock.advance(1000);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Failed);
    assert_eq!(r.error.clone().unwrap().kind, ErrorKind::Deadline);
    assert_eq!(step(&r, "a").state, StepState::Canceled);
    assert_eq!(step(&r, "b").state, StepState::Skipped);
    assert_eq!(r.attempts[0].state, AttemptState::Canceled);
}

#[tokio::test]
async fn cancel_a_running_run() {
    let h = harness();
    h.fake.on("a", |_| Act::Hang);
    let id = h
        .engine
        .submit(
            &def(json!({"name": "w", "steps": [code("a"), {"name": "b", "code": {"plugin": "p"}, "input": "@a"}]})),
            json!({}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    h.until_calls("a", 1).await;
    let r = h.engine.cancel(&id).await.unwrap();
    assert_eq!(r.state, RunState::Canceled);
    assert_eq!(step(&r, "a").state, StepState::Canceled);
    assert_eq!(step(&r, "b").state, StepState::Canceled, "cancel records everything");
    assert_eq!(r.attempts[0].state, AttemptState::Canceled);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(h.fake.canceled.lock().unwrap().len(), 1);
    // terminal runs never change
    let again = h.engine.cancel(&id).await.unwrap();
    assert_eq!(again.updated_at, r.updated_at);
    check_log(&h, &r);
}

#[tokio::test]
async fn cancel_a_run_that_was_never_started() {
    let h = harness();
    let id = h
        .engine
        .create_run(&def(json!({"name": "w", "steps": [code("a")]})), json!({}), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(h.rec(&id).await.state, RunState::Submitted);
    let r = h.engine.cancel(&id).await.unwrap();
    assert_eq!(r.state, RunState::Canceled);
    assert_eq!(step(&r, "a").state, StepState::Canceled);
    assert!(h.fake.calls_of("a").is_empty());
}

#[tokio::test]
async fn return_step_ends_the_run_and_cancels_the_rest() {
    let h = harness();
    h.fake.on("slow", |_| Act::Hang);
    h.fake.on("a", |_| Act::Ok(json!({"v": 5})));
    let r = h
        .run(
            json!({"name": "w", "steps": [code("slow"), code("a"),
                {"name": "out", "return": true, "input": {"value": "@a.v"}},
                {"name": "later", "code": {"plugin": "p"}, "input": "@slow"}]}),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(r.output, Some(json!({"value": 5})));
    assert_eq!(step(&r, "out").state, StepState::Succeeded);
    assert_eq!(step(&r, "slow").state, StepState::Canceled);
    assert_eq!(step(&r, "later").state, StepState::Skipped);
}

#[tokio::test]
async fn return_behind_a_false_when_does_not_return() {
    let h = harness();
    let r = h
        .run(
            json!({"name": "w", "steps": [code("a"),
                {"name": "exit", "when": {"ref": "@a.stop", "eq": true}, "return": true, "input": "early"},
                {"name": "b", "code": {"plugin": "p"}, "after": ["a"]}]}),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "exit").state, StepState::Skipped);
    assert_eq!(step(&r, "b").state, StepState::Succeeded);
}

#[tokio::test]
async fn a_guest_can_reject_the_run() {
    let h = harness();
    h.fake.on("a", |_| Act::Reject("not a real email".into()));
    let r = h
        .run(
            json!({"name": "w", "steps": [code("a"), {"name": "b", "code": {"plugin": "p"}, "input": "@a"}]}),
            json!({}),
        )
        .await;
    assert_eq!(r.state, RunState::Rejected);
    assert_eq!(r.error.clone().unwrap().message, "not a real email");
    assert_eq!(step(&r, "b").state, StepState::Skipped);
}

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
async fn for_each_concurrency_caps_parallel_items() {
    let h = harness();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("each", move |_| Act::Gate(g.clone(), json!(1)));
    let d = json!({"name": "w", "steps": [{"name": "each", "code": {"plugin": "p"}, "for_each": [1, 2, 3, 4], "concurrency": 2}]});
    let id = h.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
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
async fn join_race_skips_when_the_first_finisher_fails() {
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
    let r = h.until(&id, |r| step(r, "j").state.is_terminal()).await;
    assert_eq!(step(&r, "j").state, StepState::Skipped);
    h.engine.cancel(&id).await.unwrap();
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

#[tokio::test]
async fn unsupported_actions_are_refused_before_storing() {
    let h = harness();
    let d = def(json!({"name": "w", "steps": [{"name": "s", "sleep": {"ms": 5}}]}));
    let e = h.engine.submit(&d, json!({}), RunOptions::default()).await.unwrap_err();
    assert!(e.to_string().contains("not yet supported"), "{e}");
    assert_eq!(h.store.commits(), 0);
}

#[tokio::test]
async fn recovery_retries_interrupted_attempts_and_never_reruns_successes() {
    let store = Arc::new(MemStore::new());
    let fake1 = Arc::new(Fake::default());
    fake1.on("b", |_| Act::Hang);
    let h1 = harness_with(store.clone(), fake1.clone(), 4);
    let d = json!({"name": "w", "steps": [code("a"),
        {"name": "b", "code": {"plugin": "p"}, "input": "@a", "retry": {"max_attempts": 2, "initial_delay_ms": 10, "jitter": false}}]});
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
    let r = h2.until(&id, |r| step(r, "b").state == StepState::Retrying).await;
    assert_eq!(r.attempts.iter().find(|a| a.step == "b").unwrap().state, AttemptState::Failed);
    h2.clock.advance(10);
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert!(fake2.calls_of("a").is_empty(), "a succeeded before the crash: never again");
    assert_eq!(fake2.keys(), vec![format!("{id}/b/2")]);
    assert_eq!(step(&r, "b").attempts, 2);
    check_log(&h2, &r);
}

#[tokio::test]
async fn recovery_without_retries_fails_the_interrupted_step() {
    let store = Arc::new(MemStore::new());
    let fake1 = Arc::new(Fake::default());
    fake1.on("a", |_| Act::Hang);
    let h1 = harness_with(store.clone(), fake1, 4);
    let id = h1
        .engine
        .submit(&def(json!({"name": "w", "steps": [code("a")]})), json!({}), RunOptions::default())
        .await
        .unwrap();
    h1.until_calls("a", 1).await;
    h1.engine.abort_all();
    let h2 = harness_with(store.clone(), Arc::new(Fake::default()), 4);
    h2.engine.recover().await.unwrap();
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Failed);
    assert_eq!(step(&r, "a").error.as_ref().unwrap().kind, ErrorKind::Timeout);
    assert!(step(&r, "a").error.as_ref().unwrap().message.contains("lease expired"));
}

#[tokio::test]
async fn recovery_of_a_for_each_keeps_finished_items() {
    let store = Arc::new(MemStore::new());
    let fake1 = Arc::new(Fake::default());
    fake1.on("e", |r| if r.input == json!(3) { Act::Hang } else { Act::Ok(json!(r.input.as_i64().unwrap() * 2)) });
    let h1 = harness_with(store.clone(), fake1.clone(), 1);
    let d = json!({"name": "w", "steps": [{"name": "e", "code": {"plugin": "p"}, "for_each": [1, 2, 3, 4], "input": "@item",
        "retry": {"max_attempts": 2, "initial_delay_ms": 1, "jitter": false}}]});
    let id = h1.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    h1.until_calls("e", 3).await;
    h1.engine.abort_all();
    let fake2 = Arc::new(Fake::default());
    fake2.on("e", |r| Act::Ok(json!(r.input.as_i64().unwrap() * 2)));
    let h2 = harness_with(store.clone(), fake2.clone(), 1);
    h2.clock.set(h1.clock.now_ms() + 100);
    h2.engine.recover().await.unwrap();
    h2.until(&id, |r| {
        r.attempts.iter().any(|a| a.item == Some(crate::ids::ItemIndex(2)) && a.state == AttemptState::Failed)
    })
    .await;
    h2.clock.advance(1);
    let r = h2.wait(&id).await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "e").output, Some(json!([2, 4, 6, 8])));
    let mut keys = fake2.keys();
    keys.sort();
    assert_eq!(keys, vec![format!("{id}/e/2/2"), format!("{id}/e/3/1")]);
}

#[tokio::test]
async fn global_concurrency_is_shared_by_runs() {
    let h = harness_with(Arc::new(MemStore::new()), Arc::new(Fake::default()), 2);
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("a", move |_| Act::Gate(g.clone(), json!(1)));
    let mut ids = vec![];
    for _ in 0..4 {
        ids.push(
            h.engine
                .submit(&def(json!({"name": "w", "steps": [code("a")]})), json!({}), RunOptions::default())
                .await
                .unwrap(),
        );
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
async fn a_store_failure_stops_the_driver_without_half_state() {
    let h = harness();
    let id = h
        .engine
        .create_run(&def(json!({"name": "w", "steps": [code("a")]})), json!({}), RunOptions::default())
        .await
        .unwrap();
    h.store.fail_next_commit(StoreError::Corrupt("disk says no".into()));
    h.engine.start(&id);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Submitted, "the claim batch was refused: nothing ran");
    assert!(h.fake.calls_of("a").is_empty(), "the runner is never called before its claim is committed");
    // a later start (e.g. the next process) picks it up
    h.engine.start(&id);
    assert_eq!(h.wait(&id).await.state, RunState::Completed);
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
    let id = h
        .engine
        .submit(&def(json!({"name": "w", "steps": [code("a")]})), json!({}), RunOptions::default())
        .await
        .unwrap();
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
    let id = h.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap();
    h.until_calls("hold", 1).await;
    h.clock.advance(10);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(h.fake.calls_of("flaky").len(), 1, "no permit yet");
    gate.add_permits(1);
    let r = h.wait(&id).await;
    assert_eq!(r.state, RunState::Completed);
    assert_eq!(step(&r, "flaky").attempts, 2);
}
