//! What the host offers every guest: log lines, progress, artifacts.
//!
//! On wasm these call the `host` imports of the `step` world. On other
//! targets (native unit tests of a plugin's logic) they print to stderr.

use std::fmt;

/// How important a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation (what [`log!`](macro@crate::log) uses by default).
    Info,
    /// Something looks wrong but the step goes on.
    Warn,
    /// Something failed.
    Error,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        })
    }
}

#[cfg(target_arch = "wasm32")]
use crate::__private::weft::step::host as wit;

/// Log a line, kept with the step's attempt (the host caps the volume per
/// invocation). [`log!`](macro@crate::log) formats and calls this.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        let level = match level {
            Level::Trace => wit::Level::Trace,
            Level::Debug => wit::Level::Debug,
            Level::Info => wit::Level::Info,
            Level::Warn => wit::Level::Warn,
            Level::Error => wit::Level::Error,
        };
        wit::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level}] {message}");
}

/// Report progress: a short status update shown for the running step.
pub fn progress(message: &str) {
    #[cfg(target_arch = "wasm32")]
    wit::progress(message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[progress] {message}");
}

/// Report progress with structured data (a count, a stage, a percentage),
/// e.g. `progress_data("fetched", &json!({"done": 3, "of": 10}))`: the
/// run's `progress` event, MCP progress and the web view carry both. Data
/// over 16 KiB of JSON is left out (the host logs a warning).
pub fn progress_data<T: serde::Serialize + ?Sized>(message: &str, data: &T) {
    let data = serde_json::to_string(data).unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()));
    #[cfg(target_arch = "wasm32")]
    wit::progress_data(message, &data);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[progress] {message} {data}");
}

/// Attach a named blob to the step's attempt (a report, an image...), with
/// its MIME type, e.g. `artifact("report.csv", "text/csv", csv.as_bytes())`.
pub fn artifact(name: &str, mime: &str, data: &[u8]) {
    #[cfg(target_arch = "wasm32")]
    wit::artifact(name, mime, data);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[artifact] {name} ({mime}, {} bytes)", data.len());
}
