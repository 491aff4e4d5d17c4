//! Recordings that outlive their MCP session (tests/mcp-clients/
//! recordings_check.py, the official Python SDK, the real server-everything
//! upstream): a session records and ends; the server is killed (SIGKILL)
//! with the recording open; the CLI lists it in state `recording`; after a
//! restart a second session lists it, reopens it (a third is refused while
//! the second holds it), adds a call and saves it; the saved template
//! replays with new input.

use serde_json::{Value, json};

use crate::common::repo_root;
use crate::serve::Server;
use crate::tools::{everything_toml, with_config};

/// What `recordings_check.py` printed for a phase against `server`.
pub(crate) fn phase(server: &Server, args: &[&str]) -> Value {
    let script = repo_root().join("tests/mcp-clients/recordings_check.py");
    let mut all = vec!["--url", server.url.as_str()];
    all.extend_from_slice(args);
    crate::serve::run_script(&crate::serve_recording::python(), &script, &all)
}

#[test]
fn a_recording_outlives_its_session_and_a_kill_and_is_reopened_and_saved() {
    let w = with_config(&everything_toml("everything"));
    let mut server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let started = phase(&server, &["--phase", "start"]);
    let run = started["run_id"].as_str().unwrap().to_string();
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(server);

    let listed = w.runs();
    let open = listed.iter().find(|r| r["id"] == run.as_str()).unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(open["state"], "recording", "{open}");
    let shown = w.show(&run);
    assert_eq!(shown["state"], "recording", "{shown}");
    let filtered = w.run(&["runs", "list", "--status", "recording", "--json"]);
    filtered.expect_code(0);
    assert_eq!(filtered.json().as_array().map(Vec::len), Some(1), "{}", filtered.stdout);

    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    // The web view's graph of an open recording: its steps so far, done.
    let url = format!("http://127.0.0.1:{}/api/v1/runs/{run}/graph", server.port());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let graph: Value = rt.block_on(async { reqwest::get(&url).await.unwrap().json().await.unwrap() });
    let nodes: Vec<(&str, &str)> = graph["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("{graph}"))
        .iter()
        .map(|n| (n["name"].as_str().unwrap(), n["state"].as_str().unwrap()))
        .collect();
    assert_eq!(nodes, [("echo_1", "succeeded"), ("extra", "succeeded")], "{graph}");
    let seen = phase(&server, &["--phase", "resume", "--run", &run]);
    assert_eq!(seen["listed"]["steps"], json!(["echo_1", "extra"]), "{seen}");
    assert_eq!(seen["listed"]["held"], false, "{seen}");
    assert_eq!(seen["saved"]["run_id"], run.as_str(), "saved under the recording's id: {seen}");
    let steps: Vec<&str> =
        seen["saved"]["definition"]["steps"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(steps, ["echo_1", "extra", "echo_2"], "{seen}");
    let replay = &seen["replay"];
    assert_eq!(replay["state"], "completed", "{replay}");
    assert!(replay["output"].to_string().contains("bye now"), "the replay follows the new input: {replay}");
    drop(server);

    let saved = w.show(&run);
    assert_eq!(saved["state"], "completed", "{saved}");
    assert_eq!(saved["steps"].as_array().map(Vec::len), Some(3), "{saved}");
    let events = w.run(&["runs", "events", &run, "--json"]);
    assert!(!events.stdout.contains("run.recording"), "stored again whole: {}", events.stdout);
}
