//! Workflow definitions: types, validation, refs and conditions (pure data,
//! no I/O, no clocks). The format and its rules, for users, are
//! docs/workflow-format.md.
//!
//! Entry point: [`parse_and_validate`] turns JSON text into a validated
//! [`Definition`] whose refs are compiled, or lists every [`Problem`] with
//! its JSON Pointer.

pub mod bounds;
pub mod condition;
mod decode;
pub mod definition;
pub mod early_return;
pub mod graph;
pub mod json_schema;
mod json_text;
pub mod labels;
pub mod lookalike;
pub mod notify;
pub mod problem;
mod ref_schemas;
pub use ref_schemas::unlisted_input_refs;
pub mod refs;
pub mod retry;
pub mod schema;
pub mod scope;
pub mod status;
pub mod template;
pub mod timestamp;
pub mod tool_ref;
pub mod validate;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

pub use condition::{Condition, Operator, Test, truthy};
pub use definition::{
    Action, AgentRef, Backoff, CodeRef, Definition, Edge, EdgeOn, ErrorKind, Join, Limits, NotAnArray, RunLimits,
    RunState, SleepSpec, Step, StepPart, StepRef, StepState, ToolRef, UnknownState, WaitReason, WaitSpec, WorkflowRef,
};
pub use graph::{Graph, GraphEdge};
pub use json_schema::{NoSchemas, SchemaLookup, schema_type, validate_against, validate_input};
pub use json_text::{JsonTextError, check_json_text, parse_json_text};
pub use labels::Labels;
pub use problem::{Problem, Problems, closest, did_you_mean, type_name};
pub use refs::{Ref, RefError, RefRoot, Segment, Unresolved, describe, parse_ref};
pub use retry::RetryPolicy;
pub use schema::definition_schema;
pub use scope::{MapScope, Scope, StepOutcome};
pub use template::{CompiledValue, Part, RefSite, Template, TemplateError};
pub use timestamp::Timestamp;
pub use validate::validate;

/// Parse JSON text and validate it. JSON syntax errors are reported at path
/// "" with line and column; everything else with the JSON Pointer of the
/// offending value.
pub fn parse_and_validate(json_text: &str, lookup: &dyn SchemaLookup) -> Result<Definition, Vec<Problem>> {
    let v: Value = parse_json_text(json_text).map_err(|e| vec![json_text_problem(&e)])?;
    from_value(&v, lookup)
}

/// The problem of text that is not one JSON document: a duplicate key at
/// its path, a syntax error at "" with its line and column.
pub fn json_text_problem(e: &JsonTextError) -> Problem {
    match &e.path {
        Some(path) => Problem::new(path.clone(), e.message.clone())
            .hint(format!("line {} column {}: keep one of the two", e.line, e.column)),
        None => Problem::new("", format!("invalid JSON: {e}"))
            .hint(format!("the JSON syntax breaks at line {} column {}", e.line, e.column)),
    }
}

/// Like [`parse_and_validate`], from an already parsed value.
pub fn from_value(v: &Value, lookup: &dyn SchemaLookup) -> Result<Definition, Vec<Problem>> {
    let mut problems = vec![];
    let Some(decoded) = decode::decode(v, &mut problems) else {
        return Err(problems);
    };
    validate::check(&decoded.def, &decoded.metas, decoded.flags, lookup, &mut problems);
    if problems.is_empty() { Ok(decoded.def) } else { Err(problems) }
}

/// Deserializing a `Definition` (e.g. one stored by the engine) runs the
/// same decoding and validation, without plugin or tool schemas.
impl<'de> Deserialize<'de> for Definition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        from_value(&v, &NoSchemas).map_err(|p| serde::de::Error::custom(Problems(p)))
    }
}
