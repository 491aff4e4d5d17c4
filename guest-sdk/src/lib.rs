//! Write weft code steps in Rust: one typed function and one attribute.
//!
//! A code step is a WebAssembly component that targets the `step` world of
//! `wit/step.wit`: it exports `describe` (its name, description, version and
//! the JSON Schemas of its input and output) and `run` (one invocation). This
//! SDK hides the WIT: you write a plain function over serde types and put
//! [`#[step]`](step) on it.
//!
//! ```no_run
//! use weft_guest::{step, Context, StepError};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct In {
//!     /// The address to check.
//!     email: String,
//! }
//!
//! #[derive(serde::Serialize, schemars::JsonSchema)]
//! struct Out {
//!     ok: bool,
//!     error: Option<String>,
//! }
//!
//! #[step(name = "validate-email", description = "Check an address")]
//! fn run(ctx: &Context, input: In) -> Result<Out, StepError> {
//!     weft_guest::log!("attempt {} checks {}", ctx.attempt, input.email);
//!     if input.email.is_empty() {
//!         // Reject the whole run, not just this attempt.
//!         return Err(StepError::reject("no address given"));
//!     }
//!     let ok = input.email.contains('@');
//!     Ok(Out { ok, error: (!ok).then(|| "no @".to_string()) })
//! }
//! # fn main() {}
//! ```
//!
//! Build the guest with `cargo build --target wasm32-wasip2 --release` (crate
//! type `cdylib`): the result is a component that `weft plugin add` accepts.
//!
//! What `#[step]` does for you:
//! - `describe` returns the name, the description (default: the function's
//!   doc comment, else the package description), the version (default: the
//!   guest crate's `CARGO_PKG_VERSION`) and the JSON Schemas of the input type
//!   and of the `Ok` type, derived with [`schemars`]. Doc comments and
//!   `#[schemars(description = ..)]` on fields end up in the schema, which is
//!   what an LLM or a person reads to call the step.
//! - `run` parses the input JSON into your type; a mismatch becomes the step
//!   error `invalid_input` naming the JSON path and what was expected. Your
//!   `Ok` value is serialized to JSON; an `Err(StepError)` becomes the WIT
//!   `step-error`, except [`StepError::reject`], which rejects the whole run.
//! - It defines a unit struct `WeftStep` implementing [`Step`], so native unit
//!   tests can call [`Step::metadata`] and [`Step::call`] with JSON text.
//!
//! Mistakes are compile errors that point at the culprit, e.g. a step
//! without a return type:
//!
//! ```compile_fail
//! #[weft_guest::step(name = "broken")]
//! fn run(ctx: &weft_guest::Context, input: String) {}
//! # fn main() {}
//! ```
//!
//! or one with the wrong number of arguments:
//!
//! ```compile_fail
//! #[weft_guest::step(name = "broken")]
//! fn run(a: String, b: String, c: String) -> weft_guest::Result<String> { Ok(a) }
//! # fn main() {}
//! ```
//!
//! Host functions: [`log!`], [`progress`] and [`artifact`]. When compiled for
//! a non-wasm target (unit tests of a plugin's logic) they print to stderr.
#![deny(missing_docs)]

// Lets generated code name this crate `::weft_guest` from inside it too.
extern crate self as weft_guest;

mod error;
mod host;
mod step;

pub use error::StepError;
pub use host::{Level, artifact, log, progress, progress_data};
pub use step::{Context, IntoStepResult, Metadata, Outcome, Step};
pub use weft_guest_macros::step;

/// Re-exported so guests need not depend on it themselves.
pub use schemars;
/// Re-exported so guests need not depend on it themselves.
pub use serde_json;

/// `Result<T, StepError>`: what a step function returns.
pub type Result<T, E = StepError> = std::result::Result<T, E>;

/// Log a line at a level: `log!("x = {}", x)` logs at info,
/// `log!(warn: "slow: {} ms", ms)` at warn (levels: `trace`, `debug`, `info`,
/// `warn`, `error`). The line is kept with the step's attempt.
#[macro_export]
macro_rules! log {
    (trace: $($arg:tt)+) => { $crate::log($crate::Level::Trace, &::std::format!($($arg)+)) };
    (debug: $($arg:tt)+) => { $crate::log($crate::Level::Debug, &::std::format!($($arg)+)) };
    (info: $($arg:tt)+) => { $crate::log($crate::Level::Info, &::std::format!($($arg)+)) };
    (warn: $($arg:tt)+) => { $crate::log($crate::Level::Warn, &::std::format!($($arg)+)) };
    (error: $($arg:tt)+) => { $crate::log($crate::Level::Error, &::std::format!($($arg)+)) };
    ($($arg:tt)+) => { $crate::log($crate::Level::Info, &::std::format!($($arg)+)) };
}

/// Glue used by the code that `#[step]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    #![allow(missing_docs, unsafe_code, clippy::all)]

    wit_bindgen::generate!({
        path: "../wit",
        world: "step",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "weft_guest::__private",
        runtime_path: "::weft_guest::__private::wit_bindgen::rt",
    });

    pub use wit_bindgen;

    use crate::step::{self as sdk, Step};

    /// Every [`Step`] is a component export.
    impl<T: Step> Guest for T {
        fn describe() -> Metadata {
            let m = T::metadata();
            Metadata {
                name: m.name,
                description: m.description,
                version: m.version,
                input_schema: m.input_schema,
                output_schema: m.output_schema,
            }
        }

        fn run(ctx: Context, input: String) -> Result<Outcome, StepError> {
            let ctx = sdk::Context {
                run_id: ctx.run_id,
                step: ctx.step,
                attempt: ctx.attempt,
                idempotency_key: ctx.idempotency_key,
                deadline_ms: ctx.deadline_ms,
            };
            match T::call(&ctx, &input) {
                Ok(sdk::Outcome::Done(json)) => Ok(Outcome::Done(json)),
                Ok(sdk::Outcome::Reject(reason)) => Ok(Outcome::Reject(reason)),
                Err(e) => Err(StepError {
                    code: e.code().to_string(),
                    message: e.message().to_string(),
                    retryable: e.is_retryable(),
                }),
            }
        }
    }
}
