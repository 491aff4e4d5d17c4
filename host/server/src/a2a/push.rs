//! Push notifications: a `SendMessage` whose configuration carries a
//! `taskPushNotificationConfig` starts its run with one more notification
//! (a `push` target, on every state a task settles in), so its deliveries
//! go through the outbox with its retries and ids (docs/notifications.md).
//! The URL must be under one of weft.toml's `[a2a] push_urls`.
//!
//! `CreateTaskPushNotificationConfig` on a task that runs adds one (or
//! replaces the one of the same id), and `DeleteTaskPushNotificationConfig`
//! removes one: the run's `notify` changes for the transitions after it
//! (the use-case layer's `edit_run_notify`). A task that ended takes no
//! new configuration. `Get` and `List` read the task's configurations.

use serde_json::{Value, json};
use weft_a2a::errors::{A2aError, ErrorKind};
use weft_a2a::wire::{
    AuthenticationInfo, ListTaskPushNotificationConfigsResponse, PushConfigRequest, SendMessageRequest,
    TaskPushNotificationConfig,
};
use weft_engine::store::RunRecord;
use weft_model::notify::NOTIFY_STATES;
use weft_runtime::usecase::notifications::NotifyEditRefused;

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
    let entry = entry_of(agent, cfg, &format!("{at}/url"))?;
    agent.send(req, vec![entry]).await
}

/// The `notify` entry of push configuration `cfg` (a `push` target on
/// every state a task settles in), once its URL is allowed (`url_at`:
/// where the URL is in the request).
fn entry_of(agent: &Agent, cfg: &TaskPushNotificationConfig, url_at: &str) -> Result<Value, A2aError> {
    if let Some(why) = weft_runtime::a2a::push_refused(&cfg.url, &agent.core.settings.file.a2a.push_urls) {
        return Err(A2aError::new(ErrorKind::InvalidParams, why)
            .at(url_at)
            .hint("the server's operator allows push URLs in weft.toml: [a2a] push_urls"));
    }
    let mut push = json!({"url": cfg.url, "id": config_id(&cfg.id)});
    if !cfg.token.is_empty() {
        push["token"] = json!(cfg.token);
    }
    if let Some(a) = cfg.authentication.as_ref().filter(|a| !a.scheme.is_empty()) {
        push["authorization"] = json!(format!("{} {}", a.scheme, a.credentials).trim().to_string());
    }
    let on: Vec<&str> = NOTIFY_STATES.iter().map(|s| s.as_str()).collect();
    Ok(json!({"on": on, "push": push}))
}

/// Task `rec` has no configuration `id` (the task exists: not TASK_NOT_FOUND).
fn no_config(rec: &RunRecord, id: &str) -> A2aError {
    let ids: Vec<String> = configs(rec).into_iter().map(|c| format!("`{}`", c.id)).collect();
    let has = if ids.is_empty() { "none".to_string() } else { ids.join(", ") };
    A2aError::new(ErrorKind::InvalidParams, format!("task {} has no push configuration `{id}` (it has {has})", rec.id))
        .at("/id")
        .hint("ListTaskPushNotificationConfigs lists them")
}

/// A configuration's id (`default` when the client gave none).
fn config_id(id: &str) -> &str {
    if id.is_empty() { DEFAULT_ID } else { id }
}

/// Whether `notify` entry `n` is push configuration `id`.
fn is_config(n: &Value, id: &str) -> bool {
    n.get("push").and_then(|p| p.get("id")).and_then(Value::as_str) == Some(id)
}

/// A change of a task's configurations refused: the task ended, or the
/// store failed.
fn edit_refused(e: NotifyEditRefused, task: &str) -> A2aError {
    match e {
        NotifyEditRefused::Ended => A2aError::new(
            ErrorKind::UnsupportedOperation,
            format!("task {task} has ended: no notification would be sent"),
        )
        .at("/taskId")
        .hint("GetTask reads how it ended"),
        NotifyEditRefused::Invalid(m) => A2aError::new(ErrorKind::InvalidParams, m),
        NotifyEditRefused::Failed(e) => A2aError::internal(e),
    }
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

/// `CreateTaskPushNotificationConfig`: the task's notifications after now
/// go to it too (it replaces the configuration of the same id).
pub async fn create(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let mut cfg: TaskPushNotificationConfig = decode(params)?;
    let rec = agent.task_run(&cfg.task_id, "/taskId").await?;
    if cfg.id.is_empty() {
        // No id: a new configuration, never one that replaces another.
        let taken: Vec<String> = configs(&rec).into_iter().map(|c| c.id).collect();
        let fresh = std::iter::once(DEFAULT_ID.to_string()).chain((2..).map(|n| format!("{DEFAULT_ID}-{n}")));
        cfg.id = fresh.into_iter().find(|id| !taken.contains(id)).unwrap_or_default();
    }
    let entry = entry_of(agent, &cfg, "/url")?;
    let id = cfg.id.clone();
    let edit = |list: &mut Vec<Value>| {
        list.retain(|n| !is_config(n, &id));
        list.push(entry.clone());
    };
    let what = json!({"push": {"added": id, "url": cfg.url}});
    agent.core.for_http.edit_run_notify(&rec.id, edit, what).await.map_err(|e| edit_refused(e, &cfg.task_id))?;
    // As the task reads it back: the scheme of its credentials only.
    let rec = agent.task_run(&cfg.task_id, "/taskId").await?;
    let made = configs(&rec).into_iter().find(|c| c.id == id);
    to_value(made.ok_or_else(|| A2aError::internal(format!("configuration `{id}` was not kept")))?)
}

/// `GetTaskPushNotificationConfig`.
pub async fn get(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let req: PushConfigRequest = decode(params)?;
    let rec = agent.task_run(&req.task_id, "/taskId").await?;
    let id = req.id.clone().unwrap_or_else(|| DEFAULT_ID.to_string());
    let found = configs(&rec).into_iter().find(|c| c.id == id);
    let cfg = found.ok_or_else(|| no_config(&rec, &id))?;
    to_value(cfg)
}

/// `ListTaskPushNotificationConfigs`.
pub async fn list(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let req: PushConfigRequest = decode(params)?;
    let rec = agent.task_run(&req.task_id, "/taskId").await?;
    to_value(ListTaskPushNotificationConfigsResponse { configs: configs(&rec), next_page_token: String::new() })
}

/// `DeleteTaskPushNotificationConfig`: no notification after now goes to it.
pub async fn delete(agent: &Agent, params: Value) -> Result<Value, A2aError> {
    let req: PushConfigRequest = decode(params)?;
    let rec = agent.task_run(&req.task_id, "/taskId").await?;
    let id = req.id.clone().unwrap_or_else(|| DEFAULT_ID.to_string());
    if !configs(&rec).iter().any(|c| c.id == id) {
        return Err(no_config(&rec, &id));
    }
    let edit = |list: &mut Vec<Value>| list.retain(|n| !is_config(n, &id));
    let what = json!({"push": {"deleted": id}});
    agent.core.for_http.edit_run_notify(&rec.id, edit, what).await.map_err(|e| edit_refused(e, &req.task_id))?;
    Ok(json!({}))
}
