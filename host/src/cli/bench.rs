//! `weft bench NAME... [--rounds N] [--runs N] [--json FILE]`: the
//! workloads of docs/performance.md that run from the CLI (see
//! [`weft_workloads`]). Names: `w5` (tool-step overhead against
//! server-everything), `w7` (runs parked on a wait: memory, and resuming
//! one by signal), `w8` (cold `weft run`), `w9` (runs served by `weft serve
//! --http` to a client process over MCP and the API, with the server's CPU
//! per run, then the same runs in this process; with `--peer-restate URL`,
//! beside Restate round by round), `w10` (many workers on
//! PostgreSQL: `--database URL`), or `all` (w5 to w9). The engine workloads
//! are `cargo bench -p weft --bench engine`.

use std::path::PathBuf;

use clap::Args;

use super::{Exit, bad};
use weft_workloads::Figures;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Workloads: w5, w7, w8, w9, w10 (with --database), or all.
    #[arg(required = true)]
    names: Vec<String>,
    /// Rounds per figure (default: 30 for w5, 20 for w8).
    #[arg(long)]
    rounds: Option<usize>,
    /// Parked runs for w7 (default 10000).
    #[arg(long)]
    runs: Option<usize>,
    /// The PostgreSQL server for w10: a URL naming any database its user
    /// may connect to (the bench creates and drops its own databases).
    #[arg(long, value_name = "URL", env = "WEFT_BENCH_DATABASE")]
    database: Option<String>,
    /// w9 only: measure weft over MCP beside a Restate service at this
    /// ingress URL, round by round (`scripts/beside-restate.sh` starts
    /// Restate and runs this).
    #[arg(long, value_name = "URL")]
    peer_restate: Option<String>,
    /// Also write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<Exit> {
    let mut names: Vec<String> = args.names.iter().map(|n| n.to_lowercase()).collect();
    if names.iter().any(|n| n == "all") {
        names = vec!["w5".into(), "w7".into(), "w8".into(), "w9".into()];
    }
    for n in &names {
        if !matches!(n.as_str(), "w5" | "w7" | "w8" | "w9" | "w10") {
            let engine = matches!(n.as_str(), "w1" | "w2" | "w3" | "w4" | "w6");
            let hint =
                if engine { " (the engine workloads run with `cargo bench -p weft --bench engine`)" } else { "" };
            return Err(bad(anyhow::anyhow!(
                "unknown workload `{n}`: `weft bench` runs w5, w7, w8, w9, w10 or all{hint}"
            )));
        }
    }
    if names.iter().any(|n| n == "w10") && args.database.is_none() {
        return Err(bad(anyhow::anyhow!(
            "w10 needs a PostgreSQL server: --database postgres://USER@HOST:PORT/DB (or WEFT_BENCH_DATABASE)"
        )));
    }
    if args.peer_restate.is_some() && names.iter().any(|n| n != "w9") {
        return Err(bad(anyhow::anyhow!("`--peer-restate` compares W9 only: run `weft bench w9 --peer-restate URL`")));
    }
    if let Some(url) = &args.peer_restate
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(bad(anyhow::anyhow!(
            "`--peer-restate {url}`: give Restate's ingress as an http:// URL, e.g. http://127.0.0.1:8080"
        )));
    }
    if args.runs == Some(0) {
        return Err(bad(anyhow::anyhow!("`--runs` must be at least 1")));
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "weft bench: this is a debug build; figures of a release build (`cargo build --release`) are the ones to compare"
        );
    }
    outln!("# load {}", weft_workloads::loadavg());
    let mut figures = Figures::default();
    for n in &names {
        match n.as_str() {
            "w5" => weft_workloads::w5::run(args.rounds.unwrap_or(30).max(1), &mut figures)?,
            "w7" => weft_workloads::w7::run(args.runs.unwrap_or(10_000), &mut figures)?,
            "w8" => weft_workloads::w8::run(args.rounds.unwrap_or(20).max(1), &mut figures)?,
            "w10" => weft_workloads::w10::run(args.database.as_deref().unwrap_or_default(), args.runs, &mut figures)?,
            _ => weft_workloads::w9::run(args.rounds.unwrap_or(20).max(1), args.peer_restate.as_deref(), &mut figures)?,
        }
    }
    outln!("# load {}", weft_workloads::loadavg());
    if let Some(p) = args.json {
        std::fs::write(&p, serde_json::to_string_pretty(&figures.json)?)?;
    }
    Ok(Exit::Success)
}
