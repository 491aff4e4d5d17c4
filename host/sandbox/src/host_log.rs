//! What wasmtime itself says about a guest (its WASI implementation's
//! `tracing` warnings, such as "p1 sock_accept is not implemented"), kept
//! with that guest's invocation instead of the host's log.
//!
//! Why: such a line is written for every call a guest makes, so a guest
//! calling an unimplemented function in a loop wrote 398 MB to weft's
//! stderr in ten seconds, outside its own 1 MiB log cap. While a guest's
//! future is polled (`Scope`), the host's log layer hands these lines to
//! [`capture`]; they become the invocation's log lines (`[warn] wasmtime:
//! ...`), under its log cap, and never reach stderr. Lines logged outside
//! any guest are the host's to rate-limit (the runtime's telemetry does).

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// One invocation's captured host lines, bounded by its log cap.
#[derive(Default)]
pub(crate) struct HostLines {
    inner: Mutex<Lines>,
}

#[derive(Default)]
struct Lines {
    kept: Vec<String>,
    bytes: usize,
    cap: usize,
    /// Lines past the cap (counted, not kept).
    dropped: u64,
}

impl HostLines {
    pub(crate) fn new(cap: usize) -> Arc<HostLines> {
        Arc::new(HostLines { inner: Mutex::new(Lines { cap, ..Lines::default() }) })
    }

    fn push(&self, line: String) {
        let mut l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if l.bytes + line.len() > l.cap {
            l.dropped += 1;
            return;
        }
        l.bytes += line.len();
        l.kept.push(line);
    }

    /// The kept lines, and how many more were dropped.
    pub(crate) fn take(&self) -> (Vec<String>, u64) {
        let mut l = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (std::mem::take(&mut l.kept), std::mem::take(&mut l.dropped))
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<HostLines>>> = const { RefCell::new(None) };
}

/// Sets the invocation whose lines this thread's host log lines are, for
/// as long as it lives (one poll of the guest's future).
pub(crate) struct Scope {
    previous: Option<Arc<HostLines>>,
}

impl Scope {
    pub(crate) fn enter(lines: &Arc<HostLines>) -> Scope {
        Scope { previous: CURRENT.with(|c| c.replace(Some(lines.clone()))) }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = self.previous.take());
    }
}

/// Called by the host's log layer for a line logged by wasmtime: true when
/// a guest's invocation on this thread took it (the host must not print
/// it), false when no guest is running here.
pub fn capture(message: &str) -> bool {
    CURRENT.with(|c| match &*c.borrow() {
        Some(lines) => {
            lines.push(format!("wasmtime: {message}"));
            true
        }
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_only_inside_a_scope_and_capped() {
        assert!(!capture("outside"));
        let lines = HostLines::new(60);
        {
            let _s = Scope::enter(&lines);
            for _ in 0..10 {
                assert!(capture("p1 sock_accept is not implemented"));
            }
        }
        assert!(!capture("after"));
        let (kept, dropped) = lines.take();
        assert_eq!(kept, vec!["wasmtime: p1 sock_accept is not implemented".to_string()]);
        assert_eq!(dropped, 9);
    }
}
