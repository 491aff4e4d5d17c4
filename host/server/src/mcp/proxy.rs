//! The proxy half of `weft serve`: every tool of every configured upstream
//! offered as `<server>__<tool>` (with its upstream schemas and
//! annotations, after `allow_tools` / `deny_tools`), and calls on those
//! names forwarded to the right upstream with [`Upstreams::call_raw`]
//! (the result as it came, `isError` included; progress and cancellation
//! passed through). An upstream that cannot be reached is left out of the
//! list (and logged) without hiding the others; calling one of its tools is
//! an error saying why.

use weft_mcp_client::{ToolInfo, Upstreams};

/// The separator between server and tool in a proxied tool's name.
pub const SEPARATOR: &str = "__";

/// One upstream tool as the proxy offers it.
#[derive(Debug, Clone)]
pub struct ProxiedTool {
    /// `<server>__<tool>`.
    pub exposed: String,
    /// The configured server.
    pub server: String,
    /// What the upstream said about it.
    pub info: ToolInfo,
}

/// `<server>__<tool>` for a tool.
pub fn exposed_name(server: &str, tool: &str) -> String {
    format!("{server}{SEPARATOR}{tool}")
}

/// `(server, tool)` of an exposed name, when `server` is configured.
pub fn split<'a>(upstreams: &Upstreams, name: &'a str) -> Option<(&'a str, &'a str)> {
    let (server, tool) = name.split_once(SEPARATOR)?;
    upstreams.config(server).map(|_| (server, tool))
}

/// Every upstream's tools, server by server (sorted), each server's tools
/// sorted by name. Unreachable servers are skipped with a warning.
pub async fn list(upstreams: &Upstreams) -> Vec<ProxiedTool> {
    let mut out = vec![];
    let names: Vec<String> = upstreams.names().map(String::from).collect();
    for server in names {
        match upstreams.list_tools(&server).await {
            Ok(tools) => out.extend(tools.into_iter().map(|info| ProxiedTool {
                exposed: exposed_name(&server, &info.name),
                server: server.clone(),
                info,
            })),
            Err(e) => tracing::warn!(server = %server, "the MCP server's tools are not offered: {e}"),
        }
    }
    out
}
