//! Resources: the guide and the definition schema (`weft://guide`,
//! `weft://schema/definition`, see `guide.rs`), and runs.
//!
//! Runs as MCP resources: `weft://runs/{id}` reads as the run's JSON (the
//! `runs show --json` object, whose `artifacts` lists the run's files).
//! `resources/list` offers the 50 newest runs; the URI templates let a
//! client read any run by id, and any artifact of a run as
//! `weft://runs/{id}/artifacts/{name}` (text for text and JSON types,
//! base64 otherwise); `resources/subscribe` to a run sends
//! `notifications/resources/updated` as it changes.

use rmcp::ErrorData;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use weft_engine::store::RunFilter;
use weft_engine::{RunId, view};

use crate::Core;
use crate::mcp::tool_schemas::{TOOL_SCHEMA_PREFIX, object_schemas};

const PREFIX: &str = "weft://runs/";

/// The URI of run `id`.
pub fn uri(id: &RunId) -> String {
    format!("{PREFIX}{id}")
}

/// The URI of artifact `name` of run `id`.
pub fn artifact_uri(id: &RunId, name: &str) -> String {
    format!("{PREFIX}{id}/artifacts/{name}")
}

/// The newest runs.
pub async fn list(core: &Core) -> Result<ListResourcesResult, ErrorData> {
    let filter = RunFilter { limit: Some(50), ..Default::default() };
    let runs = core.store.list_runs(&filter).await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let mut resources = crate::mcp::guide::resources();
    resources.extend(runs.iter().map(|r| {
        Resource::new(uri(&r.id), r.id.to_string())
            .with_title(format!("run {} of {} ({})", r.id, r.template, r.state))
            .with_mime_type("application/json")
    }));
    Ok(ListResourcesResult::with_all_items(resources))
}

/// `weft://runs/{id}`.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{PREFIX}{{id}}"), "run")
            .with_title("A workflow run")
            .with_description("A run's state, input, output, error and steps (the `runs show --json` object)")
            .with_mime_type("application/json"),
        ResourceTemplate::new(format!("{PREFIX}{{id}}/artifacts/{{name}}"), "artifact")
            .with_title("A file a run's step produced")
            .with_description("An artifact of a run, by the name its run lists under `artifacts`"),
        ResourceTemplate::new(format!("{TOOL_SCHEMA_PREFIX}{{tool}}"), "tool-output-schema")
            .with_title("The full output schema of one of weft's tools")
            .with_description("tools/list shows each weft tool's output fields in brief; this is every field, nested")
            .with_mime_type("application/schema+json"),
    ])
}

/// The run of `weft://runs/{id}`.
pub fn run_id(uri_text: &str) -> Result<RunId, ErrorData> {
    uri_text.strip_prefix(PREFIX).and_then(|s| s.parse().ok()).ok_or_else(|| {
        ErrorData::resource_not_found(
            format!(
                "no resource `{uri_text}` (runs are weft://runs/r_...; the guide is {})",
                crate::mcp::guide::GUIDE_URI
            ),
            None,
        )
    })
}

/// Sends `notifications/resources/updated` for `uri` whenever run `id`
/// logs a new event, until it is finished (after a last notification),
/// `stop` or `closed` fires, or the client is gone.
pub async fn watch(
    core: std::sync::Arc<Core>,
    peer: rmcp::Peer<rmcp::RoleServer>,
    id: RunId,
    uri: String,
    stop: tokio_util::sync::CancellationToken,
    closed: tokio_util::sync::CancellationToken,
) {
    let mut seen = None;
    // The engine pushes every committed change of the runs this process
    // drives; the slow read only catches what was missed.
    let mut changes = core.engine.subscribe();
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = closed.cancelled() => return,
                _ = changes.of_run(&id) => {}
                _ = tokio::time::sleep(weft_runtime::usecase::FALLBACK_POLL) => {}
            }
        }
        let Ok(Some(rec)) = core.store.run(&id).await else { continue };
        let now = (rec.updated_at, rec.state);
        if seen.is_some_and(|s| s == now) {
            continue;
        }
        let first = seen.is_none();
        seen = Some(now);
        if !first {
            let param = rmcp::model::ResourceUpdatedNotificationParam::new(uri.clone());
            if peer.notify_resource_updated(param).await.is_err() {
                return;
            }
        }
        if rec.state.is_terminal() {
            return;
        }
    }
}

/// Reads `weft://runs/{id}/artifacts/{name}`.
async fn read_artifact(core: &Core, uri_text: &str, id: &str, name: &str) -> Result<ReadResourceResult, ErrorData> {
    use base64::Engine as _;
    let not_found = || {
        ErrorData::resource_not_found(
            format!("no artifact `{name}` of run `{id}` (run_get lists a run's artifacts)"),
            None,
        )
    };
    let id: RunId = id.parse().map_err(|_| not_found())?;
    let found = core.store.artifact(&id, name).await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let (a, data) = found.ok_or_else(not_found)?;
    let textual = a.mime.starts_with("text/") || a.mime.ends_with("json") || a.mime.ends_with("+xml");
    let contents = match (textual, String::from_utf8(data)) {
        (true, Ok(text)) => ResourceContents::text(text, uri_text),
        (_, Ok(text)) => ResourceContents::blob(base64::engine::general_purpose::STANDARD.encode(text), uri_text),
        (_, Err(e)) => {
            ResourceContents::blob(base64::engine::general_purpose::STANDARD.encode(e.into_bytes()), uri_text)
        }
    };
    Ok(ReadResourceResult::new(vec![contents.with_mime_type(a.mime)]))
}

/// Reads `weft://schema/tools/{tool}`: the full output schema of a
/// built-in tool or of a `wf_<template>` tool.
fn tool_schema(core: &Core, uri_text: &str, tool: &str) -> Result<ReadResourceResult, ErrorData> {
    let schema = if tool.starts_with(crate::mcp::wf_tools::PREFIX) {
        Some(rmcp::handler::server::common::schema_for_output::<crate::mcp::views::RunStartOut>())
    } else {
        core.router().get(tool).and_then(|t| t.output_schema.clone())
    };
    let schema = schema.ok_or_else(|| {
        ErrorData::resource_not_found(
            format!("no weft tool `{tool}` with an output schema (tools/list names them; upstream tools' schemas are in tools/list whole)"),
            None,
        )
    })?;
    let text = serde_json::to_string_pretty(&object_schemas((*schema).clone())).expect("a schema is JSON");
    Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri_text).with_mime_type("application/schema+json")]))
}

/// The guide's last section: what this server's operator configured for
/// steps to name (the agents of agent steps).
fn on_this_server(core: &Core) -> String {
    let agents: Vec<String> = core.settings.agents.iter().map(|a| format!("`{}`", a.name)).collect();
    let agents = match agents.is_empty() {
        true => "none (an agent step is refused: the operator adds `[agents.NAME]` to weft.toml)".to_string(),
        false => agents.join(", "),
    };
    format!("\n## On this server\n\nAgents for `\"agent\": NAME` steps: {agents}.\n")
}

/// Reads the guide, the schema, `weft://runs/{id}` or
/// `weft://runs/{id}/artifacts/{name}`.
pub async fn read(core: &Core, uri_text: &str) -> Result<ReadResourceResult, ErrorData> {
    if uri_text == crate::mcp::guide::GUIDE_URI {
        let text = format!("{}{}", crate::mcp::guide::GUIDE, on_this_server(core));
        let contents = ResourceContents::text(text, uri_text).with_mime_type("text/markdown");
        return Ok(ReadResourceResult::new(vec![contents]));
    }
    if let Some(r) = crate::mcp::guide::read(uri_text) {
        return Ok(r);
    }
    if let Some(tool) = uri_text.strip_prefix(TOOL_SCHEMA_PREFIX) {
        return tool_schema(core, uri_text, tool);
    }
    if let Some((id, name)) = uri_text.strip_prefix(PREFIX).and_then(|rest| rest.split_once("/artifacts/")) {
        return read_artifact(core, uri_text, id, name).await;
    }
    let not_found =
        || ErrorData::resource_not_found(format!("no resource `{uri_text}` (runs are weft://runs/r_...)"), None);
    let id = run_id(uri_text)?;
    let rec = core.store.run(&id).await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let rec = rec.ok_or_else(not_found)?;
    let text = serde_json::to_string_pretty(&view::run_json(&rec)).expect("JSON values serialize");
    Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri_text).with_mime_type("application/json")]))
}
