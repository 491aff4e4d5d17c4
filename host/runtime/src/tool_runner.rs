//! Tool steps and the runner the engine sees. [`ToolRunner`] makes an
//! attempt's MCP call through the shared [`Upstreams`] (the resolved input
//! as arguments, the attempt's idempotency key in `_meta`, the attempt's
//! deadline as the call's timeout, progress into the run's event log) and
//! maps its classified failure onto the engine's error kinds. The result
//! is kept whole (`weft_mcp_client::content`): images, audio and blobs as
//! the step's artifacts.
//! [`Runners`] is the one [`StepRunner`] handed to the engine: code steps
//! go to the [`CodeRunner`], tool steps to the [`ToolRunner`], and a tool
//! step's `transform` runs the named guest on the tool's output before it
//! is stored.

use std::sync::Arc;
use std::time::Duration;
use weft_engine::clock::system_now_ms as now_ms;

use serde_json::{Value, json};
use tracing::Instrument as _;
use weft_engine::{CancelToken, ErrorKind, StepError, StepFailure, StepOutput, StepRequest, StepRunner};
use weft_mcp_client::{CallError, CallErrorKind, ToolCall, Upstreams};
use weft_model::{Action, ToolRef};

use crate::runner::CodeRunner;

/// Makes tool steps' MCP calls.
#[derive(Debug, Clone)]
pub struct ToolRunner {
    upstreams: Arc<Upstreams>,
}

impl ToolRunner {
    /// A runner over `upstreams` (shared with anything else that calls them).
    pub fn new(upstreams: Arc<Upstreams>) -> Self {
        ToolRunner { upstreams }
    }

    /// The upstreams.
    pub fn upstreams(&self) -> &Arc<Upstreams> {
        &self.upstreams
    }

    /// One attempt of a tool step: the mapped output value.
    pub async fn call(&self, tool: &ToolRef, req: &StepRequest, cancel: &CancelToken) -> Result<Value, StepError> {
        let timeout = match req.deadline_ms {
            Some(d) => {
                let left = d - now_ms();
                if left <= 0 {
                    return Err(StepError::timeout("the attempt's deadline passed before the tool was called"));
                }
                Some(Duration::from_millis(left as u64))
            }
            None => None,
        };
        let events = req.events.clone();
        let span = crate::telemetry::tool_span(req, &tool.server, &tool.name);
        let traceparent = span.in_scope(|| crate::telemetry::traceparent_here(req.trace.as_deref()));
        let call = ToolCall {
            server: tool.server.clone(),
            tool: tool.name.clone(),
            arguments: req.input.clone(),
            idempotency_key: Some(req.idempotency_key.clone()),
            timeout,
            progress: Some(Arc::new(move |p| {
                events.progress(json!({"progress": p.progress, "total": p.total, "message": p.message}));
            })),
            traceparent,
        };
        let call = self.upstreams.call(call, cancel.canceled());
        let out = call.instrument(span).await.map_err(to_step_error)?;
        // Every content block is kept: binary ones as the step's artifacts
        // (named after the step, and the item of a for_each step).
        let prefix = match req.item {
            Some(i) => format!("{}-{}-", req.step, i.0),
            None => format!("{}-", req.step),
        };
        let kept = weft_mcp_client::keep(&out.result, &prefix);
        for b in kept.binaries {
            req.events.artifact(b.name, b.mime, b.data);
        }
        for note in kept.notes {
            req.events.log(note);
        }
        Ok(kept.value)
    }
}

/// The engine's view of a classified call failure.
pub fn to_step_error(e: CallError) -> StepError {
    let kind = match e.kind {
        CallErrorKind::Transport => ErrorKind::Transport,
        CallErrorKind::Timeout => ErrorKind::Timeout,
        CallErrorKind::ToolError => ErrorKind::ToolError,
        CallErrorKind::Protocol => ErrorKind::Protocol,
        CallErrorKind::Canceled => ErrorKind::Canceled,
        CallErrorKind::Refused => ErrorKind::Validation,
    };
    StepError::new(kind, e.message, e.retryable)
}

/// Code steps to the sandbox, tool steps to their MCP servers.
#[derive(Clone)]
pub struct Runners {
    code: CodeRunner,
    tools: ToolRunner,
    /// Agent steps' remote A2A agents (none until [`Runners::with_agents`]).
    agents: std::sync::Arc<crate::agent_runner::AgentRunner>,
    /// `[limits] code_timeout_ms` / `tool_timeout_ms` of weft.toml.
    code_timeout_ms: Option<u64>,
    tool_timeout_ms: Option<u64>,
}

impl Runners {
    /// Both runners.
    pub fn new(code: CodeRunner, tools: ToolRunner) -> Self {
        Runners {
            code,
            tools,
            agents: std::sync::Arc::new(crate::agent_runner::AgentRunner::new(&[])),
            code_timeout_ms: None,
            tool_timeout_ms: None,
        }
    }

    /// The remote A2A agents agent steps may call (`[agents.*]`).
    pub fn with_agents(mut self, agents: crate::agent_runner::AgentRunner) -> Self {
        self.agents = std::sync::Arc::new(agents);
        self
    }

    /// Per-attempt timeouts of steps that set none (`[limits]` of
    /// weft.toml); a server's own `timeout_ms` wins for its tools.
    pub fn with_default_timeouts(mut self, code_ms: Option<u64>, tool_ms: Option<u64>) -> Self {
        self.code_timeout_ms = code_ms;
        self.tool_timeout_ms = tool_ms;
        self
    }

    /// The tool runner (and through it the upstreams).
    pub fn tools(&self) -> &ToolRunner {
        &self.tools
    }
}

#[async_trait::async_trait]
impl StepRunner for Runners {
    fn default_timeout_ms(&self, action: &Action) -> Option<u64> {
        match action {
            Action::Tool(t) => self
                .tools
                .upstreams
                .config(&t.server)
                .and_then(|c| c.timeout)
                .map(|d| d.as_millis() as u64)
                .or(self.tool_timeout_ms),
            Action::Code(_) => self.code_timeout_ms,
            _ => None,
        }
    }

    fn finishes_in_place(&self, action: &Action) -> bool {
        matches!(action, Action::Code(_)) && self.code.finishes_in_place(action)
    }

    async fn abandon(&self, action: &Action, resume: &serde_json::Value) {
        if let Action::Agent(a) = action {
            self.agents.abandon(a, resume).await;
        }
    }

    async fn run(&self, req: StepRequest, cancel: CancelToken) -> Result<StepOutput, StepFailure> {
        let span = crate::telemetry::attempt_span(&req);
        let measured = weft_engine::trace::metrics_on()
            .then(|| (std::time::Instant::now(), crate::telemetry::step_kind(&req.action)));
        if span.is_disabled() && measured.is_none() {
            return self.attempt(req, cancel).await;
        }
        let r = self.attempt(req, cancel).instrument(span.clone()).await;
        let (outcome, error) = match &r {
            Ok(StepOutput::Done(_)) => ("succeeded", None),
            Ok(StepOutput::Reject(_)) => ("rejected", None),
            Ok(StepOutput::Ask(_)) => ("asked", None),
            Err(e) => (e.kind.as_str(), Some(e.message.as_str())),
        };
        crate::telemetry::attempt_ended(&span, outcome, error);
        if let Some((started, kind)) = measured {
            metrics::counter!("weft_step_attempts_total", "kind" => kind, "outcome" => outcome).increment(1);
            metrics::histogram!("weft_step_duration_seconds", "kind" => kind).record(started.elapsed().as_secs_f64());
        }
        r
    }
}

impl Runners {
    /// One attempt: a tool call (and its transform) or a guest.
    async fn attempt(&self, req: StepRequest, cancel: CancelToken) -> Result<StepOutput, StepFailure> {
        let tool = match &req.action {
            Action::Tool(t) => t.clone(),
            Action::Agent(a) => {
                let a = a.clone();
                return self.agents.call(&a, &req, &cancel).await;
            }
            _ => return self.code.run(req, cancel).await,
        };
        let value = self.tools.call(&tool, &req, &cancel).await?;
        let Some(transform) = req.transform.clone() else { return Ok(StepOutput::Done(value)) };
        let mut t = req;
        t.action = Action::Code(transform);
        t.input = value;
        t.limits = None;
        self.code.run(t, cancel).await.map_err(|mut e| {
            e.message = format!("the step's transform failed: {}", e.message);
            e
        })
    }
}
