//! W7 waiting of docs/performance.md: many runs parked on a signal `wait` step
//! (target: 10,000 runs in ≤ 100 MB RSS), and resuming one by signal
//! (target ≤ 1 ms p50).
//!
//! The engine is built as `weft serve` builds it (SQLite store in a temp
//! dir at durability `normal`, the code and tool runners, the system
//! clock), and runs are created and started the way `run_start` does it
//! (`create_run` + `start`: each driver loads its plan from the store).
//! RSS (`VmRSS` of /proc/self/status) is read before any run (the
//! baseline) and once every run is parked (`input-required`) and things
//! settled; nothing is subtracted. Then signals are sent one at a time to
//! parked runs with [`Engine::signal`], each timed until it is accepted.
//! Parked runs hibernate (no driver task; see the engine's scheduler): the
//! line reports how many were hibernated when RSS was read, and a signal's
//! time includes waking its run's driver.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use weft_engine::store::RunFilter;
use weft_engine::{Engine, EngineConfig, RunId, RunOptions, RunState, SeededRng, SignalAnswer, Store, SystemClock};
use weft_model::NoSchemas;
use weft_store_sqlite::{Durability, SqliteStore};

use super::{Figures, pct};
use weft_runtime::runner::CodeRunner;
use weft_runtime::tool_runner::{Runners, ToolRunner};

/// Signals timed (at most one per run).
const SIGNALS: usize = 1000;
/// How long parked runs are left alone before RSS is read.
const SETTLE: Duration = Duration::from_secs(2);
/// How long one run may stay unsignalable, or unparked beyond a per-run
/// allowance, before the bench reports it instead of waiting on.
const STUCK: Duration = Duration::from_secs(30);

/// The resident set size of this process, in bytes.
pub fn rss_bytes() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/self/status"))?;
    Ok(kb * 1024)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The parked workflow: a signal wait, then a `return` of its answer.
fn definition() -> anyhow::Result<weft_model::Definition> {
    let doc = json!({"name": "w7", "version": 1, "steps": [
        {"name": "approve", "wait": {"prompt": "Approve order @input.n?",
            "schema": {"type": "object", "required": ["approved"], "properties": {"approved": {"type": "boolean"}}}}},
        {"name": "done", "return": {"approved": "@approve.approved", "n": "@input.n"}}]});
    weft_model::from_value(&doc, &NoSchemas).map_err(|p| anyhow::anyhow!("the W7 definition is invalid: {p:?}"))
}

/// Runs W7 with `runs` parked runs.
pub fn run(runs: usize, out: &mut Figures) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("weft").build()?;
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(dir.path().join("weft.db"), Durability::Normal)?);
    let settings = weft_runtime::config::Settings::in_dir(dir.path());
    let code = CodeRunner::from_settings(&settings, dir.path().to_path_buf())?;
    let ups = Arc::new(weft_mcp_client::Upstreams::new([]));
    let runner = Arc::new(Runners::new(code, ToolRunner::new(ups)));
    let def = definition()?;
    let engine = rt.block_on(async {
        Engine::new(
            store.clone(),
            runner,
            Arc::new(SystemClock),
            Arc::new(SeededRng::from_entropy()),
            EngineConfig::default(),
        )
    });
    std::thread::sleep(Duration::from_millis(200));
    let baseline = rss_bytes()?;

    let t0 = Instant::now();
    let ids: Vec<RunId> = rt.block_on(park(&engine, store.as_ref(), &def, runs))?;
    let park_s = t0.elapsed().as_secs_f64();
    std::thread::sleep(SETTLE);
    let parked = rss_bytes()?;
    let hibernated = engine.hibernated_runs();

    let latencies: Vec<f64> = rt.block_on(async {
        let mut us = vec![];
        for (i, id) in ids.iter().take(SIGNALS).enumerate() {
            let t = Instant::now();
            loop {
                match engine.signal(id, "approve", json!({"approved": i % 2 == 0})).await? {
                    SignalAnswer::Accepted { .. } => break,
                    // A parked run is waiting: say so rather than spin if not.
                    SignalAnswer::NotWaiting { .. } if t.elapsed() < STUCK => tokio::task::yield_now().await,
                    other => {
                        anyhow::bail!("W7: signaling parked run {id} answered {other:?} (after {:?})", t.elapsed())
                    }
                }
            }
            us.push(t.elapsed().as_secs_f64() * 1e6);
        }
        anyhow::Ok(us)
    })?;
    // The signaled runs finish (their output is the answer).
    rt.block_on(async {
        let last = ids.iter().take(SIGNALS).next_back().cloned();
        if let Some(id) = last {
            let rec = engine.wait(&id).await?;
            anyhow::ensure!(rec.state == RunState::Completed, "a signaled W7 run ended {}", rec.state);
        }
        anyhow::Ok(())
    })?;
    engine.abort_all();

    let (p50, p95, p99) = (pct(&latencies, 0.5), pct(&latencies, 0.95), pct(&latencies, 0.99));
    let (rss, base) = (mb(parked), mb(baseline));
    let per_run_kb = parked.saturating_sub(baseline) as f64 / 1024.0 / runs.max(1) as f64;
    out.line(
        format!(
            "W7 waiting runs={runs} hibernated={hibernated} rss_mb={rss:.1} baseline_mb={base:.1} per_run_kb={per_run_kb:.1} park_s={park_s:.2} signals={} signal_p50_us={p50:.0} signal_p95_us={p95:.0} signal_p99_us={p99:.0} target_rss_mb=100 target_signal_p50_us=1000",
            latencies.len()
        ),
        json!({"workload": "W7", "runs": runs, "hibernated": hibernated, "rss_mb": rss, "baseline_mb": base, "per_run_kb": per_run_kb,
               "park_s": park_s, "signals": latencies.len(), "signal_p50_us": p50, "signal_p95_us": p95, "signal_p99_us": p99,
               "target_rss_mb": 100, "target_signal_p50_us": 1000}),
    );
    Ok(())
}

/// Creates and starts `runs` runs and waits until every one is parked
/// `input-required` (as the store says); returns their ids.
async fn park(
    engine: &Engine,
    store: &dyn Store,
    def: &weft_model::Definition,
    runs: usize,
) -> anyhow::Result<Vec<RunId>> {
    let mut ids = Vec::with_capacity(runs);
    let mut batch = tokio::task::JoinSet::new();
    for n in 0..runs {
        let (engine, def) = (engine.clone(), def.clone());
        batch.spawn(async move {
            let id = engine.create_run(&def, json!({"n": n}), RunOptions::default()).await?;
            engine.start(&id);
            anyhow::Ok(id)
        });
        if batch.len() >= 64
            && let Some(r) = batch.join_next().await
        {
            ids.push(r??);
        }
    }
    while let Some(r) = batch.join_next().await {
        ids.push(r??);
    }
    // 10,000 runs park in ~1 s on the 2-core VM; 50 ms per run is ample.
    let allowed = STUCK + Duration::from_millis(50) * runs as u32;
    let deadline = Instant::now() + allowed;
    loop {
        let filter = RunFilter { state: Some(RunState::InputRequired), limit: Some(runs + 1), ..Default::default() };
        let waiting = store.list_runs(&filter).await?.len();
        let busy = engine.busy_runs();
        if waiting == runs && busy == 0 {
            return Ok(ids);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "W7: only {waiting} of {runs} runs parked (input-required) in {allowed:?}; {busy} still driven"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rss_is_read_from_proc() {
        let rss = super::rss_bytes().unwrap();
        assert!(rss > 1024 * 1024, "{rss}");
    }

    #[test]
    fn the_workflow_is_valid() {
        let def = super::definition().unwrap();
        assert_eq!(def.steps.len(), 2);
    }
}
