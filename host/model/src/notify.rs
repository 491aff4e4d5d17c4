//! A definition's `notify`: whom to tell, and what, when a run ends, asks
//! for input, or a step's wait is resolved (docs/notifications.md). The
//! engine writes each notification in the commit of the transition that
//! causes it and sends it at least once; this module is its typed form.

use schemars::JsonSchema;
use serde::{Serialize, Serializer};

use crate::retry::RetryPolicy;
use crate::status::RunState;
use crate::template::Template;
use crate::tool_ref::ToolRef;

/// The run states a notification can be sent on.
pub const NOTIFY_STATES: [RunState; 6] = [
    RunState::Completed,
    RunState::Failed,
    RunState::Canceled,
    RunState::Rejected,
    RunState::InputRequired,
    RunState::AuthRequired,
];

/// What a notification is sent on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NotifyOn {
    /// The run enters this state.
    Run(RunState),
    /// `resolved:STEP`: the step's wait was answered (a signal, an event,
    /// its child run, its timer).
    Resolved(String),
}

impl NotifyOn {
    pub fn parse(s: &str) -> Option<NotifyOn> {
        if let Some(step) = s.strip_prefix("resolved:") {
            return Some(NotifyOn::Resolved(step.to_string()));
        }
        NOTIFY_STATES.into_iter().find(|st| st.as_str() == s).map(NotifyOn::Run)
    }
}

impl std::fmt::Display for NotifyOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotifyOn::Run(s) => f.write_str(s.as_str()),
            NotifyOn::Resolved(step) => write!(f, "resolved:{step}"),
        }
    }
}

impl Serialize for NotifyOn {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Where a notification goes: exactly one of `webhook`, `tool` and `push`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyTarget {
    /// A webhook configured by the operator (`[webhooks.NAME]` in weft.toml).
    Webhook(String),
    /// A tool of a configured MCP server.
    Tool(ToolRef),
    /// An A2A client's push notification URL (allowed by weft.toml's
    /// `[a2a] push_urls`).
    Push(PushTarget),
}

/// An A2A push notification configuration: where the task's status
/// updates are POSTed, and what the receiver checks them with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PushTarget {
    /// The receiver's URL; it must start with one of weft.toml's
    /// `[a2a] push_urls`.
    pub url: String,
    /// The configuration's id (A2A `TaskPushNotificationConfig.id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Sent as `X-A2A-Notification-Token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Sent as the `Authorization` header (`SCHEME CREDENTIALS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<String>,
}

/// One notification of a definition.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Notify {
    /// When to send it: `completed`, `failed`, `canceled`, `rejected`,
    /// `input-required`, `auth-required`, or `resolved:STEP` (that step's
    /// wait was answered).
    #[schemars(with = "Vec<String>", length(min = 1))]
    pub on: Vec<NotifyOn>,
    /// A webhook named in weft.toml (`[webhooks.NAME]`); definitions never
    /// carry a URL.
    #[schemars(with = "Option<String>")]
    pub webhook: Option<String>,
    /// A tool of a configured MCP server, called with the delivery's id as
    /// its idempotency key in `_meta`.
    #[schemars(with = "Option<ToolRef>")]
    pub tool: Option<ToolRef>,
    /// An A2A push notification URL (what an A2A client registers):
    /// `{"url", "token"?, "authorization"?, "id"?}`, sent A2A status
    /// updates; the URL must be allowed by weft.toml's `[a2a] push_urls`.
    pub push: Option<PushTarget>,
    /// What is sent, with refs resolved when it happens (`@run.resume`,
    /// `@run.labels.KEY`, `@input.x`, `@step.field`); default: the run's
    /// resume context.
    #[schemars(with = "Option<serde_json::Value>")]
    pub input: Option<Template>,
    /// Notifications with the same key go out one at a time, in order
    /// (refs resolved, e.g. `@run.labels.session`).
    #[schemars(with = "Option<serde_json::Value>")]
    pub key: Option<Template>,
    /// How tries are retried (`max_attempts`, `initial_delay_ms`,
    /// `max_delay_ms`, `backoff`); default: weft.toml's
    /// `[notifications]`.
    pub retry: Option<RetryPolicy>,
}

impl Notify {
    pub fn target(&self) -> Option<NotifyTarget> {
        match (&self.webhook, &self.tool, &self.push) {
            (Some(w), None, None) => Some(NotifyTarget::Webhook(w.clone())),
            (None, Some(t), None) => Some(NotifyTarget::Tool(t.clone())),
            (None, None, Some(p)) => Some(NotifyTarget::Push(p.clone())),
            _ => None,
        }
    }
}

impl Serialize for Notify {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = serde_json::Map::new();
        m.insert("on".into(), serde_json::to_value(&self.on).unwrap_or_default());
        if let Some(w) = &self.webhook {
            m.insert("webhook".into(), w.clone().into());
        }
        if let Some(t) = &self.tool {
            m.insert("tool".into(), serde_json::to_value(t).unwrap_or_default());
        }
        if let Some(p) = &self.push {
            m.insert("push".into(), serde_json::to_value(p).unwrap_or_default());
        }
        if let Some(t) = &self.input {
            m.insert("input".into(), serde_json::to_value(t).unwrap_or_default());
        }
        if let Some(t) = &self.key {
            m.insert("key".into(), serde_json::to_value(t).unwrap_or_default());
        }
        if let Some(r) = &self.retry {
            m.insert("retry".into(), serde_json::to_value(r).unwrap_or_default());
        }
        m.serialize(s)
    }
}
