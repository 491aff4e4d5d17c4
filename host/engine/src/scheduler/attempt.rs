//! One attempt, as a task owned by its run's driver: the runner call raced
//! against the attempt's timeout and its cancel token. A panic in the
//! runner is caught here and reported as an interrupted attempt (the
//! host's fault, not the step's), so it can never kill the driver's task
//! and leave its run `working` for good.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::OwnedSemaphorePermit;

use crate::cancel::CancelToken;
use crate::clock::Clock;
use crate::error::{ErrorKind, StepError};
use crate::ids::AttemptNo;
use crate::runner::{StepOutput, StepRequest, StepRunner, panic_message};

/// What the driver learns when an attempt task ends.
pub(super) struct Done {
    pub step: usize,
    pub unit: usize,
    pub attempt: AttemptNo,
    pub result: Result<StepOutput, StepError>,
}

pub(super) struct Launch {
    pub step: usize,
    pub unit: usize,
    pub req: StepRequest,
    pub token: CancelToken,
    /// When the engine gives up on the attempt (its `timeout_ms`).
    pub timeout_at: Option<i64>,
    pub timeout_ms: Option<u64>,
    pub permit: OwnedSemaphorePermit,
}

pub(super) async fn run_attempt(runner: Arc<dyn StepRunner>, clock: Arc<dyn Clock>, l: Launch) -> Done {
    let Launch { step, unit, req, token, timeout_at, timeout_ms, permit } = l;
    let _permit = permit;
    let attempt = req.attempt;
    let timer = async {
        match timeout_at {
            Some(at) => clock.sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        biased;
        r = AssertUnwindSafe(runner.run(req, token.clone())).catch_unwind() => r.unwrap_or_else(|panic| {
            let what = panic_message(panic.as_ref());
            tracing::error!(error = %what, "a step runner panicked; the attempt is interrupted");
            Err(StepError::new(ErrorKind::Interrupted, format!("the host panicked running this attempt: {what}"), true))
        }),
        _ = token.canceled() => Err(StepError::canceled("the attempt was canceled")),
        _ = timer => {
            token.cancel();
            Err(StepError::timeout(format!("the attempt timed out after {} ms", timeout_ms.unwrap_or(0))))
        }
    };
    Done { step, unit, attempt, result }
}
