//! What a WASI command can say beyond "here is my JSON result": its
//! conventions (docs/guests.md "WASI commands").
//!
//! - Exit 0: stdout is the result. A non-zero exit is a `guest_error`
//!   that a retry policy retries (`retryable: true`); exit 65 (`EX_DATAERR`)
//!   is a permanent failure, never retried.
//! - A `$weft` envelope: when stdout is a JSON object whose only key is
//!   `"$weft"`, it is `{"$weft": {"output": V, "artifacts": [...],
//!   "progress": [...]}}` (the result V, artifacts `{"name", "mime", "text"
//!   | "base64"}`, status updates `{"message", "data"?}` recorded in order
//!   as the command ends), or
//!   `{"$weft": {"error": {"message", "code"?, "retryable"?}}}` (the
//!   guest's own error, whatever the exit code; retryable unless it says
//!   `false`). Any language can print it; no SDK needed.

use base64::Engine as _;
use serde_json::Value;

use crate::GuestOutcome;
use crate::error::{GuestError, GuestErrorKind};
use crate::report::Collector;

/// The exit code of a permanent failure (sysexits' `EX_DATAERR`).
pub const PERMANENT_EXIT: i32 = 65;

/// The error of a command that exited `code` (non-zero), with the last
/// lines of its stderr.
pub(crate) fn exit_error(code: i32, tail: &str) -> GuestError {
    let permanent = code == PERMANENT_EXIT;
    let what = if permanent { " (a permanent failure: not retried)" } else { "" };
    GuestError {
        kind: GuestErrorKind::GuestError,
        message: if tail.is_empty() {
            format!("the guest exited with code {code}{what}")
        } else {
            format!("the guest exited with code {code}{what}: {tail}")
        },
        retryable: !permanent,
        code: Some(format!("exit_{code}")),
    }
}

fn invalid(at: &str, what: &str) -> GuestError {
    GuestError::new(
        GuestErrorKind::InvalidOutput,
        format!("the guest's `$weft` envelope is malformed at {at}: {what} (docs/guests.md, WASI commands)"),
    )
}

/// Unwraps a `$weft` envelope from a command's parsed stdout, putting its
/// artifacts into `collector`; any other value is the result as it is.
pub(crate) fn unwrap(v: Value, collector: &mut Collector) -> Result<GuestOutcome, GuestError> {
    let env = match v {
        Value::Object(mut m) if m.len() == 1 && m.contains_key("$weft") => m.remove("$weft").unwrap_or(Value::Null),
        other => return Ok(GuestOutcome::Done(other)),
    };
    let Value::Object(mut env) = env else { return Err(invalid("/$weft", "it must be an object")) };
    if let Some(unknown) = env.keys().find(|k| !matches!(k.as_str(), "output" | "error" | "artifacts" | "progress")) {
        return Err(invalid(
            &format!("/$weft/{unknown}"),
            "unknown field (expected output, error, artifacts, progress)",
        ));
    }
    if let Some(updates) = env.remove("progress") {
        let Value::Array(updates) = updates else { return Err(invalid("/$weft/progress", "it must be an array")) };
        for (i, u) in updates.into_iter().enumerate() {
            let at = format!("/$weft/progress/{i}");
            let Value::Object(mut u) = u else { return Err(invalid(&at, "an object `{\"message\", \"data\"?}`")) };
            let Some(Value::String(message)) = u.remove("message") else {
                return Err(invalid(&format!("{at}/message"), "a string is required"));
            };
            match u.remove("data") {
                Some(d) => collector.progress_text(message, &d.to_string()),
                None => collector.progress(message, None),
            }
        }
    }
    if let Some(arts) = env.remove("artifacts") {
        let Value::Array(arts) = arts else { return Err(invalid("/$weft/artifacts", "it must be an array")) };
        for (i, a) in arts.into_iter().enumerate() {
            let at = format!("/$weft/artifacts/{i}");
            let field = |k: &str| a.get(k).and_then(Value::as_str);
            let name = field("name").ok_or_else(|| invalid(&format!("{at}/name"), "a string is required"))?;
            let mime = field("mime").unwrap_or("application/octet-stream");
            let data = match (field("text"), field("base64")) {
                (Some(t), None) => t.as_bytes().to_vec(),
                (None, Some(b)) => base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|e| invalid(&format!("{at}/base64"), &format!("not base64: {e}")))?,
                _ => return Err(invalid(&at, "give exactly one of `text` and `base64`")),
            };
            collector.artifact(name.to_string(), mime.to_string(), data);
        }
    }
    match (env.remove("output"), env.remove("error")) {
        (Some(_), Some(_)) => Err(invalid("/$weft", "give `output` or `error`, not both")),
        (Some(out), None) => Ok(GuestOutcome::Done(out)),
        (None, Some(err)) => {
            let message = err.get("message").and_then(Value::as_str);
            let message = message.ok_or_else(|| invalid("/$weft/error/message", "a string is required"))?;
            Err(GuestError {
                kind: GuestErrorKind::GuestError,
                message: message.to_string(),
                retryable: err.get("retryable").and_then(Value::as_bool).unwrap_or(true),
                code: err.get("code").and_then(Value::as_str).map(String::from),
            })
        }
        (None, None) => Ok(GuestOutcome::Done(Value::Null)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn collector() -> Collector {
        Collector::new(1 << 20, 1 << 20, None)
    }

    #[test]
    fn exit_codes() {
        let e = exit_error(1, "boom");
        assert!(e.retryable && e.message.ends_with("boom") && e.code.as_deref() == Some("exit_1"));
        let e = exit_error(65, "");
        assert!(!e.retryable && e.message.contains("permanent"), "{e:?}");
    }

    #[test]
    fn envelopes() {
        let mut c = collector();
        assert_eq!(unwrap(json!({"a": 1}), &mut c).unwrap(), GuestOutcome::Done(json!({"a": 1})));
        assert_eq!(
            unwrap(json!({"$weft": 1, "b": 2}), &mut c).unwrap(),
            GuestOutcome::Done(json!({"$weft": 1, "b": 2})),
            "not an envelope: another key beside it"
        );
        let v = json!({"$weft": {"output": [1], "artifacts": [
            {"name": "a.txt", "mime": "text/plain", "text": "hi"},
            {"name": "b.bin", "base64": "AAEC"}]}});
        assert_eq!(unwrap(v, &mut c).unwrap(), GuestOutcome::Done(json!([1])));
        let arts = &c.report.artifacts;
        assert_eq!((arts[0].name.as_str(), arts[0].data.as_slice()), ("a.txt", b"hi".as_slice()));
        assert_eq!(
            (arts[1].mime.as_str(), arts[1].data.as_slice()),
            ("application/octet-stream", [0u8, 1, 2].as_slice())
        );
        let e =
            unwrap(json!({"$weft": {"error": {"message": "no such user", "code": "nf", "retryable": false}}}), &mut c)
                .unwrap_err();
        assert_eq!((e.kind, e.retryable, e.code.as_deref()), (GuestErrorKind::GuestError, false, Some("nf")));
        for (bad, at) in [
            (json!({"$weft": 3}), "/$weft:"),
            (json!({"$weft": {"outptu": 1}}), "/$weft/outptu"),
            (json!({"$weft": {"artifacts": [{"text": "x"}]}}), "/$weft/artifacts/0/name"),
            (json!({"$weft": {"artifacts": [{"name": "x", "base64": "%%"}]}}), "/$weft/artifacts/0/base64"),
            (json!({"$weft": {"error": {}}}), "/$weft/error/message"),
            (json!({"$weft": {"output": 1, "progress": {}}}), "/$weft/progress:"),
            (json!({"$weft": {"output": 1, "progress": [{"data": 1}]}}), "/$weft/progress/0/message"),
        ] {
            let e = unwrap(bad.clone(), &mut c).unwrap_err();
            assert_eq!(e.kind, GuestErrorKind::InvalidOutput, "{bad}");
            assert!(e.message.contains(at), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn progress_in_an_envelope_and_its_data_checked() {
        let mut c = collector();
        let v = json!({"$weft": {"output": 1, "progress": [
            {"message": "half", "data": {"done": 1, "of": 2}}, {"message": "plain"}]}});
        assert_eq!(unwrap(v, &mut c).unwrap(), GuestOutcome::Done(json!(1)));
        let p = &c.report.progress;
        assert_eq!((p[0].message.as_str(), p[0].data.clone()), ("half", Some(json!({"done": 1, "of": 2}))));
        assert_eq!((p[1].message.as_str(), p[1].data.clone()), ("plain", None));
        // Over the cap, or not JSON (the host call's text): left out, said.
        c.progress_text("big".into(), &format!("\"{}\"", "x".repeat(crate::PROGRESS_DATA_CAP)));
        c.progress_text("odd".into(), "{not json");
        let p = &c.report.progress;
        assert_eq!((p[2].message.as_str(), p[2].data.clone(), p[3].data.clone()), ("big", None, None));
        let warns: Vec<&str> = c.report.logs.iter().map(|l| l.message.as_str()).collect();
        assert!(warns[0].contains("over 16384 bytes") && warns[1].contains("not JSON"), "{warns:?}");
    }
}
