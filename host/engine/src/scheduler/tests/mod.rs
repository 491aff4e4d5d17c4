//! Every execution semantic (docs/workflow-format.md; docs/architecture.md,
//! "The scheduler") with a ManualClock, a MemStore and a fake runner.

use crate::store::RunStore;
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
    /// Hold the thread (like a guest running in place) until canceled, or
    /// give up after 10 s.
    Spin,
    /// A bug in the runner.
    Panic,
    /// Report this much fuel used, then succeed with the value.
    Burn(u64, Value),
    /// Log this many lines of this many bytes, then succeed with `null`.
    Chatty(usize, usize),
    /// Ask this (see `asks`).
    Ask(crate::runner::Question),
}

type Behave = Arc<dyn Fn(&StepRequest) -> Act + Send + Sync>;

#[derive(Default)]
struct Fake {
    behave: Mutex<HashMap<String, Behave>>,
    calls: Mutex<Vec<StepRequest>>,
    canceled: Mutex<Vec<String>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
    /// What `finishes_in_place` says (every attempt polled by its driver).
    in_place: std::sync::atomic::AtomicBool,
    /// The `resume` of each question abandoned.
    abandoned: Mutex<Vec<Value>>,
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
    fn finishes_in_place(&self, _: &crate::model_glue::Action) -> bool {
        self.in_place.load(Ordering::SeqCst)
    }

    async fn abandon(&self, _: &crate::model_glue::Action, resume: &Value) {
        self.abandoned.lock().unwrap().push(resume.clone());
    }

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
            Act::Ask(q) => Ok(StepOutput::Ask(q)),
            Act::Panic => panic!("the runner broke"),
            Act::Chatty(lines, size) => {
                for _ in 0..lines {
                    req.events.log("x".repeat(size));
                }
                Ok(StepOutput::Done(Value::Null))
            }
            Act::Burn(fuel, v) => {
                req.events.fuel(fuel);
                Ok(StepOutput::Done(v))
            }
            Act::Hang => {
                cancel.canceled().await;
                self.canceled.lock().unwrap().push(req.idempotency_key.clone());
                Err(StepError::canceled("stopped"))
            }
            Act::Spin => {
                let t = std::time::Instant::now();
                while !cancel.is_canceled() && t.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_millis(1));
                }
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
    harness_config(store, fake, EngineConfig { max_concurrency: conc, ..EngineConfig::default() })
}

fn harness_config(store: Arc<MemStore>, fake: Arc<Fake>, cfg: EngineConfig) -> H {
    let clock = ManualClock::new(1_000_000);
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
    /// Submit a run of `d` with `{}` as input.
    async fn submit(&self, d: Value) -> RunId {
        self.engine.submit(&def(d), json!({}), RunOptions::default()).await.unwrap()
    }

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
    let id = h.submit(d).await;
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
    let id = h.submit(d).await;
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
    let id = h.submit(d).await;
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

/// A run's only attempt is polled by its driver before it becomes a task:
/// one that holds the thread meanwhile (a guest running in place) still
/// hears the run's cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_reaches_an_attempt_that_holds_its_thread() {
    let h = harness();
    h.fake.on("a", |_| Act::Spin);
    let id = h.submit(json!({"name": "w", "steps": [code("a")]})).await;
    h.until_calls("a", 1).await;
    let t = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(8), h.engine.cancel(&id)).await.expect("cancel hangs").unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "the attempt heard the cancel late: {:?}", t.elapsed());
    assert_eq!(r.state, RunState::Canceled);
    assert_eq!(r.attempts[0].state, AttemptState::Canceled);
}

/// Attempts a runner says finish in place are polled by the driver:
/// those that finish do (their logs before their outcome), and those that
/// wait after all go on as tasks, still side by side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_polled_in_place_finish_or_go_on_as_tasks() {
    let h = harness();
    h.fake.in_place.store(true, Ordering::SeqCst);
    let r = h
        .run(
            json!({"name": "w", "steps": [
                {"name": "each", "for_each": "@input.items", "concurrency": 3, "code": {"plugin": "p"}, "input": "@item"}
            ]}),
            json!({"items": [1, 2, 3, 4, 5, 6, 7]}),
        )
        .await;
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    let out: Vec<Value> = step(&r, "each").output.clone().unwrap().as_array().unwrap().clone();
    assert_eq!(out.len(), 7);
    assert_eq!(out[6]["input"], json!(7));
    let events = h.store.events_after(&r.id, crate::ids::Seq(0), 1000).await.unwrap();
    for k in 0..7u32 {
        let at = |kind: &str| {
            events.iter().position(|e| e.kind == kind && e.item == Some(crate::ids::ItemIndex(k))).unwrap_or_else(
                || {
                    panic!("no {kind} of item {k}");
                },
            )
        };
        assert!(at("progress") < at("item.succeeded"), "item {k}: its progress after its outcome");
    }

    // Gated attempts return Pending when polled: they become tasks, and
    // three run at once as the step's concurrency allows.
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    h.fake.on("slow", move |r| Act::Gate(g.clone(), r.input.clone()));
    let id = h
        .engine
        .submit(
            &def(json!({"name": "g", "steps": [
                {"name": "slow", "for_each": "@input.items", "concurrency": 3, "code": {"plugin": "p"}, "input": "@item"}
            ]})),
            json!({"items": [1, 2, 3, 4, 5]}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    h.until_calls("slow", 3).await;
    assert_eq!(h.fake.max_running.load(Ordering::SeqCst), 3);
    gate.add_permits(5);
    let r = tokio::time::timeout(Duration::from_secs(10), h.engine.wait(&id)).await.expect("run hangs").unwrap();
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(step(&r, "slow").output, Some(json!([1, 2, 3, 4, 5])));
}

/// The run's cancel reaches attempts polled in place that hold the thread,
/// also when several were launched together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_reaches_attempts_held_in_place() {
    let h = harness();
    h.fake.in_place.store(true, Ordering::SeqCst);
    h.fake.on("each", |_| Act::Spin);
    let id = h
        .engine
        .submit(
            &def(json!({"name": "w", "steps": [
                {"name": "each", "for_each": "@input.items", "concurrency": 2, "code": {"plugin": "p"}}
            ]})),
            json!({"items": [1, 2, 3]}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    h.until_calls("each", 1).await;
    let t = std::time::Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(20), h.engine.cancel(&id)).await.expect("cancel hangs").unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "the attempts heard the cancel late: {:?}", t.elapsed());
    assert_eq!(r.state, RunState::Canceled);
    assert!(!r.attempts.is_empty());
    assert!(r.attempts.iter().all(|a| a.state == AttemptState::Canceled), "{:?}", r.attempts);
}

/// A submitted run's driver starts from the record it just wrote, not
/// from a read: that record is exactly what the store holds.
#[tokio::test]
async fn a_fresh_record_is_what_the_store_holds() {
    let h = harness();
    let d = def(json!({"name": "w", "timeout_ms": 5000, "steps": [code("a"), code("b")]}));
    let opts = RunOptions { concurrency_key: Some("k".into()), ..RunOptions::default() };
    let (id, batch) = h.engine.run_batch(&d, json!({"x": 1}), opts).await.unwrap();
    let fresh = driver::fresh_record(&batch).expect("a batch that creates a run");
    h.store.commit(batch).await.unwrap();
    assert_eq!(fresh, h.rec(&id).await);
    // A run with a preset step is read back instead.
    let opts = RunOptions { presets: vec![("a".into(), json!({"done": true}))], ..RunOptions::default() };
    let (_, batch) = h.engine.run_batch(&d, json!({"x": 1}), opts).await.unwrap();
    assert!(driver::fresh_record(&batch).is_none());
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
                {"name": "exit", "when": {"ref": "@a.stop?", "eq": true}, "return": true, "input": "early"},
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

mod asks;
mod changes;
mod children;
mod early;
mod edges;
mod graph_and_items;
mod hibernate;
mod interruptions;
mod notify;
mod nowhere;
mod parked_items;
mod sleep;
mod submit;
mod waits;
