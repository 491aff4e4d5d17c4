//! Per-invocation limits and how a breach is recognised. Every invocation
//! gets a fresh store with these applied: an epoch deadline (wall time),
//! a memory limiter, host-side caps on output and logs, and fuel (CPU
//! work) only when a budget was asked for: by default the wall-clock
//! timeout alone bounds a step, so a legitimate long computation runs to
//! its timeout instead of meeting a hidden CPU cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use wasmtime::Trap;

use crate::error::{GuestError, GuestErrorKind};

/// Default wall-clock limit of a code step.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default memory cap per guest.
pub const DEFAULT_MEMORY_MB: u64 = 64;
/// Default cap on a result (or a command guest's stdout).
pub const DEFAULT_OUTPUT_BYTES: usize = 16 << 20;
/// Default cap on log text per invocation.
pub const DEFAULT_LOG_BYTES: usize = 1 << 20;
/// Default cap on artifact bytes per invocation.
pub const DEFAULT_ARTIFACT_BYTES: usize = 16 << 20;

/// The limits of one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// CPU budget in fuel units; `None` (the default) means no budget: the
    /// timeout bounds the step. (With fuel metering compiled in, an
    /// unbudgeted guest still counts its fuel, which a run's budget uses.)
    pub fuel: Option<u64>,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Linear-memory cap in bytes (all memories of the guest together).
    pub memory_bytes: usize,
    /// Result cap in bytes.
    pub output_bytes: usize,
    /// Log text cap in bytes.
    pub log_bytes: usize,
    /// Artifact cap in bytes.
    pub artifact_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: None,
            timeout: DEFAULT_TIMEOUT,
            memory_bytes: (DEFAULT_MEMORY_MB as usize) << 20,
            output_bytes: DEFAULT_OUTPUT_BYTES,
            log_bytes: DEFAULT_LOG_BYTES,
            artifact_bytes: DEFAULT_ARTIFACT_BYTES,
        }
    }
}

/// Lets the caller stop a running invocation (a canceled run): a guest
/// running wasm stops at its next epoch check (within one tick), and one
/// parked in a host call (a sleep) is dropped at once.
#[derive(Debug, Clone, Default)]
pub struct CancelHandle(tokio_util::sync::CancellationToken);

impl CancelHandle {
    /// A handle that is not canceled.
    pub fn new() -> Self {
        Self::default()
    }
    /// Asks the guest to stop.
    pub fn cancel(&self) {
        self.0.cancel();
    }
    /// Whether cancel was asked.
    pub fn is_canceled(&self) -> bool {
        self.0.is_cancelled()
    }
    /// Resolves once cancel was asked.
    pub async fn canceled(&self) {
        self.0.cancelled().await
    }
}

/// Why the epoch callback interrupted a guest.
#[derive(Debug, Default, Clone)]
pub(crate) struct InterruptReason(Arc<AtomicU8>);

impl InterruptReason {
    pub(crate) const TIMEOUT: u8 = 1;
    pub(crate) const CANCELED: u8 = 2;
    pub(crate) fn set(&self, why: u8) {
        self.0.store(why, Ordering::SeqCst);
    }
    pub(crate) fn get(&self) -> u8 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Turns an error from a guest call into a classified [`GuestError`].
pub(crate) fn classify(err: &wasmtime::Error, interrupt: &InterruptReason, limits: &Limits) -> GuestError {
    if let Some(trap) = err.downcast_ref::<Trap>() {
        match trap {
            Trap::OutOfFuel => {
                return GuestError::new(
                    GuestErrorKind::FuelExhausted,
                    format!(
                        "the guest used its whole CPU budget of {} fuel; raise `limits.fuel` if the work is legitimate",
                        limits.fuel.unwrap_or(0)
                    ),
                );
            }
            Trap::Interrupt => {
                return match interrupt.get() {
                    InterruptReason::CANCELED => {
                        GuestError::new(GuestErrorKind::Canceled, "the invocation was canceled")
                    }
                    _ => GuestError::new(
                        GuestErrorKind::Timeout,
                        format!("the guest ran past its {} ms deadline", limits.timeout.as_millis()),
                    ),
                };
            }
            Trap::StackOverflow => {
                return GuestError::new(GuestErrorKind::Trap, format!("stack overflow: {}", full_message(err)));
            }
            _ => {}
        }
    }
    let text = full_message(err);
    // wasmtime reports a refused memory.grow under `trap_on_grow_failure` as
    // a plain error, not a `Trap` variant.
    if text.contains("forcing trap when growing memory") || text.contains("memory limit") {
        return GuestError::new(
            GuestErrorKind::MemoryLimit,
            format!(
                "the guest tried to grow its memory past the {} MiB limit; raise `limits.memory_mb` if it needs more",
                limits.memory_bytes >> 20
            ),
        );
    }
    GuestError::new(GuestErrorKind::Trap, text)
}

/// The error with its context chain (wasmtime puts the backtrace there).
fn full_message(err: &wasmtime::Error) -> String {
    let mut s = format!("{err:?}");
    // Keep it readable: the debug form carries the backtrace; cap its size.
    if s.len() > 8192 {
        s.truncate(8192);
        s.push_str("\n[... truncated]");
    }
    s
}
