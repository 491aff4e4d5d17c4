//! Labels: a caller's metadata on a run (`{"origin": "slack", "session":
//! "s-42"}`), set when the run starts, shown in every view, filtered on
//! in run lists and read by refs as `@run.labels.KEY`. Keys and values are
//! short strings, so a label can never carry a payload: the caps are here,
//! checked once at every front end's edge.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::problem::{Problem, shown, type_name};

/// A run's labels, by key.
pub type Labels = BTreeMap<String, String>;

/// The most labels one run has.
pub const MAX_LABELS: usize = 32;
/// The longest key (characters).
pub const MAX_KEY_CHARS: usize = 63;
/// The longest value (characters).
pub const MAX_VALUE_CHARS: usize = 256;

/// Whether `k` is a label key: letters, digits, `_ - . /`, starting with
/// a letter or digit.
pub fn is_label_key(k: &str) -> bool {
    let mut b = k.bytes();
    b.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && k.len() <= MAX_KEY_CHARS
        && k.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'/'))
}

/// The problems of `labels` (at JSON path `at`).
pub fn check_labels(labels: &Labels, at: &str) -> Vec<Problem> {
    let mut out = vec![];
    if labels.len() > MAX_LABELS {
        out.push(
            Problem::new(at, format!("{} labels; at most {MAX_LABELS}", labels.len()))
                .hint("keep the ones a list is filtered on; put the rest in the run's input"),
        );
    }
    for (k, v) in labels {
        let kat = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
        if !is_label_key(k) {
            out.push(Problem::new(&kat, format!("`{}` is not a label key", shown(k))).hint(format!(
                "1 to {MAX_KEY_CHARS} letters, digits, `_`, `-`, `.` or `/`, starting with a letter or digit"
            )));
        }
        if v.chars().count() > MAX_VALUE_CHARS {
            out.push(Problem::new(
                &kat,
                format!("the value is {} characters long; at most {MAX_VALUE_CHARS}", v.chars().count()),
            ));
        } else if v.chars().any(char::is_control) {
            out.push(Problem::new(&kat, "the value has a control character"));
        }
    }
    out
}

/// Labels from JSON (an object of strings), checked; the problems at `at`.
pub fn labels_from_json(v: &Value, at: &str) -> Result<Labels, Vec<Problem>> {
    let Value::Object(m) = v else {
        return Err(vec![Problem::new(at, format!("labels must be an object of strings, got {}", type_name(v)))]);
    };
    let mut labels = Labels::new();
    let mut out = vec![];
    for (k, v) in m {
        match v {
            Value::String(s) => {
                labels.insert(k.clone(), s.clone());
            }
            other => out.push(Problem::new(
                format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                format!("a label's value must be a string, got {}", type_name(other)),
            )),
        }
    }
    out.extend(check_labels(&labels, at));
    if out.is_empty() { Ok(labels) } else { Err(out) }
}

/// `KEY=VALUE` (the CLI's `--label`, a list filter's `KEY:VALUE` with `sep`).
pub fn parse_label(text: &str, sep: char) -> Result<(String, String), String> {
    let (k, v) = text.split_once(sep).ok_or_else(|| format!("`{text}` is not KEY{sep}VALUE"))?;
    if !is_label_key(k) {
        return Err(format!("`{k}` is not a label key (letters, digits, `_ - . /`, at most {MAX_KEY_CHARS})"));
    }
    Ok((k.to_string(), v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_are_short_strings_with_plain_keys() {
        let ok = labels_from_json(&json!({"origin": "slack", "session/id": "s-42"}), "/labels").unwrap();
        assert_eq!(ok.get("session/id").map(String::as_str), Some("s-42"));
        let bad = labels_from_json(&json!({"": "x", "n": 1, "a b": "x", "v": "x".repeat(300)}), "/labels").unwrap_err();
        let paths: Vec<&str> = bad.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, vec!["/labels/n", "/labels/", "/labels/a b", "/labels/v"], "{bad:?}");
        assert!(labels_from_json(&json!([]), "/labels").is_err());
        let many: serde_json::Map<String, Value> = (0..40).map(|i| (format!("k{i}"), json!("v"))).collect();
        assert!(labels_from_json(&Value::Object(many), "/labels").unwrap_err()[0].message.contains("at most 32"));
        assert_eq!(parse_label("team=core=x", '='), Ok(("team".into(), "core=x".into())));
        assert!(parse_label("novalue", '=').is_err());
    }
}
