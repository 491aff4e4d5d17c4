//! A run's notifications (the outbox) over HTTP: listed with where each
//! stands, and a failed one sent again.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use weft_engine::delivery::{DeliveryFilter, DeliveryState};
use weft_runtime::usecase::{NotificationView, ResendRefused};

use super::{ApiError, Params};
use crate::Core;

/// `GET /notifications` query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationQuery {
    /// Only this run's.
    pub run: Option<String>,
    /// `pending`, `delivered` or `failed`.
    pub state: Option<String>,
    /// At most this many (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// Notifications, newest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NotificationList {
    pub notifications: Vec<NotificationView>,
}

pub(super) async fn list(
    State(core): State<Arc<Core>>,
    Params(q): Params<NotificationQuery>,
) -> Result<Json<NotificationList>, ApiError> {
    let run = q.run.as_deref().map(|r| super::runs::run_id(r, "/run")).transpose()?;
    let state = q
        .state
        .as_deref()
        .map(|s| s.parse::<DeliveryState>().map_err(|e| ApiError::invalid(e).at("/state")))
        .transpose()?;
    let filter = DeliveryFilter { run, state, limit: Some(q.limit.unwrap_or(100).clamp(1, 1000)) };
    let notifications = core.for_http.notifications(&filter).await.map_err(ApiError::internal)?;
    Ok(Json(NotificationList { notifications }))
}

pub(super) async fn resend(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
) -> Result<Json<NotificationView>, ApiError> {
    match core.for_http.resend(&id).await {
        Ok(v) => Ok(Json(v)),
        Err(ResendRefused::NotFound(id)) => Err(ApiError::not_found(format!("no notification `{id}`"))
            .hint("GET /api/v1/notifications?state=failed lists the failed ones")),
        Err(e @ ResendRefused::NotFailed { .. }) => Err(ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
            .hint("a pending notification is still being tried; a delivered one needs nothing")),
        Err(e @ ResendRefused::NeverSent { .. }) => Err(ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
            .hint("fix the refs of the definition's `notify` for later runs")),
        Err(ResendRefused::Failed(e)) => Err(ApiError::internal(e)),
    }
}
