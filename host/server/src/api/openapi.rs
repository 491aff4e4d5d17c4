//! The OpenAPI 3.1 document of the API, served at `/api/v1/openapi.json`:
//! built from the route table below and the JSON Schemas (schemars) of the
//! very types the handlers take and answer, so it cannot drift from them.

use axum::Json;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};
use weft_engine::view::{EventPage, RunView};

use super::ApiError;
use super::catalog::{
    Deleted, EmitBody, Emitted, SaveBody, Saved, ScheduleBody, ScheduleList, ScheduleView, TemplateList, TemplateView,
};
use super::checks::{ValidateBody, Validated};
use super::notifications::NotificationList;
use super::runs::{GraphView, RunPage, SignalBody, SignalOut, StartBody};
use weft_engine::compare::Comparison;
use weft_runtime::usecase::NotificationView;

/// The `id` path parameter.
const ID: (&str, &str, &str) = ("id", "path", "The run's id (`r_…`).");

/// One operation of the table.
struct Op {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    params: &'static [(&'static str, &'static str, &'static str)],
    body: Option<Value>,
    ok: (u16, Value),
    errors: &'static [u16],
}

pub(super) async fn document() -> Json<Value> {
    Json(spec())
}

/// The whole document.
pub fn spec() -> Value {
    let mut g: SchemaGenerator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .into_generator();
    let r = |s: schemars::Schema| s.to_value();
    let ops = vec![
        Op {
            method: "get",
            path: "/runs",
            summary: "Runs, newest first, a page at a time (`next` is the following page's `cursor`).",
            params: &[
                ("state", "query", "Only runs in this state."),
                ("template", "query", "Only runs of this template."),
                ("parent", "query", "Only the children of this run."),
                ("key", "query", "Only runs of this concurrency key."),
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
            summary: "Start a run of a saved template or of a definition: 201 with the run; with `wait_ms`, once it ended or waits for input.",
            params: &[],
            body: Some(r(g.subschema_for::<StartBody>())),
            ok: (201, r(g.subschema_for::<RunView>())),
            errors: &[400, 404, 413, 422],
        },
        Op {
            method: "get",
            path: "/runs/{id}",
            summary: "One run: its steps, waits and artifacts (the `weft runs show --json` object).",
            params: &[ID],
            body: None,
            ok: (200, r(g.subschema_for::<RunView>())),
            errors: &[400, 404],
        },
        Op {
            method: "get",
            path: "/runs/{id}/events",
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
            summary: "The run's DAG with live step states (`format`: json, mermaid or dot).",
            params: &[ID, ("format", "query", "json (default), mermaid or dot.")],
            body: None,
            ok: (200, r(g.subschema_for::<GraphView>())),
            errors: &[400, 404],
        },
        Op {
            method: "get",
            path: "/runs/{id}/compare",
            summary: "The run beside another, step by step: where their inputs and outputs differ, the first diverging step, values side by side. Without `with`: beside the recording of the run's template (else the run of that template before it).",
            params: &[ID, ("with", "query", "The run to compare with (`r_…`).")],
            body: None,
            ok: (200, r(g.subschema_for::<Comparison>())),
            errors: &[400, 404],
        },
        Op {
            method: "post",
            path: "/validate",
            summary: "Check a definition as a run or a save would (plugins, servers and their live tools, refs, child templates): every problem with its path, and warnings. Stores nothing.",
            params: &[],
            body: Some(r(g.subschema_for::<ValidateBody>())),
            ok: (200, r(g.subschema_for::<Validated>())),
            errors: &[400, 413],
        },
        Op {
            method: "post",
            path: "/runs/{id}/cancel",
            summary: "Cancel a run (a finished run is left as it is).",
            params: &[ID],
            body: None,
            ok: (200, r(g.subschema_for::<RunView>())),
            errors: &[400, 404],
        },
        Op {
            method: "post",
            path: "/runs/{id}/retry",
            summary: "Retry an ended run: 201 with a new run of its definition that keeps the outputs of the steps that succeeded and runs the others (`from`: that step and what follows it run again; `input`: only the steps whose inputs change run again); 409 when the run has not ended.",
            params: &[ID],
            body: Some(r(g.subschema_for::<super::retry::RetryBody>())),
            ok: (201, r(g.subschema_for::<super::retry::RetryOut>())),
            errors: &[400, 404, 409, 413, 422],
        },
        Op {
            method: "post",
            path: "/runs/{id}/steps/{step}/signal",
            summary: "Answer a waiting step: 200; 422 with the schema's errors (it still waits); 409 when already answered.",
            params: &[ID, ("step", "path", "The waiting step.")],
            body: Some(r(g.subschema_for::<SignalBody>())),
            ok: (200, r(g.subschema_for::<SignalOut>())),
            errors: &[400, 404, 409, 413, 422],
        },
        Op {
            method: "post",
            path: "/events",
            summary: "Deliver an event to every wait whose `match` holds (idempotent with an `id`).",
            params: &[],
            body: Some(r(g.subschema_for::<EmitBody>())),
            ok: (200, r(g.subschema_for::<Emitted>())),
            errors: &[400],
        },
        Op {
            method: "get",
            path: "/notifications",
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
            summary: "Send a failed notification again, from its first try (same id).",
            params: &[("id", "path", "The notification's id (`dlv_…`).")],
            body: None,
            ok: (200, r(g.subschema_for::<NotificationView>())),
            errors: &[404, 409],
        },
        Op {
            method: "get",
            path: "/templates",
            summary: "The latest version of every template.",
            params: &[],
            body: None,
            ok: (200, r(g.subschema_for::<TemplateList>())),
            errors: &[],
        },
        Op {
            method: "get",
            path: "/templates/{name}",
            summary: "A template's definition and graph (the latest version, or `version`).",
            params: &[("name", "path", "The template."), ("version", "query", "A version.")],
            body: None,
            ok: (200, r(g.subschema_for::<TemplateView>())),
            errors: &[404],
        },
        Op {
            method: "put",
            path: "/templates/{name}",
            summary: "Validate a definition and save it as the template's next version.",
            params: &[("name", "path", "The template.")],
            body: Some(r(g.subschema_for::<SaveBody>())),
            ok: (201, r(g.subschema_for::<Saved>())),
            errors: &[400, 413, 422],
        },
        Op {
            method: "delete",
            path: "/templates/{name}",
            summary: "Delete every version of a template.",
            params: &[("name", "path", "The template.")],
            body: None,
            ok: (200, r(g.subschema_for::<Deleted>())),
            errors: &[404],
        },
        Op {
            method: "get",
            path: "/schedules",
            summary: "Every cron schedule.",
            params: &[],
            body: None,
            ok: (200, r(g.subschema_for::<ScheduleList>())),
            errors: &[],
        },
        Op {
            method: "post",
            path: "/schedules",
            summary: "Add a cron schedule that starts runs of a template.",
            params: &[],
            body: Some(r(g.subschema_for::<ScheduleBody>())),
            ok: (201, r(g.subschema_for::<ScheduleView>())),
            errors: &[400],
        },
        Op {
            method: "post",
            path: "/schedules/{name}/pause",
            summary: "Pause a schedule: it does not fire until resumed.",
            params: &[("name", "path", "The schedule.")],
            body: None,
            ok: (200, r(g.subschema_for::<ScheduleView>())),
            errors: &[404],
        },
        Op {
            method: "post",
            path: "/schedules/{name}/resume",
            summary: "Resume a schedule: it fires at its next time after now (missed times are not made up).",
            params: &[("name", "path", "The schedule.")],
            body: None,
            ok: (200, r(g.subschema_for::<ScheduleView>())),
            errors: &[404],
        },
        Op {
            method: "delete",
            path: "/schedules/{name}",
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
            .map(|(name, at, d)| json!({"name": name, "in": at, "required": *at == "path", "description": d, "schema": {"type": "string"}}))
            .collect();
        let mut responses = Map::new();
        responses.insert(
            op.ok.0.to_string(),
            json!({"description": "OK", "content": {"application/json": {"schema": op.ok.1}}}),
        );
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
        let mut o = json!({"summary": op.summary, "parameters": params, "responses": responses});
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
            "schemas": g.take_definitions(true),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                "description": "Needed when `weft serve` listens beyond loopback (--token / WEFT_TOKEN)."}},
        },
    })
}
