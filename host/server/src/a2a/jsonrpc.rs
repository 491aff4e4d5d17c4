//! The JSON-RPC binding: `POST /a2a` and `POST /a2a/{template}` with a
//! JSON-RPC 2.0 request whose method is one of A2A 1.0's (`SendMessage`,
//! `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`,
//! `SubscribeToTask`, the push configuration methods). Streaming methods
//! answer with server-sent events, each a JSON-RPC response whose
//! `result` is a stream event; an event's SSE `id` is its `seq` in the
//! run's log, so `SubscribeToTask` with `Last-Event-ID` resumes after it.
//! Every refusal is a JSON-RPC error with A2A's code and an `ErrorInfo`
//! naming the field at fault.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde_json::{Value, json};
use weft_a2a::errors::{A2aError, ErrorKind};
use weft_a2a::wire::{
    ListTasksRequest, SendMessageRequest, SendMessageResponse, StreamResponse, TaskIdRequest, TaskState, TaskStatus,
};
use weft_engine::Seq;

use super::ops::{Agent, MAX_BLOCK, Sent, Until, decode, to_value};
use super::push;

/// A2A 0.3's method names, answered with the version this server speaks.
const V03_METHODS: [&str; 9] = [
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/list",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/get",
    "agent/getAuthenticatedExtendedCard",
];

/// Answers one JSON-RPC request.
pub async fn handle(agent: Agent, headers: HeaderMap, body: &[u8]) -> Response {
    let request: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return reply(Value::Null, Err(A2aError::new(ErrorKind::Parse, format!("the body is not JSON: {e}"))));
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = match (request.get("jsonrpc").and_then(Value::as_str), request.get("method").and_then(Value::as_str)) {
        (Some("2.0"), Some(m)) => m.to_string(),
        _ => {
            let e = A2aError::new(ErrorKind::InvalidRequest, "not a JSON-RPC 2.0 request")
                .hint(r#"send {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {...}}}"#);
            return reply(id, Err(e));
        }
    };
    if let Some(e) = version_refused(&headers) {
        return reply(id, Err(e));
    }
    let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
    match method.as_str() {
        "SendMessage" => reply(id, send(&agent, params).await),
        "SendStreamingMessage" => match stream_send(&agent, params).await {
            Ok(s) => sse(id, s),
            Err(e) => reply(id, Err(e)),
        },
        "GetTask" => reply(id, get(&agent, params).await),
        "ListTasks" => reply(
            id,
            async {
                history_length(
                    params.get("historyLength").and_then(Value::as_i64).map(|n| n.max(i32::MIN as i64) as i32),
                )?;
                let req: ListTasksRequest = decode(params)?;
                to_value(agent.list(&req).await?)
            }
            .await,
        ),
        "CancelTask" => reply(
            id,
            async {
                let req: TaskIdRequest = decode(params)?;
                to_value(agent.cancel(&req.id).await?)
            }
            .await,
        ),
        "SubscribeToTask" => {
            let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok());
            match subscribe(&agent, params, resume).await {
                Ok(s) => sse(id, s),
                Err(e) => reply(id, Err(e)),
            }
        }
        "CreateTaskPushNotificationConfig" => reply(id, push::create(&agent, params).await),
        "GetTaskPushNotificationConfig" => reply(id, push::get(&agent, params).await),
        "ListTaskPushNotificationConfigs" => reply(id, push::list(&agent, params).await),
        "DeleteTaskPushNotificationConfig" => reply(id, push::delete(&agent, params).await),
        "GetExtendedAgentCard" => reply(
            id,
            Err(A2aError::new(ErrorKind::UnsupportedOperation, "weft's agents have no extended card")
                .hint("the card at /.well-known/agent-card.json is the whole card")),
        ),
        m if V03_METHODS.contains(&m) => reply(
            id,
            Err(A2aError::new(
                ErrorKind::VersionNotSupported,
                format!("`{m}` is an A2A 0.3 method; this server speaks A2A 1.0"),
            )
            .hint("use an A2A 1.0 client (a2a-sdk 1.x, @a2a-js/sdk 1.x): SendMessage, GetTask, ...")),
        ),
        m => reply(
            id,
            Err(A2aError::new(ErrorKind::MethodNotFound, format!("no method `{m}`")).hint(
                "the methods are SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, \
                 SubscribeToTask and the TaskPushNotificationConfig ones",
            )),
        ),
    }
}

/// A refusal of a request's `A2A-Version` this server does not speak.
pub fn version_refused(headers: &HeaderMap) -> Option<A2aError> {
    let v = headers.get("a2a-version")?.to_str().ok()?.trim();
    if v.is_empty() || v == "1" || v.starts_with("1.") {
        return None;
    }
    Some(
        A2aError::new(
            ErrorKind::VersionNotSupported,
            format!("A2A version {v} is not supported; this server speaks 1.0"),
        )
        .hint("send `A2A-Version: 1.0`"),
    )
}

fn reply(id: Value, r: Result<Value, A2aError>) -> Response {
    let body = match r {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.to_jsonrpc()}),
    };
    axum::Json(body).into_response()
}

/// `SendMessage` (both bindings): the task once it ends or asks for input
/// (or at once, with `returnImmediately`).
pub async fn send(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let req: SendMessageRequest = decode(params)?;
    let immediate = req.configuration.as_ref().is_some_and(|c| c.return_immediately);
    let sent = push::send_with_push(agent, &req).await?;
    let rec = agent.settle(sent, if immediate { Duration::ZERO } else { MAX_BLOCK }).await?;
    to_value(SendMessageResponse::Task(agent.task(&rec)))
}

/// A task's stream events, each with its `seq` when it ends an event.
pub type Events = futures::stream::BoxStream<'static, (Option<u64>, StreamResponse)>;

/// `SendStreamingMessage` (both bindings): the task as it starts (or as
/// the answer finds it), then its events until it ends or asks for input.
pub async fn stream_send(agent: &Agent, params: Value) -> Result<Events, A2aError> {
    let req: SendMessageRequest = decode(params)?;
    let sent = push::send_with_push(agent, &req).await?;
    Ok(match sent {
        Sent::Started { id, .. } => {
            // The task as it was submitted, then every event of its log,
            // however far the run got before this read.
            let rec = agent.task_run(&id.to_string(), "/message").await?;
            let mut first = agent.task(&rec);
            first.status = TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: Some(weft_engine::clock::rfc3339(rec.created_at)),
            };
            first.artifacts.clear();
            agent.follow(id, Seq::ZERO, Some(first), false, Until::Interrupted).boxed()
        }
        Sent::Answered { id, waits: true, .. } => {
            // Other waits remain: the task as it is (still input-required).
            let rec = agent.task_run(&id.to_string(), "/message/taskId").await?;
            agent.follow(id, rec.last_seq, Some(agent.task(&rec)), true, Until::Interrupted).boxed()
        }
        Sent::Answered { id, after, .. } => {
            // The task as the answer left it (working again), then every
            // event since the answer: never a later state before an earlier.
            let rec = agent.task_run(&id.to_string(), "/message/taskId").await?;
            let mut first = agent.task(&rec);
            first.status = TaskStatus { state: TaskState::Working, message: None, timestamp: None };
            first.artifacts.clear();
            agent.follow(id, after, Some(first), false, Until::Interrupted).boxed()
        }
    })
}

/// `GetTask` (both bindings).
pub async fn get(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let req: TaskIdRequest = decode(params)?;
    history_length(req.history_length)?;
    let rec = agent.task_run(&req.id, "/id").await?;
    to_value(agent.task(&rec))
}

/// A `historyLength` must not be negative (tasks carry no history: see
/// docs/a2a.md, "Choices written down").
fn history_length(n: Option<i32>) -> Result<(), A2aError> {
    match n {
        Some(n) if n < 0 => {
            Err(A2aError::new(ErrorKind::InvalidParams, format!("`historyLength` is {n}: it must be 0 or more"))
                .at("/historyLength")
                .hint("leave it out: tasks carry no history (the input and answers are the run's)"))
        }
        _ => Ok(()),
    }
}

/// `SubscribeToTask` (both bindings): the task as it is, then its events
/// until it ends (a waiting task is followed through its answer); resumed after event `resume` (the
/// last SSE id the client saw), with no snapshot.
pub async fn subscribe(agent: &Agent, params: Value, resume: Option<u64>) -> Result<Events, A2aError> {
    let req: TaskIdRequest = decode(params)?;
    let rec = agent.task_run(&req.id, "/id").await?;
    let ended = rec.state.is_terminal();
    Ok(match resume {
        Some(after) => {
            let caught_up = ended && rec.last_seq.0 <= after;
            agent.follow(rec.id.clone(), Seq(after), None, caught_up, Until::Ended).boxed()
        }
        None => agent.follow(rec.id.clone(), rec.last_seq, Some(agent.task(&rec)), ended, Until::Ended).boxed(),
    })
}

/// The events as SSE, each wrapped in a JSON-RPC response to `id`.
fn sse(id: Value, events: Events) -> Response {
    let stream = events.map(move |(seq, e)| {
        let data = json!({"jsonrpc": "2.0", "id": id, "result": e});
        let mut ev = Event::default().data(data.to_string());
        if let Some(s) = seq {
            ev = ev.id(s.to_string());
        }
        Ok::<_, Infallible>(ev)
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}
