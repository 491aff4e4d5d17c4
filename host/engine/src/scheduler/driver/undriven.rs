//! Runs no driver holds: one whose stored plan no longer loads (failed
//! without a driver), and one canceled before any driver took it.

use crate::state::Transition as _;
use std::sync::Arc;

use serde_json::{Value, json};

use super::super::{Engine, EngineError, Shared};
use crate::error::{ErrorKind, StepError};
use crate::ids::RunId;
use crate::state::{AttemptState, RunEvent, StepEvent};
use crate::store::{Batch, NewEvent, RunRecord, Write};

/// A run whose stored plan no longer loads fails with a validation error.
pub(super) async fn fail_unloadable(sh: &Shared, rec: &RunRecord, why: String) -> Result<(), EngineError> {
    let now = sh.clock.now_ms();
    let to = rec.state.apply(RunEvent::Fail)?;
    let err = StepError::new(ErrorKind::Validation, format!("the stored plan does not load: {why}"), false);
    let mut b = Batch::new();
    b.push(Write::RunState {
        run: rec.id.clone(),
        from: rec.state,
        to,
        output: None,
        error: Some(err.clone()),
        at: now,
    });
    b.push(Write::Event(NewEvent {
        run: rec.id.clone(),
        seq: rec.last_seq.next(),
        at: now,
        kind: format!("run.{to}"),
        step: None,
        item: None,
        data: json!({"state": to, "error": err}),
    }));
    sh.commit(b).await?;
    Ok(())
}

/// Cancel a run no task drives (e.g. still `submitted`).
pub(in crate::scheduler) async fn cancel_undriven(sh: &Arc<Shared>, id: &RunId) -> Result<(), EngineError> {
    let rec = sh.store.run(id).await?.ok_or_else(|| EngineError::NotFound(id.clone()))?;
    if rec.state.is_terminal() {
        return Ok(());
    }
    let now = sh.clock.now_ms();
    let mut b = Batch::new();
    let mut seq = rec.last_seq;
    let mut ev = |b: &mut Batch, kind: String, step: Option<String>, data: Value| {
        seq = seq.next();
        b.push(Write::Event(NewEvent { run: id.clone(), seq, at: now, kind, step, item: None, data }));
    };
    for a in rec.attempts.iter().filter(|a| a.state == AttemptState::Running) {
        b.push(Write::FinishAttempt {
            run: id.clone(),
            step: a.step.clone(),
            item: a.item,
            attempt: a.attempt,
            state: AttemptState::Canceled,
            output: None,
            error: Some(StepError::canceled("the run was canceled")),
            fuel: None,
            blame: 0,
            at: now,
        });
    }
    for w in &rec.waits {
        b.push(Write::CloseWait { run: id.clone(), step: w.step.clone() });
    }
    for s in rec.steps.iter().filter(|s| !s.state.is_terminal()) {
        let to = s.state.apply(StepEvent::Cancel)?;
        b.push(Write::StepState {
            run: id.clone(),
            step: s.name.clone(),
            from: s.state,
            to,
            output: None,
            error: None,
            next_attempt_at: None,
            at: now,
        });
        ev(&mut b, format!("step.{to}"), Some(s.name.clone()), json!({"state": to}));
    }
    let to = rec.state.apply(RunEvent::Cancel)?;
    let err = StepError::canceled("the run was canceled");
    b.push(Write::RunState { run: id.clone(), from: rec.state, to, output: None, error: Some(err.clone()), at: now });
    ev(&mut b, format!("run.{to}"), None, json!({"state": to, "error": err.clone()}));
    // Its notifications, as the run stands canceled.
    if let Ok(def) = sh.plans.get(&rec)
        && let Some(on) = crate::notices::on_state(to)
    {
        let mut ended = rec.clone();
        ended.state = to;
        ended.error = Some(err);
        for s in ended.steps.iter_mut().filter(|s| !s.state.is_terminal()) {
            s.state = s.state.apply(StepEvent::Cancel)?;
        }
        b.writes.extend(crate::notices::for_record(&def.notify, &on, &ended, seq, now, sh.config.delivery_retry));
    }
    sh.commit(b).await?;
    let engine = Engine::from_shared(sh.clone());
    // Signals queued for its steps are answered.
    engine.answer_queued(id, to).await;
    abandon_questions(sh, &rec).await;
    // Its children go with it.
    for run in rec.waits.iter().flat_map(|w| w.kind.children()) {
        if let Err(e) = Box::pin(engine.cancel(run)).await {
            tracing::warn!(run = %run, error = %e, "cannot cancel a child run");
        }
    }
    Ok(())
}

/// The questions `rec`'s steps asked and nobody will answer now (see the
/// driver's `ask`): their runners are told, each for 5 s at most.
async fn abandon_questions(sh: &Shared, rec: &RunRecord) {
    let Ok(def) = sh.plans.get(rec) else { return };
    for w in &rec.waits {
        let (crate::outside::WaitKind::Signal { resume: Some(resume), .. }, Some(step)) =
            (&w.kind, def.steps.iter().find(|s| s.name == w.step))
        else {
            continue;
        };
        let told = sh.runner.abandon(&step.action, resume);
        if tokio::time::timeout(std::time::Duration::from_secs(5), told).await.is_err() {
            tracing::warn!(run = %rec.id, step = %w.step, "telling a step's runner its question is abandoned took over 5 s");
        }
    }
}
