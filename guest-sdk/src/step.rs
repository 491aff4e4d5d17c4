//! The [`Step`] trait and the types around it, independent of the WIT.

use crate::StepError;
use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};

/// Who is running the step and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The run this invocation belongs to (`r_...`); empty outside a run.
    pub run_id: String,
    /// The step's name in the workflow definition.
    pub step: String,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// `<run_id>/<step>[/<item>]/<attempt>`: stable across crashes; use it to
    /// make a side effect happen once.
    pub idempotency_key: String,
    /// Wall-clock deadline of this attempt, milliseconds since the Unix epoch.
    pub deadline_ms: u64,
}

impl Default for Context {
    /// A context for tests: empty ids, attempt 1, no deadline (`u64::MAX`).
    fn default() -> Self {
        Context {
            run_id: String::new(),
            step: String::new(),
            attempt: 1,
            idempotency_key: String::new(),
            deadline_ms: u64::MAX,
        }
    }
}

/// What `describe` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The step's name, such as `json-select`.
    pub name: String,
    /// What the step does, for a person or an LLM.
    pub description: String,
    /// The guest's version.
    pub version: String,
    /// JSON Schema of the input, as JSON text.
    pub input_schema: Option<String>,
    /// JSON Schema of the output, as JSON text.
    pub output_schema: Option<String>,
}

/// What a successful invocation produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The step's output as JSON text.
    Done(String),
    /// The whole run is rejected, with a reason.
    Reject(String),
}

/// A step function's return type: `Result<T, E>` where `E` converts into a
/// [`StepError`]. `#[step]` uses it to find the output type.
#[diagnostic::on_unimplemented(
    message = "a step must return `Result<Out, StepError>`, not `{Self}`",
    label = "not a `Result<Out, E>` with `E: Into<StepError>`"
)]
pub trait IntoStepResult {
    /// The output type (the `Ok` type).
    type Ok;
    /// Convert into `Result<Self::Ok, StepError>`.
    fn into_step_result(self) -> Result<Self::Ok, StepError>;
}

impl<T, E: Into<StepError>> IntoStepResult for Result<T, E> {
    type Ok = T;
    fn into_step_result(self) -> Result<T, StepError> {
        self.map_err(Into::into)
    }
}

/// A code step. `#[step]` implements it on a unit struct `WeftStep`; every
/// `Step` is exported as the component's `describe` and `run` when the
/// struct is passed to the export macro (which `#[step]` does on wasm).
///
/// In native tests, call [`Step::call`] with JSON text to exercise the whole
/// path a host takes, parsing and error mapping included.
pub trait Step {
    /// The input, parsed from the input JSON.
    type Input: DeserializeOwned + JsonSchema;
    /// The output, serialized to JSON.
    type Output: Serialize + JsonSchema;
    /// The step's name.
    const NAME: &'static str;
    /// What the step does.
    const DESCRIPTION: &'static str;
    /// The guest's version.
    const VERSION: &'static str;

    /// One invocation, typed.
    fn run(ctx: &Context, input: Self::Input) -> Result<Self::Output, StepError>;

    /// Name, description, version and the JSON Schemas of input and output.
    fn metadata() -> Metadata {
        Metadata {
            name: Self::NAME.to_string(),
            description: Self::DESCRIPTION.trim().to_string(),
            version: Self::VERSION.to_string(),
            input_schema: Some(schema_json::<Self::Input>()),
            output_schema: Some(schema_json::<Self::Output>()),
        }
    }

    /// One invocation over JSON text, as the host makes it. Empty input
    /// means `null`. A parse error is `invalid_input` naming the field;
    /// [`StepError::reject`] becomes [`Outcome::Reject`].
    fn call(ctx: &Context, input: &str) -> Result<Outcome, StepError> {
        let input = match input.trim() {
            "" => "null",
            _ => input,
        };
        let de = &mut serde_json::Deserializer::from_str(input);
        let parsed: Self::Input = serde_path_to_error::deserialize(&mut *de)?;
        de.end()?;
        match Self::run(ctx, parsed) {
            Ok(out) => serde_json::to_string(&out)
                .map(Outcome::Done)
                .map_err(|e| StepError::new("invalid_output", format!("output: {e}"))),
            Err(e) if e.is_reject() => Ok(Outcome::Reject(e.message().to_string())),
            Err(e) => Err(e),
        }
    }

    /// Runs the step natively on a JSON value with a default context, for
    /// unit tests: the output as a JSON value, or the step's error.
    ///
    /// # Panics
    /// When the step rejects the run (test that with [`Step::call`]).
    fn call_json(input: serde_json::Value) -> Result<serde_json::Value, StepError> {
        match Self::call(&Context::default(), &input.to_string())? {
            Outcome::Done(text) => Ok(serde_json::from_str(&text).expect("a step's output is JSON")),
            Outcome::Reject(reason) => panic!("the step rejected the run: {reason}"),
        }
    }
}

/// The JSON Schema of `T` as JSON text.
fn schema_json<T: JsonSchema>() -> String {
    let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    serde_json::to_string(&schema).expect("a JSON Schema serializes")
}
