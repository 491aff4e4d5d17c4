//! The W3C trace context a request came with, handed to the runs it
//! starts (docs/observability.md): `params._meta.traceparent` of an MCP
//! `tools/call` (MCP's trace context, SEP-414) is held for the call's
//! duration ([`scope`]) and read where the run is prepared
//! ([`incoming`]); the HTTP API reads its `traceparent` header
//! ([`from_header`]). A value that is not a valid `traceparent` is ignored,
//! as W3C says.

use std::future::Future;

use rmcp::model::RequestMetaObject;
use weft_engine::trace::TraceParent;

tokio::task_local! {
    static INCOMING: Option<String>;
}

fn valid(t: &str) -> Option<String> {
    TraceParent::parse(t).map(|p| p.header())
}

/// The `traceparent` of a request's `_meta`, if valid.
pub fn from_meta(meta: &RequestMetaObject) -> Option<String> {
    meta.get_traceparent().and_then(valid)
}

/// The `traceparent` header of an HTTP request, if valid.
pub fn from_header(headers: &axum::http::HeaderMap) -> Option<String> {
    headers.get("traceparent").and_then(|v| v.to_str().ok()).and_then(valid)
}

/// Runs `f` with `traceparent` as the context of the runs it starts.
pub async fn scope<F: Future>(traceparent: Option<String>, f: F) -> F::Output {
    INCOMING.scope(traceparent, f).await
}

/// The context of the request being answered (see [`scope`]).
pub fn incoming() -> Option<String> {
    INCOMING.try_with(Clone::clone).ok().flatten()
}
