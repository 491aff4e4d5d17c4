//! Recordings over HTTP, for the page's review: the open recordings, one
//! recording as it stands (its input and each recorded call), and the
//! template it becomes with a reviewer's choices: `dry_run: true` only
//! shows it (the proposals with their ids, what a replay changes, the
//! order kept, the validation's warnings), otherwise it is saved and the
//! recording ends. The plan is the MCP tool `recording_save`'s
//! (`mcp/recording/save.rs`), so both say the same.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use weft_engine::RunState;
use weft_engine::clock::{rfc3339, system_now_ms};
use weft_runtime::pipeline::Source;

use super::{ApiError, Body};
use crate::mcp::recording::journal::{Active, ListOut, open_recordings};
use crate::mcp::recording::save::{PlanRefused, SaveOut, SaveParams, plan};
use crate::{Change, Core};

pub(super) async fn list(State(core): State<Arc<Core>>) -> Result<Json<ListOut>, ApiError> {
    Ok(Json(ListOut { recordings: open_recordings(&core).await.map_err(ApiError::internal)? }))
}

/// An open recording as it stands.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RecordingView {
    pub run_id: String,
    pub name: String,
    pub started_at: String,
    /// A session of this server records into it now.
    pub held: bool,
    /// `@input` of the recording.
    pub input: Value,
    /// Each recorded call, in order.
    pub steps: Vec<RecordedView>,
}

/// One recorded call.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RecordedView {
    pub name: String,
    /// `tool`, `code` or `preset`.
    pub kind: String,
    /// `SERVER/TOOL` or the code reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what: Option<Value>,
    /// The arguments as the caller wrote them.
    pub arguments: Value,
    pub output: Value,
    pub read_only: bool,
}

async fn open(core: &Core, id: &str) -> Result<Active, ApiError> {
    let rec = super::runs::load(core, id).await?;
    if rec.state != RunState::Recording {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("run {id} is not an open recording (it is {})", rec.state),
        )
        .hint(format!("GET /api/v1/recordings lists the open ones; GET /api/v1/runs/{id} shows this run")));
    }
    serde_json::from_value(rec.output.unwrap_or(Value::Null))
        .map_err(|e| ApiError::internal(format!("the recording {id} does not read: {e}")))
}

pub(super) async fn get_one(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
) -> Result<Json<RecordingView>, ApiError> {
    let a = open(&core, &id).await?;
    let held = core.held_recordings.lock().unwrap_or_else(|p| p.into_inner()).contains(&a.id);
    let steps = a
        .recording
        .steps
        .iter()
        .map(|s| {
            let (kind, what) = match (&s.tool, &s.code) {
                (Some((server, tool)), _) => ("tool", Some(Value::String(format!("{server}/{tool}")))),
                (None, Some(code)) => ("code", Some(code.clone())),
                (None, None) => ("preset", None),
            };
            RecordedView {
                name: s.name.clone(),
                kind: kind.into(),
                what,
                arguments: s.arguments.clone(),
                output: s.output.clone(),
                read_only: s.read_only,
            }
        })
        .collect();
    Ok(Json(RecordingView {
        run_id: a.id.to_string(),
        name: a.name,
        started_at: rfc3339(a.started_at),
        held,
        input: a.recording.input,
        steps,
    }))
}

fn plan_refused(e: PlanRefused) -> ApiError {
    let (at, hint) = match &e {
        PlanRefused::Empty => ("", "record a call first (an MCP session's proxied calls)".to_string()),
        PlanRefused::NotProposed { field, known, .. } => (
            *field,
            format!("the ids it can name: {}", if known.is_empty() { "none".into() } else { known.join(", ") }),
        ),
        PlanRefused::NotRecorded { known, .. } => ("parallel", format!("the recorded steps are: {}", known.join(", "))),
    };
    let err = ApiError::invalid(e.to_string()).hint(hint);
    if at.is_empty() { err } else { err.at(format!("/{at}")) }
}

/// `POST /recordings/{id}/save`: the template the recording becomes with
/// these choices; saved unless `dry_run`.
pub(super) async fn save(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    Body(p): Body<SaveParams>,
) -> Result<(StatusCode, Json<SaveOut>), ApiError> {
    let active = open(&core, &id).await?;
    let mut answer = plan(&active.recording, &p).map_err(plan_refused)?;
    let pipeline = core.for_http.pipeline();
    if p.dry_run {
        let loaded = pipeline.load(Source::Client(answer.definition.clone())).await.map_err(ApiError::refused)?;
        answer.warnings.extend(loaded.warnings.iter().map(|w| format!("{}: {}", w.path, w.message)));
        return Ok((StatusCode::OK, Json(answer)));
    }
    let saving = pipeline.for_template(Source::Client(answer.definition.clone())).await.map_err(ApiError::refused)?;
    let (doc, name) = (saving.doc, saving.name);
    answer.warnings.extend(saving.warnings.iter().map(|w| format!("{}: {}", w.path, w.message)));
    let version = core.store.save_template(&name, &doc, system_now_ms()).await.map_err(ApiError::internal)?;
    core.changed(Change::Templates);
    active.store(&core, Some((name.clone(), version)), Some(doc.clone())).await.map_err(|e| {
        ApiError::new(StatusCode::CONFLICT, "conflict", e.message)
            .hint(format!("the template was saved as version {version}; GET /api/v1/runs/{id} shows the recording"))
    })?;
    core.held_recordings.lock().unwrap_or_else(|p| p.into_inner()).remove(&active.id);
    answer.tool = Some(crate::mcp::wf_tools::tool_name(&name));
    answer.template = name;
    answer.version = Some(version);
    answer.run_id = Some(active.id.to_string());
    answer.definition = doc;
    Ok((StatusCode::CREATED, Json(answer)))
}
