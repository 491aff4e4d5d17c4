//! Why a tool call failed, classified so retry policies can act
//! (docs/reliability.md, promise 5): the upstream could not be reached or went away
//! (`transport`), did not answer in time (`timeout`), answered with
//! `isError` (`tool_error`), or answered something that is not MCP
//! (`protocol`). Refusals that no retry can help (an unknown server, a
//! tool the configuration denies) are `refused`.

/// The class of a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallErrorKind {
    /// Spawn or connect failed, the connection closed, the process died.
    Transport,
    /// No answer within the call's timeout (cancellation was sent upstream).
    Timeout,
    /// The tool ran and reported failure (`isError: true`).
    ToolError,
    /// The upstream answered with something that is not a valid result, or
    /// a JSON-RPC error.
    Protocol,
    /// The caller canceled the call (cancellation was sent upstream).
    Canceled,
    /// The call was refused before anything was sent: an unknown server,
    /// a tool the configuration does not allow, arguments that are not an
    /// object.
    Refused,
}

impl CallErrorKind {
    /// The snake_case name used in errors (`tool_error`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            CallErrorKind::Transport => "transport",
            CallErrorKind::Timeout => "timeout",
            CallErrorKind::ToolError => "tool_error",
            CallErrorKind::Protocol => "protocol",
            CallErrorKind::Canceled => "canceled",
            CallErrorKind::Refused => "refused",
        }
    }
}

/// A failed call: its class, a message for a person, and whether another
/// attempt could succeed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct CallError {
    /// The class.
    pub kind: CallErrorKind,
    /// What happened, naming the server and tool.
    pub message: String,
    /// Whether retrying may help.
    pub retryable: bool,
}

impl CallError {
    /// A failure of `kind` with the default retryability of its class
    /// (transport, timeout, protocol and tool errors may pass — a garbled
    /// answer may come right over a new connection; a refusal or a cancel
    /// will not).
    pub fn new(kind: CallErrorKind, message: impl Into<String>) -> Self {
        let retryable = matches!(
            kind,
            CallErrorKind::Transport | CallErrorKind::Timeout | CallErrorKind::ToolError | CallErrorKind::Protocol
        );
        CallError { kind, message: message.into(), retryable }
    }
}

/// The class of an rmcp service error.
pub(crate) fn classify_service_error(e: &rmcp::ServiceError) -> CallErrorKind {
    match e {
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) => CallErrorKind::Transport,
        rmcp::ServiceError::Timeout { .. } => CallErrorKind::Timeout,
        rmcp::ServiceError::Cancelled { .. } => CallErrorKind::Canceled,
        _ => CallErrorKind::Protocol,
    }
}
