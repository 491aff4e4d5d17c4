//! Tools about runs: `run_start` (with an optional wait that reports MCP
//! progress and asks the client for a waiting step's input, see
//! `elicit.rs`), `run_get` (the `runs show --json` object, its large
//! values trimmed: `weft_engine::bounded`; `values.rs` pages them), `run_list`,
//! `run_events` and `run_cancel`. Also [`Core::start_run`] and
//! [`Core::start_and_wait`], the use-case layer's start in MCP's terms,
//! which the `wf_<name>` tools share.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::tool::{InputResponses, IntoCallToolResult, RequestState};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::CallToolResponse;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::bounded;
use weft_engine::clock::rfc3339;
use weft_engine::store::RunFilter;
use weft_engine::{RunState, Seq};
use weft_runtime::usecase::answer::CancelRefused;
use weft_runtime::usecase::{RunSource, StartRequest, Started};

use crate::Core;
use crate::WeftServer;
use crate::mcp::errors::ToolError;
use crate::mcp::prepare;
use crate::mcp::reply::{MAX_WAIT_MS, Outcome};
use crate::mcp::views::{EventPage, RunStartOut, RunView};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunStartParams {
    /// A saved template to run (see template_list). Give this or `definition`.
    #[serde(default)]
    pub template: Option<String>,
    /// The template's version (default: the latest).
    #[serde(default)]
    pub version: Option<u32>,
    /// An inline workflow definition to run (format: resource weft://guide,
    /// JSON Schema: weft://schema/definition). Give this or `template`.
    #[serde(default)]
    #[schemars(with = "Option<prepare::DefinitionArg>")]
    pub definition: Option<Value>,
    /// The run's input, checked against the workflow's `input_schema` (default `{}`).
    #[serde(default)]
    pub input: Option<Value>,
    /// Wait up to this many milliseconds (at most 300000) for the run to
    /// finish and return its output; 0 or absent returns at once.
    #[serde(default)]
    #[schemars(range(max = 300_000))]
    pub wait_ms: Option<u64>,
    /// Step name → output given instead of computed (a mock, known data):
    /// stored `succeeded`; later steps see it.
    #[serde(default)]
    pub presets: std::collections::BTreeMap<String, Value>,
    /// Runs with one key execute one at a time, in start order (a run
    /// waiting for input holds its key).
    #[serde(default)]
    pub concurrency_key: Option<String>,
    /// A CPU budget (fuel) for all code steps of the run, replacing
    /// `limits.run_fuel`; past it a step fails `fuel_exhausted`.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub run_fuel: Option<u64>,
    /// The caller's metadata (`{"session": "s-42"}`): shown with the run,
    /// filtered by run_list, read as `@run.labels.session`.
    #[serde(default)]
    pub labels: weft_model::Labels,
    /// One run per key: a repeat returns that run (or `_meta`'s
    /// `dev.weft/idempotency-key`).
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Added to the definition's `notify` for this run.
    #[serde(default)]
    pub notify: Vec<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunIdParams {
    /// The run's id (r_..., from run_start or run_list).
    pub run_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunListParams {
    /// Only runs in this state.
    #[serde(default)]
    pub state: Option<RunState>,
    /// Only runs of this template.
    #[serde(default)]
    pub template: Option<String>,
    /// At most this many runs, newest first (default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
    /// Only runs with every one of these labels.
    #[serde(default)]
    pub labels: weft_model::Labels,
    /// Only the child runs of this run.
    #[serde(default)]
    pub parent: Option<String>,
}

/// A run in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunSummaryOut {
    pub id: String,
    pub template: String,
    pub version: Option<u32>,
    pub state: String,
    pub parent: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "weft_model::Labels::is_empty")]
    pub labels: weft_model::Labels,
}

/// A run, its large values trimmed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunGetOut {
    #[serde(flatten)]
    pub run: RunView,
    /// The values shown in part (`{"trimmed": {type, bytes, length, head,
    /// read_with}}` in their place) and the run_value call that pages each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trimmed: Vec<bounded::TrimmedAt>,
}

/// Runs, newest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunListOut {
    pub runs: Vec<RunSummaryOut>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunEventsParams {
    /// The run's id.
    pub run_id: String,
    /// Only events after this sequence number (default 0: from the start).
    #[serde(default)]
    pub after_seq: Option<u64>,
    /// At most this many events (default 500).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
}

/// What canceling did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunCancelOut {
    pub run_id: String,
    /// The run's state now.
    #[schemars(schema_with = "crate::mcp::views::run_state_names")]
    pub state: RunState,
    /// True when the run had already finished (nothing was changed).
    pub already_finished: bool,
}

impl Core {
    /// Validates, creates and starts a run (with the MCP call's trace
    /// context). Nothing is stored when refused.
    pub async fn start_run(&self, mut req: StartRequest) -> Result<Started, ToolError> {
        if req.traceparent.is_none() {
            req.traceparent = crate::trace_context::incoming();
        }
        if req.idempotency_key.is_none() {
            req.idempotency_key = crate::trace_context::incoming_key();
        }
        let template = match &req.source {
            RunSource::Template { name, .. } => Some(name.clone()),
            RunSource::Saved(t) => Some(t.name.clone()),
            RunSource::Definition(_) => None,
        };
        match self.for_mcp.start(req).await {
            Ok(started) => Ok(started),
            Err(e) => Err(prepare::start_refused(self, e, template.as_deref()).await),
        }
    }

    /// Starts a run and waits up to `wait_ms` for it, asking the client
    /// for input the run waits for (when it can be asked).
    pub async fn start_and_wait(
        self: &Arc<Self>,
        req: StartRequest,
        wait_ms: u64,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Outcome, ToolError> {
        let started = self.start_run(req).await?;
        let outcome = if wait_ms == 0 {
            let rec = self.load_run(started.id.as_str()).await?;
            Outcome::Run(RunStartOut::of(&rec))
        } else {
            let wait = Duration::from_millis(wait_ms.min(MAX_WAIT_MS));
            self.wait_answering(&started.id, wait, started.fresh, ctx).await?
        };
        Ok(match outcome {
            Outcome::Run(mut out) if started.replayed => {
                out.note = format!("this idempotency key started this run before (no new run); {}", out.note);
                Outcome::Run(out)
            }
            other => other,
        })
    }
}

/// What `run_start` answers: the run (structured `RunStartOut`), or, on
/// 2026-07-28, an `input_required` result that asks for a waiting step's
/// input (the client retries the call with the answer).
pub enum RunStartReply {
    Run(RunStartOut),
    Ask(rmcp::model::InputRequiredResult),
}

impl From<Outcome> for RunStartReply {
    fn from(o: Outcome) -> Self {
        match o {
            Outcome::Run(out) => RunStartReply::Run(out),
            Outcome::Ask(ask) => RunStartReply::Ask(ask),
        }
    }
}

impl IntoCallToolResult for RunStartReply {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        match self {
            RunStartReply::Run(out) => Json(out).into_call_tool_result(),
            RunStartReply::Ask(ask) => Ok(CallToolResponse::InputRequired(ask)),
        }
    }
}

#[tool_router(router = runs_router, vis = "pub(crate)")]
impl WeftServer {
    #[tool(
        description = concat!(
            "Start a run of a saved `template` (optional `version`) or an inline `definition` (format: weft://guide) with an `input` checked against its input_schema. With `wait_ms` it waits that long and returns the output; else the run id at once. A run waiting for input returns `input-required` with its `waits` (answer with run_signal; a client with elicitation is asked). Bad definitions or inputs are refused with each problem's JSON path; no run is created. Example: {\"definition\": ",
            prepare::definition_example!(),
            ", \"input\": {\"user\": {\"name\": \"Ada\"}}, \"wait_ms\": 10000}"
        ),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true),
        output_schema = rmcp::handler::server::common::schema_for_output::<RunStartOut>()
    )]
    async fn run_start(
        &self,
        Parameters(p): Parameters<RunStartParams>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
        ctx: RequestContext<RoleServer>,
    ) -> Result<RunStartReply, ToolError> {
        // The retry of a call that asked for input (2026-07-28): continue
        // that run with the answer instead of starting another.
        if let Some(state) = state {
            let wait = Duration::from_millis(p.wait_ms.unwrap_or(0).clamp(1, MAX_WAIT_MS));
            return Ok(self.core.resume_answering(&state, responses, wait, &ctx).await?.into());
        }
        let source = match RunSource::of(p.template, p.version, p.definition) {
            // A definition may come as its JSON text.
            Ok(RunSource::Definition(def)) => RunSource::Definition(prepare::definition_doc(def)?),
            Ok(source) => source,
            Err(e) => return Err(prepare::start_refused(&self.core, e, None).await),
        };
        let req = StartRequest {
            key: p.concurrency_key,
            presets: p.presets,
            run_fuel: p.run_fuel,
            labels: p.labels,
            idempotency_key: p.idempotency_key,
            notify: p.notify,
            ..StartRequest::new(source, p.input.unwrap_or_else(|| Value::Object(Default::default())))
        };
        Ok(self.core.start_and_wait(req, p.wait_ms.unwrap_or(0), &ctx).await?.into())
    }

    #[tool(
        description = "One run: state, input, output, error; each step's state, attempts, resolved `input` (per attempt: `tries`), output, error; open `waits` (a signal's prompt and schema: answer with run_signal); `artifacts` (read each at its `uri`); `notifications` with their state. Under ~28 KB: a larger value is {\"trimmed\": {length, head, read_with}} (see `trimmed`); run_value pages it.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_get(&self, Parameters(p): Parameters<RunIdParams>) -> Result<Json<RunGetOut>, ToolError> {
        let rec = self.core.load_run(&p.run_id).await?;
        let mut view = self.core.for_mcp.run_view(&rec).await;
        for a in &mut view.artifacts {
            a.uri = Some(crate::mcp::resources::artifact_uri(&rec.id, &a.name));
        }
        let (run, trimmed) = bounded::bound(view, "run_value");
        Ok(Json(RunGetOut { run, trimmed }))
    }

    #[tool(
        description = "Runs, newest first, optionally only those in one `state` or of one `template`.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_list(&self, Parameters(p): Parameters<RunListParams>) -> Result<Json<RunListOut>, ToolError> {
        let parent = match p.parent.as_deref().map(str::trim) {
            Some(text) => Some(text.parse().map_err(|_| {
                ToolError::new(format!("`parent` {text:?} is not a run id")).fix("a run id looks like r_01k…")
            })?),
            None => None,
        };
        let filter = RunFilter {
            state: p.state,
            template: p.template,
            limit: Some(p.limit.unwrap_or(50).clamp(1, 1000)),
            labels: p.labels,
            parent,
            ..Default::default()
        };
        let runs = self.core.store.list_runs(&filter).await.map_err(ToolError::internal)?;
        let runs = runs
            .into_iter()
            .map(|r| RunSummaryOut {
                id: r.id.to_string(),
                template: r.template,
                version: r.version,
                state: r.state.to_string(),
                parent: r.parent.map(|p| p.to_string()),
                created_at: rfc3339(r.created_at),
                updated_at: rfc3339(r.updated_at),
                labels: r.labels,
            })
            .collect();
        Ok(Json(RunListOut { runs }))
    }

    #[tool(
        description = "A run's event log in order (state changes, attempts, progress with its data, log lines, `signal.queued`, `notify.failed`), after `after_seq`, at most `limit` (500). `more: true`: call again with `after_seq` = `last_seq` (also to follow a run).",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_events(&self, Parameters(p): Parameters<RunEventsParams>) -> Result<Json<EventPage>, ToolError> {
        let rec = self.core.load_run(&p.run_id).await?;
        let after = Seq(p.after_seq.unwrap_or(0));
        let limit = p.limit.unwrap_or(500).clamp(1, 1000);
        // One more than asked: whether more are stored already.
        let read = self.core.store.events_after(&rec.id, after, limit + 1).await.map_err(ToolError::internal)?;
        Ok(Json(EventPage::of(&rec, read, after.0, limit)))
    }

    #[tool(
        description = "Cancel a run: running steps are interrupted; unfinished steps and the run end `canceled`. A finished run is left as it is.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_cancel(&self, Parameters(p): Parameters<RunIdParams>) -> Result<Json<RunCancelOut>, ToolError> {
        let c = self.core.for_mcp.cancel(&p.run_id).await.map_err(|e| match e {
            CancelRefused::Run(e) => prepare::lookup_refused(e),
            CancelRefused::Failed(e) => ToolError::internal(e),
        })?;
        Ok(Json(RunCancelOut {
            run_id: c.run.id.to_string(),
            state: c.run.state,
            already_finished: c.already_finished,
        }))
    }
}
