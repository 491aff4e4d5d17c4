//! The bounds of a definition: default timeouts and the largest values a
//! definition may give (durations, attempts, names, memory, priority). A
//! leaf: every part of the model reads them, none is read here.

/// Default per-attempt timeout of a code step (docs/workflow-format.md).
pub const DEFAULT_CODE_TIMEOUT_MS: u64 = 10_000;
/// Default per-attempt timeout of a tool step (docs/workflow-format.md).
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 30_000;
/// An agent step's attempt: a remote agent's task may take minutes.
pub const DEFAULT_AGENT_TIMEOUT_MS: u64 = 600_000;
/// Largest `limits.memory_mb` (a wasm32 memory is at most 4 GiB).
pub const MAX_MEMORY_MB: u64 = 4096;
/// Longest duration a definition may give (`timeout_ms`, retry delays,
/// `sleep.ms`, a wait's `timeout_ms`): a year. The engine adds durations
/// to a clock in ms; past this they are surely a mistake, not a plan.
pub const MAX_DURATION_MS: u64 = 366 * 24 * 3600 * 1000;
/// Most attempts a retry policy may ask for.
pub const MAX_ATTEMPTS: u32 = 10_000;
/// Longest step, definition or template name (and event, server or tool
/// name a definition gives), in characters.
pub const MAX_NAME_CHARS: usize = 128;
/// Largest `priority` magnitude: the engine orders ready steps by its
/// negation, so `i64::MIN` cannot be allowed; a million levels is plenty.
pub const MAX_PRIORITY: i64 = 1_000_000;
