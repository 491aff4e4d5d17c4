//! `json-select`: pick one value out of a JSON document by path.
//!
//! The path is either dotted (`a.b.0.c`, `items[0].name`, `items.-1` for the
//! last element) or a JSON Pointer (`/a/b/0/c`, RFC 6901). An empty path (or
//! `$`) selects the whole document. When the path does not exist the step
//! fails with `not_found` naming the first missing segment, unless `default`
//! is given (it may be `null`), in which case `default` is the output.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use weft_guest::{StepError, step};

/// Input of `json-select`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The JSON document to select from (any JSON value).
    pub data: Value,
    /// Where to look: dotted (`a.b.0.c`, `items[0].name`, negative indexes
    /// count from the end: `items.-1`) or a JSON Pointer starting with `/`
    /// (`/a/b/0/c`). Empty or `$` selects the whole document.
    pub path: String,
    /// Returned when the path does not exist (may be `null`). Without it a
    /// missing path is the error `not_found`.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Option<Value>")]
    pub default: Option<Value>,
}

/// `Some(v)` whenever the field is present, `null` included.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Select one value from a JSON document by dotted path (`a.b.0.c`) or JSON
/// Pointer (`/a/b/0/c`); the output is that value itself. A missing path
/// fails with `not_found` unless `default` is given.
#[step(name = "json-select")]
pub fn select(input: Input) -> Result<Value, StepError> {
    match lookup(&input.data, &input.path)? {
        Some(v) => Ok(v.clone()),
        None if input.default.is_some() => Ok(input.default.unwrap_or(Value::Null)),
        None => Err(not_found(&input.path, &input.data)),
    }
}

/// The segments of a path: JSON Pointer when it starts with `/`, else dotted.
pub fn segments(path: &str) -> Result<Vec<String>, StepError> {
    let path = path.trim();
    if path.is_empty() || path == "$" {
        return Ok(Vec::new());
    }
    if let Some(rest) = path.strip_prefix('/') {
        return Ok(rest.split('/').map(|s| s.replace("~1", "/").replace("~0", "~")).collect());
    }
    let path = path.strip_prefix("$.").unwrap_or(path);
    let mut out = Vec::new();
    for part in path.split('.') {
        // `items[0][1]` → `items`, `0`, `1`
        let (head, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        if !head.is_empty() {
            out.push(head.to_string());
        }
        while let Some(r) = rest.strip_prefix('[') {
            let end = r
                .find(']')
                .ok_or_else(|| StepError::invalid_input(format!("path `{path}`: unclosed `[` in `{part}`")))?;
            out.push(r[..end].trim_matches(['"', '\'']).to_string());
            rest = &r[end + 1..];
        }
        if !rest.is_empty() || part.is_empty() {
            return Err(StepError::invalid_input(format!(
                "path `{path}`: bad segment `{part}` (use `a.b.0` or a JSON Pointer `/a/b/0`)"
            )));
        }
    }
    Ok(out)
}

/// The value at `path`, or None when some segment is missing.
pub fn lookup<'a>(data: &'a Value, path: &str) -> Result<Option<&'a Value>, StepError> {
    let mut here = data;
    for seg in segments(path)? {
        match step_into(here, &seg) {
            Some(next) => here = next,
            None => return Ok(None),
        }
    }
    Ok(Some(here))
}

fn step_into<'a>(v: &'a Value, seg: &str) -> Option<&'a Value> {
    match v {
        Value::Object(map) => map.get(seg),
        Value::Array(items) => {
            let i: i64 = seg.parse().ok()?;
            let i = if i < 0 { items.len() as i64 + i } else { i };
            items.get(usize::try_from(i).ok()?)
        }
        _ => None,
    }
}

/// `not_found`, naming the first segment that is missing and what was there.
fn not_found(path: &str, data: &Value) -> StepError {
    let segs = segments(path).unwrap_or_default();
    let mut here = data;
    let mut walked = String::from("$");
    for seg in &segs {
        let Some(next) = step_into(here, seg) else {
            let what = match here {
                Value::Object(m) => format!("an object without key `{seg}` (keys: {})", keys(m)),
                Value::Array(a) => format!("an array of {} items, no index `{seg}`", a.len()),
                other => format!("{} (not an object or array)", kind(other)),
            };
            return StepError::new("not_found", format!("path `{path}`: at `{walked}` there is {what}"));
        };
        walked = format!("{walked}.{seg}");
        here = next;
    }
    StepError::new("not_found", format!("path `{path}` not found"))
}

fn keys(m: &serde_json::Map<String, Value>) -> String {
    let mut ks: Vec<&str> = m.keys().map(String::as_str).take(10).collect();
    if m.len() > 10 {
        ks.push("...");
    }
    ks.join(", ")
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
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
    fn dotted_pointer_and_brackets_agree() {
        let data = json!({"a": {"b": [{"c": 1}, {"c": 2}]}, "x/y": {"~": true}});
        for path in ["a.b.1.c", "/a/b/1/c", "a.b[1].c", "$.a.b.-1.c", "a.b[-1].c"] {
            assert_eq!(call(json!({"data": data, "path": path})).unwrap(), json!(2), "{path}");
        }
        assert_eq!(call(json!({"data": data, "path": "/x~1y/~0"})).unwrap(), json!(true));
        assert_eq!(call(json!({"data": data, "path": ""})).unwrap(), data);
    }

    #[test]
    fn missing_path_is_not_found_naming_the_segment() {
        let e = call(json!({"data": {"a": {"b": 1}}, "path": "a.c.d"})).unwrap_err();
        assert_eq!(e.code(), "not_found");
        assert!(e.message().contains("at `$.a` there is an object without key `c` (keys: b)"), "{e}");
        let e = call(json!({"data": [1, 2], "path": "5"})).unwrap_err();
        assert!(e.message().contains("an array of 2 items, no index `5`"), "{e}");
    }

    #[test]
    fn default_applies_only_when_missing() {
        let data = json!({"a": 1});
        assert_eq!(call(json!({"data": data, "path": "b", "default": 7})).unwrap(), json!(7));
        assert_eq!(call(json!({"data": data, "path": "b", "default": null})).unwrap(), json!(null));
        assert_eq!(call(json!({"data": data, "path": "a", "default": 7})).unwrap(), json!(1));
    }

    #[test]
    fn bad_input_and_bad_path_are_invalid_input() {
        let e = call(json!({"data": 1})).unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        assert!(e.message().contains("missing field `path`"), "{e}");
        let e = call(json!({"data": 1, "path": "a[0"})).unwrap_err();
        assert!(e.message().contains("unclosed `[`"), "{e}");
        assert_eq!(call(json!({"data": 1, "path": "a..b"})).unwrap_err().code(), "invalid_input");
    }

    #[test]
    fn describe_has_schemas_with_field_docs() {
        let m = WeftStep::metadata();
        assert_eq!(m.name, "json-select");
        assert!(m.description.starts_with("Select one value from a JSON document"));
        let schema: Value = serde_json::from_str(m.input_schema.as_deref().unwrap()).unwrap();
        assert_eq!(schema["required"], json!(["data", "path"]));
        assert!(schema["properties"]["path"]["description"].as_str().unwrap().contains("JSON Pointer"));
    }
}
