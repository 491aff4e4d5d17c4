//! JSON Schema checks: meta-validation of schemas written in a definition,
//! values against schemas (run input, signal data), literal step inputs
//! against the declared input schema of a plugin, tool or template, and the
//! [`SchemaLookup`] hook that supplies those declared schemas.

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use crate::definition::{CodeRef, Definition};
use crate::problem::Problem;
use crate::template::Template;

/// Declared input schemas of plugins, tools and templates, where known.
/// Every method defaults to "unknown".
pub trait SchemaLookup {
    fn code_input_schema(&self, _code: &CodeRef) -> Option<Value> {
        None
    }
    fn tool_input_schema(&self, _server: &str, _tool: &str) -> Option<Value> {
        None
    }
    /// A plugin's declared output schema.
    fn code_output_schema(&self, _code: &CodeRef) -> Option<Value> {
        None
    }
    /// A tool's declared output schema (its `structuredContent`).
    fn tool_output_schema(&self, _server: &str, _tool: &str) -> Option<Value> {
        None
    }
    /// A child workflow's `input_schema` (`version` `None` = latest).
    fn template_input_schema(&self, _template: &str, _version: Option<u32>) -> Option<Value> {
        None
    }
}

/// A lookup that knows no schemas.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSchemas;
impl SchemaLookup for NoSchemas {}

/// The JSON Schema type name of `v` (`integer` for whole numbers).
pub fn schema_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Check a run's input against the definition's `input_schema`. Paths are
/// JSON Pointers into the input.
pub fn validate_input(def: &Definition, input: &Value) -> Result<(), Vec<Problem>> {
    match &def.input_schema {
        None => Ok(()),
        Some(schema) => validate_against(schema, input),
    }
}

/// Check a value against a JSON Schema (run input, a wait's signal data).
/// Paths are JSON Pointers into the value.
pub fn validate_against(schema: &Value, value: &Value) -> Result<(), Vec<Problem>> {
    let v = jsonschema::validator_for(schema)
        .map_err(|e| vec![Problem::new("", format!("the schema is not usable: {e}"))])?;
    let problems: Vec<Problem> = v.iter_errors(value).map(|e| Problem::new(located(&e), e.to_string())).collect();
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// Where a value's problem is: a missing required property is reported
/// at that property (where a form puts the field), not at its object.
fn located(e: &jsonschema::ValidationError<'_>) -> String {
    let at = e.instance_path().as_str();
    match e.kind() {
        ValidationErrorKind::Required { property: Value::String(name) } => {
            format!("{at}/{}", name.replace('~', "~0").replace('/', "~1"))
        }
        _ => at.to_string(),
    }
}

/// Problems with a JSON Schema itself (meta-validation), located under `at`.
pub fn check_schema(schema: &Value, at: &str) -> Vec<Problem> {
    let mv = match jsonschema::meta::validator_for(schema) {
        Ok(mv) => mv,
        Err(e) => return vec![Problem::new(at, format!("not a valid JSON Schema: {e}"))],
    };
    let out: Vec<Problem> = mv
        .iter_errors(schema)
        .map(|e| Problem::new(format!("{at}{}", e.instance_path().as_str()), format!("not a valid JSON Schema: {e}")))
        .collect();
    if !out.is_empty() {
        return out;
    }
    match jsonschema::validator_for(schema) {
        Ok(_) => vec![],
        Err(e) => {
            vec![Problem::new(format!("{at}{}", e.instance_path().as_str()), format!("not a usable JSON Schema: {e}"))]
        }
    }
}

/// Validate a step's literal input against a declared schema. Places that
/// hold refs are unknown until run time: errors located at or under an
/// exact ref are dropped, so are errors about the content of strings with
/// embedded refs, and errors about a container holding refs unless they
/// concern its shape (`required`, `type`, `additionalProperties`, sizes).
pub(crate) fn check_literal_input(
    schema: &Value,
    input: &Template,
    input_at: &str,
    whose: &str,
    out: &mut Vec<Problem>,
) {
    let Ok(v) = jsonschema::validator_for(schema) else {
        return;
    };
    // A tool or code step without input receives `{}`.
    let value = if input.is_null() { Value::Object(Default::default()) } else { input.raw().clone() };
    for e in v.iter_errors(&value) {
        let ip = e.instance_path().as_str();
        let opaque = input.sites().iter().any(|s| {
            let under = s.pointer == ip || ip.starts_with(&format!("{}/", s.pointer));
            let above = s.pointer.starts_with(&format!("{ip}/"));
            let structural = matches!(
                e.kind(),
                ValidationErrorKind::Required { .. }
                    | ValidationErrorKind::AdditionalProperties { .. }
                    | ValidationErrorKind::MinProperties { .. }
                    | ValidationErrorKind::MaxProperties { .. }
                    | ValidationErrorKind::MinItems { .. }
                    | ValidationErrorKind::MaxItems { .. }
                    | ValidationErrorKind::Type { .. }
            );
            (under && (s.exact || !matches!(e.kind(), ValidationErrorKind::Type { .. }))) || (above && !structural)
        });
        if !opaque {
            out.push(Problem::new(
                format!("{input_at}{ip}"),
                format!("input does not match the input schema of {whose}: {e}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_missing_property_is_reported_where_it_belongs() {
        let schema = json!({"type": "object", "required": ["csv", "a/b"],
                            "properties": {"n": {"type": "object", "required": ["x"]}}});
        let p = validate_against(&schema, &json!({"n": {}})).unwrap_err();
        let mut paths: Vec<&str> = p.iter().map(|p| p.path.as_str()).collect();
        paths.sort();
        assert_eq!(paths, ["/a~1b", "/csv", "/n/x"]);
        assert!(p.iter().any(|p| p.message.contains("\"csv\" is a required property")), "{p:?}");
    }

    #[test]
    fn meta_validation_locates_problems() {
        assert!(check_schema(&json!({"type": "object"}), "/s").is_empty());
        assert!(check_schema(&json!(true), "/s").is_empty());
        let p = check_schema(&json!({"properties": {"a": {"type": 5}}}), "/s");
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].path, "/s/properties/a/type");
        let p = check_schema(&json!({"pattern": "(unclosed"}), "/s");
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].path, "/s/pattern");
    }

    fn problems(schema: serde_json::Value, input: serde_json::Value) -> Vec<String> {
        let (t, errs) = Template::compile_lenient(input);
        assert!(errs.is_empty());
        let mut out = vec![];
        check_literal_input(&schema, &t, "/steps/0/input", "tool s.t", &mut out);
        out.into_iter().map(|p| p.path).collect()
    }

    #[test]
    fn literal_inputs_skip_places_holding_refs() {
        let schema = json!({"type": "object", "required": ["a", "b"], "additionalProperties": false,
            "properties": {"a": {"type": "integer"}, "b": {"type": "string", "pattern": "^x"},
                           "c": {"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": true}}});
        assert_eq!(problems(schema.clone(), json!({"a": "@input.n", "b": "x"})), Vec::<String>::new());
        assert_eq!(problems(schema.clone(), json!({"a": "no", "b": "y"})), ["/steps/0/input/a", "/steps/0/input/b"]);
        assert_eq!(
            problems(schema.clone(), json!({"a": 1, "b": "@p.q suffix"})),
            Vec::<String>::new(),
            "embedded: content unknown"
        );
        assert_eq!(
            problems(schema.clone(), json!({"a": "@x.n", "z": 1})),
            ["/steps/0/input", "/steps/0/input"],
            "required b + extra z"
        );
        assert_eq!(
            problems(schema.clone(), json!({"a": 1, "b": "x", "c": ["@i.x"]})),
            ["/steps/0/input/c"],
            "minItems is shape"
        );
        assert_eq!(
            problems(schema.clone(), json!({"a": 1, "b": "x", "c": ["@i.x", "@i.x"]})),
            Vec::<String>::new(),
            "uniqueItems depends on values"
        );
        assert_eq!(problems(schema.clone(), "@input.everything".into()), Vec::<String>::new());
        assert_eq!(problems(schema, json!(null)), ["/steps/0/input", "/steps/0/input"], "no input is {{}}");
        assert_eq!(
            problems(json!({"type": "integer"}), json!("x @a.b")),
            ["/steps/0/input"],
            "an embedded ref is still a string"
        );
    }

    #[test]
    fn unusable_declared_schemas_are_ignored() {
        assert_eq!(problems(json!({"type": 5}), json!({"a": 1})), Vec::<String>::new());
    }
}
