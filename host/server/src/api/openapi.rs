//! The OpenAPI 3.1 document of the API, served at `/api/v1/openapi.json`:
//! built from the route table below and the JSON Schemas (schemars) of the
//! very types the handlers take and answer, so it cannot drift from them.

use axum::Json;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};
use weft_engine::view::{EventPage, RunView};

use super::ApiError;
use super::catalog::{
    CatalogView, Deleted, EmitBody, Emitted, SaveBody, Saved, ScheduleBody, ScheduleList, ScheduleView, TemplateList,
    TemplateView, VersionList,
};
use super::checks::{ValidateBody, Validated};
use super::notifications::NotificationList;
use super::recordings::RecordingView;
use super::runs::{GraphView, RunPage, SignalBody, SignalOut, StartBody};
use crate::mcp::recording::journal::ListOut;
use crate::mcp::recording::save::{SaveOut, SaveParams};
use weft_engine::compare::Comparison;
use weft_runtime::usecase::NotificationView;

/// The `id` path parameter.
const ID: (&str, &str, &str) = ("id", "path", "The run's id (`r_…`).");

/// One operation of the table.
struct Op {
    method: &'static str,
    path: &'static str,
    /// Its `operationId` (a generated client's method name).
    id: &'static str,
    summary: &'static str,
    params: &'static [(&'static str, &'static str, &'static str)],
    body: Option<Value>,
    ok: (u16, Value),
    errors: &'static [u16],
}

pub(super) async fn document() -> Json<Value> {
    Json(spec())
}

/// The forms answers take beside JSON (or instead of it): path, media
/// type, what it holds.
const OTHER_FORMS: &[(&str, &str, &str)] = &[
    (
        "/runs/{id}/events",
        "text/event-stream",
        "With `Accept: text/event-stream`: the log as server-sent events, each `id` the event's seq (resume with `Last-Event-ID`).",
    ),
    ("/runs/{id}/graph", "text/plain", "With `format=mermaid` or `dot`: the graph as text."),
    ("/runs/{id}/artifacts/{name}", "application/octet-stream", "The artifact's bytes (its own Content-Type)."),
    ("/stream", "text/event-stream", "Server-sent events: each run created or changing state."),
];

/// The component schemas with no boolean subschema (`true` as `{}`):
/// client generators refuse them.
fn object_schemas(defs: Map<String, Value>) -> Map<String, Value> {
    defs.into_iter()
        .map(|(k, v)| match v {
            Value::Object(m) => (k, Value::Object(crate::mcp::tool_schemas::object_schemas(m))),
            Value::Bool(true) => (k, json!({})),
            other => (k, other),
        })
        .collect()
}

/// The answers' schemas and the bodies' in one table. A type used both
/// ways must read as it is written (the API test builds the document).
fn merged(answers: Map<String, Value>, bodies: Map<String, Value>) -> Map<String, Value> {
    let mut out = answers;
    for (name, schema) in bodies {
        match out.get(&name) {
            Some(same) if same == &schema => {}
            Some(_) => {
                panic!("the OpenAPI schema `{name}` differs as an answer and as a body: give one of them its own type")
            }
            None => {
                out.insert(name, schema);
            }
        }
    }
    out
}

/// The schema of query or path parameter `name` of `path`.
fn param_schema(path: &str, name: &str) -> Value {
    match (path, name) {
        (_, "limit" | "after" | "version") => json!({"type": "integer", "minimum": 0}),
        ("/runs", "state") => {
            let states: Vec<&str> = weft_engine::RunState::ALL.iter().map(|s| s.as_str()).collect();
            json!({"type": "string", "enum": states})
        }
        ("/notifications", "state") => json!({"type": "string", "enum": ["pending", "delivered", "failed"]}),
        (_, "format") => json!({"type": "string", "enum": ["json", "mermaid", "dot"]}),
        _ => json!({"type": "string"}),
    }
}

/// The whole document.
pub fn spec() -> Value {
    // Answers as they are written (a field left out when empty is not
    // required), bodies as they are read (a field with a default is not).
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
    });
    let mut g: SchemaGenerator = settings.clone().for_serialize().into_generator();
    let mut b: SchemaGenerator = settings.for_deserialize().into_generator();
    let r = |s: schemars::Schema| s.to_value();
    let ops = vec![
        Op {
            method: "get",
            path: "/runs/{id}/artifacts/{name}",
            id: "getRunArtifact",
            summary: "A file a step produced: its bytes, with its own Content-Type (the run's `artifacts` list them).",
            params: &[ID, ("name", "path", "The artifact's name.")],
            body: None,
            ok: (200, Value::Null),
            errors: &[400, 404],
        },
        Op {
            method: "get",
            path: "/stream",
            id: "streamRuns",
            summary: "Every run's state changes, live, as server-sent events (`missed` when some went by: read `GET /runs` again).",
            params: &[],
            body: None,
            ok: (200, Value::Null),
            errors: &[503],
        },
        Op {
            method: "get",
            path: "/openapi.json",
            id: "getOpenApi",
            summary: "This document.",
            params: &[],
            body: None,
            ok: (200, json!({"type": "object"})),
            errors: &[],
        },
        Op {
            method: "get",
            path: "/runs",
            id: "listRuns",
            summary: "Runs, newest first, a page at a time (`next` is the following page's `cursor`).",
            params: &[
                ("state", "query", "Only runs in this state."),
                ("template", "query", "Only runs of this template."),
                ("parent", "query", "Only the children of this run."),
                ("key", "query", "Only runs of this concurrency key."),
                (
                    "label",
                    "query",
                    "Only runs with this label, `KEY:VALUE` (several: comma-separated, every one must match).",
                ),
                ("template_contains", "query", "Only runs whose template's name contains this (ignoring case)."),
                ("created_from", "query", "Only runs created at or after this time (RFC 3339)."),
                ("created_until", "query", "Only runs created before this time (RFC 3339)."),
                ("limit", "query", "At most this many (default 50, at most 1000)."),
                ("cursor", "query", "The `next` of the previous page."),
            ],
            body: None,
            ok: (200, r(g.subschema_for::<RunPage>())),
            errors: &[400],
        },
        Op {
            method: "post",
            path: "/runs",
            id: "startRun",
            summary: "Start a run of a saved template or of a definition: 201 with the run; with `wait_ms`, once it ended or waits for input.",
            params: &[],
            body: Some(r(b.subschema_for::<StartBody>())),
            ok: (201, r(g.subschema_for::<RunView>())),
            errors: &[400, 404, 413, 422],
        },
        Op {
            method: "get",
            path: "/runs/{id}",
            id: "getRun",
            summary: "One run: its steps, waits and artifacts (the `weft runs show --json` object).",
            params: &[ID],
            body: None,
            ok: (200, r(g.subschema_for::<RunView>())),
            errors: &[400, 404],
        },
        Op {
            method: "get",
            path: "/runs/{id}/events",
            id: "listRunEvents",
            summary: "The run's event log after `after`; with `Accept: text/event-stream`, a live SSE stream (each event's id is its seq; resume with `Last-Event-ID`) that ends after the run's last event.",
            params: &[
                ID,
                ("after", "query", "Only events after this seq."),
                ("limit", "query", "At most this many (JSON; default 500)."),
            ],
            body: None,
            ok: (200, r(g.subschema_for::<EventPage>())),
            errors: &[400, 404, 503],
        },
        Op {
            method: "get",
            path: "/runs/{id}/graph",
            id: "getRunGraph",
            summary: "The run's DAG with live step states (`format`: json, mermaid or dot).",
            params: &[ID, ("format", "query", "json (default), mermaid or dot.")],
            body: None,
            ok: (200, r(g.subschema_for::<GraphView>())),
            errors: &[400, 404],
        },
        Op {
            method: "get",
            path: "/runs/{id}/compare",
            id: "compareRun",
            summary: "The run beside another, step by step: where their inputs and outputs differ, the first diverging step, values side by side. Without `with`: beside the recording of the run's template (else the run of that template before it).",
            params: &[ID, ("with", "query", "The run to compare with (`r_…`).")],
            body: None,
            ok: (200, r(g.subschema_for::<Comparison>())),
            errors: &[400, 404],
        },
        Op {
            method: "post",
            path: "/validate",
            id: "validateDefinition",
            summary: "Check a definition as a run or a save would (plugins, servers and their live tools, refs, child templates): every problem with its path, and warnings. Stores nothing.",
            params: &[],
            body: Some(r(b.subschema_for::<ValidateBody>())),
            ok: (200, r(g.subschema_for::<Validated>())),
            errors: &[400, 413],
        },
        Op {
            method: "post",
            path: "/runs/{id}/cancel",
            id: "cancelRun",
            summary: "Cancel a run (a finished run is left as it is).",
            params: &[ID],
            body: None,
            ok: (200, r(g.subschema_for::<RunView>())),
            errors: &[400, 404],
        },
        Op {
            method: "post",
            path: "/runs/{id}/retry",
            id: "retryRun",
            summary: "Retry an ended run: 201 with a new run of its definition that keeps the outputs of the steps that succeeded and runs the others (`from`: that step and what follows it run again; `input`: only the steps whose inputs change run again); 409 when the run has not ended.",
            params: &[ID],
            body: Some(r(b.subschema_for::<super::retry::RetryBody>())),
            ok: (201, r(g.subschema_for::<super::retry::RetryOut>())),
            errors: &[400, 404, 409, 413, 422],
        },
        Op {
            method: "post",
            path: "/runs/{id}/steps/{step}/signal",
            id: "signalStep",
            summary: "Answer a waiting step: 200; 422 with the schema's errors (it still waits); 409 when already answered.",
            params: &[ID, ("step", "path", "The waiting step.")],
            body: Some(r(b.subschema_for::<SignalBody>())),
            ok: (200, r(g.subschema_for::<SignalOut>())),
            errors: &[400, 404, 409, 413, 422],
        },
        Op {
            method: "post",
            path: "/events",
            id: "emitEvent",
            summary: "Deliver an event to every wait whose `match` holds (idempotent with an `id`).",
            params: &[],
            body: Some(r(b.subschema_for::<EmitBody>())),
            ok: (200, r(g.subschema_for::<Emitted>())),
            errors: &[400],
        },
        Op {
            method: "get",
            path: "/notifications",
            id: "listNotifications",
            summary: "Notifications (a definition's `notify`), newest first, with where each stands.",
            params: &[
                ("run", "query", "Only this run's."),
                ("state", "query", "`pending`, `delivered` or `failed`."),
                ("limit", "query", "At most this many (default 100)."),
            ],
            body: None,
            ok: (200, r(g.subschema_for::<NotificationList>())),
            errors: &[400],
        },
        Op {
            method: "post",
            path: "/notifications/{id}/resend",
            id: "resendNotification",
            summary: "Send a failed notification again, from its first try (same id).",
            params: &[("id", "path", "The notification's id (`dlv_…`).")],
            body: None,
            ok: (200, r(g.subschema_for::<NotificationView>())),
            errors: &[404, 409],
        },
        Op {
            method: "get",
            path: "/templates",
            id: "listTemplates",
            summary: "The latest version of every template.",
            params: &[],
            body: None,
            ok: (200, r(g.subschema_for::<TemplateList>())),
            errors: &[],
        },
        Op {
            method: "get",
            path: "/templates/{name}",
            id: "getTemplate",
            summary: "A template's definition and graph (the latest version, or `version`).",
            params: &[("name", "path", "The template."), ("version", "query", "A version.")],
            body: None,
            ok: (200, r(g.subschema_for::<TemplateView>())),
            errors: &[404],
        },
        Op {
            method: "get",
            path: "/templates/{name}/versions",
            id: "listTemplateVersions",
            summary: "Every version of a template, newest first (without definitions).",
            params: &[("name", "path", "The template.")],
            body: None,
            ok: (200, r(g.subschema_for::<VersionList>())),
            errors: &[404],
        },
        Op {
            method: "get",
            path: "/catalog",
            id: "getCatalog",
            summary: "What a definition can name here: the code plugins and the configured MCP servers' tools, with their schemas.",
            params: &[],
            body: None,
            ok: (200, r(g.subschema_for::<CatalogView>())),
            errors: &[],
        },
        Op {
            method: "get",
            path: "/recordings",
            id: "listRecordings",
            summary: "The open recordings (MCP sessions' proxied calls, not saved yet) with their steps.",
            params: &[],
            body: None,
            ok: (200, r(g.subschema_for::<ListOut>())),
            errors: &[],
        },
        Op {
            method: "get",
            path: "/recordings/{id}",
            id: "getRecording",
            summary: "An open recording as it stands: its input and each recorded call with its arguments and output.",
            params: &[ID],
            body: None,
            ok: (200, r(g.subschema_for::<RecordingView>())),
            errors: &[400, 404, 409],
        },
        Op {
            method: "post",
            path: "/recordings/{id}/save",
            id: "saveRecording",
            summary: "The template an open recording becomes with these choices (refused proposals, accepted candidates, steps freed from the kept order): with `dry_run` only shown; else saved (201) and the recording ends.",
            params: &[ID],
            body: Some(r(b.subschema_for::<SaveParams>())),
            ok: (200, r(g.subschema_for::<SaveOut>())),
            errors: &[400, 404, 409, 422],
        },
        Op {
            method: "put",
            path: "/templates/{name}",
            id: "saveTemplate",
            summary: "Validate a definition and save it as the template's next version.",
            params: &[("name", "path", "The template.")],
            body: Some(r(b.subschema_for::<SaveBody>())),
            ok: (201, r(g.subschema_for::<Saved>())),
            errors: &[400, 413, 422],
        },
        Op {
            method: "delete",
            path: "/templates/{name}",
            id: "deleteTemplate",
            summary: "Delete every version of a template.",
            params: &[("name", "path", "The template.")],
            body: None,
            ok: (200, r(g.subschema_for::<Deleted>())),
            errors: &[404],
        },
        Op {
            method: "get",
            path: "/schedules",
            id: "listSchedules",
            summary: "Every cron schedule.",
            params: &[],
            body: None,
            ok: (200, r(g.subschema_for::<ScheduleList>())),
            errors: &[],
        },
        Op {
            method: "post",
            path: "/schedules",
            id: "addSchedule",
            summary: "Add a cron schedule that starts runs of a template.",
            params: &[],
            body: Some(r(b.subschema_for::<ScheduleBody>())),
            ok: (201, r(g.subschema_for::<ScheduleView>())),
            errors: &[400],
        },
        Op {
            method: "post",
            path: "/schedules/{name}/pause",
            id: "pauseSchedule",
            summary: "Pause a schedule: it does not fire until resumed.",
            params: &[("name", "path", "The schedule.")],
            body: None,
            ok: (200, r(g.subschema_for::<ScheduleView>())),
            errors: &[404],
        },
        Op {
            method: "post",
            path: "/schedules/{name}/resume",
            id: "resumeSchedule",
            summary: "Resume a schedule: it fires at its next time after now (missed times are not made up).",
            params: &[("name", "path", "The schedule.")],
            body: None,
            ok: (200, r(g.subschema_for::<ScheduleView>())),
            errors: &[404],
        },
        Op {
            method: "delete",
            path: "/schedules/{name}",
            id: "removeSchedule",
            summary: "Remove a schedule.",
            params: &[("name", "path", "The schedule.")],
            body: None,
            ok: (200, r(g.subschema_for::<Deleted>())),
            errors: &[404],
        },
    ];
    let error = r(g.subschema_for::<ApiError>());
    let mut paths = Map::new();
    for op in ops {
        let params: Vec<Value> = op
            .params
            .iter()
            .map(|(name, at, d)| {
                let schema = param_schema(op.path, name);
                json!({"name": name, "in": at, "required": *at == "path", "description": d, "schema": schema})
            })
            .collect();
        let mut content = Map::new();
        if !op.ok.1.is_null() {
            content.insert("application/json".into(), json!({"schema": op.ok.1}));
        }
        for (_, media, what) in OTHER_FORMS.iter().filter(|(p, _, _)| *p == op.path) {
            content.insert(media.to_string(), json!({"schema": {"type": "string", "description": what}}));
        }
        let mut responses = Map::new();
        responses.insert(op.ok.0.to_string(), json!({"description": "OK", "content": content}));
        // Every route: the token (401), the guard against other sites (403:
        // another Host or Origin; 415: a body that is not JSON), and 500.
        let mutation = op.method != "get";
        let guard: &[u16] = if mutation { &[401, 403, 415, 500] } else { &[401, 403, 500] };
        for code in op.errors.iter().chain(guard) {
            let description = match code {
                403 => {
                    "forbidden: the Host is not this server's name, or the request comes from another web site's page"
                }
                415 => "unsupported_media_type: the body is not `application/json`",
                503 => "unavailable: the server holds as many event streams as it may; retry after `Retry-After`",
                _ => "an error",
            };
            responses.insert(
                code.to_string(),
                json!({"description": description, "content": {"application/json": {"schema": error}}}),
            );
        }
        let mut o = json!({"operationId": op.id, "summary": op.summary, "parameters": params, "responses": responses});
        if let Some(b) = op.body {
            o["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": b}}});
        }
        let entry = paths.entry(op.path).or_insert_with(|| json!({}));
        entry[op.method] = o;
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "weft", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Runs, events, templates and schedules of a `weft serve` (docs/api.md)."},
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": object_schemas(merged(g.take_definitions(true), b.take_definitions(true))),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                "description": "Needed when `weft serve` listens beyond loopback (--token / WEFT_TOKEN)."}},
        },
    })
}
