//! One live connection to one upstream: spawning the child process (stdio)
//! or opening the HTTP transport, the protocol handshake (rmcp's
//! `ClientLifecycleMode::Auto`: MCP 2026-07-28 where the upstream speaks
//! it, 2025-11-25 otherwise), and the client-side handler that routes
//! progress notifications to the call that asked for them and notices
//! `tools/list_changed`. A stdio child's stderr is drained into the log and
//! its last lines are kept, so a crash can be explained.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken, ProtocolVersion, Tool,
};
use rmcp::service::ClientServiceExt as _;
use rmcp::service::{ClientLifecycleMode, NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient};
use tokio::io::AsyncBufReadExt as _;

use crate::config::{ServerConfig, Transport};
use crate::error::{CallError, CallErrorKind};

/// A progress update from an upstream, for the call that asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Monotonic progress value.
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// A message for a person.
    pub message: Option<String>,
}

/// Where a call's progress goes.
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

const STDERR_TAIL_LINES: usize = 20;

/// How long a closing stdio server gets to exit by itself.
pub const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// The client side of one connection (rmcp's handler).
#[derive(Clone)]
pub(crate) struct Handler {
    progress: Arc<Mutex<HashMap<ProgressToken, ProgressFn>>>,
    tools_changed: Arc<AtomicBool>,
}

impl Handler {
    fn new() -> Self {
        Handler { progress: Arc::default(), tools_changed: Arc::new(AtomicBool::new(false)) }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("weft", env!("CARGO_PKG_VERSION")))
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _cx: NotificationContext<RoleClient>) {
        let sink = self.progress.lock().unwrap_or_else(|p| p.into_inner()).get(&params.progress_token).cloned();
        if let Some(sink) = sink {
            sink(Progress { progress: params.progress, total: params.total, message: params.message });
        }
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

/// A live connection. Dropping it closes the transport (and kills a
/// stdio child that does not exit).
pub(crate) struct Connection {
    pub(crate) service: RunningService<RoleClient, Handler>,
    /// Which connection of this upstream this is (1 for the first).
    pub(crate) generation: u64,
    /// The negotiated MCP revision.
    pub(crate) protocol: Option<ProtocolVersion>,
    /// The tool list, until the upstream says it changed.
    tools: Mutex<Option<Arc<Vec<Tool>>>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

impl Connection {
    /// Routes progress notifications carrying `token` to `sink` until the
    /// returned guard is dropped.
    pub(crate) fn watch_progress(&self, token: ProgressToken, sink: ProgressFn) -> ProgressGuard {
        let map = self.service.service().progress.clone();
        map.lock().unwrap_or_else(|p| p.into_inner()).insert(token.clone(), sink);
        ProgressGuard { map, token }
    }

    /// Whether the transport is gone (process exited, connection closed).
    pub(crate) fn is_dead(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// The last lines the child wrote to stderr, joined (empty for HTTP).
    pub(crate) fn stderr_tail(&self) -> String {
        let t = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// The cached tool list, unless the upstream announced a change.
    pub(crate) fn cached_tools(&self) -> Option<Arc<Vec<Tool>>> {
        if self.service.service().tools_changed.swap(false, Ordering::SeqCst) {
            *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = None;
            return None;
        }
        self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn cache_tools(&self, tools: Arc<Vec<Tool>>) {
        *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = Some(tools);
    }

    /// Closes the transport: a stdio child sees end-of-input and gets
    /// [`CLOSE_GRACE`] to exit; then it is killed (the child is spawned with
    /// `kill_on_drop`, and dropping the connection drops it).
    pub(crate) async fn close(mut self) {
        let _ = self.service.close_with_timeout(CLOSE_GRACE).await;
    }
}

/// Stops routing a call's progress when dropped.
pub(crate) struct ProgressGuard {
    map: Arc<Mutex<HashMap<ProgressToken, ProgressFn>>>,
    token: ProgressToken,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.token);
    }
}

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// Opens a connection to `cfg` and completes the handshake.
pub(crate) async fn connect(cfg: &ServerConfig, generation: u64) -> Result<Connection, CallError> {
    let handler = Handler::new();
    let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
    let name = &cfg.name;
    let service = match &cfg.transport {
        Transport::Stdio { command, args, env, cwd } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env).kill_on_drop(true);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let (proc, stderr) =
                TokioChildProcess::builder(cmd).stderr(std::process::Stdio::piped()).spawn().map_err(|e| {
                    CallError::new(
                        CallErrorKind::Transport,
                        format!(
                            "cannot start MCP server `{name}` (`{command}`): {e}; check `command` in [servers.{name}]"
                        ),
                    )
                })?;
            if let Some(stderr) = stderr {
                drain_stderr(name.clone(), stderr, stderr_tail.clone(), cfg.secrets.clone());
            }
            handler.serve_with_lifecycle(proc, lifecycle()).await.map_err(|e| {
                let said = match summary(&stderr_tail) {
                    s if s.is_empty() => String::new(),
                    s => format!("; its stderr: {s}"),
                };
                CallError::new(
                    CallErrorKind::Transport,
                    format!("MCP server `{name}` did not complete the handshake: {e}{said}"),
                )
            })?
        }
        Transport::Http { url, headers } => {
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(header_map(name, headers)?);
            let transport = StreamableHttpClientTransport::from_config(config);
            handler.serve_with_lifecycle(transport, lifecycle()).await.map_err(|e| {
                CallError::new(CallErrorKind::Transport, format!("cannot connect to MCP server `{name}` at {url}: {e}"))
            })?
        }
    };
    let protocol = service.peer().peer_info().map(|i| i.protocol_version.clone());
    tracing::debug!(server = %name, ?protocol, generation, "connected to MCP server");
    Ok(Connection { service, generation, protocol, tools: Mutex::new(None), stderr_tail })
}

fn header_map(
    server: &str,
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, CallError> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::try_from(k.as_str()).map_err(|e| {
                CallError::new(CallErrorKind::Refused, format!("[servers.{server}] header name `{k}` is invalid: {e}"))
            })?;
            let mut value = http::HeaderValue::try_from(v.as_str()).map_err(|_| {
                CallError::new(CallErrorKind::Refused, format!("[servers.{server}] header `{k}` has an invalid value"))
            })?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

/// The last few non-blank stderr lines, joined by ` | ` (at most ~400
/// characters): enough to say why a server died.
fn summary(tail: &Mutex<VecDeque<String>>) -> String {
    let t = tail.lock().unwrap_or_else(|p| p.into_inner());
    let lines: Vec<&str> = t.iter().map(|l| l.trim()).filter(|l| !l.is_empty()).collect();
    let mut out = lines[lines.len().saturating_sub(4)..].join(" | ");
    let n = out.chars().count();
    if n > 400 {
        out = format!("…{}", out.chars().skip(n - 400).collect::<String>());
    }
    out
}

/// Logs the child's stderr at debug level and keeps its last lines.
fn drain_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
    secrets: crate::redact::Secrets,
) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            // An upstream may print what it was given (its environment).
            let line = secrets.redact(&line);
            tracing::debug!(server = %server, "upstream stderr: {line}");
            let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
            if t.len() == STDERR_TAIL_LINES {
                t.pop_front();
            }
            t.push_back(line.chars().take(500).collect());
        }
    });
}
