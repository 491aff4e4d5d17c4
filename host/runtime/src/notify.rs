//! Sending the outbox's deliveries (the engine's [`Deliverer`]): to a
//! webhook of `weft.toml`, POSTed and signed as Standard Webhooks ask
//! (`webhook-id` = the delivery's id on every try, `webhook-timestamp`,
//! `webhook-signature` `v1,<base64 HMAC-SHA256>`), with the payload
//! `{"type", "timestamp", "data"}`; or to a tool of a configured MCP
//! server, with the delivery's id as its idempotency key in `_meta`.
//! A 2xx answer (a tool result that is not an error) is delivered; any
//! other answer, a timeout or a refused connection is tried again; a
//! target that is not configured (any more) fails at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use weft_engine::delivery::{Deliverer, DeliveryFailure, DeliveryRecord, DeliveryTarget};
use weft_mcp_client::{ToolCall, Upstreams};

use crate::webhooks::Webhook;

/// Sends deliveries to webhooks and MCP tools.
pub struct Notifier {
    webhooks: HashMap<String, Webhook>,
    /// `[a2a] push_urls`: checked again at every try (the operator may
    /// have withdrawn one since the client registered it).
    push_urls: Vec<String>,
    upstreams: Arc<Upstreams>,
    http: reqwest::Client,
    timeout: Duration,
}

impl Notifier {
    pub fn new(webhooks: &[Webhook], push_urls: Vec<String>, upstreams: Arc<Upstreams>, timeout: Duration) -> Notifier {
        let webhooks = webhooks.iter().map(|w| (w.name.clone(), w.clone())).collect();
        let http = reqwest::Client::builder()
            .user_agent(concat!("weft/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Notifier { webhooks, push_urls, upstreams, http, timeout }
    }

    async fn webhook(&self, name: &str, d: &DeliveryRecord) -> Result<(), DeliveryFailure> {
        let Some(w) = self.webhooks.get(name) else {
            return Err(fail(format!("no webhook `{name}` is configured (any more) in weft.toml"), false));
        };
        let body = serde_json::to_vec(&payload(d)).unwrap_or_default();
        let now = weft_engine::clock::system_now_ms();
        let ts = now / 1000;
        let signer = standardwebhooks::Webhook::new(&w.secret)
            .map_err(|e| fail(format!("webhook `{name}`: its secret does not load: {e}"), false))?;
        let signature =
            signer.sign(&d.id, ts, &body).map_err(|e| fail(format!("webhook `{name}`: cannot sign: {e}"), false))?;
        let sent = self
            .http
            .post(&w.url)
            .timeout(w.timeout.unwrap_or(self.timeout))
            .header("content-type", "application/json")
            .header("webhook-id", &d.id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await
            .map_err(|e| fail(format!("webhook `{name}`: {}", describe(&e)), true))?;
        let status = sent.status();
        if status.is_success() {
            return Ok(());
        }
        let text = sent.text().await.unwrap_or_default();
        let text: String = text.chars().take(200).collect();
        Err(fail(
            format!(
                "webhook `{name}` answered {status}{}",
                if text.is_empty() { String::new() } else { format!(": {text}") }
            ),
            true,
        ))
    }

    async fn tool(&self, server: &str, name: &str, d: &DeliveryRecord) -> Result<(), DeliveryFailure> {
        if self.upstreams.config(server).is_none() {
            return Err(fail(format!("no MCP server `{server}` is configured (any more) in weft.toml"), false));
        }
        let call = ToolCall {
            server: server.to_string(),
            tool: name.to_string(),
            arguments: d.body.clone(),
            idempotency_key: Some(d.id.clone()),
            timeout: Some(self.timeout),
            progress: None,
            traceparent: None,
        };
        match self.upstreams.call(call, std::future::pending()).await {
            Ok(_) => Ok(()),
            Err(e) => Err(fail(format!("tool `{name}` of MCP server `{server}`: {}", e.message), e.retryable)),
        }
    }
}

impl Notifier {
    /// An A2A push notification: the task's status update POSTed to the
    /// URL the client registered, with its token and authorization.
    async fn push(
        &self,
        url: &str,
        token: Option<&str>,
        authorization: Option<&str>,
        d: &DeliveryRecord,
    ) -> Result<(), DeliveryFailure> {
        if let Some(why) = crate::a2a::push_refused(url, &self.push_urls) {
            return Err(fail(format!("push notification: {why}"), false));
        }
        let mut req = self
            .http
            .post(url)
            .timeout(self.timeout)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&crate::a2a::push_body(d)).unwrap_or_default());
        if let Some(t) = token {
            req = req.header("x-a2a-notification-token", t);
        }
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        let sent = req.send().await.map_err(|e| fail(format!("push notification: {}", describe(&e)), true))?;
        let status = sent.status();
        if status.is_success() {
            return Ok(());
        }
        Err(fail(format!("push notification receiver answered {status}"), true))
    }
}

#[async_trait::async_trait]
impl Deliverer for Notifier {
    async fn deliver(&self, d: &DeliveryRecord) -> Result<(), DeliveryFailure> {
        match &d.target {
            DeliveryTarget::Webhook { name } => self.webhook(name, d).await,
            DeliveryTarget::Tool { server, name } => self.tool(server, name, d).await,
            DeliveryTarget::Push { url, token, authorization, .. } => {
                self.push(url, token.as_deref(), authorization.as_deref(), d).await
            }
        }
    }
}

/// The Standard Webhooks payload: `{"type", "timestamp", "data"}`, the
/// same on every try (`timestamp`: when the transition happened).
pub fn payload(d: &DeliveryRecord) -> Value {
    let kind = match d.on.strip_prefix("resolved:") {
        Some(_) => "step.resolved".to_string(),
        None => format!("run.{}", d.on),
    };
    json!({"type": kind, "timestamp": weft_engine::clock::rfc3339(d.created_at), "data": d.body})
}

fn fail(message: String, retryable: bool) -> DeliveryFailure {
    DeliveryFailure { message, retryable }
}

/// What went wrong with a request, in a few words.
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "no answer in time".into()
    } else if e.is_connect() {
        "cannot connect".into()
    } else {
        let mut s = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(x) = src {
            s = format!("{s}: {x}");
            src = x.source();
        }
        s
    }
}
