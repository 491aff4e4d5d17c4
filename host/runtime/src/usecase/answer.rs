//! Answering and ending runs: a signal for a run's `wait` step (checked
//! against its schema; the first valid signal wins), an event for every
//! wait whose `match` holds (an id makes it idempotent), and cancelling a
//! run. Each goes through the engine that owns the store, so it is decided
//! in the run's own order; the answer is typed, and so is every refusal.

use serde::Serialize;
use serde_json::Value;
use weft_engine::outside::WaitKind;
use weft_engine::view::WaitView;
use weft_engine::{EmitAnswer, EngineError, ItemIndex, RunId, RunRecord, RunState, SignalAnswer, StepState};
use weft_model::Problem;

use super::{LookupRefused, UseCases};

/// A signal the step took.
#[derive(Debug, Clone)]
pub struct Signaled {
    pub run: RunId,
    pub step: String,
    /// The item answered, for a `for_each` wait.
    pub item: Option<u32>,
    /// For a `for_each` wait: its items still waiting, after this answer.
    pub waiting_items: Vec<u32>,
    /// The step's output: the data as given.
    pub output: Value,
    /// The run's state right after.
    pub state: RunState,
    /// The step did not wait yet: the signal is kept for it (this says
    /// so), and it takes it when it starts waiting.
    pub queued: Option<String>,
    /// The step is an agent step whose remote agent asked: the answer goes
    /// on to the remote task, and the step is not done (this says so).
    pub forwarded: Option<String>,
}

impl Signaled {
    /// The accepted signal to `step` (`item`) of `rec`, as the run is now
    /// (`now`; `rec` when it could not be read).
    pub fn after(rec: RunRecord, now: Option<&RunRecord>, step: &str, item: Option<u32>, taken: Taken) -> Signaled {
        let waiting_items = match (item, now) {
            (Some(_), Some(r)) => {
                WaitView::all(r).into_iter().filter(|w| w.step == step).filter_map(|w| w.item).collect()
            }
            _ => vec![],
        };
        let state = now.map_or(rec.state, |r| r.state);
        let (output, queued) = match taken {
            Taken::Now(v) => (v, None),
            Taken::Queued { data, message } => (data, Some(message)),
        };
        let asked =
            rec.waits.iter().any(|w| w.step == step && matches!(w.kind, WaitKind::Signal { resume: Some(_), .. }));
        let forwarded = asked.then(|| {
            format!(
                "the answer goes on to the remote agent of step `{step}`, which is not done: it may ask again (its next \
                 question shows in the run's `waits`) or end"
            )
        });
        Signaled { run: rec.id, step: step.to_string(), item, waiting_items, output, state, queued, forwarded }
    }
}

/// What a wait did with a signal it did not refuse.
#[derive(Debug, Clone, PartialEq)]
pub enum Taken {
    /// The step took it as its output.
    Now(Value),
    /// The step does not wait yet: `data` is kept for it (`message` says so).
    Queued { data: Value, message: String },
}

/// Why a wait did not take a signal: what the engine decided. As JSON it
/// is the engine's answer (`{"status": "invalid", "errors": [...]}`, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum WaitRefused {
    /// The data does not match the wait's schema; the step still waits.
    Invalid { errors: Vec<Problem> },
    /// The step was resolved before: the first valid signal won (or it
    /// timed out, was canceled or skipped).
    AlreadyResolved { state: StepState },
    /// The step does not wait for a signal (not yet, or not at all).
    NotWaiting { message: String },
    /// No such run or step.
    NotFound { message: String },
}

impl WaitRefused {
    /// The engine's answer to `data`: taken or queued, or why not.
    pub fn judge(answer: SignalAnswer, data: Value) -> Result<Taken, WaitRefused> {
        match answer {
            SignalAnswer::Accepted { output } => Ok(Taken::Now(output)),
            SignalAnswer::Queued { message } => Ok(Taken::Queued { data, message }),
            SignalAnswer::Invalid { errors } => Err(WaitRefused::Invalid { errors }),
            SignalAnswer::AlreadyResolved { state } => Err(WaitRefused::AlreadyResolved { state }),
            SignalAnswer::NotWaiting { message } => Err(WaitRefused::NotWaiting { message }),
            SignalAnswer::NotFound { message } => Err(WaitRefused::NotFound { message }),
        }
    }
}

/// Why a signal was not taken (nothing was changed).
#[derive(Debug, thiserror::Error)]
pub enum SignalRefused {
    /// The run named cannot be found.
    #[error(transparent)]
    Run(#[from] LookupRefused),
    /// The wait refused it.
    #[error("the wait refused the signal: {0:?}")]
    Wait(WaitRefused),
    /// The data is over `[limits] max_input_bytes` (or nests too deep).
    #[error("the signal's data is over its cap")]
    TooLarge(Vec<Problem>),
    /// The store failed, or the store's owner did not answer (trying again
    /// can help).
    #[error(transparent)]
    Failed(crate::RuntimeError),
}

impl SignalRefused {
    /// The engine's error: its refusal of data over the cap, else a failure.
    pub(super) fn of(e: EngineError) -> SignalRefused {
        match e {
            EngineError::Invalid(p) => SignalRefused::TooLarge(p.0),
            other => SignalRefused::Failed(other.into()),
        }
    }
}

/// Why an event was not emitted (nothing was changed).
#[derive(Debug, thiserror::Error)]
pub enum EmitRefused {
    #[error("the event's name is empty")]
    EmptyName,
    #[error("the event's id is empty")]
    EmptyId,
    /// The data is over `[limits] max_input_bytes` (or nests too deep).
    #[error("the event's data is over its cap")]
    TooLarge(Vec<Problem>),
    /// The store failed, or the store's owner did not answer.
    #[error(transparent)]
    Failed(crate::RuntimeError),
}

impl EmitRefused {
    /// The engine's error: its refusal of data over the cap, else a failure.
    pub(super) fn of(e: EngineError) -> EmitRefused {
        match e {
            EngineError::Invalid(p) => EmitRefused::TooLarge(p.0),
            other => EmitRefused::Failed(other.into()),
        }
    }
}

/// An event's name, trimmed, and its id, checked.
pub fn event_name(name: &str, id: Option<&str>) -> Result<String, EmitRefused> {
    let name = name.trim();
    if name.is_empty() {
        return Err(EmitRefused::EmptyName);
    }
    if id.is_some_and(|i| i.trim().is_empty()) {
        return Err(EmitRefused::EmptyId);
    }
    Ok(name.to_string())
}

/// A run after a cancel.
#[derive(Debug, Clone)]
pub struct Canceled {
    pub run: RunRecord,
    /// It had already finished: nothing was changed.
    pub already_finished: bool,
}

/// Why a run was not canceled.
#[derive(Debug, thiserror::Error)]
pub enum CancelRefused {
    #[error(transparent)]
    Run(#[from] LookupRefused),
    /// The store failed (trying again can help).
    #[error(transparent)]
    Failed(crate::RuntimeError),
}

impl UseCases {
    /// Answers `step` of run `run` (its id as the client wrote it) with
    /// `data`; for a `for_each` wait, its item `item`.
    pub async fn signal(
        &self,
        run: &str,
        step: &str,
        item: Option<u32>,
        data: Value,
    ) -> Result<Signaled, SignalRefused> {
        let rec = self.run(run).await?;
        let answer = self
            .engine
            .signal_item(&rec.id, step, item.map(ItemIndex), data.clone())
            .await
            .map_err(SignalRefused::of)?;
        let taken = WaitRefused::judge(answer, data).map_err(SignalRefused::Wait)?;
        let now = self.store.run(&rec.id).await.ok().flatten();
        Ok(Signaled::after(rec, now.as_ref(), step, item, taken))
    }

    /// Emits event `name` with `data` (and `id`, making it idempotent).
    pub async fn emit(&self, name: &str, data: Value, id: Option<String>) -> Result<EmitAnswer, EmitRefused> {
        let name = event_name(name, id.as_deref())?;
        self.engine.emit(&name, data, id).await.map_err(EmitRefused::of)
    }

    /// Cancels run `run` (its id as the client wrote it); a finished run
    /// is left as it is.
    pub async fn cancel(&self, run: &str) -> Result<Canceled, CancelRefused> {
        let rec = self.run(run).await?;
        if rec.state.is_terminal() {
            return Ok(Canceled { run: rec, already_finished: true });
        }
        let run = self.engine.cancel(&rec.id).await.map_err(|e| CancelRefused::Failed(e.into()))?;
        Ok(Canceled { run, already_finished: false })
    }
}
