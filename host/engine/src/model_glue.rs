//! The one place the engine names `weft-model` items, so a change of the
//! model's shape touches one file.

pub use weft_model::notify::{Notify, NotifyOn, NotifyTarget};
pub use weft_model::{
    Action, CodeRef, Condition, Definition, EdgeOn, ErrorKind, Graph, Join, Limits, Problem, Problems, RetryPolicy,
    Scope, Step, StepOutcome, Template, Unresolved, did_you_mean,
};

use serde_json::Value;

/// Parse and validate a stored definition (a run's pinned plan).
pub fn parse_definition(v: &Value) -> Result<Definition, Problems> {
    weft_model::from_value(v, &weft_model::NoSchemas).map_err(Problems)
}

/// Check a run input against the definition's `input_schema`.
pub fn check_input(def: &Definition, input: &Value) -> Result<(), Problems> {
    weft_model::validate_input(def, input).map_err(Problems)
}

/// A ref that resolved to nothing, as the step error it causes (kind
/// `validation`: the definition's to fix, never retried).
pub fn unresolved_error(u: Unresolved) -> crate::error::StepError {
    crate::error::StepError::new(ErrorKind::Validation, u.message, false)
}
