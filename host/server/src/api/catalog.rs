//! Templates, schedules and events over HTTP.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::EngineError;
use weft_engine::clock::{rfc3339, system_now_ms};
use weft_engine::store::TemplateRecord;
use weft_runtime::pipeline::Source;
use weft_runtime::usecase::answer::EmitRefused;
use weft_runtime::usecase::{ScheduleRefused, ScheduleRequest, catalog};

use super::{ApiError, Body, Params};
pub use crate::schedule_view::ScheduleView;
use crate::{Change, Core};

/// A saved template (one version).
#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplateView {
    pub name: String,
    pub version: u32,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The definition (on `GET /templates/{name}` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition: Option<Value>,
    /// Its DAG (on `GET /templates/{name}` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<super::runs::GraphView>,
}

fn view(t: TemplateRecord, whole: bool) -> TemplateView {
    let description = t.definition.get("description").and_then(Value::as_str).map(String::from);
    let graph = whole
        .then(|| weft_model::from_value(&t.definition, &weft_model::NoSchemas).ok())
        .flatten()
        .map(|def| super::runs::graph_view(&def, &[]));
    TemplateView {
        name: t.name,
        version: t.version,
        created_at: rfc3339(t.created_at),
        description,
        definition: whole.then_some(t.definition),
        graph,
    }
}

/// The latest version of every template.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplateList {
    pub templates: Vec<TemplateView>,
}

pub(super) async fn templates(State(core): State<Arc<Core>>) -> Result<Json<TemplateList>, ApiError> {
    let all = core.store.list_templates().await.map_err(ApiError::internal)?;
    Ok(Json(TemplateList { templates: all.into_iter().map(|t| view(t, false)).collect() }))
}

/// `?version=N`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct VersionQuery {
    /// A version (default: the latest).
    pub version: Option<u32>,
}

pub(super) async fn template(
    State(core): State<Arc<Core>>,
    Path(name): Path<String>,
    Params(q): Params<VersionQuery>,
) -> Result<Json<TemplateView>, ApiError> {
    let t = core.store.template(&name, q.version).await.map_err(ApiError::internal)?;
    let t =
        t.ok_or_else(|| ApiError::not_found(format!("no template `{name}`")).hint("GET /api/v1/templates lists them"))?;
    Ok(Json(view(t, true)))
}

/// Every version of a template, newest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct VersionList {
    pub name: String,
    /// Without their definitions (`GET /templates/{name}?version=N`).
    pub versions: Vec<TemplateView>,
}

pub(super) async fn template_versions(
    State(core): State<Arc<Core>>,
    Path(name): Path<String>,
) -> Result<Json<VersionList>, ApiError> {
    let mut all = core.store.template_versions(&name).await.map_err(ApiError::internal)?;
    if all.is_empty() {
        return Err(ApiError::not_found(format!("no template `{name}`")).hint("GET /api/v1/templates lists them"));
    }
    all.sort_by_key(|t| std::cmp::Reverse(t.version));
    Ok(Json(VersionList { name, versions: all.into_iter().map(|t| view(t, false)).collect() }))
}

/// What a definition can name here.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CatalogView {
    /// The code plugins (`{"code": {"plugin": NAME}}`) with their schemas.
    pub plugins: Vec<catalog::PluginView>,
    /// The configured MCP servers with the tools each allows
    /// (`{"tool": {"server", "name"}}`).
    pub servers: Vec<catalog::ServerView>,
}

pub(super) async fn catalog(State(core): State<Arc<Core>>) -> Result<Json<CatalogView>, ApiError> {
    let c = core.clone();
    let plugins =
        tokio::task::spawn_blocking(move || catalog::plugins(&weft_runtime::guests::registry(&c.settings), &c.sandbox))
            .await
            .map_err(ApiError::internal)?
            .map_err(ApiError::internal)?;
    let servers = catalog::servers(&core.upstreams).await;
    Ok(Json(CatalogView { plugins, servers }))
}

/// `PUT /templates/{name}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveBody {
    /// The definition; its `name` is replaced by the path's.
    pub definition: Value,
}

/// A saved version.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Saved {
    pub name: String,
    pub version: u32,
    /// Saved, but worth a look: servers whose tools could not be checked,
    /// text that looks like another template language's refs, child
    /// templates not saved yet (paths into `/definition`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<super::ProblemView>,
}

pub(super) async fn save_template(
    State(core): State<Arc<Core>>,
    Path(name): Path<String>,
    Body(b): Body<SaveBody>,
) -> Result<(StatusCode, Json<Saved>), ApiError> {
    let mut doc = super::runs::capped(&core, b.definition)?;
    doc["name"] = Value::String(name);
    let saving = core.for_http.pipeline().for_template(Source::Client(doc)).await.map_err(ApiError::refused)?;
    let (doc, name) = (saving.doc, saving.name);
    let version = core.store.save_template(&name, &doc, system_now_ms()).await.map_err(ApiError::internal)?;
    core.changed(Change::Templates);
    let warnings = super::ProblemView::all("/definition", &saving.warnings);
    Ok((StatusCode::CREATED, Json(Saved { name, version, warnings })))
}

/// What was deleted.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    pub name: String,
    /// Versions deleted (templates) or 1 (a schedule).
    pub deleted: u32,
}

pub(super) async fn delete_template(
    State(core): State<Arc<Core>>,
    Path(name): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    let n = core.store.delete_template(&name).await.map_err(ApiError::internal)?;
    if n == 0 {
        return Err(ApiError::not_found(format!("no template `{name}`")));
    }
    core.changed(Change::Templates);
    Ok(Json(Deleted { name, deleted: n }))
}

/// Every schedule.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScheduleList {
    pub schedules: Vec<ScheduleView>,
}

pub(super) async fn schedules(State(core): State<Arc<Core>>) -> Result<Json<ScheduleList>, ApiError> {
    let all = core.for_http.schedules().await.map_err(schedule_refusal)?;
    Ok(Json(ScheduleList { schedules: all.into_iter().map(ScheduleView::from).collect() }))
}

/// `POST /schedules`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    pub name: String,
    /// The saved template each firing runs.
    pub template: String,
    /// Five fields (minute hour day month weekday) or six (seconds first), UTC.
    pub cron: String,
    /// Each run's input (default `{}`).
    pub input: Option<Value>,
}

pub(super) async fn add_schedule(
    State(core): State<Arc<Core>>,
    Body(b): Body<ScheduleBody>,
) -> Result<(StatusCode, Json<ScheduleView>), ApiError> {
    let input = b.input.unwrap_or_else(|| Value::Object(Default::default()));
    let req = ScheduleRequest { name: Some(b.name), template: b.template, cron: b.cron, input };
    let rec = core.for_http.add_schedule(req).await.map_err(schedule_refusal)?;
    Ok((StatusCode::CREATED, Json(rec.into())))
}

/// `POST /schedules/{name}/pause` and `/resume`.
pub(super) async fn pause_schedule(
    State(core): State<Arc<Core>>,
    Path(name): Path<String>,
) -> Result<Json<ScheduleView>, ApiError> {
    Ok(Json(core.for_http.pause_schedule(&name, true).await.map_err(schedule_refusal)?.into()))
}

pub(super) async fn resume_schedule(
    State(core): State<Arc<Core>>,
    Path(name): Path<String>,
) -> Result<Json<ScheduleView>, ApiError> {
    Ok(Json(core.for_http.pause_schedule(&name, false).await.map_err(schedule_refusal)?.into()))
}

pub(super) async fn delete_schedule(
    State(core): State<Arc<Core>>,
    Path(name): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    core.for_http.remove_schedule(&name).await.map_err(schedule_refusal)?;
    Ok(Json(Deleted { name, deleted: 1 }))
}

/// A schedule's refusal as an HTTP error: 400 with each problem's path,
/// 404 naming the list, 500.
fn schedule_refusal(e: ScheduleRefused) -> ApiError {
    match e {
        ScheduleRefused::Invalid(p) => engine_refusal(EngineError::Invalid(p)),
        ScheduleRefused::NotFound(name) => {
            ApiError::not_found(format!("no schedule `{name}`")).hint("GET /api/v1/schedules lists them")
        }
        ScheduleRefused::Failed(e) => ApiError::internal(e),
    }
}

/// `POST /events`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmitBody {
    /// The event's name, e.g. `order.paid`.
    pub event: String,
    /// Its data: waits whose `match` fields equal the same fields take it.
    #[serde(default)]
    pub data: Value,
    /// An id makes emitting idempotent: the same id again does nothing.
    pub id: Option<String>,
}

/// What an event resolved.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Emitted {
    pub id: String,
    /// `{"run_id", "step"}` of each wait it answered.
    pub delivered: Vec<Value>,
    /// The id was seen before: nothing was done now.
    pub duplicate: bool,
}

pub(super) async fn emit(State(core): State<Arc<Core>>, Body(b): Body<EmitBody>) -> Result<Json<Emitted>, ApiError> {
    let a = core.for_http.emit(&b.event, b.data, b.id).await.map_err(|e| match e {
        EmitRefused::EmptyName => {
            ApiError::invalid("`event` is empty").at("/event").hint("name the event the waits wait for")
        }
        EmitRefused::EmptyId => {
            ApiError::invalid("`id` is empty").at("/id").hint("give a non-empty id, or leave it out for a new one")
        }
        EmitRefused::TooLarge(p) => {
            let first = p.first().map(|p| p.message.clone()).unwrap_or_else(|| "the request was refused".into());
            ApiError::invalid(first).with_problems("", &p)
        }
        EmitRefused::Failed(e) => ApiError::internal(e),
    })?;
    let delivered = a.delivered.into_iter().map(|d| serde_json::json!({"run_id": d.run, "step": d.step})).collect();
    Ok(Json(Emitted { id: a.id, delivered, duplicate: a.duplicate }))
}

/// An engine refusal (bad input: 400 with its paths) or failure (500).
fn engine_refusal(e: EngineError) -> ApiError {
    match e {
        EngineError::Invalid(p) => {
            let first = p.0.first().map(|p| p.message.clone()).unwrap_or_else(|| "the request was refused".into());
            ApiError::invalid(first).with_problems("", &p.0)
        }
        other => ApiError::internal(other),
    }
}
