//! The seam that does a step: code steps go to the sandbox, tool steps to
//! the MCP client pool. The engine itself handles `return`, `when` and
//! `for_each` and never calls a runner for them.

use std::sync::Arc;

use serde_json::Value;

pub use crate::cancel::CancelToken;
use crate::error::{ErrorKind, StepError};
use crate::ids::{AttemptNo, ItemIndex, RunId};
use crate::model_glue::{Action, CodeRef, Limits};
use crate::state::RunState;

/// Progress and log lines of a running attempt, appended to the run's
/// event log (best effort: they never fail the step).
pub trait EventSink: Send + Sync {
    /// `{"progress": p, "total": t, "message": m}`-like data.
    fn progress(&self, data: Value);
    fn log(&self, line: String);
    /// Fuel the attempt's guest used (counted against `limits.run_fuel`).
    fn fuel(&self, _used: u64) {}
    /// A file the attempt produced, stored with the run (before the
    /// attempt's outcome) and announced by an `artifact` event.
    fn artifact(&self, _name: String, _mime: String, _data: Vec<u8>) {}
    /// The attempt waits for an execution slot (a code step's share of the
    /// CPUs and of the guest memory budget): its timeout is paused until
    /// [`admitted`](Self::admitted). The wait is the engine's, not the step's.
    fn queued(&self) {}
    /// The attempt got its slot after waiting `waited`: its timeout runs
    /// from now.
    fn admitted(&self, _waited: std::time::Duration) {}
}

/// A sink that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn progress(&self, _: Value) {}
    fn log(&self, _: String) {}
}

/// One attempt of one step (or one item of a `for_each` step).
#[derive(Clone)]
pub struct StepRequest {
    pub run: RunId,
    pub step: String,
    pub item: Option<ItemIndex>,
    pub attempt: AttemptNo,
    /// `<run_id>/<step>[/<item>]/<attempt>`
    pub idempotency_key: String,
    /// The attempt's deadline, ms since epoch, counted from when the
    /// attempt was launched (the engine also enforces it). A runner that
    /// queues the attempt for a slot ([`EventSink::queued`]) moves it on by
    /// the time it waited, as the engine's timer does.
    pub deadline_ms: Option<i64>,
    pub action: Action,
    /// The step's `priority`: its place among attempts waiting for a slot.
    pub priority: i64,
    /// The step's `input` with every ref resolved.
    pub input: Value,
    pub limits: Option<Limits>,
    /// What is left of the run's CPU budget (`limits.run_fuel`), when it
    /// has one: the attempt may use at most this much fuel.
    pub run_fuel_left: Option<u64>,
    /// Tool steps: a code step applied to the tool's output (pinned).
    pub transform: Option<CodeRef>,
    pub events: Arc<dyn EventSink>,
    /// The run's stored `traceparent` (see [`crate::trace::RunTrace`]).
    pub trace: Option<Arc<str>>,
    /// The answer to the question this attempt asked before
    /// ([`StepOutput::Ask`]): it runs again as itself, with the answer.
    pub answer: Option<Answer>,
}

impl std::fmt::Debug for StepRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepRequest")
            .field("key", &self.idempotency_key)
            .field("action", &self.action.key())
            .field("input", &self.input)
            .field("deadline_ms", &self.deadline_ms)
            .finish()
    }
}

/// What a successful attempt produced.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutput {
    /// The step's output value.
    Done(Value),
    /// The guest rejects the whole run, with a reason: the run ends `rejected`.
    Reject(String),
    /// The attempt cannot go on without an answer from outside (a remote
    /// agent's task asks for input): the step waits for a signal, the run
    /// is `input-required` (or `auth-required`), and the answer relaunches
    /// the same attempt, with the same idempotency key, carrying
    /// [`StepRequest::answer`]. A `for_each` item cannot ask: it fails.
    Ask(Question),
}

/// What an attempt asks ([`StepOutput::Ask`]), as its signal wait shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub prompt: Option<String>,
    /// The answer must validate against this JSON Schema, when given.
    pub schema: Option<Value>,
    /// What the question is about, shown before it (a draft to approve).
    pub preview: Option<Value>,
    /// `input-required` or `auth-required`.
    pub reason: RunState,
    /// What the runner needs to go on (a remote task id and the question's
    /// id): kept with the wait and handed back with the answer.
    pub resume: Value,
}

/// The answer to a [`Question`], handed to the attempt that asked it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The question's [`Question::resume`].
    pub resume: Value,
    /// The signal's data, valid against the question's schema.
    pub data: Value,
}

/// A failed attempt.
pub type StepFailure = StepError;

impl StepError {
    pub fn timeout(message: impl Into<String>) -> Self {
        StepError::new(ErrorKind::Timeout, message, true)
    }
    pub fn canceled(message: impl Into<String>) -> Self {
        StepError::new(ErrorKind::Canceled, message, false)
    }
}

/// Does code and tool steps.
#[async_trait::async_trait]
pub trait StepRunner: Send + Sync + 'static {
    /// Run one attempt. When `cancel` fires the runner should stop as soon
    /// as it can (interrupt the guest, send `notifications/cancelled`); the
    /// engine stops waiting for it at once either way and records the
    /// attempt as canceled.
    async fn run(&self, req: StepRequest, cancel: CancelToken) -> Result<StepOutput, StepFailure>;

    /// The per-attempt timeout of a step of `action` that sets no
    /// `timeout_ms` (configuration such as a server's `timeout_ms`);
    /// `None` leaves the defaults of docs/workflow-format.md (code 10 s, tool 30 s).
    fn default_timeout_ms(&self, _action: &Action) -> Option<u64> {
        None
    }

    /// Whether an attempt of `action` will most likely finish on the calling
    /// thread, without waiting, in well under a millisecond (a guest whose
    /// recent calls were all short; a computation in the host). The run's
    /// driver then polls it in place instead of handing it to a task: no
    /// spawn, no thread wake-up, no hand-back. An attempt that waits after
    /// all goes on as a task from where it stopped; one that runs long
    /// holds the driver's thread meanwhile, so say `true` only when that
    /// is rare.
    fn finishes_in_place(&self, _action: &Action) -> bool {
        false
    }

    /// A step that asked ([`StepOutput::Ask`]) ended without its answer
    /// (its run was canceled or failed, a race lost it): whatever waits on
    /// the other side for the answer is told (a remote task is canceled).
    /// Best effort, after the step's end is committed.
    async fn abandon(&self, _action: &Action, _resume: &Value) {}
}

/// The text of a caught panic's payload (a runner's panic becomes an
/// interrupted attempt carrying it).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_string(),
    }
}
