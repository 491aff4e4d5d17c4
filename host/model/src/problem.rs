//! `Problem`: one thing wrong with a definition or an input, located by a
//! JSON Pointer, plus small helpers to phrase problems consistently.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One problem, located by a JSON Pointer into the document ("" = the root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
pub struct Problem {
    /// JSON Pointer, e.g. `/steps/3/input/email`.
    pub path: String,
    pub message: String,
    /// How to fix it, when there is something useful to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// User text as a message may show it: control characters escaped (an ESC
/// must never reach a terminal raw) and at most 64 characters, the rest
/// counted.
pub fn shown(s: &str) -> String {
    let n = s.chars().count();
    let mut out: String = s
        .chars()
        .take(64)
        .flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] })
        .collect();
    if n > 64 {
        out.push_str(&format!("… ({n} characters)"));
    }
    out
}

/// Control characters escaped, length kept.
fn escaped(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(char::is_control) {
        s.chars()
            .flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] })
            .collect::<String>()
            .into()
    } else {
        s.into()
    }
}

impl Problem {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem { path: path.into(), message: message.into(), hint: None }
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Problem {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // What a user wrote may be in any part: nothing raw reaches a terminal.
        let path = if self.path.is_empty() { "/" } else { &self.path };
        write!(f, "{}: {}", escaped(path), escaped(&self.message))?;
        if let Some(h) = &self.hint {
            write!(f, " ({})", escaped(h))?;
        }
        Ok(())
    }
}

/// Every problem of a rejected definition or input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} problem(s):\n{}", .0.len(), .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
pub struct Problems(pub Vec<Problem>);

/// The JSON type name of a value, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// "did you mean `x`?" for the closest candidate within a small edit distance.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    closest(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// The candidate closest to `word` within a small edit distance (a third
/// of the longer one's length, at least 1), if any.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Message for an integer out of range.
pub(crate) fn range_msg(field: &str, min: u64, max: Option<u64>, got: &str) -> String {
    match max {
        Some(m) => format!("`{field}` must be an integer from {min} to {m}, got {got}"),
        None => format!("`{field}` must be an integer ≥ {min}, got {got}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(did_you_mean("tiemout_ms", ["timeout_ms", "name"]).as_deref(), Some("did you mean `timeout_ms`?"));
        assert_eq!(did_you_mean("zzz", ["timeout_ms", "name"]), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn display() {
        let p = Problem::new("", "bad").hint("fix it");
        assert_eq!(p.to_string(), "/: bad (fix it)");
        let ps = Problems(vec![Problem::new("/a", "x")]);
        assert_eq!(ps.to_string(), "1 problem(s):\n  /a: x");
    }
}
