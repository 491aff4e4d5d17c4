//! Checking a definition's tool steps (and its notifications' tool
//! targets) against the live upstreams: each
//! named tool must exist on its server (and be allowed), and its input
//! schema is fetched so the step's literal input can be checked against it
//! (by the pipeline's one validation: `weft validate`, `weft run`, MCP
//! `workflow_validate` / `template_save` / `run_start`, the HTTP API). An
//! upstream that cannot be reached is only a warning (the run may still
//! work once the server is up), except for `weft validate --online`.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;
use weft_mcp_client::Upstreams;
use weft_model::Problem;

use crate::audience::Audience;

/// What the upstreams said about a document's tool steps.
#[derive(Debug, Default)]
pub struct Online {
    /// Input schemas by (server, tool).
    pub schemas: HashMap<(String, String), Value>,
    /// Output schemas by (server, tool), of the tools that declare one.
    pub output_schemas: HashMap<(String, String), Value>,
    /// Tools that do not exist or are not allowed, at their step's path.
    pub problems: Vec<Problem>,
    /// Servers that could not be reached, with the step path that named
    /// them first and why.
    pub unreachable: Vec<Problem>,
}

/// The (path, server, tool) of every tool a raw document names: its tool
/// steps (`/steps/i/tool`) and its notifications' targets (`/notify/i/tool`).
pub fn tool_steps(doc: &Value) -> Vec<(String, String, String)> {
    let mut out = vec![];
    for field in ["steps", "notify"] {
        let Some(list) = doc.get(field).and_then(Value::as_array) else { continue };
        for (i, s) in list.iter().enumerate() {
            let server = s.pointer("/tool/server").and_then(Value::as_str);
            let name = s.pointer("/tool/name").and_then(Value::as_str);
            if let (Some(server), Some(name)) = (server, name) {
                out.push((format!("/{field}/{i}/tool"), server.to_string(), name.to_string()));
            }
        }
    }
    out
}

/// Asks each configured server named by `doc`'s tool steps for its tools.
/// Servers that are not configured are skipped (the offline check reports
/// them). Hints are written for `audience`.
pub async fn check(upstreams: &Upstreams, doc: &Value, audience: Audience) -> Online {
    let mut out = Online::default();
    let steps = tool_steps(doc);
    let servers: BTreeSet<&str> =
        steps.iter().map(|(_, s, _)| s.as_str()).filter(|s| upstreams.config(s).is_some()).collect();
    let mut listed = HashMap::new();
    for server in servers {
        listed.insert(server.to_string(), upstreams.list_tools(server).await);
    }
    let mut reported = BTreeSet::new();
    for (at, server, tool) in steps {
        let Some(result) = listed.get(&server) else { continue };
        match result {
            Err(e) => {
                if reported.insert(server.clone()) {
                    out.unreachable.push(
                        Problem::new(
                            format!("{at}/server"),
                            format!("cannot reach MCP server `{server}` to check its tools: {e}"),
                        )
                        .hint(audience.reach_server(&server)),
                    );
                }
            }
            Ok(tools) => match tools.iter().find(|t| t.name == tool) {
                Some(t) => {
                    out.schemas.insert((server.clone(), tool.clone()), t.input_schema.clone());
                    if let Some(o) = &t.output_schema {
                        out.output_schemas.insert((server.clone(), tool.clone()), o.clone());
                    }
                }
                None => {
                    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                    let mean = weft_model::did_you_mean(&tool, names.iter().copied())
                        .map(|m| format!("{m} "))
                        .unwrap_or_default();
                    let shown: Vec<&str> = names.iter().take(20).copied().collect();
                    let more = if names.len() > 20 { format!(" and {} more", names.len() - 20) } else { String::new() };
                    out.problems.push(
                        Problem::new(
                            format!("{at}/name"),
                            format!("MCP server `{server}` offers no tool `{tool}` (or weft.toml does not allow it)"),
                        )
                        .hint(format!(
                            "{mean}it offers: {}{more}; {}",
                            shown.join(", "),
                            audience.tools(&server)
                        )),
                    );
                }
            },
        }
    }
    out
}
