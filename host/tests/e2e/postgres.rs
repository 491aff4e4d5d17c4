//! Many workers on one PostgreSQL database, through the real binary
//! (docs/reliability.md, "many workers"): three `weft worker` processes share a
//! database under load; one is SIGKILLed, one SIGSTOPped past its lease and
//! SIGCONTed; every run completes exactly once and the paused worker's late
//! commits are refused; and the same at full size (two workers and
//! `weft serve` drain 10,000 runs through a kill and a pause). Also: a
//! schedule fires once per time across three
//! workers; retention deletes exactly the finished runs it should (the
//! reaper, `runs prune`, `runs delete`); `weft store copy` moves an SQLite
//! store's history into PostgreSQL, where a worker finishes what was left.
//!
//! The journal of side effects is the store's own record (as in
//! `recovery.rs`): every execution of a guest has an `attempts` row,
//! committed before the guest is called.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{KillOnDrop, Weft};

/// A client of the test's database, for the journal queries.
struct Db {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Db {
    fn open(url: &str) -> Db {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = rt.block_on(async {
            let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect");
            tokio::spawn(conn);
            c
        });
        Db { rt, client }
    }

    fn rows(&self, sql: &str) -> Vec<tokio_postgres::Row> {
        self.rt.block_on(self.client.query(sql, &[])).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn count(&self, sql: &str) -> i64 {
        self.rows(sql)[0].get::<_, i64>(0)
    }
}

/// A `weft worker` process, killed when the test ends.
fn spawn_worker(w: &Weft, log: &Path) -> KillOnDrop {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    KillOnDrop(w.cmd().arg("worker").stdout(Stdio::null()).stderr(Stdio::from(log)).spawn().expect("start weft worker"))
}

fn signal(child: &Child, sig: &str) {
    let st = std::process::Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap();
    assert!(st.success(), "kill {sig}");
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

const UNFINISHED: &str = "SELECT count(*) FROM runs WHERE state NOT IN ('completed','failed','canceled','rejected')";

/// The epoch of the worker process `pid` (its row names it `host:pid`).
fn epoch_of(db: &Db, pid: u32) -> Option<i64> {
    db.rows("SELECT epoch, name FROM workers")
        .iter()
        .find(|r| r.get::<_, String>(1).ends_with(&format!(":{pid}")))
        .map(|r| r.get(0))
}

#[test]
fn three_workers_one_killed_one_paused_complete_every_run_once() {
    let w = Weft::postgres();
    let db = Db::open(w.database.as_deref().unwrap());
    let hostile = weft_test_artifacts::HOSTILE;
    // Side-effect steps (no retry policy, default settings): a computation
    // of 10 ms (long enough that a kill or a pause finds attempts
    // running), an echo of the idempotency key, a short computation.
    let def = json!({"name": "side", "steps": [
        {"name": "a", "code": {"path": hostile}, "input": {"mode": "busy", "n": 10}},
        {"name": "b", "code": {"path": hostile}, "input": {"mode": "ok", "echo": "@a"}},
        {"name": "c", "code": {"path": hostile}, "input": {"mode": "fib", "n": 24, "prev": "@b"}}]});
    let file = w.write_def("side", &def);
    w.run(&["templates", "save", file.to_str().unwrap()]).expect_code(0);
    let log = |n: usize| w.dir.path().join(format!("worker{n}.log"));
    let mut workers: Vec<KillOnDrop> = (0..3).map(|n| spawn_worker(&w, &log(n))).collect();
    // Runs created by a client while the workers run: a load to share.
    let runs = 300;
    let creator = {
        std::thread::spawn({
            let (file, w_cmd) = (file.clone(), w.database.clone());
            let dir = w.dir.path().to_path_buf();
            move || {
                for _ in 0..runs {
                    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
                        .args(["run", file.to_str().unwrap(), "--detach"])
                        .env("WEFT_DATABASE", w_cmd.as_deref().unwrap())
                        .env("WEFT_DATA_DIR", dir.join("data"))
                        .env("WEFT_CACHE_DIR", crate::common::repo_root().join("target/test-cache"))
                        .current_dir(&dir)
                        .output()
                        .unwrap();
                    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                }
            }
        })
    };
    // Once work is flowing: SIGKILL worker 0, SIGSTOP worker 1 while it has
    // attempts running.
    let t0 = Instant::now();
    while db.count("SELECT count(*) FROM runs WHERE state = 'completed'") < 20 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no progress; log:\n{}", read(&log(0)));
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&workers[0], "-KILL");
    workers[0].wait().unwrap();
    let paused_epoch = epoch_of(&db, workers[1].id()).expect("worker 1 joined");
    let t1 = Instant::now();
    while db.count(&format!(
        "SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id WHERE a.state = 'running' AND r.owner = {paused_epoch}"
    )) == 0
    {
        assert!(t1.elapsed() < Duration::from_secs(30), "worker 1 never had an attempt running");
        std::thread::sleep(Duration::from_millis(2));
    }
    signal(&workers[1], "-STOP");
    let stopped = Instant::now();
    // Past its lease (5 s by default) and the takeover (~1 s more): its
    // runs are another's by then.
    while epoch_of(&db, workers[1].id()).is_some() {
        assert!(
            stopped.elapsed() < Duration::from_secs(12),
            "the paused worker was not taken over within lease + ~1 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let taken_after = stopped.elapsed();
    assert!(taken_after < Duration::from_millis(5_000 + 2_500), "takeover took {taken_after:?}");
    signal(&workers[1], "-CONT");
    creator.join().unwrap();
    // Every run completes.
    let t2 = Instant::now();
    while db.count(UNFINISHED) > 0 {
        assert!(
            t2.elapsed() < Duration::from_secs(120),
            "{} runs unfinished; logs:\n{}\n{}",
            db.count(UNFINISHED),
            read(&log(1)),
            read(&log(2))
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for c in workers.iter_mut().skip(1) {
        signal(c, "-TERM");
        c.wait().unwrap();
    }
    assert_eq!(db.count("SELECT count(*) FROM runs"), runs as i64);
    assert_eq!(db.count("SELECT count(*) FROM runs WHERE state = 'completed'"), runs as i64, "every run completed");
    // The journal: one success per (run, step), the last attempt started;
    // nothing left running; no success logged twice.
    let bad = db.rows(
        "SELECT run_id, step, count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'running'),
                max(attempt), max(attempt) FILTER (WHERE state = 'succeeded')
         FROM attempts GROUP BY run_id, step
         HAVING count(*) FILTER (WHERE state = 'succeeded') <> 1 OR count(*) FILTER (WHERE state = 'running') > 0
             OR max(attempt) <> max(attempt) FILTER (WHERE state = 'succeeded')",
    );
    assert!(
        bad.is_empty(),
        "units that ran wrongly: {:?}",
        bad.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>()
    );
    assert_eq!(
        db.count("SELECT count(*) FROM attempts"),
        runs as i64 * 3 + db.count("SELECT count(*) FROM attempts WHERE attempt > 1")
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM (SELECT run_id, step, kind FROM events WHERE kind IN ('step.succeeded', 'run.completed')
             GROUP BY run_id, step, kind HAVING count(*) > 1) x"
        ),
        0,
        "a success logged twice"
    );
    // What the guest saw is the key of the attempt that recorded it.
    for r in db.rows("SELECT run_id, attempt, output FROM attempts WHERE step = 'b' AND state = 'succeeded'") {
        let out: Value = serde_json::from_str(&r.get::<_, String>(2)).unwrap();
        let key = format!("{}/b/{}", r.get::<_, String>(0), r.get::<_, i32>(1));
        assert_eq!(out["key"], json!(key));
    }
    let interrupted = db.count("SELECT coalesce(sum(interruptions), 0)::bigint FROM attempts");
    assert!(interrupted >= 1, "the kill and the pause interrupted attempts that ran again");
    // The paused worker woke to find its lease gone: it stopped its runs,
    // its late commits refused, and joined again.
    let paused_log = read(&log(1));
    assert!(paused_log.contains("lease"), "the paused worker did not notice it lost its lease:\n{paused_log}");
    eprintln!("many workers: {runs} runs, takeover after {taken_after:?}, {interrupted} interruptions");
}

#[test]
fn a_schedule_fires_once_per_time_across_three_workers() {
    let w = Weft::postgres();
    let db = Db::open(w.database.as_deref().unwrap());
    let def = json!({"name": "tick", "version": 1, "steps": [
        {"name": "say", "code": {"plugin": "text-template"}, "input": {"template": "tick", "values": {}}}]});
    let f = w.write_def("tick", &def);
    w.run(&["templates", "save", f.to_str().unwrap()]).expect_code(0);
    let log = w.dir.path().join("workers.log");
    let mut workers: Vec<KillOnDrop> = (0..3).map(|_| spawn_worker(&w, &log)).collect();
    // Every second, seconds-precision cron (six fields).
    w.run(&["schedule", "add", "tick", "--name", "every-second", "--cron", "* * * * * *"]).expect_code(0);
    let t0 = Instant::now();
    while db.count("SELECT count(*) FROM runs WHERE state = 'completed'") < 5 {
        assert!(t0.elapsed() < Duration::from_secs(30), "the schedule did not fire; log:\n{}", read(&log));
        std::thread::sleep(Duration::from_millis(100));
    }
    w.run(&["schedule", "remove", "every-second"]).expect_code(0);
    std::thread::sleep(Duration::from_millis(500));
    for c in &mut workers {
        signal(c, "-TERM");
        c.wait().unwrap();
    }
    // One run per fire time (a run's id is derived from the schedule and
    // the time, so a second fire would be a second id of the same second).
    let created: Vec<i64> =
        db.rows("SELECT created_at FROM runs ORDER BY created_at").iter().map(|r| r.get(0)).collect();
    let seconds: std::collections::BTreeSet<i64> = created.iter().map(|c| c / 1000).collect();
    assert_eq!(seconds.len(), created.len(), "a time fired twice: {created:?}");
    assert!(created.len() >= 5);
    assert_eq!(db.count(UNFINISHED), 0);
}

/// The reaper of a worker with `retention = "2s"` deletes the finished
/// runs once they are 2 s old, with their events, and never a waiting run;
/// on both stores.
fn retention_reaper(w: Weft) {
    std::fs::write(w.dir.path().join("weft.toml"), "retention = \"2s\"\n").unwrap();
    let quick = json!({"name": "quick", "steps": [
        {"name": "s", "code": {"plugin": "text-template"}, "input": {"template": "x", "values": {}}}]});
    let waits = json!({"name": "waits", "steps": [{"name": "w", "wait": {"prompt": "ok?"}}]});
    let (q, wt) = (w.write_def("quick", &quick), w.write_def("waits", &waits));
    let mut ids = vec![];
    for _ in 0..3 {
        let out = w.run(&["run", q.to_str().unwrap(), "--detach"]);
        out.expect_code(0);
        ids.push(out.stdout.trim().to_string());
    }
    let waiting = w.run(&["run", wt.to_str().unwrap(), "--detach"]);
    let waiting = waiting.stdout.trim().to_string();
    let log = w.dir.path().join("worker.log");
    let mut worker = spawn_worker(&w, &log);
    let t0 = Instant::now();
    loop {
        let left: Vec<String> = w.runs().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
        if ids.iter().all(|id| !left.contains(id)) {
            assert!(left.contains(&waiting), "the waiting run is kept");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "finished runs were not reaped; log:\n{}", read(&log));
        std::thread::sleep(Duration::from_millis(200));
    }
    signal(&worker, "-TERM");
    worker.wait().unwrap();
    let out = w.run(&["runs", "events", &ids[0]]);
    assert_eq!(out.code, 2, "a deleted run is gone with its events: {}", out.stderr);
    assert_eq!(w.show(&waiting)["state"], "input-required");
}

#[test]
fn retention_reaper_on_sqlite() {
    retention_reaper(Weft::new());
}

#[test]
fn retention_reaper_on_postgres() {
    retention_reaper(Weft::postgres());
}

/// `runs prune` deletes exactly the finished runs older than the span (of
/// a state, of a template), `--dry-run` only counts, and `runs delete`
/// refuses an unfinished run, naming it; on both stores.
fn prune_and_delete(w: Weft) {
    let quick = json!({"name": "quick", "steps": [
        {"name": "s", "code": {"plugin": "text-template"}, "input": {"template": "x", "values": {}}}]});
    let other = json!({"name": "other", "steps": [
        {"name": "s", "code": {"plugin": "json-select"}, "input": {"data": {"a": 1}, "path": "b.c"}}]});
    let waits = json!({"name": "waits", "steps": [{"name": "w", "wait": {"prompt": "ok?"}}]});
    let (q, o, wt) = (w.write_def("quick", &quick), w.write_def("other", &other), w.write_def("waits", &waits));
    for f in [&q, &q, &o] {
        w.run(&["run", f.to_str().unwrap()]);
    }
    let waiting = w.run(&["run", wt.to_str().unwrap()]);
    assert_eq!(waiting.code, 3, "{}", waiting.stderr);
    let waiting_id = w.runs().iter().find(|r| r["template"] == "waits").unwrap()["id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(50));
    let n = |out: crate::common::Outcome, key: &str| out.json()[key].as_u64().unwrap();
    assert_eq!(n(w.run(&["runs", "prune", "--older-than", "1h", "--json"]), "deleted"), 0, "nothing is an hour old");
    assert_eq!(n(w.run(&["runs", "prune", "--older-than", "1ms", "--dry-run", "--json"]), "would_delete"), 3);
    assert_eq!(
        n(
            w.run(&["runs", "prune", "--older-than", "1ms", "--template", "quick", "--dry-run", "--json"]),
            "would_delete"
        ),
        2
    );
    assert_eq!(w.runs().len(), 4, "a dry run deletes nothing");
    let failed = w.runs().iter().filter(|r| r["state"] == "failed").count();
    assert_eq!(
        n(w.run(&["runs", "prune", "--older-than", "1ms", "--state", "failed", "--json"]), "deleted"),
        failed as u64
    );
    let out = w.run(&["runs", "prune", "--older-than", "1ms", "--state", "working"]);
    assert_eq!(out.code, 2, "only finished states: {}", out.stderr);
    let out = w.run(&["runs", "prune", "--older-than", "soon"]);
    assert!(out.code == 2 && out.stderr.contains("span of time"), "{}", out.stderr);
    let left: Vec<Value> = w.runs();
    let done = left.iter().find(|r| r["state"] == "completed").unwrap()["id"].as_str().unwrap().to_string();
    let out = w.run(&["runs", "delete", &done, &waiting_id]);
    assert_eq!(out.code, 1, "the waiting run is refused: {}", out.stderr);
    assert!(out.stderr.contains(&waiting_id) && out.stderr.contains("runs cancel"), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("deleted run {done}")), "{}", out.stderr);
    assert_eq!(w.run(&["runs", "show", &done]).code, 2);
    assert_eq!(n(w.run(&["runs", "prune", "--older-than", "1ms", "--json"]), "deleted"), 1);
    let left: Vec<Value> = w.runs();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id"], waiting_id.as_str());
}

#[test]
fn prune_and_delete_on_sqlite() {
    prune_and_delete(Weft::new());
}

#[test]
fn prune_and_delete_on_postgres() {
    prune_and_delete(Weft::postgres());
}

/// `weft store copy` moves an SQLite store (finished runs with their events
/// and artifacts, template versions, a schedule, a run waiting for input)
/// into PostgreSQL; a second copy adds nothing; a worker on PostgreSQL then
/// finishes the waiting run when it is signaled.
#[test]
fn store_copy_moves_an_sqlite_history_to_postgres() {
    let lite = Weft::new();
    let approval = crate::common::repo_root().join("examples/workflows/approval.json");
    let def = json!({"name": "t", "version": 1, "steps": [
        {"name": "s", "code": {"plugin": "text-template"}, "input": {"template": "v1", "values": {}}}]});
    let f = lite.write_def("t", &def);
    lite.run(&["templates", "save", f.to_str().unwrap()]).expect_code(0);
    lite.run(&["templates", "save", f.to_str().unwrap()]).expect_code(0);
    lite.run(&["run", "t"]).expect_code(0);
    lite.run(&["schedule", "add", "t", "--cron", "0 3 * * *"]).expect_code(0);
    let input = r#"{"order": "A-1", "amount": 12.5}"#;
    let out = lite.run(&["run", approval.to_str().unwrap(), "--input", input]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    let before: Vec<Value> = lite.runs();
    let mut pg = Weft::postgres();
    // With a password (the test cluster trusts loopback and ignores it): it
    // must never be shown.
    let url = pg.database.clone().unwrap().replacen("://weft@", "://weft:s3cret-pw@", 1);
    pg.database = Some(url.clone());
    let from = format!("sqlite:{}", lite.data_dir().join("weft.db").display());
    let out = lite.run(&["store", "copy", "--from", &from, "--to", &url, "--json"]);
    out.expect_code(0);
    let c = out.json();
    assert_eq!(
        (c["runs"].as_u64(), c["template_versions"].as_u64(), c["schedules"].as_u64()),
        (Some(2), Some(2), Some(1))
    );
    assert!(!out.stderr.contains("s3cret") && !out.stdout.contains("s3cret"), "no password shown: {}", out.stderr);
    let again = lite.run(&["store", "copy", "--from", &from, "--to", &url, "--json"]).json();
    assert_eq!((again["runs"].as_u64(), again["runs_already_there"].as_u64()), (Some(0), Some(2)));
    for r in &before {
        let id = r["id"].as_str().unwrap();
        assert_eq!(pg.show(id), lite.show(id), "run {id} reads back the same");
        assert_eq!(
            pg.run(&["runs", "events", id, "--json"]).stdout,
            lite.run(&["runs", "events", id, "--json"]).stdout
        );
    }
    assert_eq!(
        pg.run(&["templates", "show", "t", "--json"]).stdout,
        lite.run(&["templates", "show", "t", "--json"]).stdout
    );
    // The waiting run goes on in PostgreSQL's workers.
    let waiting = before.iter().find(|r| r["state"] == "input-required").unwrap()["id"].as_str().unwrap().to_string();
    let log = pg.dir.path().join("worker.log");
    let mut worker = spawn_worker(&pg, &log);
    let out = pg.run(&["signal", &waiting, "approve", "--data", r#"{"approved": true, "by": "ada"}"#]);
    assert_eq!(out.code, 0, "{}\nworker:\n{}", out.stderr, read(&log));
    let t0 = Instant::now();
    while pg.show(&waiting)["state"] != "completed" {
        assert!(t0.elapsed() < Duration::from_secs(30), "{:#}", pg.show(&waiting));
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&worker, "-TERM");
    worker.wait().unwrap();
    // A copy into a store that is in use by its own worker is refused.
    let held = KillOnDrop(lite.cmd().arg("worker").stderr(Stdio::null()).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(500));
    let out = lite.run(&["store", "copy", "--from", &from, "--to", &url]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("stop it first"), "{}", out.stderr);
    drop(held);
}

/// A signal and a cancel sent to `weft serve` for runs another worker
/// drives reach that worker (through the inbox, woken by NOTIFY) and are
/// answered as if the server drove the runs; the API's run view and the
/// store agree.
#[test]
fn signals_and_cancels_reach_the_worker_that_drives_the_run() {
    let w = Weft::postgres();
    let db = Db::open(w.database.as_deref().unwrap());
    let approval = json!({"name": "approval", "steps": [
        {"name": "approve", "wait": {"prompt": "approve?", "schema": {"type": "object", "required": ["ok"],
            "properties": {"ok": {"type": "boolean"}}}}},
        {"name": "after", "code": {"plugin": "json-select"}, "input": {"data": "@approve", "path": "ok"}}]});
    let spin = json!({"name": "spin", "steps": [
        {"name": "spin", "code": {"path": weft_test_artifacts::HOSTILE}, "input": {"mode": "loop"},
         "timeout_ms": 60_000, "limits": {"fuel": 100_000_000_000_000u64}}]});
    let (fa, fs) = (w.write_def("approval", &approval), w.write_def("spin", &spin));
    // Only the worker runs when the runs are created: they are its.
    let log = w.dir.path().join("worker.log");
    let mut worker = spawn_worker(&w, &log);
    let detach = |f: &Path| {
        let out = w.run(&["run", f.to_str().unwrap(), "--detach"]);
        out.expect_code(0);
        out.stdout.trim().to_string()
    };
    let (waiting, spinning) = (detach(&fa), detach(&fs));
    let t0 = Instant::now();
    while w.show(&waiting)["state"] != "input-required" || w.show(&spinning)["steps"][0]["state"] != "running" {
        assert!(t0.elapsed() < Duration::from_secs(30), "the worker did not start the runs:\n{}", read(&log));
        std::thread::sleep(Duration::from_millis(50));
    }
    let worker_epoch = epoch_of(&db, worker.id()).unwrap();
    let owners = db.rows("SELECT owner FROM runs");
    assert!(owners.iter().all(|r| r.get::<_, Option<i64>>(0) == Some(worker_epoch)), "the worker's runs");
    let server = crate::serve::Server::start(&w, &["--http", "127.0.0.1:0"]);
    let api = format!("http://127.0.0.1:{}/api/v1", server.port());
    let http = reqwest::Client::new();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let post = |url: String, body: Option<Value>| {
        rt.block_on(async {
            let mut req = http.post(url);
            if let Some(b) = body {
                req = req.json(&b);
            }
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        })
    };
    let answer = format!("{api}/runs/{waiting}/steps/approve/signal");
    let (st, body) = post(answer.clone(), Some(json!({"data": {"ok": "yes"}})));
    assert_eq!(st, 422, "the owner checked the schema: {body}");
    let (st, body) = post(answer, Some(json!({"data": {"ok": true}})));
    assert_eq!(st, 200, "{body}");
    let (st, body) = post(format!("{api}/runs/{spinning}/cancel"), None);
    assert_eq!(st, 200, "{body}");
    let t1 = Instant::now();
    loop {
        let (a, s) = (w.show(&waiting), w.show(&spinning));
        if a["state"] == "completed" && s["state"] == "canceled" {
            assert_eq!(a["output"], json!({"after": true}), "{a}");
            break;
        }
        assert!(t1.elapsed() < Duration::from_secs(30), "{a}\n{s}\n{}", read(&log));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Still the worker's: nothing was taken from it.
    assert_eq!(epoch_of(&db, worker.id()), Some(worker_epoch));
    let handled = db.count("SELECT count(*) FROM inbox WHERE answer IS NOT NULL AND kind IN ('signal', 'cancel')");
    assert!(handled >= 2, "relayed through the inbox ({handled} answered)");
    drop(server);
    signal(&worker, "-TERM");
    worker.wait().unwrap();
}

/// With three workers, the runs of one concurrency key still execute one
/// at a time, in the order they were created (each starts after the one
/// before ended), while runs without a key go alongside; a parent whose
/// worker is SIGKILLed while its child runs is taken over with the child,
/// and both complete.
#[test]
fn queues_and_child_runs_hold_across_three_workers() {
    let w = Weft::postgres();
    let db = Db::open(w.database.as_deref().unwrap());
    let nap = json!({"name": "nap", "version": 1, "steps": [
        {"name": "a", "code": {"plugin": "text-template"}, "input": {"template": "x", "values": {}}},
        {"name": "nap", "sleep": {"ms": 150}, "after": ["a"]}]});
    let f = w.write_def("nap", &nap);
    w.run(&["templates", "save", f.to_str().unwrap()]).expect_code(0);
    let parent = json!({"name": "parent", "version": 1, "steps": [
        {"name": "child", "workflow": {"template": "slow"}, "input": {}},
        {"name": "after", "code": {"plugin": "json-select"}, "input": {"data": "@child", "path": ""}}]});
    let slow = json!({"name": "slow", "version": 1, "steps": [{"name": "nap", "sleep": {"ms": 1500}}]});
    for (name, def) in [("slow", &slow), ("parent", &parent)] {
        let f = w.write_def(name, def);
        w.run(&["templates", "save", f.to_str().unwrap()]).expect_code(0);
    }
    let mut keyed = vec![];
    for _ in 0..6 {
        let out = w.run(&["run", "nap", "--key", "k", "--detach"]);
        out.expect_code(0);
        keyed.push(out.stdout.trim().to_string());
    }
    for _ in 0..4 {
        w.run(&["run", "nap", "--detach"]).expect_code(0);
    }
    let p = w.run(&["run", "parent", "--detach"]);
    p.expect_code(0);
    let parent_id = p.stdout.trim().to_string();
    let log = w.dir.path().join("workers.log");
    let mut workers: Vec<KillOnDrop> = (0..3).map(|_| spawn_worker(&w, &log)).collect();
    // Kill the worker that drives the parent while its child sleeps.
    let t0 = Instant::now();
    let owner = loop {
        let row = db.rows(&format!(
            "SELECT r.owner FROM runs r WHERE r.parent = '{parent_id}' AND r.state = 'working' AND r.owner IS NOT NULL"
        ));
        if let Some(r) = row.first() {
            break r.get::<_, i64>(0);
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "the child never started:\n{}", read(&log));
        std::thread::sleep(Duration::from_millis(20));
    };
    let pids: Vec<u32> = workers.iter().map(|c| c.id()).collect();
    let victim = pids.iter().position(|pid| epoch_of(&db, *pid) == Some(owner)).expect("a worker owns the child");
    signal(&workers[victim], "-KILL");
    workers[victim].wait().unwrap();
    let t1 = Instant::now();
    while db.count(UNFINISHED) > 0 {
        assert!(t1.elapsed() < Duration::from_secs(60), "{} unfinished:\n{}", db.count(UNFINISHED), read(&log));
        std::thread::sleep(Duration::from_millis(50));
    }
    for (i, c) in workers.iter_mut().enumerate() {
        if i != victim {
            signal(c, "-TERM");
            c.wait().unwrap();
        }
    }
    assert_eq!(db.count("SELECT count(*) FROM runs WHERE state <> 'completed'"), 0, "every run completed");
    // One at a time, in order: each keyed run started after the previous ended.
    let mut spans = vec![];
    for id in &keyed {
        let r = w.show(id);
        let start = r["steps"][0]["started_at"].as_str().unwrap().to_string();
        let end = r["updated_at"].as_str().unwrap().to_string();
        spans.push((start, end));
    }
    for pair in spans.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "keyed runs overlapped: {spans:?}");
    }
    let child = db.rows(&format!("SELECT id FROM runs WHERE parent = '{parent_id}'"));
    assert_eq!(child.len(), 1, "one child, created once");
    assert_eq!(w.show(&parent_id)["state"], "completed");
}

/// Creates `n` trivial-3 runs (three `json-select` steps) as a client of
/// the database (a process that drives no run, as W10's backlog): every
/// one of them is free for a worker to claim.
fn backlog(w: &Weft, n: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let c = weft_workloads::w10::client(w.database.as_deref().unwrap(), w.dir.path()).await.unwrap();
        weft_workloads::w10::backlog(&c, n).await.unwrap();
    });
}

/// Many workers at full size: two `weft worker`s and a `weft serve`
/// (a worker too) on one database drain 10,000 runs; one worker is
/// SIGKILLed and the other SIGSTOPped while they hold runs; both are taken
/// over, the paused one is SIGCONTed past its lease; every run completes,
/// and no step of any run succeeded twice.
#[test]
fn two_workers_and_serve_finish_ten_thousand_runs_once_through_a_kill_and_a_pause() {
    let w = Weft::postgres();
    let db = Db::open(w.database.as_deref().unwrap());
    let runs = 10_000;
    backlog(&w, runs);
    assert_eq!(db.count("SELECT count(*) FROM runs WHERE owner IS NULL AND state = 'submitted'"), runs as i64);
    let log = |n: usize| w.dir.path().join(format!("worker{n}.log"));
    let mut workers: Vec<KillOnDrop> = (0..2).map(|n| spawn_worker(&w, &log(n))).collect();
    let server = crate::serve::Server::start(&w, &["--http", "127.0.0.1:0"]);
    // Once both workers hold unfinished runs: kill one, pause the other.
    let t0 = Instant::now();
    let epochs = loop {
        let e: Vec<Option<i64>> = workers.iter().map(|c| epoch_of(&db, c.id())).collect();
        let holding = |e: Option<i64>| {
            e.is_some_and(|e| {
                db.count(&format!("SELECT count(*) FROM runs WHERE owner = {e} AND state IN ('submitted', 'working')"))
                    > 0
            })
        };
        if e.iter().all(|e| holding(*e)) {
            break e.into_iter().map(Option::unwrap).collect::<Vec<i64>>();
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the workers never held runs:\n{}", read(&log(0)));
        std::thread::sleep(Duration::from_millis(2));
    };
    signal(&workers[0], "-KILL");
    signal(&workers[1], "-STOP");
    workers[0].wait().unwrap();
    let stopped = Instant::now();
    let held: i64 = db.count(&format!(
        "SELECT count(*) FROM runs WHERE owner IN ({}, {}) AND state IN ('submitted', 'working')",
        epochs[0], epochs[1]
    ));
    assert!(held > 0, "the two workers held no unfinished run when stopped");
    // Both are taken over within the lease (5 s by default) and ~1 s.
    while db.count(&format!("SELECT count(*) FROM workers WHERE epoch IN ({}, {})", epochs[0], epochs[1])) > 0 {
        assert!(stopped.elapsed() < Duration::from_secs(12), "not taken over:\n{}", read(&log(1)));
        std::thread::sleep(Duration::from_millis(20));
    }
    let taken_after = stopped.elapsed();
    signal(&workers[1], "-CONT");
    let t1 = Instant::now();
    while db.count(UNFINISHED) > 0 {
        assert!(
            t1.elapsed() < Duration::from_secs(120),
            "{} runs left; the paused worker's log:\n{}",
            db.count(UNFINISHED),
            read(&log(1))
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(db.count("SELECT count(*) FROM runs WHERE state = 'completed'"), runs as i64);
    let repeated = db.count(
        "SELECT count(*) FROM (SELECT 1 FROM attempts GROUP BY run_id, step, item
                               HAVING count(*) FILTER (WHERE state = 'succeeded') > 1) t",
    );
    assert_eq!(repeated, 0, "steps that succeeded more than once");
    assert_eq!(db.count("SELECT count(*) FROM attempts WHERE state = 'succeeded'"), 3 * runs as i64);
    assert_eq!(db.count("SELECT count(*) FROM steps WHERE state <> 'succeeded'"), 0);
    // The paused worker came back under a new epoch, as a worker again.
    let t2 = Instant::now();
    while epoch_of(&db, workers[1].id()).is_none_or(|e| e == epochs[1]) {
        assert!(t2.elapsed() < Duration::from_secs(20), "the paused worker did not join again:\n{}", read(&log(1)));
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("{held} unfinished runs held by the stopped workers, taken over after {taken_after:?}");
    drop(server);
    signal(&workers[1], "-TERM");
    workers[1].wait().unwrap();
}
