//! kill-and-resume (docs/reliability.md): runs of side-effect steps, executed by
//! a real `weft worker` that is SIGKILLed at random moments and restarted,
//! until every run completed.
//!
//! The journal: guests cannot write files, so the journal of side effects
//! is the store's own record of them, read straight from the SQLite file.
//! The engine commits an attempt (`running`, with its number, hence its
//! idempotency key `<run_id>/<step>[/<item>]/<attempt>`) before it calls the
//! guest, and its outcome after; so every execution of a guest has a row in
//! `attempts`. The test asserts, for every (run, step, item):
//! - exactly one attempt succeeded, and it is the last one started (no
//!   attempt was started after a committed success), and no attempt started
//!   after the success ended;
//! - no attempt is left `running`;
//! - the key the guest saw (echoed by the `ok` mode of the hostile guest)
//!   is the key of the attempt that recorded its output;
//! - no success transition is logged twice in the event log;
//!
//! and that every run completed. Kill times come from a seeded RNG (the
//! seed is printed; `WEFT_TEST_SEED=N` repeats a sequence, `WEFT_TEST_KILLS`
//! changes how many kills).

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use weft_engine::clock::system_now_ms as now_ms;

use serde_json::{Value, json};
use weft_engine::{Rng, SeededRng};

use crate::common::Weft;

/// Runs created.
const RUNS: usize = 20;
/// Items of each run's `for_each` step.
const ITEMS: i64 = 4;
/// Units (step or item) with attempts per run: s0..s3 + the items.
const UNITS: i64 = 4 + ITEMS;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn ro(db: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open db");
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c
}

fn count(c: &rusqlite::Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn spawn_worker(w: &Weft, log: &Path, until_idle: bool) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    let mut cmd = w.cmd();
    cmd.arg("worker");
    if until_idle {
        cmd.arg("--until-idle");
    }
    cmd.stdout(Stdio::null()).stderr(Stdio::from(log)).spawn().expect("start weft worker")
}

/// Side-effect steps: fib steps long enough (tens of ms each) to be
/// running when the kill comes, an `ok` step and `for_each` items whose
/// outputs echo the idempotency key the guest was given. No step has a
/// retry policy, and no setting is changed (docs/reliability.md, "kill-and-resume,
/// defaults"): an attempt whose process died is interrupted, not failed,
/// and runs again as itself with the same idempotency key.
fn workflow(fib: u64) -> Value {
    let hostile = weft_test_artifacts::HOSTILE;
    json!({"name": "side-effects", "steps": [
        {"name": "s0", "code": {"path": hostile}, "input": {"mode": "fib", "n": fib}},
        {"name": "s1", "code": {"path": hostile}, "input": {"mode": "ok", "echo": "@s0"}},
        {"name": "s2", "code": {"path": hostile}, "input": {"mode": "fib", "n": fib, "prev": "@s1"}},
        {"name": "s3", "code": {"path": hostile}, "input": {"mode": "fib", "n": fib, "prev": "@s2"}},
        {"name": "each", "for_each": "@input.items", "after": ["s3"],
         "code": {"path": hostile}, "input": {"mode": "ok", "echo": "@item"}}
    ]})
}

#[test]
fn kill_and_resume_loses_no_run_and_repeats_no_success() {
    let seed = env_u64("WEFT_TEST_SEED").unwrap_or_else(|| now_ms() as u64);
    let kills = env_u64("WEFT_TEST_KILLS").unwrap_or(10) as usize;
    let fib = env_u64("WEFT_TEST_FIB").unwrap_or(32);
    eprintln!("kill-and-resume: seed {seed} (WEFT_TEST_SEED={seed} repeats it), {kills} kills, fib({fib})");
    let rng = SeededRng::new(seed);
    let started = Instant::now();

    let w = Weft::new();
    let file = w.dir.path().join("side-effects.json");
    std::fs::write(&file, serde_json::to_string_pretty(&workflow(fib)).unwrap()).unwrap();
    let mut ids = vec![];
    for r in 0..RUNS as i64 {
        let items: Vec<i64> = (0..ITEMS).map(|i| r * 100 + i).collect();
        let input = json!({"items": items}).to_string();
        let out = w.run(&["run", file.to_str().unwrap(), "--input", &input, "--detach"]);
        out.expect_code(0);
        ids.push(out.stdout.trim().to_string());
    }
    let db = w.data_dir().join("weft.db");
    let log = w.dir.path().join("worker.log");
    let c = ro(&db);
    let unfinished = "SELECT count(*) FROM runs WHERE state NOT IN ('completed','failed','canceled','rejected')";

    // Kill at random moments: some during start-up and recovery, most
    // with attempts running.
    let mut busy_kills = 0;
    let mut done_kills = 0;
    for k in 0..kills {
        if count(&c, unfinished) == 0 {
            eprintln!("every run finished after {k} kills");
            break;
        }
        let t0 = now_ms();
        let spawned = Instant::now();
        let mut worker = spawn_worker(&w, &log, false);
        // A random moment, in progress rather than time so that it does not
        // depend on the machine's speed: one kill in four comes 0-100 ms
        // after the start (during start-up and recovery); the others after
        // the worker committed 1-12 more successes, plus 0-30 ms.
        let moment = if rng.below_inclusive(3) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below_inclusive(100)));
            "at start-up".to_string()
        } else {
            let want = 1 + rng.below_inclusive(11) as i64;
            let from = succeeded(&c);
            while succeeded(&c) < from + want
                && count(&c, unfinished) > 0
                && spawned.elapsed() < Duration::from_secs(20)
                && worker.try_wait().unwrap().is_none()
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(Duration::from_millis(rng.below_inclusive(30)));
            format!("after {} new successes", succeeded(&c) - from)
        };
        let delay = spawned.elapsed().as_millis();
        // Attempts this worker started (not those the last one left running).
        let running = c
            .query_row("SELECT count(*) FROM attempts WHERE state = 'running' AND started_at >= ?1", [t0], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap();
        let exited = worker.try_wait().unwrap();
        assert!(exited.is_none(), "the worker exited on its own ({exited:?}); log:\n{}", read(&log));
        worker.kill().expect("SIGKILL"); // SIGKILL on Unix
        worker.wait().unwrap();
        done_kills += 1;
        if running > 0 {
            busy_kills += 1;
        }
        eprintln!(
            "kill {}: {moment}, {delay} ms after the start, {running} attempt(s) running, {} run(s) unfinished",
            k + 1,
            count(&c, unfinished)
        );
    }

    // Successes committed while workers were being killed: what must not run again.
    let succeeded_before = succeeded(&c);

    // The last restart runs everything to the end.
    let mut last = spawn_worker(&w, &log, true);
    let t = Instant::now();
    let status = loop {
        if let Some(st) = last.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = last.kill();
            panic!("the last worker did not finish in 120 s; log:\n{}", read(&log));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "the last worker failed ({status}); log:\n{}", read(&log));

    // Every run completed.
    let mut st = c.prepare("SELECT id, state, error FROM runs").unwrap();
    let runs: Vec<(String, String, Option<String>)> =
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
    assert_eq!(runs.len(), RUNS);
    for (id, state, error) in &runs {
        assert!(ids.contains(id), "unknown run {id}");
        assert_eq!(state, "completed", "run {id} ended {state}: {error:?} (seed {seed})");
    }

    // The journal: one success per (run, step, item), the last attempt started.
    let mut st = c
        .prepare(
            "SELECT run_id, step, item,
                    sum(state = 'succeeded'), sum(state = 'running'), max(attempt),
                    max(CASE WHEN state = 'succeeded' THEN attempt END),
                    max(started_at),
                    max(CASE WHEN state = 'succeeded' THEN ended_at END)
             FROM attempts GROUP BY run_id, step, item",
        )
        .unwrap();
    type Row = (String, String, i64, i64, i64, i64, Option<i64>, i64, Option<i64>);
    let units: Vec<Row> = st
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(units.len() as i64, RUNS as i64 * UNITS, "every (run, step, item) has attempts");
    for (run, step, item, ok, running, last, ok_attempt, last_start, ok_end) in &units {
        let unit = if *item < 0 { format!("{run}/{step}") } else { format!("{run}/{step}/{item}") };
        assert_eq!(*ok, 1, "{unit}: {ok} succeeded attempts (seed {seed})");
        assert_eq!(*running, 0, "{unit}: an attempt is left running");
        assert_eq!(
            Some(*last),
            *ok_attempt,
            "{unit}: attempt {last} started after attempt {ok_attempt:?} succeeded (seed {seed})"
        );
        assert!(ok_end.is_some_and(|e| *last_start <= e), "{unit}: an attempt started after the success ended");
    }
    // What the guest saw: the key of the attempt that recorded its output.
    let mut st = c
        .prepare("SELECT run_id, step, item, attempt, output FROM attempts WHERE state = 'succeeded' AND step IN ('s1', 'each')")
        .unwrap();
    let echoed: Vec<(String, String, i64, i64, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(echoed.len(), RUNS * (1 + ITEMS as usize));
    for (run, step, item, attempt, output) in &echoed {
        let out: Value = serde_json::from_str(output).unwrap();
        let key = if *item < 0 { format!("{run}/{step}/{attempt}") } else { format!("{run}/{step}/{item}/{attempt}") };
        assert_eq!(out["key"], json!(key), "the guest's idempotency key");
        assert_eq!(out["attempt"], json!(attempt));
    }
    // No success logged twice.
    let dup = count(
        &c,
        "SELECT count(*) FROM (SELECT run_id, step, item, kind FROM events
           WHERE kind IN ('step.succeeded', 'item.succeeded', 'run.completed')
           GROUP BY run_id, step, item, kind HAVING count(*) > 1)",
    );
    assert_eq!(dup, 0, "success transitions logged twice");
    assert_eq!(count(&c, "SELECT count(*) FROM events WHERE kind = 'run.completed'"), RUNS as i64);

    let attempts = count(&c, "SELECT count(*) FROM attempts");
    let interrupted = count(&c, "SELECT coalesce(sum(interruptions), 0) FROM attempts");
    assert_eq!(count(&c, "SELECT count(*) FROM attempts WHERE state = 'failed'"), 0, "no attempt failed");
    assert_eq!(
        count(&c, "SELECT count(*) FROM attempts WHERE attempt > 1"),
        0,
        "an interruption is not an attempt: every unit ran as attempt 1 (seed {seed})"
    );
    eprintln!(
        "kill-and-resume: {done_kills} kills ({busy_kills} with attempts running), {attempts} attempts for {} units, {interrupted} interruptions (each ran again as itself), {succeeded_before} successes committed between kills, {:.1} s (seed {seed})",
        RUNS as i64 * UNITS,
        started.elapsed().as_secs_f64()
    );
    // The kills did interrupt work, and successes were committed between
    // kills (else this proves little).
    if busy_kills >= 2 {
        assert!(interrupted > 0, "{busy_kills} kills with attempts running, yet no attempt was interrupted");
        assert!(succeeded_before > 0, "no step succeeded while the workers were being killed (raise the kill delays)");
    }
}

fn succeeded(c: &rusqlite::Connection) -> i64 {
    count(c, "SELECT count(*) FROM attempts WHERE state = 'succeeded'")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}
