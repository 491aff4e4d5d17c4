//! Retry policies (`retry`, docs/workflow-format.md): defaults, which errors are
//! retried, and the delay before the next attempt. Pure: the caller
//! supplies the random number used for jitter.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounds::{MAX_ATTEMPTS, MAX_DURATION_MS};
use crate::status::ErrorKind;

/// Default `initial_delay_ms`.
pub const DEFAULT_INITIAL_DELAY_MS: u64 = 1_000;
/// Default `max_delay_ms`.
pub const DEFAULT_MAX_DELAY_MS: u64 = 60_000;

/// How long to wait between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    /// `initial_delay_ms` every time.
    Fixed,
    /// `initial_delay_ms × n` after attempt n.
    Linear,
    /// `initial_delay_ms × 2^(n-1)` after attempt n.
    #[default]
    Exponential,
}

/// How a step is retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retry).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = MAX_ATTEMPTS))]
    pub max_attempts: u32,
    #[serde(default)]
    pub backoff: Backoff,
    #[serde(default = "initial")]
    #[schemars(range(max = MAX_DURATION_MS))]
    pub initial_delay_ms: u64,
    #[serde(default = "max")]
    #[schemars(range(max = MAX_DURATION_MS))]
    pub max_delay_ms: u64,
    /// Randomise each delay within [delay/2, delay].
    #[serde(default = "yes")]
    pub jitter: bool,
    /// Error kinds that are retried (default: every failure a retry can
    /// fix: timeout, transport, protocol, trap, tool_error, guest_error).
    /// `tool_error` and `guest_error` are
    /// retried only when the error is marked `retryable: true`; `crashed`
    /// and `interrupted` never go through the policy.
    #[serde(default = "default_retry_on")]
    pub retry_on: Vec<ErrorKind>,
}

fn one() -> u32 {
    1
}
fn initial() -> u64 {
    DEFAULT_INITIAL_DELAY_MS
}
fn max() -> u64 {
    DEFAULT_MAX_DELAY_MS
}
fn yes() -> bool {
    true
}

/// Every failure a retry can fix (docs/guests.md has the table):
/// `timeout`, `transport`, `protocol`, `trap`, `tool_error` (marked
/// retryable), `guest_error` (a guest `step-error` with `retryable: true`,
/// or a WASI command's non-zero exit). Never retried: `validation` (bad
/// input), `invalid_output`, a reject, `fuel_exhausted`, `memory_limit`,
/// `output_too_large`, `crashed`, `canceled`, `deadline`,
/// `dependency_failed`, and any error marked `retryable: false`.
pub fn default_retry_on() -> Vec<ErrorKind> {
    vec![
        ErrorKind::Timeout,
        ErrorKind::Transport,
        ErrorKind::Protocol,
        ErrorKind::Trap,
        ErrorKind::ToolError,
        ErrorKind::GuestError,
    ]
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 1,
            backoff: Backoff::default(),
            initial_delay_ms: DEFAULT_INITIAL_DELAY_MS,
            max_delay_ms: DEFAULT_MAX_DELAY_MS,
            jitter: true,
            retry_on: default_retry_on(),
        }
    }
}

impl RetryPolicy {
    /// Whether attempt `attempt` (numbered from 1), which failed with an
    /// error of `kind` (marked `retryable` or not), is followed by another.
    pub fn should_retry(&self, kind: ErrorKind, retryable: bool, attempt: u32) -> bool {
        if attempt >= self.max_attempts || !self.retry_on.contains(&kind) {
            return false;
        }
        if matches!(kind, ErrorKind::Crashed | ErrorKind::Interrupted) {
            return false;
        }
        match kind {
            ErrorKind::ToolError | ErrorKind::GuestError => retryable,
            _ => true,
        }
    }

    /// Delay before the attempt after `attempt` (numbered from 1), before
    /// jitter: fixed `d`, linear `d·n`, exponential `d·2^(n-1)`, capped at
    /// `max_delay_ms`.
    pub fn base_delay_ms(&self, attempt: u32) -> u64 {
        let n = attempt.max(1);
        let d = self.initial_delay_ms;
        let raw = match self.backoff {
            Backoff::Fixed => d,
            Backoff::Linear => d.saturating_mul(u64::from(n)),
            Backoff::Exponential => d.saturating_mul(1u64.checked_shl(n - 1).unwrap_or(u64::MAX)),
        };
        raw.min(self.max_delay_ms.max(self.initial_delay_ms))
    }

    /// Delay with jitter: `unit` is a random number in [0, 1) supplied by
    /// the caller; with `jitter` the delay falls in [base/2, base].
    pub fn delay_ms(&self, attempt: u32, unit: f64) -> u64 {
        let base = self.base_delay_ms(attempt);
        if !self.jitter {
            return base;
        }
        let u = unit.clamp(0.0, 1.0);
        let half = base / 2;
        half + ((base - half) as f64 * u) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_attempts, 1);
        assert!(p.jitter);
        assert!(!p.should_retry(ErrorKind::Timeout, true, 1));
        let p: RetryPolicy = serde_json::from_str("{}").unwrap();
        assert_eq!(p, RetryPolicy::default());
    }

    #[test]
    fn which_errors_retry() {
        let p = RetryPolicy { max_attempts: 3, ..Default::default() };
        assert!(p.should_retry(ErrorKind::Timeout, false, 1));
        assert!(p.should_retry(ErrorKind::Transport, false, 2));
        assert!(!p.should_retry(ErrorKind::Transport, false, 3), "attempts exhausted");
        assert!(p.should_retry(ErrorKind::ToolError, true, 1));
        assert!(!p.should_retry(ErrorKind::ToolError, false, 1));
        assert!(p.should_retry(ErrorKind::GuestError, true, 1));
        assert!(!p.should_retry(ErrorKind::GuestError, false, 1));
        assert!(p.should_retry(ErrorKind::Trap, false, 1), "a trap is retried by default");
        assert!(p.should_retry(ErrorKind::Protocol, false, 1));
        for never in [
            ErrorKind::Validation,
            ErrorKind::InvalidOutput,
            ErrorKind::FuelExhausted,
            ErrorKind::MemoryLimit,
            ErrorKind::OutputTooLarge,
            ErrorKind::Crashed,
            ErrorKind::Canceled,
            ErrorKind::Deadline,
        ] {
            assert!(!p.should_retry(never, true, 1), "{never:?} is not retried by default");
        }
        let p = RetryPolicy { max_attempts: 3, retry_on: vec![ErrorKind::Timeout], ..Default::default() };
        assert!(!p.should_retry(ErrorKind::Trap, false, 1));
        assert!(p.should_retry(ErrorKind::Timeout, false, 1));
        let p = RetryPolicy { max_attempts: 3, retry_on: vec![ErrorKind::Crashed], ..Default::default() };
        assert!(!p.should_retry(ErrorKind::Crashed, true, 1), "a crashed step is never retried");
    }

    #[test]
    fn delays() {
        let mut p = RetryPolicy {
            max_attempts: 10,
            initial_delay_ms: 200,
            max_delay_ms: 5000,
            jitter: false,
            ..Default::default()
        };
        let seq: Vec<u64> = (1..=7).map(|n| p.delay_ms(n, 0.9)).collect();
        assert_eq!(seq, [200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(p.base_delay_ms(200), 5000, "no overflow");
        p.backoff = Backoff::Linear;
        assert_eq!((1..=3).map(|n| p.base_delay_ms(n)).collect::<Vec<_>>(), [200, 400, 600]);
        p.backoff = Backoff::Fixed;
        assert_eq!(p.base_delay_ms(5), 200);
        p.jitter = true;
        assert_eq!(p.delay_ms(1, 0.0), 100);
        assert_eq!(p.delay_ms(1, 1.0), 200);
        let d = p.delay_ms(1, 0.5);
        assert!((100..=200).contains(&d));
    }
}
