//! What refs resolve against: the [`Scope`] trait (implemented by the
//! engine) and [`MapScope`], a plain implementation held in maps.

use std::collections::HashMap;

use serde_json::Value;

use crate::status::StepState;

/// A step's state and output as seen by refs.
#[derive(Debug, Clone, Copy)]
pub struct StepOutcome<'a> {
    pub status: StepState,
    /// The output (for a failed step handled by `continue_on_error`, the
    /// engine passes the error object here).
    pub output: &'a Value,
}

/// What refs resolve against. Implemented by the engine; [`MapScope`] is a
/// plain implementation for tests, the CLI and the recording proxy.
pub trait Scope {
    fn input(&self) -> &Value;
    /// `None` when the step has not finished (or does not exist): refs give `null`.
    fn step(&self, name: &str) -> Option<StepOutcome<'_>>;
    fn item(&self) -> Option<&Value> {
        None
    }
    fn index(&self) -> Option<u64> {
        None
    }
    fn run_id(&self) -> &str;
    /// The run's labels as an object of strings (`@run.labels`).
    fn labels(&self) -> Value {
        Value::Object(Default::default())
    }
    /// What the run did so far (`@run.resume`); null where none is kept.
    fn resume(&self) -> Value {
        Value::Null
    }
}

/// A [`Scope`] held in maps.
#[derive(Debug, Clone, Default)]
pub struct MapScope {
    pub input: Value,
    pub steps: HashMap<String, (StepState, Value)>,
    pub item: Option<Value>,
    pub index: Option<u64>,
    pub run_id: String,
    /// The run's labels (`@run.labels`): an object, or null for none.
    pub labels: Value,
}

impl MapScope {
    pub fn new(input: Value) -> MapScope {
        MapScope { input, ..Default::default() }
    }
    /// Record a succeeded step.
    pub fn with_step(mut self, name: &str, output: Value) -> MapScope {
        self.steps.insert(name.to_owned(), (StepState::Succeeded, output));
        self
    }
    pub fn with_status(mut self, name: &str, status: StepState, output: Value) -> MapScope {
        self.steps.insert(name.to_owned(), (status, output));
        self
    }
    pub fn with_item(mut self, item: Value, index: u64) -> MapScope {
        self.item = Some(item);
        self.index = Some(index);
        self
    }
}

impl Scope for MapScope {
    fn input(&self) -> &Value {
        &self.input
    }
    fn step(&self, name: &str) -> Option<StepOutcome<'_>> {
        self.steps.get(name).map(|(status, output)| StepOutcome { status: *status, output })
    }
    fn item(&self) -> Option<&Value> {
        self.item.as_ref()
    }
    fn index(&self) -> Option<u64> {
        self.index
    }
    fn run_id(&self) -> &str {
        &self.run_id
    }

    fn labels(&self) -> Value {
        match &self.labels {
            Value::Null => Value::Object(Default::default()),
            v => v.clone(),
        }
    }
}
