//! `text-template`: fill `{{placeholders}}` in a text from JSON values.
//!
//! `Hello {{name}}!` with `{"name": "Ada"}` gives `Hello Ada!`. Placeholders
//! are dotted paths into `values` (`{{user.name}}`, `{{items.0}}`), spaces
//! inside the braces are ignored. Strings are inserted as they are, numbers
//! and booleans as JSON, `null` as nothing, arrays and objects as JSON text.
//! A missing variable is the error `missing_variable` naming it, unless
//! `strict` is false (then it renders as nothing and is listed in `missing`).
//! Write `{{{{` for a literal `{{`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_guest::{StepError, step};

/// Input of `text-template`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The text with `{{name}}` / `{{a.b.0}}` placeholders. `{{{{` is a literal `{{`.
    pub template: String,
    /// The values the placeholders refer to (a JSON object).
    #[serde(default)]
    pub values: serde_json::Map<String, Value>,
    /// When true (the default) a placeholder without a value is an error;
    /// when false it renders as an empty string and is listed in `missing`.
    #[serde(default = "yes")]
    pub strict: bool,
}

fn yes() -> bool {
    true
}

/// Output of `text-template`.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub struct Output {
    /// The rendered text.
    pub text: String,
    /// Placeholders that had no value (only when `strict` is false), in order of first use.
    pub missing: Vec<String>,
}

/// Render a text template: replace each `{{path}}` in `template` with the
/// value at that dotted path in `values`. Use it to build messages, prompts,
/// e-mails or URLs from earlier steps' outputs.
#[step(name = "text-template")]
pub fn render(input: Input) -> Result<Output, StepError> {
    let values = Value::Object(input.values);
    let mut text = String::with_capacity(input.template.len());
    let mut missing: Vec<String> = Vec::new();
    let mut rest = input.template.as_str();
    while let Some(open) = rest.find("{{") {
        text.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        if let Some(tail) = after.strip_prefix("{{") {
            text.push_str("{{");
            rest = tail;
            continue;
        }
        let Some(close) = after.find("}}") else {
            let at = input.template.len() - rest.len() + open;
            return Err(StepError::invalid_input(format!("template: `{{{{` at byte {at} is never closed with `}}}}`")));
        };
        let name = after[..close].trim();
        if name.is_empty() {
            return Err(StepError::invalid_input("template: empty placeholder `{{}}`"));
        }
        match lookup(&values, name) {
            Some(v) => render_value(v, &mut text),
            None if input.strict => {
                return Err(StepError::new(
                    "missing_variable",
                    format!("no value for `{{{{{name}}}}}` in `values` (pass it, or set strict: false)"),
                ));
            }
            None => {
                if !missing.iter().any(|m| m == name) {
                    missing.push(name.to_string());
                }
            }
        }
        rest = &after[close + 2..];
    }
    text.push_str(rest);
    Ok(Output { text, missing })
}

/// The value at a dotted path (`a.b.0`); array segments are indexes.
fn lookup<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(root, |v, seg| match v {
        Value::Object(m) => m.get(seg.trim()),
        Value::Array(a) => a.get(seg.trim().parse::<usize>().ok()?),
        _ => None,
    })
}

fn render_value(v: &Value, out: &mut String) {
    match v {
        Value::Null => {}
        Value::String(s) => out.push_str(s),
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_guest::Step;

    fn call(input: Value) -> Result<Value, StepError> {
        WeftStep::call_json(input)
    }

    #[test]
    fn renders_paths_and_value_kinds() {
        let out = call(json!({
            "template": "Hi {{ user.name }}, #{{n}} {{ok}} {{none}}{{tags}} {{tags.1}} {{{{x}}",
            "values": {"user": {"name": "Ada"}, "n": 3, "ok": true, "none": null, "tags": ["a", "b"]}
        }))
        .unwrap();
        assert_eq!(out, json!({"text": "Hi Ada, #3 true [\"a\",\"b\"] b {{x}}", "missing": []}));
    }

    #[test]
    fn missing_variable_is_an_error_naming_it() {
        let e = call(json!({"template": "Hello {{who.name}}", "values": {"who": {}}})).unwrap_err();
        assert_eq!(e.code(), "missing_variable");
        assert!(e.message().contains("`{{who.name}}`"), "{e}");
    }

    #[test]
    fn non_strict_lists_missing_once() {
        let out = call(json!({"template": "{{a}}-{{b}}-{{a}}", "strict": false})).unwrap();
        assert_eq!(out, json!({"text": "--", "missing": ["a", "b"]}));
    }

    #[test]
    fn malformed_templates_are_invalid_input() {
        let e = call(json!({"template": "ok {{oops", "values": {}})).unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        assert!(e.message().contains("byte 3 is never closed"), "{e}");
        assert_eq!(call(json!({"template": "{{ }}"})).unwrap_err().code(), "invalid_input");
        let e = call(json!({"template": 5})).unwrap_err();
        assert!(e.message().starts_with("input.template: invalid type"), "{e}");
    }

    #[test]
    fn no_placeholders_and_unicode_pass_through() {
        let out = call(json!({"template": "héllo } {", "values": {}})).unwrap();
        assert_eq!(out["text"], "héllo } {");
        let m = WeftStep::metadata();
        assert_eq!(m.name, "text-template");
        assert!(m.output_schema.unwrap().contains("The rendered text."));
    }
}
