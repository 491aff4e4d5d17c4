//! W9 served of docs/performance.md: what a client of `weft serve` waits for.
//! This executable starts `weft serve --http` as a separate process, over
//! a fresh data directory holding two saved templates, and calls them over
//! MCP streamable HTTP as an LLM's client would — one `wf_<name>` call per
//! run, answered once the run has ended:
//!
//! - `chain40`: 40 sequential code steps (the bundled `json-select`), one
//!   run at a time (W1 served; target ≤ 4 ms);
//! - `trivial3`: 3 code steps, one at a time (W3 latency; p50 ≤ 1 ms, p95
//!   ≤ 2 ms) and with 100 calls in flight (W3 throughput; ≥ 4,000 runs/s).
//!
//! Over MCP both revisions are measured: 2025-11-25 (one session) and
//! 2026-07-28 (stateless: a server object per request). Each throughput
//! line also gives the serving process's CPU time per run, and the client's. The same
//! figures are then taken over the HTTP API: `POST
//! /api/v1/runs {"template", "wait_ms"}`, answered with the ended run.
//! Every call is checked to have completed its run. Last, the same
//! trivial-3 runs in this process with no server between (`in-process`:
//! the VM's speed in the same minutes, and the engine's own CPU per run).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::served::{IN_FLIGHT, cpu_us, in_flight, measure, over_mcp};
use super::{Figures, pct};

/// A chain of `n` sequential `json-select` steps (also the API tests').
pub fn chain(name: &str, n: usize) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let mut s = json!({"name": format!("s{i}"), "code": {"plugin": "json-select"},
                               "input": {"data": {"a": i}, "path": "a"}});
            if i > 0 {
                s["after"] = json!([format!("s{}", i - 1)]);
            }
            s
        })
        .collect();
    json!({"name": name, "version": 1, "steps": steps})
}

/// `weft serve --http` on a free port of 127.0.0.1: the child and its URL.
fn serve(exe: &std::path::Path, dir: &std::path::Path) -> anyhow::Result<(Child, String)> {
    let mut child = Command::new(exe)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("WEFT_DATA_DIR", dir.join("data"))
        .env_remove("WEFT_CONFIG")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let url = loop {
        let Some(line) = lines.next().transpose()? else {
            anyhow::bail!("weft serve ended before it listened");
        };
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap_or_default().to_string();
        }
    };
    // Keep draining what it logs.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Ok((child, url))
}

/// Runs W9 with `rounds` sequential runs per latency figure.
///
/// `$WEFT_BENCH_SERVER` names another `weft` binary to serve (an A/B of two
/// builds with one client).
///
/// With `peer_restate` (Restate's ingress URL), weft over MCP 2026-07-28
/// and Restate are measured instead, round by round ([`super::w9_restate`]).
pub fn run(rounds: usize, peer_restate: Option<&str>, out: &mut Figures) -> anyhow::Result<()> {
    let exe = match std::env::var_os("WEFT_BENCH_SERVER") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe()?,
    };
    let dir = tempfile::tempdir()?;
    for (name, n) in [("chain40", 40), ("trivial3", 3)] {
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, chain(name, n).to_string())?;
        let st = Command::new(&exe)
            .args(["templates", "save"])
            .arg(&file)
            .env("WEFT_DATA_DIR", dir.path().join("data"))
            .env_remove("WEFT_CONFIG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        anyhow::ensure!(st.success(), "`weft templates save` failed ({st})");
    }
    let (mut child, url) = serve(&exe, dir.path())?;
    let pid = child.id();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(async {
        if let Some(ingress) = peer_restate {
            return super::w9_restate::beside(&url, pid, ingress, rounds, out).await;
        }
        for version in [rmcp::model::ProtocolVersion::V_2025_11_25, rmcp::model::ProtocolVersion::V_2026_07_28] {
            if wanted(&format!("mcp=http-{version}")) {
                over_mcp(&url, version, pid, rounds, out).await?;
            }
        }
        if wanted("api=http") {
            over_api(&url.replace("/mcp", "/api/v1/runs"), pid, rounds, out).await?;
        }
        anyhow::Ok(())
    });
    let _ = child.kill();
    let _ = child.wait();
    result?;
    if wanted("in-process") {
        rt.block_on(in_process(rounds, out))?;
    }
    Ok(())
}

/// W1 and W3 throughput in this process, minutes after the served
/// figures: the same chain-40 runs one at a time and trivial-3 runs 100
/// in flight, on a fresh SQLite store, with no server between. It shows
/// the VM's speed beside the served figures, and its CPU per run is the
/// engine's own share of the server's.
async fn in_process(rounds: usize, out: &mut Figures) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store =
        weft_store_sqlite::SqliteStore::open(dir.path().join("weft.db"), weft_store_sqlite::Durability::Normal)?;
    let store: Arc<dyn weft_engine::Store> = Arc::new(store);
    // W1: the served chain-40, one run at a time.
    let forty = super::client::Client::over(store.clone(), dir.path(), chain("chain40", 40)).await?;
    let mut ms = vec![];
    for i in 0..rounds + 3 {
        let t0 = Instant::now();
        anyhow::ensure!(forty.run_here().await?, "an in-process chain-40 run did not complete");
        if i >= 3 {
            ms.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    let (p50, p95) = (pct(&ms, 0.5), pct(&ms, 0.95));
    out.line(
        format!("W9 in-process chain-40 runs={} total_ms_p50={p50:.2} total_ms_p95={p95:.2}", ms.len()),
        json!({"workload": "W9", "shape": "chain-40", "via": "in-process", "runs": ms.len(),
               "total_ms_p50": p50, "total_ms_p95": p95}),
    );
    let c = Arc::new(super::client::Client::over(store, dir.path(), chain("trivial3", 3)).await?);
    for _ in 0..20 {
        anyhow::ensure!(c.run_here().await?, "an in-process trivial-3 run did not complete");
    }
    let total = (rounds * 100).max(IN_FLIGHT * 10);
    let cpu0 = cpu_us(std::process::id());
    let t0 = Instant::now();
    in_flight(total, move || {
        let c = c.clone();
        async move {
            anyhow::ensure!(c.run_here().await?, "an in-process trivial-3 run did not complete");
            Ok(())
        }
    })
    .await?;
    let per_s = (total as f64 / t0.elapsed().as_secs_f64()).round() as u64;
    let cpu = ((cpu_us(std::process::id()) - cpu0) / total as f64).round();
    out.line(
        format!("W9 in-process trivial-3 throughput in_flight={IN_FLIGHT} runs={total} runs_per_s={per_s} cpu_us_per_run={cpu}"),
        json!({"workload": "W9", "shape": "trivial-3", "via": "in-process", "in_flight": IN_FLIGHT, "runs": total,
               "runs_per_s": per_s, "cpu_us_per_run": cpu}),
    );
    Ok(())
}

/// Whether the path `via` is measured: all of them, or those whose name
/// contains `$WEFT_BENCH_W9_VIA` (e.g. `2026`, `api`: to profile one).
fn wanted(via: &str) -> bool {
    std::env::var("WEFT_BENCH_W9_VIA").map_or(true, |only| via.contains(&only))
}

/// Over the HTTP API: `POST /api/v1/runs {"template", "wait_ms"}`.
async fn over_api(runs_url: &str, server: u32, rounds: usize, out: &mut Figures) -> anyhow::Result<()> {
    let (http, url) = (reqwest::Client::new(), runs_url.to_string());
    let call = move |template: &'static str| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http.post(&url).json(&json!({"template": template, "wait_ms": 60000})).send().await?;
            anyhow::ensure!(r.status().as_u16() == 201, "POST /api/v1/runs answered {}", r.status());
            let run: Value = r.json().await?;
            anyhow::ensure!(run["state"] == "completed", "a {template} run did not complete: {run}");
            anyhow::Ok(())
        }
    };
    measure(call, "api=http", &[server], rounds, out).await?;
    Ok(())
}
