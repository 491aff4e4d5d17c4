//! The shapes tools return about runs: [`RunView`] (the `weft runs show
//! --json` object, with its open [`WaitView`]s), and [`RunStartOut`], what
//! `run_start` and the `wf_<name>` tools answer once they stop waiting.

use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::{RunRecord, RunState, view};

use super::errors::ToolError;

/// An error object: `{"kind", "message", "retryable"}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorOut {
    /// timeout, fuel_exhausted, memory_limit, trap, guest_error, transport,
    /// tool_error, protocol, validation, canceled, deadline, dependency_failed, ...
    pub kind: String,
    pub message: String,
    pub retryable: bool,
}

/// A step of a run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StepView {
    pub name: String,
    /// pending, running, waiting, retrying, succeeded, failed, skipped, canceled.
    pub state: String,
    pub attempts: u32,
    pub output: Option<Value>,
    pub error: Option<ErrorOut>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    /// When a retrying step tries again (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    /// Times its attempts were interrupted (their process died, or the host
    /// panicked) and ran again as themselves; absent when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptions: Option<u32>,
}

/// A step parked on something outside the run. A `signal` wait is answered
/// with run_signal (its data must match `schema`); an `event` wait by
/// event_emit of `event` with data whose fields equal `match`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct WaitView {
    /// The waiting step (run_signal's `step`).
    pub step: String,
    /// signal, event, child (a child run) or sleep (a timer).
    pub kind: String,
    /// Since when (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// When the wait times out or the timer fires (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Signal: what to ask whoever answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Signal: the JSON Schema the data must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Signal: the run's state while it waits (input-required or auth-required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Event: the event's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// Event: the fields the event's data must have.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<serde_json::Map<String, Value>>,
    /// Child: the child run's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
}

impl WaitView {
    /// Every open wait of a stored run.
    pub fn all(rec: &RunRecord) -> Vec<WaitView> {
        rec.waits.iter().filter_map(|w| serde_json::from_value(view::wait_json(w)).ok()).collect()
    }
}

/// A run: the `weft runs show --json` object.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunView {
    pub id: String,
    pub template: String,
    pub version: Option<u32>,
    /// submitted, working, input-required, auth-required, completed, failed, canceled, rejected.
    pub state: String,
    pub input: Value,
    pub output: Option<Value>,
    pub error: Option<ErrorOut>,
    pub parent: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub steps: Vec<StepView>,
    /// The steps parked on something outside the run: signals to answer
    /// with run_signal, events to emit with event_emit, child runs, timers.
    #[serde(default)]
    pub waits: Vec<WaitView>,
    /// Files the steps produced; read one as the resource
    /// `weft://runs/{id}/artifacts/{name}` (resources/read).
    #[serde(default)]
    pub artifacts: Vec<ArtifactView>,
}

/// A file a step produced, kept with its run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ArtifactView {
    pub name: String,
    pub mime: String,
    /// Bytes.
    pub size: u64,
    /// Hex sha256 of its bytes.
    pub sha256: String,
    /// The step (and item, for a for_each step) whose attempt made it.
    pub step: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<u32>,
    pub attempt: u32,
    pub created_at: String,
}

impl RunView {
    /// The view of a stored run.
    pub fn of(rec: &RunRecord) -> Result<Self, ToolError> {
        serde_json::from_value(view::run_json(rec)).map_err(ToolError::internal)
    }
}

/// What starting (and perhaps waiting for) a run gave.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunStartOut {
    /// The run's id (r_...): run_get, run_events, run_signal and run_cancel take it.
    pub run_id: String,
    /// Its state when the call returned.
    pub state: String,
    /// Whether it reached a final state (completed, failed, canceled, rejected).
    pub finished: bool,
    /// The run's output, when it completed.
    pub output: Option<Value>,
    /// Why it failed, when it did.
    pub error: Option<ErrorOut>,
    /// What the run waits for (when it is input-required or auth-required:
    /// the signals to answer with run_signal, with their prompt and schema).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<WaitView>,
    /// What to do next.
    pub note: String,
}

impl RunStartOut {
    /// The answer for a run as stored.
    pub fn of(rec: &RunRecord) -> Self {
        let finished = rec.state.is_terminal();
        let waiting = matches!(rec.state, RunState::InputRequired | RunState::AuthRequired);
        let waits = if finished { vec![] } else { WaitView::all(rec) };
        let note = match rec.state {
            RunState::Completed => "the run completed; `output` is its output".to_string(),
            s if s.is_terminal() => format!("the run is {s}; run_get shows each step's state and error"),
            _ if waiting => {
                let signals: Vec<&WaitView> = waits.iter().filter(|w| w.kind == "signal").collect();
                let what = match signals.first() {
                    Some(w) => format!(
                        "step `{}` waits for a signal{}: run_signal {{\"run_id\": \"{}\", \"step\": \"{}\", \"data\": ...}} answers it (`data` must match the wait's `schema`)",
                        w.step,
                        w.prompt.as_deref().map(|p| format!(" ({p})")).unwrap_or_default(),
                        rec.id,
                        w.step
                    ),
                    None => "run_get shows what it waits for".to_string(),
                };
                format!("the run is {}: {what}", rec.state)
            }
            _ => format!(
                "the run is still {}; run_get {{\"run_id\": \"{}\"}} shows it, run_events follows it, run_cancel stops it",
                rec.state, rec.id
            ),
        };
        RunStartOut {
            run_id: rec.id.to_string(),
            state: rec.state.to_string(),
            finished,
            output: if rec.state == RunState::Completed { rec.output.clone() } else { None },
            error: rec.error.as_ref().and_then(|e| serde_json::from_value(e.to_value()).ok()),
            waits,
            note,
        }
    }

    /// Puts `first` before the note (what happened while waiting).
    pub fn with_note(mut self, first: Option<String>) -> Self {
        if let Some(f) = first {
            self.note = format!("{f}; {}", self.note);
        }
        self
    }

    /// As a tool result: structured, `isError` when the run finished other
    /// than `completed` (it still carries the run's id, state and error).
    pub fn result(&self) -> CallToolResult {
        let failed = self.finished && self.state != "completed";
        let value = serde_json::to_value(self).expect("RunStartOut serializes");
        let mut result = CallToolResult::structured(value);
        if failed {
            result.is_error = Some(true);
            let why = self.error.as_ref().map(|e| format!(": {}: {}", e.kind, e.message)).unwrap_or_default();
            result.content =
                vec![ContentBlock::text(format!("run {} {}{why}; {}", self.run_id, self.state, self.note))];
        }
        result
    }
}
