//! THE state machine of runs and steps: every transition the engine makes
//! goes through [`Transition::apply`] of a [`RunState`] or a [`StepState`]
//! (the model's vocabulary); the store only persists what was decided here. A refused transition is an error, never
//! silently applied.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
pub use weft_model::{RunState, StepState, UnknownState};

/// What happens to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEvent {
    /// The scheduler starts working on it.
    Start,
    /// A step waits for a signal that needs input.
    NeedInput,
    /// A step waits for a signal that needs authorization.
    NeedAuth,
    /// Nothing waits for outside input any more.
    Resume,
    Complete,
    Fail,
    Cancel,
    Reject,
    /// An MCP session records into it (opened, or more recorded): a
    /// recording run is never executed.
    Record,
}

/// A transition the state machine refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused transition: {what} in state {from} cannot take {event}")]
pub struct TransitionRefused {
    pub what: &'static str,
    pub from: String,
    pub event: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepEvent {
    /// An attempt is claimed (running + attempt + lease committed).
    Claim,
    /// The running step parks on a signal, event, timer or child run.
    Park,
    Succeed,
    Fail,
    /// The attempt failed and another is scheduled.
    ScheduleRetry,
    /// Not run: a `when` was false or an edge condition was not met.
    Skip,
    Cancel,
}

/// The transitions of a state: `RunState` takes [`RunEvent`]s, `StepState`
/// takes [`StepEvent`]s. The states are the model's (one vocabulary for
/// every crate); which transitions exist is decided here only.
pub trait Transition: Sized {
    /// What happens to it.
    type Event;
    /// The state after `event`, or the refusal.
    fn apply(self, event: Self::Event) -> Result<Self, TransitionRefused>;
}

impl Transition for RunState {
    type Event = RunEvent;

    /// The one place that decides run transitions.
    fn apply(self, event: RunEvent) -> Result<RunState, TransitionRefused> {
        use RunEvent as E;
        use RunState as S;
        let to = match (self, event) {
            (S::Submitted, E::Start) => Some(S::Working),
            (S::Working, E::NeedInput) => Some(S::InputRequired),
            (S::Working, E::NeedAuth) => Some(S::AuthRequired),
            (S::InputRequired | S::AuthRequired, E::Resume) => Some(S::Working),
            // A run that never started can still be failed (e.g. its deadline
            // passed, or its plan no longer loads), canceled or rejected.
            (S::Submitted | S::Working | S::InputRequired | S::AuthRequired, E::Fail) => Some(S::Failed),
            (S::Submitted | S::Working | S::InputRequired | S::AuthRequired, E::Cancel) => Some(S::Canceled),
            (S::Submitted | S::Working | S::InputRequired | S::AuthRequired, E::Reject) => Some(S::Rejected),
            (S::Working | S::InputRequired | S::AuthRequired, E::Complete) => Some(S::Completed),
            // A recording opens from a new run, takes more, and ends
            // discarded; saved, it is stored again as a completed run
            // (`crate::recorded`).
            (S::Submitted | S::Recording, E::Record) => Some(S::Recording),
            (S::Recording, E::Cancel) => Some(S::Canceled),
            _ => None,
        };
        to.ok_or_else(|| TransitionRefused { what: "run", from: self.to_string(), event: format!("{event:?}") })
    }
}

impl Transition for StepState {
    type Event = StepEvent;

    /// The one place that decides step transitions.
    fn apply(self, event: StepEvent) -> Result<StepState, TransitionRefused> {
        use StepEvent as E;
        use StepState as S;
        let to = match (self, event) {
            (S::Pending | S::Retrying, E::Claim) => Some(S::Running),
            (S::Running, E::Park) => Some(S::Waiting),
            (S::Running | S::Waiting, E::Succeed) => Some(S::Succeeded),
            (S::Running | S::Waiting, E::Fail) => Some(S::Failed),
            (S::Running | S::Waiting, E::ScheduleRetry) => Some(S::Retrying),
            (S::Pending, E::Skip) => Some(S::Skipped),
            (S::Pending | S::Running | S::Waiting | S::Retrying, E::Cancel) => Some(S::Canceled),
            _ => None,
        };
        to.ok_or_else(|| TransitionRefused { what: "step", from: self.to_string(), event: format!("{event:?}") })
    }
}

/// The state of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttemptState {
    Running,
    Succeeded,
    Failed,
    Canceled,
    /// Cut short by its process's death, a lost lease or a host panic: the
    /// same attempt (same number, same idempotency key) runs again.
    Interrupted,
}

impl AttemptState {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptState::Running => "running",
            AttemptState::Succeeded => "succeeded",
            AttemptState::Failed => "failed",
            AttemptState::Canceled => "canceled",
            AttemptState::Interrupted => "interrupted",
        }
    }

    /// Only a running attempt ends, and only once.
    pub fn finish(self, to: AttemptState) -> Result<AttemptState, TransitionRefused> {
        if self == AttemptState::Running && to != AttemptState::Running {
            Ok(to)
        } else {
            Err(TransitionRefused { what: "attempt", from: self.as_str().into(), event: to.as_str().into() })
        }
    }

    /// Only an interrupted attempt runs again as itself.
    pub fn rerun(self) -> Result<AttemptState, TransitionRefused> {
        if self == AttemptState::Interrupted {
            Ok(AttemptState::Running)
        } else {
            Err(TransitionRefused { what: "attempt", from: self.as_str().into(), event: "rerun".into() })
        }
    }
}

macro_rules! str_impls {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $t {
            type Err = UnknownState;
            fn from_str(s: &str) -> Result<Self, UnknownState> {
                Self::ALL.iter().copied().find(|x| x.as_str() == s).ok_or_else(|| UnknownState(s.to_string()))
            }
        }
    };
}

impl AttemptState {
    pub const ALL: [AttemptState; 5] = [
        AttemptState::Running,
        AttemptState::Succeeded,
        AttemptState::Failed,
        AttemptState::Canceled,
        AttemptState::Interrupted,
    ];
}
str_impls!(AttemptState);

#[cfg(test)]
mod tests {
    use super::*;
    use RunEvent as RE;
    use RunState as R;
    use StepEvent as SE;
    use StepState as S;

    const RUN_EVENTS: [RunEvent; 9] = [
        RE::Start,
        RE::NeedInput,
        RE::NeedAuth,
        RE::Resume,
        RE::Complete,
        RE::Fail,
        RE::Cancel,
        RE::Reject,
        RE::Record,
    ];
    const STEP_EVENTS: [StepEvent; 7] =
        [SE::Claim, SE::Park, SE::Succeed, SE::Fail, SE::ScheduleRetry, SE::Skip, SE::Cancel];

    #[test]
    fn run_transitions_exhaustive() {
        let allowed: &[(RunState, RunEvent, RunState)] = &[
            (R::Submitted, RE::Start, R::Working),
            (R::Submitted, RE::Fail, R::Failed),
            (R::Submitted, RE::Cancel, R::Canceled),
            (R::Submitted, RE::Reject, R::Rejected),
            (R::Working, RE::NeedInput, R::InputRequired),
            (R::Working, RE::NeedAuth, R::AuthRequired),
            (R::Working, RE::Complete, R::Completed),
            (R::Working, RE::Fail, R::Failed),
            (R::Working, RE::Cancel, R::Canceled),
            (R::Working, RE::Reject, R::Rejected),
            (R::InputRequired, RE::Resume, R::Working),
            (R::InputRequired, RE::Complete, R::Completed),
            (R::InputRequired, RE::Fail, R::Failed),
            (R::InputRequired, RE::Cancel, R::Canceled),
            (R::InputRequired, RE::Reject, R::Rejected),
            (R::AuthRequired, RE::Resume, R::Working),
            (R::AuthRequired, RE::Complete, R::Completed),
            (R::AuthRequired, RE::Fail, R::Failed),
            (R::AuthRequired, RE::Cancel, R::Canceled),
            (R::AuthRequired, RE::Reject, R::Rejected),
            (R::Submitted, RE::Record, R::Recording),
            (R::Recording, RE::Record, R::Recording),
            (R::Recording, RE::Cancel, R::Canceled),
        ];
        for from in RunState::ALL {
            for ev in RUN_EVENTS {
                let expected = allowed.iter().find(|(f, e, _)| *f == from && *e == ev).map(|t| t.2);
                match (from.apply(ev), expected) {
                    (Ok(to), Some(exp)) => assert_eq!(to, exp, "{from} + {ev:?}"),
                    (Err(_), None) => {}
                    (got, exp) => panic!("{from} + {ev:?}: got {got:?}, expected {exp:?}"),
                }
            }
        }
    }

    #[test]
    fn terminal_runs_never_change() {
        for from in RunState::ALL.into_iter().filter(|s| s.is_terminal()) {
            for ev in RUN_EVENTS {
                let err = from.apply(ev).unwrap_err();
                assert_eq!(err.what, "run");
                assert!(err.to_string().contains(from.as_str()));
            }
        }
        assert_eq!(RunState::ALL.iter().filter(|s| s.is_terminal()).count(), 4);
    }

    #[test]
    fn step_transitions_exhaustive() {
        let allowed: &[(StepState, StepEvent, StepState)] = &[
            (S::Pending, SE::Claim, S::Running),
            (S::Pending, SE::Skip, S::Skipped),
            (S::Pending, SE::Cancel, S::Canceled),
            (S::Retrying, SE::Claim, S::Running),
            (S::Retrying, SE::Cancel, S::Canceled),
            (S::Running, SE::Park, S::Waiting),
            (S::Running, SE::Succeed, S::Succeeded),
            (S::Running, SE::Fail, S::Failed),
            (S::Running, SE::ScheduleRetry, S::Retrying),
            (S::Running, SE::Cancel, S::Canceled),
            (S::Waiting, SE::Succeed, S::Succeeded),
            (S::Waiting, SE::Fail, S::Failed),
            (S::Waiting, SE::ScheduleRetry, S::Retrying),
            (S::Waiting, SE::Cancel, S::Canceled),
        ];
        for from in StepState::ALL {
            for ev in STEP_EVENTS {
                let expected = allowed.iter().find(|(f, e, _)| *f == from && *e == ev).map(|t| t.2);
                match (from.apply(ev), expected) {
                    (Ok(to), Some(exp)) => assert_eq!(to, exp, "{from} + {ev:?}"),
                    (Err(_), None) => {}
                    (got, exp) => panic!("{from} + {ev:?}: got {got:?}, expected {exp:?}"),
                }
            }
        }
        for from in StepState::ALL.into_iter().filter(|s| s.is_terminal()) {
            for ev in STEP_EVENTS {
                assert!(from.apply(ev).is_err());
            }
        }
    }

    #[test]
    fn attempts_finish_once() {
        assert_eq!(AttemptState::Running.finish(AttemptState::Failed), Ok(AttemptState::Failed));
        assert!(AttemptState::Running.finish(AttemptState::Running).is_err());
        assert!(AttemptState::Succeeded.finish(AttemptState::Failed).is_err());
        assert!(AttemptState::Canceled.finish(AttemptState::Succeeded).is_err());
        assert_eq!(AttemptState::Running.finish(AttemptState::Interrupted), Ok(AttemptState::Interrupted));
        assert_eq!(AttemptState::Interrupted.rerun(), Ok(AttemptState::Running));
        for s in [AttemptState::Running, AttemptState::Succeeded, AttemptState::Failed, AttemptState::Canceled] {
            assert!(s.rerun().is_err(), "{s} cannot run again");
        }
        assert!(AttemptState::Interrupted.finish(AttemptState::Succeeded).is_err(), "it runs again first");
    }

    #[test]
    fn names_match_the_spec() {
        assert_eq!(serde_json::to_string(&R::InputRequired).unwrap(), "\"input-required\"");
        assert_eq!(serde_json::to_string(&R::AuthRequired).unwrap(), "\"auth-required\"");
        for s in RunState::ALL {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
            assert_eq!(s.as_str().parse::<RunState>().unwrap(), s);
        }
        for s in StepState::ALL {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
            assert_eq!(s.as_str().parse::<StepState>().unwrap(), s);
        }
        assert!("done".parse::<RunState>().is_err());
    }
}
