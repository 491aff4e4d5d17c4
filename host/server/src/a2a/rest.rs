//! The HTTP+JSON binding under an agent's URL (`/a2a/{template}/…`):
//! `POST message:send`, `POST message:stream` (server-sent events, each a
//! stream event), `GET tasks`, `GET tasks/{id}`, `POST tasks/{id}:cancel`,
//! `GET|POST tasks/{id}:subscribe`, `tasks/{id}/pushNotificationConfigs[/{id}]`,
//! and the agent's card at `.well-known/agent-card.json`. Errors are
//! `{"error": google.rpc.Status}` with an `ErrorInfo` naming the field.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde_json::{Map, Value, json};
use weft_a2a::errors::{A2aError, ErrorKind};

use super::jsonrpc::{self, Events};
use super::ops::{self, Agent};
use super::push;

/// Answers one HTTP+JSON request for `rest` (the path under the agent).
pub async fn handle(
    agent: Agent,
    method: Method,
    rest: &str,
    query: HashMap<String, String>,
    headers: HeaderMap,
    body: &[u8],
) -> Response {
    if let Some(e) = jsonrpc::version_refused(&headers) {
        return refuse(e);
    }
    let body = || -> Result<Value, A2aError> {
        if body.is_empty() {
            return Ok(json!({}));
        }
        serde_json::from_slice(body).map_err(|e| A2aError::new(ErrorKind::Parse, format!("the body is not JSON: {e}")))
    };
    let segs: Vec<&str> = rest.split('/').collect();
    let answer = |r: Result<Value, A2aError>| match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => refuse(e),
    };
    match (&method, segs.as_slice()) {
        (&Method::POST, ["message:send"]) => answer(async { jsonrpc::send(&agent, body()?).await }.await),
        (&Method::POST, ["message:stream"]) => match async { jsonrpc::stream_send(&agent, body()?).await }.await {
            Ok(s) => sse(s),
            Err(e) => refuse(e),
        },
        (&Method::GET, ["tasks"]) => answer(
            async {
                let req = list_query(&query)?;
                ops::to_value(agent.list(&ops::decode(req)?).await?)
            }
            .await,
        ),
        (&Method::GET, ["tasks", id]) if !id.contains(':') => {
            answer(jsonrpc::get(&agent, json!({"id": id})).await)
        }
        (&Method::POST, ["tasks", id]) if id.ends_with(":cancel") => {
            let id = id.trim_end_matches(":cancel");
            answer(async { ops::to_value(agent.cancel(id).await?) }.await)
        }
        (&Method::GET | &Method::POST, ["tasks", id]) if id.ends_with(":subscribe") => {
            let id = id.trim_end_matches(":subscribe");
            let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok());
            match jsonrpc::subscribe(&agent, json!({"id": id}), resume).await {
                Ok(s) => sse(s),
                Err(e) => refuse(e),
            }
        }
        (&Method::POST, ["tasks", id, "pushNotificationConfigs"]) => answer(
            async {
                let mut cfg = body()?;
                cfg["taskId"] = json!(id);
                push::create(&agent, cfg).await
            }
            .await,
        ),
        (&Method::GET, ["tasks", id, "pushNotificationConfigs"]) => {
            answer(push::list(&agent, json!({"taskId": id})).await)
        }
        (&Method::GET, ["tasks", id, "pushNotificationConfigs", cid]) => {
            answer(push::get(&agent, json!({"taskId": id, "id": cid})).await)
        }
        (&Method::DELETE, ["tasks", id, "pushNotificationConfigs", cid]) => {
            answer(push::delete(&agent, json!({"taskId": id, "id": cid})).await)
        }
        _ => refuse(
            A2aError::new(ErrorKind::MethodNotFound, format!("no A2A operation {method} {rest}"))
                .hint("the operations: POST message:send, POST message:stream, GET tasks, GET tasks/{id}, POST tasks/{id}:cancel, GET tasks/{id}:subscribe"),
        ),
    }
}

/// `GET tasks`' query string as `ListTasks`' params.
fn list_query(query: &HashMap<String, String>) -> Result<Value, A2aError> {
    let mut params = Map::new();
    for (k, v) in query {
        let value = match k.as_str() {
            "pageSize" | "historyLength" => json!(
                v.parse::<i64>()
                    .map_err(|_| { A2aError::invalid(format!("`{k}` is {v:?}, not a number")).at(format!("/{k}")) })?
            ),
            "includeArtifacts" => json!(v == "true"),
            _ => json!(v),
        };
        params.insert(k.clone(), value);
    }
    Ok(Value::Object(params))
}

/// An error as HTTP+JSON answers it.
pub fn refuse(e: A2aError) -> Response {
    let (status, body) = e.to_rest();
    (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(body)).into_response()
}

fn sse(events: Events) -> Response {
    let stream = events.map(|(seq, e)| {
        let mut ev = Event::default().data(serde_json::to_string(&e).unwrap_or_default());
        if let Some(s) = seq {
            ev = ev.id(s.to_string());
        }
        Ok::<_, Infallible>(ev)
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}
