//! What `run_start` and the `wf_<name>` tools answer once they stop
//! waiting: [`RunStartOut`]. The run views themselves ([`RunView`] and its
//! [`WaitView`]s) are the engine's, one for every front end.

use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::bounded::{self, ReadWith};
use weft_engine::view::WaitOn;
pub use weft_engine::view::{EventPage, RunView, WaitView};
use weft_engine::{RunRecord, RunState, StepError};

/// What starting (and perhaps waiting for) a run gave.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunStartOut {
    /// The run's id (r_...): run_get, run_events, run_signal and run_cancel take it.
    pub run_id: String,
    /// Its state when the call returned.
    pub state: RunState,
    /// Whether it reached a final state (completed, failed, canceled, rejected).
    pub finished: bool,
    /// The run's output, when it completed.
    pub output: Option<Value>,
    /// Why it failed, when it did.
    pub error: Option<StepError>,
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
                let signals: Vec<&WaitView> = waits.iter().filter(|w| w.kind == WaitOn::Signal).collect();
                let what = match signals.first() {
                    Some(w) => format!(
                        "step `{}`{} waits for a signal{}: run_signal {{\"run_id\": \"{}\", \"step\": \"{}\"{}, \"data\": ...}} answers it (`data` must match the wait's `schema`){}",
                        w.step,
                        w.item.map(|k| format!(" (item {k})")).unwrap_or_default(),
                        w.prompt.as_deref().map(|p| format!(" ({p})")).unwrap_or_default(),
                        rec.id,
                        w.step,
                        w.item.map(|k| format!(", \"item\": {k}")).unwrap_or_default(),
                        match signals.len() {
                            n if n > 1 => format!("; {} signal waits are open, each listed in `waits`", n),
                            _ => String::new(),
                        }
                    ),
                    None => "run_get shows what it waits for".to_string(),
                };
                format!("the run is {}: {what}", rec.state)
            }
            _ => match waits.iter().find(|w| w.kind == WaitOn::Event) {
                // A run waiting only for events stays `working`: say so.
                Some(w) => format!(
                    "the run is {}: step `{}` waits for the event `{}` (event_emit delivers it; run_get shows its `match`)",
                    rec.state,
                    w.step,
                    w.event.as_deref().unwrap_or_default()
                ),
                None => format!(
                    "the run is still {}; run_get {{\"run_id\": \"{}\"}} shows it, run_events follows it, run_cancel stops it",
                    rec.state, rec.id
                ),
            },
        };
        let mut output = if rec.state == RunState::Completed { rec.output.clone() } else { None };
        let mut note = note;
        // An output too large for one answer is shown in part, and said so.
        let read_with = ReadWith { tool: "run_value".into(), arguments: serde_json::json!({"run_id": rec.id}) };
        if let Some(t) = output.as_ref().and_then(|o| bounded::trim(o, bounded::VIEW_BUDGET, read_with)) {
            note = format!(
                "the run completed; its output ({} bytes) is shown in part: run_value {{\"run_id\": \"{}\"}} reads it page by page",
                t.bytes, rec.id
            );
            output = Some(serde_json::json!({ "trimmed": t }));
        }
        RunStartOut {
            run_id: rec.id.to_string(),
            state: rec.state,
            finished,
            output,
            error: rec.error.clone(),
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
        let failed = self.finished && self.state != RunState::Completed;
        let value = serde_json::to_value(self).expect("RunStartOut serializes");
        let mut result = CallToolResult::structured(value);
        if failed {
            result.is_error = Some(true);
            let why = self.error.as_ref().map(|e| format!(": {}: {}", e.kind.as_str(), e.message)).unwrap_or_default();
            result.content =
                vec![ContentBlock::text(format!("run {} {}{why}; {}", self.run_id, self.state, self.note))];
        }
        result
    }
}

/// The schema of a `state` field in a short answer: the run states' names
/// only (what each means is said once, where a run is shown whole), so
/// tools/list stays lean.
pub fn run_state_names(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
    schemars::json_schema!({"type": "string", "enum": names})
}
