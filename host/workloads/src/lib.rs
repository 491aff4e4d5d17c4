//! The workloads of docs/performance.md that run from the CLI (W5 tool-step
//! overhead, W7 runs parked on waits, W8 cold start, W9 served runs, alone or beside Restate, W10
//! many workers on PostgreSQL), printing one greppable line
//! per figure (`W5 mcp-chain-20 path=engine ... per_call_us_p50=...`) and,
//! with `--json FILE`, the same figures as JSON. The engine workloads (W1,
//! W3, W4, W6) are `cargo bench -p weft --bench engine`. Build with
//! `--release` for meaningful figures.

pub mod client;
mod served;
pub mod w10;
pub mod w5;
pub mod w7;
pub mod w8;
pub mod w9;
pub mod w9_restate;

use serde_json::Value;

/// Figures printed as they come and kept for `--json`.
#[derive(Debug, Default)]
pub struct Figures {
    /// Every figure, as JSON.
    pub json: Vec<Value>,
}

impl Figures {
    /// Prints `line` and keeps `json`.
    pub fn line(&mut self, line: String, json: Value) {
        println!("{line}");
        self.json.push(json);
    }
}

/// Nearest-rank percentile (`p` in 0..=1) of unsorted samples.
pub fn pct(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// The load average, for the `#` lines around a benchmark.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn percentiles_are_nearest_rank() {
        let s = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(super::pct(&s, 0.5), 3.0);
        assert_eq!(super::pct(&s, 0.95), 5.0);
        assert_eq!(super::pct(&s, 0.0), 1.0);
        assert!(super::pct(&[], 0.5).is_nan());
    }
}
