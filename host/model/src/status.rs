//! The vocabularies of outcomes: [`ErrorKind`] (the `kind` of a step
//! error, interfaces.md) and [`StepStatus`] (workflow.md §5).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Error kinds (interfaces.md): the `kind` of a step error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Timeout,
    FuelExhausted,
    MemoryLimit,
    Trap,
    GuestError,
    Transport,
    ToolError,
    Protocol,
    Validation,
    Canceled,
    Deadline,
    DependencyFailed,
    /// A guest's result (or a command's stdout) exceeded the output cap.
    OutputTooLarge,
    /// A guest's result was not JSON.
    InvalidOutput,
    /// An attempt cut short by its process's death, a lost lease or a
    /// panic in the host: it runs again with the same idempotency key and
    /// does not count against `max_attempts`.
    Interrupted,
    /// A step interrupted `max_interruptions` times in a row (default 3):
    /// it is failed, never retried, so a step that kills its process
    /// cannot loop the engine.
    Crashed,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 16] = [
        ErrorKind::Timeout,
        ErrorKind::FuelExhausted,
        ErrorKind::MemoryLimit,
        ErrorKind::Trap,
        ErrorKind::GuestError,
        ErrorKind::Transport,
        ErrorKind::ToolError,
        ErrorKind::Protocol,
        ErrorKind::Validation,
        ErrorKind::Canceled,
        ErrorKind::Deadline,
        ErrorKind::DependencyFailed,
        ErrorKind::OutputTooLarge,
        ErrorKind::InvalidOutput,
        ErrorKind::Interrupted,
        ErrorKind::Crashed,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::FuelExhausted => "fuel_exhausted",
            ErrorKind::MemoryLimit => "memory_limit",
            ErrorKind::Trap => "trap",
            ErrorKind::GuestError => "guest_error",
            ErrorKind::Transport => "transport",
            ErrorKind::ToolError => "tool_error",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Validation => "validation",
            ErrorKind::Canceled => "canceled",
            ErrorKind::Deadline => "deadline",
            ErrorKind::DependencyFailed => "dependency_failed",
            ErrorKind::OutputTooLarge => "output_too_large",
            ErrorKind::InvalidOutput => "invalid_output",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::Crashed => "crashed",
        }
    }
    pub fn parse(s: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// States of a step (workflow.md §5); `@step.$status` yields these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Running,
    Waiting,
    Retrying,
    Succeeded,
    Failed,
    Skipped,
    Canceled,
}

impl StepStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Running => "running",
            StepStatus::Waiting => "waiting",
            StepStatus::Retrying => "retrying",
            StepStatus::Succeeded => "succeeded",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
            StepStatus::Canceled => "canceled",
        }
    }
    /// `succeeded`, `failed`, `skipped` and `canceled` never change.
    pub fn is_terminal(self) -> bool {
        matches!(self, StepStatus::Succeeded | StepStatus::Failed | StepStatus::Skipped | StepStatus::Canceled)
    }
}
