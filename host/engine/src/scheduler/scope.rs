//! What refs resolve against while a run executes.

use std::collections::HashMap;

use serde_json::Value;

use crate::model_glue::{Scope, StepOutcome};
use crate::state::StepState;

/// A finished step as refs see it.
pub(super) struct Seen<'a> {
    pub state: StepState,
    /// Null for a skipped step; the error object for a failed step with
    /// `continue_on_error`.
    pub output: &'a Value,
}

pub(super) struct RunScope<'a, F: Fn(usize) -> Seen<'a>> {
    pub run_id: &'a str,
    pub input: &'a Value,
    pub labels: &'a Value,
    pub names: &'a HashMap<String, usize>,
    pub seen: F,
    pub item: Option<(&'a Value, u64)>,
    /// What `@run.resume` reads (none while the summary is rendered).
    pub resume: Option<&'a dyn Fn() -> Value>,
}

impl<'a, F: Fn(usize) -> Seen<'a>> Scope for RunScope<'a, F> {
    fn input(&self) -> &Value {
        self.input
    }

    /// Only finished steps are visible: a ref to an unfinished one gives
    /// null (possible with `join: any`/`race`).
    fn step(&self, name: &str) -> Option<StepOutcome<'_>> {
        let i = *self.names.get(name)?;
        let s = (self.seen)(i);
        s.state.is_terminal().then_some(StepOutcome { status: s.state, output: s.output })
    }

    fn item(&self) -> Option<&Value> {
        self.item.map(|(v, _)| v)
    }

    fn index(&self) -> Option<u64> {
        self.item.map(|(_, i)| i)
    }

    fn run_id(&self) -> &str {
        self.run_id
    }

    fn labels(&self) -> Value {
        self.labels.clone()
    }

    fn resume(&self) -> Value {
        self.resume.map(|r| r()).unwrap_or(Value::Null)
    }
}
