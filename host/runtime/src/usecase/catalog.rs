//! What a definition can name: the code plugins (bundled into weft and
//! added by the operator, with their schemas) and the tools of the
//! configured MCP servers (those their configuration allows). The MCP tool
//! `plugin_list`, `GET /api/v1/catalog` and the page's template editor
//! read it here, so each lists the same things the same way.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use weft_mcp_client::Upstreams;
use weft_sandbox::registry::Registry;
use weft_sandbox::{Sandbox, SandboxError};

/// A code plugin.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PluginView {
    /// The name a code step uses: `{"code": {"plugin": NAME}}`.
    pub name: String,
    /// `bundled` (in weft) or `added` (installed by the operator).
    pub source: String,
    /// `component` (declares its schemas) or `command` (a WASI command:
    /// input JSON on stdin, output JSON on stdout).
    pub kind: String,
    /// sha256 of its bytes.
    pub digest: String,
    pub version: Option<String>,
    pub description: Option<String>,
    /// JSON Schema of a step's `input`.
    pub input_schema: Option<Value>,
    /// JSON Schema of its output.
    pub output_schema: Option<Value>,
}

/// The tools of one configured MCP server.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ServerView {
    /// The name a tool step uses: `{"tool": {"server": NAME, "name": ...}}`.
    pub name: String,
    /// Its tools that the configuration allows, by name.
    pub tools: Vec<ToolView>,
    /// Why its tools could not be listed (it did not start or answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One tool of an MCP server.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolView {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of its arguments (a step's `input`).
    pub input_schema: Value,
    /// JSON Schema of its structured output, when it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// Every plugin of `registry`, with the schemas its metadata declares.
pub fn plugins(registry: &Registry, sandbox: &Sandbox) -> Result<Vec<PluginView>, SandboxError> {
    let list = registry.list(sandbox)?;
    Ok(list
        .into_iter()
        .map(|p| {
            let source = serde_json::to_value(p.source).ok().and_then(|v| v.as_str().map(String::from));
            let (kind, version, description, input_schema, output_schema) = match p.metadata {
                Some(m) => ("component", Some(m.version), Some(m.description), m.input_schema, m.output_schema),
                None => ("command", None, None, None, None),
            };
            PluginView {
                name: p.name,
                source: source.unwrap_or_default(),
                kind: kind.into(),
                digest: p.digest,
                version,
                description,
                input_schema,
                output_schema,
            }
        })
        .collect())
}

/// Every configured server with the tools it allows (asked live; a server
/// that cannot be reached is listed with its `error`).
pub async fn servers(upstreams: &Upstreams) -> Vec<ServerView> {
    let mut out = vec![];
    for name in upstreams.names() {
        let (tools, error) = match upstreams.list_tools(name).await {
            Ok(tools) => (
                tools
                    .into_iter()
                    .map(|t| ToolView {
                        name: t.name,
                        description: t.description,
                        input_schema: t.input_schema,
                        output_schema: t.output_schema,
                    })
                    .collect(),
                None,
            ),
            Err(e) => (vec![], Some(e.to_string())),
        };
        out.push(ServerView { name: name.to_string(), tools, error });
    }
    out
}
