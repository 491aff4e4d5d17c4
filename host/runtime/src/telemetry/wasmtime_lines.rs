//! wasmtime's own log lines about guests, kept off the host's stderr.
//!
//! Why: wasmtime's WASI implementation logs a warning on every call of a
//! function it does not implement (`p1 sock_accept is not implemented`),
//! so a guest calling one in a loop floods weft's log (398 MB in a 10 s
//! step). This filter of the log layer hands a line logged while a guest
//! is polled to that guest's invocation ([`weft_sandbox::host_log`]: it
//! becomes one of the step's log lines, under the step's log cap) and does
//! not print it; lines from elsewhere are printed at most
//! [`PER_SECOND`] a second, the rest counted and said once a second.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Filter};

/// wasmtime lines printed per second at most, outside guests.
pub const PER_SECOND: u32 = 20;

/// The filter (see the module docs).
#[derive(Default)]
pub struct WasmtimeLines {
    window: Mutex<Option<(Instant, u32, u64)>>,
}

struct Message(String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_string();
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl WasmtimeLines {
    /// Whether a wasmtime line outside guests may be printed now.
    fn admit(&self, now: Instant) -> bool {
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let (start, printed, dropped) = w.get_or_insert((now, 0, 0));
        if now.duration_since(*start) >= Duration::from_secs(1) {
            if *dropped > 0 {
                eprintln!("weft: {dropped} more log lines from wasmtime were dropped in the last second");
            }
            *w = Some((now, 1, 0));
            return true;
        }
        if *printed < PER_SECOND {
            *printed += 1;
            true
        } else {
            *dropped += 1;
            false
        }
    }
}

impl<S> Filter<S> for WasmtimeLines {
    fn enabled(&self, _meta: &tracing::Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        true
    }

    /// No limit of its own: the log filter beside it decides the level.
    /// (Without a hint the combined filter has none either, and every
    /// `log` record of cranelift's compiler is formatted and dispatched:
    /// a JavaScript guest then compiled for minutes instead of seconds.)
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }

    fn event_enabled(&self, event: &tracing::Event<'_>, _cx: &Context<'_, S>) -> bool {
        if !event.metadata().target().starts_with("wasmtime") {
            return true;
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        if weft_sandbox::host_log::capture(&m.0) {
            return false;
        }
        self.admit(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_per_second_outside_guests() {
        let f = WasmtimeLines::default();
        let t0 = Instant::now();
        let printed = (0..1000).filter(|_| f.admit(t0)).count();
        assert_eq!(printed, PER_SECOND as usize);
        assert!(f.admit(t0 + Duration::from_secs(1)), "a new second prints again");
    }
}
