//! Caps on what the engine accepts and stores: a run's input, signal and
//! event data, a definition, a step's output. Every value accepted must be
//! one the store can read back, so size and JSON nesting are checked at
//! the edge with the limits the reader relies on (serde_json reads at most
//! 128 levels; a stored value sits at most a few levels inside another, so
//! [`MAX_DEPTH`] leaves room). Over a cap, nothing is stored and the
//! message names the cap and how to raise it.

use std::io;

use serde_json::Value;

use crate::error::{ErrorKind, StepError};

/// The deepest JSON nesting accepted anywhere (input, data, outputs).
pub const MAX_DEPTH: usize = 100;

/// Longest artifact name, in bytes.
pub const MAX_ARTIFACT_NAME: usize = 255;

/// Whether `name` can name an artifact: a file name (no folders, no `..`,
/// no control characters), at most [`MAX_ARTIFACT_NAME`] bytes; it becomes
/// part of a resource URI and a file name when fetched.
pub fn artifact_name(name: &str) -> Result<(), String> {
    let shown = || name.chars().take(64).flat_map(char::escape_default).collect::<String>();
    if name.is_empty() || name.len() > MAX_ARTIFACT_NAME {
        return Err(format!("the name `{}` must have 1 to {MAX_ARTIFACT_NAME} bytes", shown()));
    }
    if name == "." || name == ".." || name.contains(['/', '\\']) || name.chars().any(char::is_control) {
        return Err(format!(
            "the name `{}` is not a plain file name (no `/`, `\\`, `..` or control characters)",
            shown()
        ));
    }
    Ok(())
}

/// The caps (`[limits]` in weft.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeLimits {
    /// A run's input, a signal's or an event's data.
    pub max_input_bytes: usize,
    /// A step's stored output (a guest's result, a tool's, a transform's).
    pub max_output_bytes: usize,
    /// A definition (as JSON).
    pub max_definition_bytes: usize,
}

impl Default for SizeLimits {
    fn default() -> Self {
        SizeLimits { max_input_bytes: 4 << 20, max_output_bytes: 16 << 20, max_definition_bytes: 1 << 20 }
    }
}

/// What is wrong with a value: too big, or too deep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Over {
    /// Its JSON text is `size` bytes, over `cap`.
    Size { size: usize, cap: usize },
    /// It nests deeper than [`MAX_DEPTH`].
    Depth,
}

/// Counts bytes (no copy of a big value is made).
struct Count {
    n: usize,
}

impl io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.n += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn depth(v: &Value, at: usize) -> bool {
    if at > MAX_DEPTH {
        return false;
    }
    match v {
        Value::Array(a) => a.iter().all(|x| depth(x, at + 1)),
        Value::Object(m) => m.values().all(|x| depth(x, at + 1)),
        _ => true,
    }
}

/// Checks `v` against a size cap and [`MAX_DEPTH`].
pub fn check(v: &Value, cap: usize) -> Result<(), Over> {
    if !depth(v, 1) {
        return Err(Over::Depth);
    }
    // The whole size is counted, so the message can say it.
    let mut c = Count { n: 0 };
    serde_json::to_writer(&mut c, v).expect("counting never fails");
    if c.n > cap { Err(Over::Size { size: c.n, cap }) } else { Ok(()) }
}

/// The largest resolved input kept with an attempt (as JSON).
pub const MAX_SHOWN_INPUT_BYTES: usize = 64 * 1024;

/// An attempt's resolved input as it is stored with the attempt (what
/// `runs show` and `run_get` show): the value, or, over
/// [`MAX_SHOWN_INPUT_BYTES`] (or too deep), a note saying its size.
pub fn shown_input(v: &Value) -> Value {
    match check(v, MAX_SHOWN_INPUT_BYTES) {
        Ok(()) => v.clone(),
        Err(Over::Size { size, .. }) => serde_json::json!({"$omitted": format!("the input was {size} bytes as JSON")}),
        Err(Over::Depth) => serde_json::json!({"$omitted": format!("the input nests deeper than {MAX_DEPTH} levels")}),
    }
}

impl Over {
    /// The message for `what` (e.g. "the run's input"), naming the setting
    /// that raises the cap.
    pub fn message(&self, what: &str, setting: &str) -> String {
        match self {
            Over::Size { size, cap } => {
                format!("{what} is {size} bytes as JSON, over the {cap}-byte cap (`[limits] {setting}`)")
            }
            Over::Depth => {
                format!(
                    "{what} nests deeper than {MAX_DEPTH} levels; flatten it (the cap keeps every stored value readable)"
                )
            }
        }
    }

    /// How to get under the cap.
    pub fn hint(&self, setting: &str) -> String {
        match self {
            Over::Size { .. } => {
                format!(
                    "send less (large data belongs in artifacts or files), or raise `[limits] {setting}` in weft.toml"
                )
            }
            Over::Depth => "flatten the value".to_string(),
        }
    }

    /// A step's output over its cap: the attempt fails (never retried).
    pub fn step_error(&self) -> StepError {
        let kind = match self {
            Over::Size { .. } => ErrorKind::OutputTooLarge,
            Over::Depth => ErrorKind::InvalidOutput,
        };
        let m = format!("{}; {}", self.message("the step's output", "max_output_bytes"), self.hint("max_output_bytes"));
        StepError::new(kind, m, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn size_and_depth() {
        assert_eq!(check(&json!({"a": "xx"}), 100), Ok(()));
        let big = json!("x".repeat(1000));
        assert_eq!(check(&big, 100), Err(Over::Size { cap: 100, size: 1002 }), "the whole size, quotes included");
        assert_eq!(check(&big, 1002), Ok(()), "at the cap is allowed");
        let mut deep = json!(1);
        for _ in 0..MAX_DEPTH {
            deep = json!([deep]);
        }
        assert_eq!(check(&deep, 1 << 20), Err(Over::Depth), "MAX_DEPTH + 1 levels");
        let mut ok = json!(1);
        for _ in 0..MAX_DEPTH - 1 {
            ok = json!([ok]);
        }
        assert_eq!(check(&ok, 1 << 20), Ok(()), "MAX_DEPTH levels");
        let m = Over::Size { size: 200, cap: 100 }.message("the run's input", "max_input_bytes");
        assert_eq!(m, "the run's input is 200 bytes as JSON, over the 100-byte cap (`[limits] max_input_bytes`)");
        assert!(Over::Depth.message("x", "y").contains("deeper than 100 levels"));
        assert!(artifact_name("report.csv").is_ok());
        for bad in ["", "a/b", "..", "a\\b", "x\u{1b}", &"n".repeat(256)] {
            assert!(artifact_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Over::Depth.step_error().kind, ErrorKind::InvalidOutput);
        assert_eq!(Over::Size { size: 2, cap: 1 }.step_error().kind, ErrorKind::OutputTooLarge);
    }
}
