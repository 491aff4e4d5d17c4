//! `weft serve`: the MCP server, driven by real MCP clients nobody here
//! wrote — the official Python SDK (`mcp` 2.3.0: `ClientSession` speaks
//! 2025-11-25, `mcp.Client(mode="auto")` 2026-07-28) through
//! tests/mcp-clients/weft_mcp_check.py — over stdio and streamable HTTP;
//! plus the HTTP bearer-token row of docs/reliability.md and the store
//! ownership rules, checked from Rust.
//!
//! The Python SDK comes from the venv `tests/mcp-peers/.venv`
//! (`tests/mcp-peers/setup.sh`), or `$WEFT_MCP_PYTHON`. Without it the
//! client tests print `SKIPPED` and pass; the auth and ownership tests
//! need no Python.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Weft, repo_root};

/// Says loudly that a test is skipped (straight to stderr, which the
/// harness does not capture).
fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: serve::{test}: {reason} ***\n");
}

/// A Python with the `mcp` SDK, or `None` after saying why not.
pub(crate) fn python(test: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os("WEFT_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("tests/mcp-peers/.venv/bin/python"));
    if !candidate.exists() {
        skip(test, &format!("no {} (run tests/mcp-peers/setup.sh, or set WEFT_MCP_PYTHON)", candidate.display()));
        return None;
    }
    let ok = Command::new(&candidate)
        .args(["-c", "import mcp, httpx2; from mcp import ClientSession, Client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip(test, &format!("{} cannot import the `mcp` SDK (run tests/mcp-peers/setup.sh)", candidate.display()));
        return None;
    }
    Some(candidate)
}

fn script() -> PathBuf {
    repo_root().join("tests/mcp-clients/weft_mcp_check.py")
}

/// Runs the client script with `args`; asserts it passed and returns what it saw.
pub(crate) fn client(py: &std::path::Path, args: &[&str]) -> Value {
    run_script(py, &script(), args)
}

/// Runs a Python client `script` with `args`; asserts it exited 0 and
/// returns the JSON object it printed last.
pub fn run_script<S: AsRef<std::ffi::OsStr>>(py: &std::path::Path, script: &std::path::Path, args: &[S]) -> Value {
    let out = Command::new(py)
        .arg(script)
        .args(args)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .output()
        .expect("start the Python MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the MCP client failed ({:?})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("the client printed no JSON ({e})\n--- stdout\n{stdout}\n--- stderr\n{stderr}"))
}

/// The stdio client arguments for a `Weft`'s data directory.
/// A weft.toml in `dir` letting clients name the test guests' folder as
/// `code.path` (`[guests] allow_paths`: by default they cannot).
pub(crate) fn allow_test_guests(dir: &std::path::Path) {
    let folder = std::path::Path::new(weft_test_artifacts::HOSTILE).parent().unwrap();
    // Appended: a test may have written its servers there already.
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("weft.toml")).unwrap();
    writeln!(f, "\n[guests]\nallow_paths = [{:?}]", folder.display().to_string()).unwrap();
}

fn stdio_args(w: &Weft, mode: &'static str) -> Vec<String> {
    std::fs::create_dir_all(w.data_dir()).unwrap();
    // The server runs in the data folder (see the client script).
    allow_test_guests(&w.data_dir());
    vec![
        "--mode".into(),
        mode.into(),
        "--stdio".into(),
        env!("CARGO_BIN_EXE_weft").into(),
        "--data-dir".into(),
        w.data_dir().display().to_string(),
        "--cache-dir".into(),
        repo_root().join("target/test-cache").display().to_string(),
        "--hostile".into(),
        weft_test_artifacts::HOSTILE.into(),
    ]
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// What the MCP clients left in the store, checked with the CLI.
fn check_store_after_full(w: &Weft, seen: &Value) {
    let run = w.show(seen["run_id"].as_str().expect("a run id"));
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["output"], json!({"greeting": "Hello Ada!"}), "{run}");
    assert_eq!(run["template"], "greet");
    let canceled = w.show(seen["canceled"].as_str().expect("the canceled run's id"));
    assert_eq!(canceled["state"], "canceled", "{canceled}");
    assert_eq!(canceled["error"]["kind"], "canceled", "{canceled}");
    assert_eq!(seen["run_fuel"], "fuel_exhausted", "run_start's run_fuel was checked: {seen}");
    assert_eq!(seen["oversized"], true, "the oversized input was checked: {seen}");
    assert_eq!(seen["artifacts"], 2, "artifacts were read as resources: {seen}");
    // The template was deleted at the end; the broken one never stored.
    let out = w.run(&["templates", "list", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json(), json!([]));
}

#[test]
fn stdio_with_the_2025_11_25_client_session() {
    let Some(py) = python("stdio_with_the_2025_11_25_client_session") else { return };
    let w = Weft::new();
    let seen = client(&py, &refs(&stdio_args(&w, "legacy")));
    assert_eq!(seen["protocol"], "2025-11-25", "{seen}");
    assert_eq!(seen["server"], "weft", "{seen}");
    assert!(seen["list_changed"].as_u64().unwrap() >= 1, "{seen}");
    assert!(seen["progress"].as_u64().unwrap() >= 1, "{seen}");
    assert_eq!(seen["validate_paths"], json!(["/steps/0/input/data", "/steps/1/code"]), "{seen}");
    check_store_after_full(&w, &seen);
}

#[test]
fn stdio_with_the_2026_07_28_auto_client() {
    let Some(py) = python("stdio_with_the_2026_07_28_auto_client") else { return };
    let w = Weft::new();
    let seen = client(&py, &refs(&stdio_args(&w, "auto")));
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    assert!(seen["list_changed"].as_u64().unwrap() >= 1, "{seen}");
    check_store_after_full(&w, &seen);
}

/// A `weft serve --http ...` child, killed when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    /// `http://HOST:PORT/mcp` as printed.
    pub(crate) url: String,
    /// The rest of its stderr, once it exits.
    rest: Option<std::thread::JoinHandle<String>>,
    /// What it printed before listening.
    head: String,
}

impl Server {
    pub(crate) fn start(w: &Weft, args: &[&str]) -> Server {
        let mut cmd = w.cmd();
        cmd.arg("serve").args(args);
        Server::spawn(cmd)
    }

    /// Starts `cmd` (a `weft serve --http ...` command) and waits until it listens.
    pub(crate) fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("start weft serve");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut head = String::new();
        let url = loop {
            let mut line = String::new();
            if stderr.read_line(&mut line).unwrap() == 0 {
                let _ = child.wait();
                panic!("weft serve exited before listening:\n{head}");
            }
            head.push_str(&line);
            if let Some(at) = line.find("http://") {
                break line[at..].split_whitespace().next().unwrap().to_string();
            }
        };
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            rest
        });
        Server { child, url, rest: Some(rest), head }
    }

    pub(crate) fn port(&self) -> u16 {
        self.url.trim_start_matches("http://").split('/').next().unwrap().rsplit(':').next().unwrap().parse().unwrap()
    }

    /// SIGTERM; returns whether it exited 0 and everything it printed.
    pub(crate) fn stop(mut self) -> (bool, String) {
        Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        let ok = self.child.wait().unwrap().success();
        let rest = self.rest.take().unwrap().join().unwrap();
        (ok, format!("{}{rest}", self.head))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn http_on_loopback_with_both_clients() {
    let Some(py) = python("http_on_loopback_with_both_clients") else { return };
    let w = Weft::new();
    allow_test_guests(w.dir.path());
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    assert!(server.url.starts_with("http://127.0.0.1:") && server.url.ends_with("/mcp"), "{}", server.url);
    let seen = client(&py, &["--mode", "legacy", "--url", &server.url, "--hostile", weft_test_artifacts::HOSTILE]);
    assert_eq!(seen["protocol"], "2025-11-25", "{seen}");
    assert!(seen["list_changed"].as_u64().unwrap() >= 1, "{seen}");
    check_store_after_full(&w, &seen);
    let seen = client(&py, &["--mode", "auto", "--url", &server.url, "--scenario", "smoke"]);
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    assert_eq!(w.show(seen["run_id"].as_str().unwrap())["output"], json!({"greeting": "Hello Bob!"}));
    let (ok, printed) = server.stop();
    assert!(ok, "{printed}");
}

/// The status code of a raw MCP `initialize` POST to `127.0.0.1:port/mcp`.
pub(crate) fn post_initialize(port: u16, authorization: Option<&str>) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw-http", "version": "0"}}})
    .to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no status line: {line:?}"))
}

#[test]
fn http_on_a_non_loopback_address_needs_the_bearer_token() {
    let w = Weft::new();
    let token = "tok-3f9a2c71e";
    let server = Server::start(&w, &["--http", "0.0.0.0:0", "--token", token]);
    let port = server.port();
    // docs/reliability.md, "auth": no token, a wrong token, the right token.
    assert_eq!(post_initialize(port, None), 401);
    assert_eq!(post_initialize(port, Some("Bearer wrong-token")), 401);
    assert_eq!(post_initialize(port, Some(&format!("Basic {token}"))), 401);
    assert_eq!(post_initialize(port, Some(&format!("Bearer {token}"))), 200);
    // A real client gets through with the token.
    if let Some(py) = python("http_on_a_non_loopback_address_needs_the_bearer_token (client part)") {
        let url = format!("http://127.0.0.1:{port}/mcp");
        let seen = client(&py, &["--mode", "legacy", "--url", &url, "--token", token, "--scenario", "smoke"]);
        assert_eq!(w.show(seen["run_id"].as_str().unwrap())["state"], "completed");
    }
    let (ok, printed) = server.stop();
    assert!(ok, "{printed}");
    assert!(printed.contains("bearer token required"), "{printed}");
    assert!(!printed.contains(token), "the token must never be printed:\n{printed}");
}

#[test]
fn http_on_a_non_loopback_address_without_a_token_is_refused() {
    let w = Weft::new();
    let out = w.run(&["serve", "--http", "0.0.0.0:0"]);
    out.expect_code(2);
    assert!(out.stderr.contains("without a token") && out.stderr.contains("WEFT_TOKEN"), "{}", out.stderr);
    // Refused before the store is touched.
    assert!(!w.data_dir().join("weft.db").exists());
    // An empty token is no token.
    let out = w.cmd().args(["serve", "--http", "0.0.0.0:0"]).env("WEFT_TOKEN", "").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_store_owned_by_another_process_is_refused() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let out = w.run(&["serve", "--stdio"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("is owned by") && out.stderr.contains(&format!("pid {}", server.child.id())),
        "{}",
        out.stderr
    );
    let (ok, printed) = server.stop();
    assert!(ok, "{printed}");
}

/// Waits until run `id` completes and returns it.
fn completed(w: &Weft, id: &str) -> Value {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let run = w.show(id);
        if run["state"] == "completed" {
            return run;
        }
        assert!(std::time::Instant::now() < until, "weft serve did not execute the run: {run}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serve_resumes_unfinished_runs_and_executes_runs_other_processes_create() {
    let w = Weft::new();
    let def = json!({"name": "pick", "steps": [
        {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": {"x": {"y": 7}}, "path": "x.y"}}
    ]});
    let file = w.dir.path().join("pick.json");
    std::fs::write(&file, def.to_string()).unwrap();
    let detach = || {
        let out = w.run(&["run", file.to_str().unwrap(), "--detach"]);
        out.expect_code(0);
        out.stdout.trim().to_string()
    };
    // Stored before the server starts: resumed when it takes the store.
    let before = detach();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    assert!(server.head.contains("resuming 1 unfinished run"), "{}", server.head);
    assert_eq!(completed(&w, &before)["output"], json!({"a": 7}));
    // Stored while it runs: picked up by its poll.
    let during = detach();
    assert_eq!(completed(&w, &during)["output"], json!({"a": 7}));
    let (ok, printed) = server.stop();
    assert!(ok, "{printed}");
}

#[test]
fn run_start_runs_tool_steps_on_upstream_servers() {
    let Some(py) = python("run_start_runs_tool_steps_on_upstream_servers") else { return };
    let everything =
        repo_root().join("tests/mcp-peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !everything.exists() {
        skip(
            "run_start_runs_tool_steps_on_upstream_servers",
            "server-everything is not installed (run tests/mcp-peers/setup.sh)",
        );
        return;
    }
    let w = Weft::new();
    std::fs::create_dir_all(w.data_dir()).unwrap();
    // The stdio client starts weft in the data directory: its weft.toml.
    let toml =
        format!("[servers.ev]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n", everything.display().to_string());
    std::fs::write(w.data_dir().join("weft.toml"), toml).unwrap();
    let mut args = stdio_args(&w, "legacy");
    args.extend(["--scenario".to_string(), "tool-steps".to_string()]);
    let seen = client(&py, &refs(&args));
    let run = w.show(seen["run_id"].as_str().unwrap());
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["steps"][0]["name"], "sum");
    assert_eq!(run["steps"][0]["state"], "succeeded", "{run}");
}
