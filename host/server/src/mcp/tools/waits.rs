//! Answering waits: `run_signal` (the data a signal wait asked for,
//! validated against its schema; the first valid signal wins) and
//! `event_emit` (an event delivered to every wait whose `match` holds; an
//! event `id` makes it idempotent). Both go through the engine that owns
//! the store, so a signal is decided in the run's own order.

use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_runtime::usecase::answer::{EmitRefused, SignalRefused as Refused, WaitRefused};

use crate::WeftServer;
use crate::mcp::errors::{ProblemOut, ToolError};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunSignalParams {
    /// The run's id (r_...).
    pub run_id: String,
    /// The waiting step (run_get lists the run's `waits`).
    pub step: String,
    /// The answer: JSON matching the wait's `schema`.
    pub data: Value,
    /// For a step with `for_each` (one wait per item): the item to answer,
    /// as run_get's `waits` list it.
    #[serde(default)]
    pub item: Option<u32>,
}

/// A signal the step took.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunSignalOut {
    /// `accepted` or `queued` (a refused signal is an isError result
    /// whose structuredContent has `status` invalid, already_resolved,
    /// not_waiting or not_found).
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub run_id: String,
    pub step: String,
    /// The item answered, for a `for_each` wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<u32>,
    /// For a `for_each` wait: its items still waiting (the step goes on
    /// when none is left).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_items: Vec<u32>,
    /// The data as given (the step's output; for a `for_each` wait, this
    /// item's; for an agent step, the answer passed on: see `message`).
    pub output: Value,
    /// The run's state right after (working, completed, or input-required
    /// when another signal wait is open, ...).
    #[schemars(schema_with = "crate::mcp::views::run_state_names")]
    pub state: weft_engine::RunState,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EventEmitParams {
    /// The event's name, e.g. `order.paid` (waits name it as `event`).
    pub event: String,
    /// The event's data: every wait whose `match` holds for it takes it as
    /// its output (default `{}`): each `match` field equals the same field
    /// of `data`, a nested object matching a subset.
    #[serde(default = "empty_object")]
    #[schemars(default = "empty_object")]
    pub data: Value,
    /// The event's id: emitting an id again does nothing and answers what
    /// the first emit delivered (default: a new id).
    #[serde(default)]
    pub id: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

/// A wait an event resolved.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DeliveredOut {
    pub run_id: String,
    pub step: String,
}

/// What an event did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EventEmitOut {
    pub event: String,
    /// The event's id (the one given, or a new one).
    pub id: String,
    /// The waits it resolved; for a duplicate, those the first emit resolved.
    pub delivered: Vec<DeliveredOut>,
    /// True when an event with this id was emitted before: nothing was done now.
    pub duplicate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A signal the step refused: an `isError` result that says why and what
/// to do, with the same in `structuredContent`.
pub struct SignalRefused {
    status: &'static str,
    message: String,
    fix: String,
    errors: Vec<ProblemOut>,
    extra: serde_json::Map<String, Value>,
}

impl SignalRefused {
    fn of(refused: WaitRefused, run_id: &str, step: &str) -> SignalRefused {
        let mut extra = serde_json::Map::new();
        let (status, message, fix, errors) = match refused {
            WaitRefused::Invalid { errors } => (
                "invalid",
                format!(
                    "the data does not match the schema of step `{step}`'s wait ({} problem{}); the step still waits",
                    errors.len(),
                    if errors.len() == 1 { "" } else { "s" }
                ),
                "correct each path listed (JSON Pointers into `data`) and call run_signal again; run_get shows the wait's `schema`".to_string(),
                ProblemOut::all("data", &errors),
            ),
            WaitRefused::AlreadyResolved { state } => {
                extra.insert("state".into(), json!(state));
                let why = if state == weft_engine::StepState::Succeeded {
                    "the first valid signal (or event) won".to_string()
                } else {
                    "it no longer waits (timed out, canceled or skipped)".to_string()
                };
                (
                    "already_resolved",
                    format!("step `{step}` was already resolved (it is {state}): {why}"),
                    format!("nothing to do; run_get {{\"run_id\": \"{run_id}\"}} shows the step's output and what the run waits for now"),
                    vec![],
                )
            }
            // An agent step between two questions (the engine's message says so).
            WaitRefused::NotWaiting { message } if message.contains("is an `agent` step") => (
                "not_waiting",
                message,
                format!("answer when the step asks again: run_get {{\"run_id\": \"{run_id}\"}} shows its next question in `waits`, or the step's end"),
                vec![],
            ),
            WaitRefused::NotWaiting { message } => (
                "not_waiting",
                message,
                format!("signal a `wait` step of the run that waits for a signal (run_get {{\"run_id\": \"{run_id}\"}} lists its `waits`); one that does not wait yet keeps one signal per step (or item)"),
                vec![],
            ),
            WaitRefused::NotFound { message } => (
                "not_found",
                message,
                "check `run_id` (run_list shows the runs) and `step` (run_get shows the run's steps and waits)".to_string(),
                vec![],
            ),
        };
        SignalRefused { status, message, fix, errors, extra }
    }
}

impl IntoCallToolResult for SignalRefused {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        let mut text = self.message.clone();
        for p in &self.errors {
            text.push_str(&format!("\n- {}{}: {}", p.argument, p.path, p.message));
        }
        text.push_str(&format!("\nHow to fix: {}", self.fix));
        let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
        let mut structured = json!({"status": self.status, "message": self.message, "fix": self.fix});
        if !self.errors.is_empty() {
            structured["errors"] = json!(self.errors);
        }
        if let Value::Object(m) = &mut structured {
            m.extend(self.extra);
        }
        result.structured_content = Some(structured);
        Ok(result.into())
    }
}

/// A refusal of the call itself (bad arguments, store failure), or of the signal.
pub enum SignalError {
    Call(ToolError),
    Refused(SignalRefused),
}

impl From<ToolError> for SignalError {
    fn from(e: ToolError) -> Self {
        SignalError::Call(e)
    }
}

impl IntoCallToolResult for SignalError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        match self {
            SignalError::Call(e) => e.into_call_tool_result(),
            SignalError::Refused(r) => r.into_call_tool_result(),
        }
    }
}

#[tool_router(router = waits_router, vis = "pub(crate)")]
impl WeftServer {
    #[tool(
        description = "Answer a signal wait: `data` for `step` of run `run_id` (run_get lists `waits` with prompt and schema). Invalid data is refused with each problem's JSON path; the step keeps waiting. The first valid signal wins. Sent before the step waits: checked now, `status: queued`, taken when it waits (one per step). A `for_each` wait takes one per `item`.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn run_signal(&self, Parameters(p): Parameters<RunSignalParams>) -> Result<Json<RunSignalOut>, SignalError> {
        let s = self.core.for_mcp.signal(&p.run_id, &p.step, p.item, p.data).await.map_err(|e| match e {
            Refused::Run(e) => SignalError::Call(crate::mcp::prepare::lookup_refused(e)),
            Refused::Wait(w) => SignalError::Refused(SignalRefused::of(w, p.run_id.trim(), &p.step)),
            Refused::TooLarge(problems) => SignalError::Call(
                ToolError::with_problems("the signal's `data` is over its cap; the step still waits", ProblemOut::all("data", &problems))
                    .fix("send less data (a reference to where the rest is), or ask the operator to raise `[limits] max_input_bytes`"),
            ),
            Refused::Failed(e) => SignalError::Call(ToolError::internal(e)),
        })?;
        Ok(Json(RunSignalOut {
            status: if s.queued.is_some() { "queued" } else { "accepted" }.into(),
            message: s.queued.or(s.forwarded),
            run_id: s.run.to_string(),
            step: s.step,
            item: s.item,
            waiting_items: s.waiting_items,
            output: s.output,
            state: s.state,
        }))
    }

    #[tool(
        description = "Emit an event: every step waiting for `event` whose `match` holds for `data` (fields equal, a nested object a subset, a `/a/b` key a JSON Pointer) takes `data` as its output; a wait starting later (in a run begun before) takes it then. With an `id` it is idempotent: the same id again answers `duplicate: true`.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn event_emit(&self, Parameters(p): Parameters<EventEmitParams>) -> Result<Json<EventEmitOut>, ToolError> {
        let a = self.core.for_mcp.emit(&p.event, p.data, p.id).await.map_err(|e| match e {
            EmitRefused::EmptyName => {
                ToolError::new("`event` is empty").fix("name the event the waits wait for, e.g. `order.paid`")
            }
            EmitRefused::EmptyId => {
                ToolError::new("`id` is empty").fix("give a non-empty id, or leave `id` out for a new one")
            }
            EmitRefused::TooLarge(problems) => {
                ToolError::with_problems("the event's `data` is over its cap; nothing was emitted", ProblemOut::all("data", &problems))
                    .fix("send less data (a reference to where the rest is), or ask the operator to raise `[limits] max_input_bytes`")
            }
            EmitRefused::Failed(e) => ToolError::internal(e),
        })?;
        let event = p.event.trim().to_string();
        let note = (a.delivered.is_empty() && !a.duplicate).then(|| {
            format!("no wait took it now; it is kept: a wait for `{event}` that starts later, in a run begun before now, takes it (once per run)")
        });
        Ok(Json(EventEmitOut {
            note,
            event,
            id: a.id,
            delivered: a
                .delivered
                .into_iter()
                .map(|d| DeliveredOut { run_id: d.run.to_string(), step: d.step })
                .collect(),
            duplicate: a.duplicate,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_engine::StepState;
    use weft_model::Problem;

    fn structured(r: SignalRefused) -> (String, Value) {
        let CallToolResponse::Complete(r) = r.into_call_tool_result().unwrap() else { panic!("complete") };
        assert_eq!(r.is_error, Some(true));
        let text = r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<String>();
        (text, r.structured_content.unwrap())
    }

    #[test]
    fn invalid_data_names_each_path_in_data() {
        let a = WaitRefused::Invalid { errors: vec![Problem::new("/approved", "expected a boolean")] };
        let (text, s) = structured(SignalRefused::of(a, "r_1", "approve"));
        assert!(text.contains("- data/approved: expected a boolean"), "{text}");
        assert!(text.contains("How to fix"), "{text}");
        assert_eq!(s["status"], "invalid");
        assert_eq!(s["errors"][0]["path"], "/approved");
    }

    #[test]
    fn refusals_say_their_status() {
        let (_, s) =
            structured(SignalRefused::of(WaitRefused::AlreadyResolved { state: StepState::Succeeded }, "r_1", "a"));
        assert_eq!((s["status"].as_str(), s["state"].as_str()), (Some("already_resolved"), Some("succeeded")));
        let (text, s) =
            structured(SignalRefused::of(WaitRefused::NotFound { message: "no run r_1".into() }, "r_1", "a"));
        assert_eq!(s["status"], "not_found");
        assert!(text.starts_with("no run r_1"), "{text}");
    }
}
