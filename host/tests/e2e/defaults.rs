//! What a new user meets with default settings (no `weft.toml`, no retry
//! policy, no limits written): a long computation runs to its timeout
//! (there is no hidden CPU cap), a run's CPU budget is spent across its
//! steps when one is asked for, and a step that takes its process down
//! again and again is stopped as `crashed` instead of looping.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Weft, step};

const HOSTILE: &str = weft_test_artifacts::HOSTILE;

/// The old default fuel (10^9) was ~0.2 s of CPU here: a 1.5 s computation
/// now runs to its end under the 10 s default timeout, both alone and in
/// a run; a loop meets its timeout, reported as `timeout`.
#[test]
fn a_long_computation_runs_to_its_timeout_under_defaults() {
    let w = Weft::new();
    let started = Instant::now();
    let out = w.step_run(HOSTILE.as_ref(), &json!({"mode": "busy", "n": 1500}), &[]);
    out.expect_code(0);
    assert!(out.json()["iterations"].as_u64().unwrap() > 0, "{}", out.stdout);
    assert!(started.elapsed() >= Duration::from_millis(1500));

    let file = w.write_def(
        "long",
        &json!({"name": "long", "steps": [{"name": "crunch", "code": {"path": HOSTILE}, "input": {"mode": "busy", "n": 1500}}]}),
    );
    let out = w.run_within(Duration::from_secs(60), &["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(0);
    assert_eq!(out.json()["state"], "completed", "{}", out.stdout);

    let out = w.step_run(HOSTILE.as_ref(), &json!({"mode": "loop"}), &["--timeout-ms", "500"]);
    out.expect_code(1);
    assert_eq!(out.json()["kind"], "timeout", "{}", out.stdout);
}

/// `limits.run_fuel` is shared by a run's code steps: the step that would
/// go past what is left fails `fuel_exhausted`, naming the run's budget.
#[test]
fn a_run_budget_is_spent_across_its_steps() {
    let w = Weft::new();
    // Each step's input is the same text once resolved (fib(20) = 6765),
    // so each costs the same fuel.
    let fib = |name: &str, prev: Option<&str>| {
        let prev = prev.map_or(json!(6765), |p| json!(format!("@{p}")));
        json!({"name": name, "code": {"path": HOSTILE}, "input": {"mode": "fib", "n": 20, "prev": prev}})
    };
    let steps = json!([fib("s0", None), fib("s1", Some("s0")), fib("s2", Some("s1")), fib("s3", Some("s2"))]);
    // What one step costs (fuel is deterministic), from the store: fuel is
    // counted only under a budget (the default engine meters none).
    let file = w.write_def("free", &json!({"name": "free", "steps": steps}));
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(0);
    let free = out.json()["id"].as_str().unwrap().to_string();
    let file = w.write_def(
        "measure",
        &json!({"name": "measure", "limits": {"run_fuel": 1_000_000_000_000u64}, "steps": steps}),
    );
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_string();
    let db = rusqlite::Connection::open(w.data_dir().join("weft.db")).unwrap();
    let fuel: Vec<i64> = db
        .prepare("SELECT fuel FROM attempts WHERE run_id = ?1 ORDER BY step")
        .unwrap()
        .query_map([&id], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(fuel.len(), 4);
    let uncounted: i64 = db
        .query_row("SELECT count(*) FROM attempts WHERE run_id = ?1 AND fuel IS NULL", [&free], |r| r.get(0))
        .unwrap();
    assert_eq!(uncounted, 4, "without a budget no fuel is metered");
    // The same work costs about the same fuel (a guest's runtime varies by
    // a few dozen units from call to call).
    let per_step = *fuel.iter().max().unwrap() as u64;
    assert!(fuel.iter().all(|f| (*f as u64).abs_diff(per_step) * 100 < per_step), "{fuel:?}");

    // Two and a half steps' worth: the third step runs out.
    let budget = per_step * 5 / 2;
    let file = w.write_def("budget", &json!({"name": "budget", "limits": {"run_fuel": budget}, "steps": steps}));
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(1);
    let run = out.json();
    assert_eq!(run["state"], "failed", "{run}");
    assert_eq!(step(&run, "s0")["state"], "succeeded");
    assert_eq!(step(&run, "s1")["state"], "succeeded");
    let err = &step(&run, "s2")["error"];
    assert_eq!(err["kind"], "fuel_exhausted", "{run}");
    let msg = err["message"].as_str().unwrap();
    assert!(msg.contains("run's CPU budget") && msg.contains("limits.run_fuel"), "{msg}");
    let id = run["id"].as_str().unwrap();
    let spent: i64 = db
        .query_row("SELECT sum(fuel) FROM attempts WHERE run_id = ?1 AND step IN ('s0', 's1')", [id], |r| r.get(0))
        .unwrap();
    assert!(msg.contains(&(budget - spent as u64).to_string()), "names what was left ({budget} - {spent}): {msg}");
    assert_ne!(step(&run, "s3")["state"], "succeeded");
}

/// A step that takes its process down every time it runs (here: the
/// process is SIGKILLed while the step computes) runs again as itself
/// twice, and at the third interruption fails as `crashed`: the run ends
/// instead of looping, and nothing else is charged to it.
#[test]
fn a_step_that_keeps_killing_its_process_fails_as_crashed() {
    let w = Weft::new();
    let def = json!({"name": "poison", "steps": [
        {"name": "first", "code": {"path": HOSTILE}, "input": {"mode": "ok"}},
        {"name": "poison", "code": {"path": HOSTILE}, "input": {"mode": "loop"}, "after": ["first"], "timeout_ms": 60000},
        {"name": "never", "code": {"path": HOSTILE}, "input": {"mode": "ok"}, "after": ["poison"]}
    ]});
    let file = w.write_def("poison", &def);
    let out = w.run(&["run", file.to_str().unwrap(), "--detach"]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    let db = rusqlite::Connection::open(w.data_dir().join("weft.db")).unwrap();
    let running_since = |t0: i64| -> bool {
        db.query_row(
            "SELECT count(*) FROM attempts WHERE run_id = ?1 AND step = 'poison' AND state = 'running' AND started_at >= ?2",
            rusqlite::params![id, t0],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
            > 0
    };
    for kill in 1..=3 {
        let t0 = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        let mut worker = w.cmd().arg("worker").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let until = Instant::now() + Duration::from_secs(30);
        while !running_since(t0) {
            assert!(Instant::now() < until, "kill {kill}: the poison step never started");
            assert!(worker.try_wait().unwrap().is_none(), "kill {kill}: the worker exited");
            std::thread::sleep(Duration::from_millis(20));
        }
        worker.kill().unwrap();
        worker.wait().unwrap();
    }
    let out = w.run_within(Duration::from_secs(60), &["worker", "--until-idle"]);
    out.expect_code(0);
    let run = w.show(&id);
    assert_eq!(run["state"], "failed", "{run}");
    let poison = step(&run, "poison");
    assert_eq!(poison["error"]["kind"], "crashed", "{run}");
    assert!(poison["error"]["message"].as_str().unwrap().contains("3 times in a row"), "{run}");
    assert_eq!(poison["attempts"], 1, "interruptions are not attempts: {run}");
    assert_eq!(poison["interruptions"], 2, "{run}");
    assert_eq!(step(&run, "first")["state"], "succeeded");
    assert_ne!(step(&run, "never")["state"], "succeeded");
    let interruptions: i64 = db
        .query_row("SELECT interruptions FROM attempts WHERE run_id = ?1 AND step = 'poison'", [&id], |r| r.get(0))
        .unwrap();
    assert_eq!(interruptions, 2, "two interruptions ran it again; the third failed it");
    let events = w.run(&["runs", "events", &id]);
    assert_eq!(events.stdout.matches("attempt.interrupted").count(), 2, "{}", events.stdout);
}

/// Logs are bounded per run: 40 items that each log 3 MB (3,000 lines of
/// 1,000 bytes; each invocation keeps its 1 MiB) add at most the run's cap
/// (`[limits] max_run_log_bytes`, here 2 MB) to its log, and one marker.
#[test]
fn a_run_of_log_flooders_is_capped_with_a_marker() {
    let w = Weft::new();
    std::fs::write(w.dir.path().join("weft.toml"), "[limits]\nmax_run_log_bytes = 2_000_000\n").unwrap();
    let items: Vec<u32> = (0..40).collect();
    let file = w.write_def(
        "flood",
        &json!({"name": "flood", "steps": [{"name": "flood", "for_each": items, "concurrency": 4,
            "code": {"path": HOSTILE}, "input": {"mode": "log_flood"}}]}),
    );
    let out = w.run_within(Duration::from_secs(120), &["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_string();
    let db = rusqlite::Connection::open(w.data_dir().join("weft.db")).unwrap();
    let (events, bytes): (i64, i64) = db
        .query_row(
            "SELECT count(*), coalesce(sum(length(data)), 0) FROM events WHERE run_id = ?1 AND kind = 'log'",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(bytes <= 2_200_000, "{events} log events, {bytes} bytes: over the run's cap");
    assert!(events >= 1_500, "{events} log events: the cap cut too early");
    let markers: i64 = db
        .query_row("SELECT count(*) FROM events WHERE run_id = ?1 AND kind = 'log.truncated'", [&id], |r| r.get(0))
        .unwrap();
    assert_eq!(markers, 1);
}

/// A retry policy the user wrote applies to WASI commands: a command that
/// exits 1 on its first attempt is retried to success; one that exits 65
/// (a permanent failure) is not retried under the same policy.
#[test]
fn a_flaky_command_is_retried_by_the_policy_a_permanent_failure_is_not() {
    let w = Weft::new();
    let command = weft_test_artifacts::HOSTILE_COMMAND;
    let retry = json!({"max_attempts": 3, "initial_delay_ms": 10, "jitter": false});
    let def = |mode: &str| json!({"name": mode, "steps": [{"name": "cmd", "code": {"path": command}, "input": {"mode": mode}, "retry": retry}]});
    let file = w.write_def("flaky", &def("flaky"));
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(0);
    let run = out.json();
    assert_eq!(run["output"]["cmd"]["attempt"], "2", "{run}");
    assert_eq!(step(&run, "cmd")["attempts"], 2, "{run}");

    let file = w.write_def("permanent", &def("permanent"));
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(1);
    let run = out.json();
    assert_eq!(step(&run, "cmd")["attempts"], 1, "exit 65 is not retried: {run}");
    let err = &step(&run, "cmd")["error"];
    assert_eq!((err["kind"].as_str(), err["retryable"].as_bool()), (Some("guest_error"), Some(false)), "{run}");
    assert!(err["message"].as_str().unwrap().contains("permanent"), "{run}");
}

/// `weft runs events` lists every event of a run, past its first page
/// of 1,000.
#[test]
fn runs_events_lists_every_event() {
    let w = Weft::new();
    let file = w.write_def(
        "chatty",
        &json!({"name": "chatty", "steps": [{"name": "c", "code": {"path": HOSTILE}, "input": {"mode": "log_flood"}}]}),
    );
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_string();
    let db = rusqlite::Connection::open(w.data_dir().join("weft.db")).unwrap();
    let n: i64 = db.query_row("SELECT count(*) FROM events WHERE run_id = ?1", [&id], |r| r.get(0)).unwrap();
    assert!(n > 1000, "only {n} events: the test needs more than a page");
    let out = w.run(&["runs", "events", &id, "--json"]);
    out.expect_code(0);
    assert_eq!(out.stdout.lines().count() as i64, n, "every event, in order");
    let last: Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["kind"], "run.completed", "{last}");
}
