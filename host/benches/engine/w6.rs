//! W6 crash-resume: runs created through the store, the real `weft worker`
//! killed with SIGKILL again and again, then an audit of the store (every
//! run completed, no succeeded step executed twice).

use super::*;

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
    // Attempts run again: each interruption re-ran its attempt as itself;
    // an attempt past the first would be a retry, and nothing retries here.
    let again = count(&c, "SELECT coalesce(sum(interruptions), 0) FROM attempts");
    let retried = count(&c, "SELECT count(*) FROM attempts WHERE attempt > 1");
    if retried > 0 {
        bad.push(format!("{retried} attempts past the first: an interruption was charged as an attempt"));
    }
    (bad, again)
}

pub(super) fn w6(report: &mut Report) {
    let runs = env_usize("WEFT_BENCH_W6_RUNS", 1000).max(1);
    let rounds = rounds(20);
    let fib = env_usize("WEFT_BENCH_W6_FIB", 27);
    let seed = std::env::var("WEFT_BENCH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| now_ms() as u64);
    let rng = SeededRng::new(seed);
    println!("# W6 seed={seed} (WEFT_BENCH_SEED to repeat) fib={fib} worker={}", weft_bin().display());

    let dir = tempfile::tempdir().expect("temp dir");
    let settings = settings(dir.path());
    let data = settings.data_dir.clone();
    std::fs::create_dir_all(&data).unwrap();
    let db = data.join("weft.db");
    let wal = data.join("weft.db-wal");
    let log = dir.path().join("worker.log");
    let hex = pin_hostile(&settings);
    // 4 sequential fib steps, then a for_each of 3 trivial items; no retry
    // policy: an attempt a kill interrupted runs again as itself.
    let mut doc = chain("crash-resume", 4, &hex, json!({"mode": "fib", "n": fib}), None);
    doc["steps"].as_array_mut().unwrap().push(json!({
        "name": "each", "for_each": "@input.items", "after": ["s3"],
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
        // poll (cheaply: a commit appends to the WAL, so its file changes)
        // until the WAL was written after the start, then take the earliest
        // event stamped after the start. (Not `runs.updated_at`: a step's
        // transition leaves its run's row alone.)
        let first = loop {
            let touched = std::fs::metadata(&wal)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as i64);
            if touched.is_some_and(|at| at >= t0)
                && let Some(at) = c
                    .query_row("SELECT min(at) FROM events WHERE at >= ?1", [t0], |r| r.get::<_, Option<i64>>(0))
                    .unwrap()
            {
                break at;
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
        "W6 crash-resume runs={runs} kills={kills} recovery_ms={p50:.0} recovery_ms_p95={p95:.0} recovery_ms_max={max:.0} resume_ms={:.0} resume_ms_p95={:.0} unfinished_at_kill_p50={:.0} running_at_kill_p50={:.0} running_at_kill_max={:.0} all_completed={} repeated_successes={} reexecuted_attempts={retried} total_s={total_s:.1} seed={seed}",
        pct(&resume_ms, 0.5),
        pct(&resume_ms, 0.95),
        pct(&unfinished_at_kill, 0.5),
        pct(&running_at_kill, 0.5),
        running_at_kill.iter().cloned().fold(0.0, f64::max),
        bad.iter().all(|b| !b.contains("runs completed")),
        bad.iter().filter(|b| !b.contains("runs completed")).count(),
    );
    report.figure(
        line,
        json!({"workload": "W6", "runs": runs, "kills": kills, "recovery_ms_p50": p50, "recovery_ms_p95": p95,
               "recovery_ms_max": max, "resume_ms_p50": pct(&resume_ms, 0.5), "resume_ms_p95": pct(&resume_ms, 0.95),
               "violations": bad.len(), "reexecuted_attempts": retried,
               "running_at_kill_p50": pct(&running_at_kill, 0.5),
               "running_at_kill_max": running_at_kill.iter().cloned().fold(0.0, f64::max),
               "total_s": total_s, "seed": seed}),
    );
    assert!(bad.is_empty(), "W6: {} violations (first: {:?}); worker log {}", bad.len(), bad.first(), log.display());
}
