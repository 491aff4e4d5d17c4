//! One MCP session: [`WeftServer`] (what every tool method is called on:
//! the shared core and this session's [`Session`]), and [`ToolSource`],
//! the seam for tools that are not built in (the `wf_<name>` templates,
//! the proxy's `<server>__<tool>`), with the [`SourceCall`] it answers. A
//! leaf of the MCP room: the tools and `server.rs` (the rmcp handler) build
//! on it.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rmcp::model::{CallToolResponse, JsonObject, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio::sync::broadcast;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::{Change, Core};

/// State of one MCP session (one stdio client, one 2025-11-25 HTTP
/// session, or one 2026-07-28 request). Recording mode keeps its
/// recording run here.
pub struct Session {
    /// A number unique within this process.
    pub id: u64,
    /// Fires when the session ends (its last handle is dropped).
    pub closed: CancellationToken,
    /// Changes since the session started, for its first listener (so a
    /// change right after `initialize` or the `subscriptions/listen`
    /// acknowledgment is not missed).
    changes: Mutex<Option<broadcast::Receiver<Change>>>,
    /// The recording in progress (recording mode), if any.
    pub recording: crate::mcp::recording::journal::RecordingSlot,
    /// `resources/subscribe`d runs: each watcher stops when its token fires.
    pub(crate) subscriptions: Mutex<std::collections::HashMap<String, CancellationToken>>,
    _guard: DropGuard,
}

impl Session {
    pub(crate) fn new(id: u64, changes: broadcast::Receiver<Change>) -> Self {
        let closed = CancellationToken::new();
        Session {
            id,
            _guard: closed.clone().drop_guard(),
            closed,
            changes: Mutex::new(Some(changes)),
            recording: Default::default(),
            subscriptions: Mutex::default(),
        }
    }

    /// The changes since the session started (first call), or from now on.
    pub(crate) fn changes(&self, core: &Core) -> broadcast::Receiver<Change> {
        self.changes.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_else(|| core.subscribe())
    }
}

/// One call to a [`ToolSource`]'s tool.
pub struct SourceCall {
    /// The session it belongs to (and, through it, the shared core).
    pub server: WeftServer,
    /// The tool's name, as listed.
    pub name: String,
    /// The arguments (an empty object when none were sent).
    pub arguments: JsonObject,
    /// The request: progress token, peer (notifications), cancellation.
    pub context: RequestContext<RoleServer>,
    /// 2026-07-28 retries: the answers to the questions of an
    /// `input_required` result, and its `requestState` echoed back.
    pub input_responses: Option<rmcp::model::InputResponses>,
    pub request_state: Option<String>,
}

/// Tools offered besides the built-in ones (see the module docs).
#[async_trait]
pub trait ToolSource: Send + Sync + 'static {
    /// Its tools now. Names must not collide with the built-in tools.
    async fn list(&self, core: &Core) -> Vec<Tool>;
    /// A tool by name from its latest listing, without waiting (rmcp checks
    /// HTTP `Mcp-Param-*` headers against it); `None` when unknown.
    fn get(&self, name: &str) -> Option<Tool>;
    /// Whether a call to `name` is this source's to answer.
    fn owns(&self, name: &str) -> bool;
    /// Answers a call: an `isError` result for anything the caller can fix.
    async fn call(&self, call: SourceCall) -> Result<CallToolResponse, ErrorData>;
}

/// The MCP server of one session.
#[derive(Clone)]
pub struct WeftServer {
    /// What every session shares.
    pub core: Arc<Core>,
    /// This session's state.
    pub session: Arc<Session>,
}

impl WeftServer {
    /// A new session over `core`.
    pub fn new(core: Arc<Core>) -> Self {
        let session = Arc::new(Session::new(core.session_id(), core.subscribe()));
        WeftServer { core, session }
    }
}
