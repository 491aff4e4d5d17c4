//! Every saved template as a tool of its own: `wf_<name>`, whose input
//! schema is the template's `input_schema` (or any object), and whose call
//! runs the latest version with the arguments as input and waits for it
//! (up to 5 minutes, with progress). A run that fails is an `isError`
//! result that still carries the run's id, state and error. A run that
//! waits for input asks the client as `run_start` does (`elicit.rs`); under
//! the tasks extension the task turns `input_required` instead.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use rmcp::ErrorData;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CreateTaskResult, JsonObject, Tool, ToolAnnotations};
use rmcp::task_manager::TaskOptions;
use serde_json::Value;
use weft_runtime::usecase::{RunSource, StartRequest};

use crate::Core;
use crate::mcp::elicit;
use crate::mcp::errors::ToolError;
use crate::mcp::reply::MAX_WAIT_MS;
use crate::mcp::reply::Outcome;
use crate::mcp::session::{SourceCall, ToolSource};
use crate::mcp::views::RunStartOut;

/// The prefix of template tools.
pub const PREFIX: &str = "wf_";

/// The tool that runs template `name`: `wf_<name>`, characters a tool
/// name cannot have (outside `A-Za-z0-9_.-`) as `_`.
pub fn tool_name(name: &str) -> String {
    let clean: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "_-.".contains(c) { c } else { '_' }).collect();
    format!("{PREFIX}{clean}")
}

/// The templates' tools, as of the latest listing (tool name → template).
#[derive(Default)]
pub struct TemplateTools {
    latest: RwLock<HashMap<String, (String, Tool)>>,
}

fn tool_for(name: &str, version: u32, definition: &Value) -> Tool {
    let schema = match definition.get("input_schema") {
        Some(Value::Object(o)) if o.get("type").and_then(Value::as_str) == Some("object") => o.clone(),
        _ => serde_json::json!({"type": "object"}).as_object().cloned().unwrap_or_default(),
    };
    let what = definition.get("description").and_then(Value::as_str).unwrap_or("a saved weft workflow");
    let output = Some(rmcp::handler::server::common::schema_for_output::<RunStartOut>());
    let mut tool = Tool::new(
        tool_name(name),
        format!(
            "Run the workflow template `{name}` (v{version}): {what}. The arguments are the run's input; the call waits up to {} s for the run and returns its output, or its id to follow with run_get (a run waiting for input returns its `waits`: answer with run_signal).",
            MAX_WAIT_MS / 1000
        ),
        Arc::new(schema),
    )
    .with_title(format!("workflow {name}"))
    .with_annotations(
        ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(true),
    );
    if let Some(o) = output {
        tool = tool.with_raw_output_schema(o);
    }
    tool
}

#[async_trait]
impl ToolSource for TemplateTools {
    async fn list(&self, core: &Core) -> Vec<Tool> {
        let all = match core.store.list_templates().await {
            Ok(all) => all,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list templates for wf_ tools");
                return vec![];
            }
        };
        let mut latest = HashMap::new();
        let mut tools = vec![];
        for t in &all {
            let tool = tool_for(&t.name, t.version, &t.definition);
            latest.insert(tool.name.to_string(), (t.name.clone(), tool.clone()));
            tools.push(tool);
        }
        *self.latest.write().unwrap_or_else(|p| p.into_inner()) = latest;
        tools
    }

    fn get(&self, name: &str) -> Option<Tool> {
        self.latest.read().unwrap_or_else(|p| p.into_inner()).get(name).map(|(_, t)| t.clone())
    }

    fn owns(&self, name: &str) -> bool {
        name.starts_with(PREFIX)
    }

    async fn call(&self, mut call: SourceCall) -> Result<CallToolResponse, ErrorData> {
        let core = call.server.core.clone();
        let arguments = std::mem::take(&mut call.arguments);
        // The retry of a call that asked for input (2026-07-28): continue
        // that run with the answer.
        if let Some(state) = call.request_state.take() {
            let wait = std::time::Duration::from_millis(MAX_WAIT_MS);
            let responses = call.input_responses.take();
            return reply(core.resume_answering(&state, responses, wait, &call.context).await);
        }
        // A client that declared the tasks extension gets a task that
        // follows the run (however long it takes) instead of a bounded wait.
        if call.context.client_capabilities().is_some_and(|c| c.supports_tasks()) {
            let asks = elicit::can_elicit(&call.context);
            return match start_template(&core, self, &call.name, arguments).await {
                Ok(id) => Ok(CallToolResponse::Task(CreateTaskResult::new(follow_as_task(&core, id, asks)))),
                Err(e) => e.into_call_tool_result(),
            };
        }
        reply(run_template(&core, self, &call.name, arguments, &call).await)
    }
}

/// The tool result of a waiting call: the run (`isError` when it finished
/// other than `completed`), or a question (2026-07-28).
fn reply(r: Result<Outcome, ToolError>) -> Result<CallToolResponse, ErrorData> {
    match r {
        Ok(Outcome::Run(out)) => Ok(out.result().into()),
        Ok(Outcome::Ask(ask)) => Ok(CallToolResponse::InputRequired(ask)),
        Err(e) => e.into_call_tool_result(),
    }
}

/// A task that ends when run `id` ends (or waits for input nobody here can
/// give), with the run's result; `tasks/cancel` cancels the run. With
/// `asks`, a signal wait turns the task `input_required`.
fn follow_as_task(core: &Arc<Core>, id: weft_engine::RunId, asks: bool) -> rmcp::model::Task {
    let core = core.clone();
    let options = TaskOptions::new().with_poll_interval_ms(500);
    core.clone().tasks.spawn(options, move |ctx| Box::pin(elicit::follow_task(core, id, asks, ctx)))
}

/// Validates and starts a run of the template behind tool `tool`.
async fn start_template(
    core: &Arc<Core>,
    tools: &TemplateTools,
    tool: &str,
    arguments: JsonObject,
) -> Result<weft_engine::RunId, ToolError> {
    let saved = template_of(core, tools, tool).await?;
    Ok(core.start_run(StartRequest::new(saved, Value::Object(arguments))).await?.id)
}

async fn run_template(
    core: &Arc<Core>,
    tools: &TemplateTools,
    tool: &str,
    arguments: JsonObject,
    call: &SourceCall,
) -> Result<Outcome, ToolError> {
    let saved = template_of(core, tools, tool).await?;
    core.start_and_wait(StartRequest::new(saved, Value::Object(arguments)), MAX_WAIT_MS, &call.context).await
}

/// The latest version of the template behind tool `tool`.
async fn template_of(core: &Arc<Core>, tools: &TemplateTools, tool: &str) -> Result<RunSource, ToolError> {
    // The tool name maps to a template name; list again if this session
    // has not seen the tool yet (saved by another session).
    let known =
        |t: &TemplateTools| t.latest.read().unwrap_or_else(|p| p.into_inner()).get(tool).map(|(n, _)| n.clone());
    let name = match known(tools) {
        Some(n) => n,
        None => {
            tools.list(core).await;
            match known(tools) {
                Some(n) => n,
                None => {
                    let latest = tools.latest.read().unwrap_or_else(|p| p.into_inner());
                    let mean = weft_model::did_you_mean(tool, latest.keys().map(String::as_str))
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default();
                    return Err(ToolError::new(format!("no tool `{tool}`: no saved template has that name{mean}"))
                        .fix("tools/list or template_list shows the saved templates"));
                }
            }
        }
    };
    let t = core.store.template(&name, None).await.map_err(ToolError::internal)?;
    let t = t.ok_or_else(|| {
        ToolError::new(format!("template `{name}` was deleted")).fix("template_list shows the saved templates")
    })?;
    Ok(RunSource::Saved(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_valid_mcp_names() {
        assert_eq!(tool_name("onboard-user"), "wf_onboard-user");
        assert_eq!(tool_name("a b/c"), "wf_a_b_c");
    }

    #[test]
    fn the_input_schema_is_the_templates_or_any_object() {
        let with = serde_json::json!({"name": "x", "input_schema": {"type": "object", "required": ["a"]}});
        assert_eq!(tool_for("x", 1, &with).input_schema.get("required").unwrap(), &serde_json::json!(["a"]));
        let without = serde_json::json!({"name": "x"});
        assert_eq!(
            Value::Object((*tool_for("x", 2, &without).input_schema).clone()),
            serde_json::json!({"type": "object"})
        );
        assert!(tool_for("x", 2, &without).output_schema.is_some());
    }
}
