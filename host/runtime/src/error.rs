//! [`RuntimeError`]: what goes wrong preparing, storing or running, split
//! by whose it is to fix — the user's (a bad setting, a refused
//! definition: the same request fails again) or the machine's (the store,
//! the disk, a sandbox that cannot be built: trying again can help).

use std::path::PathBuf;

use weft_engine::{EngineError, StoreError};
use weft_sandbox::SandboxError;

/// An error of the runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The user's to fix: a setting, a file or a name that cannot be used
    /// (the CLI exits 2; a tool answers `isError` with the fix).
    #[error("{0}")]
    Invalid(String),
    /// The store failed.
    #[error("{what}: {source}")]
    Store {
        what: String,
        #[source]
        source: StoreError,
    },
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The sandbox (wasmtime) cannot be built or refused a guest.
    #[error("the sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    /// The process that owns the store did not answer in time (the request
    /// stays queued for it).
    #[error("{0}")]
    Unanswered(String),
    /// The operating system said no (a runtime, a file).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl RuntimeError {
    /// The user's to fix (exit code 2).
    pub fn is_invalid(&self) -> bool {
        matches!(self, RuntimeError::Invalid(_))
    }

    /// Whether trying the same thing again can help.
    pub fn is_retryable(&self) -> bool {
        match self {
            RuntimeError::Store { source, .. } => source.is_retryable(),
            RuntimeError::Engine(EngineError::Store(e)) => e.is_retryable(),
            RuntimeError::Io { .. } | RuntimeError::Unanswered(_) => true,
            _ => false,
        }
    }

    /// A store error, saying what was being done.
    pub fn store(what: impl Into<String>) -> impl FnOnce(StoreError) -> RuntimeError {
        let what = what.into();
        move |source| RuntimeError::Store { what, source }
    }
}

/// A runtime `Result`.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// A configuration problem: exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid (unknown key, wrong type, bad TOML).
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}
