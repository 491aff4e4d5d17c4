//! The error object of a failed step, attempt or run:
//! `{"kind": "timeout", "message": "...", "retryable": true}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use weft_model::ErrorKind;

/// Why a step, attempt or run failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepError {
    /// timeout, fuel_exhausted, memory_limit, trap, guest_error, transport,
    /// tool_error, protocol, validation, canceled, deadline, dependency_failed, ...
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default)]
    pub retryable: bool,
}

impl StepError {
    pub fn new(kind: ErrorKind, message: impl Into<String>, retryable: bool) -> Self {
        StepError { kind, message: message.into(), retryable }
    }

    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}
