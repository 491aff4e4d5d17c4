//! Refs checked against the JSON Schemas of what they read, so validation
//! agrees with running: a ref that can never have a value, or that hands a
//! step a value of the wrong type, is a problem before any run.
//!
//! What a ref reads has a schema when something declares one: the run's
//! input (`input_schema`), a plugin's or a tool's output (their declared
//! output schemas), a signal wait (its `schema`), and any `for_each` step
//! (an array). Walking a ref's path through that schema, a field of a
//! string or a number (`@a.length` of an array), an index of an object, or
//! a property a closed schema (`additionalProperties: false`) does not list
//! is a problem. An exact ref placed where the step's input schema wants
//! another type (a string where a number is wanted) is one too. Anything a
//! schema leaves open (`anyOf`, `$ref`, no `type`) is not judged: only what
//! the schemas rule out is refused.

use serde_json::Value;

use crate::definition::{Action, Definition, Step};
use crate::json_schema::SchemaLookup;
use crate::problem::{Problem, did_you_mean, shown};
use crate::refs::{Ref, RefRoot, Segment};

/// The schema of what `r` reads, and whose it is (for messages), when
/// something declares one.
pub(crate) fn source_schema(def: &Definition, lookup: &dyn SchemaLookup, r: &Ref) -> Option<(Value, String)> {
    match &r.root {
        RefRoot::Input => def.input_schema.clone().map(|s| (s, "the input_schema".to_string())),
        RefRoot::Step(name) => {
            let step = def.steps.iter().find(|s| &s.name == name)?;
            step_output_schema(step, lookup)
        }
        _ => None,
    }
}

/// The schema of a step's output, when declared.
fn step_output_schema(step: &Step, lookup: &dyn SchemaLookup) -> Option<(Value, String)> {
    let one = match &step.action {
        Action::Code(c) => lookup.code_output_schema(c).map(|s| (s, format!("plugin {}'s output schema", c.shown()))),
        Action::Tool(t) if step.transform.is_none() => lookup
            .tool_output_schema(&t.server, &t.name)
            .map(|s| (s, format!("tool {}.{}'s output schema", t.server, t.name))),
        Action::Wait(w) => w.schema.clone().map(|s| (s, "the wait's `schema`".to_string())),
        _ => None,
    };
    if step.for_each.is_some() {
        let items = one.map(|(s, _)| s).unwrap_or_else(|| Value::Object(Default::default()));
        let what = format!("the output of for_each step `{}`, an array of its items' outputs", step.name);
        return Some((serde_json::json!({"type": "array", "items": items}), what));
    }
    one
}

/// Where walking a ref through a schema ends.
pub(crate) enum Walk<'a> {
    /// The schema of the value the ref reads.
    Found(&'a Value),
    /// The schema leaves it open.
    Open,
    /// The ref can never have a value.
    Wrong(Problem),
}

/// The JSON types `schema` allows, when it says (`type`, `const`, `enum`).
pub(crate) fn types(schema: &Value) -> Option<Vec<String>> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(vec![t.clone()]),
        Some(Value::Array(ts)) => Some(ts.iter().filter_map(|t| t.as_str().map(String::from)).collect()),
        _ => None,
    }
}

fn allows(types: &[String], t: &str) -> bool {
    types.iter().any(|x| x == t || (t == "integer" && x == "number") || (t == "number" && x == "integer"))
}

fn list(types: &[String]) -> String {
    types
        .iter()
        .map(|t| format!("{} {t}", if t.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Walks `r`'s path through `schema` (`whose` names it in messages), the
/// problem at `at`.
pub(crate) fn walk<'a>(schema: &'a Value, whose: &str, r: &Ref, at: &str) -> Walk<'a> {
    if r.optional {
        return Walk::Open;
    }
    let mut node = schema;
    let mut walked = match &r.root {
        RefRoot::Input => "@input".to_string(),
        RefRoot::Step(n) => format!("@{n}"),
        _ => return Walk::Open,
    };
    for seg in &r.path {
        let ts = types(node);
        let (key, index) = match seg {
            Segment::Key(k) => (k.clone(), None),
            Segment::Index(i) => (i.to_string(), Some(*i)),
        };
        if let Some(ts) = &ts {
            let field_ok = allows(ts, "object") || (index.is_some() && allows(ts, "array"));
            if !field_ok {
                let what =
                    if index.is_some() { format!("no item {key}") } else { format!("no field `{}`", shown(&key)) };
                let hint = if allows(ts, "array") && key == "length" {
                    "count with the `jq` plugin (`{\"data\": \"@…\", \"filter\": \"length\"}`), or read an item by index (`.0`)".to_string()
                } else if allows(ts, "array") {
                    "an array's items are read by index (`.0`)".to_string()
                } else {
                    format!("use `{walked}` itself")
                };
                let msg = format!("`{walked}` is {} ({whose}): it has {what}", list(ts));
                return Walk::Wrong(Problem::new(at, msg).hint(hint));
            }
        }
        if let (Some(_), Some(ts)) = (index, &ts)
            && allows(ts, "array")
            && !allows(ts, "object")
        {
            node = match node.get("items") {
                Some(items) if items.is_object() => items,
                _ => return Walk::Open,
            };
        } else {
            let props = node.get("properties").and_then(Value::as_object);
            match props.and_then(|p| p.get(&key)) {
                Some(next) => node = next,
                None => {
                    let closed = node.get("additionalProperties") == Some(&Value::Bool(false));
                    let Some(props) = props.filter(|_| closed) else { return Walk::Open };
                    let hint = match did_you_mean(&key, props.keys().map(String::as_str)) {
                        Some(h) => h,
                        None => {
                            let names: Vec<String> = props.keys().map(|n| format!("`{n}`")).collect();
                            format!("its properties are {}", names.join(", "))
                        }
                    };
                    let msg = format!(
                        "`{walked}.{key}` can never have a value: {whose} allows no property `{}` there",
                        shown(&key)
                    );
                    let end = if whose == "the input_schema" {
                        format!("; add `{key}` to the schema's properties, or write `@input…?` if it may be absent")
                    } else {
                        "; write the ref with a `?` if it may be absent".to_string()
                    };
                    return Walk::Wrong(Problem::new(at, msg).hint(format!("{hint}{end}")));
                }
            }
        }
        walked.push('.');
        walked.push_str(&key);
    }
    Walk::Found(node)
}

/// The schema at JSON Pointer `pointer` of `schema` (through `properties`
/// and `items`), when the schema says.
pub(crate) fn at_pointer<'a>(schema: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut node = schema;
    for part in pointer.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        node = match node.get("properties").and_then(|p| p.get(&part)) {
            Some(n) => n,
            None if part.parse::<usize>().is_ok() => node.get("items").filter(|i| i.is_object())?,
            None => return None,
        };
    }
    Some(node)
}

/// A problem when the value `r` reads (of `source` types, per `whose`) can
/// never be of a type `target` (the step's input schema at the ref's place,
/// per `wants`) allows.
pub(crate) fn type_mismatch(
    source: &Value,
    whose: &str,
    target: &Value,
    wants: &str,
    r: &Ref,
    at: &str,
) -> Option<Problem> {
    let (from, to) = (types(source)?, types(target)?);
    if from.iter().any(|t| allows(&to, t)) {
        return None;
    }
    let text = r.to_string();
    Some(
        Problem::new(at, format!("`{text}` is {} ({whose}) where {wants} wants {}", list(&from), list(&to)))
            .hint("pass a value of that type (convert it in a code step, e.g. the `jq` plugin), or fix the schema"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::definition::CodeRef;
    use crate::json_schema::SchemaLookup;

    struct Schemas;
    impl SchemaLookup for Schemas {
        fn tool_input_schema(&self, _server: &str, _tool: &str) -> Option<Value> {
            Some(json!({"type": "object", "properties": {"a": {"type": "number"}, "path": {"type": "string"}}}))
        }
        fn tool_output_schema(&self, _server: &str, tool: &str) -> Option<Value> {
            (tool == "read").then(|| {
                json!({"type": "object", "properties": {"content": {"type": "string"}}, "additionalProperties": false})
            })
        }
        fn code_output_schema(&self, _code: &CodeRef) -> Option<Value> {
            Some(json!({"type": "object", "properties": {"rows": {"type": "array"}, "columns": {"type": "array"}}}))
        }
    }

    use super::*;

    fn problems(def: Value) -> Vec<String> {
        match crate::from_value(&def, &Schemas) {
            Ok(_) => vec![],
            Err(ps) => ps.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn tool(name: &str, input: Value) -> Value {
        json!({"name": name, "tool": {"server": "s", "name": name}, "input": input})
    }

    #[test]
    fn a_field_of_an_array_is_refused_with_the_way_to_count() {
        let def = json!({"name": "w", "input_schema": {"type": "object"}, "steps": [
            {"name": "each", "for_each": [1, 2], "code": {"plugin": "p"}, "input": {"x": "@item"}},
            {"name": "n", "return": {"count": "@each.length", "first": "@each.0.rows", "maybe": "@each.length?"}}]});
        let got = problems(def);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("/steps/1/return/count: `@each` is an array"), "{got:?}");
        assert!(got[0].contains("no field `length`") && got[0].contains("jq"), "{got:?}");
    }

    #[test]
    fn a_property_a_closed_output_schema_does_not_list_is_refused() {
        let def = json!({"name": "w", "steps": [tool("read", json!({"path": "x"})),
            {"name": "out", "return": {"t": "@read.text", "c": "@read.content"}}]});
        let got = problems(def);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains("`@read.text` can never have a value: tool s.read's output schema"), "{got:?}");
        assert!(got[0].contains("its properties are `content`"), "{got:?}");
    }

    #[test]
    fn a_ref_of_the_wrong_type_for_the_tools_input_is_refused() {
        let def = json!({"name": "w",
            "input_schema": {"type": "object", "properties": {"n": {"type": "string"}, "k": {"type": "integer"}}},
            "steps": [tool("sum", json!({"a": "@input.n"})), tool("sum2", json!({"a": "@input.k", "path": "@input.n"}))]});
        let got = problems(def);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("/steps/0/input/a: `@input.n` is a string (the input_schema) where tool s.sum's input schema wants a number"), "{got:?}");
        // Text built around a ref is a string whatever the ref: not judged.
        let def = json!({"name": "w", "input_schema": {"type": "object", "properties": {"n": {"type": "string"}}},
            "steps": [tool("sum", json!({"path": "n=@input.n"}))]});
        assert!(problems(def).is_empty());
    }
}

/// Warnings (not problems): refs to a top-level input field the
/// `input_schema` lists no property for, where the schema allows fields it
/// does not list (closed, they are problems: validation refuses them). A run whose
/// input lacks the field fails at that ref; a typo (`@input.nmae`) is
/// the likely cause.
pub fn unlisted_input_refs(def: &Definition) -> Vec<Problem> {
    let Some(schema) = &def.input_schema else { return vec![] };
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return vec![] };
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        return vec![];
    }
    let warn = |r: &Ref, at: String| -> Option<Problem> {
        if r.root != RefRoot::Input || r.optional {
            return None;
        }
        let Some(Segment::Key(k)) = r.path.first() else { return None };
        if props.contains_key(k) {
            return None;
        }
        let near = match did_you_mean(k, props.keys().map(String::as_str)) {
            Some(h) => format!("{h}; "),
            None => {
                let names: Vec<String> = props.keys().map(|n| format!("`{n}`")).collect();
                format!("its properties are {}; ", names.join(", "))
            }
        };
        let msg = format!(
            "`@input.{}`: the input_schema lists no property `{}`, so a run whose input has none fails here",
            shown(k),
            shown(k)
        );
        Some(Problem::new(at, msg).hint(format!(
            "{near}add `{k}` to the input_schema's properties, or write `@input.{k}?` if it may be absent"
        )))
    };
    let mut out = vec![];
    for (i, step) in def.steps.iter().enumerate() {
        let meta = crate::decode::StepMeta::of_step(i, step);
        for r in step.refs() {
            let at = format!("{}{}", crate::validate::part_base(&meta, r.part), r.pointer);
            out.extend(warn(r.reference, at));
        }
    }
    for site in def.output.iter().flat_map(|o| o.sites()) {
        out.extend(warn(&site.reference, format!("/output{}", site.pointer)));
    }
    out
}

#[cfg(test)]
mod warning_tests {
    use serde_json::json;

    #[test]
    fn an_input_field_the_schema_does_not_list_is_a_warning() {
        let def = crate::from_value(
            &json!({"name": "w", "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
                "steps": [{"name": "a", "return": {"hi": "@input.nmae", "ok": "@input.name", "maybe": "@input.x?"}}],
                "output": {"n": "@input.nmae"}}),
            &crate::NoSchemas,
        )
        .unwrap();
        let w = super::unlisted_input_refs(&def);
        let paths: Vec<&str> = w.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, vec!["/steps/0/return/hi", "/output/n"], "{w:?}");
        assert!(w[0].message.contains("lists no property `nmae`"), "{w:?}");
        assert!(w[0].hint.as_deref().unwrap_or("").contains("`name`"), "{w:?}");
    }
}
