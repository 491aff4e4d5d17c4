//! `json-validate`: check JSON data against a JSON Schema.
//!
//! Supports drafts 4, 6, 7, 2019-09 and 2020-12 (the `$schema` keyword picks
//! one; 2020-12 otherwise) through the `jsonschema` crate. Invalid data is
//! not an error of the step: the output says `valid: false` and lists every
//! violation with its location in the data and in the schema. An invalid
//! schema is `invalid_input`. `$ref`s to other documents are not fetched (a
//! guest has no network or files): keep the schema self-contained.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_guest::{StepError, step};

/// Input of `json-validate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The JSON Schema (an object, or `true`/`false`).
    pub schema: Value,
    /// The JSON value to check.
    pub data: Value,
    /// Also check `format` keywords (`email`, `date-time`, `uri`...). Off by
    /// default, as JSON Schema 2019-09 and later treat formats as annotations.
    #[serde(default)]
    pub formats: bool,
}

/// Output of `json-validate`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// True when `data` satisfies `schema`.
    pub valid: bool,
    /// Every violation found; empty when `valid`.
    pub errors: Vec<Violation>,
}

/// One way the data breaks the schema.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Violation {
    /// Where in the data, as a JSON Pointer (`""` is the whole document,
    /// `/items/0/price` a nested field).
    pub path: String,
    /// What is wrong, e.g. `"price" is a required property`.
    pub message: String,
    /// The schema keyword that failed, as a JSON Pointer into the schema
    /// (e.g. `/properties/items/items/required`).
    pub schema_path: String,
}

/// Validate `data` against the JSON Schema `schema` and list every violation
/// (location in the data, message, failing schema keyword). Use it to check
/// an LLM's or an API's output before later steps rely on it.
#[step(name = "json-validate")]
pub fn validate(input: Input) -> Result<Output, StepError> {
    let validator = jsonschema::options().should_validate_formats(input.formats).build(&input.schema).map_err(|e| {
        let at = e.schema_path().as_str();
        let at = if at.is_empty() { String::new() } else { format!(" at `{at}`") };
        StepError::invalid_input(format!("schema is not a valid JSON Schema{at}: {e}"))
    })?;
    let errors: Vec<Violation> = validator
        .iter_errors(&input.data)
        .map(|e| Violation {
            path: e.instance_path().as_str().to_string(),
            message: e.to_string(),
            schema_path: e.schema_path().as_str().to_string(),
        })
        .collect();
    Ok(Output { valid: errors.is_empty(), errors })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_guest::Step;

    fn call(input: Value) -> Result<Value, StepError> {
        WeftStep::call_json(input)
    }

    fn order_schema() -> Value {
        json!({
            "type": "object",
            "required": ["items"],
            "properties": {
                "items": {"type": "array", "items": {
                    "type": "object", "required": ["price"],
                    "properties": {"price": {"type": "number", "minimum": 0}}
                }},
                "email": {"type": "string", "format": "email"}
            }
        })
    }

    #[test]
    fn valid_data() {
        let out = call(json!({"schema": order_schema(), "data": {"items": [{"price": 1.5}]}})).unwrap();
        assert_eq!(out, json!({"valid": true, "errors": []}));
    }

    #[test]
    fn lists_every_violation_with_paths() {
        let data = json!({"items": [{"price": -1}, {}]});
        let out = call(json!({"schema": order_schema(), "data": data})).unwrap();
        assert_eq!(out["valid"], false);
        let errors = out["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!(errors[0]["path"], "/items/0/price");
        assert!(errors[0]["message"].as_str().unwrap().contains("minimum of 0"));
        assert_eq!(errors[0]["schema_path"], "/properties/items/items/properties/price/minimum");
        assert_eq!(errors[1]["path"], "/items/1");
        assert!(errors[1]["message"].as_str().unwrap().contains("\"price\" is a required property"));
    }

    #[test]
    fn formats_only_when_asked() {
        let data = json!({"items": [], "email": "not-an-address"});
        let out = call(json!({"schema": order_schema(), "data": data})).unwrap();
        assert_eq!(out["valid"], true);
        let out = call(json!({"schema": order_schema(), "data": data, "formats": true})).unwrap();
        assert_eq!(out["errors"][0]["path"], "/email");
    }

    #[test]
    fn invalid_schema_is_invalid_input() {
        let e = call(json!({"schema": {"type": "banana"}, "data": 1})).unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        assert!(e.message().starts_with("schema is not a valid JSON Schema"), "{e}");
        let e = call(json!({"schema": {"$ref": "https://example.com/s.json"}, "data": 1})).unwrap_err();
        assert_eq!(e.code(), "invalid_input", "{e}");
        let e = call(json!({"data": 1})).unwrap_err();
        assert!(e.message().contains("missing field `schema`"), "{e}");
    }

    #[test]
    fn boolean_schemas_and_drafts() {
        assert_eq!(call(json!({"schema": false, "data": 1})).unwrap()["valid"], false);
        let draft4 =
            json!({"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 3, "exclusiveMaximum": true});
        assert_eq!(call(json!({"schema": draft4, "data": 3})).unwrap()["valid"], false);
    }
}
