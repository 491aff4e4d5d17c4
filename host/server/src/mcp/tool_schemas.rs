//! The JSON Schemas of weft's own tools as `tools/list` shows them.
//!
//! Two jobs. [`object_schemas`] makes schemars' output acceptable to
//! strict clients (no boolean subschemas, no Rust-type formats). [`brief`]
//! keeps `tools/list` small: an agent pays for every byte of it on every
//! turn, and the full output schemas of weft's tools were more than half
//! of it. A brief output schema keeps each top-level field with its JSON
//! type, drops descriptions and what is nested, and names the resource
//! `weft://schema/tools/<tool>` that holds the full schema. Dropping
//! constraints only loosens the schema, so every answer still validates.

use rmcp::model::JsonObject;
use serde_json::{Map, Value};

/// Where the full output schema of tool `<name>` is read.
pub const TOOL_SCHEMA_PREFIX: &str = "weft://schema/tools/";

/// The output schema `full` of tool `tool`, brief: each top-level
/// property with its type(s).
pub fn brief(tool: &str, full: &JsonObject) -> JsonObject {
    let defs = full.get("$defs").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut properties = Map::new();
    if let Some(Value::Object(props)) = full.get("properties") {
        for (name, p) in props {
            let mut out = Map::new();
            if let Some(t) = type_of(p, &defs, 0) {
                out.insert("type".into(), t);
            }
            properties.insert(name.clone(), Value::Object(out));
        }
    }
    let mut out = JsonObject::new();
    out.insert("type".into(), Value::String("object".into()));
    out.insert("description".into(), Value::String(format!("In brief; in full: {TOOL_SCHEMA_PREFIX}{tool}")));
    out.insert("properties".into(), Value::Object(properties));
    out
}

/// `schema` with every `description` on one line (doc comments wrap).
pub fn one_line_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                match v {
                    Value::String(d) if k == "description" && d.contains('\n') => *d = d.replace('\n', " "),
                    _ => one_line_descriptions(v),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(one_line_descriptions),
        _ => {}
    }
}

/// The JSON type(s) a schema allows, as a `type` value, when they can be
/// told (through `$ref`, `anyOf`/`oneOf`, `enum` and `const`).
fn type_of(schema: &Value, defs: &Map<String, Value>, depth: u8) -> Option<Value> {
    if depth > 8 {
        return None;
    }
    let s = schema.as_object()?;
    if let Some(t) = s.get("type") {
        return Some(t.clone());
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/")?;
        return type_of(defs.get(name)?, defs, depth + 1);
    }
    let values: Option<Vec<Value>> = match (s.get("enum"), s.get("const")) {
        (Some(Value::Array(e)), _) => Some(e.clone()),
        (_, Some(c)) => Some(vec![c.clone()]),
        _ => None,
    };
    let mut types: Vec<String> = vec![];
    if let Some(values) = values {
        for v in values {
            types.push(weft_model::schema_type(&v).to_string());
        }
    } else {
        let alternatives = s.get("anyOf").or_else(|| s.get("oneOf"))?.as_array()?;
        for a in alternatives {
            match type_of(a, defs, depth + 1)? {
                Value::String(t) => types.push(t),
                Value::Array(ts) => types.extend(ts.into_iter().filter_map(|t| t.as_str().map(String::from))),
                _ => return None,
            }
        }
    }
    types.dedup();
    let mut unique: Vec<String> = vec![];
    for t in types {
        if !unique.contains(&t) {
            unique.push(t);
        }
    }
    match unique.len() {
        0 => None,
        1 => Some(Value::String(unique.remove(0))),
        _ => Some(Value::Array(unique.into_iter().map(Value::String).collect())),
    }
}

/// `schema` with every boolean subschema written as an object (`true` as
/// `{}`, `false` as `{"not": {}}`) and without schemars' Rust-type formats:
/// schemars writes `true` for "any JSON value", which JSON Schema allows
/// but some clients' validators (the MCP Inspector's, for one) refuse in
/// `properties`.
pub fn object_schemas(mut schema: JsonObject) -> JsonObject {
    fn fix(v: &mut serde_json::Value) {
        use serde_json::Value;
        match v {
            Value::Bool(true) => *v = Value::Object(Default::default()),
            Value::Bool(false) => *v = serde_json::json!({"not": {}}),
            Value::Object(m) => {
                // schemars' Rust-type formats (`uint32`, `int64`, `double`)
                // are not JSON Schema formats; validators warn about them.
                if m.get("format")
                    .and_then(Value::as_str)
                    .is_some_and(|f| f.starts_with("uint") || f.starts_with("int") || f == "double" || f == "float")
                {
                    m.remove("format");
                }
                for (k, x) in m.iter_mut() {
                    // Keys whose values are schemas or maps/lists of schemas.
                    let schemaish = matches!(
                        k.as_str(),
                        "properties"
                            | "items"
                            | "additionalProperties"
                            | "$defs"
                            | "definitions"
                            | "anyOf"
                            | "oneOf"
                            | "allOf"
                            | "not"
                            | "prefixItems"
                            | "patternProperties"
                            | "if"
                            | "then"
                            | "else"
                    );
                    if schemaish {
                        match x {
                            Value::Object(inner)
                                if matches!(
                                    k.as_str(),
                                    "properties" | "$defs" | "definitions" | "patternProperties"
                                ) =>
                            {
                                inner.values_mut().for_each(fix)
                            }
                            Value::Array(a) => a.iter_mut().for_each(fix),
                            other => fix(other),
                        }
                    } else if x.is_object() {
                        fix(x);
                    }
                }
            }
            _ => {}
        }
    }
    // What says nothing a client needs: the dialect (a tool's schemas are
    // 2020-12 by default) and `default: null` (absent is null anyway).
    schema.remove("$schema");
    let mut v = serde_json::Value::Object(std::mem::take(&mut schema));
    fix(&mut v);
    drop_null_defaults(&mut v);
    match v {
        serde_json::Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// Removes every `"default": null` of a schema.
fn drop_null_defaults(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if m.get("default").is_some_and(serde_json::Value::is_null) {
                m.remove("default");
            }
            m.values_mut().for_each(drop_null_defaults);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_null_defaults),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_says_nothing_is_left_out() {
        let s = serde_json::json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "properties": {"a": {"type": ["string", "null"], "default": null}, "b": {"default": 3}}});
        let out = serde_json::Value::Object(object_schemas(s.as_object().unwrap().clone()));
        assert_eq!(
            out,
            serde_json::json!({"type": "object",
            "properties": {"a": {"type": ["string", "null"]}, "b": {"default": 3}}})
        );
    }

    #[test]
    fn boolean_subschemas_become_objects() {
        let s = serde_json::json!({"type": "object", "properties": {"input": true, "n": {"type": "integer", "format": "uint32"},
            "list": {"type": "array", "items": true}}, "additionalProperties": false,
            "$defs": {"Any": true}});
        let out = object_schemas(s.as_object().unwrap().clone());
        let out = serde_json::Value::Object(out);
        assert_eq!(out["properties"]["input"], serde_json::json!({}));
        assert_eq!(out["properties"]["n"], serde_json::json!({"type": "integer"}));
        assert_eq!(out["properties"]["list"]["items"], serde_json::json!({}));
        assert_eq!(out["additionalProperties"], serde_json::json!({"not": {}}));
        assert_eq!(out["$defs"]["Any"], serde_json::json!({}));
    }

    #[test]
    fn a_brief_schema_keeps_top_level_types_and_names_the_full_one() {
        let full = serde_json::json!({"type": "object", "required": ["id", "state"],
            "properties": {
                "id": {"type": "string", "description": "The run's id. Pass it to run_get."},
                "state": {"$ref": "#/$defs/RunState"},
                "parent": {"anyOf": [{"$ref": "#/$defs/Parent"}, {"type": "null"}]},
                "steps": {"type": "array", "items": {"$ref": "#/$defs/Parent"}},
                "output": {}},
            "$defs": {"RunState": {"oneOf": [{"const": "running"}, {"const": "failed"}]},
                "Parent": {"type": "object", "properties": {"run": {"type": "string"}}}}});
        let out = Value::Object(brief("run_get", full.as_object().unwrap()));
        assert_eq!(out["description"], "In brief; in full: weft://schema/tools/run_get");
        assert_eq!(out["properties"]["id"], serde_json::json!({"type": "string"}));
        assert_eq!(out["properties"]["state"], serde_json::json!({"type": "string"}));
        assert_eq!(out["properties"]["parent"], serde_json::json!({"type": ["object", "null"]}));
        assert_eq!(out["properties"]["steps"], serde_json::json!({"type": "array"}));
        assert_eq!(out["properties"]["output"], serde_json::json!({}));
        assert!(out.get("$defs").is_none() && out.get("required").is_none());
    }
}
