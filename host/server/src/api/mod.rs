//! The HTTP JSON API at `/api/v1/` (docs/api.md): runs, their events (as
//! JSON pages and as a resumable server-sent-event stream), graphs,
//! starting, canceling and answering runs, events, templates and
//! schedules. A thin adapter: runs are prepared by the runtime's pipeline,
//! executed by the engine of the store this process owns, shown as the
//! engine's run views; the same bearer token as MCP guards it.
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | the router, [`ApiError`] (`{"kind", "message", "path"?, "hint"?}` with its status) |
//! | `runs.rs` | `GET /runs`, `GET /runs/{id}`, `POST /runs`, cancel, signal, graph |
//! | `retry.rs` | `POST /runs/{id}/retry`: retry from failure |
//! | `stream.rs` | `GET /runs/{id}/events`: JSON pages, or SSE resumable with `Last-Event-ID`; `GET /stream`: every run's state changes, live |
//! | `catalog.rs` | templates (and their versions), `GET /catalog` (plugins and tools), schedules, `POST /events` |
//! | `recordings.rs` | open recordings, one as it stands, and saving one as a template (or a dry run): the page's review |
//! | `notifications.rs` | `GET /notifications`, `POST /notifications/{id}/resend` (the outbox) |
//! | `checks.rs` | `POST /validate` (the pipeline's one validation), `GET /runs/{id}/compare` (a run beside another) |
//! | `openapi.rs` | the OpenAPI 3.1 document at `/api/v1/openapi.json`, from the route table and the types' JSON Schemas |

mod catalog;
mod checks;
mod notifications;
pub mod openapi;
mod recordings;
mod retry;
mod runs;
mod stream;

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use schemars::JsonSchema;
use serde::Serialize;
use weft_model::Problem;
use weft_runtime::pipeline::Refused;

use super::Core;

/// The API's routes, under `/api/v1`, and `/healthz`.
pub fn router(core: Arc<Core>) -> axum::Router {
    let core_for_metrics = core.clone();
    let v1 = axum::Router::new()
        .route("/runs", get(runs::list).post(runs::start))
        .route("/runs/{id}", get(runs::get_one))
        .route("/runs/{id}/events", get(stream::events))
        .route("/runs/{id}/graph", get(runs::graph))
        .route("/runs/{id}/compare", get(checks::compare))
        .route("/validate", post(checks::validate))
        .route("/runs/{id}/artifacts/{name}", get(runs::artifact))
        .route("/stream", get(stream::runs))
        .route("/runs/{id}/cancel", post(runs::cancel))
        .route("/runs/{id}/retry", post(retry::retry))
        .route("/runs/{id}/steps/{step}/signal", post(runs::signal))
        .route("/events", post(catalog::emit))
        .route("/templates", get(catalog::templates))
        .route("/templates/{name}/versions", get(catalog::template_versions))
        .route("/catalog", get(catalog::catalog))
        .route("/recordings", get(recordings::list))
        .route("/recordings/{id}", get(recordings::get_one))
        .route("/recordings/{id}/save", post(recordings::save))
        .route("/templates/{name}", get(catalog::template).put(catalog::save_template).delete(catalog::delete_template))
        .route("/notifications", get(notifications::list))
        .route("/notifications/{id}/resend", post(notifications::resend))
        .route("/schedules", get(catalog::schedules).post(catalog::add_schedule))
        .route("/schedules/{name}", axum::routing::delete(catalog::delete_schedule))
        .route("/schedules/{name}/pause", post(catalog::pause_schedule))
        .route("/schedules/{name}/resume", post(catalog::resume_schedule))
        .route("/openapi.json", get(openapi::document))
        .fallback(not_found)
        .with_state(core);
    axum::Router::new()
        .nest("/api/v1", v1)
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics).with_state(core_for_metrics))
}

/// `GET /metrics`: the Prometheus text format (docs/observability.md).
async fn metrics(State(core): State<Arc<Core>>) -> Response {
    crate::metrics_http::answer(&core.engine)
}

async fn healthz() -> &'static str {
    "ok"
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no API route {}", uri.path()))
        .hint("the routes are listed in /api/v1/openapi.json")
}

/// An error answer: `{"kind", "message", "path"?, "hint"?, "problems"?}`
/// with its HTTP status.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ApiError {
    #[serde(skip)]
    #[schemars(skip)]
    pub status: u16,
    /// `invalid` (400), `unauthorized` (401), `forbidden` (403: another
    /// Host or web origin), `not_found` (404), `conflict` (409), `too_large`
    /// (413), `unsupported_media_type` (415), `refused` (422), `internal`
    /// (500), `unavailable` (503: too many event streams open).
    pub kind: &'static str,
    /// What is wrong, one sentence.
    pub message: String,
    /// Where: a JSON Pointer into the request body (`/definition/steps/1/code`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Every problem, when there are several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<ProblemView>,
}

/// One located problem of a request.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ProblemView {
    /// JSON Pointer into the request body.
    pub path: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl ProblemView {
    /// Every problem of `problems`, under `prefix` (the body field they are in).
    pub fn all(prefix: &str, problems: &[Problem]) -> Vec<ProblemView> {
        problems
            .iter()
            .map(|p| ProblemView {
                path: format!("{prefix}{}", p.path),
                message: p.message.clone(),
                hint: p.hint.clone(),
            })
            .collect()
    }
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError { status: status.as_u16(), kind, message: message.into(), path: None, hint: None, problems: vec![] }
    }

    /// 400: the request is malformed.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 500: not the request's fault.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("internal error: {e}"))
            .hint("this is not caused by the request; retry, and report it if it persists")
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Located problems, under `prefix` (the body field they are in); the
    /// first one's path and hint are the error's.
    pub fn with_problems(mut self, prefix: &str, problems: &[Problem]) -> Self {
        self.problems.extend(ProblemView::all(prefix, problems));
        if let Some(first) = self.problems.first() {
            self.path.get_or_insert_with(|| first.path.clone());
            if self.hint.is_none() {
                self.hint = first.hint.clone();
            }
        }
        self
    }

    /// A refusal of the runtime's pipeline, located in the request body.
    pub fn refused(r: Refused) -> Self {
        match r {
            Refused::Unusable(why) => Self::not_found(why).hint("GET /api/v1/templates lists the saved templates"),
            Refused::Definition(invalid) => {
                let n = invalid.problems.len() + invalid.input.len();
                Self::invalid(format!("the definition is not valid ({n} problem{}); nothing was stored", plural(n)))
                    .with_problems("/definition", &invalid.problems)
                    .with_problems("/input", &invalid.input)
            }
            Refused::Template { name, version, problems } => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "refused",
                format!(
                    "template `{name}` version {version} does not validate against the installed plugins and servers"
                ),
            )
            .with_problems("/definition", &problems)
            .hint("save a corrected version (PUT /api/v1/templates/{name}), or add the missing plugin or server"),
            Refused::Input { problems, .. } => {
                let n = problems.len();
                Self::invalid(format!("the input was refused ({n} problem{}); no run was created", plural(n)))
                    .with_problems("/input", &problems)
            }
            Refused::Pin(problems) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "refused", "cannot pin the code of every step")
                    .with_problems("/definition", &problems)
            }
            Refused::Runtime(e) => Self::internal(e),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(self)).into_response()
    }
}

/// A query string, its errors answered as [`ApiError`]s (JSON, naming the
/// parameter) instead of axum's plain-text 400.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de).map(Params).map_err(|e| {
            let at = e.path().to_string();
            let what = if at == "." { String::new() } else { format!(" `{at}`") };
            ApiError::invalid(format!("the query parameter{what} is not valid: {}", e.inner()))
                .hint("GET /api/v1/openapi.json lists each operation's parameters and their types")
        })
    }
}

/// A JSON body, its syntax and shape errors answered as [`ApiError`]s with
/// the JSON path.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|e| {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", format!("the request body cannot be read: {e}"))
        })?;
        // Strictly (a key given twice is refused at its path), then into `T`.
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| ApiError::invalid(format!("the request body is not UTF-8 text: {e}")))?;
        let doc = weft_model::parse_json_text(text).map_err(|e| {
            let err = ApiError::invalid(format!("the request body is not valid JSON: {e}"));
            match e.path {
                Some(p) => err.at(p).hint("keep one of the two keys"),
                None => err,
            }
        })?;
        serde_path_to_error::deserialize(doc).map(Body).map_err(|e| {
            let path = e.path().to_string();
            let pointer = if path == "." { String::new() } else { format!("/{}", path.replace('.', "/")) };
            ApiError::invalid(format!("the request body is not valid: {}", e.inner())).at(pointer)
        })
    }
}
