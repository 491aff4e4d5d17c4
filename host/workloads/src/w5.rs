//! W5 mcp-chain-20 of docs/performance.md: 20 sequential tool steps calling
//! `echo` on a local stdio MCP server (`@modelcontextprotocol/server-everything`
//! from `tests/mcp-peers`), against the same 20 calls made directly with
//! rmcp on one connection: the difference per call is weft's tool-step
//! overhead (target ≤ 100 µs). A middle line times the same calls through
//! weft's `Upstreams::call` alone (no engine, no store), to split the cost.
//! Durability `normal`, SQLite file in a temp dir.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use weft_engine::{Engine, EngineConfig, RunOptions, RunState, SeededRng, SystemClock};
use weft_mcp_client::{ServerConfig, ToolCall, ToolFilter, Transport, Upstreams};
use weft_model::NoSchemas;
use weft_store_sqlite::{Durability, SqliteStore};

use super::{Figures, pct};
use weft_runtime::runner::CodeRunner;
use weft_runtime::tool_runner::{Runners, ToolRunner};

const CALLS: usize = 20;

/// server-everything's entry point: `$WEFT_BENCH_EVERYTHING`, else the
/// pinned copy in this repository's `tests/mcp-peers`.
fn everything_js() -> anyhow::Result<PathBuf> {
    let p = std::env::var_os("WEFT_BENCH_EVERYTHING").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/mcp-peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    });
    anyhow::ensure!(
        p.exists(),
        "W5 needs server-everything: run tests/mcp-peers/setup.sh or set WEFT_BENCH_EVERYTHING ({} is missing)",
        p.display()
    );
    Ok(p)
}

fn config(js: &std::path::Path) -> ServerConfig {
    ServerConfig {
        name: "ev".into(),
        transport: Transport::Stdio {
            command: "node".into(),
            args: vec![js.display().to_string(), "stdio".into()],
            env: Default::default(),
            cwd: None,
        },
        timeout: None,
        tools: ToolFilter::default(),
        secrets: Default::default(),
    }
}

fn line(path: &str, per_call_us: &[f64], out: &mut Figures) -> f64 {
    let (p50, p95) = (pct(per_call_us, 0.5), pct(per_call_us, 0.95));
    out.line(
        format!(
            "W5 mcp-chain-20 path={path} calls={CALLS} rounds={} per_call_us_p50={p50:.1} per_call_us_p95={p95:.1}",
            per_call_us.len()
        ),
        json!({"workload": "W5", "path": path, "calls": CALLS, "rounds": per_call_us.len(),
               "per_call_us_p50": p50, "per_call_us_p95": p95}),
    );
    p50
}

/// Runs W5 with `rounds` rounds of 20 calls per path.
pub fn run(rounds: usize, out: &mut Figures) -> anyhow::Result<()> {
    let js = everything_js()?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;

    // 1. Direct rmcp: one connection, 20 sequential calls per round.
    let direct: Vec<f64> = rt.block_on(async {
        let mut cmd = tokio::process::Command::new("node");
        cmd.arg(&js).arg("stdio").stderr(std::process::Stdio::null());
        let (proc, _) = TokioChildProcess::builder(cmd).stderr(std::process::Stdio::null()).spawn()?;
        let client = ().serve(proc).await?;
        let call = || {
            let mut args = serde_json::Map::new();
            args.insert("message".into(), json!("hello"));
            client.call_tool(CallToolRequestParams::new("echo").with_arguments(args))
        };
        for _ in 0..CALLS {
            call().await?;
        }
        let mut out = vec![];
        for _ in 0..rounds {
            let t0 = Instant::now();
            for _ in 0..CALLS {
                call().await?;
            }
            out.push(t0.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
        }
        let _ = client.cancel().await;
        anyhow::Ok(out)
    })?;
    let direct_p50 = line("direct", &direct, out);

    // 2. weft's Upstreams::call alone.
    let ups = Arc::new(Upstreams::new([config(&js)]));
    let via_pool: Vec<f64> = rt.block_on(async {
        let call = |i: usize| ToolCall {
            server: "ev".into(),
            tool: "echo".into(),
            arguments: json!({"message": "hello"}),
            idempotency_key: Some(format!("r/s/{i}")),
            timeout: Some(Duration::from_secs(10)),
            progress: None,
            traceparent: None,
        };
        for i in 0..CALLS {
            ups.call(call(i), std::future::pending()).await?;
        }
        let mut out = vec![];
        for _ in 0..rounds {
            let t0 = Instant::now();
            for i in 0..CALLS {
                ups.call(call(i), std::future::pending()).await?;
            }
            out.push(t0.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
        }
        anyhow::Ok(out)
    })?;
    line("upstreams", &via_pool, out);

    // 4. The engine: a run of 20 sequential tool steps, committed to SQLite.
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(dir.path().join("weft.db"), Durability::Normal)?);
    let settings = weft_runtime::config::Settings {
        servers: Arc::new(vec![config(&js)]),
        ..weft_runtime::config::Settings::in_dir(dir.path())
    };
    let code = CodeRunner::from_settings(&settings, dir.path().to_path_buf())?;
    let runner = Arc::new(Runners::new(code, ToolRunner::new(ups.clone())));

    // 3. The step runner alone (what the engine calls per attempt).
    let via_runner: Vec<f64> = rt.block_on(async {
        let run = weft_engine::RunId::generate(0, &SeededRng::from_entropy());
        let req = |i: usize| weft_engine::StepRequest {
            run: run.clone(),
            step: format!("s{i}"),
            item: None,
            attempt: weft_engine::AttemptNo::FIRST,
            idempotency_key: format!("{run}/s{i}/1"),
            deadline_ms: None,
            action: weft_model::Action::Tool(weft_model::ToolRef { server: "ev".into(), name: "echo".into() }),
            priority: 0,
            input: json!({"message": "hello"}),
            limits: None,
            run_fuel_left: None,
            transform: None,
            events: Arc::new(weft_engine::runner::NoEvents),
            trace: None,
            answer: None,
        };
        let mut out = vec![];
        for _ in 0..rounds {
            let t0 = Instant::now();
            for i in 0..CALLS {
                weft_engine::StepRunner::run(runner.as_ref(), req(i), weft_engine::CancelToken::new())
                    .await
                    .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            }
            out.push(t0.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
        }
        anyhow::Ok(out)
    })?;
    line("runner", &via_runner, out);
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
    let def = weft_model::from_value(&json!({"name": "w5", "version": 1, "steps": steps}), &NoSchemas)
        .map_err(|p| anyhow::anyhow!("the W5 definition is invalid: {p:?}"))?;
    let per_call: Vec<f64> = rt.block_on(async {
        let engine = Engine::new(
            store,
            runner,
            Arc::new(SystemClock),
            Arc::new(SeededRng::from_entropy()),
            EngineConfig::default(),
        );
        let mut out = vec![];
        for r in 0..rounds + 1 {
            let t0 = Instant::now();
            let id = engine.submit(&def, json!({}), RunOptions::default()).await?;
            let rec = engine.wait(&id).await?;
            anyhow::ensure!(rec.state == RunState::Completed, "a W5 run ended {}: {:?}", rec.state, rec.error);
            if r > 0 {
                out.push(t0.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
            }
        }
        ups.shutdown().await;
        anyhow::Ok(out)
    })?;
    let engine_p50 = line("engine", &per_call, out);
    let overhead = engine_p50 - direct_p50;
    out.line(
        format!("W5 mcp-chain-20 overhead_us_p50={overhead:.1} target_us=100"),
        json!({"workload": "W5", "figure": "overhead", "overhead_us_p50": overhead, "target_us": 100}),
    );
    Ok(())
}
