//! A run's place in a distributed trace, without any OpenTelemetry
//! dependency: the W3C `traceparent` a run was started under (stored with
//! the run, so recovery — or another worker taking the run over — continues
//! the same trace), and the ids weft derives from the run's id: the run's
//! trace id when nobody gave one, and the run span's id, so an attempt's
//! span (exported when it ends) points at its run's span before the run
//! ends. Also the one switch that says whether anyone records metrics
//! ([`metrics_on`]): with no recorder installed, the engine and stores skip
//! building their labels at all.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

use crate::ids::RunId;

/// The `tracing` target of the event a run's driver emits when the run
/// ends (fields `run_id`, `template`, `state`, `created_at`, `ended_at`,
/// `traceparent`, `trace_id`).
pub const RUN_TARGET: &str = "weft::run";

static METRICS: AtomicBool = AtomicBool::new(false);

/// Whether a metrics recorder is installed (set by the process's telemetry
/// set-up); `false` by default, and then no metric is built.
#[inline]
pub fn metrics_on() -> bool {
    METRICS.load(Ordering::Relaxed)
}

/// Says whether a metrics recorder is installed.
pub fn set_metrics_on(on: bool) {
    METRICS.store(on, Ordering::Relaxed);
}

/// A store committed `batches` batches in one transaction, taking `took`
/// (`weft_commit_group_batches`, `weft_commit_duration_seconds`); the
/// stores call it only when [`metrics_on`].
pub fn record_commit(batches: usize, took: std::time::Duration) {
    metrics::histogram!("weft_commit_group_batches").record(batches as f64);
    metrics::histogram!("weft_commit_duration_seconds").record(took.as_secs_f64());
}

/// A parsed W3C `traceparent` (version 00 layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

impl TraceParent {
    /// `00-<trace id>-<span id>-<flags>`, or `None` when `s` is not one
    /// (wrong length or characters, version `ff`, an all-zero id).
    pub fn parse(s: &str) -> Option<TraceParent> {
        let s = s.trim();
        let mut parts = s.split('-');
        let (v, t, p, f) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        // Later versions may append fields; version 00 has exactly four.
        if v.len() != 2 || v == "ff" || (v == "00" && parts.next().is_some()) {
            return None;
        }
        let lower = |x: &str| x.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !lower(v) || t.len() != 32 || p.len() != 16 || f.len() != 2 || !lower(t) || !lower(p) || !lower(f) {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        hex::decode_to_slice(t, &mut trace_id).ok()?;
        hex::decode_to_slice(p, &mut span_id).ok()?;
        let flags = u8::from_str_radix(f, 16).ok()?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent { trace_id, span_id, flags })
    }

    /// The header's text.
    pub fn header(&self) -> String {
        let mut s = String::with_capacity(55);
        let _ = write!(s, "00-{}-{}-{:02x}", hex::encode(self.trace_id), hex::encode(self.span_id), self.flags);
        s
    }

    /// Whether the caller sampled (recorded) its trace.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

/// Where a run sits in its trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTrace {
    /// The caller's trace, else one derived from the run's id.
    pub trace_id: [u8; 16],
    /// The run span's id (derived from the run's id: the same in every
    /// process that drives the run).
    pub span_id: [u8; 8],
    /// The caller's span (the run span's parent), if a caller gave one.
    pub parent: Option<[u8; 8]>,
    pub sampled: bool,
}

impl RunTrace {
    /// The trace of run `run`, started under `traceparent` (as stored;
    /// ignored when it does not parse).
    pub fn of(run: &RunId, traceparent: Option<&str>) -> RunTrace {
        let span_id = derive::<8>("weft run span", run);
        match traceparent.and_then(TraceParent::parse) {
            Some(p) => RunTrace { trace_id: p.trace_id, span_id, parent: Some(p.span_id), sampled: p.sampled() },
            None => RunTrace { trace_id: derive::<16>("weft trace", run), span_id, parent: None, sampled: true },
        }
    }

    /// The trace id as 32 hex digits (what log lines carry).
    pub fn trace_id_hex(&self) -> String {
        hex::encode(self.trace_id)
    }

    /// The `traceparent` naming the run span as parent (what a child run
    /// is started under).
    pub fn child_traceparent(&self) -> String {
        TraceParent { trace_id: self.trace_id, span_id: self.span_id, flags: u8::from(self.sampled) }.header()
    }
}

/// `N` bytes of sha256(`what` ∥ run id), never all zero.
fn derive<const N: usize>(what: &str, run: &RunId) -> [u8; N] {
    let mut h = Sha256::new();
    h.update(what.as_bytes());
    h.update([0]);
    h.update(run.as_str().as_bytes());
    let d = h.finalize();
    let mut out = [0u8; N];
    out.copy_from_slice(&d[..N]);
    if out.iter().all(|b| *b == 0) {
        out[N - 1] = 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn parses_and_prints_a_traceparent() {
        let p = TraceParent::parse(TP).unwrap();
        assert_eq!(p.header(), TP);
        assert!(p.sampled());
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-xx",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_run_keeps_its_callers_trace_and_derives_its_span() {
        let run: RunId = "r_01jabcdefghjkmnpqrstvwxyz0".parse().unwrap();
        let a = RunTrace::of(&run, Some(TP));
        assert_eq!(a.trace_id_hex(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(a.parent, Some(*b"\xb7\xad\x6b\x71\x69\x20\x33\x31"));
        // The same in every process; another run differs.
        assert_eq!(a, RunTrace::of(&run, Some(TP)));
        let own = RunTrace::of(&run, None);
        assert_eq!(own.span_id, a.span_id);
        assert_eq!(own.parent, None);
        assert_eq!(own, RunTrace::of(&run, Some("not a traceparent")));
        let other: RunId = "r_01jabcdefghjkmnpqrstvwxyz1".parse().unwrap();
        assert_ne!(RunTrace::of(&other, None).trace_id, own.trace_id);
        let child = TraceParent::parse(&a.child_traceparent()).unwrap();
        assert_eq!((child.trace_id, child.span_id), (a.trace_id, a.span_id));
    }
}
