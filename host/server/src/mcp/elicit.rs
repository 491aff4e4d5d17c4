//! Asking the waiting client for a run's input (MCP elicitation).
//!
//! A client waiting in `run_start` (`wait_ms`) or a `wf_<name>` call whose
//! run reaches a signal wait is asked for the data directly, when it
//! declared the elicitation capability (form mode) and the wait's `schema`
//! fits an elicitation form (MCP's `requestedSchema`: a flat object of
//! primitive properties). The answer goes through the use-case layer's signal
//! like a `run_signal`: invalid data is asked for again with the errors in
//! the message, at most [`MAX_ASKS`] times per wait; a decline returns the
//! run as it is (input-required, with its waits).
//!
//! How the question travels depends on the protocol revision:
//! - **2025-11-25**: an `elicitation/create` request to the client in the
//!   middle of the call ([`Asker::Peer`]).
//! - **2026-07-28** forbids server-to-client requests: the call answers an
//!   `input_required` result carrying the `elicitation/create` request and a
//!   `requestState` ([`Resume`]: run, step, asks so far); the client retries
//!   the same call with its answer in `inputResponses`, and the retry
//!   continues that run instead of starting another ([`Core::resume_answering`]).
//! - **Tasks** (`wf_<name>` under the tasks extension): the task reports
//!   `input_required` with the request; `tasks/update` answers it
//!   ([`follow_task`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, ProtocolVersion, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RequestContext};
use rmcp::task_manager::{TaskContext, TaskExit};
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use weft_engine::outside::{WaitKind, WaitRecord};
use weft_engine::{RunId, RunRecord, RunState};
use weft_model::Problem;
use weft_runtime::usecase::answer::{SignalRefused, WaitRefused};
use weft_runtime::usecase::{FALLBACK_POLL, Fresh, Progress};

use crate::Core;
use crate::mcp::errors::ToolError;
use crate::mcp::reply::{MAX_WAIT_MS, Outcome, ProgressTo};
use crate::mcp::views::RunStartOut;

/// How often one wait is asked for (the first ask and the asks again after
/// invalid answers).
pub const MAX_ASKS: u32 = 3;

/// A signal wait put as an elicitation form.
pub struct Question {
    step: String,
    prompt: String,
    schema: ElicitationSchema,
}

impl Question {
    /// The question for an open wait: a signal wait whose schema fits an
    /// elicitation form, else `None` (then nobody is asked).
    pub fn of(run: &RunId, w: &WaitRecord) -> Option<Question> {
        let WaitKind::Signal { prompt, schema: Some(schema), .. } = &w.kind else { return None };
        let schema = form_schema(schema)?;
        let prompt = prompt.clone().unwrap_or_else(|| format!("Input for step `{}` of weft run {run}", w.step));
        Some(Question { step: w.step.clone(), prompt, schema })
    }

    /// The `elicitation/create` request, with the previous answer's errors.
    fn request(&self, errors: Option<&[Problem]>) -> ElicitRequest {
        let mut message = self.prompt.clone();
        if let Some(errors) = errors.filter(|e| !e.is_empty()) {
            message.push_str("\n\nThe previous answer was refused:");
            for p in errors {
                let at = if p.path.is_empty() { "(the answer)".to_string() } else { p.path.clone() };
                message.push_str(&format!("\n- {at}: {}", p.message));
            }
            message.push_str("\nPlease answer again.");
        }
        ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: self.schema.clone(),
        })
    }
}

/// `schema` as an elicitation form's `requestedSchema`: an object of
/// primitive properties (string, number, integer, boolean, enums), nothing
/// else at the top. Keywords a form cannot show (`pattern`, ...) are left
/// out; the engine still checks the answer against the whole schema.
pub fn form_schema(schema: &Value) -> Option<ElicitationSchema> {
    let top = schema.as_object()?;
    if top.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    let allowed = ["type", "properties", "required", "title", "description", "$schema", "additionalProperties"];
    if top.keys().any(|k| !allowed.contains(&k.as_str())) {
        return None;
    }
    let props = top.get("properties")?.as_object()?;
    for p in props.values() {
        let fits = match p.get("type").and_then(Value::as_str) {
            Some("string" | "number" | "integer" | "boolean") => true,
            // A multi-select: an array of strings from an enum.
            Some("array") => p.get("items").is_some_and(|i| i.get("enum").is_some() || i.get("anyOf").is_some()),
            _ => false,
        };
        if !fits {
            return None;
        }
    }
    let mut form = top.clone();
    form.remove("additionalProperties");
    serde_json::from_value(Value::Object(form)).ok()
}

/// Whom to ask, as the request allows.
pub enum Asker {
    /// The client cannot be asked (no form elicitation declared).
    Nobody,
    /// 2025-11-25: an `elicitation/create` request on this peer.
    Peer(Peer<RoleServer>),
    /// 2026-07-28: an `input_required` result; the client retries.
    Retry,
}

impl Asker {
    /// Whom the request `ctx` lets us ask.
    pub fn of(ctx: &RequestContext<RoleServer>) -> Asker {
        if !can_elicit(ctx) {
            return Asker::Nobody;
        }
        if ctx.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28) {
            Asker::Retry
        } else {
            Asker::Peer(ctx.peer.clone())
        }
    }
}

/// Whether the request's client declared form elicitation (an empty
/// `elicitation` capability means form, as MCP says).
pub fn can_elicit(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities().and_then(|c| c.elicitation).is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// What `requestState` carries between the legs of a 2026-07-28 call: the
/// run, the step asked about, and how often it was asked. It names nothing
/// the caller could not reach with run_signal anyway.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    pub run: RunId,
    pub step: String,
    pub asked: u32,
}

const STATE_PREFIX: &str = "weft-wait/1/";

impl Resume {
    /// The `requestState` string.
    pub fn encode(&self) -> String {
        format!("{STATE_PREFIX}{}/{}/{}", self.run, self.asked, self.step)
    }

    /// A `requestState` this server gave, or an error saying it is not one.
    pub fn decode(s: &str) -> Result<Resume, ToolError> {
        let bad = || {
            ToolError::new("the request's `requestState` is not one weft gave")
                .fix("retry the call with the `requestState` of weft's input_required result, unchanged, or call it again without one")
        };
        let rest = s.strip_prefix(STATE_PREFIX).ok_or_else(bad)?;
        let mut parts = rest.splitn(3, '/');
        let run = parts.next().and_then(|r| r.parse::<RunId>().ok()).ok_or_else(bad)?;
        let asked = parts.next().and_then(|n| n.parse::<u32>().ok()).ok_or_else(bad)?;
        let step = parts.next().filter(|s| !s.is_empty()).ok_or_else(bad)?.to_string();
        Ok(Resume { run, step, asked })
    }

    /// The key of the question in `inputRequests` / `inputResponses`.
    fn key(&self) -> String {
        format!("{}#{}", self.step, self.asked)
    }
}

/// What the client answered.
enum Answer {
    Data(Value),
    Declined(ElicitationAction),
}

fn answer_of(r: ElicitResult) -> Answer {
    match r.action {
        ElicitationAction::Accept => Answer::Data(r.content.unwrap_or_else(|| Value::Object(Default::default()))),
        other => Answer::Declined(other),
    }
}

fn declined_note(step: &str, action: &ElicitationAction) -> String {
    let how = if matches!(action, ElicitationAction::Decline) { "declined" } else { "canceled" };
    format!("the client {how} the question of step `{step}`")
}

/// The asks so far and the last refusal of each waiting step.
#[derive(Default)]
struct Asked {
    count: HashMap<String, u32>,
    errors: HashMap<String, Vec<Problem>>,
}

impl Asked {
    fn errors_note(&self, step: &str) -> String {
        let errs: Vec<String> =
            self.errors.get(step).into_iter().flatten().map(|p| format!("data{}: {}", p.path, p.message)).collect();
        format!("{MAX_ASKS} answers for step `{step}` were invalid ({})", errs.join("; "))
    }
}

impl Core {
    /// Waits up to `wait` for run `id` (progress as asked); when it waits
    /// for a signal the client can answer, asks it (see the module docs).
    pub async fn wait_answering(
        self: &Arc<Self>,
        id: &RunId,
        wait: Duration,
        fresh: Option<Fresh>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Outcome, ToolError> {
        self.follow(id, wait, fresh, ctx, Asked::default(), None).await
    }

    /// The retry of a 2026-07-28 call that answered weft's question:
    /// `state` says which run and step, `responses` holds the answer.
    pub async fn resume_answering(
        self: &Arc<Self>,
        state: &str,
        responses: Option<InputResponses>,
        wait: Duration,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Outcome, ToolError> {
        let r = Resume::decode(state)?;
        self.load_run(r.run.as_str()).await?;
        let mut asked = Asked::default();
        asked.count.insert(r.step.clone(), r.asked);
        let response = responses.and_then(|mut m| m.remove(&r.key()));
        let Some(response) = response else {
            // Nothing answered: this leg asks again (not counted).
            asked.count.insert(r.step.clone(), r.asked.saturating_sub(1));
            return self.follow(&r.run, wait, None, ctx, asked, None).await;
        };
        let result: ElicitResult = serde_json::from_value(response).map_err(|e| {
            ToolError::new(format!("`inputResponses.{}` is not an elicitation result: {e}", r.key()))
                .fix("answer with {\"action\": \"accept\", \"content\": {...}}, or \"decline\" / \"cancel\"")
        })?;
        let note = match answer_of(result) {
            Answer::Declined(action) => {
                let rec = self.load_run(r.run.as_str()).await?;
                return Ok(Outcome::Run(RunStartOut::of(&rec).with_note(Some(declined_note(&r.step, &action)))));
            }
            Answer::Data(data) => self.answer(&r.run, &r.step, data, &mut asked).await?,
        };
        self.follow(&r.run, wait, None, ctx, asked, note).await
    }

    /// Signals `step` with the client's `data`; remembers a refusal.
    async fn answer(
        &self,
        run: &RunId,
        step: &str,
        data: Value,
        asked: &mut Asked,
    ) -> Result<Option<String>, ToolError> {
        Ok(match self.for_mcp.signal(run.as_str(), step, None, data).await {
            Ok(_) => {
                asked.errors.remove(step);
                None
            }
            // Asked again with the problems (data over its cap included).
            Err(SignalRefused::Wait(WaitRefused::Invalid { errors }) | SignalRefused::TooLarge(errors)) => {
                asked.errors.insert(step.to_string(), errors);
                None
            }
            Err(SignalRefused::Wait(WaitRefused::AlreadyResolved { .. })) => {
                Some(format!("step `{step}` was answered meanwhile"))
            }
            Err(SignalRefused::Wait(WaitRefused::NotWaiting { message } | WaitRefused::NotFound { message })) => {
                Some(message)
            }
            Err(SignalRefused::Run(e)) => return Err(crate::mcp::prepare::lookup_refused(e)),
            Err(SignalRefused::Failed(e)) => return Err(ToolError::internal(e)),
        })
    }

    async fn follow(
        self: &Arc<Self>,
        id: &RunId,
        wait: Duration,
        mut fresh: Option<Fresh>,
        ctx: &RequestContext<RoleServer>,
        mut asked: Asked,
        mut note: Option<String>,
    ) -> Result<Outcome, ToolError> {
        let asker = Asker::of(ctx);
        let mut until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let progress = ProgressTo::of(ctx);
            let progress = progress.as_ref().map(|p| p as &dyn Progress);
            let rec =
                self.for_mcp.settle(id, left, fresh.take(), progress, &ctx.ct).await.map_err(ToolError::internal)?;
            let as_is = |rec: &RunRecord, note: Option<String>| Ok(Outcome::Run(RunStartOut::of(rec).with_note(note)));
            if !matches!(rec.state, RunState::InputRequired | RunState::AuthRequired) || ctx.ct.is_cancelled() {
                return as_is(&rec, note);
            }
            let Some(q) = rec.waits.iter().find_map(|w| Question::of(&rec.id, w)) else { return as_is(&rec, note) };
            let n = asked.count.get(&q.step).copied().unwrap_or(0);
            if n >= MAX_ASKS {
                return as_is(&rec, Some(asked.errors_note(&q.step)));
            }
            let errors = asked.errors.get(&q.step).map(Vec::as_slice);
            match &asker {
                Asker::Nobody => return as_is(&rec, note),
                Asker::Retry => {
                    let r = Resume { run: rec.id.clone(), step: q.step.clone(), asked: n + 1 };
                    let mut requests = InputRequests::new();
                    requests.insert(r.key(), InputRequest::Elicitation(q.request(errors)));
                    return Ok(Outcome::Ask(InputRequiredResult::new(Some(requests), Some(r.encode()))));
                }
                Asker::Peer(peer) => {
                    asked.count.insert(q.step.clone(), n + 1);
                    let started = Instant::now();
                    let answer = tokio::select! {
                        r = ask_peer(peer, q.request(errors)) => r,
                        _ = ctx.ct.cancelled() => return as_is(&rec, note),
                    };
                    match answer {
                        Err(e) => {
                            return as_is(&rec, Some(format!("asking the client for step `{}` failed: {e}", q.step)));
                        }
                        Ok(Answer::Declined(action)) => return as_is(&rec, Some(declined_note(&q.step, &action))),
                        Ok(Answer::Data(data)) => {
                            note = self.answer(&rec.id, &q.step, data, &mut asked).await?;
                            // The time the user took to answer does not count.
                            until += started.elapsed();
                        }
                    }
                }
            }
        }
    }
}

/// Sends `request` to a 2025-11-25 client and awaits its answer (a person
/// may take a while: up to [`MAX_WAIT_MS`]).
async fn ask_peer(peer: &Peer<RoleServer>, request: ElicitRequest) -> Result<Answer, String> {
    let options = PeerRequestOptions::with_timeout(Duration::from_millis(MAX_WAIT_MS));
    let handle = peer.send_request_with_option(ServerRequest::ElicitRequest(request), options).await;
    match handle.map_err(|e| e.to_string())?.await_response().await.map_err(|e| e.to_string())? {
        ClientResult::ElicitResult(r) => Ok(answer_of(r)),
        other => Err(format!("the client answered something else than an elicitation result: {other:?}")),
    }
}

/// Waits until the wait of `step` in run `id` is no longer open (answered
/// by run_signal, timed out, or the run ended).
async fn until_resolved(core: &Core, id: &RunId, step: &str) {
    let mut changes = core.engine.subscribe();
    loop {
        match core.store.run(id).await {
            Ok(Some(rec)) if !rec.state.is_terminal() && rec.waits.iter().any(|w| w.step == step) => {}
            _ => return,
        }
        tokio::select! {
            _ = changes.of_run(id) => {}
            _ = tokio::time::sleep(FALLBACK_POLL) => {}
        }
    }
}

/// A task's run followed to its end. When the run waits for a signal and
/// the client can answer elicitations, the task turns `input_required`
/// with the question (`tasks/update` answers it); otherwise the task ends
/// with the run waiting, as a direct call would.
pub async fn follow_task(
    core: Arc<Core>,
    id: RunId,
    elicit: bool,
    task: TaskContext,
) -> Result<rmcp::model::CallToolResult, TaskExit> {
    let never = tokio_util::sync::CancellationToken::new();
    let forever = Duration::from_secs(365 * 24 * 3600);
    let internal = |e: ToolError| TaskExit::Error(ErrorData::internal_error(e.to_string(), None));
    let cancel = |core: Arc<Core>, id: RunId| async move {
        let _ = core.engine.cancel(&id).await;
        Err(TaskExit::Cancelled)
    };
    let mut asked = Asked::default();
    let mut note = None;
    let mut keys = 0u32;
    loop {
        let rec = tokio::select! {
            _ = task.cancelled() => return cancel(core, id).await,
            r = core.for_mcp.settle(&id, forever, None, None, &never) => r.map_err(|e| internal(ToolError::internal(e)))?,
        };
        let as_is = |rec: &RunRecord, note: Option<String>| Ok(RunStartOut::of(rec).with_note(note).result());
        if !elicit || !matches!(rec.state, RunState::InputRequired | RunState::AuthRequired) {
            return as_is(&rec, note);
        }
        let Some(q) = rec.waits.iter().find_map(|w| Question::of(&rec.id, w)) else { return as_is(&rec, note) };
        let n = asked.count.get(&q.step).copied().unwrap_or(0);
        if n >= MAX_ASKS {
            return as_is(&rec, Some(asked.errors_note(&q.step)));
        }
        asked.count.insert(q.step.clone(), n + 1);
        keys += 1;
        let request = InputRequest::Elicitation(q.request(asked.errors.get(&q.step).map(Vec::as_slice)));
        let answer = tokio::select! {
            _ = task.cancelled() => return cancel(core, id).await,
            // Answered some other way (run_signal): the question is moot.
            _ = until_resolved(&core, &id, &q.step) => continue,
            r = task.request_input(format!("{}#{keys}", q.step), request) => match r {
                Err(TaskExit::Cancelled) => return cancel(core, id).await,
                Err(e) => return Err(e),
                Ok(v) => v,
            },
        };
        match serde_json::from_value::<ElicitResult>(answer) {
            Ok(r) => match answer_of(r) {
                Answer::Declined(action) => return as_is(&rec, Some(declined_note(&q.step, &action))),
                Answer::Data(data) => note = core.answer(&id, &q.step, data, &mut asked).await.map_err(internal)?,
            },
            Err(e) => note = Some(format!("the answer for step `{}` was not an elicitation result: {e}", q.step)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flat_objects_of_primitives_fit_a_form() {
        let s = json!({"type": "object", "required": ["approved"], "additionalProperties": false,
            "properties": {"approved": {"type": "boolean"}, "note": {"type": "string", "pattern": "^[A-Z]"},
                           "n": {"type": "integer", "minimum": 1}, "color": {"type": "string", "enum": ["red", "blue"]}}});
        let form = form_schema(&s).expect("fits");
        let v = serde_json::to_value(&form).unwrap();
        assert_eq!(v["required"], json!(["approved"]));
        assert_eq!(v["properties"]["n"]["minimum"], 1);
        assert!(v.get("additionalProperties").is_none());
    }

    #[test]
    fn nested_or_composed_schemas_do_not_fit() {
        for s in [
            json!({"type": "object", "properties": {"a": {"type": "object"}}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}}}),
            json!({"type": "object", "properties": {"a": {}}}),
            json!({"type": "object", "anyOf": [], "properties": {}}),
            json!({"type": "string"}),
            json!(true),
        ] {
            assert!(form_schema(&s).is_none(), "{s}");
        }
    }

    #[test]
    fn request_state_round_trips_and_refuses_strangers() {
        let run: RunId = RunId::generate(1, &weft_engine::SeededRng::new(3));
        let r = Resume { run, step: "approve".into(), asked: 2 };
        assert_eq!(Resume::decode(&r.encode()).unwrap(), r);
        assert_eq!(r.key(), "approve#2");
        for bad in ["", "weft-wait/1/", "weft-wait/1/r_x/1/a", "other", &format!("weft-wait/1/{}/x/a", r.run)] {
            assert!(Resume::decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_message_asks_again_with_the_errors() {
        let q = Question {
            step: "approve".into(),
            prompt: "Approve?".into(),
            schema: form_schema(&json!({"type": "object", "properties": {"ok": {"type": "boolean"}}})).unwrap(),
        };
        let req = q.request(Some(&[Problem::new("/ok", "expected a boolean")]));
        let ElicitRequestParams::FormElicitationParams { message, .. } = req.params else { panic!("a form") };
        assert!(message.starts_with("Approve?"), "{message}");
        assert!(message.contains("- /ok: expected a boolean"), "{message}");
    }
}
