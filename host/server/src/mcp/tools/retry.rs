//! `run_retry`: retry from failure through the use-case layer (see
//! `weft_runtime::usecase::retry`): a new run of an ended run's definition
//! that keeps the outputs of the steps that succeeded and runs the others.

use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use weft_runtime::usecase::retry::{RetryRefused, RetryRequest};

use crate::WeftServer;
use crate::mcp::errors::ToolError;
use crate::mcp::prepare;
use crate::mcp::views::RunStartOut;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunRetryParams {
    pub run_id: String,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

#[tool_router(router = retry_router, vis = "pub(crate)")]
impl WeftServer {
    #[tool(
        description = "Retry ended run `run_id` as a new run: keeps what succeeded, runs the rest (`from`: that step on; new `input`: what it changes). Answers as run_start.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    // Answers as run_start, without an output schema of its own (tools/list
    // stays small: run_start's, weft://schema/tools/run_start, is this one's).
    async fn run_retry(&self, Parameters(p): Parameters<RunRetryParams>) -> Result<CallToolResult, ToolError> {
        let req = RetryRequest { from: p.from, input: p.input };
        let r = self.core.for_mcp.retry(&p.run_id, req).await.map_err(|e| match e {
            RetryRefused::Run(e) => prepare::lookup_refused(e),
            e @ RetryRefused::NotEnded { .. } => ToolError::new(e.to_string())
                .fix(format!("run_cancel {{\"run_id\": \"{}\"}} ends it, or wait for its end", p.run_id.trim())),
            e @ RetryRefused::NoStep { .. } => ToolError::new(e.to_string()).fix("name one of its steps in `from`"),
            e @ RetryRefused::Plan(_) => ToolError::internal(e),
            RetryRefused::Start(e) => ToolError::new(format!("the retry was refused: {e}"))
                .fix("check `input` against the definition's input_schema (run_get shows the run's input)"),
        })?;
        let wait = Duration::from_millis(p.wait_ms.unwrap_or(0).min(crate::mcp::reply::MAX_WAIT_MS));
        let never = tokio_util::sync::CancellationToken::new();
        let rec = self.core.for_mcp.settle_started(r.started, wait, None, &never).await.map_err(ToolError::internal)?;
        let mut out = RunStartOut::of(&rec);
        let list = |v: &[String]| if v.is_empty() { "nothing".to_string() } else { v.join(", ") };
        out.note = format!(
            "a retry of {} (label weft/retry-of): keeps {}; runs {}. {}",
            p.run_id.trim(),
            list(&r.kept),
            list(&r.again),
            out.note
        );
        let value = serde_json::to_value(&out).map_err(ToolError::internal)?;
        let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
        result.structured_content = Some(value);
        Ok(result)
    }
}
