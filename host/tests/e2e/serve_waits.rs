//! `weft serve` and wait steps, driven by real MCP clients: the official
//! Python SDK (`mcp` 2.3.0, tests/mcp-clients/waits_check.py) for
//! run_signal, event_emit, concurrency keys and elicitation on both
//! protocol revisions (2025-11-25: `elicitation/create` mid-call;
//! 2026-07-28: `input_required` results the client retries), and rmcp's
//! client for tasks that turn `input_required`. Also `weft bench w7`'s
//! output line.
//!
//! The Python SDK comes from `tests/mcp-peers/.venv` (or
//! `$WEFT_MCP_PYTHON`); without it the Python tests print `SKIPPED` and
//! pass.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams, Implementation,
    InputRequest, InputRequests, TaskPayload, UpdateTaskParams,
};
use rmcp::service::ClientLifecycleMode;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientServiceExt as _, RoleClient};
use serde_json::{Value, json};

use crate::common::{Weft, args, repo_root};
use crate::serve::run_script;

/// A Python with the `mcp` SDK, or `None` after saying loudly why not.
fn python(test: &str) -> Option<PathBuf> {
    let py = std::env::var_os("WEFT_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("tests/mcp-peers/.venv/bin/python"));
    let ok = py.exists()
        && Command::new(&py)
            .args(["-c", "import mcp; from mcp import ClientSession, Client"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPED: serve_waits::{test}: no Python with the `mcp` SDK at {} (run tests/mcp-peers/setup.sh, or set WEFT_MCP_PYTHON) ***\n",
            py.display()
        );
        return None;
    }
    Some(py)
}

/// Runs waits_check.py against `weft serve --stdio` on `w`'s data directory.
fn check(w: &Weft, py: &std::path::Path, mode: &str, scenario: &str) -> Value {
    std::fs::create_dir_all(w.data_dir()).unwrap();
    let args = [
        "--mode".to_string(),
        mode.into(),
        "--weft".into(),
        env!("CARGO_BIN_EXE_weft").into(),
        "--data-dir".into(),
        w.data_dir().display().to_string(),
        "--cache-dir".into(),
        repo_root().join("target/test-cache").display().to_string(),
        "--scenario".into(),
        scenario.into(),
    ];
    run_script(py, &repo_root().join("tests/mcp-clients/waits_check.py"), &args)
}

/// What the signals scenario left in the store, seen by the CLI.
fn check_store_after_signals(w: &Weft, seen: &Value) {
    let run = w.show(seen["run_id"].as_str().expect("a run id"));
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"], json!({"approved": true, "amount": 5}), "{run}");
    assert_eq!(run["steps"][0]["output"], json!({"approved": true, "note": "fine"}), "{run}");
    assert_eq!(seen["race"], json!({"accepted": 1, "refused": 49}), "{seen}");
    assert_eq!(seen["early"], json!({"approved": true, "reply": "hi"}), "{seen}");
    // The keyed runs ran one after the other.
    let first = w.show(seen["queued"][0].as_str().unwrap());
    let second = w.show(seen["queued"][1].as_str().unwrap());
    let first_done = first["steps"][0]["ended_at"].as_str().expect("the first keyed run's wait ended");
    let second_began = second["steps"][0]["started_at"].as_str().expect("the second keyed run's step started");
    assert!(second_began >= first_done, "the second keyed run started before the first was answered: {first} {second}");
}

#[test]
fn signals_and_events_with_the_2025_11_25_client_session() {
    let Some(py) = python("signals_and_events_with_the_2025_11_25_client_session") else { return };
    let w = Weft::new();
    let seen = check(&w, &py, "legacy", "signals");
    assert_eq!(seen["protocol"], "2025-11-25", "{seen}");
    check_store_after_signals(&w, &seen);
}

#[test]
fn signals_and_events_with_the_2026_07_28_client() {
    let Some(py) = python("signals_and_events_with_the_2026_07_28_client") else { return };
    let w = Weft::new();
    let seen = check(&w, &py, "auto", "signals");
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    check_store_after_signals(&w, &seen);
}

/// 2025-11-25: `elicitation/create` requests in the middle of run_start.
#[test]
fn elicitation_mid_call_with_the_2025_11_25_client_session() {
    let Some(py) = python("elicitation_mid_call_with_the_2025_11_25_client_session") else { return };
    let w = Weft::new();
    let seen = check(&w, &py, "legacy", "elicit");
    assert_eq!(seen["protocol"], "2025-11-25", "{seen}");
    assert_eq!(seen["asked"].as_array().map(Vec::len), Some(2), "{seen}");
    assert_eq!(seen["wf_asked"], 1, "{seen}");
}

/// 2026-07-28: `input_required` results that the SDK answers and retries.
#[test]
fn elicitation_by_input_required_results_with_the_2026_07_28_client() {
    let Some(py) = python("elicitation_by_input_required_results_with_the_2026_07_28_client") else { return };
    let w = Weft::new();
    let seen = check(&w, &py, "auto", "elicit");
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    assert_eq!(seen["asked"].as_array().map(Vec::len), Some(2), "{seen}");
}

/// `weft serve --http 127.0.0.1:0` on `w`'s store, killed when dropped.
struct HttpServer(std::process::Child, String);

impl HttpServer {
    fn start(w: &Weft) -> HttpServer {
        use std::io::BufRead as _;
        let mut child = w
            .cmd()
            .args(["serve", "--http", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start weft serve --http");
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        let url = loop {
            let mut line = String::new();
            if stderr.read_line(&mut line).unwrap() == 0 {
                let _ = child.wait();
                panic!("weft serve exited before listening:\n{seen}");
            }
            seen.push_str(&line);
            if let Some(at) = line.find("http://") {
                break line[at..].split_whitespace().next().unwrap().to_string();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        HttpServer(child, url)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Over streamable HTTP: mid-call elicitation on a 2025-11-25 session, and
/// `input_required` results to a sessionless 2026-07-28 client (each leg
/// of the retry is a request of its own).
#[test]
fn elicitation_over_http_with_both_clients() {
    let Some(py) = python("elicitation_over_http_with_both_clients") else { return };
    let w = Weft::new();
    std::fs::create_dir_all(w.data_dir()).unwrap();
    let server = HttpServer::start(&w);
    let script = repo_root().join("tests/mcp-clients/waits_check.py");
    for (mode, protocol) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let seen = run_script(&py, &script, &["--mode", mode, "--url", &server.1, "--scenario", "elicit"]);
        assert_eq!(seen["protocol"], protocol, "{seen}");
        assert_eq!(seen["asked"].as_array().map(Vec::len), Some(2), "{seen}");
    }
}

// ---- tasks (rmcp's client) ------------------------------------------------

type Client = rmcp::service::RunningService<RoleClient, ClientConfig>;

async fn connect(w: &Weft, elicitation: bool) -> Client {
    std::fs::create_dir_all(w.data_dir()).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(["serve", "--stdio"])
        .env("WEFT_DATA_DIR", w.data_dir())
        .env("WEFT_CACHE_DIR", repo_root().join("target/test-cache"))
        .env_remove("WEFT_CONFIG")
        .current_dir(w.dir.path());
    let (proc, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().unwrap();
    let mut caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    if elicitation {
        caps["elicitation"] = json!({"form": {}});
    }
    let caps: ClientCapabilities = serde_json::from_value(caps).unwrap();
    ClientConfig::new(caps, Implementation::new("waits-test", "1"))
        .serve_with_lifecycle(
            proc,
            ClientLifecycleMode::Auto {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                legacy_version: Some(rmcp::model::ProtocolVersion::V_2025_11_25),
            },
        )
        .await
        .unwrap()
}

async fn call(client: &Client, name: &'static str, a: Value) -> rmcp::model::CallToolResult {
    client.call_tool(CallToolRequestParams::new(name).with_arguments(args(a))).await.unwrap()
}

async fn save_approve(client: &Client) {
    let def = json!({"name": "approve", "steps": [
        {"name": "approve", "wait": {"prompt": "Approve the refund of @input.amount?",
            "schema": {"type": "object", "required": ["approved"], "properties": {"approved": {"type": "boolean"}}}}},
        {"name": "done", "return": {"approved": "@approve.approved", "amount": "@input.amount"}}]});
    let r = call(client, "template_save", json!({"definition": def})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
}

async fn start_task(client: &Client, amount: u32) -> String {
    let params = CallToolRequestParams::new("wf_approve").with_arguments(args(json!({"amount": amount})));
    match client.call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(t) => t.task.task_id,
        other => panic!("a client that declares tasks gets a task: {other:?}"),
    }
}

/// Polls task `id` until `done` says yes about its payload (20 s).
async fn poll(client: &Client, id: &str, what: &str, done: impl Fn(&TaskPayload) -> bool) -> TaskPayload {
    for _ in 0..400 {
        let t = client.peer().get_task(GetTaskParams::new(id.to_string())).await.unwrap().task;
        if done(&t.payload) {
            return t.payload;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id}: {what} did not happen in 20 s");
}

/// The one outstanding question of an `input_required` task: its key and message.
fn question(p: &TaskPayload) -> (String, String) {
    let TaskPayload::InputRequired { input_requests } = p else { panic!("input_required expected: {p:?}") };
    let requests: &InputRequests = input_requests;
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, req) = requests.iter().next().unwrap();
    let InputRequest::Elicitation(e) = req else { panic!("an elicitation expected: {req:?}") };
    let v = serde_json::to_value(&e.params).unwrap();
    assert_eq!(v["requestedSchema"]["properties"]["approved"]["type"], "boolean", "{v}");
    (key.clone(), v["message"].as_str().unwrap().to_string())
}

fn completed(p: &TaskPayload) -> Value {
    match p {
        TaskPayload::Completed { result } => result["structuredContent"].clone(),
        other => panic!("completed expected: {other:?}"),
    }
}

async fn answer(client: &Client, task: &str, key: &str, response: Value) {
    let mut responses = std::collections::BTreeMap::new();
    responses.insert(key.to_string(), response);
    client.peer().update_task(UpdateTaskParams::new(task.to_string(), responses)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_asks_for_input_and_completes_with_the_answer() {
    let w = Weft::new();
    let client = connect(&w, true).await;
    save_approve(&client).await;
    let task = start_task(&client, 6).await;
    let asked = |p: &TaskPayload| matches!(p, TaskPayload::InputRequired { .. });
    let (k1, m1) = question(&poll(&client, &task, "input_required", asked).await);
    assert_eq!(m1, "Approve the refund of 6?");
    // An invalid answer: asked again, with the error.
    answer(&client, &task, &k1, json!({"action": "accept", "content": {"approved": "yes"}})).await;
    let again = |p: &TaskPayload| matches!(p, TaskPayload::InputRequired { input_requests } if !input_requests.contains_key(&k1));
    let (k2, m2) = question(&poll(&client, &task, "a second question", again).await);
    assert!(m2.contains("/approved"), "{m2}");
    answer(&client, &task, &k2, json!({"action": "accept", "content": {"approved": true}})).await;
    let done = poll(&client, &task, "completion", |p| p.status().is_terminal()).await;
    let out = completed(&done);
    assert_eq!(out["state"], "completed", "{out}");
    assert_eq!(out["output"], json!({"approved": true, "amount": 6}), "{out}");
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_of_a_client_without_elicitation_ends_with_the_run_waiting() {
    let w = Weft::new();
    let client = connect(&w, false).await;
    save_approve(&client).await;
    let task = start_task(&client, 2).await;
    let done = poll(&client, &task, "completion", |p| p.status().is_terminal()).await;
    let out = completed(&done);
    assert_eq!(out["state"], "input-required", "{out}");
    assert_eq!(out["waits"][0]["step"], "approve", "{out}");
    // run_signal answers it later.
    let run_id = out["run_id"].as_str().unwrap().to_string();
    let r =
        call(&client, "run_signal", json!({"run_id": run_id, "step": "approve", "data": {"approved": false}})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let _ = client.cancel().await;
}

/// A question answered some other way (run_signal) is moot: the task
/// follows the run to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_answered_by_run_signal_completes() {
    let w = Weft::new();
    let client = connect(&w, true).await;
    save_approve(&client).await;
    let task = start_task(&client, 8).await;
    poll(&client, &task, "input_required", |p| matches!(p, TaskPayload::InputRequired { .. })).await;
    let runs = call(&client, "run_list", json!({"template": "approve"})).await.structured_content.unwrap();
    let run_id = runs["runs"][0]["id"].as_str().unwrap().to_string();
    let r = call(&client, "run_signal", json!({"run_id": run_id, "step": "approve", "data": {"approved": true}})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let done = poll(&client, &task, "completion", |p| p.status().is_terminal()).await;
    assert_eq!(completed(&done)["output"], json!({"approved": true, "amount": 8}));
    let _ = client.cancel().await;
}

// ---- W7 --------------------------------------------------------------------

/// `weft bench w7 --runs 200` prints its one line, every figure positive.
#[test]
fn bench_w7_prints_its_figures() {
    let w = Weft::new();
    let json_file = w.dir.path().join("w7.json");
    let out = w.run(&["bench", "w7", "--runs", "200", "--json", json_file.to_str().unwrap()]);
    out.expect_code(0);
    let line = out.stdout.lines().find(|l| l.starts_with("W7 waiting ")).unwrap_or_else(|| panic!("{}", out.stdout));
    let fields: std::collections::HashMap<&str, &str> =
        line.split_whitespace().filter_map(|f| f.split_once('=')).collect();
    assert_eq!(fields.get("runs"), Some(&"200"), "{line}");
    let figure =
        |key: &str| -> f64 { fields.get(key).unwrap_or_else(|| panic!("no {key} in {line}")).parse().unwrap() };
    for key in ["rss_mb", "baseline_mb", "signal_p50_us", "signal_p95_us"] {
        assert!(figure(key) > 0.0, "{key} is not positive in {line}");
    }
    // RSS minus the baseline, per run: never negative (nothing else is said
    // about 200 runs' share of memory).
    assert!(figure("per_run_kb") >= 0.0, "{line}");
    assert!(figure("signal_p95_us") >= figure("signal_p50_us"), "{line}");
    assert_eq!(fields.get("signals"), Some(&"200"), "{line}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    assert_eq!(json[0]["workload"], "W7", "{json}");
    assert_eq!(json[0]["runs"], 200, "{json}");
}
