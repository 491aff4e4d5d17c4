//! Tools about runs: `run_start` (with an optional wait that reports MCP
//! progress and asks the client for a waiting step's input, see
//! `elicit.rs`), `run_get` (the `runs show --json` object), `run_list`,
//! `run_events` and `run_cancel`. Also [`Core::start_run`] and
//! [`Core::wait_run`], which the `wf_<name>` tools share.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::tool::{InputResponses, IntoCallToolResult, RequestState};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{CallToolResponse, ProgressToken};
use rmcp::service::{Peer, RequestContext};
use rmcp::{RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::clock::rfc3339;
use weft_engine::store::RunFilter;
use weft_engine::{RunEnd, RunId, RunOptions, RunRecord, RunState, Seq};

use crate::settle::Fresh;

use super::elicit::Outcome;
use super::errors::ToolError;
use super::prepare;
use super::views::{EventPage, RunStartOut, RunView};
use super::{Core, WeftServer};
use weft_runtime::pipeline::Source;

/// The longest a call waits for a run.
pub const MAX_WAIT_MS: u64 = 300_000;
/// How often a waiting call reads the run when no change was pushed (the
/// engine pushes every committed change of the runs this process drives;
/// this only bounds how late a missed one is seen).
pub const FALLBACK_POLL: Duration = Duration::from_secs(1);

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
    /// Steps whose output is given instead of computed (mock a step, inject
    /// known data, resume a recording): step name → output. They are
    /// stored `succeeded` with the run; steps after them see that output.
    #[serde(default)]
    pub presets: std::collections::BTreeMap<String, Value>,
    /// Runs with the same key execute one at a time, in the order they were
    /// started; the others stay `submitted` until the earlier ones finish
    /// (a run waiting for input still holds its key).
    #[serde(default)]
    pub concurrency_key: Option<String>,
    /// A CPU budget in fuel units for all code steps of this run together
    /// (replaces the definition's `limits.run_fuel`): each step may use at
    /// most what is left, and one that would go past it fails
    /// `fuel_exhausted`. Absent: the definition's budget, if any (by
    /// default code steps have no fuel limit; their timeout bounds them).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub run_fuel: Option<u64>,
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
    pub state: String,
    /// True when the run had already finished (nothing was changed).
    pub already_finished: bool,
}

/// Whom to tell about a waiting call's progress.
pub struct ProgressTo {
    pub token: ProgressToken,
    pub peer: Peer<RoleServer>,
}

impl ProgressTo {
    /// From a request's `_meta.progressToken`, if the caller sent one.
    pub fn of(ctx: &RequestContext<RoleServer>) -> Option<Self> {
        ctx.meta.get_progress_token().map(|token| ProgressTo { token, peer: ctx.peer.clone() })
    }
}

fn parse_id(s: &str) -> Result<RunId, ToolError> {
    s.trim().parse().map_err(|_| {
        ToolError::new(format!("`run_id` {s:?} is not a run id")).fix("a run id looks like r_01k…; run_list shows them")
    })
}

impl Core {
    /// The stored run `id`, or an error naming it.
    pub async fn load_run(&self, id: &str) -> Result<RunRecord, ToolError> {
        let rid = parse_id(id)?;
        self.store
            .run(&rid)
            .await
            .map_err(ToolError::internal)?
            .ok_or_else(|| ToolError::new(format!("no run `{rid}`")).fix("run_list shows the runs"))
    }

    /// Validates and creates a run of `doc` (a template's, when `opts`
    /// names it) and starts executing it. Nothing is stored when refused.
    pub async fn start_run(
        self: &Arc<Self>,
        source: Source,
        input: Value,
        opts: RunOptions,
    ) -> Result<(RunId, RunEnd), ToolError> {
        let p = prepare::for_run(self, source, input, opts).await?;
        // Created and started in one commit (the server owns the store).
        self.engine.submit_watched(p.plan.clone(), p.input, p.opts).await.map_err(|e| match e {
            weft_engine::EngineError::Invalid(problems) => {
                prepare::invalid_input(&problems.0, p.plan.input_schema.as_ref())
            }
            other => ToolError::internal(other),
        })
    }

    /// Starts a run of `source` and waits up to `wait_ms` for it, asking
    /// the client for input the run waits for (when it can be asked).
    pub async fn start_and_wait(
        self: &Arc<Self>,
        source: Source,
        input: Value,
        opts: RunOptions,
        wait_ms: u64,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Outcome, ToolError> {
        // Subscribed before the run exists: no change of it goes unheard.
        let changes = self.engine.subscribe();
        let (id, end) = self.start_run(source, input, opts).await?;
        if wait_ms == 0 {
            let rec = self.load_run(id.as_str()).await?;
            return Ok(Outcome::Run(RunStartOut::of(&rec)));
        }
        self.wait_answering(&id, Duration::from_millis(wait_ms.min(MAX_WAIT_MS)), Fresh { changes, end }, ctx).await
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

#[tool_router(router = runs_router, vis = "pub(super)")]
impl WeftServer {
    #[tool(
        description = concat!(
            "Start a run of a saved template (`template`, optional `version`) or of an inline `definition` (format: resource weft://guide), with an `input` checked against its input_schema. With `wait_ms` the call waits that long for the run to finish and returns its output (progress notifications are sent when the request has a progress token); otherwise it returns the run id at once. A run that waits for input returns `input-required` with its `waits` (answer with run_signal); a client that declared elicitation is asked for the input directly. `presets` gives steps their output instead of running them. Runs with the same `concurrency_key` execute one at a time. Bad definitions or inputs are refused with every problem's JSON path, and no run is created. Example: {\"definition\": ",
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
        let (source, mut opts) = match (p.template, p.definition) {
            (Some(_), Some(_)) => {
                return Err(ToolError::new("both `template` and `definition` are given")
                    .fix("give `template` to run a saved template, or `definition` to run an inline one, not both"));
            }
            (None, None) => {
                return Err(ToolError::new("neither `template` nor `definition` is given")
                    .fix("give `template` (see template_list) or an inline `definition`"));
            }
            (Some(name), None) => {
                let t = self.core.store.template(&name, p.version).await.map_err(ToolError::internal)?;
                let Some(t) = t else {
                    return Err(super::tools_templates::no_template_near(&self.core, &name, p.version).await);
                };
                let opts = RunOptions {
                    template: Some(t.name.clone()),
                    version: Some(t.version),
                    presets: p.presets.clone().into_iter().collect(),
                    ..Default::default()
                };
                (Source::Saved(t), opts)
            }
            (None, Some(def)) => {
                if p.version.is_some() {
                    return Err(ToolError::new("`version` applies to `template` only")
                        .fix("leave `version` out when running an inline `definition`"));
                }
                let opts = RunOptions { presets: p.presets.clone().into_iter().collect(), ..Default::default() };
                let doc = prepare::capped_definition_doc(def, self.core.settings.caps().max_definition_bytes)?;
                (Source::Client(doc), opts)
            }
        };
        if let Some(key) = p.concurrency_key {
            if key.trim().is_empty() {
                return Err(ToolError::new("`concurrency_key` is empty")
                    .fix("give a non-empty key, or leave `concurrency_key` out"));
            }
            opts.concurrency_key = Some(key);
        }
        let mut source = source;
        if let Some(fuel) = p.run_fuel {
            if fuel == 0 {
                return Err(ToolError::new("`run_fuel` is 0")
                    .fix("give a budget of at least 1 fuel unit, or leave `run_fuel` out for no budget"));
            }
            let doc = match &mut source {
                Source::Saved(t) => &mut t.definition,
                Source::Client(doc) => doc,
                Source::File(_) | Source::Template(_) => unreachable!("run_start loads no file or template by name"),
            };
            if let Some(def) = doc.as_object_mut() {
                let limits = def.entry("limits").or_insert_with(|| Value::Object(Default::default()));
                if let Some(l) = limits.as_object_mut() {
                    l.insert("run_fuel".into(), Value::from(fuel));
                }
            }
        }
        let input = p.input.unwrap_or_else(|| Value::Object(Default::default()));
        Ok(self.core.start_and_wait(source, input, opts, p.wait_ms.unwrap_or(0), &ctx).await?.into())
    }

    #[tool(
        description = "One run: its state, input, output, error, every step's state, attempts, resolved `input` (refs replaced by the values the step was given; each attempt's under `tries`), output and error, and its open `waits` (a signal wait's prompt and schema: answer it with run_signal) — the `weft runs show --json` object.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_get(&self, Parameters(p): Parameters<RunIdParams>) -> Result<Json<RunView>, ToolError> {
        let rec = self.core.load_run(&p.run_id).await?;
        Ok(Json(RunView::of(&rec)))
    }

    #[tool(
        description = "Runs, newest first, optionally only those in one `state` or of one `template`.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_list(&self, Parameters(p): Parameters<RunListParams>) -> Result<Json<RunListOut>, ToolError> {
        let filter = RunFilter {
            state: p.state,
            template: p.template,
            limit: Some(p.limit.unwrap_or(50).clamp(1, 1000)),
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
            })
            .collect();
        Ok(Json(RunListOut { runs }))
    }

    #[tool(
        description = "A run's event log in order (run and step state changes, attempts — `attempt.queued` while a code step waits for a CPU slot or guest memory, `attempt.admitted` with `waited_ms` when it starts; its timeout counts from then — progress and log lines), after `after_seq`, at most `limit` (500) per call. `more: true` means this page stopped at `limit`: call again with `after_seq` = the returned `last_seq` (also to follow a run).",
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
        description = "Cancel a run: running steps are interrupted, unfinished steps and the run end `canceled`. A run that already finished is left as it is.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn run_cancel(&self, Parameters(p): Parameters<RunIdParams>) -> Result<Json<RunCancelOut>, ToolError> {
        let rec = self.core.load_run(&p.run_id).await?;
        if rec.state.is_terminal() {
            return Ok(Json(RunCancelOut {
                run_id: rec.id.to_string(),
                state: rec.state.to_string(),
                already_finished: true,
            }));
        }
        let rec = self.core.engine.cancel(&rec.id).await.map_err(ToolError::internal)?;
        Ok(Json(RunCancelOut { run_id: rec.id.to_string(), state: rec.state.to_string(), already_finished: false }))
    }
}
