//! The "upstream chaos" row of docs/reliability.md, through the real `weft`
//! binary: an MCP server (`tests/mcp-peers/chaos_server.py`) that crashes
//! mid-call, hangs, writes garbage, answers malformed results or `isError`.
//! Each is a classified step failure, retried per the step's policy; the
//! engine and the other steps go on; a crashed upstream is restarted for
//! the next call. Also: the idempotency key in `_meta`, `transform`, and an
//! upstream that speaks only MCP 2026-07-28 (FastMCP).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Weft, step};
use crate::tools::{peers, with_config};

fn chaos_toml(w: &Weft) -> String {
    let script = peers().join("chaos_server.py");
    let state = w.dir.path().join("chaos-state.json");
    let log = w.dir.path().join("chaos-log.jsonl");
    format!(
        "[servers.chaos]\ncommand = \"python3\"\nargs = [{:?}]\nenv = {{ CHAOS_STATE = {:?}, CHAOS_LOG = {:?} }}\n",
        script.display().to_string(),
        state.display().to_string(),
        log.display().to_string()
    )
}

fn chaos() -> Weft {
    let w = Weft::new();
    std::fs::write(w.dir.path().join("weft.toml"), chaos_toml(&w)).unwrap();
    w
}

/// What the chaos server received, one JSON value per message.
fn received(w: &Weft) -> Vec<Value> {
    std::fs::read_to_string(w.dir.path().join("chaos-log.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn run_def(w: &Weft, def: &Value) -> (i32, Value) {
    let f = w.dir.path().join("wf.json");
    std::fs::write(&f, def.to_string()).unwrap();
    let out = w.run(&["run", f.to_str().unwrap(), "--json"]);
    let v = out.json();
    (out.code, v)
}

/// The attempt failures recorded in the event log for `step`.
fn failed_attempts(w: &Weft, run: &Value, step: &str) -> Vec<Value> {
    let id = run["id"].as_str().unwrap();
    let out = w.run(&["runs", "events", id, "--json"]);
    out.expect_code(0);
    out.stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["step"] == step && e.to_string().contains("\"kind\":\"transport\""))
        .collect()
}

/// The plug is pulled mid-call: the server exits without answering. The
/// attempt fails with `transport`, the retry restarts the server, the
/// second attempt succeeds; a code step beside it is unaffected, and a
/// later step on the same server uses the restarted connection.
#[test]
fn a_crash_mid_call_is_a_transport_failure_retried_on_a_restarted_server() {
    let w = chaos();
    let def = json!({"name": "crashy", "version": 1, "steps": [
        {"name": "flaky", "tool": {"server": "chaos", "name": "flaky"},
         "input": {"key": "k1", "fail_times": 1, "mode": "crash"},
         "retry": {"max_attempts": 3, "initial_delay_ms": 50, "jitter": false}},
        {"name": "beside", "code": {"plugin": "text-template"}, "input": {"template": "fine", "values": {}}},
        {"name": "after", "tool": {"server": "chaos", "name": "ok"}, "input": {"text": "again @flaky.calls"},
         "after": ["flaky"]}
    ], "output": {"flaky": "@flaky", "after": "@after"}});
    let (code, run) = run_def(&w, &def);
    assert_eq!(code, 0, "{run}");
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"]["flaky"], json!({"key": "k1", "calls": 2}), "{run}");
    assert_eq!(run["output"]["after"], json!({"text": "again 2"}), "{run}");
    assert_eq!(step(&run, "flaky")["attempts"], 2);
    assert_eq!(step(&run, "beside")["state"], "succeeded");
    let fails = failed_attempts(&w, &run, "flaky");
    assert_eq!(fails.len(), 1, "one transport failure in the event log: {fails:?}");
    assert!(fails[0].to_string().contains("closed the connection"), "{}", fails[0]);
    // Two processes served the calls: the crashed one and its replacement.
    let inits = received(&w).iter().filter(|m| m["method"] == "initialize").count();
    assert_eq!(inits, 2, "the server was started again after the crash");
}

/// Without a retry policy, the crash fails the step (and the run) with a
/// classified, retryable `transport` error; nothing else breaks.
#[test]
fn without_retries_a_crash_fails_the_step_with_transport() {
    let w = chaos();
    let def = json!({"name": "crash", "version": 1, "steps": [
        {"name": "boom", "tool": {"server": "chaos", "name": "crash"}}]});
    let (code, run) = run_def(&w, &def);
    assert_eq!(code, 1, "{run}");
    assert_eq!(run["state"], "failed");
    let err = &step(&run, "boom")["error"];
    assert_eq!(err["kind"], "transport", "{err}");
    assert_eq!(err["retryable"], true, "{err}");
}

/// A server that never answers: the step's timeout ends the attempt with
/// `timeout`, and `notifications/cancelled` reaches the server.
#[test]
fn a_hang_is_a_timeout_and_the_server_is_told_to_cancel() {
    let w = chaos();
    let def = json!({"name": "hang", "version": 1, "steps": [
        {"name": "h", "tool": {"server": "chaos", "name": "hang"}, "timeout_ms": 700,
         "retry": {"max_attempts": 2, "initial_delay_ms": 10}}]});
    let t0 = Instant::now();
    let (code, run) = run_def(&w, &def);
    assert_eq!(code, 1, "{run}");
    assert!(t0.elapsed() < Duration::from_secs(10));
    let s = step(&run, "h");
    assert_eq!(s["error"]["kind"], "timeout", "{s}");
    assert_eq!(s["attempts"], 2, "timeouts are retried per policy: {s}");
    let msgs = received(&w);
    let cancels = msgs.iter().filter(|m| m["method"] == "notifications/cancelled").count();
    assert!(cancels >= 1, "cancellation sent upstream: {msgs:?}");
}

/// `isError` results are `tool_error`s carrying the tool's text, retried
/// per policy.
#[test]
fn is_error_is_a_tool_error_and_is_retried() {
    let w = chaos();
    let def = json!({"name": "err", "version": 1, "steps": [
        {"name": "e", "tool": {"server": "chaos", "name": "is_error"}, "input": {"message": "quota exceeded"},
         "retry": {"max_attempts": 2, "initial_delay_ms": 10}, "continue_on_error": true},
        {"name": "f", "tool": {"server": "chaos", "name": "flaky"},
         "input": {"key": "k2", "fail_times": 1, "mode": "is_error"},
         "retry": {"max_attempts": 2, "initial_delay_ms": 10}}]});
    let (code, run) = run_def(&w, &def);
    assert_eq!(code, 0, "`e` continues on error: {run}");
    let e = step(&run, "e");
    assert_eq!(e["error"]["kind"], "tool_error", "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("quota exceeded"), "{e}");
    assert_eq!(e["attempts"], 2, "{e}");
    let f = step(&run, "f");
    assert_eq!(f["state"], "succeeded", "{f}");
    assert_eq!(f["output"]["calls"], 2, "{f}");
}

/// Garbage on the wire: a line that is not JSON is skipped (a call
/// answered after it succeeds; one never answered times out); a result of
/// the wrong shape is a `protocol` error, retried by the policy the step
/// wrote (the default `retry_on` retries every failure a retry can fix);
/// the connection keeps serving throughout.
#[test]
fn garbage_and_malformed_results_are_classified() {
    let w = chaos();
    let def = json!({"name": "garbage", "version": 1, "steps": [
        {"name": "g", "tool": {"server": "chaos", "name": "garbage"}, "input": {"answer": true}},
        {"name": "silent", "tool": {"server": "chaos", "name": "garbage"}, "input": {"answer": false},
         "timeout_ms": 800, "continue_on_error": true, "after": ["g"]},
        {"name": "bad", "tool": {"server": "chaos", "name": "bad_frame"}, "continue_on_error": true,
         "after": [{"step": "silent", "on": "always"}], "retry": {"max_attempts": 3, "initial_delay_ms": 10}},
        {"name": "next", "tool": {"server": "chaos", "name": "ok"}, "input": {"text": "still serving"},
         "after": [{"step": "bad", "on": "always"}]}], "output": "@next"});
    let (code, run) = run_def(&w, &def);
    assert_eq!(code, 0, "{run}");
    assert_eq!(step(&run, "g")["output"], json!({"garbage": "sent"}), "{run}");
    assert_eq!(step(&run, "silent")["error"]["kind"], "timeout", "{run}");
    let bad = step(&run, "bad");
    assert_eq!(bad["error"]["kind"], "protocol", "{bad}");
    assert_eq!(bad["error"]["retryable"], true, "{bad}");
    assert_eq!(bad["attempts"], 3, "protocol errors are in the default retry_on: {bad}");
    assert_eq!(run["output"], json!({"text": "still serving"}), "{run}");
    let inits = received(&w).iter().filter(|m| m["method"] == "initialize").count();
    assert_eq!(inits, 1, "one connection served it all");
}

/// Every attempt's idempotency key is in the request `_meta`.
#[test]
fn the_idempotency_key_travels_in_meta() {
    let w = chaos();
    let def = json!({"name": "meta", "version": 1, "steps": [
        {"name": "m", "tool": {"server": "chaos", "name": "echo_meta"}}], "output": "@m"});
    let (code, run) = run_def(&w, &def);
    assert_eq!(code, 0, "{run}");
    let id = run["id"].as_str().unwrap();
    assert_eq!(run["output"]["dev.weft/idempotency-key"], format!("{id}/m/1"), "{run}");
}

/// `transform` runs a code step on the tool's output: the chaos server's
/// `ok` returns `{"text": ...}`, which is exactly the input of the
/// word-stats example guest.
#[test]
fn transform_runs_a_guest_on_the_tool_output() {
    let w = chaos();
    let guest = PathBuf::from(weft_test_artifacts::EXAMPLE_RUST_GUEST);
    let def = json!({"name": "tr", "version": 1, "steps": [
        {"name": "t", "tool": {"server": "chaos", "name": "ok"}, "input": {"text": "to be or not to be"},
         "transform": {"path": guest.display().to_string()}}], "output": "@t"});
    let (code, run) = run_def(&w, &def);
    assert_eq!(code, 0, "{run}");
    assert_eq!(run["output"]["words"], 6, "{run}");
    assert_eq!(run["output"]["unique_words"], 4, "{run}");
}

/// An upstream that speaks only MCP 2026-07-28 (FastMCP with the
/// initialize handshake refused) works: the client negotiates the new
/// revision.
#[test]
fn a_2026_only_upstream_is_negotiated_automatically() {
    let python = peers().join(".venv/bin/python");
    assert!(python.exists(), "the peers' Python venv is missing: run tests/mcp-peers/setup.sh");
    let toml = format!(
        "[servers.modern]\ncommand = {:?}\nargs = [{:?}]\nenv = {{ FASTMCP_CHECK_FOR_UPDATES = \"off\" }}\n",
        python.display().to_string(),
        peers().join("fastmcp_server.py").display().to_string()
    );
    let w = with_config(&toml);
    let out = w.run(&["tools", "list", "--json"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["servers"][0]["protocol"], "2026-07-28", "{v}");
    let def = json!({"name": "modern", "version": 1, "steps": [
        {"name": "r", "tool": {"server": "modern", "name": "reverse"}, "input": {"text": "weft"}}], "output": "@r"});
    let (code, run) = run_def(&w, &def);
    assert_eq!(code, 0, "{run}");
    assert_eq!(run["output"], json!({"reversed": "tfew"}), "{run}");
}

/// A step without `timeout_ms` gets its server's `timeout_ms` from
/// weft.toml (not the 30 s default).
#[test]
fn a_servers_timeout_applies_when_the_step_sets_none() {
    let w = Weft::new();
    std::fs::write(w.dir.path().join("weft.toml"), format!("{}timeout_ms = 600\n", chaos_toml(&w))).unwrap();
    let def =
        json!({"name": "st", "version": 1, "steps": [{"name": "h", "tool": {"server": "chaos", "name": "hang"}}]});
    let t0 = Instant::now();
    let (code, run) = run_def(&w, &def);
    assert_eq!(code, 1, "{run}");
    assert_eq!(step(&run, "h")["error"]["kind"], "timeout", "{run}");
    assert!(t0.elapsed() < Duration::from_secs(10), "cut at ~600 ms, not 30 s: {:?}", t0.elapsed());
}

/// `--preset STEP=JSON` gives a step its output instead of running it (a
/// step that would hang forever here); later steps see that output.
#[test]
fn a_preset_step_is_not_run_and_feeds_the_next() {
    let w = chaos();
    let def = json!({"name": "mock", "version": 1, "steps": [
        {"name": "a", "tool": {"server": "chaos", "name": "hang"}},
        {"name": "b", "tool": {"server": "chaos", "name": "ok"}, "input": {"text": "got @a.x"}, "after": ["a"]}],
        "output": "@b.text"});
    let f = w.dir.path().join("wf.json");
    std::fs::write(&f, def.to_string()).unwrap();
    let f = f.to_str().unwrap();
    let out = w.run(&["run", f, "--preset", r#"a={"x": 5}"#, "--json"]);
    out.expect_code(0);
    let run = out.json();
    assert_eq!(run["output"], "got 5", "{run}");
    assert_eq!(step(&run, "a")["state"], "succeeded");
    assert!(!received(&w).iter().any(|m| m["params"]["name"] == "hang"), "the preset step was not called");
    let bad = w.run(&["run", f, "--preset", "nope=1"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("/presets/nope") && bad.stderr.contains("no step `nope`"), "{}", bad.stderr);
    let bad = w.run(&["run", f, "--preset", "a={oops"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("--preset a") && bad.stderr.contains("not valid JSON"), "{}", bad.stderr);
    let list = w.run(&["runs", "list", "--json"]);
    assert_eq!(list.json().as_array().unwrap().len(), 1, "refused runs stored nothing");
}
