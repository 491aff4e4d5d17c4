//! `weft schedule` through the real binary: bad schedules are refused
//! with exit 2 and nothing stored; a schedule fires from `weft worker`,
//! never twice for one time across a SIGKILL and restart, and catches up
//! once (the latest missed time) after an outage.

use std::collections::BTreeSet;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::Weft;

fn save_template(w: &Weft) {
    let def = json!({"name": "tick", "version": 1,
        "input_schema": {"type": "object", "required": ["who"]},
        // A run the kill interrupts is retried by the next worker.
        "steps": [{"name": "say", "code": {"plugin": "text-template"}, "retry": {"max_attempts": 3},
                   "input": {"template": "hi {{who}}", "values": {"who": "@input.who"}}}],
        "output": "@say"});
    let f = w.dir.path().join("tick.json");
    std::fs::write(&f, def.to_string()).unwrap();
    w.run(&["templates", "save", f.to_str().unwrap()]).expect_code(0);
}

/// The fire time of a scheduled run: its id's timestamp (ids of scheduled
/// runs are derived from the schedule and the fire time).
fn fire_times(w: &Weft) -> Vec<i64> {
    let mut t: Vec<i64> = w
        .runs()
        .iter()
        .map(|r| {
            let id = r["id"].as_str().unwrap();
            let mut ts: i64 = 0;
            for c in id[2..12].bytes() {
                let v = b"0123456789abcdefghjkmnpqrstvwxyz".iter().position(|x| *x == c).unwrap();
                ts = (ts << 5) | v as i64;
            }
            ts
        })
        .collect();
    t.sort();
    t
}

fn worker(w: &Weft) -> Child {
    w.cmd().arg("worker").stderr(Stdio::null()).stdout(Stdio::null()).spawn().unwrap()
}

fn wait_for_runs(w: &Weft, n: usize, limit: Duration) {
    let t0 = Instant::now();
    while w.runs().len() < n {
        assert!(t0.elapsed() < limit, "only {} runs after {limit:?}", w.runs().len());
        std::thread::sleep(Duration::from_millis(100));
    }
}

on_both_stores! { fn bad_schedules_are_refused_and_nothing_is_stored(w) {
    save_template(&w);
    let out = w.run(&["schedule", "add", "tick", "--cron", "0 25 * * *", "--input", r#"{"who": "a"}"#]);
    out.expect_code(2);
    assert!(out.stderr.contains("cron"), "{}", out.stderr);
    let out = w.run(&["schedule", "add", "nope", "--cron", "0 2 * * *"]);
    out.expect_code(2);
    assert!(out.stderr.contains("no template `nope`"), "{}", out.stderr);
    let out = w.run(&["schedule", "add", "tick", "--cron", "0 2 * * *"]);
    out.expect_code(2);
    assert!(out.stderr.contains("who"), "the input is checked against the input_schema: {}", out.stderr);
    let out = w.run(&["schedule", "add", "tick", "--cron", "0 2 * * *", "--input", "{nope"]);
    out.expect_code(2);
    let out = w.run(&["schedule", "list", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json(), json!([]));

    let out =
        w.run(&["schedule", "add", "tick", "--cron", "0 2 * * *", "--input", r#"{"who": "a"}"#, "--name", "nightly"]);
    out.expect_code(0);
    let s = out.json();
    assert_eq!(s["name"], "nightly");
    assert!(s["next_fire_at"].as_str().unwrap().ends_with("T02:00:00.000Z"), "{s}");
    w.run(&["schedule", "add", "tick", "--cron", "0 3 * * *", "--input", r#"{"who": "a"}"#, "--name", "nightly"])
        .expect_code(2);
    let out = w.run(&["schedule", "list"]);
    out.expect_code(0);
    assert!(out.stdout.contains("nightly") && out.stdout.contains("0 2 * * *"), "{}", out.stdout);
    w.run(&["schedule", "remove", "nightly"]).expect_code(0);
    w.run(&["schedule", "remove", "nightly"]).expect_code(2);
} }

on_both_stores! { fn a_schedule_fires_once_per_time_across_a_kill_and_catches_up_once(w) {
    save_template(&w);
    // Every 2 seconds.
    let out = w.run(&["schedule", "add", "tick", "--cron", "*/2 * * * * *", "--input", r#"{"who": "cron"}"#]);
    out.expect_code(0);
    let mut first = worker(&w);
    wait_for_runs(&w, 2, Duration::from_secs(15));
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let before: BTreeSet<i64> = fire_times(&w).into_iter().collect();
    let killed_at = chrono_now();
    std::thread::sleep(Duration::from_millis(5_500)); // ~2-3 fire times missed
    let restarted_at = chrono_now();
    let mut second = worker(&w);
    wait_for_runs(&w, before.len() + 2, Duration::from_secs(15));
    second.kill().unwrap();
    second.wait().unwrap();

    let all = fire_times(&w);
    let distinct: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a fire time was used twice: {all:?}");
    assert!(all.iter().all(|t| t % 2000 == 0), "fires are on the cron's instants: {all:?}");
    let missed: Vec<i64> = all.iter().copied().filter(|t| *t > killed_at && *t < restarted_at).collect();
    assert!(missed.len() <= 1, "the outage is caught up once, not per missed time: {missed:?} in {all:?}");
    assert!(before.iter().all(|t| distinct.contains(t)));
    // Every run it started completes.
    w.run(&["worker", "--until-idle"]).expect_code(0);
    for r in w.runs() {
        let shown = w.run(&["runs", "show", r["id"].as_str().unwrap(), "--json"]).stdout;
        assert_eq!(r["state"], "completed", "{shown}");
    }
    let out = w.run(&["schedule", "list", "--json"]);
    let s = &out.json()[0];
    assert!(s["last_run"].is_string(), "{s}");
} }

fn chrono_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

on_both_stores! { fn a_paused_schedule_does_not_fire_until_it_is_resumed(w) {
    save_template(&w);
    w.run(&["schedule", "add", "tick", "--cron", "* * * * * *", "--input", r#"{"who": "p"}"#]).expect_code(0);
    let out = w.run(&["schedule", "pause", "tick"]);
    out.expect_code(0);
    assert_eq!(out.json()["paused"], true, "{}", out.stdout);
    w.run(&["schedule", "pause", "nope"]).expect_code(2);
    let mut worker_ = worker(&w);
    // Every second, but paused: three seconds of a worker start nothing.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(w.runs().len(), 0, "a paused schedule fired");
    let listed = w.run(&["schedule", "list"]);
    assert!(listed.stdout.contains("paused"), "{}", listed.stdout);
    let resumed_at = chrono_now();
    let out = w.run(&["schedule", "resume", "tick"]);
    out.expect_code(0);
    assert_eq!(out.json()["paused"], false, "{}", out.stdout);
    wait_for_runs(&w, 1, Duration::from_secs(15));
    worker_.kill().unwrap();
    worker_.wait().unwrap();
    // Resumed, it fires from the resume on (whole seconds): the times it
    // was paused over are not made up.
    assert!(fire_times(&w).iter().all(|t| *t > resumed_at - 1000), "{:?} resumed at {resumed_at}", fire_times(&w));
} }

/// The same over MCP (tests/mcp-clients/schedules_check.py, the official
/// Python SDK): `weft serve` owns the store and fires what its tools add.
#[test]
fn an_agent_adds_pauses_resumes_and_removes_a_schedule_over_mcp() {
    let w = Weft::new();
    let seen = crate::serve_recording::play(&w, "", "schedules_check.py");
    assert_eq!(seen["tools"], json!(["schedule_add", "schedule_list", "schedule_pause", "schedule_remove"]), "{seen}");
    // Refusals name the argument, and store nothing.
    let bad = &seen["bad_cron"];
    assert_eq!(bad["is_error"], true, "{seen}");
    assert_eq!(bad["structured"]["problems"][0]["argument"], "cron", "{seen}");
    let bad = &seen["bad_input"];
    assert_eq!(bad["is_error"], true, "{seen}");
    assert_eq!(bad["structured"]["problems"][0]["argument"], "input", "{seen}");
    assert_eq!(bad["structured"]["problems"][0]["path"], "/who", "{seen}");
    assert_eq!(seen["listed_after_refusals"], json!([]), "{seen}");
    // Added, it fires; paused, it does not; resumed, it does again.
    assert_eq!(seen["added"]["paused"], false, "{seen}");
    assert!(seen["fired"].as_u64().unwrap() >= 2, "{seen}");
    assert_eq!(seen["paused"]["paused"], true, "{seen}");
    assert!(seen["paused"]["next_fire_at"].is_null(), "a paused schedule has no next fire: {seen}");
    assert!(seen["resumed"]["next_fire_at"].is_string(), "{seen}");
    assert_eq!(seen["while_paused"], 0, "a paused schedule fired: {seen}");
    assert_eq!(seen["resumed"]["paused"], false, "{seen}");
    assert!(seen["after_resume"].as_u64().unwrap() >= 1, "{seen}");
    assert_eq!(seen["removed"]["structured"]["removed"], "tick", "{seen}");
    assert_eq!(seen["removed_again"]["is_error"], true, "{seen}");
    assert!(seen["removed_again"]["text"].as_str().unwrap().contains("schedule_list"), "{seen}");
    assert_eq!(seen["listed_at_end"], json!([]), "{seen}");
}
