//! [`Upstreams`]: the configured MCP servers and at most one live
//! connection to each, shared by every run and every call. A connection is
//! opened on first use (nothing starts for a workflow that calls no tools),
//! and a connection found dead — a crashed child, a closed HTTP session — is
//! replaced on the next call, so an upstream crash costs the calls in
//! flight and nothing more. [`Upstreams::shutdown`] closes every child
//! gracefully.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::ProtocolVersion;
use serde_json::Value;

use crate::config::ServerConfig;
use crate::connection::{Connection, connect};
use crate::error::{CallError, CallErrorKind};

/// A tool an upstream offers (and the configuration allows).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolInfo {
    /// The tool's name on its server.
    pub name: String,
    /// Human-readable title, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its structured output, when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// MCP tool annotations (read-only / destructive / idempotent hints).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

struct Upstream {
    config: ServerConfig,
    slot: tokio::sync::Mutex<Option<Arc<Connection>>>,
    generations: AtomicU64,
}

/// Every configured upstream, each with a lazily opened shared connection.
pub struct Upstreams {
    servers: BTreeMap<String, Upstream>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams").field("servers", &self.servers.keys().collect::<Vec<_>>()).finish()
    }
}

impl Upstreams {
    /// The upstreams of `configs` (none is started yet).
    pub fn new(configs: impl IntoIterator<Item = ServerConfig>) -> Self {
        let servers = configs
            .into_iter()
            .map(|config| {
                let up = Upstream { config, slot: tokio::sync::Mutex::new(None), generations: AtomicU64::new(0) };
                (up.config.name.clone(), up)
            })
            .collect();
        Upstreams { servers }
    }

    /// The configured server names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }

    /// The configuration of `server`.
    pub fn config(&self, server: &str) -> Option<&ServerConfig> {
        self.servers.get(server).map(|u| &u.config)
    }

    pub(crate) fn upstream_config(&self, server: &str) -> Result<&ServerConfig, CallError> {
        self.config(server).ok_or_else(|| {
            let known: Vec<&str> = self.names().collect();
            let hint = if known.is_empty() {
                "no servers are configured; add a [servers.NAME] table to weft.toml".to_string()
            } else {
                format!("configured servers: {}", known.join(", "))
            };
            CallError::new(CallErrorKind::Refused, format!("unknown MCP server `{server}` ({hint})"))
        })
    }

    /// The live connection to `server`, opening (or re-opening) it.
    pub(crate) async fn connection(&self, server: &str) -> Result<Arc<Connection>, CallError> {
        self.upstream_config(server)?;
        let up = &self.servers[server];
        let mut slot = up.slot.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.is_dead() {
                return Ok(c.clone());
            }
            tracing::warn!(server, "the MCP server's connection is closed; restarting it");
        }
        let generation = up.generations.fetch_add(1, Ordering::SeqCst) + 1;
        let conn = Arc::new(connect(&up.config, generation).await?);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Forgets connection `generation` of `server` (it failed), so the next
    /// call opens a new one. A newer connection is left alone.
    pub(crate) async fn discard(&self, server: &str, generation: u64) {
        let Some(up) = self.servers.get(server) else { return };
        let mut slot = up.slot.lock().await;
        if slot.as_ref().is_some_and(|c| c.generation == generation) {
            let old = slot.take();
            drop(slot);
            if let Some(c) = old.and_then(|c| Arc::try_unwrap(c).ok()) {
                c.close().await;
            }
        }
    }

    /// `e` with `server`'s secrets replaced (see [`crate::redact`]): every
    /// error that leaves the crate goes through here.
    pub(crate) fn redacted(&self, server: &str, mut e: CallError) -> CallError {
        if let Some(up) = self.servers.get(server) {
            e.message = up.config.secrets.redact(&e.message);
        }
        e
    }

    /// The negotiated protocol revision of `server`'s connection (opening it).
    pub async fn protocol(&self, server: &str) -> Result<Option<ProtocolVersion>, CallError> {
        Ok(self.connection(server).await.map_err(|e| self.redacted(server, e))?.protocol.clone())
    }

    /// The process-level generation of `server`'s connection: 1 for the
    /// first, 2 after one restart, ... (0 when never connected).
    pub fn generation(&self, server: &str) -> u64 {
        self.servers.get(server).map_or(0, |u| u.generations.load(Ordering::SeqCst))
    }

    /// The tools `server` offers that the configuration allows, sorted by name.
    pub async fn list_tools(&self, server: &str) -> Result<Vec<ToolInfo>, CallError> {
        self.list_tools_inner(server).await.map_err(|e| self.redacted(server, e))
    }

    async fn list_tools_inner(&self, server: &str) -> Result<Vec<ToolInfo>, CallError> {
        let conn = self.connection(server).await?;
        let tools = match conn.cached_tools() {
            Some(t) => t,
            None => {
                let listed = conn.service.peer().list_all_tools().await.map_err(|e| {
                    CallError::new(
                        crate::error::classify_service_error(&e),
                        format!("cannot list the tools of MCP server `{server}`: {e}"),
                    )
                })?;
                let t = Arc::new(listed);
                conn.cache_tools(t.clone());
                t
            }
        };
        let filter = &self.servers[server].config.tools;
        let mut out: Vec<ToolInfo> = tools
            .iter()
            .filter(|t| filter.allows(&t.name))
            .map(|t| ToolInfo {
                name: t.name.to_string(),
                title: t.title.clone(),
                description: t.description.as_ref().map(|d| d.to_string()),
                input_schema: Value::Object((*t.input_schema).clone()),
                output_schema: t.output_schema.as_ref().map(|s| Value::Object((**s).clone())),
                annotations: t.annotations.as_ref().and_then(|a| serde_json::to_value(a).ok()),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// One tool of `server` (`None`: the server does not offer it or the
    /// configuration does not allow it).
    pub async fn tool(&self, server: &str, tool: &str) -> Result<Option<ToolInfo>, CallError> {
        Ok(self.list_tools(server).await?.into_iter().find(|t| t.name == tool))
    }

    /// Closes every open connection (stdio children get end-of-input, then
    /// SIGTERM, then SIGKILL).
    pub async fn shutdown(&self) {
        for (name, up) in &self.servers {
            let conn = up.slot.lock().await.take();
            if let Some(c) = conn {
                match Arc::try_unwrap(c) {
                    Ok(c) => c.close().await,
                    Err(shared) => {
                        tracing::debug!(server = %name, "closing an MCP connection still in use");
                        shared.service.cancellation_token().cancel();
                    }
                }
            }
        }
    }
}
