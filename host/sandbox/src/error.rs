//! Errors of the sandbox, split the way callers need them: a guest failing
//! its invocation ([`GuestError`], an ordinary step outcome the engine
//! records and may retry) versus the host being unable to load or prepare a
//! guest at all ([`LoadError`], bad input that no retry can fix) versus the
//! host's own environment failing ([`HostError`]).

use std::fmt;

/// Why an invocation failed. Serialized in snake_case at the JSON edge
/// (`"fuel_exhausted"`, ...), the kinds of docs/guests.md ("Limits and errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GuestErrorKind {
    /// The guest returned its own `step-error`, or a command guest exited
    /// with a non-zero code.
    GuestError,
    /// The guest trapped: `unreachable`, a Rust panic, stack overflow, an
    /// out-of-bounds access, ...
    Trap,
    /// The attempt's wall-clock deadline passed (epoch interruption).
    Timeout,
    /// The invocation was canceled from outside (the run was canceled).
    Canceled,
    /// The guest ran out of fuel (its CPU budget).
    FuelExhausted,
    /// The guest tried to grow its memory past the limit.
    MemoryLimit,
    /// The guest's result (or stdout) exceeded the output cap.
    OutputTooLarge,
    /// The guest's result is not valid JSON.
    InvalidOutput,
}

impl GuestErrorKind {
    /// The name used in JSON and on the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            GuestErrorKind::GuestError => "guest_error",
            GuestErrorKind::Trap => "trap",
            GuestErrorKind::Timeout => "timeout",
            GuestErrorKind::Canceled => "canceled",
            GuestErrorKind::FuelExhausted => "fuel_exhausted",
            GuestErrorKind::MemoryLimit => "memory_limit",
            GuestErrorKind::OutputTooLarge => "output_too_large",
            GuestErrorKind::InvalidOutput => "invalid_output",
        }
    }

    /// Whether trying again can help, by default. A timeout may pass on a
    /// quieter machine; running out of fuel or memory will happen again.
    pub fn default_retryable(self) -> bool {
        matches!(self, GuestErrorKind::Timeout)
    }
}

impl fmt::Display for GuestErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed invocation: the step fails, the host carries on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct GuestError {
    /// What kind of failure.
    pub kind: GuestErrorKind,
    /// For a person: the guest's own message, the trap, the limit that was hit.
    pub message: String,
    /// Whether a retry can help.
    pub retryable: bool,
    /// The guest's own error code (`step-error.code`), for `guest_error`.
    pub code: Option<String>,
}

impl GuestError {
    /// An error of `kind` with its default retryability.
    pub fn new(kind: GuestErrorKind, message: impl Into<String>) -> Self {
        GuestError { kind, message: message.into(), retryable: kind.default_retryable(), code: None }
    }
}

/// A guest that cannot be loaded: malformed bytes, the wrong world, a module
/// that is not a WASI command. Bad input; retrying changes nothing.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly module or component: {0}")]
    NotWasm(String),
    /// WebAssembly that wasmtime refuses (invalid, unsupported proposal, ...).
    #[error("invalid WebAssembly: {0}")]
    Invalid(String),
    /// A component that does not target the `weft:step/step` world.
    #[error(
        "this component does not target the weft:step/step world: {0}. \
         Build it against wit/step.wit (world `step`), e.g. with the weft-guest SDK"
    )]
    WrongWorld(String),
    /// A core module that is not a WASI preview-1 command.
    #[error(
        "this core module is not a WASI command: {0}. A core-module guest must export \
         `_start` and import only wasi_snapshot_preview1"
    )]
    NotCommand(String),
    /// `describe` failed.
    #[error("the guest's describe() failed: {0}")]
    Describe(String),
}

/// The host itself failed (disk, cache directory, thread start). Often
/// transient: retrying can help.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Reading or writing the data or cache directory failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path involved.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// wasmtime could not be configured.
    #[error("wasmtime engine configuration failed: {0}")]
    Engine(String),
}

/// Anything that can go wrong when resolving and loading a guest.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The guest is bad input.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The host failed.
    #[error(transparent)]
    Host(#[from] HostError),
    /// A plugin name that is not allowed.
    #[error(transparent)]
    BadName(#[from] BadName),
    /// No such plugin is registered or bundled.
    #[error("unknown plugin `{name}`{hint}")]
    UnknownPlugin {
        /// The name asked for.
        name: String,
        /// A suggestion (known names), starting with a separator.
        hint: String,
    },
}

/// A plugin name that does not fit `[a-z0-9][a-z0-9_-]*` (64 chars at most).
#[derive(Debug, thiserror::Error)]
#[error(
    "`{0}` is not a valid plugin name: use lower-case letters, digits, `-` and `_`, starting with a letter or digit (64 characters at most)"
)]
pub struct BadName(pub String);

impl SandboxError {
    /// True when retrying can help (host trouble), false for bad input.
    pub fn retryable(&self) -> bool {
        matches!(self, SandboxError::Host(_))
    }

    /// True when the caller gave bad input (exit code 2 on the CLI).
    pub fn is_bad_input(&self) -> bool {
        !self.retryable()
    }
}
