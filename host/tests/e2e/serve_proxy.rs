//! `weft serve` as a proxy, driven by clients nobody here wrote: the MCP
//! Inspector CLI (npm, pinned) over stdio and HTTP, and the official
//! Python SDK (tests/mcp-clients/proxy_check.py) for progress relay,
//! cancellation forwarding, `isError` pass-through and an upstream that
//! cannot start hiding nothing else.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{KillOnDrop, Weft, repo_root};
use crate::tools::{everything_js, peers};

fn config(w: &Weft) -> PathBuf {
    let chaos = peers().join("chaos_server.py");
    let log = w.dir.path().join("chaos-log.jsonl");
    let path = w.dir.path().join("weft.toml");
    std::fs::write(
        &path,
        format!(
            "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n\
             [servers.chaos]\ncommand = \"python3\"\nargs = [{:?}]\nenv = {{ CHAOS_LOG = {:?} }}\n\n\
             [servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
            everything_js(),
            chaos.display().to_string(),
            log.display().to_string()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(w.data_dir()).unwrap();
    path
}

fn inspector(args: &[String]) -> Value {
    let cli = peers().join("node_modules/@modelcontextprotocol/inspector-cli/build/index.js");
    let out = Command::new("node").arg(cli).args(args).stdin(Stdio::null()).output().expect("start the Inspector CLI");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "inspector failed\n--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("inspector printed no JSON ({e}): {stdout}"))
}

fn tool_names(v: &Value) -> Vec<String> {
    v["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_inspector_cli_lists_and_calls_through_the_proxy_over_stdio() {
    let w = Weft::new();
    let cfg = config(&w);
    let target = |method: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = vec![
            env!("CARGO_BIN_EXE_weft").into(),
            "--config".into(),
            cfg.display().to_string(),
            "--data-dir".into(),
            w.data_dir().display().to_string(),
            "serve".into(),
            "--stdio".into(),
        ];
        a.extend(method.iter().map(|s| s.to_string()));
        a
    };
    let list = inspector(&target(&["--method", "tools/list"]));
    let names = tool_names(&list);
    for want in ["run_start", "recording_start", "everything__echo", "chaos__ok"] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    assert!(!names.iter().any(|n| n.starts_with("broken__")), "{names:?}");
    let echo = list["tools"].as_array().unwrap().iter().find(|t| t["name"] == "everything__echo").unwrap();
    assert_eq!(echo["inputSchema"]["properties"]["message"]["type"], "string", "{echo}");
    let call =
        inspector(&target(&["--method", "tools/call", "--tool-name", "everything__echo", "--tool-arg", "message=hi"]));
    assert_eq!(call["content"][0]["text"], "Echo: hi", "{call}");
    let call = inspector(&target(&["--method", "tools/call", "--tool-name", "template_list"]));
    assert_eq!(call["structuredContent"]["templates"], serde_json::json!([]), "{call}");
}

#[test]
fn the_inspector_cli_over_http() {
    let w = Weft::new();
    let cfg = config(&w);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = w
        .cmd()
        .arg("--config")
        .arg(&cfg)
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = KillOnDrop(server);
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(20), "weft serve did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let list = inspector(&[url.clone(), "--method".into(), "tools/list".into()]);
    let call = inspector(&[
        url,
        "--method".into(),
        "tools/call".into(),
        "--tool-name".into(),
        "chaos__ok".into(),
        "--tool-arg".into(),
        "text=over http".into(),
    ]);
    assert!(tool_names(&list).iter().any(|n| n == "everything__get-sum"), "{list}");
    assert_eq!(call["structuredContent"]["text"], "over http", "{call}");
}

#[test]
fn the_proxy_relays_progress_forwards_cancellation_and_isolates_failures() {
    let w = Weft::new();
    let cfg = config(&w);
    let py = std::env::var_os("WEFT_MCP_PYTHON").map(PathBuf::from).unwrap_or_else(|| peers().join(".venv/bin/python"));
    let args = [
        "--weft".to_string(),
        env!("CARGO_BIN_EXE_weft").into(),
        "--config".into(),
        cfg.display().to_string(),
        "--data-dir".into(),
        w.data_dir().display().to_string(),
    ];
    let seen = crate::serve::run_script(&py, &repo_root().join("tests/mcp-clients/proxy_check.py"), &args);
    assert!(seen["progress"].as_array().is_some_and(|p| p.len() >= 2), "{seen}");
    let log = std::fs::read_to_string(w.dir.path().join("chaos-log.jsonl")).unwrap_or_default();
    let msgs: Vec<Value> = log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let slow = msgs
        .iter()
        .find(|m| m["method"] == "tools/call" && m["params"]["name"] == "slow")
        .unwrap_or_else(|| panic!("the slow call reached the chaos server: {log}"));
    let cancelled =
        msgs.iter().any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == slow["id"]);
    assert!(cancelled, "the caller's cancellation reached the upstream for request {}: {log}", slow["id"]);
}
