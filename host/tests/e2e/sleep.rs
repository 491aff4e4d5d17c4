//! `sleep` steps through the real binary: a `weft worker` SIGKILLed while
//! a run sleeps; after an outage longer than the sleep, a new worker fires
//! the timer late (not never, not twice) and finishes the run; and
//! `weft worker --until-idle` waits for pending timers; and concurrent
//! foreground `weft run`s sleep together, not one after another.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::step;

on_both_stores! { fn a_sleeping_run_survives_a_kill_and_fires_late_rather_than_never(w) {
    let def = json!({"name": "nap", "version": 1, "steps": [
        {"name": "before", "code": {"plugin": "text-template"}, "input": {"template": "a", "values": {}}},
        {"name": "nap", "sleep": {"ms": 1500}, "after": ["before"]},
        {"name": "after", "code": {"plugin": "json-select"}, "input": {"data": "@nap", "path": "slept_until"},
         "after": ["nap"]}], "output": "@after"});
    let f = w.dir.path().join("nap.json");
    std::fs::write(&f, def.to_string()).unwrap();
    let out = w.run(&["run", f.to_str().unwrap(), "--detach"]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    let mut worker = w.cmd().arg("worker").stderr(Stdio::null()).spawn().unwrap();
    let t0 = Instant::now();
    loop {
        let run = w.show(&id);
        if step(&run, "nap")["state"] == "waiting" {
            assert_eq!(run["state"], "working", "a sleeping run is working, not waiting for input");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "the run never slept: {run}");
        std::thread::sleep(Duration::from_millis(20));
    }
    worker.kill().unwrap(); // SIGKILL mid-sleep
    worker.wait().unwrap();
    std::thread::sleep(Duration::from_millis(2000)); // the outage outlasts the sleep
    let out = w.run(&["worker", "--until-idle"]);
    out.expect_code(0);
    let run = w.show(&id);
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(step(&run, "before")["attempts"], 1, "{run}");
    assert_eq!(step(&run, "nap")["state"], "succeeded");
    assert!(run["output"].as_str().unwrap().ends_with('Z'), "the sleep's due time flowed on: {run}");
    let events = w.run(&["runs", "events", &id, "--json"]);
    let wakes = events.stdout.lines().filter(|l| l.contains("\"step.succeeded\"") && l.contains("\"nap\"")).count();
    assert_eq!(wakes, 1, "fired once: {}", events.stdout);
} }

on_both_stores! { fn worker_until_idle_waits_for_pending_timers(w) {
    let def = json!({"name": "short", "version": 1, "steps": [{"name": "nap", "sleep": {"ms": 700}}]});
    let f = w.dir.path().join("short.json");
    std::fs::write(&f, def.to_string()).unwrap();
    let id = w.run(&["run", f.to_str().unwrap(), "--detach"]).stdout.trim().to_string();
    let t0 = Instant::now();
    w.run(&["worker", "--until-idle"]).expect_code(0);
    assert!(t0.elapsed() >= Duration::from_millis(700), "it waited for the timer");
    assert_eq!(w.show(&id)["state"], "completed");
} }

/// Six foreground `weft run`s at once, no worker: the first owns the
/// store and executes the others' runs too, so all six end together
/// (before: one after another, 2 s each, the last at 14.6 s).
#[test]
fn concurrent_foreground_runs_do_not_wait_for_each_other() {
    let w = crate::common::Weft::new();
    let def = json!({"name": "nap", "steps": [{"name": "nap", "sleep": {"ms": 2000}}]});
    let file = w.write_def("nap", &def);
    w.run(&["validate", file.to_str().unwrap()]).expect_code(0);
    let started = std::time::Instant::now();
    let children: Vec<_> = (0..6)
        .map(|_| {
            w.cmd()
                .args(["run", file.to_str().unwrap()])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ends = vec![];
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        ends.push(started.elapsed());
    }
    let last = ends.iter().max().unwrap();
    assert!(*last < std::time::Duration::from_secs(7), "the six 2 s runs ended at {ends:?}");
    assert!(w.runs().iter().all(|r| r["state"] == "completed"));
}
