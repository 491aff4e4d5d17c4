//! `regex-extract`: find matches of a regular expression in a text, with
//! their capture groups.
//!
//! The syntax is Rust's `regex` crate (RE2-like: no look-around or
//! back-references, linear time, so a pattern cannot hang the step). Each
//! match gives the matched text, its groups (by name when named, else by
//! number) and its byte offsets. An invalid pattern is `invalid_input` with
//! the regex error.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use weft_guest::{StepError, step};

/// Input of `regex-extract`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The text to search.
    pub text: String,
    /// The regular expression (Rust `regex` syntax), e.g.
    /// `(?P<user>[\w.]+)@(?P<domain>[\w.]+)`.
    pub pattern: String,
    /// All matches (the default) or only the first one.
    #[serde(default = "yes")]
    pub all: bool,
    /// Flags, any of: `i` case-insensitive, `m` multi-line (`^`/`$` match at
    /// line ends), `s` `.` matches newline, `x` ignore whitespace and `#`
    /// comments, `U` swap greedy and lazy.
    #[serde(default)]
    pub flags: String,
}

fn yes() -> bool {
    true
}

/// Output of `regex-extract`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The matches in order of position (empty when nothing matched).
    pub matches: Vec<Match>,
}

/// One match.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Match {
    /// The whole matched text.
    #[serde(rename = "match")]
    pub text: String,
    /// Capture groups: by name for named groups, by number (`"1"`, `"2"`...)
    /// otherwise; `null` when the group did not take part in the match.
    #[schemars(with = "BTreeMap<String, Option<String>>")]
    pub groups: serde_json::Map<String, serde_json::Value>,
    /// Byte offset where the match starts in `text` (UTF-8).
    pub start: usize,
    /// Byte offset just past the end of the match.
    pub end: usize,
}

/// Extract the matches of a regular expression from a text, with named or
/// numbered capture groups, e.g. pull order numbers, e-mail addresses or
/// dates out of a message.
#[step(name = "regex-extract")]
pub fn extract(input: Input) -> Result<Output, StepError> {
    let mut builder = regex::RegexBuilder::new(&input.pattern);
    for flag in input.flags.chars() {
        match flag {
            'i' => builder.case_insensitive(true),
            'm' => builder.multi_line(true),
            's' => builder.dot_matches_new_line(true),
            'x' => builder.ignore_whitespace(true),
            'U' => builder.swap_greed(true),
            other => {
                return Err(StepError::invalid_input(format!("flags: unknown flag `{other}` (use i, m, s, x, U)")));
            }
        };
    }
    let re = builder.build().map_err(|e| StepError::invalid_input(format!("pattern: {e}")))?;
    let names: Vec<Option<&str>> = re.capture_names().collect();
    let limit = if input.all { usize::MAX } else { 1 };
    let matches = re
        .captures_iter(&input.text)
        .take(limit)
        .map(|caps| {
            let whole = caps.get(0).expect("group 0 always matches");
            let groups = (1..names.len())
                .map(|i| {
                    let key = names[i].map_or_else(|| i.to_string(), str::to_string);
                    let value = caps.get(i).map(|m| m.as_str().into());
                    (key, value.unwrap_or(serde_json::Value::Null))
                })
                .collect();
            Match { text: whole.as_str().to_string(), groups, start: whole.start(), end: whole.end() }
        })
        .collect();
    Ok(Output { matches })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use weft_guest::Step;

    fn call(input: Value) -> Result<Value, StepError> {
        WeftStep::call_json(input)
    }

    #[test]
    fn named_and_numbered_groups() {
        let out = call(json!({
            "text": "ada@example.org, bob@test.io",
            "pattern": r"(?P<user>\w+)@(\w+)\.(?:org|io)(x)?"
        }))
        .unwrap();
        assert_eq!(
            out["matches"][0],
            json!({"match": "ada@example.org", "groups": {"user": "ada", "2": "example", "3": null}, "start": 0, "end": 15})
        );
        assert_eq!(out["matches"][1]["groups"]["user"], "bob");
        assert_eq!(out["matches"][1]["start"], 17);
    }

    #[test]
    fn first_only_and_flags() {
        let out = call(json!({"text": "A a", "pattern": "a", "all": false, "flags": "i"})).unwrap();
        assert_eq!(out["matches"], json!([{"match": "A", "groups": {}, "start": 0, "end": 1}]));
        let out = call(json!({"text": "x\ny", "pattern": "^y$", "flags": "m"})).unwrap();
        assert_eq!(out["matches"].as_array().unwrap().len(), 1);
        let out = call(json!({"text": "nothing", "pattern": r"\d+"})).unwrap();
        assert_eq!(out, json!({"matches": []}));
    }

    #[test]
    fn invalid_pattern_and_flag_are_invalid_input() {
        let e = call(json!({"text": "", "pattern": "(unclosed"})).unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        assert!(e.message().starts_with("pattern: ") && e.message().contains("unclosed group"), "{e}");
        let e = call(json!({"text": "", "pattern": "a", "flags": "q"})).unwrap_err();
        assert!(e.message().contains("unknown flag `q`"), "{e}");
        let e = call(json!({"text": "", "pattern": "a", "colour": 1})).unwrap_err();
        assert!(e.message().contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn groups_schema_is_a_string_map() {
        let schema = WeftStep::metadata().output_schema.unwrap();
        assert!(schema.contains("additionalProperties"), "{schema}");
        assert!(schema.contains("Byte offset where the match starts"));
    }
}
