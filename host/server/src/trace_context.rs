//! The W3C trace context a request came with, handed to the runs it
//! starts (docs/observability.md): `params._meta.traceparent` of an MCP
//! `tools/call` (MCP's trace context, SEP-414) is held for the call's
//! duration ([`scope`]) and read where the run is prepared
//! ([`incoming`]); the HTTP API reads its `traceparent` header
//! ([`from_header`]). A value that is not a valid `traceparent` is ignored,
//! as W3C says.
//!
//! The idempotency key a call's `_meta` may carry (`dev.weft/idempotency-key`,
//! what weft itself sends with every tool call: a tool step calling weft's
//! `run_start` or a `wf_` tool starts one run per attempt) is held the same
//! way ([`incoming_key`]).

use std::future::Future;

use rmcp::model::RequestMetaObject;
use weft_engine::trace::TraceParent;

tokio::task_local! {
    static INCOMING: Option<String>;
    static KEY: Option<String>;
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

/// The idempotency key of a request's `_meta`, if it is a string.
pub fn key_from_meta(meta: &RequestMetaObject) -> Option<String> {
    meta.get(weft_mcp_client::IDEMPOTENCY_META_KEY).and_then(|v| v.as_str()).map(str::to_string)
}

/// Runs `f` with `traceparent` as the context of the runs it starts, and
/// `key` as their idempotency key when the call gives none.
pub async fn scope<F: Future>(traceparent: Option<String>, key: Option<String>, f: F) -> F::Output {
    INCOMING.scope(traceparent, KEY.scope(key, f)).await
}

/// The idempotency key of the call being answered (see [`scope`]).
pub fn incoming_key() -> Option<String> {
    KEY.try_with(Clone::clone).ok().flatten()
}

/// The context of the request being answered (see [`scope`]).
pub fn incoming() -> Option<String> {
    INCOMING.try_with(Clone::clone).ok().flatten()
}
