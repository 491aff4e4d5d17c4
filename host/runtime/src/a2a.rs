//! A2A in the runtime: the `[a2a]` table of `weft.toml` (the URLs A2A
//! clients may register for push notifications: weft never sends a
//! request to an address the operator did not allow), and the body of a
//! push notification (an A2A `StreamResponse` with the task's status
//! update, built from the delivery's resume context).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use weft_a2a::wire::{Message, Part, Role, StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent};
use weft_engine::delivery::DeliveryRecord;

/// The label holding a task's A2A context id.
pub const CONTEXT_LABEL: &str = "a2a/context";

/// `[a2a]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aConfig {
    /// URL prefixes A2A clients may register as push notification
    /// receivers (`http://hooks.internal:8080/a2a/`); none by default, so
    /// a push configuration is refused until the operator allows one.
    #[serde(default)]
    pub push_urls: Vec<String>,
}

/// One `[agents.NAME]` table as written: a remote A2A agent that agent
/// steps may send to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    /// The agent's URL (`http://host:port/path`): its card is at
    /// `URL/.well-known/agent-card.json`.
    pub url: String,
    /// A bearer token for its requests (`${VAR}` allowed; never stored).
    pub token: Option<String>,
}

/// A configured remote agent, `${VAR}`s expanded (memory only).
#[derive(Clone)]
pub struct RemoteAgent {
    pub name: String,
    pub url: String,
    pub token: Option<String>,
}

impl std::fmt::Debug for RemoteAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("RemoteAgent").field("name", &self.name).field("url", &self.url).finish()
    }
}

/// The `[agents.*]` tables, checked (an http URL; names of letters,
/// digits, `-` and `_`) and with `${VAR}`s expanded.
pub fn resolve_agents(
    path: &Path,
    text: &str,
    raw: &BTreeMap<String, RawAgent>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<RemoteAgent>, crate::error::ConfigError> {
    let mut out = vec![];
    for (name, a) in raw {
        let check = crate::servers::TableCheck::new(path, text, "agents", name, lookup);
        check.name("agent", name)?;
        let url = check.expand(&a.url, "url")?;
        check.http_url(&url, "calls agents")?;
        if reqwest::Url::parse(&url).is_err() {
            return Err(check.invalid(format!("{} url: `{url}` is not an http:// URL", check.table), "url"));
        }
        let token = a.token.as_deref().map(|t| check.expand(t, "token")).transpose()?;
        out.push(RemoteAgent { name: name.clone(), url: url.trim_end_matches('/').to_string(), token });
    }
    Ok(out)
}

/// Whether `url` starts with one of `allowed`: the same scheme, host and
/// port, and a path under the allowed one (at a `/`). A URL with a user
/// name or password is never allowed.
pub fn push_allowed(url: &str, allowed: &[String]) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else { return false };
    if !u.username().is_empty() || u.password().is_some() || !matches!(u.scheme(), "http" | "https") {
        return false;
    }
    allowed.iter().filter_map(|a| reqwest::Url::parse(a).ok()).any(|a| {
        a.scheme() == u.scheme()
            && a.host_str() == u.host_str()
            && a.port_or_known_default() == u.port_or_known_default()
            && under(u.path(), a.path())
    })
}

fn under(path: &str, prefix: &str) -> bool {
    path == prefix || prefix.ends_with('/') && path.starts_with(prefix) || path.starts_with(&format!("{prefix}/"))
}

/// Why `url` cannot be registered, or `None` when it can.
pub fn push_refused(url: &str, allowed: &[String]) -> Option<String> {
    if reqwest::Url::parse(url).is_err() {
        return Some(format!("`{url}` is not a URL"));
    }
    if push_allowed(url, allowed) {
        return None;
    }
    Some(if allowed.is_empty() {
        "this server allows no push notification URLs (weft.toml has no `[a2a] push_urls`)".to_string()
    } else {
        format!("`{url}` is not under an allowed push URL ({})", allowed.join(", "))
    })
}

/// The push notification of delivery `d`: a `StreamResponse` whose
/// `statusUpdate` is the task's new state, with the agent's message (the
/// prompts of an input-required task, the output of a completed one, the
/// error of a failed one) and the delivery's id in its metadata.
pub fn push_body(d: &DeliveryRecord) -> Value {
    let b = &d.body;
    let task_id = b.get("run_id").and_then(Value::as_str).unwrap_or_default().to_string();
    let context_id = b
        .pointer(&format!("/labels/{}", CONTEXT_LABEL.replace('/', "~1")))
        .and_then(Value::as_str)
        .unwrap_or(&task_id)
        .to_string();
    let state = b.get("state").and_then(Value::as_str).and_then(TaskState::from_kebab).unwrap_or(TaskState::Working);
    let mut parts = vec![];
    for w in b.get("waiting").and_then(Value::as_array).into_iter().flatten() {
        let text = w.get("prompt").and_then(Value::as_str).unwrap_or("an answer is needed").to_string();
        let mut meta = Map::new();
        for k in ["schema", "step", "item"] {
            if let Some(v) = w.get(k) {
                meta.insert(k.into(), v.clone());
            }
        }
        parts.push(Part { text: Some(text), metadata: Some(meta), ..Part::default() });
    }
    if let Some(o) = b.get("output") {
        parts.push(Part::data(o.clone()));
    }
    if let Some(m) = b.pointer("/error/message").and_then(Value::as_str) {
        parts.push(Part::text(m));
    }
    let message = (!parts.is_empty()).then(|| Message {
        message_id: format!("{}-push", d.id),
        context_id: Some(context_id.clone()),
        task_id: Some(task_id.clone()),
        role: Role::Agent,
        parts,
        ..Message::default()
    });
    let mut meta = Map::new();
    meta.insert("deliveryId".into(), json!(d.id));
    let update = TaskStatusUpdateEvent {
        task_id,
        context_id,
        status: TaskStatus { state, message, timestamp: Some(weft_engine::clock::rfc3339(d.created_at)) },
        metadata: Some(meta),
    };
    serde_json::to_value(StreamResponse::StatusUpdate(update)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_tables_are_checked_and_their_tokens_expanded() {
        let text = "[agents.up]\nurl = \"http://127.0.0.1:9000/\"\ntoken = \"${TOK}\"\n";
        let raw = |url: &str, token: Option<&str>| {
            BTreeMap::from([("up".to_string(), RawAgent { url: url.into(), token: token.map(String::from) })])
        };
        let env = |v: &str| (v == "TOK").then(|| "s3cret".to_string());
        let path = Path::new("weft.toml");
        let ok = resolve_agents(path, text, &raw("http://127.0.0.1:9000/", Some("${TOK}")), &env).unwrap();
        assert_eq!((ok[0].url.as_str(), ok[0].token.as_deref()), ("http://127.0.0.1:9000", Some("s3cret")));
        assert!(!format!("{:?}", ok[0]).contains("s3cret"), "Debug never shows the token");
        let e = resolve_agents(path, text, &raw("https://x", None), &env).unwrap_err().to_string();
        assert!(e.contains("plain HTTP only") && e.contains("weft.toml:2"), "{e}");
        let e = resolve_agents(path, text, &raw("http://x", Some("${NOPE}")), &env).unwrap_err().to_string();
        assert!(e.contains("`NOPE` is not set"), "{e}");
    }

    #[test]
    fn only_urls_under_an_allowed_prefix_are_allowed() {
        let allowed = vec!["http://127.0.0.1:9000/hooks/".to_string(), "http://recv.internal/a2a".to_string()];
        assert!(push_allowed("http://127.0.0.1:9000/hooks/x", &allowed));
        assert!(push_allowed("http://recv.internal/a2a/t1", &allowed));
        assert!(push_allowed("http://recv.internal:80/a2a", &allowed));
        assert!(!push_allowed("http://recv.internal/a2ab", &allowed));
        assert!(!push_allowed("http://127.0.0.1:9001/hooks/x", &allowed));
        assert!(!push_allowed("http://127.0.0.1:9000/other", &allowed));
        assert!(!push_allowed("http://u:p@127.0.0.1:9000/hooks/x", &allowed));
        assert!(!push_allowed("file:///etc/passwd", &allowed));
        // Dot segments are resolved before the check, as the request would.
        assert!(!push_allowed("http://127.0.0.1:9000/hooks/../admin", &allowed));
        assert!(!push_allowed("http://127.0.0.1:9000/hooks/%2e%2e/admin", &allowed));
        assert!(!push_allowed("http://169.254.169.254/hooks/", &allowed));
        assert!(push_refused("http://x/", &[]).unwrap().contains("push_urls"));
    }
}
