//! Retry decisions: which failures are retried and after how long.
//!
//! The policy's arithmetic lives with the policy type in `weft-model`
//! (`RetryPolicy::base_delay_ms`: fixed `d`, linear `d·n`, exponential
//! `d·2^(n-1)`, capped by `max_delay_ms`). Jitter is **equal jitter**: the
//! delay is uniform in `[base/2, base]`, so retries spread out but never
//! come sooner than half the nominal delay. The engine supplies the
//! randomness from its injected [`Rng`].

use crate::error::StepError;
use crate::ids::AttemptNo;
use crate::model_glue::RetryPolicy;
use crate::rng::Rng;

/// The decision after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Try again at this time (ms since epoch) with this attempt number.
    RetryAt { at_ms: i64, attempt: AttemptNo },
    /// No more attempts: the failure is final.
    GiveUp,
}

/// A random number in [0, 1) from the injected rng.
pub fn unit(rng: &dyn Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// The delay before the attempt after `failed` (numbered from 1).
pub fn delay_ms(policy: &RetryPolicy, failed: AttemptNo, rng: &dyn Rng) -> u64 {
    policy.delay_ms(failed.get(), unit(rng))
}

/// Whether and when attempt `failed` that ended with `err` is retried.
/// `retry_on` defaults: every failure a retry can fix
/// (`weft_model::retry::default_retry_on`).
pub fn decide(policy: &RetryPolicy, failed: AttemptNo, err: &StepError, now_ms: i64, rng: &dyn Rng) -> RetryDecision {
    if policy.should_retry(err.kind, err.retryable, failed.get()) {
        let d = delay_ms(policy, failed, rng);
        RetryDecision::RetryAt { at_ms: now_ms.saturating_add(d.min(i64::MAX as u64) as i64), attempt: failed.next() }
    } else {
        RetryDecision::GiveUp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::model_glue::RetryPolicy;
    use crate::rng::SeededRng;
    use weft_model::Backoff;

    fn policy(backoff: Backoff, jitter: bool) -> RetryPolicy {
        RetryPolicy { max_attempts: 4, backoff, initial_delay_ms: 100, max_delay_ms: 250, jitter, ..Default::default() }
    }

    fn at(n: u32) -> AttemptNo {
        AttemptNo::new(n).unwrap()
    }

    #[test]
    fn backoffs_capped() {
        let rng = SeededRng::new(1);
        let p = policy(Backoff::Exponential, false);
        assert_eq!([1, 2, 3].map(|n| delay_ms(&p, at(n), &rng)), [100, 200, 250]);
        let p = policy(Backoff::Linear, false);
        assert_eq!([1, 2, 3].map(|n| delay_ms(&p, at(n), &rng)), [100, 200, 250]);
        let p = policy(Backoff::Fixed, false);
        assert_eq!([1, 2, 3].map(|n| delay_ms(&p, at(n), &rng)), [100, 100, 100]);
    }

    #[test]
    fn equal_jitter_range() {
        let rng = SeededRng::new(2);
        let p = policy(Backoff::Exponential, true);
        let ds: Vec<u64> = (0..500).map(|_| delay_ms(&p, at(2), &rng)).collect();
        assert!(ds.iter().all(|d| (100..=200).contains(d)), "{ds:?}");
        assert!(ds.iter().any(|&d| d < 130) && ds.iter().any(|&d| d > 170), "spread");
    }

    #[test]
    fn decisions() {
        let rng = SeededRng::new(3);
        let p = policy(Backoff::Fixed, false);
        let timeout = StepError::new(ErrorKind::Timeout, "t", true);
        assert_eq!(decide(&p, at(1), &timeout, 1000, &rng), RetryDecision::RetryAt { at_ms: 1100, attempt: at(2) });
        assert_eq!(decide(&p, at(4), &timeout, 1000, &rng), RetryDecision::GiveUp, "max_attempts");
        let tool_no = StepError::new(ErrorKind::ToolError, "t", false);
        assert_eq!(decide(&p, at(1), &tool_no, 0, &rng), RetryDecision::GiveUp);
        let tool_yes = StepError::new(ErrorKind::ToolError, "t", true);
        assert!(matches!(decide(&p, at(1), &tool_yes, 0, &rng), RetryDecision::RetryAt { .. }));
        let guest_yes = StepError::new(ErrorKind::GuestError, "g", true);
        assert!(matches!(decide(&p, at(1), &guest_yes, 0, &rng), RetryDecision::RetryAt { .. }));
        let trap = StepError::new(ErrorKind::Trap, "x", true);
        assert!(matches!(decide(&p, at(1), &trap, 0, &rng), RetryDecision::RetryAt { .. }), "a trap is retried");
        let fuel = StepError::new(ErrorKind::FuelExhausted, "x", true);
        assert_eq!(decide(&p, at(1), &fuel, 0, &rng), RetryDecision::GiveUp, "not in retry_on");
        assert_eq!(
            decide(&RetryPolicy::default(), at(1), &timeout, 0, &rng),
            RetryDecision::GiveUp,
            "default: one attempt"
        );
    }
}
