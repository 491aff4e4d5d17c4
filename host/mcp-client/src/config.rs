//! What weft knows about one upstream MCP server: how to reach it (a child
//! process over stdio, or streamable HTTP), its default call timeout, and
//! which of its tools workflows may use. Values here are already expanded
//! (`${VAR}` replaced) by whoever read the configuration file; they live
//! in memory only and are never written to the store.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Default per-call timeout of a tool step (docs/workflow-format.md).
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// One `[servers.NAME]` table.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The table's name (`everything` in `[servers.everything]`).
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// Per-call timeout when a step sets none.
    pub timeout: Option<Duration>,
    /// Which tools may be called and are listed.
    pub tools: ToolFilter,
    /// Values never to show (see [`crate::redact`]).
    pub secrets: crate::redact::Secrets,
}

impl std::fmt::Debug for ServerConfig {
    /// Without its secrets (see [`crate::redact`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let transport = self.secrets.redact(&format!("{:?}", self.transport));
        f.debug_struct("ServerConfig")
            .field("name", &self.name)
            .field("transport", &format_args!("{transport}"))
            .field("timeout", &self.timeout)
            .field("tools", &self.tools)
            .finish()
    }
}

/// How an upstream is reached.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// The program (looked up on `PATH`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Added to weft's own environment.
        env: BTreeMap<String, String>,
        /// Working directory (weft's own when `None`).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint, e.g. `http://127.0.0.1:8080/mcp`.
        url: String,
        /// Sent with every request (may hold secrets: never logged).
        headers: BTreeMap<String, String>,
    },
}

impl std::fmt::Debug for Transport {
    /// Environment values and header values may be secrets: only their
    /// names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio { command, args, env, cwd } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            Transport::Http { url, headers } => {
                f.debug_struct("Http").field("url", url).field("headers", &headers.keys().collect::<Vec<_>>()).finish()
            }
        }
    }
}

impl Transport {
    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// `allow_tools` / `deny_tools`: exact names, or a prefix ending in `*`.
/// A tool is usable when it matches the allow list (or there is none) and
/// matches nothing in the deny list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// `None`: every tool.
    pub allow: Option<Vec<String>>,
    /// Never these.
    pub deny: Vec<String>,
}

impl ToolFilter {
    /// Whether `tool` may be listed and called.
    pub fn allows(&self, tool: &str) -> bool {
        let matches = |p: &String| match p.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => p == tool,
        };
        self.allow.as_ref().is_none_or(|a| a.iter().any(matches)) && !self.deny.iter().any(matches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_allow_then_deny_with_prefixes() {
        let all = ToolFilter::default();
        assert!(all.allows("anything"));
        let f = ToolFilter { allow: Some(vec!["get-*".into(), "echo".into()]), deny: vec!["get-env".into()] };
        assert!(f.allows("echo"));
        assert!(f.allows("get-sum"));
        assert!(!f.allows("get-env"), "deny wins over allow");
        assert!(!f.allows("echo2"), "exact names match exactly");
        assert!(!f.allows("trigger-long-running-operation"));
    }

    #[test]
    fn debug_hides_secret_values() {
        let t = Transport::Http {
            url: "http://x/mcp".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer s3cret".into())]),
        };
        let s = format!("{t:?}");
        assert!(s.contains("Authorization") && !s.contains("s3cret"), "{s}");
        let t = Transport::Stdio {
            command: "node".into(),
            args: vec![],
            env: BTreeMap::from([("TOKEN".into(), "s3cret".into())]),
            cwd: None,
        };
        assert!(!format!("{t:?}").contains("s3cret"));
    }
}
