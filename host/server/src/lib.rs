//! What `weft serve` offers: weft as an MCP server (and proxy) over stdio
//! or streamable HTTP, the HTTP JSON API and the web view. Every front end
//! is a thin adapter over `weft-runtime`'s use-case layer
//! (`weft_runtime::usecase`: start and wait, signal, emit, cancel, with
//! typed refusals each front end phrases in its reader's terms) and its
//! one prepare-a-run pipeline; runs are executed by the engine of the
//! store this process owns.
//!
//! The process owns the store's scheduler like `weft worker` does (the
//! lock, recovery of unfinished runs, runs created by other processes:
//! `weft_runtime::owner`).
//!
//! | where | owns |
//! |---|---|
//! | `lib.rs` | [`Core`] (what every session and request shares: the store, the engine, the use cases per reader), owning the store, serving stdio |
//! | `mcp/` | everything an MCP client meets: sessions, tools by theme, the proxy, recording, elicitation, resources, the guide (see its module table) |
//! | `a2a/` | the A2A endpoint: every template an agent, every run a task (docs/a2a.md) |
//! | `api/` | the HTTP JSON API at `/api/v1` (docs/api.md) and its OpenAPI document |
//! | `web/` | the web view at `/`: one embedded page over the API and its event streams |
//! | `http.rs` | streamable HTTP with axum (MCP at `/mcp`, the API, the page), the bearer token check |
//! | `conns.rs` | who holds the HTTP connections: the oldest idle makes room at the cap, event streams capped |
//! | `guard.rs` | the CSRF and DNS-rebinding guard in front of every HTTP route (Host, Origin, JSON mutations) |
//! | `metrics_http.rs` | `GET /metrics` (Prometheus), and the listener of `weft worker --metrics ADDR` |
//! | `trace_context.rs` | the W3C trace context of an MCP call's `_meta` or an HTTP `traceparent`, for the runs it starts |
//!
//! Sessions: over stdio the one client is one session; over HTTP each
//! 2025-11-25 client session gets its own [`WeftServer`] (and [`Session`]);
//! 2026-07-28 clients have no sessions, so each request gets a fresh one.

mod a2a;
pub mod api;
mod conns;
mod guard;
mod http;
pub mod mcp;
mod metrics_http;
pub mod schedule_view;
mod trace_context;
mod web;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::handler::server::router::tool::ToolRouter;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use weft_engine::Engine;
use weft_sandbox::Sandbox;

pub use http::{HttpOptions, is_loopback_only, serve_http};
pub use mcp::proxy_tools::ProxyTools;
pub use mcp::views::{RunStartOut, RunView, WaitView};
pub use mcp::{ProblemOut, ServeError, Session, SourceCall, ToolError, ToolSource, WeftServer};
pub use metrics_http::serve_metrics;

use weft_runtime::audience::Audience;
use weft_runtime::config::Settings;
use weft_runtime::owner::{self, Owning};
use weft_runtime::pipeline::Pipeline;
use weft_runtime::usecase::UseCases;

/// Something every session should hear about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A template was saved or deleted: the `wf_<name>` tools changed.
    Templates,
}

/// What every session shares: the store, the engine that executes runs,
/// the sandbox that validates definitions, and the tool sources.
pub struct Core {
    /// The configuration.
    pub settings: Settings,
    /// Open recordings a session of this process holds (one session each).
    pub(crate) held_recordings: std::sync::Mutex<std::collections::HashSet<weft_engine::RunId>>,
    /// The store (this process owns its scheduler).
    pub store: Arc<dyn weft_engine::Store>,
    /// The engine executing this store's runs.
    pub engine: Engine,
    /// The sandbox (shared with the engine's code runner).
    pub sandbox: Arc<Sandbox>,
    /// The upstream MCP servers of tool steps (shared with the engine's
    /// tool runner).
    pub upstreams: Arc<weft_mcp_client::Upstreams>,
    /// Where relative `path`s of code steps in inline definitions are
    /// resolved: the working directory of `weft serve`.
    pub base_dir: PathBuf,
    /// The use cases (start, wait, signal, emit, cancel) with refusals
    /// whose hints are written for MCP clients.
    pub for_mcp: UseCases,
    /// The same, the hints written for HTTP API clients.
    pub for_http: UseCases,
    /// Runs a plugin outside any run (`step_code` while recording).
    pub code: weft_runtime::runner::CodeRunner,
    changes: broadcast::Sender<Change>,
    router: ToolRouter<WeftServer>,
    sources: Vec<Arc<dyn ToolSource>>,
    next_session: AtomicU64,
    /// MCP tasks (the `io.modelcontextprotocol/tasks` extension): a
    /// `wf_<name>` call from a client that declares tasks is a task that
    /// follows its run.
    pub tasks: rmcp::task_manager::TaskManager,
}

impl Core {
    /// A core over an owned store. `extra` tool sources (the proxy's
    /// upstream tools, ...) are offered after the built-in tools and the
    /// `wf_<name>` templates.
    pub fn new(
        settings: Settings,
        store: Arc<dyn weft_engine::Store>,
        engine: Engine,
        sandbox: Arc<Sandbox>,
        upstreams: Arc<weft_mcp_client::Upstreams>,
        extra: Vec<Arc<dyn ToolSource>>,
    ) -> Arc<Core> {
        let (changes, _) = broadcast::channel(64);
        let base_dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
        let pipeline =
            Pipeline::new(&settings, sandbox.clone(), upstreams.clone(), Some(store.clone()), base_dir.clone())
                .for_audience(Audience::Mcp);
        let for_http = UseCases::new(engine.clone(), store.clone(), pipeline.clone().for_audience(Audience::Http));
        let for_mcp = UseCases::new(engine.clone(), store.clone(), pipeline);
        let code = weft_runtime::runner::CodeRunner::new(
            sandbox.clone(),
            weft_runtime::guests::registry(&settings),
            settings.code_limits(),
            base_dir.clone(),
        );
        let mut sources: Vec<Arc<dyn ToolSource>> = vec![Arc::new(mcp::wf_tools::TemplateTools::default())];
        sources.extend(extra);
        Arc::new(Core {
            settings,
            held_recordings: Default::default(),
            store,
            engine,
            sandbox,
            upstreams,
            base_dir,
            for_mcp,
            for_http,
            code,
            changes,
            router: WeftServer::tool_router_all(),
            sources,
            next_session: AtomicU64::new(1),
            tasks: rmcp::task_manager::TaskManager::new(),
        })
    }

    /// Tells every session that something changed.
    pub fn changed(&self, change: Change) {
        // No receiver (no session listening) is fine.
        let _ = self.changes.send(change);
    }

    /// Hears about changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// The tool sources besides the built-in tools.
    pub fn sources(&self) -> &[Arc<dyn ToolSource>] {
        &self.sources
    }

    /// The built-in tools.
    pub fn router(&self) -> &ToolRouter<WeftServer> {
        &self.router
    }

    /// The cap of one MCP message (over stdio a line, over HTTP a body):
    /// an input and a definition at their caps, and room for the rest.
    /// Past it a message is answered with an error naming the cap.
    pub fn message_cap(&self) -> usize {
        let caps = self.settings.size_limits();
        caps.max_input_bytes + caps.max_definition_bytes + (256 << 10)
    }

    fn session_id(&self) -> u64 {
        self.next_session.fetch_add(1, Ordering::Relaxed)
    }

    /// Resumes the store's unfinished runs (recovery: what the previous
    /// owner left running is retried per policy); returns their ids.
    pub async fn recover(&self) -> Result<Vec<weft_engine::RunId>, ServeError> {
        mcp::recording::journal::recover_journals(self).await;
        let recovered = self.engine.recover().await?;
        if !recovered.is_empty() {
            eprintln!("weft serve: resuming {} unfinished run(s)", recovered.len());
        }
        Ok(recovered)
    }

    /// Executes the runs other processes create, and hands the signals and
    /// events they leave in the store's inbox (`weft signal`, `weft emit`)
    /// to the runs, until `stop`; `recovered` are the runs
    /// [`Core::recover`] already drives. A store error is logged and the
    /// store read again a second later: the server keeps serving.
    pub async fn own_store(
        self: Arc<Self>,
        recovered: Vec<weft_engine::RunId>,
        stop: CancellationToken,
        mut tenure: owner::Tenure,
    ) -> owner::Tenure {
        let retention = weft_runtime::app::retention(&self.settings);
        let how = Owning { until_idle: false, outlive_errors: true, retention };
        let _ = owner::own_store(&self.engine, self.store.as_ref(), recovered, how, &stop, &mut tenure).await;
        tenure
    }
}

/// Serves one MCP client over stdin/stdout until it disconnects or `stop`.
pub async fn serve_stdio(core: Arc<Core>, stop: CancellationToken) -> Result<(), ServeError> {
    use rmcp::ServiceExt as _;
    let cap = core.message_cap();
    let (transport, pump) = mcp::stdio::capped(tokio::io::stdin(), tokio::io::stdout(), cap);
    let pump = tokio::spawn(pump);
    let server = WeftServer::new(core);
    let running = server
        .serve_with_ct(transport, stop.child_token())
        .await
        .map_err(|e| ServeError::Session(format!("the MCP client did not start a session: {e}")))?;
    running.waiting().await.map_err(|e| ServeError::Session(format!("the MCP session ended badly: {e}")))?;
    // rmcp's last answers are written before the process goes on.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), pump).await;
    Ok(())
}
