//! `POST /runs/{id}/retry`: retry from failure through the use-case layer
//! (see `weft_runtime::usecase::retry`): a new run of the ended run's
//! definition that keeps the outputs of the steps that succeeded.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::view::RunView;
use weft_runtime::usecase::retry::{RetryRefused, RetryRequest};

use super::runs::{MAX_WAIT_MS, lookup_refused, start_refused};
use super::{ApiError, Body};
use crate::Core;

/// `POST /runs/{id}/retry`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryBody {
    /// Run this step and every step after it again (default: only what
    /// did not succeed).
    #[serde(default)]
    pub from: Option<String>,
    /// The new run's input (default: the ended run's); only the steps
    /// whose inputs change run again.
    #[serde(default)]
    pub input: Option<Value>,
    /// Wait up to this long (ms, at most 300000) for the new run to end
    /// (or to wait for input) and answer with it.
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

/// A retry that started.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RetryOut {
    /// The run retried (the new run's label `weft/retry-of`).
    pub retry_of: String,
    /// The steps whose outputs the new run keeps (not run again).
    pub kept: Vec<String>,
    /// The steps it runs.
    pub again: Vec<String>,
    /// The new run.
    pub run: RunView,
}

pub(super) async fn retry(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    Body(b): Body<RetryBody>,
) -> Result<Response, ApiError> {
    let req = RetryRequest { from: b.from, input: b.input };
    let r = core.for_http.retry(&id, req).await.map_err(|e| match e {
        RetryRefused::Run(e) => lookup_refused(e),
        e @ RetryRefused::NotEnded { .. } => {
            ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string()).hint("POST /runs/{id}/cancel ends it")
        }
        e @ RetryRefused::NoStep { .. } => ApiError::invalid(e.to_string()).at("/from"),
        e @ RetryRefused::Plan(_) => ApiError::internal(e),
        RetryRefused::Start(e) => start_refused(e),
    })?;
    let new = r.started.id.clone();
    let wait = Duration::from_millis(b.wait_ms.unwrap_or(0).min(MAX_WAIT_MS));
    let never = tokio_util::sync::CancellationToken::new();
    let rec = core.for_http.settle_started(r.started, wait, None, &never).await.map_err(ApiError::internal)?;
    let out = RetryOut { retry_of: id.trim().to_string(), kept: r.kept, again: r.again, run: RunView::of(&rec) };
    Ok((StatusCode::CREATED, [("location", format!("/api/v1/runs/{new}"))], Json(out)).into_response())
}
