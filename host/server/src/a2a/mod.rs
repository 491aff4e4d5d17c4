//! weft as an A2A server (protocol 1.0, docs/a2a.md): each saved template
//! is an agent with one skill, each run of it a task. A thin front end
//! over the use-case layer, like `/api/v1`: behind the same token, the
//! same guard and the same body cap.
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | the routes: the server's card, `/a2a` (every template a skill) and `/a2a/{template}` |
//! | `card.rs` | agent cards (skills, their schemas, interfaces, capabilities) |
//! | `ops.rs` | what a request does: start or answer a run from a message, get, list, cancel, follow a task |
//! | `task.rs` | a run as a task; its logged events as stream events |
//! | `jsonrpc.rs` | the JSON-RPC binding (`POST /a2a/{template}`), with SSE for the streaming methods |
//! | `rest.rs` | the HTTP+JSON binding (`/a2a/{template}/message:send`, `/tasks/{id}`, …) |
//! | `push.rs` | push notification configurations, sent through the outbox |
//!
//! The protocol's JSON types and errors are the `weft-a2a` crate's.

mod card;
mod jsonrpc;
mod ops;
mod push;
mod rest;
mod task;

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use weft_a2a::errors::{A2aError, ErrorKind};

use crate::Core;
use ops::Agent;
use task::Links;

/// The A2A routes.
pub fn router(core: Arc<Core>) -> axum::Router {
    axum::Router::new()
        .route(weft_a2a::CARD_PATH, get(server_card))
        .route("/a2a", post(server_rpc))
        .route("/a2a/{template}", post(template_rpc))
        .route("/a2a/{template}/{*rest}", any(template_rest))
        .with_state(core)
}

/// The server's address as the client reached it.
fn links(headers: &HeaderMap) -> Links {
    let host = headers.get(axum::http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    Links { base: format!("http://{host}") }
}

async fn server_card(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    match core.store.list_templates().await {
        Ok(all) => axum::Json(card::server_card(&all, &links(&headers))).into_response(),
        Err(e) => rest::refuse(A2aError::internal(e)),
    }
}

async fn server_rpc(State(core): State<Arc<Core>>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let agent = Agent { core, links: links(&headers), template: None };
    jsonrpc::handle(agent, headers, &body).await
}

/// The agent of template `name`, if it is saved.
async fn agent_of(core: Arc<Core>, name: &str, headers: &HeaderMap) -> Result<Agent, A2aError> {
    match core.store.template(name, None).await {
        Ok(Some(t)) => Ok(Agent { core, links: links(headers), template: Some(t) }),
        Ok(None) => Err(no_agent(name)),
        Err(e) => Err(A2aError::internal(e)),
    }
}

/// No template `name`: its agent does not exist.
fn no_agent(name: &str) -> A2aError {
    if name.contains(':') {
        return A2aError::new(
            ErrorKind::MethodNotFound,
            format!("`/a2a/{name}`: the server's agent at /a2a speaks JSON-RPC only"),
        )
        .hint("HTTP+JSON is each skill's: /a2a/{skill}/message:send; or POST JSON-RPC to /a2a");
    }
    A2aError::new(ErrorKind::MethodNotFound, format!("no agent `{name}`: no template of that name is saved"))
        .hint("/.well-known/agent-card.json lists the agents as skills")
}

async fn template_rpc(
    State(core): State<Arc<Core>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if name.contains(':') {
        // `POST /a2a/message:send`: an HTTP+JSON call, answered as one.
        return rest::refuse(no_agent(&name));
    }
    match agent_of(core, &name, &headers).await {
        Ok(agent) => jsonrpc::handle(agent, headers, &body).await,
        Err(e) => {
            let id = serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|v| v.get("id").cloned());
            axum::Json(serde_json::json!({"jsonrpc": "2.0", "id": id, "error": e.to_jsonrpc()})).into_response()
        }
    }
}

async fn template_rest(
    State(core): State<Arc<Core>>,
    Path((name, rest)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    // `/a2a`'s own card (the server's): where a client that resolves the
    // card path relative to `/a2a/{template}` without a trailing slash
    // (`@a2a-js/sdk`) lands.
    if name == ".well-known" && rest == "agent-card.json" && method == Method::GET {
        return server_card(State(core), headers).await;
    }
    let t = match core.store.template(&name, None).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            return rest::refuse(no_agent(&name));
        }
        Err(e) => return rest::refuse(A2aError::internal(e)),
    };
    if rest == ".well-known/agent-card.json" && method == Method::GET {
        return axum::Json(card::template_card(&t, &links(&headers))).into_response();
    }
    let agent = Agent { core, links: links(&headers), template: Some(t) };
    rest::handle(agent, method, &rest, query, headers, &body).await
}
