//! W9 beside Restate (`weft bench w9 --peer-restate URL`): the served
//! figures of weft and of a Restate service, taken by the same client in
//! the same minutes, round by round, each round's ratios printed.
//!
//! Why rounds, alternating: on a shared VM a minute can be 2× slower than
//! the next, so a comparison holds only when both sides meet the same
//! minutes. Each round measures both, weft first in odd rounds and Restate
//! first in even ones. Why one client: the figures then differ only by the
//! server. weft is called as an agent calls it, `wf_<template>` over MCP
//! 2026-07-28; Restate through its HTTP ingress, `POST /Chain/<template>`,
//! a service whose handlers make 40 or 3 journaled `ctx.run` steps
//! (`tests/restate/service.mjs`). Both keep one connection per call in
//! flight. Every answer is checked: weft's run completed, Restate's
//! handler returned its last step's value.
//!
//! `scripts/beside-restate.sh` starts Restate and its service and runs
//! this; it passes their process ids in `$WEFT_BENCH_PEER_PIDS` so the
//! peer's server CPU per run is measured as weft's is.

use serde_json::json;

use super::Figures;
use super::served::{Measured, measure, over_mcp};

/// Rounds of the comparison.
pub const ROUNDS: usize = 3;

/// The comparison: `mcp_url` is weft's MCP endpoint (served by process
/// `weft`), `ingress` Restate's ingress.
pub(crate) async fn beside(
    mcp_url: &str,
    weft: u32,
    ingress: &str,
    rounds: usize,
    out: &mut Figures,
) -> anyhow::Result<()> {
    let peer_pids = peer_pids()?;
    for round in 1..=ROUNDS {
        let weft_first = round % 2 == 1;
        let (w, r) = if weft_first {
            let w = weft_side(mcp_url, weft, rounds, out).await?;
            (w, restate_side(ingress, &peer_pids, rounds, out).await?)
        } else {
            let r = restate_side(ingress, &peer_pids, rounds, out).await?;
            (weft_side(mcp_url, weft, rounds, out).await?, r)
        };
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        let (chain, p50, tput) = (
            ratio(r.chain_p50_ms, w.chain_p50_ms),
            ratio(r.trivial_p50_ms, w.trivial_p50_ms),
            ratio(w.runs_per_s, r.runs_per_s),
        );
        let cpu = if peer_pids.is_empty() { f64::NAN } else { ratio(r.server_cpu_us, w.server_cpu_us) };
        let first = if weft_first { "weft" } else { "restate" };
        out.line(
            format!(
                "W9 beside restate round={round} first={first} chain40_ratio={chain:.2} p50_ratio={p50:.2} \
                 throughput_ratio={tput:.2} server_cpu_ratio={cpu:.2}"
            ),
            json!({"workload": "W9", "beside": "restate", "round": round, "first": first,
                   "chain40_ratio": chain, "p50_ratio": p50, "throughput_ratio": tput,
                   "server_cpu_ratio": if cpu.is_nan() { None } else { Some(cpu) }}),
        );
    }
    Ok(())
}

/// weft's side of a round: MCP 2026-07-28, a fresh client.
async fn weft_side(mcp_url: &str, weft: u32, rounds: usize, out: &mut Figures) -> anyhow::Result<Measured> {
    over_mcp(mcp_url, rmcp::model::ProtocolVersion::V_2026_07_28, weft, rounds, out).await
}

/// Restate's side of a round: `POST {ingress}/Chain/{template}`, each
/// answer checked to be the chain's last step's value (steps count from 0).
async fn restate_side(ingress: &str, pids: &[u32], rounds: usize, out: &mut Figures) -> anyhow::Result<Measured> {
    let http = reqwest::Client::new();
    let base = ingress.trim_end_matches('/').to_string();
    let call = move |template: &'static str| {
        let (http, url) = (http.clone(), format!("{base}/Chain/{template}"));
        async move {
            let r = http.post(&url).header("content-type", "application/json").body("null").send().await?;
            let status = r.status();
            let body = r.text().await?;
            anyhow::ensure!(status.as_u16() == 200, "Restate answered {status} to POST {url}: {body}");
            let want = if template == "chain40" { 39 } else { 2 };
            anyhow::ensure!(
                serde_json::from_str::<serde_json::Value>(&body).ok() == Some(json!(want)),
                "Restate's {template} returned {body}, not {want}"
            );
            anyhow::Ok(())
        }
    };
    measure(call, "restate=http", pids, rounds, out).await
}

/// The peer's processes, from `$WEFT_BENCH_PEER_PIDS` (comma-separated;
/// none when unset).
fn peer_pids() -> anyhow::Result<Vec<u32>> {
    let Ok(list) = std::env::var("WEFT_BENCH_PEER_PIDS") else { return Ok(vec![]) };
    list.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.trim().parse().map_err(|_| anyhow::anyhow!("WEFT_BENCH_PEER_PIDS: `{p}` is not a process id")))
        .collect()
}
