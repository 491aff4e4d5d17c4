//! Runs over HTTP: list, show, start (optionally waiting for the end),
//! cancel, answer a wait, and the DAG with live step states.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::store::RunFilter;
use weft_engine::view::RunView;
use weft_engine::{RunId, RunRecord, RunState, StepState};
use weft_model::EdgeOn;
use weft_runtime::usecase::answer::{CancelRefused, SignalRefused, WaitRefused};
use weft_runtime::usecase::{LookupRefused, RunSource, StartRefused, StartRequest};

use super::{ApiError, Body, Params};
use crate::Core;

/// The longest `wait_ms` (5 minutes).
pub const MAX_WAIT_MS: u64 = 300_000;

/// `GET /runs` filters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListQuery {
    /// Only runs in this state.
    pub state: Option<RunState>,
    /// Only runs of this template.
    pub template: Option<String>,
    /// Only the children of this run.
    pub parent: Option<String>,
    /// Only runs of this concurrency key.
    pub key: Option<String>,
    /// Only runs with this label, as `KEY:VALUE` (several: comma-separated,
    /// every one must match).
    pub label: Option<String>,
    /// Only runs whose template's name contains this (ignoring case).
    pub template_contains: Option<String>,
    /// Only runs created at or after this time (RFC 3339, e.g.
    /// `2026-11-29T08:00:00Z`).
    pub created_from: Option<String>,
    /// Only runs created before this time (RFC 3339).
    pub created_until: Option<String>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<usize>,
    /// Only runs older than this run id: the `next` of the previous page.
    pub cursor: Option<String>,
}

/// A page of runs, newest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunPage {
    pub runs: Vec<RunSummaryView>,
    /// The `cursor` of the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// One run in a list.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunSummaryView {
    pub id: String,
    pub template: String,
    pub version: Option<u32>,
    pub state: RunState,
    pub parent: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "weft_model::Labels::is_empty")]
    pub labels: weft_model::Labels,
    /// Why it failed, for a run that did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<weft_engine::StepError>,
}

/// A run named by a client that cannot be found, in the API's terms.
pub(super) fn lookup_refused(e: LookupRefused) -> ApiError {
    match e {
        LookupRefused::NotAnId(text) => ApiError::invalid(format!("{text:?} is not a run id"))
            .hint("a run id looks like r_01k…; GET /api/v1/runs lists them"),
        LookupRefused::NotFound(id) => {
            ApiError::not_found(format!("no run `{id}`")).hint("GET /api/v1/runs lists the runs")
        }
        LookupRefused::Failed(e) => ApiError::internal(e),
    }
}

pub(super) fn run_id(text: &str, path: &str) -> Result<RunId, ApiError> {
    text.parse().map_err(|_| {
        ApiError::invalid(format!("{text:?} is not a run id"))
            .at(path)
            .hint("a run id looks like r_01k…; GET /api/v1/runs lists them")
    })
}

pub(super) async fn load(core: &Core, id: &str) -> Result<RunRecord, ApiError> {
    core.for_http.run(id).await.map_err(lookup_refused)
}

pub(super) async fn list(
    State(core): State<Arc<Core>>,
    Params(q): Params<ListQuery>,
) -> Result<Json<RunPage>, ApiError> {
    let limit = q.limit.unwrap_or(50).clamp(1, 1000);
    let parent = q.parent.as_deref().map(|p| run_id(p, "/parent")).transpose()?;
    let before = q.cursor.as_deref().map(|c| run_id(c, "/cursor")).transpose()?;
    let mut labels = weft_model::Labels::new();
    for pair in q.label.as_deref().unwrap_or("").split(',').filter(|p| !p.is_empty()) {
        let (k, v) = weft_model::labels::parse_label(pair, ':')
            .map_err(|e| ApiError::invalid(e).at("/label").hint("label=KEY:VALUE, e.g. label=origin:slack"))?;
        labels.insert(k, v);
    }
    let filter = RunFilter {
        state: q.state,
        template: q.template,
        parent,
        limit: Some(limit + 1),
        before,
        key: q.key,
        labels,
        template_contains: q.template_contains.filter(|t| !t.is_empty()),
        created_from: time_ms(q.created_from.as_deref(), "/created_from")?,
        created_until: time_ms(q.created_until.as_deref(), "/created_until")?,
    };
    let mut all = core.store.list_runs(&filter).await.map_err(ApiError::internal)?;
    let next = (all.len() > limit).then(|| all[limit - 1].id.to_string());
    all.truncate(limit);
    let rfc = weft_engine::clock::rfc3339;
    let runs = all
        .into_iter()
        .map(|r| RunSummaryView {
            id: r.id.to_string(),
            template: r.template,
            version: r.version,
            state: r.state,
            parent: r.parent.map(|p| p.to_string()),
            created_at: rfc(r.created_at),
            updated_at: rfc(r.updated_at),
            labels: r.labels,
            error: r.error,
        })
        .collect();
    Ok(Json(RunPage { runs, next }))
}

/// A query's RFC 3339 time as ms since the epoch (`None` when absent).
fn time_ms(text: Option<&str>, path: &str) -> Result<Option<i64>, ApiError> {
    let Some(text) = text.filter(|t| !t.is_empty()) else { return Ok(None) };
    let at = humantime::parse_rfc3339_weak(text.trim()).map_err(|e| {
        ApiError::invalid(format!("{text:?} is not a time: {e}"))
            .at(path)
            .hint("an RFC 3339 time, e.g. 2026-11-29T08:00:00Z")
    })?;
    let ms = at.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    Ok(Some(ms))
}

pub(super) async fn get_one(State(core): State<Arc<Core>>, Path(id): Path<String>) -> Result<Json<RunView>, ApiError> {
    Ok(Json(core.for_http.run_view(&load(&core, &id).await?).await))
}

/// `POST /runs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// A saved template to run (its latest version unless `version`).
    pub template: Option<String>,
    pub version: Option<u32>,
    /// Or a whole definition (plugins and digests; files only under
    /// `[guests] allow_paths`).
    pub definition: Option<Value>,
    /// The run's input (default `{}`), checked against `input_schema`.
    pub input: Option<Value>,
    /// A concurrency key: runs with the same key run one at a time, in order.
    pub key: Option<String>,
    /// Outputs given to steps instead of running them.
    #[serde(default)]
    pub presets: HashMap<String, Value>,
    /// The caller's labels (`{"origin": "slack"}`): shown with the run,
    /// filtered on by `GET /runs?label=origin:slack`, read as `@run.labels.origin`.
    #[serde(default)]
    pub labels: weft_model::Labels,
    /// Wait up to this long (ms, at most 300000) for the run to end (or to
    /// wait for input) and answer with it.
    pub wait_ms: Option<u64>,
    /// Notifications for this run, added to the definition's `notify`.
    #[serde(default)]
    pub notify: Vec<Value>,
}

pub(super) async fn start(
    State(core): State<Arc<Core>>,
    headers: axum::http::HeaderMap,
    Body(b): Body<StartBody>,
) -> Result<Response, ApiError> {
    let source = RunSource::of(b.template, b.version, b.definition).map_err(start_refused)?;
    // `Idempotency-Key` (the IETF draft's, as Stripe's): one run per key.
    let idempotency_key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(v.to_str().map(str::to_string).map_err(|_| {
            ApiError::invalid("the `Idempotency-Key` header is not visible ASCII")
                .hint("send a key of 1 to 255 characters")
        })?),
    };
    let req = StartRequest {
        key: b.key,
        presets: b.presets.into_iter().collect(),
        labels: b.labels,
        idempotency_key,
        notify: b.notify,
        // The caller's trace context (W3C `traceparent`): the run's parent span.
        traceparent: crate::trace_context::from_header(&headers),
        ..StartRequest::new(source, b.input.unwrap_or_else(|| Value::Object(Default::default())))
    };
    let started = core.for_http.start(req).await.map_err(start_refused)?;
    let (id, replayed) = (started.id.clone(), started.replayed);
    let wait = Duration::from_millis(b.wait_ms.unwrap_or(0).min(MAX_WAIT_MS));
    let never = tokio_util::sync::CancellationToken::new();
    let rec = core.for_http.settle_started(started, wait, None, &never).await.map_err(ApiError::internal)?;
    let location = ("location", format!("/api/v1/runs/{id}"));
    if replayed {
        // The key's run, started before: nothing new was created.
        let replay = ("idempotent-replayed", "true".to_string());
        return Ok((StatusCode::OK, [location, replay], Json(RunView::of(&rec))).into_response());
    }
    Ok((StatusCode::CREATED, [location], Json(RunView::of(&rec))).into_response())
}

/// A run the use-case layer did not start, in the API's terms.
pub(super) fn start_refused(e: StartRefused) -> ApiError {
    match e {
        StartRefused::NoSource | StartRefused::BothSources => {
            ApiError::invalid("give exactly one of `template` and `definition`")
                .hint(r#"{"template": "NAME", "input": {...}} or {"definition": {"name": ..., "steps": [...]}}"#)
        }
        StartRefused::VersionWithDefinition => ApiError::invalid("`version` applies to `template` only").at("/version"),
        StartRefused::NoTemplate { name, version } => ApiError::not_found(format!(
            "no template `{name}`{}",
            version.map(|v| format!(" version {v}")).unwrap_or_default()
        ))
        .at("/template")
        .hint("GET /api/v1/templates lists the saved templates"),
        StartRefused::DefinitionNotObject(kind) => {
            ApiError::invalid(format!("`definition` is {kind}, not an object")).at("/definition")
        }
        StartRefused::DefinitionTooLarge(over) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            over.message("`definition`", "max_definition_bytes"),
        )
        .at("/definition"),
        StartRefused::BadIdempotencyKey => {
            ApiError::invalid("the `Idempotency-Key` header is empty or over 255 characters")
                .hint("send a key of 1 to 255 characters that names this request")
        }
        StartRefused::KeyConflict { key, run, differs } => ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "idempotency key `{key}` already started run {run} with another request (its {} differ); nothing was started",
                differs.join(", ")
            ),
        )
        .hint(format!("GET /api/v1/runs/{run} shows that run; send a new key for a different request")),
        StartRefused::EmptyKey => {
            ApiError::invalid("`key` is empty").at("/key").hint("give a non-empty key, or leave it out")
        }
        StartRefused::ZeroFuel => ApiError::invalid("the fuel budget is 0").hint("give at least 1, or leave it out"),
        StartRefused::Labels(problems) => {
            ApiError::invalid("the labels were refused; nothing was started").with_problems("/labels", &problems)
        }
        StartRefused::Notify(problems) => {
            ApiError::invalid("`notify` was refused; nothing was started").with_problems("/notify", &problems)
        }
        StartRefused::Prepare(r) => ApiError::refused(r),
        StartRefused::Input { problems, .. } => {
            ApiError::invalid("the run was refused").with_problems("/input", &problems)
        }
        StartRefused::Failed(e) => ApiError::internal(e),
    }
}

/// A definition object under the definition cap.
pub(super) fn capped(core: &Core, def: Value) -> Result<Value, ApiError> {
    if !def.is_object() {
        return Err(ApiError::invalid(format!("`definition` is {}, not an object", weft_model::type_name(&def)))
            .at("/definition"));
    }
    weft_engine::size_limits::check(&def, core.settings.size_limits().max_definition_bytes).map_err(|o| {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", o.message("`definition`", "max_definition_bytes"))
            .at("/definition")
    })?;
    Ok(def)
}

pub(super) async fn cancel(State(core): State<Arc<Core>>, Path(id): Path<String>) -> Result<Json<RunView>, ApiError> {
    let c = core.for_http.cancel(&id).await.map_err(|e| match e {
        CancelRefused::Run(e) => lookup_refused(e),
        CancelRefused::Failed(e) => ApiError::internal(e),
    })?;
    Ok(Json(RunView::of(&c.run)))
}

/// `POST /runs/{id}/steps/{step}/signal`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    /// The answer, checked against the wait's `schema`.
    pub data: Value,
    /// For a `for_each` wait: the item answered (from 0; the run's `waits`
    /// list each item still waiting).
    #[serde(default)]
    pub item: Option<u32>,
}

/// An accepted (or queued) signal.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SignalOut {
    /// `accepted`, or `queued` when the step does not wait yet: the signal
    /// is kept and taken when it starts waiting.
    pub status: &'static str,
    /// For a queued signal: what happens to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub run_id: String,
    pub step: String,
    /// The item answered, for a `for_each` wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<u32>,
    /// For a `for_each` wait: its items still waiting.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_items: Vec<u32>,
    /// The step's output (the data).
    pub output: Value,
    /// The run's state now.
    pub state: RunState,
}

pub(super) async fn signal(
    State(core): State<Arc<Core>>,
    Path((id, step)): Path<(String, String)>,
    Body(b): Body<SignalBody>,
) -> Result<Json<SignalOut>, ApiError> {
    let s = core.for_http.signal(&id, &step, b.item, b.data).await.map_err(|e| match e {
        SignalRefused::Run(e) => lookup_refused(e),
        SignalRefused::TooLarge(p) => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", "the signal's data is over its cap")
                .with_problems("", &p)
        }
        SignalRefused::Wait(WaitRefused::Invalid { errors }) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "refused",
            format!(
                "the data does not match the wait's schema ({} problem{}); step `{step}` still waits",
                errors.len(),
                super::plural(errors.len())
            ),
        )
        .with_problems("/data", &errors),
        SignalRefused::Wait(WaitRefused::AlreadyResolved { state }) => ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("step `{step}` was already answered (it is {state}); the first valid signal won"),
        ),
        SignalRefused::Wait(WaitRefused::NotWaiting { message }) => {
            ApiError::new(StatusCode::CONFLICT, "conflict", message)
                .hint(format!("GET /api/v1/runs/{} shows what the run waits for", id.trim()))
        }
        SignalRefused::Wait(WaitRefused::NotFound { message }) => ApiError::not_found(message),
        SignalRefused::Failed(e) => ApiError::internal(e),
    })?;
    Ok(Json(SignalOut {
        status: if s.queued.is_some() { "queued" } else { "accepted" },
        message: s.queued.or(s.forwarded),
        run_id: s.run.to_string(),
        step: s.step,
        item: s.item,
        waiting_items: s.waiting_items,
        output: s.output,
        state: s.state,
    }))
}

/// `GET /runs/{id}/graph?format=`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GraphQuery {
    /// `json` (default), `mermaid` or `dot`.
    pub format: Option<String>,
}

/// A run's DAG with its step states.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GraphView {
    pub nodes: Vec<NodeView>,
    pub edges: Vec<EdgeView>,
}

/// A step of the DAG.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NodeView {
    pub name: String,
    /// code, tool, return, wait, sleep or workflow.
    pub action: String,
    pub state: StepState,
    /// Its layer (0: no dependencies; else one more than its deepest dependency).
    pub layer: usize,
    pub attempts: u32,
}

/// `to` depends on `from`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EdgeView {
    pub from: String,
    pub to: String,
    pub on: EdgeOn,
    /// What the edge says besides "on success": `failure`, `skipped`,
    /// `when @check.ok eq true`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

pub(super) async fn graph(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    Params(q): Params<GraphQuery>,
) -> Result<Response, ApiError> {
    let rec = load(&core, &id).await?;
    if rec.state == weft_engine::RunState::Recording {
        return recording_graph(&rec, q.format.as_deref());
    }
    let def = weft_model::from_value(&rec.definition, &weft_model::NoSchemas)
        .map_err(|p| ApiError::internal(format!("the run's stored plan does not parse: {p:?}")))?;
    let states: HashMap<String, StepState> = rec.steps.iter().map(|s| (s.name.clone(), s.state)).collect();
    match q.format.as_deref().unwrap_or("json") {
        "mermaid" => Ok(weft_model::graph::to_mermaid(&def, &states).into_response()),
        "dot" => Ok(weft_model::graph::to_dot(&def, &states).into_response()),
        "json" => Ok(Json(graph_view(&def, &rec.steps)).into_response()),
        other => Err(ApiError::invalid(format!("unknown format `{other}`")).at("/format").hint("json, mermaid or dot")),
    }
}

/// The DAG of an open recording: the steps recorded so far (each done),
/// as the recording would save them; none yet, an empty graph.
fn recording_graph(rec: &weft_engine::RunRecord, format: Option<&str>) -> Result<Response, ApiError> {
    let active: crate::mcp::recording::journal::Active = serde_json::from_value(rec.output.clone().unwrap_or_default())
        .map_err(|e| ApiError::internal(format!("the recording does not read: {e}")))?;
    let plan = active.recording.definition(&active.name, &[], false, &active.recording.order(&[]));
    let def = weft_model::from_value(&plan, &weft_model::NoSchemas).ok();
    let states: HashMap<String, StepState> =
        active.recording.steps.iter().map(|s| (s.name.clone(), StepState::Succeeded)).collect();
    match (format.unwrap_or("json"), def) {
        ("mermaid", Some(d)) => Ok(weft_model::graph::to_mermaid(&d, &states).into_response()),
        ("dot", Some(d)) => Ok(weft_model::graph::to_dot(&d, &states).into_response()),
        ("mermaid", None) => Ok("flowchart LR\n".into_response()),
        ("dot", None) => Ok("digraph run {}\n".into_response()),
        ("json", Some(d)) => {
            let mut view = graph_view(&d, &[]);
            for n in &mut view.nodes {
                n.state = StepState::Succeeded;
            }
            Ok(Json(view).into_response())
        }
        ("json", None) => Ok(Json(GraphView { nodes: vec![], edges: vec![] }).into_response()),
        (other, _) => {
            Err(ApiError::invalid(format!("unknown format `{other}`")).at("/format").hint("json, mermaid or dot"))
        }
    }
}

/// The DAG of `def` with the states of a run's `steps` (none: all pending).
pub fn graph_view(def: &weft_model::Definition, steps: &[weft_engine::store::StepRecord]) -> GraphView {
    let g = weft_model::Graph::build(def);
    let layers = g.layers().unwrap_or_else(|| vec![0; g.len()]);
    let nodes = def
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let r = steps.iter().find(|r| r.name == s.name);
            NodeView {
                name: s.name.clone(),
                action: s.action.key().to_string(),
                state: r.map(|r| r.state).unwrap_or(StepState::Pending),
                layer: layers[i],
                attempts: r.map(|r| r.attempts).unwrap_or(0),
            }
        })
        .collect();
    let edges = g
        .edges()
        .iter()
        .map(|e| EdgeView {
            from: g.name(e.from).to_string(),
            to: g.name(e.to).to_string(),
            on: e.on,
            label: weft_model::graph::edge_label(def, e),
        })
        .collect();
    GraphView { nodes, edges }
}

pub(super) async fn artifact(
    State(core): State<Arc<Core>>,
    Path((id, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let rec = load(&core, &id).await?;
    let (a, bytes) = core.store.artifact(&rec.id, &name).await.map_err(ApiError::internal)?.ok_or_else(|| {
        ApiError::not_found(format!("run {} has no artifact `{name}`", rec.id))
            .hint(format!("GET /api/v1/runs/{} lists its artifacts", rec.id))
    })?;
    let disposition = format!("attachment; filename=\"{}\"", a.name.replace(['"', '\\'], "_"));
    Ok(([("content-type", a.mime), ("content-disposition", disposition)], bytes).into_response())
}
