//! One attempt, as a task owned by its run's driver: the runner call raced
//! against the attempt's timeout and its cancel token. The timeout counts
//! from the attempt's launch, paused while its runner holds it in a queue
//! for a slot (the engine's wait, never the step's). A panic in the
//! runner is caught here and reported as an interrupted attempt (the
//! host's fault, not the step's), so it can never kill the driver's task
//! and leave its run `working` for good.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{OwnedSemaphorePermit, watch};

use crate::cancel::CancelToken;
use crate::clock::Clock;
use crate::error::{ErrorKind, StepError};
use crate::ids::AttemptNo;
use crate::runner::{EventSink, StepOutput, StepRequest, StepRunner, panic_message};

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
    /// How long the attempt may run (its step's `timeout_ms`), counted from
    /// its launch, and from its admission when its runner queues it.
    pub timeout_ms: Option<u64>,
    /// The run's deadline, if it has one (ms since epoch).
    pub run_deadline: Option<i64>,
    pub permit: OwnedSemaphorePermit,
}

/// The attempt's sink, seen through: [`EventSink::queued`] pauses the
/// attempt's timer and [`EventSink::admitted`] resumes it, its base moved
/// on by the time the attempt waited.
struct Admission {
    inner: Arc<dyn EventSink>,
    /// When the timeout counts from (`None`: queued, paused).
    base: watch::Sender<Option<i64>>,
    /// The base before the pause, and when the pause began.
    paused: std::sync::Mutex<Option<(i64, i64)>>,
    clock: Arc<dyn Clock>,
}

impl EventSink for Admission {
    fn progress(&self, data: serde_json::Value) {
        self.inner.progress(data)
    }
    fn log(&self, line: String) {
        self.inner.log(line)
    }
    fn fuel(&self, used: u64) {
        self.inner.fuel(used)
    }
    fn artifact(&self, name: String, mime: String, data: Vec<u8>) {
        self.inner.artifact(name, mime, data)
    }
    fn queued(&self) {
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        if paused.is_none()
            && let Some(base) = self.base.send_replace(None)
        {
            *paused = Some((base, self.clock.now_ms()));
        }
        self.inner.queued()
    }
    fn admitted(&self, waited: Duration) {
        if let Some((base, since)) = self.paused.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let now = self.clock.now_ms();
            self.base.send_replace(Some(base.saturating_add(now.saturating_sub(since))));
        }
        self.inner.admitted(waited)
    }
}

/// Sleeps until the attempt's timeout: `timeout_ms` after its base, the
/// base moving while the runner holds the attempt in a queue.
async fn timeout(clock: &dyn Clock, timeout_ms: Option<u64>, mut base: watch::Receiver<Option<i64>>) {
    let Some(ms) = timeout_ms else { return std::future::pending().await };
    loop {
        let from = *base.borrow_and_update();
        let Some(from) = from else {
            if base.changed().await.is_err() {
                return std::future::pending().await;
            }
            continue;
        };
        tokio::select! {
            _ = clock.sleep_until(from.saturating_add(ms as i64)) => return,
            changed = base.changed() => {
                if changed.is_err() {
                    // The runner is gone with its sink: the last base holds.
                    clock.sleep_until(from.saturating_add(ms as i64)).await;
                    return;
                }
            }
        }
    }
}

pub(super) async fn run_attempt(runner: Arc<dyn StepRunner>, clock: Arc<dyn Clock>, l: Launch) -> Done {
    let Launch { step, unit, mut req, token, timeout_ms, run_deadline, permit } = l;
    let _permit = permit;
    let attempt = req.attempt;
    // The timeout counts from now, not from the claim: a claim whose
    // commit waited on a stalled store has lost none of its time.
    let launched = clock.now_ms();
    req.deadline_ms = match (timeout_ms.map(|t| launched.saturating_add(t as i64)), run_deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let (base, base_rx) = watch::channel(Some(launched));
    req.events =
        Arc::new(Admission { inner: req.events.clone(), base, paused: Default::default(), clock: clock.clone() });
    let timer = timeout(&*clock, timeout_ms, base_rx);
    let run = AssertUnwindSafe(runner.run(req, token.clone())).catch_unwind();
    tokio::pin!(run);
    let result = tokio::select! {
        biased;
        r = &mut run => r.unwrap_or_else(|panic| {
            let what = panic_message(panic.as_ref());
            tracing::error!(error = %what, "a step runner panicked; the attempt is interrupted");
            Err(StepError::new(ErrorKind::Interrupted, format!("the host panicked running this attempt: {what}"), true))
        }),
        _ = token.canceled() => {
            wind_down(run).await;
            Err(StepError::canceled("the attempt was canceled"))
        }
        _ = timer => {
            token.cancel();
            wind_down(run).await;
            Err(StepError::timeout(format!("the attempt timed out after {} ms", timeout_ms.unwrap_or(0))))
        }
    };
    Done { step, unit, attempt, result }
}

/// How long a runner told to stop may take to wind down (an MCP tool step
/// sends the server `notifications/cancelled`) before it is dropped.
const WIND_DOWN: std::time::Duration = std::time::Duration::from_secs(1);

/// Lets a canceled runner finish what stopping takes (it sees its token
/// canceled), at most [`WIND_DOWN`]: dropped at once, a tool step could
/// never tell its server to stop.
async fn wind_down<F: std::future::Future>(run: std::pin::Pin<&mut F>) {
    let _ = tokio::time::timeout(WIND_DOWN, run).await;
}
