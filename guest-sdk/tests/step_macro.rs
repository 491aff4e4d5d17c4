//! `#[step]` on the host target: metadata, JSON in and out, error mapping.

use serde::{Deserialize, Serialize};
use weft_guest::{Context, Outcome, Step, StepError, step};

mod two_args {
    use super::*;

    #[derive(Deserialize, schemars::JsonSchema)]
    pub struct In {
        /// The address to check.
        pub email: String,
        #[serde(default)]
        pub tags: Vec<Tag>,
    }

    #[derive(Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    pub struct Tag {
        pub weight: u8,
    }

    #[derive(Serialize, schemars::JsonSchema)]
    pub struct Out {
        pub ok: bool,
        pub attempt: u32,
    }

    /// Check an address.
    ///
    /// Second paragraph.
    #[step]
    pub(crate) fn run(ctx: &Context, input: In) -> Result<Out, StepError> {
        weft_guest::log!("checking {}", input.email);
        weft_guest::log!(warn: "{} tags", input.tags.len());
        weft_guest::progress("half way");
        weft_guest::artifact("note.txt", "text/plain", b"hi");
        match input.email.as_str() {
            "spam@example.com" => Err(StepError::reject("spammer")),
            "busy@example.com" => Err(StepError::retryable("busy", "try later")),
            e => Ok(Out { ok: e.contains('@'), attempt: ctx.attempt }),
        }
    }
}

mod one_arg {
    use super::*;

    #[step(name = "double", description = "Doubles a number", version = "9.9.9")]
    pub fn double(n: i64) -> weft_guest::Result<i64> {
        n.checked_mul(2).ok_or_else(|| StepError::invalid_input("too big"))
    }

    #[test]
    fn explicit_arguments_and_plain_input() {
        let m = WeftStep::metadata();
        assert_eq!(
            (m.name.as_str(), m.description.as_str(), m.version.as_str()),
            ("double", "Doubles a number", "9.9.9")
        );
        assert_eq!(WeftStep::call(&Context::default(), "21").unwrap(), Outcome::Done("42".into()));
        assert_eq!(double(2).unwrap(), 4, "the function stays callable");
        let e = WeftStep::call(&Context::default(), &i64::MAX.to_string()).unwrap_err();
        assert_eq!((e.code(), e.message()), ("invalid_input", "too big"));
    }
}

fn call(input: &str) -> Result<Outcome, StepError> {
    let ctx = Context { attempt: 3, ..Context::default() };
    two_args::WeftStep::call(&ctx, input)
}

#[test]
fn defaults_come_from_the_package_and_doc_comment() {
    let m = two_args::WeftStep::metadata();
    assert_eq!(m.name, "weft-guest");
    assert_eq!(m.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(m.description, "Check an address.\n\nSecond paragraph.");
    let input: serde_json::Value = serde_json::from_str(&m.input_schema.unwrap()).unwrap();
    assert_eq!(input["properties"]["email"]["description"], "The address to check.");
    assert_eq!(input["required"], serde_json::json!(["email"]));
    let output: serde_json::Value = serde_json::from_str(&m.output_schema.unwrap()).unwrap();
    assert_eq!(output["properties"]["attempt"]["type"], "integer");
}

#[test]
fn done_reject_and_errors() {
    assert_eq!(call(r#"{"email":"a@b"}"#).unwrap(), Outcome::Done(r#"{"ok":true,"attempt":3}"#.into()));
    assert_eq!(call(r#"{"email":"spam@example.com"}"#).unwrap(), Outcome::Reject("spammer".into()));
    let e = call(r#"{"email":"busy@example.com"}"#).unwrap_err();
    assert!(e.is_retryable() && e.code() == "busy");
}

#[test]
fn serde_errors_name_the_path_and_the_expectation() {
    let e = call(r#"{"email":"a@b","tags":[{"weight":1},{"weight":300}]}"#).unwrap_err();
    assert_eq!(e.code(), "invalid_input");
    assert!(!e.is_retryable());
    assert_eq!(e.message(), "input.tags[1].weight: invalid value: integer `300`, expected u8 (line 1, column 49)");
    let e = call(r#"{"tags":[]}"#).unwrap_err();
    assert_eq!(e.message(), "input: missing field `email` (line 1, column 11)");
    let e = call(r#"{"email":"a@b"} trailing"#).unwrap_err();
    assert!(e.message().contains("trailing characters"), "{}", e.message());
    let e = call("").unwrap_err();
    assert!(e.message().starts_with("input: invalid type: null"), "{}", e.message());
}
