//! How weft runs whoever asks: the CLI, the MCP server and the HTTP API
//! are thin adapters over this crate, and over its [`usecase`] layer in
//! particular.
//!
//! | module | owns |
//! |---|---|
//! | [`config`] | `weft.toml`, `$WEFT_*` and flags resolved into [`config::Settings`] |
//! | [`servers`] | the `[servers.*]` tables: upstream MCP servers of tool steps |
//! | [`webhooks`] | the `[webhooks.*]` and `[notifications]` tables: where notifications may go |
//! | [`notify`] | sending the outbox's notifications: signed webhooks, MCP tool calls, A2A push notifications |
//! | [`a2a`] | the `[a2a]` table (which push URLs clients may register) and the A2A push notification's body |
//! | [`guests`] | finding a guest (plugin name, file, digest), the process's one sandbox, the registry |
//! | [`lookup`] | validating a definition against the installed plugins and configured servers |
//! | [`online`] | asking the upstreams of tool steps for their tools before a run |
//! | [`pipeline`] | THE prepare-a-run pipeline: read → validate once (plugins, servers, live tools, child templates) → check input → pin |
//! | [`audience`] | whom hints are written for: the CLI, an MCP client, an HTTP client |
//! | [`usecase`] | THE use-case layer: start (and wait), signal, emit, cancel, as typed requests and refusals every front end calls |
//! | [`app`] | an open store, its scheduler lock, and an engine over it |
//! | [`owner`] | the one loop of a store's owner: inbox, runs created elsewhere, cancels |
//! | [`runner`], [`tool_runner`], [`agent_runner`] | the engine's `StepRunner`s: code (sandbox), tools (MCP), remote A2A agents |
//! | [`logging`] | log lines to stderr with secrets redacted |
//! | [`telemetry`] | logs (text, JSON), OpenTelemetry traces over OTLP, the Prometheus recorder |
//! | [`error`] | [`RuntimeError`]: the user's to fix, or not |
//!
//! The way a run travels: a front end calls `pipeline::Pipeline::prepare` (which
//! validates the definition once, against the sandbox of this process) and
//! then [`app::App::engine`]'s `submit` or `create_run`; the process that
//! owns the store drives it ([`owner::own_store`]).

/// The allocator of everything that links weft (the binary, its benches
/// and tests): with many runs in flight the engine allocates from both
/// async workers at once, and glibc's malloc then spends about a fifth of
/// the time in its own locks and free lists (W3 throughput +12% measured).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod a2a;
pub mod agent_runner;
pub mod app;
pub mod audience;
pub mod config;
pub mod error;
pub mod guests;
pub mod logging;
pub mod lookup;
pub mod notify;
pub mod online;
pub mod owner;
pub mod pipeline;
pub mod process;
pub mod retention;
pub mod runner;
pub mod servers;
pub mod telemetry;
pub mod tool_runner;
pub mod usecase;
pub mod webhooks;

pub use error::RuntimeError;
