//! [`StepError`]: a failure a step reports on purpose.

use std::fmt;

/// A failure a step reports on purpose, or a request to reject the run.
///
/// - [`StepError::new`] / [`StepError::retryable`]: this attempt failed; the
///   engine retries it (per the step's retry policy) only when retryable.
/// - [`StepError::invalid_input`]: the input is wrong; never retried.
/// - [`StepError::reject`]: return `Err(StepError::reject(..))` to reject the
///   whole run. This is not an error of the step: the host receives the
///   `reject` outcome and stops the run with the reason.
///
/// `?` converts a [`serde_json::Error`] into `invalid_input`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    code: String,
    message: String,
    retryable: bool,
    reject: bool,
}

impl StepError {
    /// A failure that retrying will not fix. `code` is short and
    /// machine-readable (`not_found`, `too_large`...), `message` is for a person.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        StepError { code: code.into(), message: message.into(), retryable: false, reject: false }
    }

    /// A failure that may go away when the step is tried again (a busy
    /// upstream, a timeout...).
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> Self {
        StepError { retryable: true, ..StepError::new(code, message) }
    }

    /// The input is wrong: code `invalid_input`, not retryable.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        StepError::new("invalid_input", message)
    }

    /// Reject the whole run with a reason: `return Err(StepError::reject(..))`
    /// ends the run as rejected instead of failing or retrying this step.
    pub fn reject(reason: impl Into<String>) -> Self {
        StepError { reject: true, ..StepError::new("reject", reason) }
    }

    /// The machine-readable code (`reject` for a rejection).
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The message for a person (the reason, for a rejection).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// True when trying again may succeed.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// True when this rejects the whole run (made by [`StepError::reject`]).
    pub fn is_reject(&self) -> bool {
        self.reject
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reject {
            write!(f, "run rejected: {}", self.message)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

impl std::error::Error for StepError {}

/// JSON the step parses or builds itself was wrong: `invalid_input`.
impl From<serde_json::Error> for StepError {
    fn from(e: serde_json::Error) -> Self {
        StepError::invalid_input(e.to_string())
    }
}

/// A path-aware serde error: `invalid_input` naming the field.
impl From<serde_path_to_error::Error<serde_json::Error>> for StepError {
    fn from(e: serde_path_to_error::Error<serde_json::Error>) -> Self {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let at = match (inner.line(), inner.column()) {
            (0, _) => String::new(),
            (line, column) => format!(" (line {line}, column {column})"),
        };
        // serde_json appends " at line L column C" to its message; we say it once.
        let mut what = inner.to_string();
        if let Some(cut) = what.rfind(" at line ") {
            what.truncate(cut);
        }
        let message = if path == "." { format!("input: {what}{at}") } else { format!("input.{path}: {what}{at}") };
        StepError::invalid_input(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_set_flags() {
        assert!(!StepError::new("x", "y").is_retryable());
        assert!(StepError::retryable("busy", "try later").is_retryable());
        let e = StepError::invalid_input("bad");
        assert_eq!((e.code(), e.message()), ("invalid_input", "bad"));
        let r = StepError::reject("spam");
        assert!(r.is_reject() && !r.is_retryable());
        assert_eq!(r.to_string(), "run rejected: spam");
        assert_eq!(e.to_string(), "invalid_input: bad");
    }

    #[test]
    fn serde_json_error_is_invalid_input() {
        let e: StepError = serde_json::from_str::<u32>("\"x\"").unwrap_err().into();
        assert_eq!(e.code(), "invalid_input");
        assert!(e.message().contains("expected u32"), "{}", e.message());
    }
}
