//! The one vocabulary of states and outcomes, shared by the engine, the
//! store and every front end: [`RunState`], [`StepState`] and
//! [`ErrorKind`] (the `kind` of a step error: docs/cli.md, "The run as
//! JSON").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `kind` of a step's or a run's error.
// (docs/cli.md, "The run as JSON"; the doc comment above is the JSON Schema's description.)
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

/// A run's state (the A2A task lifecycle): submitted, working,
/// input-required or auth-required while it waits, then completed, failed,
/// canceled or rejected.
// The engine's state machine (`weft_engine::state`) decides the
// transitions; every front end shows these names (docs/cli.md, "The run as JSON").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
    /// An MCP session's recording, open: its recorded calls are kept with
    /// it, any session may reopen it and add to it, and it ends saved
    /// (`completed`) or discarded (`canceled`). Never executed.
    Recording,
}

impl RunState {
    pub const ALL: [RunState; 9] = [
        RunState::Submitted,
        RunState::Working,
        RunState::InputRequired,
        RunState::AuthRequired,
        RunState::Completed,
        RunState::Failed,
        RunState::Canceled,
        RunState::Rejected,
        RunState::Recording,
    ];

    /// `completed`, `failed`, `canceled` and `rejected` never change.
    pub fn is_terminal(self) -> bool {
        matches!(self, RunState::Completed | RunState::Failed | RunState::Canceled | RunState::Rejected)
    }

    /// A run the engine executes until it ends: not ended, and not a
    /// recording (which is never executed).
    pub fn is_executed(self) -> bool {
        !self.is_terminal() && self != RunState::Recording
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Submitted => "submitted",
            RunState::Working => "working",
            RunState::InputRequired => "input-required",
            RunState::AuthRequired => "auth-required",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Canceled => "canceled",
            RunState::Rejected => "rejected",
            RunState::Recording => "recording",
        }
    }
}

/// A step's state (docs/workflow-format.md; for a `for_each` step, the state of
/// the whole step); `@step.$status` yields these names. The engine's state
/// machine decides the transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StepState {
    Pending,
    Running,
    /// A wait / sleep / workflow step parked on something outside.
    Waiting,
    /// Between attempts (the step record carries `next_attempt_at`).
    Retrying,
    Succeeded,
    Failed,
    Skipped,
    Canceled,
}

impl StepState {
    pub const ALL: [StepState; 8] = [
        StepState::Pending,
        StepState::Running,
        StepState::Waiting,
        StepState::Retrying,
        StepState::Succeeded,
        StepState::Failed,
        StepState::Skipped,
        StepState::Canceled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Pending => "pending",
            StepState::Running => "running",
            StepState::Waiting => "waiting",
            StepState::Retrying => "retrying",
            StepState::Succeeded => "succeeded",
            StepState::Failed => "failed",
            StepState::Skipped => "skipped",
            StepState::Canceled => "canceled",
        }
    }

    /// `succeeded`, `failed`, `skipped` and `canceled` never change.
    pub fn is_terminal(self) -> bool {
        matches!(self, StepState::Succeeded | StepState::Failed | StepState::Skipped | StepState::Canceled)
    }
}

/// A state name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown state {0:?}")]
pub struct UnknownState(pub String);

macro_rules! str_impls {
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl std::str::FromStr for $t {
            type Err = UnknownState;
            fn from_str(s: &str) -> Result<Self, UnknownState> {
                Self::ALL.iter().copied().find(|x| x.as_str() == s).ok_or_else(|| UnknownState(s.to_string()))
            }
        }
    };
}
str_impls!(RunState);
str_impls!(StepState);
