//! Printing results: JSON on stdout (pretty on a terminal, compact
//! otherwise) and human lines on stderr.

use std::io::{IsTerminal, Write};

use serde::Serialize;
use serde_json::Value;

/// Prints `value` as JSON on stdout.
pub fn json<T: Serialize>(value: &T) {
    let mut out = std::io::stdout().lock();
    let text = if out.is_terminal() { serde_json::to_string_pretty(value) } else { serde_json::to_string(value) }
        .expect("values serialize");
    let _ = writeln!(out, "{text}");
}

/// A JSON error object as docs/cli.md shapes it ("The run as JSON").
pub fn error_object(kind: &str, message: &str, retryable: bool) -> serde_json::Value {
    serde_json::json!({"kind": kind, "message": message, "retryable": retryable})
}

/// A value on one line, cut to `max` characters.
pub fn short(v: &Value, max: usize) -> String {
    let s = v.to_string();
    if s.chars().count() <= max { s } else { format!("{}…", s.chars().take(max).collect::<String>()) }
}
