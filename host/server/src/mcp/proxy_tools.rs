//! The proxy as a [`ToolSource`]: every upstream tool as
//! `<server>__<tool>` with its upstream description, schemas and
//! annotations; a call is forwarded to its upstream with the upstream's
//! timeout, the caller's progress token (upstream progress is relayed) and
//! cancellation (the caller's `notifications/cancelled` reaches the
//! upstream). The upstream's result comes back unchanged. In recording
//! mode ([`crate::mcp::tools::recording`]) refs in the arguments are resolved
//! first, and the call is appended to the session's recording; the
//! result's `_meta` then names the step as `dev.weft/step`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, JsonObject, MetaObject, ProgressNotificationParam, ResultType,
    Tool, ToolAnnotations,
};
use serde_json::Value;
use weft_mcp_client::{ProgressFn, ToolCall};

use crate::Core;
use crate::mcp::proxy;
use crate::mcp::session::{SourceCall, ToolSource};

/// The proxied tools of the latest listing, by exposed name.
#[derive(Default)]
pub struct ProxyTools {
    latest: RwLock<HashMap<String, Tool>>,
}

fn to_tool(p: &proxy::ProxiedTool) -> Tool {
    let schema = match &p.info.input_schema {
        Value::Object(o) => o.clone(),
        _ => JsonObject::new(),
    };
    let what = p.info.description.clone().unwrap_or_else(|| format!("tool `{}`", p.info.name));
    let mut tool = Tool::new(p.exposed.clone(), format!("[{} via weft] {what}", p.server), Arc::new(schema));
    if let Some(title) = &p.info.title {
        tool = tool.with_title(title.clone());
    }
    if let Some(Value::Object(o)) = &p.info.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(o.clone()));
    }
    if let Some(a) = p.info.annotations.clone().and_then(|a| serde_json::from_value::<ToolAnnotations>(a).ok()) {
        tool = tool.with_annotations(a);
    }
    tool
}

#[async_trait]
impl ToolSource for ProxyTools {
    async fn list(&self, core: &Core) -> Vec<Tool> {
        let tools: Vec<Tool> = proxy::list(&core.upstreams).await.iter().map(to_tool).collect();
        *self.latest.write().unwrap_or_else(|p| p.into_inner()) =
            tools.iter().map(|t| (t.name.to_string(), t.clone())).collect();
        tools
    }

    fn get(&self, name: &str) -> Option<Tool> {
        self.latest.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    fn owns(&self, name: &str) -> bool {
        name.contains(proxy::SEPARATOR) && !name.starts_with(crate::mcp::wf_tools::PREFIX)
    }

    async fn call(&self, call: SourceCall) -> Result<CallToolResponse, ErrorData> {
        let core = call.server.core.clone();
        let Some((server, tool)) = proxy::split(&core.upstreams, &call.name) else {
            let servers: Vec<&str> = core.upstreams.names().collect();
            let (asked, rest) = call.name.split_once(proxy::SEPARATOR).unwrap_or((call.name.as_str(), ""));
            let mean = match weft_model::closest(asked, servers.iter().copied()) {
                Some(s) => format!("did you mean `{}`? ", proxy::exposed_name(s, rest)),
                None => String::new(),
            };
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool `{}`: {mean}proxied tools are `<server>__<tool>` and the configured servers are: {}",
                    call.name,
                    if servers.is_empty() { "none".to_string() } else { servers.join(", ") }
                ),
                None,
            ));
        };
        let (server, tool) = (server.to_string(), tool.to_string());
        let arguments = Value::Object(call.arguments.clone());
        let progress: Option<ProgressFn> = call.context.meta.get_progress_token().map(|token| {
            let peer = call.context.peer.clone();
            Arc::new(move |p: weft_mcp_client::Progress| {
                let peer = peer.clone();
                let mut param = ProgressNotificationParam::new(token.clone(), p.progress);
                if let Some(t) = p.total {
                    param = param.with_total(t);
                }
                if let Some(m) = p.message {
                    param = param.with_message(m);
                }
                tokio::spawn(async move {
                    let _ = peer.notify_progress(param).await;
                });
            }) as ProgressFn
        });
        let ct = call.context.ct.clone();
        // The caller's trace context goes on upstream (a proxied call is one hop).
        let traceparent = call.context.meta.get_traceparent().map(str::to_string);
        let recording = call.server.session.recording.clone();
        let mut active = recording.lock().await;
        // A recording discarded or saved elsewhere: said, and not called.
        if let Err(e) = crate::mcp::recording::journal::ensure_open(&core, &mut active).await {
            return Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into());
        }
        let Some(rec) = active.as_mut() else {
            drop(active);
            let c = ToolCall { server, tool, arguments, idempotency_key: None, timeout: None, progress, traceparent };
            return Ok(forwarded(core.upstreams.call_raw(c, ct.cancelled()).await).into());
        };
        // Recording: refuse another language's placeholders, resolve refs,
        // forward, record what succeeded.
        let lookalikes = rec.recording.lookalikes(&arguments);
        if !lookalikes.is_empty() {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "not sent, not recorded: the arguments hold another template language's placeholders, which weft would send as text and the save would refuse:\n- {}\nWrite weft refs (`@get_sum_1`, `@input.name`) and call again.",
                lookalikes.join("\n- ")
            ))])
            .into());
        }
        let resolved = match rec.recording.resolve(&arguments) {
            Ok(v) => v,
            Err(why) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "the arguments hold a ref that cannot be resolved: {why}. Refs name recorded steps (`@echo_1.field`) or the recording's input (`@input.key`); write `@@` for a literal `@`."
                ))])
                .into());
            }
        };
        let step = rec.recording.next_name(&tool);
        let sent = resolved.clone();
        let c = ToolCall {
            server: server.clone(),
            tool: tool.clone(),
            arguments: resolved,
            idempotency_key: Some(format!("{}/{step}/1", rec.id)),
            timeout: None,
            progress,
            traceparent,
        };
        let started = weft_engine::clock::system_now_ms();
        let outcome = core.upstreams.call_raw(c, ct.cancelled()).await;
        let mut result = forwarded(outcome);
        if result.is_error != Some(true) {
            // What `@step` resolves to: the result kept whole (images and
            // audio named as the step's artifacts, as a replay stores them).
            let value = weft_mcp_client::keep(&result, &format!("{step}-")).value;
            // What its server says of the tool: a read-only one may move
            // past other calls in the template, a write keeps its place.
            let read_only =
                self.get(&call.name).and_then(|t| t.annotations).and_then(|a| a.read_only_hint) == Some(true);
            let recorded = crate::mcp::recording::RecordedStep {
                name: step.clone(),
                tool: Some((server, tool)),
                code: None,
                arguments,
                input: sent,
                output: value,
                read_only,
            };
            let kept = rec.record(&core, recorded, started).await;
            let mut meta: MetaObject = result.meta.take().unwrap_or_default();
            if let Err(e) = &kept {
                // The call happened; the recording could not keep it.
                meta.0.insert("dev.weft/warning".into(), Value::String(e.to_string()));
                result.content.push(ContentBlock::text(format!("[weft] the call was made but not recorded: {e}")));
            }
            meta.0.insert("dev.weft/step".into(), Value::String(step.clone()));
            // Beside what the agent sees, what `@step` will be in the
            // template, unless it is that text.
            if let Some(shown) = output_shown(&recorded_output(&rec.recording, &step)) {
                meta.0.insert("dev.weft/output".into(), shown);
            }
            result.meta = Some(meta);
        }
        Ok(result.into())
    }
}

/// The output recorded for `step`.
fn recorded_output(recording: &crate::mcp::recording::Recording, step: &str) -> Value {
    recording.steps.iter().rev().find(|s| s.name == step).map(|s| s.output.clone()).unwrap_or(Value::Null)
}

/// What a recorded call's `_meta` shows as `dev.weft/output`: the value
/// `@step` resolves to, when it is not plain text (a string is what the
/// agent read); one over 16 KB is described, not repeated.
fn output_shown(value: &Value) -> Option<Value> {
    if value.is_string() {
        return None;
    }
    let text = value.to_string();
    Some(if text.len() <= 16 * 1024 {
        value.clone()
    } else {
        Value::String(format!("{} bytes of JSON: run_value reads it once the recording is saved", text.len()))
    })
}

/// The upstream's result, or an `isError` result saying why the call
/// failed (classified: transport, timeout, protocol, ...).
fn forwarded(outcome: Result<CallToolResult, weft_mcp_client::CallError>) -> CallToolResult {
    match outcome {
        // An upstream on 2025-11-25 sends no `resultType`; a 2026-07-28
        // caller needs it (rmcp drops it again for 2025 callers).
        Ok(mut r) => {
            r.result_type.get_or_insert(ResultType::COMPLETE);
            r
        }
        Err(e) => {
            let again = if e.retryable { " (calling again may work)" } else { "" };
            CallToolResult::error(vec![ContentBlock::text(format!("{}: {}{again}", e.kind.as_str(), e.message))])
        }
    }
}
