//! `weft worker --metrics ADDR`: a small HTTP listener of its own serving
//! `GET /metrics` (the Prometheus text format) and `GET /healthz`, for a
//! worker that serves nothing else. `weft serve --http` serves the same
//! `/metrics` beside its API (see `api::router`).

use std::net::SocketAddr;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio_util::sync::CancellationToken;
use weft_engine::Engine;

use crate::ServeError;

/// `GET /metrics` of a process whose engine is `engine`.
pub(crate) fn answer(engine: &Engine) -> Response {
    weft_runtime::telemetry::metrics::sample_engine(engine);
    (
        [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        weft_runtime::telemetry::metrics::render(),
    )
        .into_response()
}

async fn metrics(State(engine): State<Engine>) -> Response {
    answer(&engine)
}

/// Serves `/metrics` and `/healthz` at `addr` until `stop`; `on_bound`
/// gets the address bound (for port 0).
pub async fn serve_metrics(
    addr: SocketAddr,
    engine: Engine,
    stop: CancellationToken,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    weft_runtime::telemetry::metrics::install();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ServeError::Listen(format!("cannot listen on {addr} for /metrics: {e}")))?;
    on_bound(listener.local_addr()?);
    let app = axum::Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(engine);
    axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await?;
    Ok(())
}
