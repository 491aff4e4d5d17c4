//! Measuring calls of a served workflow, for W9 alone and beside a peer:
//! the three figures (chain-40 one at a time, trivial-3 one at a time and
//! [`IN_FLIGHT`] at once) through any call that starts a run and waits for
//! its end, the serving processes' CPU per run, and the call over MCP.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use super::{Figures, pct};

/// Calls in flight for the throughput figure.
pub(crate) const IN_FLIGHT: usize = 100;

/// Makes `total` calls of `one`, [`IN_FLIGHT`] at a time; the first
/// failure ends it.
pub(crate) async fn in_flight<F, Fut>(total: usize, one: F) -> anyhow::Result<()>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..IN_FLIGHT {
        let (next, one) = (next.clone(), one.clone());
        tasks.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < total {
                one().await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(())
}

/// A call that starts one run of a template and returns once it ended
/// (checked to have completed).
pub(crate) trait Call: Fn(&'static str) -> Self::Fut + Clone + Send + Sync + 'static {
    type Fut: std::future::Future<Output = anyhow::Result<()>> + Send;
}

impl<F, Fut> Call for F
where
    F: Fn(&'static str) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    type Fut = Fut;
}

/// CPU time (user + system) of process `pid` so far, in µs (Linux; 0
/// elsewhere).
pub(crate) fn cpu_us(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the command (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line: 12 and 13 here.
    #[allow(unsafe_code)]
    // SAFETY: sysconf reads a configuration value; no pointers.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) * 1e6 / hz
}

/// What [`measure`] found: the figures a comparison with a peer divides.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    /// chain-40, one run at a time: the median, ms.
    pub chain_p50_ms: f64,
    /// trivial-3, one run at a time: the median, ms.
    pub trivial_p50_ms: f64,
    /// trivial-3 with [`IN_FLIGHT`] calls in flight: runs per second.
    pub runs_per_s: f64,
    /// The serving processes' CPU time per trivial-3 run in flight, µs.
    pub server_cpu_us: f64,
}

/// The three figures through `call` (`via` names the path); `servers` are
/// the serving processes, whose CPU time per run is reported too.
pub(crate) async fn measure<C: Call>(
    call: C,
    via: &str,
    servers: &[u32],
    rounds: usize,
    out: &mut Figures,
) -> anyhow::Result<Measured> {
    let server_cpu = || servers.iter().map(|&p| cpu_us(p)).sum::<f64>();
    let timed = |template: &'static str, n: usize| {
        let call = call.clone();
        async move {
            let mut ms = Vec::with_capacity(n);
            for _ in 0..n {
                let t0 = Instant::now();
                call(template).await?;
                ms.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            anyhow::Ok(ms)
        }
    };
    // Warm up: guests compiled and cached, connections open.
    timed("chain40", 3).await?;
    timed("trivial3", 20).await?;

    let ms = timed("chain40", rounds).await?;
    let (p50, p95) = (pct(&ms, 0.5), pct(&ms, 0.95));
    let chain_p50_ms = p50;
    out.line(
        format!("W9 served chain-40 {via} runs={rounds} total_ms_p50={p50:.2} total_ms_p95={p95:.2} target_ms=4"),
        json!({"workload": "W9", "shape": "chain-40", "via": via, "runs": rounds,
               "total_ms_p50": p50, "total_ms_p95": p95, "target_ms": 4}),
    );

    let n = rounds * 10;
    let ms = timed("trivial3", n).await?;
    let (p50, p95) = (pct(&ms, 0.5), pct(&ms, 0.95));
    let trivial_p50_ms = p50;
    out.line(
        format!("W9 served trivial-3 {via} latency runs={n} p50_ms={p50:.3} p95_ms={p95:.3} target_p50_ms=1"),
        json!({"workload": "W9", "shape": "trivial-3", "via": via, "runs": n,
               "p50_ms": p50, "p95_ms": p95, "target_p50_ms": 1}),
    );

    let total = (rounds * 100).max(IN_FLIGHT * 10);
    let (cpu0, client0) = (server_cpu(), cpu_us(std::process::id()));
    let t0 = Instant::now();
    in_flight(total, move || call("trivial3")).await?;
    let runs_per_s = total as f64 / t0.elapsed().as_secs_f64();
    let per_s = runs_per_s.round() as u64;
    let server_us = ((server_cpu() - cpu0) / total as f64).round();
    let client_us = ((cpu_us(std::process::id()) - client0) / total as f64).round();
    out.line(
        format!(
            "W9 served trivial-3 {via} throughput in_flight={IN_FLIGHT} runs={total} runs_per_s={per_s} \
             server_cpu_us_per_run={server_us} client_cpu_us_per_run={client_us} target=4000"
        ),
        json!({"workload": "W9", "shape": "trivial-3", "via": via, "in_flight": IN_FLIGHT, "runs": total,
               "runs_per_s": per_s, "server_cpu_us_per_run": server_us, "client_cpu_us_per_run": client_us,
               "target": 4000}),
    );
    Ok(Measured { chain_p50_ms, trivial_p50_ms, runs_per_s, server_cpu_us: server_us })
}

/// Over MCP: `wf_<template>` on one client connection, negotiating
/// `version` (2025-11-25: one session; 2026-07-28: stateless requests).
pub(crate) async fn over_mcp(
    url: &str,
    version: rmcp::model::ProtocolVersion,
    server: u32,
    rounds: usize,
    out: &mut Figures,
) -> anyhow::Result<Measured> {
    let via = format!("mcp=http-{version}");
    let info = rmcp::model::ClientConfig::new(
        rmcp::model::ClientCapabilities::default(),
        rmcp::model::Implementation::new("weft-bench-w9", env!("CARGO_PKG_VERSION")),
    );
    let lifecycle =
        rmcp::service::ClientLifecycleMode::Auto { preferred_versions: vec![version], legacy_version: None };
    // A client as the official SDKs' (httpx, undici): connections kept
    // alive and reused, and every call of the bench in flight at once.
    // rmcp's own default opens a connection per request and sends at most
    // 16 at a time.
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).max_concurrent_requests(IN_FLIGHT);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let client = rmcp::ClientServiceExt::serve_with_lifecycle(info, transport, lifecycle).await?;
    let peer = client.peer().clone();
    let call = move |template: &'static str| {
        let peer = peer.clone();
        async move {
            let tool = format!("wf_{template}");
            let r = peer.call_tool(CallToolRequestParams::new(tool.clone())).await?;
            let state = r.structured_content.as_ref().and_then(|v| v.get("state")).and_then(Value::as_str);
            anyhow::ensure!(state == Some("completed"), "a {tool} run did not complete: {r:?}");
            anyhow::Ok(())
        }
    };
    let measured = measure(call, &via, &[server], rounds, out).await;
    let _ = client.cancel().await;
    measured
}
