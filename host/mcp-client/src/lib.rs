//! weft's MCP client side: the upstream servers a workflow's `tool` steps
//! call. [`Upstreams`] holds the configured servers ([`ServerConfig`]) and
//! one shared, lazily opened, self-healing connection to each;
//! [`Upstreams::call`] makes one classified, deadline-bounded, cancellable
//! tool call; [`Upstreams::list_tools`] says what a server offers.
//!
//! The crate knows nothing of the engine: the host's tool runner maps a
//! step attempt to a [`ToolCall`] and a [`CallError`] to the engine's
//! error kinds.

mod call;
mod config;
mod connection;
pub mod content;
mod error;
mod pool;
pub mod redact;

pub use call::{IDEMPOTENCY_META_KEY, ToolCall, ToolOutput, map_result, record_metrics};
pub use config::{DEFAULT_TOOL_TIMEOUT, ServerConfig, ToolFilter, Transport};
pub use connection::{Progress, ProgressFn};
pub use content::{Binary, Kept, keep};
pub use error::{CallError, CallErrorKind};
pub use pool::{ToolInfo, Upstreams};
pub use redact::Secrets;
pub use rmcp::model::ProtocolVersion;
