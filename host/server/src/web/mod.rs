//! The web view at `/`: one page, its script and its style, embedded in the
//! binary (no CDN; works offline). It holds no data itself: everything it
//! shows comes from the API (`/api/v1`) with the bearer token the operator
//! typed (kept in the tab's session storage, sent as a header, never in a
//! URL), and it updates from the API's event streams, not by reloading.
//!
//! What it shows: runs with filters and live states; a run's DAG coloured
//! live by step state, a timeline of its steps, its event log, input,
//! output and errors, artifacts to download, cancel, and a form generated
//! from a waiting step's JSON Schema that answers it; templates with their
//! graphs and a form from `input_schema` that starts a run.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX: &str = include_str!("index.html");
const APP: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// The page and its assets (outside the token check: they carry no data).
pub fn router() -> axum::Router {
    axum::Router::new()
        .route("/", get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response() }))
        .route(
            "/assets/app.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], APP).into_response() }),
        )
        .route(
            "/assets/app.css",
            get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response() }),
        )
}
