//! Push notifications: a `SendMessage` whose configuration carries a
//! `taskPushNotificationConfig` starts its run with one more notification
//! (a `push` target, on every state a task settles in), so its deliveries
//! go through the outbox with its retries and ids (docs/notifications.md).
//! The URL must be under one of weft.toml's `[a2a] push_urls`.
//!
//! A run's notifications are committed with its start, so a configuration
//! cannot be added to (or deleted from) a task that already started:
//! `CreateTaskPushNotificationConfig` and `DeleteTaskPushNotificationConfig`
//! answer `UnsupportedOperation`, saying so; `Get` and `List` read the
//! task's configurations back.

use serde_json::{Value, json};
use weft_a2a::errors::{A2aError, ErrorKind};
use weft_a2a::wire::{
    AuthenticationInfo, ListTaskPushNotificationConfigsResponse, PushConfigRequest, SendMessageRequest,
    TaskPushNotificationConfig,
};
use weft_engine::store::RunRecord;
use weft_model::notify::NOTIFY_STATES;

use super::ops::{Agent, Sent, decode, to_value};

/// The id of a configuration the client gave none.
const DEFAULT_ID: &str = "default";

/// Sends `req`'s message, starting its run with the push notification
/// its configuration asks for.
pub async fn send_with_push(agent: &Agent, req: &SendMessageRequest) -> Result<Sent, A2aError> {
    let Some(cfg) = req.configuration.as_ref().and_then(|c| c.task_push_notification_config.as_ref()) else {
        return agent.send(req, vec![]).await;
    };
    let at = "/configuration/taskPushNotificationConfig";
    if req.message.task_id.as_deref().is_some_and(|t| !t.is_empty()) {
        return Err(A2aError::new(
            ErrorKind::UnsupportedOperation,
            "push notifications are registered when a task starts, not with an answer",
        )
        .at(at)
        .hint("send the configuration with the message that starts the task"));
    }
    if let Some(why) = weft_runtime::a2a::push_refused(&cfg.url, &agent.core.settings.file.a2a.push_urls) {
        return Err(A2aError::new(ErrorKind::PushNotificationNotSupported, why)
            .at(format!("{at}/url"))
            .hint("the server's operator allows push URLs in weft.toml: [a2a] push_urls"));
    }
    let mut push = json!({"url": cfg.url, "id": if cfg.id.is_empty() { DEFAULT_ID } else { &cfg.id }});
    if !cfg.token.is_empty() {
        push["token"] = json!(cfg.token);
    }
    if let Some(a) = cfg.authentication.as_ref().filter(|a| !a.scheme.is_empty()) {
        push["authorization"] = json!(format!("{} {}", a.scheme, a.credentials).trim().to_string());
    }
    let on: Vec<&str> = NOTIFY_STATES.iter().map(|s| s.as_str()).collect();
    agent.send(req, vec![json!({"on": on, "push": push})]).await
}

/// The push configurations task `rec` started with.
fn configs(rec: &RunRecord) -> Vec<TaskPushNotificationConfig> {
    let list = rec.definition.get("notify").and_then(Value::as_array).cloned().unwrap_or_default();
    list.iter()
        .filter_map(|n| n.get("push"))
        .map(|p| {
            let text = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            // The scheme only, never the credentials (the client's secret).
            let authentication = p.get("authorization").and_then(Value::as_str).map(|a| AuthenticationInfo {
                scheme: a.split(' ').next().unwrap_or(a).to_string(),
                credentials: String::new(),
            });
            TaskPushNotificationConfig {
                id: text("id"),
                task_id: rec.id.to_string(),
                url: text("url"),
                token: text("token"),
                authentication,
            }
        })
        .collect()
}

/// `CreateTaskPushNotificationConfig`.
pub async fn create(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let cfg: TaskPushNotificationConfig = decode(params)?;
    agent.task_run(&cfg.task_id, "/taskId").await?;
    Err(A2aError::new(
        ErrorKind::UnsupportedOperation,
        "a task's push notifications are committed with its start; they cannot be added later",
    )
    .at("/taskId")
    .hint("send `configuration.taskPushNotificationConfig` with the SendMessage that starts the task"))
}

/// `GetTaskPushNotificationConfig`.
pub async fn get(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let req: PushConfigRequest = decode(params)?;
    let rec = agent.task_run(&req.task_id, "/taskId").await?;
    let id = req.id.clone().unwrap_or_else(|| DEFAULT_ID.to_string());
    let found = configs(&rec).into_iter().find(|c| c.id == id);
    let cfg = found.ok_or_else(|| {
        A2aError::new(ErrorKind::TaskNotFound, format!("task {} has no push configuration `{id}`", rec.id))
            .at("/id")
            .hint("ListTaskPushNotificationConfigs lists them")
    })?;
    to_value(cfg)
}

/// `ListTaskPushNotificationConfigs`.
pub async fn list(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let req: PushConfigRequest = decode(params)?;
    let rec = agent.task_run(&req.task_id, "/taskId").await?;
    to_value(ListTaskPushNotificationConfigsResponse { configs: configs(&rec), next_page_token: String::new() })
}

/// `DeleteTaskPushNotificationConfig`.
pub async fn delete(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let req: PushConfigRequest = decode(params)?;
    agent.task_run(&req.task_id, "/taskId").await?;
    Err(A2aError::new(
        ErrorKind::UnsupportedOperation,
        "a task's push notifications are committed with its start; they cannot be deleted",
    )
    .at("/taskId")
    .hint("CancelTask ends the task (and its notifications after the cancel)"))
}
