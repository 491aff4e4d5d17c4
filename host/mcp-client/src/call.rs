//! One tool call: the arguments, the attempt's idempotency key in the
//! request's `_meta` (as `dev.weft/idempotency-key`), a deadline that
//! covers connecting and calling and sends `notifications/cancelled`
//! upstream when it passes (as does the caller's cancellation), progress
//! routed to the caller, and the result mapped to one JSON value:
//! `structuredContent`, else the text content parsed as JSON, else the
//! text (docs/workflow-format.md, "Steps"). Failures are classified ([`CallErrorKind`]).
//! The caller's W3C `traceparent`, when given, travels in `_meta` too
//! (MCP's trace context, SEP-414). Each call's latency and failures are
//! recorded per server (`weft_upstream_*` metrics, docs/observability.md)
//! when a metrics recorder is installed.

use std::future::Future;
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock, RequestMetaObject, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::Value;
use tokio::time::Instant;

use crate::config::DEFAULT_TOOL_TIMEOUT;
use crate::connection::ProgressFn;
use crate::error::{CallError, CallErrorKind, classify_service_error};
use crate::pool::Upstreams;

/// Whether a metrics recorder is installed (the process's telemetry sets
/// it; nothing is measured otherwise).
static METRICS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn metrics_on() -> bool {
    METRICS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Records each call's latency and failures from now on (see the module docs).
pub fn record_metrics(on: bool) {
    METRICS.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// The `_meta` key that carries an attempt's idempotency key.
pub const IDEMPOTENCY_META_KEY: &str = "dev.weft/idempotency-key";

/// A call to make.
#[derive(Clone)]
pub struct ToolCall {
    /// The configured server name.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
    /// A JSON object (`null` is sent as `{}`).
    pub arguments: Value,
    /// Sent in `_meta` so the tool can make its side effect once.
    pub idempotency_key: Option<String>,
    /// Covers connecting and calling; the server's `timeout_ms`, else 30 s,
    /// when `None`.
    pub timeout: Option<Duration>,
    /// Receives the upstream's progress notifications for this call.
    pub progress: Option<ProgressFn>,
    /// The caller's W3C trace context, sent as `_meta.traceparent`.
    pub traceparent: Option<String>,
}

impl std::fmt::Debug for ToolCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCall")
            .field("server", &self.server)
            .field("tool", &self.tool)
            .field("idempotency_key", &self.idempotency_key)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A successful call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The mapped value (see the module docs).
    pub value: Value,
    /// The upstream's result as it came.
    pub result: CallToolResult,
}

impl Upstreams {
    /// Makes `call`, giving up (and telling the upstream) when its deadline
    /// passes or `cancel` resolves; the result mapped to one value
    /// (an `isError` result is a [`CallErrorKind::ToolError`]).
    pub async fn call(&self, call: ToolCall, cancel: impl Future<Output = ()>) -> Result<ToolOutput, CallError> {
        let (server, tool) = (call.server.clone(), call.tool.clone());
        let result = self.call_raw(call, cancel).await?;
        map_result(&server, &tool, result).map_err(|e| self.redacted(&server, e))
    }

    /// [`Upstreams::call`] without the mapping: the upstream's result as it
    /// came, `isError` results included (what a proxy forwards).
    pub async fn call_raw(
        &self,
        call: ToolCall,
        cancel: impl Future<Output = ()>,
    ) -> Result<CallToolResult, CallError> {
        let server = call.server.clone();
        let started = metrics_on().then(std::time::Instant::now);
        let r = self.call_raw_inner(call, cancel).await.map_err(|e| self.redacted(&server, e));
        if let Some(t) = started {
            let outcome = match &r {
                Ok(res) if res.is_error == Some(true) => CallErrorKind::ToolError.as_str(),
                Ok(_) => "ok",
                Err(e) => e.kind.as_str(),
            };
            metrics::histogram!("weft_upstream_call_duration_seconds", "server" => server.clone())
                .record(t.elapsed().as_secs_f64());
            if outcome != "ok" {
                metrics::counter!("weft_upstream_call_errors_total", "server" => server, "kind" => outcome)
                    .increment(1);
            }
        }
        r
    }

    async fn call_raw_inner(
        &self,
        call: ToolCall,
        cancel: impl Future<Output = ()>,
    ) -> Result<CallToolResult, CallError> {
        let ToolCall { server, tool, arguments, idempotency_key, timeout, progress, traceparent } = call;
        let cfg = self.upstream_config(&server)?;
        if !cfg.tools.allows(&tool) {
            return Err(CallError::new(
                CallErrorKind::Refused,
                format!(
                    "tool `{tool}` of MCP server `{server}` is not allowed by [servers.{server}] allow_tools/deny_tools"
                ),
            ));
        }
        let arguments = match arguments {
            Value::Object(m) => m,
            Value::Null => Default::default(),
            other => {
                let mut shown = other.to_string();
                if shown.chars().count() > 60 {
                    shown = format!("{}…", shown.chars().take(60).collect::<String>());
                }
                return Err(CallError::new(
                    CallErrorKind::Refused,
                    format!("the arguments of tool `{server}.{tool}` must be a JSON object, got `{shown}`"),
                ));
            }
        };
        let limit = timeout.or(cfg.timeout).unwrap_or(DEFAULT_TOOL_TIMEOUT);
        let deadline = Instant::now() + limit;
        let timed_out = |what: &str| {
            CallError::new(
                CallErrorKind::Timeout,
                format!("tool `{server}.{tool}` {what} within {} ms", limit.as_millis()),
            )
        };
        let canceled =
            || CallError::new(CallErrorKind::Canceled, format!("the call to `{server}.{tool}` was canceled"));
        tokio::pin!(cancel);

        let conn = tokio::select! {
            c = tokio::time::timeout_at(deadline, self.connection(&server)) => match c {
                Ok(c) => c?,
                Err(_) => return Err(timed_out("could not connect")),
            },
            _ = &mut cancel => return Err(canceled()),
        };

        let mut meta = RequestMetaObject::new();
        if let Some(key) = idempotency_key {
            meta.0.0.insert(IDEMPOTENCY_META_KEY.to_string(), Value::String(key));
        }
        if let Some(t) = traceparent {
            meta.set_traceparent(t);
        }
        let request = ClientRequest::CallToolRequest(rmcp::model::Request::new(
            CallToolRequestParams::new(tool.clone()).with_arguments(arguments),
        ));
        let sent =
            conn.service.peer().send_request_with_option(request, PeerRequestOptions::no_options().with_meta(meta));
        let mut handle = match sent.await {
            Ok(h) => h,
            Err(e) => {
                self.discard(&server, conn.generation).await;
                return Err(self.failure(&server, &tool, &e, &conn.stderr_tail()));
            }
        };
        let _progress = progress.map(|p| conn.watch_progress(handle.progress_token.clone(), p));

        let answer = tokio::select! {
            r = &mut handle.rx => Ok(r),
            _ = tokio::time::sleep_until(deadline) => Err(timed_out("did not answer")),
            _ = &mut cancel => Err(canceled()),
        };
        let response = match answer {
            Ok(r) => r,
            Err(e) => {
                // Tell the upstream to stop; it may be gone already.
                let reason = if e.kind == CallErrorKind::Timeout { "timeout" } else { "canceled" };
                let _ = tokio::time::timeout(Duration::from_secs(1), handle.cancel(Some(reason.to_string()))).await;
                return Err(e);
            }
        };
        match response {
            Ok(Ok(ServerResult::CallToolResult(result))) => Ok(result),
            Ok(Ok(ServerResult::InputRequiredResult(_))) => Err(CallError::new(
                CallErrorKind::Protocol,
                format!("tool `{server}.{tool}` asked for input from the user, which a workflow step cannot give"),
            )),
            Ok(Ok(ServerResult::CreateTaskResult(_))) => Err(CallError::new(
                CallErrorKind::Protocol,
                format!(
                    "tool `{server}.{tool}` started a task instead of answering; task-based tools are not supported in tool steps yet"
                ),
            )),
            Ok(Ok(_)) => Err(CallError::new(
                CallErrorKind::Protocol,
                format!("MCP server `{server}` answered a call of `{tool}` with something that is not a tool result"),
            )),
            Ok(Err(e)) => {
                if classify_service_error(&e) == CallErrorKind::Transport {
                    self.discard(&server, conn.generation).await;
                }
                Err(self.failure(&server, &tool, &e, &conn.stderr_tail()))
            }
            Err(_closed) => {
                self.discard(&server, conn.generation).await;
                Err(self.failure(&server, &tool, &ServiceError::TransportClosed, &conn.stderr_tail()))
            }
        }
    }

    fn failure(&self, server: &str, tool: &str, e: &ServiceError, stderr: &str) -> CallError {
        let kind = classify_service_error(e);
        let what = match e {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                format!("MCP server `{server}` closed the connection during a call of `{tool}` (crashed or exited)")
            }
            ServiceError::McpError(err) => format!(
                "MCP server `{server}` refused the call of `{tool}`: {} (JSON-RPC error {})",
                err.message, err.code.0
            ),
            other => format!("the call of `{server}.{tool}` failed: {other}"),
        };
        let stderr = stderr.lines().last().unwrap_or("");
        let message = if kind == CallErrorKind::Transport && !stderr.is_empty() {
            format!("{what}; its last stderr line: {stderr}")
        } else {
            what
        };
        let mut err = CallError::new(kind, message);
        if let ServiceError::McpError(e) = e {
            // Invalid params / method not found will not pass on a retry.
            err.retryable = !matches!(e.code.0, -32602..=-32600);
        }
        err
    }
}

/// `structuredContent`, else the text content parsed as JSON, else the
/// text, else every content block (`content.rs`); `isError` results
/// become `tool_error`s carrying their text.
/// An `isError` result is retryable unless it says `"retryable": false`
/// in its `structuredContent` or `_meta`.
pub fn map_result(server: &str, tool: &str, result: CallToolResult) -> Result<ToolOutput, CallError> {
    let text = text_of(&result.content);
    if result.is_error == Some(true) {
        let says_no = |v: Option<&Value>| v.and_then(|v| v.get("retryable")).and_then(Value::as_bool) == Some(false);
        let meta = result.meta.as_ref().and_then(|m| serde_json::to_value(m).ok());
        let detail = text.or_else(|| result.structured_content.as_ref().map(|v| v.to_string())).unwrap_or_default();
        let retryable = !(says_no(result.structured_content.as_ref())
            || says_no(meta.as_ref())
            || refused_request(&detail).is_some());
        let mut err =
            CallError::new(CallErrorKind::ToolError, format!("tool `{server}.{tool}` reported an error: {detail}"));
        err.retryable = retryable;
        return Err(err);
    }
    let value = crate::content::keep(&result, "").value;
    Ok(ToolOutput { value, result })
}

/// The JSON-RPC code of a request refusal (invalid params -32602, method
/// not found -32601, invalid request -32600) an `isError` result reports
/// in its text, as the official SDKs write tool errors (`MCP error -32602:
/// Input validation error: ...`): the same call fails again, so it is not
/// retryable.
fn refused_request(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find("error -3260")?;
    let code: String = lower[at + 6..].chars().take_while(|c| *c == '-' || c.is_ascii_digit()).collect();
    code.parse().ok().filter(|c| (-32602..=-32600).contains(c))
}

/// The text blocks of `content`, joined with newlines (`None` if there are
/// none).
fn text_of(content: &[ContentBlock]) -> Option<String> {
    let texts: Vec<&str> = content.iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect();
    if texts.is_empty() { None } else { Some(texts.join("\n")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock as Content;
    use serde_json::json;

    #[test]
    fn structured_content_wins_then_json_text_then_text() {
        let mut r = CallToolResult::success(vec![Content::text("ignored")]);
        r.structured_content = Some(json!({"a": 1}));
        assert_eq!(map_result("s", "t", r).unwrap().value, json!({"a": 1}));
        let r = CallToolResult::success(vec![Content::text("{\"b\": [1, 2]}")]);
        assert_eq!(map_result("s", "t", r).unwrap().value, json!({"b": [1, 2]}));
        let r = CallToolResult::success(vec![Content::text("Echo: hi")]);
        assert_eq!(map_result("s", "t", r).unwrap().value, json!("Echo: hi"));
        let r = CallToolResult::success(vec![Content::text("a"), Content::text("b")]);
        assert_eq!(map_result("s", "t", r).unwrap().value, json!("a\nb"));
        let r = CallToolResult::success(vec![]);
        assert_eq!(map_result("s", "t", r).unwrap().value, Value::Null);
    }

    #[test]
    fn is_error_is_a_tool_error_retryable_unless_it_says_not() {
        let r = CallToolResult::error(vec![Content::text("quota exceeded")]);
        let e = map_result("crm", "send", r).unwrap_err();
        assert_eq!(e.kind, CallErrorKind::ToolError);
        assert!(e.retryable);
        assert!(e.message.contains("crm.send") && e.message.contains("quota exceeded"), "{}", e.message);
        let mut r = CallToolResult::error(vec![Content::text("no such user")]);
        r.structured_content = Some(json!({"retryable": false}));
        assert!(!map_result("crm", "send", r).unwrap_err().retryable);
        // What the SDKs answer for arguments that break the tool's schema,
        // or an unknown tool: the same call fails again.
        for text in [
            "MCP error -32602: Input validation error: Invalid arguments for tool get-sum",
            "MCP error -32601: Tool nope not found",
        ] {
            let r = CallToolResult::error(vec![Content::text(text)]);
            let e = map_result("everything", "get-sum", r).unwrap_err();
            assert!(!e.retryable, "{text}");
        }
        let r = CallToolResult::error(vec![Content::text("MCP error -32603: internal")]);
        assert!(map_result("s", "t", r).unwrap_err().retryable, "an internal error may pass");
        assert_eq!(refused_request("error -32602: x"), Some(-32602));
        assert_eq!(refused_request("error -3260"), None);
    }
}
