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
//! | `WEFT_BENCH_W6_FIB` | 25 | fib(n) of each of W6's sequential steps |
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
//! one started (`repeated_successes` counts violations, must be 0). The
//! steps carry a `retry` policy: the engine counts an attempt interrupted
//! by a crash as a failed attempt, so under the default policy (one
//! attempt) a kill would fail the run.

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use weft::config::{ConfigFile, Settings};
use weft::runner::CodeRunner;
use weft_engine::runner::{StepOutput, StepRequest, StepRunner};
use weft_engine::{CancelToken, Engine, EngineConfig, Rng, RunOptions, RunState, SeededRng, StepError, SystemClock};
use weft_model::{Definition, NoSchemas};
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

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
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
    Settings {
        data_dir: dir.join("data"),
        cache_dir: cache_dir(),
        config_path: None,
        file: Arc::new(ConfigFile::default()),
        servers: Arc::default(),
    }
}

/// Stores the hostile guest in the data dir's blob store; its digest.
fn pin_hostile(settings: &Settings) -> String {
    let wasm = std::fs::read(weft_test_artifacts::HOSTILE).expect("the hostile guest is built");
    weft::guests::registry(settings).put_blob(&wasm).expect("store the guest").hex()
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
    fn finishes_in_place(&self, _: &StepRequest) -> bool {
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
    /// (transactions, batches) the store's writer committed so far.
    fn commits(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.sqlite.as_ref().map_or((0, 0), |s| (s.stats().transactions.load(Relaxed), s.stats().batches.load(Relaxed)))
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

async fn run_once(engine: &Engine, def: &Definition, input: Value) -> Duration {
    let t = Instant::now();
    let id = engine.submit(def, input, RunOptions::default()).await.expect("submit");
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
            let def = definition(&chain("chain-40", n, &p.hex, json!({"mode": "fib", "n": 10}), None));
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

    let sandbox = weft::guests::sandbox(&settings).expect("the sandbox");
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
        input,
        limits: None,
        transform: None,
        events: Arc::new(weft_engine::runner::NoEvents),
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
                rt.block_on(async {
                    let mut set = tokio::task::JoinSet::new();
                    for _ in 0..inflight {
                        let (engine, def) = (p.engine.clone(), def.clone());
                        set.spawn(async move { run_once(&engine, &def, json!({})).await });
                    }
                    while let Some(r) = set.join_next().await {
                        r.expect("a run task");
                    }
                });
                rates.push(inflight as f64 / t.elapsed().as_secs_f64());
            }
            let (r50, rmin) = (pct(&rates, 0.5), rates.iter().cloned().fold(f64::INFINITY, f64::min));
            // Group commit at work: batches per SQLite transaction.
            let after = p.commits();
            let group = (after.1 - before.1) as f64 / (after.0 - before.0).max(1) as f64;
            report.figure(
            format!(
                "W3 trivial-3 durability={label} throughput in_flight={inflight} runs_per_s={r50:.0} runs_per_s_min={rmin:.0} batches_per_txn={group:.1} rounds={rounds} runner={rl}"
            ),
            json!({"workload": "W3", "figure": "throughput", "durability": label, "runner": rl,
                   "in_flight": inflight, "rounds": rounds, "runs_per_s_p50": r50, "runs_per_s_min": rmin,
                   "batches_per_txn": group}),
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
    let def = definition(&doc);
    let input = json!({"items": (0..items).collect::<Vec<_>>()});
    // Warm-up (compile/load the guest) with a small run.
    rt.block_on(run_once(&p.engine, &def, json!({"items": [1, 2, 3]})));
    let rss_before = peak_rss_mib();
    let rates: Vec<f64> = (0..rounds)
        .map(|_| items as f64 / rt.block_on(run_once(&p.engine, &def, input.clone())).as_secs_f64())
        .collect();
    let (r50, rmin) = (pct(&rates, 0.5), rates.iter().cloned().fold(f64::INFINITY, f64::min));
    let rss = peak_rss_mib();
    println!(
        "W4 fan-out items={items} mode={mode} concurrency={width} items_per_s={r50:.0} items_per_s_min={rmin:.0} peak_rss_mb={rss:.0} rss_before_mb={rss_before:.0} rounds={rounds} runner={}",
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

// ---- W6 crash-resume ------------------------------------------------------

/// Never called: runs are only created in the parent, executed by workers.
struct NoRunner;

#[async_trait::async_trait]
impl StepRunner for NoRunner {
    async fn run(&self, _: StepRequest, _: CancelToken) -> Result<StepOutput, StepError> {
        unreachable!("the bench process executes no step")
    }
}

/// The `weft` binary of this profile.
fn weft_bin() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_weft"));
    if built.exists() {
        return built;
    }
    // target/<profile>/deps/engine-HASH -> target/<profile>/weft
    let exe = std::env::current_exe().expect("current exe");
    let guess = exe.parent().and_then(Path::parent).map(|p| p.join("weft"));
    guess
        .filter(|p| p.exists())
        .unwrap_or_else(|| panic!("no weft binary at {} (cargo build -p weft)", built.display()))
}

fn spawn_worker(data_dir: &Path, log: &Path, until_idle: bool) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("worker log");
    let mut cmd = Command::new(weft_bin());
    cmd.arg("worker");
    if until_idle {
        cmd.arg("--until-idle");
    }
    cmd.env("WEFT_DATA_DIR", data_dir)
        .env_remove("WEFT_CONFIG")
        .env("WEFT_CACHE_DIR", cache_dir())
        .current_dir(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    cmd.spawn().expect("start weft worker")
}

fn ro(db: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open db");
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c
}

fn count(c: &rusqlite::Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).expect(sql)
}

const SUCCEEDED: &str = "SELECT count(*) FROM attempts WHERE state = 'succeeded'";
const RUNNING: &str = "SELECT count(*) FROM attempts WHERE state = 'running'";
const UNFINISHED: &str = "SELECT count(*) FROM runs WHERE state NOT IN ('completed','failed','canceled','rejected')";

/// What the journal (the attempts table and the event log) says after all
/// runs finished: violations of "every run completes" and "no succeeded
/// step runs again", as messages.
fn audit(db: &Path, runs: i64, units_per_run: i64) -> (Vec<String>, i64) {
    let c = ro(db);
    let mut bad = vec![];
    let completed = count(&c, "SELECT count(*) FROM runs WHERE state = 'completed'");
    if completed != runs {
        let mut st = c.prepare("SELECT state, count(*) FROM runs GROUP BY state").unwrap();
        let states: Vec<(String, i64)> =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
        bad.push(format!("{completed} of {runs} runs completed: {states:?}"));
    }
    // Per (run, step, item): one succeeded attempt, the last one started.
    let mut st = c
        .prepare(
            "SELECT a.run_id, a.step, a.item,
                    sum(a.state = 'succeeded'),
                    max(a.attempt),
                    max(CASE WHEN a.state = 'succeeded' THEN a.attempt END),
                    max(a.started_at),
                    max(CASE WHEN a.state = 'succeeded' THEN a.ended_at END)
             FROM attempts a GROUP BY a.run_id, a.step, a.item",
        )
        .unwrap();
    /// run, step, item, successes, last attempt, succeeded attempt, last start, success end
    type Unit = (String, String, i64, i64, i64, Option<i64>, i64, Option<i64>);
    let rows: Vec<Unit> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    if rows.len() as i64 != runs * units_per_run {
        bad.push(format!("{} (run, step, item) units have attempts, expected {}", rows.len(), runs * units_per_run));
    }
    for (run, step, item, ok, last, ok_at, last_start, ok_end) in &rows {
        let key = if *item < 0 { format!("{run}/{step}") } else { format!("{run}/{step}/{item}") };
        if *ok != 1 {
            bad.push(format!("{key}: {ok} succeeded attempts"));
        } else if Some(*last) != *ok_at {
            bad.push(format!("{key}: attempt {last} started after attempt {ok_at:?} succeeded"));
        } else if ok_end.is_some_and(|e| *last_start > e) {
            bad.push(format!("{key}: an attempt started at {last_start}, after the success at {ok_end:?}"));
        }
    }
    // No transition logged twice.
    let dup = count(
        &c,
        "SELECT count(*) FROM (SELECT run_id, step, item, kind FROM events
           WHERE kind IN ('step.succeeded', 'item.succeeded', 'run.completed')
           GROUP BY run_id, step, item, kind HAVING count(*) > 1)",
    );
    if dup > 0 {
        bad.push(format!("{dup} success transitions logged more than once"));
    }
    let attempts = count(&c, "SELECT count(*) FROM attempts");
    (bad, attempts - runs * units_per_run)
}

fn w6(report: &mut Report) {
    let runs = env_usize("WEFT_BENCH_W6_RUNS", 1000).max(1);
    let rounds = rounds(20);
    let fib = env_usize("WEFT_BENCH_W6_FIB", 25);
    let seed = std::env::var("WEFT_BENCH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| now_ms() as u64);
    let rng = SeededRng::new(seed);
    println!("# W6 seed={seed} (WEFT_BENCH_SEED to repeat) fib={fib} worker={}", weft_bin().display());

    let dir = tempfile::tempdir().expect("temp dir");
    let settings = settings(dir.path());
    let data = settings.data_dir.clone();
    std::fs::create_dir_all(&data).unwrap();
    let db = data.join("weft.db");
    let log = dir.path().join("worker.log");
    let hex = pin_hostile(&settings);
    // 4 sequential fib steps, then a for_each of 3 trivial items; every
    // step retries what a kill interrupted (a lease-expired attempt is a
    // failed attempt of kind `timeout`).
    let retry = json!({"max_attempts": 1000, "initial_delay_ms": 0, "jitter": false});
    let mut doc = chain("crash-resume", 4, &hex, json!({"mode": "fib", "n": fib}), Some(retry.clone()));
    doc["steps"].as_array_mut().unwrap().push(json!({
        "name": "each", "for_each": "@input.items", "after": ["s3"], "retry": retry,
        "code": {"sha256": hex}, "input": {"mode": "ok", "echo": "@item"}
    }));
    let units_per_run = 4 + 3;
    let def = definition(&doc);
    {
        let rt = runtime();
        let store = Arc::new(SqliteStore::open(&db, Durability::Normal).expect("open the store"));
        let engine = Engine::new(
            store.clone(),
            Arc::new(NoRunner),
            Arc::new(SystemClock),
            Arc::new(SeededRng::new(seed ^ 0x5eed)),
            EngineConfig::default(),
        );
        rt.block_on(async {
            for i in 0..runs {
                engine.create_run(&def, json!({"items": [i, i + 1, i + 2]}), RunOptions::default()).await.unwrap();
            }
        });
        store.close();
    }

    let c = ro(&db);
    let started = Instant::now();
    let mut recovery_ms = vec![];
    let mut unfinished_at_kill = vec![];
    let mut running_at_kill = vec![];
    let mut resume_ms = vec![];
    let budget = ((runs as f64 * units_per_run as f64 * 0.6) / rounds as f64).max(1.0) as u64;
    for round in 0..rounds {
        let left = count(&c, UNFINISHED);
        if left == 0 {
            println!("# W6 every run finished before round {round}: fewer kills than asked (raise WEFT_BENCH_W6_FIB)");
            break;
        }
        let t0 = now_ms();
        let mut worker = spawn_worker(&data, &log, false);
        // Recovery begins with the first transition the new owner commits:
        // poll (cheaply: every write touches its run's `updated_at`) until
        // one is stamped after the start, then take the earliest event
        // stamped after the start.
        let first = loop {
            let latest: Option<i64> = c.query_row("SELECT max(updated_at) FROM runs", [], |r| r.get(0)).unwrap();
            if latest.is_some_and(|at| at >= t0) {
                break c
                    .query_row("SELECT min(at) FROM events WHERE at >= ?1", [t0], |r| r.get::<_, Option<i64>>(0))
                    .unwrap()
                    .unwrap_or(latest.unwrap());
            }
            if let Some(st) = worker.try_wait().unwrap() {
                panic!("the worker exited ({st}) before committing anything; see {}", log.display());
            }
            assert!(now_ms() - t0 < 60_000, "no transition within 60 s of the restart");
            std::thread::sleep(Duration::from_millis(2));
        };
        recovery_ms.push((first - t0) as f64);
        // A random moment, in progress rather than time (so that the work
        // outlasts the rounds on a fast or a slow machine): after 1 to
        // 2 x `budget` more successes, plus 0-50 ms. About 60% of the work
        // is done under kills, the rest by the last worker.
        let want = 1 + rng.below_inclusive(2 * budget) as i64;
        let from = count(&c, SUCCEEDED);
        let t = Instant::now();
        while count(&c, SUCCEEDED) < from + want && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(rng.below_inclusive(50)));
        unfinished_at_kill.push(count(&c, UNFINISHED) as f64);
        running_at_kill.push(count(&c, RUNNING) as f64);
        worker.kill().expect("SIGKILL the worker");
        worker.wait().unwrap();
        let resumed: Option<i64> = c
            .query_row("SELECT min(ended_at) FROM attempts WHERE state = 'succeeded' AND started_at >= ?1", [t0], |r| {
                r.get(0)
            })
            .unwrap();
        if let Some(at) = resumed {
            resume_ms.push((at - t0) as f64);
        }
    }
    let kills = recovery_ms.len();
    // The last restart runs everything to the end.
    let t_final = Instant::now();
    let t0 = now_ms();
    let mut last = spawn_worker(&data, &log, true);
    let status = loop {
        if let Some(st) = last.try_wait().unwrap() {
            break st;
        }
        if t_final.elapsed() > Duration::from_secs(600) {
            let _ = last.kill();
            panic!("the last worker did not finish within 600 s; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "the last worker failed ({status}); see {}", log.display());
    if let Ok(Some(at)) = c.query_row("SELECT min(at) FROM events WHERE at >= ?1", [t0], |r| r.get::<_, Option<i64>>(0))
    {
        recovery_ms.push((at - t0) as f64);
    }
    let total_s = started.elapsed().as_secs_f64();
    drop(c);
    let (bad, retried) = audit(&db, runs as i64, units_per_run);
    for b in bad.iter().take(20) {
        eprintln!("W6 violation: {b}");
    }
    let (p50, p95, max) =
        (pct(&recovery_ms, 0.5), pct(&recovery_ms, 0.95), recovery_ms.iter().cloned().fold(0.0, f64::max));
    let line = format!(
        "W6 crash-resume runs={runs} kills={kills} recovery_ms={p50:.0} recovery_ms_p95={p95:.0} recovery_ms_max={max:.0} resume_ms={:.0} resume_ms_p95={:.0} unfinished_at_kill_p50={:.0} running_at_kill_p50={:.0} all_completed={} repeated_successes={} reexecuted_attempts={retried} total_s={total_s:.1} seed={seed}",
        pct(&resume_ms, 0.5),
        pct(&resume_ms, 0.95),
        pct(&unfinished_at_kill, 0.5),
        pct(&running_at_kill, 0.5),
        bad.iter().all(|b| !b.contains("runs completed")),
        bad.iter().filter(|b| !b.contains("runs completed")).count(),
    );
    report.figure(
        line,
        json!({"workload": "W6", "runs": runs, "kills": kills, "recovery_ms_p50": p50, "recovery_ms_p95": p95,
               "recovery_ms_max": max, "resume_ms_p50": pct(&resume_ms, 0.5), "resume_ms_p95": pct(&resume_ms, 0.95),
               "violations": bad.len(), "reexecuted_attempts": retried,
               "total_s": total_s, "seed": seed}),
    );
    assert!(bad.is_empty(), "W6: {} violations (first: {:?}); worker log {}", bad.len(), bad.first(), log.display());
}

// ---- main -----------------------------------------------------------------

fn main() {
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
