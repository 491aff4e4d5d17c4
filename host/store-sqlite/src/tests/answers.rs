//! `Engine::wait` answers a run that ended from the record its driver kept
//! (the engine's `driver::mirror`); on SQLite that record must be the one
//! the store holds, field for field, whatever way the run ended.

use tokio::sync::Semaphore;
use weft_engine::runner::{StepOutput, StepRequest, StepRunner};
use weft_engine::{CancelToken, Engine, EngineConfig, RunOptions, SystemClock};

use super::*;

/// Steps by name: `gate` waits for a permit, `flaky` fails its first
/// attempt (retryable), `bad` fails for good, `reject` rejects the run;
/// any other echoes its input.
struct Steps {
    gate: Arc<Semaphore>,
}

#[async_trait::async_trait]
impl StepRunner for Steps {
    async fn run(&self, req: StepRequest, cancel: CancelToken) -> Result<StepOutput, StepError> {
        match req.step.as_str() {
            "gate" => tokio::select! {
                p = self.gate.acquire() => { p.unwrap().forget(); Ok(StepOutput::Done(json!("open"))) }
                _ = cancel.canceled() => Err(StepError::canceled("stopped")),
            },
            "flaky" if req.attempt == AttemptNo::FIRST => Err(StepError::new(ErrorKind::Transport, "flaky", true)),
            "bad" => Err(StepError::new(ErrorKind::ToolError, "bad", false)),
            "reject" => Ok(StepOutput::Reject("no".into())),
            _ => Ok(StepOutput::Done(json!({"step": req.step, "in": req.input}))),
        }
    }
}

fn def(steps: Value) -> weft_model::Definition {
    weft_model::from_value(&json!({"name": "w", "steps": steps}), &weft_model::NoSchemas).unwrap()
}

fn code(name: &str, after: Value) -> Value {
    json!({"name": name, "code": {"plugin": "p"}, "after": after})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_the_record_the_store_holds() {
    let (_d, p) = tmp();
    let store = Arc::new(SqliteStore::open(&p, Durability::Normal).unwrap());
    let gate = Arc::new(Semaphore::new(0));
    let e = Engine::new(
        store.clone(),
        Arc::new(Steps { gate: gate.clone() }),
        Arc::new(SystemClock),
        Arc::new(SeededRng::new(7)),
        EngineConfig::default(),
    );
    let g = || json!({"name": "gate", "code": {"plugin": "p"}});
    let cases = [
        (
            "completed",
            def(json!([g(), code("a", json!(["gate"])),
            {"name": "flaky", "code": {"plugin": "p"}, "after": ["a"],
             "retry": {"max_attempts": 2, "initial_delay_ms": 1, "jitter": false}},
            {"name": "items", "code": {"plugin": "p"}, "for_each": [1, 2, 3], "input": "@item", "after": ["flaky"]},
            {"name": "never", "code": {"plugin": "p"}, "after": ["gate"], "when": {"ref": "@input.go", "eq": true}}])),
        ),
        (
            "handled/completed",
            def(json!([g(), code("bad", json!(["gate"])), code("handler", json!([{"step": "bad", "on": "failure"}]))])),
        ),
        ("failed", def(json!([g(), code("bad", json!(["gate"])), code("later", json!(["bad"]))]))),
        ("rejected", def(json!([g(), code("reject", json!(["gate"]))]))),
        ("canceled", def(json!([g(), code("later", json!(["gate"]))]))),
    ];
    let mut waiters = vec![];
    for (name, d) in &cases {
        let id = e.submit(d, json!({"go": false}), RunOptions::default()).await.unwrap();
        let (e2, id2) = (e.clone(), id.clone());
        waiters.push((*name, id, tokio::spawn(async move { e2.wait(&id2).await })));
    }
    // Every run is at its gate and every waiter waits.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let canceled = &waiters.iter().find(|w| w.0 == "canceled").unwrap().1;
    e.cancel(canceled).await.unwrap();
    gate.add_permits(cases.len());
    for (name, id, w) in waiters {
        let got = w.await.unwrap().unwrap();
        assert_eq!(got.state.as_str(), name.rsplit('/').next().unwrap(), "{:?}", got.error);
        assert_eq!(got, store.run(&id).await.unwrap().unwrap(), "run `{name}`: the waiter's record is the store's");
    }
}
