//! Ordinary load with default settings fails no run: a batch of CPU-bound
//! runs larger than the machine completes (guests wait for a CPU slot; their timeouts start when they do); a
//! burst of cold starts compiles the guest once; a guest calling an
//! unimplemented WASI function in a loop cannot flood weft's stderr; a
//! fan-out of guests holding 60 MiB each stays under the memory budget.

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Weft, rss_kb};

/// The resident memory of `pid` in KiB, 0 once it has exited.
fn rss_now(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or(0)
}
use crate::serve::Server;

/// fib(39) in the hostile guest: ~0.6 s of one core.
const FIB_600MS: u64 = 39;

fn fib_step(name: &str, n: u64) -> Value {
    json!({"name": name, "code": {"path": weft_test_artifacts::HOSTILE}, "input": {"mode": "fib", "n": n}})
}

/// Submits `count` runs of `def` (detached) and runs a default worker
/// until they are done; returns the runs.
fn submit_and_work(w: &Weft, def: &Value, count: usize, limit: Duration) -> Vec<Value> {
    let file = w.write_def("batch", def);
    for _ in 0..count {
        w.run(&["run", file.to_str().unwrap(), "--detach"]).expect_code(0);
    }
    w.run_within(limit, &["worker", "--until-idle"]).expect_code(0);
    w.runs()
}

#[test]
fn forty_cpu_bound_runs_all_complete_on_default_settings() {
    let w = Weft::new();
    let def = json!({"name": "cpu", "steps": [fib_step("burn", FIB_600MS)]});
    let started = Instant::now();
    let runs = submit_and_work(&w, &def, 40, Duration::from_secs(180));
    assert_eq!(runs.len(), 40);
    let failed: Vec<&Value> = runs.iter().filter(|r| r["state"] != "completed").collect();
    assert!(failed.is_empty(), "{} of 40 did not complete, e.g. {}", failed.len(), failed[0]);
    // The waits were the engine's: shown in the runs' history, and no
    // attempt was charged for them.
    let mut waited = 0;
    for r in &runs {
        let run = w.show(r["id"].as_str().unwrap());
        assert_eq!(run["steps"][0]["attempts"], 1, "{run}");
        let events = w.run(&["runs", "events", r["id"].as_str().unwrap(), "--json"]);
        let queued = events.stdout.matches("attempt.queued").count();
        let admitted = events.stdout.matches("attempt.admitted").count();
        assert!(admitted <= queued, "an admission without its queueing: {}", events.stdout);
        waited += admitted;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(waited >= 40 - cores * 2, "only {waited} of 40 attempts waited for a CPU slot on {cores} cores");
    eprintln!("40 runs of ~0.6 s of CPU on {cores} cores: {:?}", started.elapsed());
}

#[test]
fn fifty_ten_step_chains_all_complete() {
    let w = Weft::new();
    let steps: Vec<Value> = (0..10)
        .map(|i| {
            let mut s = fib_step(&format!("s{i}"), 33);
            if i > 0 {
                s["after"] = json!([format!("s{}", i - 1)]);
            }
            s
        })
        .collect();
    let runs = submit_and_work(&w, &json!({"name": "chain", "steps": steps}), 50, Duration::from_secs(240));
    assert_eq!(runs.len(), 50);
    for r in &runs {
        assert_eq!(r["state"], "completed", "{r}");
    }
}

/// A WASI command that calls `sock_accept` (which wasmtime does not
/// implement, and logs a warning for) 200,000 times, then prints `{}`.
const SOCK_ACCEPT_FLOOD: &str = r#"(module
  (import "wasi_snapshot_preview1" "sock_accept" (func $accept (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 200) "{}")
  (func (export "_start") (local $i i32)
    (loop $l
      (drop (call $accept (i32.const 3) (i32.const 0) (i32.const 8)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 200000))))
    (i32.store (i32.const 128) (i32.const 200))
    (i32.store (i32.const 132) (i32.const 2))
    (drop (call $write (i32.const 1) (i32.const 128) (i32.const 1) (i32.const 140)))))"#;

#[test]
fn a_guest_cannot_flood_the_hosts_log() {
    let w = Weft::new();
    let guest = w.dir.path().join("flood.wat");
    std::fs::write(&guest, SOCK_ACCEPT_FLOOD).unwrap();
    let def = json!({"name": "flood", "steps": [{"name": "f", "code": {"path": guest}}]});
    let file = w.write_def("flood", &def);
    let out = w.run_within(Duration::from_secs(120), &["run", file.to_str().unwrap(), "--json"]);
    assert!(out.stderr.len() < 64 << 10, "weft wrote {} bytes to stderr:\n{}", out.stderr.len(), &out.stderr[..2000]);
    let run = out.json();
    assert_eq!(run["state"], "completed", "{run}");
    // The lines are the step's, under its 1 MiB log cap.
    let id = run["id"].as_str().unwrap();
    let events = w.run(&["runs", "events", id, "--json"]);
    assert!(events.stdout.contains("wasmtime: p1 sock_accept is not implemented"), "the step's log has the lines");
    let lines: Vec<String> = events
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "log")
        .filter_map(|e| e["data"]["line"].as_str().map(str::to_string))
        .collect();
    // Each line as stored leads with its level (`[warn] `), not counted.
    // weft's own markers (`[weft: log output truncated ...]`) are not the guest's.
    let logged: usize =
        lines.iter().filter(|l| !l.contains("[weft:")).map(|l| l.len().saturating_sub("[warn] ".len())).sum();
    assert!(logged <= 1 << 20, "{logged} bytes of step log, over the 1 MiB cap");
    assert!(lines.iter().any(|l| l.contains("more lines from wasmtime") || l.contains("truncated")), "the cut is said");
}

/// A WASI command that grows its memory by 60 MiB, writes all of it,
/// sleeps a second (parked in a host call, holding it), then prints `{}`.
const HOLD_60_MIB: &str = r#"(module
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 200) "{}")
  (func (export "_start")
    (drop (memory.grow (i32.const 960)))
    (memory.fill (i32.const 65536) (i32.const 1) (i32.const 62914560))
    (i64.store (i32.const 0) (i64.const 0))
    (i32.store8 (i32.const 8) (i32.const 0))
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const 1000000000))
    (i64.store (i32.const 32) (i64.const 0))
    (i32.store16 (i32.const 40) (i32.const 0))
    (drop (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 120)))
    (i32.store (i32.const 128) (i32.const 200))
    (i32.store (i32.const 132) (i32.const 2))
    (drop (call $write (i32.const 1) (i32.const 128) (i32.const 1) (i32.const 140)))))"#;

#[test]
fn a_fan_out_of_memory_holding_guests_stays_under_the_budget() {
    let w = Weft::new();
    std::fs::write(w.dir.path().join("weft.toml"), "[limits]\nguest_memory_budget_mb = 512\n").unwrap();
    let guest = w.dir.path().join("hold.wat");
    std::fs::write(&guest, HOLD_60_MIB).unwrap();
    let items: Vec<u32> = (0..50).collect();
    let def = json!({"name": "fan", "steps": [{"name": "hold", "for_each": items, "code": {"path": guest},
        "limits": {"memory_mb": 64}}]});
    let file = w.write_def("fan", &def);
    let mut child = w
        .cmd()
        .args(["run", file.to_str().unwrap(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (mut peak, until) = (0, Instant::now() + Duration::from_secs(120));
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until, "the fan-out did not end");
        peak = peak.max(rss_now(pid));
        std::thread::sleep(Duration::from_millis(25));
    }
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let run: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(run["state"], "completed", "{run}");
    // 8 guests of 64 MiB fit in 512 MiB: ~0.5 GB of guests, not 50 x 60 MiB = 3 GB.
    assert!(peak < 900 << 10, "peak RSS {} MiB for a 512 MiB guest budget", peak >> 10);
    eprintln!("50 guests holding 60 MiB each under a 512 MiB budget: peak RSS {} MiB", peak >> 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_burst_of_starts_compiles_the_guest_once() {
    let w = Weft::new();
    // A cache of its own: the suite's shared one may hold the guest.
    let mut cmd = w.cmd();
    cmd.env("WEFT_CACHE_DIR", w.dir.path().join("cold-cache")).args(["serve", "--http", "127.0.0.1:0"]);
    let server = Server::spawn(cmd);
    let pid = server.child.id();
    let api = format!("http://127.0.0.1:{}/api/v1", server.port());
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let def = json!({"name": "cold", "steps": [{"name": "s", "code": {"plugin": "json-select"},
        "input": {"data": {"a": 1}, "path": "a"}}]});
    let started = Instant::now();
    let mut calls = vec![];
    for _ in 0..200 {
        let (http, api, def) = (http.clone(), api.clone(), def.clone());
        calls.push(tokio::spawn(async move {
            http.post(format!("{api}/runs")).json(&json!({"definition": def})).send().await.map(|r| r.status().as_u16())
        }));
    }
    let mut peak = 0;
    let mut statuses = vec![];
    for c in calls {
        peak = peak.max(rss_kb(pid));
        statuses.push(c.await.unwrap().expect("every request is answered"));
    }
    let took = started.elapsed();
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    assert!(took < Duration::from_secs(60), "200 cold starts took {took:?}");
    let metrics = http.get(format!("http://127.0.0.1:{}/metrics", server.port())).send().await.unwrap();
    let text = metrics.text().await.unwrap();
    let compiled: f64 = text
        .lines()
        .find(|l| l.starts_with("weft_guest_compilations_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no compilation count in /metrics:\n{text}"));
    assert!((1.0..=2.0).contains(&compiled), "{compiled} compilations for one guest");
    assert!(peak < 700 << 10, "peak RSS {} MiB", peak >> 10);
    eprintln!("200 cold starts: {took:?}, {compiled} compilation(s), peak RSS {} MiB", peak >> 10);
}
