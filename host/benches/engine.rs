//! Engine benchmarks of docs/performance.md: W1 chain-40, W3 trivial-3,
//! W4 fan-out and W6 crash-resume, over the real pieces (the SQLite store
//! on a file in a temp dir, the engine, the sandbox's `CodeRunner` with the
//! `hostile` test guest; W6 the real `weft worker` binary).
//!
//! ```text
//! cargo bench -p weft --bench engine                     # everything (~20-60 s)
//! cargo bench -p weft --bench engine -- w1 w3            # some workloads
//! cargo bench -p weft --bench engine -- --json out.json  # the figures as JSON too
//! ```
//!
//! Each figure is one greppable line (`W1 chain-40 durability=normal ...`),
//! medians (`p50`) and `p95` over repeated rounds. A `#` line before and
//! after gives the load average, so a reader can tell whether the machine
//! was busy. Knobs (environment):
//!
//! | variable | default | what |
//! |---|---|---|
//! | `WEFT_BENCH` | `w1,w3,w4,w6` | workloads (also as arguments) |
//! | `WEFT_BENCH_ROUNDS` | per workload | rounds of W1 (20), W3 throughput (5), W4 (3), W6 (20) |
//! | `WEFT_BENCH_W3_RUNS` | 200 | runs timed one at a time (latency) |
//! | `WEFT_BENCH_W3_INFLIGHT` | 200 | runs in flight (throughput) |
//! | `WEFT_BENCH_W4_ITEMS` | 10000 | items of the `for_each` |
//! | `WEFT_BENCH_W4_MODE` | `fib` | `fib` (fib(10) per item) or `ok` (trivial) |
//! | `WEFT_BENCH_W4_RUNNER` | `wasm` | `native`: items computed in the host (the floor) |
//! | `WEFT_BENCH_W6_RUNS` | 1000 | runs in flight when the worker is killed |
//! | `WEFT_BENCH_W6_FIB` | 27 | fib(n) of each of W6's sequential steps |
//! | `WEFT_BENCH_SEED` | random | seed of W6's kill times (printed) |
//! | `WEFT_BENCH_DURABILITY` | `normal,full` | durabilities of W1 and W3 |
//! | `WEFT_BENCH_NATIVE` | 1 | `0`: skip the `runner=native` and `floor` lines of W1 and W3 |
//! | `WEFT_BENCH_FLOOR_CALLS` | 2000 | calls timed by W1's `floor` lines |
//!
//! W1 and W3 run twice: `runner=wasm` (the sandbox's `CodeRunner` and the
//! hostile guest: the real figure) and `runner=native` (the same steps
//! computed in the host: the engine + store floor, to split the costs).
//! W1 also prints two `floor` lines: a fib(10) call straight into the
//! sandbox, and one through `CodeRunner` (no engine, no store).
//!
//! W6 creates the runs (4 sequential fib steps + a `for_each` of 3 items
//! each) through the store, then starts the real `weft worker` of the
//! same profile (cargo builds it for a bench: `CARGO_BIN_EXE_weft`),
//! SIGKILLs it at a random moment (after a random number of new step
//! successes, seeded), restarts it, `rounds` times; a last `weft worker
//! --until-idle` finishes the work. Figures: `recovery_ms`, from the
//! restart (spawn) to the first transition the new owner commits (the
//! earliest event stamped after the spawn); `resume_ms`, from the restart
//! to the first step success it commits (includes loading the guest and
//! the 1,000 drivers); then an audit of the store: every run completed,
//! and for every (run, step, item) exactly one succeeded attempt, the last
//! one started (`repeated_successes` counts violations, must be 0);
//! `running_at_kill_p50` / `_max`: attempts claimed and not finished at a
//! kill, each run again after it (`reexecuted_attempts`, in all). The
//! steps carry a `retry` policy: the engine counts an attempt interrupted
//! by a crash as a failed attempt, so under the default policy (one
//! attempt) a kill would fail the run.

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_engine::clock::system_now_ms as now_ms;

use weft_workloads::loadavg;

use serde_json::{Value, json};
use weft_engine::runner::{StepOutput, StepRequest, StepRunner};
use weft_engine::{CancelToken, Engine, EngineConfig, Rng, RunOptions, RunState, SeededRng, StepError, SystemClock};
use weft_model::{Definition, NoSchemas};
use weft_runtime::config::Settings;
use weft_runtime::runner::CodeRunner;
use weft_store_sqlite::{Durability, SqliteStore};

// ---- small helpers --------------------------------------------------------

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

fn rounds(default: usize) -> usize {
    env_usize("WEFT_BENCH_ROUNDS", default).max(1)
}

/// Nearest-rank percentile (`p` in 0..=1) of unsorted samples.
fn pct(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// `VmHWM` (peak resident set) of this process, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("target")
}

/// Where every process of the bench caches compiled guests.
fn cache_dir() -> PathBuf {
    target_dir().join("bench-cache")
}

fn settings(dir: &Path) -> Settings {
    Settings { cache_dir: cache_dir(), ..Settings::in_dir(dir) }
}

/// Stores the hostile guest in the data dir's blob store; its digest.
fn pin_hostile(settings: &Settings) -> String {
    let wasm = std::fs::read(weft_test_artifacts::HOSTILE).expect("the hostile guest is built");
    weft_runtime::guests::registry(settings).put_blob(&wasm).expect("store the guest").hex()
}

fn definition(doc: &Value) -> Definition {
    weft_model::from_value(doc, &NoSchemas).unwrap_or_else(|p| panic!("bad bench definition: {p:?}\n{doc}"))
}

/// `n` sequential code steps of the hostile guest (each refers to the one before).
fn chain(name: &str, n: usize, hex: &str, input: Value, retry: Option<Value>) -> Value {
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let mut inp = input.clone();
            if i > 0 {
                inp["prev"] = json!(format!("@s{}", i - 1));
            }
            let mut s = json!({"name": format!("s{i}"), "code": {"sha256": hex}, "input": inp});
            if let Some(r) = &retry {
                s["retry"] = r.clone();
            }
            s
        })
        .collect();
    json!({"name": name, "steps": steps})
}

/// The figures printed so far (for `--json`).
struct Report {
    figures: Vec<Value>,
}

impl Report {
    /// Prints `line` and keeps `fields` (with the line) for the JSON file.
    fn figure(&mut self, line: String, mut fields: Value) {
        println!("{line}");
        let _ = std::io::stdout().flush();
        fields["line"] = json!(line);
        self.figures.push(fields);
    }
}

/// The floor: the same steps computed natively in the host (no sandbox),
/// to split the engine + store cost from the guest invocation cost.
struct Native;

fn fib(n: u64) -> u64 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

#[async_trait::async_trait]
impl StepRunner for Native {
    fn finishes_in_place(&self, _: &weft_model::Action) -> bool {
        true
    }

    async fn run(&self, req: StepRequest, _: CancelToken) -> Result<StepOutput, StepError> {
        Ok(StepOutput::Done(match req.input["mode"].as_str() {
            Some("fib") => json!(fib(std::hint::black_box(req.input["n"].as_u64().unwrap_or(10)))),
            _ => json!({"ok": true, "step": req.step, "attempt": req.attempt.get(), "key": req.idempotency_key}),
        }))
    }
}

/// Which step runner an in-process engine uses.
#[derive(Clone, Copy, PartialEq)]
enum Runner {
    /// The sandbox (`CodeRunner`) with the hostile guest.
    Wasm,
    /// [`Native`].
    Native,
}

impl Runner {
    fn label(self) -> &'static str {
        match self {
            Runner::Wasm => "wasm",
            Runner::Native => "native",
        }
    }
}

/// `wasm`, then `native` unless `WEFT_BENCH_NATIVE=0`; just one of them
/// with `WEFT_BENCH_RUNNER=wasm|native`.
fn runners() -> Vec<Runner> {
    match std::env::var("WEFT_BENCH_RUNNER").as_deref() {
        Ok("wasm") => return vec![Runner::Wasm],
        Ok("native") => return vec![Runner::Native],
        Ok(other) => panic!("WEFT_BENCH_RUNNER: unknown runner {other:?} (wasm or native)"),
        Err(_) => {}
    }
    if std::env::var("WEFT_BENCH_NATIVE").as_deref() == Ok("0") {
        vec![Runner::Wasm]
    } else {
        vec![Runner::Wasm, Runner::Native]
    }
}

/// An engine over a fresh SQLite file and the sandbox.
struct InProc {
    dir: tempfile::TempDir,
    engine: Engine,
    hex: String,
    /// The SQLite store (absent with `WEFT_BENCH_STORE=mem`), for its counters.
    sqlite: Option<Arc<SqliteStore>>,
}

impl InProc {
    /// Transactions, batches and WAL frames the store committed so far.
    fn commits(&self) -> (u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.sqlite.as_ref().map_or((0, 0, 0), |s| {
            let st = s.stats();
            (st.transactions.load(Relaxed), st.batches.load(Relaxed), st.frames.load(Relaxed))
        })
    }
}

fn in_proc(durability: Durability, config: EngineConfig, runner: Runner) -> InProc {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = settings(dir.path());
    let hex = pin_hostile(&settings);
    // `WEFT_BENCH_STORE=mem`: the engine's in-memory store instead of
    // SQLite, to split the engine's own overhead from the store's.
    let (store, sqlite): (Arc<dyn weft_engine::store::Store>, _) =
        if std::env::var("WEFT_BENCH_STORE").as_deref() == Ok("mem") {
            (Arc::new(weft_engine::MemStore::new()), None)
        } else {
            let s = Arc::new(SqliteStore::open(dir.path().join("bench.db"), durability).expect("open the store"));
            (s.clone(), Some(s))
        };
    let runner: Arc<dyn StepRunner> = match runner {
        Runner::Wasm => Arc::new(CodeRunner::from_settings(&settings, dir.path().to_path_buf()).expect("the sandbox")),
        Runner::Native => Arc::new(Native),
    };
    let engine = Engine::new(store, runner, Arc::new(SystemClock), Arc::new(SeededRng::from_entropy()), config);
    InProc { dir, engine, hex, sqlite }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime")
}

async fn run_once(engine: &Engine, def: &Arc<Definition>, input: Value) -> Duration {
    let t = Instant::now();
    let id = engine.submit_shared(def.clone(), input, RunOptions::default()).await.expect("submit");
    let rec = engine.wait(&id).await.expect("wait");
    let took = t.elapsed();
    assert_eq!(rec.state, RunState::Completed, "run {id} ended {}: {:?}", rec.state, rec.error);
    took
}

fn durabilities() -> Vec<(&'static str, Durability)> {
    let want = std::env::var("WEFT_BENCH_DURABILITY").unwrap_or_else(|_| "normal,full".into());
    let mut out = vec![];
    for w in want.split(',').map(str::trim) {
        match w {
            "normal" => out.push(("normal", Durability::Normal)),
            "full" => out.push(("full", Durability::Full)),
            "" => {}
            other => panic!("WEFT_BENCH_DURABILITY: unknown durability {other:?}"),
        }
    }
    out
}

// ---- W1 chain-40 ----------------------------------------------------------

fn w1(report: &mut Report) {
    let rt = runtime();
    let n = 40;
    let rounds = rounds(20);
    for (label, durability) in durabilities() {
        for runner in runners() {
            let rl = runner.label();
            let p = in_proc(durability, EngineConfig::default(), runner);
            let def = Arc::new(definition(&chain("chain-40", n, &p.hex, json!({"mode": "fib", "n": 10}), None)));
            // Warm-up: compiles (or loads) the guest, fills caches.
            for _ in 0..2 {
                rt.block_on(run_once(&p.engine, &def, json!({})));
            }
            let ms: Vec<f64> =
                (0..rounds).map(|_| rt.block_on(run_once(&p.engine, &def, json!({}))).as_secs_f64() * 1e3).collect();
            let (p50, p95) = (pct(&ms, 0.5), pct(&ms, 0.95));
            report.figure(
            format!(
                "W1 chain-40 durability={label} steps={n} total_ms={p50:.2} per_step_us={:.0} total_ms_p95={p95:.2} rounds={rounds} runner={rl}",
                p50 * 1e3 / n as f64
            ),
            json!({"workload": "W1", "durability": label, "runner": rl, "steps": n, "rounds": rounds,
                   "total_ms_p50": p50, "total_ms_p95": p95, "per_step_us_p50": p50 * 1e3 / n as f64}),
        );
            drop(p.dir);
        }
    }
    if std::env::var("WEFT_BENCH_NATIVE").as_deref() != Ok("0") {
        w1_floor(report);
    }
}

/// The floor under W1's wasm figure: one fib(10) call straight into the
/// sandbox, and one through `CodeRunner` (blocking thread, limits, event
/// bridge), without the engine or the store.
fn w1_floor(report: &mut Report) {
    let rt = runtime();
    let calls = env_usize("WEFT_BENCH_FLOOR_CALLS", 2000).max(1);
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = settings(dir.path());
    let input = json!({"mode": "fib", "n": 10});

    let sandbox = weft_runtime::guests::sandbox(&settings).expect("the sandbox");
    let guest = sandbox.load(&std::fs::read(weft_test_artifacts::HOSTILE).unwrap()).expect("load the guest");
    let inv = weft_sandbox::Invocation::new(input.to_string());
    let call = || {
        let t = Instant::now();
        let r = sandbox.invoke(&guest, &inv);
        assert!(r.outcome.is_ok(), "{:?}", r.outcome);
        t.elapsed().as_secs_f64() * 1e6
    };
    (0..100).for_each(|_| _ = call());
    let us: Vec<f64> = (0..calls).map(|_| call()).collect();
    report.figure(
        format!(
            "W1 floor sandbox-invoke fib(10) calls={calls} per_call_us={:.1} p95_us={:.1}",
            pct(&us, 0.5),
            pct(&us, 0.95)
        ),
        json!({"workload": "W1", "figure": "floor-sandbox", "calls": calls, "per_call_us_p50": pct(&us, 0.5),
               "per_call_us_p95": pct(&us, 0.95)}),
    );

    let hex = pin_hostile(&settings);
    let runner = CodeRunner::from_settings(&settings, dir.path().to_path_buf()).expect("the sandbox");
    let rng = SeededRng::new(1);
    let run = weft_engine::RunId::generate(now_ms(), &rng);
    let req = StepRequest {
        run: run.clone(),
        step: "s".into(),
        item: None,
        attempt: weft_engine::AttemptNo::FIRST,
        idempotency_key: format!("{run}/s/1"),
        deadline_ms: None,
        action: weft_model::Action::Code(weft_model::CodeRef::Sha256(hex)),
        priority: 0,
        input,
        limits: None,
        run_fuel_left: None,
        transform: None,
        events: Arc::new(weft_engine::runner::NoEvents),
        trace: None,
        answer: None,
    };
    let us: Vec<f64> = rt.block_on(async {
        let mut out = vec![];
        for i in 0..calls + 100 {
            let t = Instant::now();
            let r = runner.run(req.clone(), CancelToken::new()).await;
            assert!(r.is_ok(), "{r:?}");
            if i >= 100 {
                out.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        out
    });
    report.figure(
        format!(
            "W1 floor code-runner fib(10) calls={calls} per_call_us={:.1} p95_us={:.1}",
            pct(&us, 0.5),
            pct(&us, 0.95)
        ),
        json!({"workload": "W1", "figure": "floor-code-runner", "calls": calls, "per_call_us_p50": pct(&us, 0.5),
               "per_call_us_p95": pct(&us, 0.95)}),
    );
}

// ---- W3 trivial-3 ---------------------------------------------------------

fn w3(report: &mut Report) {
    let rt = runtime();
    let runs = env_usize("WEFT_BENCH_W3_RUNS", 200).max(1);
    let inflight = env_usize("WEFT_BENCH_W3_INFLIGHT", 200).max(1);
    let rounds = rounds(5);
    for (label, durability) in durabilities() {
        for runner in runners() {
            let rl = runner.label();
            let p = in_proc(durability, EngineConfig::default(), runner);
            let def = Arc::new(definition(&chain("trivial-3", 3, &p.hex, json!({"mode": "ok"}), None)));
            for _ in 0..10 {
                rt.block_on(run_once(&p.engine, &def, json!({})));
            }
            // Latency: one run at a time.
            let ms: Vec<f64> =
                (0..runs).map(|_| rt.block_on(run_once(&p.engine, &def, json!({}))).as_secs_f64() * 1e3).collect();
            let (p50, p95) = (pct(&ms, 0.5), pct(&ms, 0.95));
            report.figure(
                format!(
                    "W3 trivial-3 durability={label} latency runs={runs} p50_ms={p50:.3} p95_ms={p95:.3} runner={rl}"
                ),
                json!({"workload": "W3", "figure": "latency", "durability": label, "runner": rl, "runs": runs,
                   "p50_ms": p50, "p95_ms": p95}),
            );
            // Throughput: `inflight` runs submitted at once, until all are done.
            let mut rates = vec![];
            let before = p.commits();
            for _ in 0..rounds {
                let t = Instant::now();
                // The round is awaited on a worker, not on this thread: a
                // `block_on` here would wake this thread at every run's end
                // (a cross-thread wake-up per run, which no engine user pays).
                let (engine, def) = (p.engine.clone(), def.clone());
                let round = rt.spawn(async move {
                    let mut set = tokio::task::JoinSet::new();
                    for _ in 0..inflight {
                        let (engine, def) = (engine.clone(), def.clone());
                        set.spawn(async move { run_once(&engine, &def, json!({})).await });
                    }
                    while let Some(r) = set.join_next().await {
                        r.expect("a run task");
                    }
                });
                rt.block_on(round).expect("a round");
                rates.push(inflight as f64 / t.elapsed().as_secs_f64());
            }
            let (r50, rmin) = (pct(&rates, 0.5), rates.iter().cloned().fold(f64::INFINITY, f64::min));
            // Group commit at work: batches per SQLite transaction.
            let after = p.commits();
            let group = (after.1 - before.1) as f64 / (after.0 - before.0).max(1) as f64;
            // WAL pages written per run (0 at full durability: not watched).
            let frames = (after.2 - before.2) as f64 / (rounds * inflight) as f64;
            report.figure(
            format!(
                "W3 trivial-3 durability={label} throughput in_flight={inflight} runs_per_s={r50:.0} runs_per_s_min={rmin:.0} batches_per_txn={group:.1} frames_per_run={frames:.1} rounds={rounds} runner={rl}"
            ),
            json!({"workload": "W3", "figure": "throughput", "durability": label, "runner": rl,
                   "in_flight": inflight, "rounds": rounds, "runs_per_s_p50": r50, "runs_per_s_min": rmin,
                   "batches_per_txn": group, "frames_per_run": frames}),
        );
        }
    }
}

// ---- W4 fan-out -----------------------------------------------------------

/// Runs in a child process of its own (so its peak RSS is its own): the
/// parent re-executes this bench with `WEFT_BENCH_CHILD=w4`.
fn w4_child() {
    let rt = runtime();
    let items = env_usize("WEFT_BENCH_W4_ITEMS", 10_000).max(1);
    let mode = std::env::var("WEFT_BENCH_W4_MODE").unwrap_or_else(|_| "fib".into());
    let rounds = rounds(3);
    let width = cores();
    let runner = match std::env::var("WEFT_BENCH_W4_RUNNER").as_deref() {
        Ok("native") => Runner::Native,
        _ => Runner::Wasm,
    };
    let p = in_proc(Durability::Normal, EngineConfig::default(), runner);
    let doc = json!({"name": "fan-out", "steps": [{
        "name": "each", "for_each": "@input.items", "concurrency": width,
        "code": {"sha256": p.hex}, "input": {"mode": mode, "n": 10, "i": "@item"}
    }]});
    let def = Arc::new(definition(&doc));
    let input = json!({"items": (0..items).collect::<Vec<_>>()});
    // Warm-up (compile/load the guest) with a small run.
    rt.block_on(run_once(&p.engine, &def, json!({"items": [1, 2, 3]})));
    let rss_before = peak_rss_mib();
    let before = p.commits();
    let rates: Vec<f64> = (0..rounds)
        .map(|_| items as f64 / rt.block_on(run_once(&p.engine, &def, input.clone())).as_secs_f64())
        .collect();
    let (r50, rmin) = (pct(&rates, 0.5), rates.iter().cloned().fold(f64::INFINITY, f64::min));
    let rss = peak_rss_mib();
    let after = p.commits();
    let group = (after.1 - before.1) as f64 / (after.0 - before.0).max(1) as f64;
    let frames = (after.2 - before.2) as f64 / (rounds * items) as f64;
    println!(
        "W4 fan-out items={items} mode={mode} concurrency={width} items_per_s={r50:.0} items_per_s_min={rmin:.0} peak_rss_mb={rss:.0} rss_before_mb={rss_before:.0} batches_per_txn={group:.1} frames_per_item={frames:.2} rounds={rounds} runner={}",
        runner.label()
    );
}

fn w4(report: &mut Report) {
    let exe = std::env::current_exe().expect("current exe");
    let out = Command::new(exe)
        .env("WEFT_BENCH_CHILD", "w4")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("start the W4 child");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the W4 child failed ({}):\n{text}", out.status);
    for line in text.lines().filter(|l| l.starts_with("W4 ")) {
        let fields: BTreeMap<String, Value> = line
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.parse::<f64>().map(|f| json!(f)).unwrap_or_else(|_| json!(v))))
            .collect();
        let mut j = json!(fields);
        j["workload"] = json!("W4");
        report.figure(line.to_string(), j);
    }
}

// ---- W6 crash-resume (in engine/w6.rs) -----------------------------------

#[path = "engine/w6.rs"]
mod crash_resume;
use crash_resume::w6;

// ---- main -----------------------------------------------------------------

fn main() {
    weft_runtime::process::small_pages();
    if std::env::var("WEFT_BENCH_CHILD").as_deref() == Ok("w4") {
        w4_child();
        return;
    }
    let mut json_out: Option<PathBuf> = None;
    let mut picked: HashSet<String> = HashSet::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json_out = args.next().map(PathBuf::from),
            "--bench" | "--nocapture" => {}
            s if s.starts_with("--") => {}
            s => {
                picked.insert(s.to_ascii_lowercase());
            }
        }
    }
    if picked.is_empty() {
        let env = std::env::var("WEFT_BENCH").unwrap_or_else(|_| "w1,w3,w4,w6".into());
        picked = env.split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect();
    }
    let mut report = Report { figures: vec![] };
    println!(
        "# weft engine bench: cores={} loadavg(start)={} {}",
        cores(),
        loadavg(),
        if cfg!(debug_assertions) { "DEBUG build (figures not representative)" } else { "release build" }
    );
    let t = Instant::now();
    for (name, f) in [("w1", w1 as fn(&mut Report)), ("w3", w3), ("w4", w4), ("w6", w6)] {
        if picked.contains(name) {
            f(&mut report);
        }
    }
    println!("# done in {:.0} s, loadavg(end)={}", t.elapsed().as_secs_f64(), loadavg());
    if let Some(p) = json_out {
        let doc = json!({"loadavg_end": loadavg(), "cores": cores(), "figures": report.figures});
        std::fs::write(&p, serde_json::to_string_pretty(&doc).unwrap()).expect("write --json");
    }
}
