//! W5 mcp-chain-20 of performance.md: 20 sequential tool steps calling
//! `echo` on a local stdio MCP server (`@modelcontextprotocol/server-everything`
//! from `tests/mcp-peers`), against the same 20 calls made directly with
//! rmcp on one connection: the difference per call is weft's tool-step
//! overhead (target ≤ 100 µs). A middle line times the same calls through
//! weft's `Upstreams::call` alone (no engine, no store), to split the cost.
//!
//! ```text
//! cargo bench -p weft --bench tools                 # ~10 s
//! cargo bench -p weft --bench tools -- --json out.json
//! ```
//!
//! `WEFT_BENCH_ROUNDS` (default 30) rounds of 20 calls each; medians and p95
//! of the per-call time of each round. Durability `normal`, SQLite file in a
//! temp dir. Lines: `W5 mcp-chain-20 path=direct|upstreams|engine ...` and
//! one `W5 mcp-chain-20 overhead_us_p50=...` (engine − direct).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use weft::runner::CodeRunner;
use weft::tool_runner::{Runners, ToolRunner};
use weft_engine::{Engine, EngineConfig, RunOptions, RunState, SeededRng, SystemClock};
use weft_mcp::{ServerConfig, ToolCall, ToolFilter, Transport, Upstreams};
use weft_model::NoSchemas;
use weft_store_sqlite::{Durability, SqliteStore};

const CALLS: usize = 20;

fn everything_js() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp-peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(p.exists(), "run tests/mcp-peers/setup.sh first ({} is missing)", p.display());
    p
}

fn pct(samples: &[f64], p: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn config() -> ServerConfig {
    ServerConfig {
        name: "ev".into(),
        transport: Transport::Stdio {
            command: "node".into(),
            args: vec![everything_js().display().to_string(), "stdio".into()],
            env: Default::default(),
            cwd: None,
        },
        timeout: None,
        tools: ToolFilter::default(),
    }
}

fn line(path: &str, per_call_us: &[f64], out: &mut Vec<Value>) -> f64 {
    let (p50, p95) = (pct(per_call_us, 0.5), pct(per_call_us, 0.95));
    println!(
        "W5 mcp-chain-20 path={path} calls={CALLS} rounds={} per_call_us_p50={p50:.1} per_call_us_p95={p95:.1}",
        per_call_us.len()
    );
    out.push(json!({"workload": "W5", "path": path, "calls": CALLS, "rounds": per_call_us.len(),
                    "per_call_us_p50": p50, "per_call_us_p95": p95}));
    p50
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json_out = args.iter().position(|a| a == "--json").and_then(|i| args.get(i + 1)).cloned();
    let rounds: usize = std::env::var("WEFT_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(30).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!("# load {}", loadavg());
    let mut figures = vec![];

    // 1. Direct rmcp: one connection, 20 sequential calls per round.
    let direct: Vec<f64> = rt.block_on(async {
        let mut cmd = tokio::process::Command::new("node");
        cmd.arg(everything_js()).arg("stdio");
        let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let call = || {
            let mut args = serde_json::Map::new();
            args.insert("message".into(), json!("hello"));
            client.call_tool(CallToolRequestParams::new("echo").with_arguments(args))
        };
        for _ in 0..CALLS {
            call().await.unwrap();
        }
        let mut out = vec![];
        for _ in 0..rounds {
            let t0 = Instant::now();
            for _ in 0..CALLS {
                call().await.unwrap();
            }
            out.push(t0.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
        }
        let _ = client.cancel().await;
        out
    });
    let direct_p50 = line("direct", &direct, &mut figures);

    // 2. weft's Upstreams::call alone.
    let ups = Arc::new(Upstreams::new([config()]));
    let via_pool: Vec<f64> = rt.block_on(async {
        let call = |i: usize| ToolCall {
            server: "ev".into(),
            tool: "echo".into(),
            arguments: json!({"message": "hello"}),
            idempotency_key: Some(format!("r/s/{i}")),
            timeout: Some(Duration::from_secs(10)),
            progress: None,
        };
        for i in 0..CALLS {
            ups.call(call(i), std::future::pending()).await.unwrap();
        }
        let mut out = vec![];
        for _ in 0..rounds {
            let t0 = Instant::now();
            for i in 0..CALLS {
                ups.call(call(i), std::future::pending()).await.unwrap();
            }
            out.push(t0.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
        }
        out
    });
    line("upstreams", &via_pool, &mut figures);

    // 3. The engine: a run of 20 sequential tool steps, committed to SQLite.
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("weft.db"), Durability::Normal).unwrap());
    let settings = weft::config::Settings {
        data_dir: dir.path().join("data"),
        cache_dir: dir.path().join("cache"),
        config_path: None,
        file: Arc::default(),
        servers: Arc::new(vec![config()]),
    };
    let code = CodeRunner::from_settings(&settings, dir.path().to_path_buf()).unwrap();
    let runner = Runners::new(code, ToolRunner::new(ups.clone()));
    let steps: Vec<Value> = (0..CALLS)
        .map(|i| {
            let mut s = json!({"name": format!("s{i}"), "tool": {"server": "ev", "name": "echo"},
                               "input": {"message": "hello"}});
            if i > 0 {
                s["after"] = json!([format!("s{}", i - 1)]);
            }
            s
        })
        .collect();
    let def = weft_model::from_value(&json!({"name": "w5", "version": 1, "steps": steps}), &NoSchemas).unwrap();
    let per_call: Vec<f64> = rt.block_on(async {
        let engine = Engine::new(
            store,
            Arc::new(runner),
            Arc::new(SystemClock),
            Arc::new(SeededRng::from_entropy()),
            EngineConfig::default(),
        );
        let mut out = vec![];
        for r in 0..rounds + 1 {
            let t0 = Instant::now();
            let id = engine.submit(&def, json!({}), RunOptions::default()).await.unwrap();
            let rec = engine.wait(&id).await.unwrap();
            assert_eq!(rec.state, RunState::Completed, "{:?}", rec.error);
            if r > 0 {
                out.push(t0.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
            }
        }
        ups.shutdown().await;
        out
    });
    let engine_p50 = line("engine", &per_call, &mut figures);
    let overhead = engine_p50 - direct_p50;
    println!("W5 mcp-chain-20 overhead_us_p50={overhead:.1} target_us=100");
    figures.push(json!({"workload": "W5", "figure": "overhead", "overhead_us_p50": overhead, "target_us": 100}));
    println!("# load {}", loadavg());
    if let Some(p) = json_out {
        std::fs::write(&p, serde_json::to_string_pretty(&figures).unwrap()).unwrap();
    }
}
