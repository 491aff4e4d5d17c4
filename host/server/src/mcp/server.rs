//! The rmcp `ServerHandler` of [`WeftServer`] (one per MCP session,
//! `session.rs`): server info, `tools/list`, `tools/call`,
//! `tools/list_changed` for both protocol generations, resources.
//!
//! `list_tools` offers the built-in tools (the `#[tool_router]`s of
//! `tools/`) followed by the tools of every [`ToolSource`], and `call_tool`
//! dispatches a name no built-in tool has to the first source that
//! [`ToolSource::owns`] it (with a 2026-07-28 retry's `inputResponses` and
//! `requestState`). The `wf_<name>` templates are such a source
//! (`wf_tools.rs`); the proxy (`<server>__<tool>`, `proxy_tools.rs`) is
//! another, passed to [`crate::Core::new`]. Per-session state (recording
//! mode) belongs in [`crate::mcp::Session`], which every call can reach.
//!
//! [`ToolSource`]: crate::mcp::ToolSource
//! [`ToolSource::owns`]: crate::mcp::ToolSource::owns

use std::sync::Arc;

use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    Implementation, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ResultType, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::Change;
use crate::mcp::session::{SourceCall, WeftServer};
use crate::mcp::tool_schemas::{brief, object_schemas, one_line_descriptions};

impl WeftServer {
    /// The built-in tools of every file.
    pub(crate) fn tool_router_all() -> rmcp::handler::server::router::tool::ToolRouter<Self> {
        Self::template_router()
            + Self::runs_router()
            + Self::waits_router()
            + Self::recording_router()
            + Self::compare_router()
            + Self::notification_router()
            + Self::retry_router()
            + Self::schedule_router()
            + Self::value_router()
    }

    /// Answers a `tools/call`: a built-in tool, or an extra source's.
    async fn dispatch_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.core.router().has_route(&request.name) {
            let tcc = ToolCallContext::new(self, request, context);
            return self.core.router().call(tcc).await;
        }
        // Dispatch to the extra tool sources (templates, the proxy).
        if let Some(source) = self.core.sources().iter().find(|s| s.owns(&request.name)) {
            let call = SourceCall {
                server: self.clone(),
                name: request.name.to_string(),
                arguments: request.arguments.unwrap_or_default(),
                context,
                input_responses: request.input_responses,
                request_state: request.request_state,
            };
            return source.call(call).await;
        }
        // A name no one owns: say which one was meant.
        let mut names: Vec<String> = self.core.router().list_all().iter().map(|t| t.name.to_string()).collect();
        for source in self.core.sources() {
            names.extend(source.list(&self.core).await.iter().map(|t| t.name.to_string()));
        }
        let mean = weft_model::did_you_mean(&request.name, names.iter().map(String::as_str))
            .map(|m| format!("{m} "))
            .unwrap_or_default();
        Err(ErrorData::invalid_params(
            format!(
                "no tool `{}` ({mean}tools/list shows the tools; saved templates are `wf_<name>`, upstream tools `<server>__<tool>`)",
                request.name
            ),
            None,
        ))
    }
}

const INSTRUCTIONS: &str = "weft runs durable workflows. Read the resource weft://guide first (or the prompt \
workflow_guide): the definition format in a few screens with complete examples; its JSON Schema is \
weft://schema/definition. A definition is a JSON object with a `name` and `steps`; steps call MCP tools (the proxied \
`<server>__<tool>` tools show each one's input schema) or code plugins (plugin_list), and refer to each other's output \
with refs such as `@step.field` and `@input.field`. Check a definition with workflow_validate (every problem at once, \
tools checked against their servers), save it with template_save (it then appears as the tool wf_<name>), start it \
with run_start (wait_ms returns the output if it finishes in time), and inspect runs with run_get (each step's \
resolved input and output), run_list, run_events and run_compare. Or record one: recording_start, call tools as \
usual, recording_save. A run that waits for input is input-required: run_get shows its waits, run_signal answers \
one, event_emit delivers an event to the waits that match it.";

impl ServerHandler for WeftServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("weft", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS.to_string())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.core.router().list_all();
        // Extra tool sources (templates, then the proxy's upstreams).
        for source in self.core.sources() {
            tools.extend(source.list(&self.core).await);
        }
        for t in &mut tools {
            // weft's own tools show a brief output schema (the full one is a
            // resource); upstream tools' pass as their servers say.
            let own = self.core.router().has_route(&t.name) || t.name.starts_with(crate::mcp::wf_tools::PREFIX);
            let mut input = serde_json::Value::Object(object_schemas((*t.input_schema).clone()));
            if own {
                one_line_descriptions(&mut input);
            }
            if let serde_json::Value::Object(input) = input {
                t.input_schema = Arc::new(input);
            }
            if let Some(o) = &t.output_schema {
                let o = object_schemas((**o).clone());
                t.output_schema = Some(Arc::new(if own { brief(&t.name, &o) } else { o }));
            }
        }
        let hints = context.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        Ok(ListToolsResult {
            result_type: Some(ResultType::COMPLETE),
            tools,
            meta: None,
            next_cursor: None,
            // Templates change at any time: never cache the list.
            ttl_ms: hints.then_some(0),
            cache_scope: hints.then_some(CacheScope::Public),
        })
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.core.router().get(name).cloned().or_else(|| self.core.sources().iter().find_map(|s| s.get(name)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The caller's trace context: the parent of the runs this call starts.
        let traceparent = crate::trace_context::from_meta(&context.meta)
            .or_else(|| request.meta.as_ref().and_then(crate::trace_context::from_meta));
        // The caller's idempotency key: one run per key (docs/mcp.md).
        let key = crate::trace_context::key_from_meta(&context.meta)
            .or_else(|| request.meta.as_ref().and_then(crate::trace_context::key_from_meta));
        crate::trace_context::scope(traceparent, key, self.dispatch_call(request, context)).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        Ok(crate::mcp::guide::prompts())
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        crate::mcp::guide::prompt(&request.name, request.arguments.as_ref()).map(Into::into)
    }

    /// 2025-11-25 sessions: `notifications/tools/list_changed` whenever
    /// templates change, until the session ends.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut changes = self.session.changes(&self.core);
        let closed = self.session.closed.clone();
        let peer = context.peer.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = closed.cancelled() => return,
                    change = changes.recv() => match change {
                        Ok(Change::Templates) | Err(RecvError::Lagged(_)) => {
                            if peer.notify_tool_list_changed().await.is_err() {
                                return;
                            }
                        }
                        Err(RecvError::Closed) => return,
                    },
                }
            }
        });
    }

    /// 2026-07-28 clients ask for change notifications with
    /// `subscriptions/listen`.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.session.changes(&self.core);
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(Change::Templates) | Err(RecvError::Lagged(_)) => {
                        if context.accepted().tools_list_changed == Some(true)
                            && context.sink().notify_tool_list_changed().await.is_err()
                        {
                            return Ok(());
                        }
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        crate::mcp::resources::list(&self.core).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(crate::mcp::resources::templates())
    }

    /// `resources/subscribe` to a run: `notifications/resources/updated`
    /// each time it changes (a new event in its log), until it ends, the
    /// client unsubscribes, or the session ends.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let id = crate::mcp::resources::run_id(&request.uri)?;
        let stop = CancellationToken::new();
        if let Some(old) = self
            .session
            .subscriptions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(request.uri.clone(), stop.clone())
        {
            old.cancel();
        }
        let (core, peer, closed, uri) =
            (self.core.clone(), context.peer.clone(), self.session.closed.clone(), request.uri);
        tokio::spawn(crate::mcp::resources::watch(core, peer, id, uri, stop, closed));
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(t) = self.session.subscriptions.lock().unwrap_or_else(|p| p.into_inner()).remove(&request.uri) {
            t.cancel();
        }
        Ok(())
    }

    /// Tasks (`wf_<name>` calls of clients that declare the extension).
    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.core.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.core.tasks.update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.core.tasks.cancel_task(&request.task_id)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        crate::mcp::resources::read(&self.core, &request.uri).await.map(Into::into)
    }
}
