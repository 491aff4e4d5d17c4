//! W8 cold of docs/performance.md: `weft run` of a one-step workflow with a
//! cached plugin (the bundled `json-select`), as a new process each time,
//! timed wall-clock from spawn to exit (target ≤ 50 ms). The first run
//! (which compiles the plugin into the cache) is not counted.

use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::json;

use super::{Figures, pct};

/// Runs W8 `rounds` times with this executable.
pub fn run(rounds: usize, out: &mut Figures) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let dir = tempfile::tempdir()?;
    let def = dir.path().join("one.json");
    std::fs::write(
        &def,
        json!({"name": "one", "version": 1, "steps": [{"name": "s", "code": {"plugin": "json-select"},
               "input": {"data": {"a": 1}, "path": "a"}}], "output": "@s"})
        .to_string(),
    )?;
    let once = || -> anyhow::Result<f64> {
        let t0 = Instant::now();
        let st = Command::new(&exe)
            .arg("run")
            .arg(&def)
            .env("WEFT_DATA_DIR", dir.path().join("data"))
            .env_remove("WEFT_CONFIG")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        anyhow::ensure!(st.success(), "`weft run` failed ({st})");
        Ok(ms)
    };
    once()?;
    let ms: Vec<f64> = (0..rounds).map(|_| once()).collect::<anyhow::Result<_>>()?;
    let (p50, p95) = (pct(&ms, 0.5), pct(&ms, 0.95));
    out.line(
        format!("W8 cold runs={rounds} wall_ms_p50={p50:.1} wall_ms_p95={p95:.1} target_ms=50"),
        json!({"workload": "W8", "runs": rounds, "wall_ms_p50": p50, "wall_ms_p95": p95, "target_ms": 50}),
    );
    Ok(())
}
