//! Guests that block in a host call (issue: "a guest escapes its wall
//! clock"): ten runs whose step sleeps for an hour in WASI, beside a normal
//! run, under one `weft worker`. The normal run finishes at once, a cancel
//! stops a sleeper at once, the others meet their `timeout_ms` (8 s), and the
//! worker shuts down cleanly on SIGTERM.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::Weft;

const HOSTILE: &str = weft_test_artifacts::HOSTILE;
const COMMAND: &str = weft_test_artifacts::HOSTILE_COMMAND;

#[test]
fn ten_sleepers_hurt_no_other_run() {
    let w = Weft::new();
    let sleeper = |guest: &str| {
        json!({"name": "sleeper", "steps": [
            {"name": "sleep", "code": {"path": guest}, "input": {"mode": "sleep", "n": 3600}, "timeout_ms": 8000}
        ]})
    };
    let mut ids = vec![];
    for k in 0..10 {
        let file = w.write_def(&format!("sleeper{k}"), &sleeper(if k % 2 == 0 { HOSTILE } else { COMMAND }));
        let out = w.run(&["run", file.to_str().unwrap(), "--detach"]);
        out.expect_code(0);
        ids.push(out.stdout.trim().to_string());
    }
    let log = w.dir.path().join("worker.log");
    let mut worker =
        w.cmd().arg("worker").stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap()).spawn().unwrap();
    let running = |id: &str| w.show(id)["steps"][0]["state"] == "running";
    let until = Instant::now() + Duration::from_secs(20);
    while !ids.iter().all(|id| running(id)) {
        assert!(Instant::now() < until, "the sleepers never all started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = Instant::now();

    // A normal run beside them, handed to the worker and followed.
    let normal = w.write_def(
        "normal",
        &json!({"name": "normal", "steps": [
            {"name": "a", "code": {"path": HOSTILE}, "input": {"mode": "fib", "n": 20}},
            {"name": "b", "code": {"path": COMMAND}, "input": {"mode": "ok", "echo": "@a"}}]}),
    );
    let t = Instant::now();
    let out = w.run_within(Duration::from_secs(30), &["run", normal.to_str().unwrap()]);
    out.expect_code(0);
    assert_eq!(out.json()["b"]["echo"], json!(6765), "{}", out.stdout);
    assert!(t.elapsed() < Duration::from_secs(5), "the normal run waited for the sleepers: {:?}", t.elapsed());

    // A cancel stops a sleeper at once.
    let t = Instant::now();
    w.run(&["runs", "cancel", &ids[0]]).expect_code(0);
    while w.show(&ids[0])["state"] != "canceled" {
        assert!(t.elapsed() < Duration::from_secs(5), "the cancel did not stop the sleeper");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The others meet their 8 s timeout, not an hour later.
    for id in &ids[1..] {
        let until = started + Duration::from_secs(30);
        let run = loop {
            let run = w.show(id);
            if run["state"] != "working" {
                break run;
            }
            assert!(Instant::now() < until, "a sleeper outlived its timeout: {run}");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(run["state"], "failed", "{run}");
        assert_eq!(run["steps"][0]["error"]["kind"], "timeout", "{run}");
    }

    std::process::Command::new("kill").args(["-TERM", &worker.id().to_string()]).status().unwrap();
    let status = worker.wait().unwrap();
    let printed = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{status}: {printed}");
    assert!(!printed.contains("panicked"), "{printed}");
}
