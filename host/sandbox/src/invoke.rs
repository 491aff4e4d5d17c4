//! What one invocation is given (context, input, limits, a cancel handle)
//! and the arming of a fresh store with those limits: fuel, a memory
//! limiter, and what stops the guest at its deadline or cancel — an epoch
//! deadline whose callback checks both, or, on the fuel-metered engine
//! (which compiles in no epoch checks), a yield every [`FUEL_SLICE`] fuel
//! and a check at every host call. Shared by component and command guests.

use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use wasmtime::{CallHook, Store, StoreLimits, StoreLimitsBuilder, Trap, UpdateDeadline};

use crate::GuestOutcome;
use crate::error::{GuestError, GuestErrorKind};
use crate::limits::{CancelHandle, InterruptReason, Limits, classify};
use crate::report::Observer;

/// Who is running: the WIT `context` record (and the environment of a
/// command guest).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepContext {
    /// The run id, empty outside a run.
    pub run_id: String,
    /// The step name.
    pub step: String,
    /// The attempt number, from 1.
    pub attempt: u32,
    /// `<run_id>/<step>[/<item>]/<attempt>`.
    pub idempotency_key: String,
    /// Deadline of the attempt, ms since the Unix epoch.
    pub deadline_ms: u64,
    /// The W3C trace context of the attempt, given to the guest as the
    /// environment variable `TRACEPARENT` (so its own logs can name the
    /// trace); the WIT `context` record is unchanged.
    pub traceparent: Option<String>,
}

/// One invocation's inputs.
#[derive(Clone)]
pub struct Invocation {
    /// The context handed to the guest.
    pub ctx: StepContext,
    /// The input, as JSON text.
    pub input: String,
    /// The limits.
    pub limits: Limits,
    /// Fires to interrupt the guest.
    pub cancel: CancelHandle,
    /// Sees log lines, progress and artifacts as they happen.
    pub observer: Option<Arc<dyn Observer>>,
    /// Its place among guests waiting to run (higher first; the step's
    /// `priority`).
    pub priority: i64,
}

impl Invocation {
    /// An invocation of `input` with default limits and an ad-hoc context.
    pub fn new(input: impl Into<String>) -> Self {
        Invocation {
            ctx: StepContext { attempt: 1, ..StepContext::default() },
            input: input.into(),
            limits: Limits::default(),
            cancel: CancelHandle::new(),
            observer: None,
            priority: 0,
        }
    }

    /// The invocation used for `describe`: small fixed limits.
    pub(crate) fn describe() -> Self {
        let mut inv = Invocation::new("");
        inv.limits.timeout = Duration::from_secs(5);
        inv.limits.memory_bytes = 256 << 20;
        inv
    }
}

/// Fuel a finished call used: what it was given less what is left
/// (`None` when the sandbox meters no fuel).
pub(crate) fn fuel_used<T>(store: &Store<T>, inv: &Invocation) -> Option<u64> {
    store.get_fuel().ok().map(|left| inv.limits.fuel.unwrap_or(u64::MAX).saturating_sub(left))
}

/// The memory limiter of one store: wasmtime's limits, plus the largest
/// linear memory the guest grew to (reported as the invocation's
/// `memory_peak`, for the `weft_guest_memory_bytes` metric).
pub(crate) struct Limiter {
    limits: StoreLimits,
    pub peak: usize,
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let ok = self.limits.memory_growing(current, desired, maximum)?;
        if ok {
            self.peak = self.peak.max(desired);
        }
        Ok(ok)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

/// The memory limiter of one store.
pub(crate) fn store_limits(limits: &Limits) -> Limiter {
    Limiter {
        limits: StoreLimitsBuilder::new().memory_size(limits.memory_bytes).trap_on_grow_failure(true).build(),
        peak: 0,
    }
}

/// A store armed with an invocation's limits; classifies what went wrong.
pub(crate) struct Armed {
    /// Keeps the epoch ticking while the guest runs (none on the metered
    /// engine, which checks no epochs).
    _ticking: Option<crate::config::Ticking>,
    interrupt: InterruptReason,
    limits: Limits,
    deadline: Instant,
    cancel: CancelHandle,
}

/// How an armed call may be interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Calls {
    /// Plain calls: the epoch check traps at the deadline or a cancel.
    Sync,
    /// `*_async` calls: once it has computed for [`YIELD_AFTER`], the guest
    /// also yields to the executor at every epoch tick, so it shares its
    /// worker; a deadline or a cancel drops the call even while the guest
    /// waits in a host call (see [`Armed::bounded`]).
    Async,
    /// `*_async` calls on the fuel-metered engine, which has no epoch
    /// checks: the guest yields every [`FUEL_SLICE`] fuel and
    /// [`Armed::bounded`] checks the deadline and cancel as it polls it
    /// again; every call into the host checks them too (a call hook), so a
    /// guest that spends its time in host calls, which cost it one fuel
    /// each, is stopped as well.
    Metered,
}

/// Fuel between two yields of a guest on the fuel-metered engine: 4 ms
/// (call-heavy code, ~5 G fuel/s) to 30 ms (a tight loop, ~0.7 G fuel/s)
/// of computing on the development VM, more for code that mostly waits on
/// memory (a load costs one fuel however long its cache miss). About
/// [`YIELD_AFTER`] or more, so a short call never yields; and the
/// precision of such a guest's deadline and cancel.
pub const FUEL_SLICE: u64 = 20_000_000;

/// How long a guest computes before it starts yielding at epoch ticks. A
/// short call that met a tick and yielded would go on as a task of its
/// own (its outcome then misses the batch of its run's next claim: W4
/// wrote ~20% more WAL pages per item, measured), so short calls never
/// yield; a long one yields from here on, every 2 ms.
pub(crate) const YIELD_AFTER: Duration = Duration::from_millis(10);

impl Armed {
    /// Sets fuel and the epoch deadline (with cancellation) on `store`.
    pub(crate) fn arm<T: 'static>(store: &mut Store<T>, inv: &Invocation, calls: Calls) -> Result<Armed, GuestError> {
        match (store.set_fuel(inv.limits.fuel.unwrap_or(u64::MAX)), inv.limits.fuel) {
            (Ok(()), _) | (Err(_), None) => {}
            (Err(_), Some(_)) => {
                return Err(GuestError::new(
                    GuestErrorKind::Trap,
                    "a fuel limit was asked for but this sandbox was built without fuel metering",
                ));
            }
        }
        let interrupt = InterruptReason::default();
        let armed_at = Instant::now();
        let deadline = armed_at + inv.limits.timeout;
        let cancel = inv.cancel.clone();
        let (c, why) = (cancel.clone(), interrupt.clone());
        let mut ticking = None;
        if calls == Calls::Metered {
            store.fuel_async_yield_interval(Some(FUEL_SLICE)).map_err(|e| {
                GuestError::new(GuestErrorKind::Trap, format!("host error: cannot set the fuel yield interval: {e:#}"))
            })?;
            store.call_hook(move |_, hook| match hook {
                CallHook::CallingHost => stop_at(&c, &why, deadline),
                _ => Ok(()),
            });
        } else {
            ticking = Some(crate::config::Ticking::start());
            store.set_epoch_deadline(1);
            store.epoch_deadline_callback(move |_| {
                stop_at(&c, &why, deadline)?;
                Ok(match calls {
                    // Computing: it keeps its CPU slot while it yields.
                    Calls::Async if armed_at.elapsed() >= YIELD_AFTER => UpdateDeadline::Yield(1),
                    _ => UpdateDeadline::Continue(1),
                })
            });
        }
        Ok(Armed { _ticking: ticking, interrupt, limits: inv.limits.clone(), deadline, cancel })
    }

    /// Classifies an error from instantiation or a call.
    pub(crate) fn classify(&self, err: &wasmtime::Error) -> GuestError {
        classify(err, &self.interrupt, &self.limits)
    }

    /// Runs an async call to its end, or drops it at the invocation's
    /// deadline or cancel: a guest parked in a host call (a WASI sleep, a
    /// poll) is not running wasm, so no epoch check can stop it, but
    /// dropping its future does. Each time the call is polled (again, after
    /// a yield) the deadline and cancel are checked first.
    pub(crate) async fn bounded<F: std::future::Future<Output = wasmtime::Result<R>>, R>(
        &self,
        call: F,
    ) -> Result<R, GuestError> {
        let mut call = std::pin::pin!(call);
        let call = std::future::poll_fn(|cx| {
            if self.cancel.is_canceled() {
                return Poll::Ready(Err(GuestError::new(GuestErrorKind::Canceled, "the invocation was canceled")));
            }
            if Instant::now() >= self.deadline + crate::gate::extension() {
                return Poll::Ready(Err(GuestError::new(
                    GuestErrorKind::Timeout,
                    format!("the guest ran past its {} ms deadline", self.limits.timeout.as_millis()),
                )));
            }
            call.as_mut().poll(cx).map(|r| r.map_err(|e| self.classify(&e)))
        });
        // The deadline moves by the time the guest waited for its CPU slot
        // after host calls (`gate::extension`, read as this is polled).
        let deadline = async {
            loop {
                let at = self.deadline + crate::gate::extension();
                tokio::time::sleep_until(at.into()).await;
                if Instant::now() >= self.deadline + crate::gate::extension() {
                    return;
                }
            }
        };
        tokio::select! {
            r = call => r,
            _ = deadline => Err(GuestError::new(
                GuestErrorKind::Timeout,
                format!("the guest ran past its {} ms deadline (waiting in a host call)", self.limits.timeout.as_millis()),
            )),
            _ = self.cancel.canceled() => Err(GuestError::new(GuestErrorKind::Canceled, "the invocation was canceled")),
        }
    }
}

/// Stops the guest (a trap whose reason `why` keeps) when it was canceled
/// or is past its deadline, moved by the time it waited for its CPU slot
/// after host calls (`gate::extension`).
fn stop_at(cancel: &CancelHandle, why: &InterruptReason, deadline: Instant) -> wasmtime::Result<()> {
    if cancel.is_canceled() {
        why.set(InterruptReason::CANCELED);
        return Err(Trap::Interrupt.into());
    }
    if Instant::now() >= deadline + crate::gate::extension() {
        why.set(InterruptReason::TIMEOUT);
        return Err(Trap::Interrupt.into());
    }
    Ok(())
}

/// Parses a guest's result: capped, and it must be JSON.
pub(crate) fn parse_output(bytes: &[u8], overflowed: bool, limits: &Limits) -> Result<GuestOutcome, GuestError> {
    if overflowed || bytes.len() > limits.output_bytes {
        return Err(GuestError::new(
            GuestErrorKind::OutputTooLarge,
            format!(
                "the guest's output is over the {}-byte cap (`[limits] max_output_bytes` in weft.toml); return less, \
                 or write large results as artifacts",
                limits.output_bytes
            ),
        ));
    }
    serde_json::from_slice(bytes).map(GuestOutcome::Done).map_err(|e| {
        let text = String::from_utf8_lossy(bytes);
        let shown: String = text.chars().take(200).collect();
        let more = if text.chars().count() > 200 { "..." } else { "" };
        GuestError::new(
            GuestErrorKind::InvalidOutput,
            if bytes.is_empty() {
                "the guest produced no output; it must produce one JSON value".to_string()
            } else {
                format!("the guest's output is not valid JSON ({e}): {shown}{more}")
            },
        )
    })
}
