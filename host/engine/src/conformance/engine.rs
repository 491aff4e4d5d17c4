//! The engine on the store: runs complete, and a crashed engine's runs are
//! recovered by the next (no succeeded step runs again; the interrupted
//! attempt runs again as itself).

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::runner::{StepOutput, StepRequest, StepRunner};
use crate::{CancelToken, Engine, EngineConfig, RunOptions, SystemClock};

/// Answers with its request, or (on `hang_on`) waits to be canceled.
struct Echo {
    hang_on: Option<&'static str>,
}

#[async_trait::async_trait]
impl StepRunner for Echo {
    async fn run(&self, req: StepRequest, cancel: CancelToken) -> Result<StepOutput, StepError> {
        if self.hang_on == Some(req.step.as_str()) {
            cancel.canceled().await;
            return Err(StepError::canceled("stopped"));
        }
        Ok(StepOutput::Done(json!({"step": req.step, "key": req.idempotency_key, "in": req.input})))
    }
}

fn engine(store: Arc<dyn Store>, hang_on: Option<&'static str>) -> Engine {
    Engine::new(
        store,
        Arc::new(Echo { hang_on }),
        Arc::new(SystemClock),
        Arc::new(SeededRng::from_entropy()),
        EngineConfig::default(),
    )
}

fn def() -> weft_model::Definition {
    weft_model::from_value(
        &json!({"name": "chain", "steps": [
            {"name": "a", "code": {"plugin": "p"}, "input": "@input"},
            {"name": "b", "code": {"plugin": "p"}, "input": "@a.in",
             "retry": {"max_attempts": 2, "initial_delay_ms": 1, "jitter": false}},
            {"name": "c", "code": {"plugin": "p"}, "for_each": [1, 2, 3], "input": "@item", "after": ["b"]}]}),
        &weft_model::NoSchemas,
    )
    .unwrap()
}

/// Twenty runs of a chain with a retry policy and a `for_each` complete;
/// each run's log is gapless.
pub async fn runs_complete(store: Arc<dyn Store>) {
    let e = engine(store.clone(), None);
    let mut ids = vec![];
    for k in 0..20 {
        ids.push(e.submit(&def(), json!(k), RunOptions::default()).await.unwrap());
    }
    for (k, id) in ids.iter().enumerate() {
        let r = e.wait(id).await.unwrap();
        assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
        assert_eq!(r.steps[1].output.as_ref().unwrap()["in"], json!(k));
        assert_eq!(r.steps[2].output.as_ref().unwrap().as_array().unwrap().len(), 3);
        let evs = store.events_after(id, Seq::ZERO, 1000).await.unwrap();
        assert_eq!(evs.len() as u64, r.last_seq.0);
        assert!(evs.iter().enumerate().all(|(i, e)| e.seq.0 == i as u64 + 1));
        assert_eq!(store.run(id).await.unwrap().as_ref(), Some(&r), "the driver's record is the store's");
    }
}

/// An engine stopped while step `b` runs (as a crash leaves it: nothing
/// written) is recovered by another engine on the same store.
pub async fn crash_and_recover(store: Arc<dyn Store>) {
    let e = engine(store.clone(), Some("b"));
    let id = e.submit(&def(), json!("x"), RunOptions::default()).await.unwrap();
    for _ in 0..2500 {
        if store.run(&id).await.unwrap().unwrap().steps[1].state == StepState::Running {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    e.abort_all();
    drop(e);
    // Aborted tasks are dropped by the runtime a little later: let them go.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let before = store.run(&id).await.unwrap().unwrap();
    assert_eq!(before.steps[0].state, StepState::Succeeded);
    assert_eq!(before.steps[1].state, StepState::Running);
    assert_eq!(store.expired_leases(i64::MAX).await.unwrap().len(), 1);
    let e = engine(store.clone(), None);
    assert_eq!(e.recover().await.unwrap(), vec![id.clone()]);
    let r = match tokio::time::timeout(std::time::Duration::from_secs(8), e.wait(&id)).await {
        Ok(r) => r.unwrap(),
        Err(_) => panic!("stuck: {:#?}", store.run(&id).await.unwrap().unwrap().steps),
    };
    assert_eq!(r.state, RunState::Completed, "{:?}", r.error);
    assert_eq!(r.steps[0].attempts, 1, "a succeeded step never runs again");
    // The interrupted attempt ran again as itself: one attempt, the same
    // idempotency key, one interruption counted on its row.
    assert_eq!(r.steps[1].attempts, 1);
    assert_eq!(r.steps[1].output.as_ref().unwrap()["key"], json!(format!("{id}/b/1")));
    assert_eq!(
        r.attempts.iter().filter(|a| a.step == "b").map(|a| (a.state, a.interruptions)).collect::<Vec<_>>(),
        vec![(AttemptState::Succeeded, 1)]
    );
}
