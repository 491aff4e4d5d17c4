//! W5 mcp-chain-20 of docs/performance.md as a cargo bench (the workload itself
//! is `weft_workloads::w5`, also run by `weft bench w5`).
//!
//! ```text
//! cargo bench -p weft --bench tools                 # ~10 s
//! cargo bench -p weft --bench tools -- --json out.json
//! ```
//!
//! `WEFT_BENCH_ROUNDS` (default 30) rounds of 20 calls per path.

fn main() -> anyhow::Result<()> {
    weft_runtime::process::small_pages();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json_out = args.iter().position(|a| a == "--json").and_then(|i| args.get(i + 1)).cloned();
    let rounds: usize = std::env::var("WEFT_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(30).max(1);
    println!("# load {}", weft_workloads::loadavg());
    let mut figures = weft_workloads::Figures::default();
    weft_workloads::w5::run(rounds, &mut figures)?;
    println!("# load {}", weft_workloads::loadavg());
    if let Some(p) = json_out {
        std::fs::write(&p, serde_json::to_string_pretty(&figures.json)?)?;
    }
    Ok(())
}
