//! `weft serve` driven by rmcp's own client: the MCP tasks extension
//! (`io.modelcontextprotocol/tasks`) — a client that declares it gets a
//! task for a `wf_<name>` call, polls it to the run's result, and can
//! cancel it, which cancels the run — and a recording that survives a
//! SIGKILL of the server.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig, GetTaskParams,
    Implementation, TaskPayload,
};
use rmcp::service::ClientLifecycleMode;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientServiceExt as _, RoleClient};
use serde_json::json;

use crate::common::{Weft, args, repo_root};
use crate::tools::peers;

type Client = rmcp::service::RunningService<RoleClient, ClientConfig>;

async fn connect(w: &Weft) -> Client {
    let chaos = peers().join("chaos_server.py");
    let cfg = w.dir.path().join("weft.toml");
    std::fs::write(
        &cfg,
        format!("[servers.chaos]\ncommand = \"python3\"\nargs = [{:?}]\n", chaos.display().to_string()),
    )
    .unwrap();
    std::fs::create_dir_all(w.data_dir()).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.arg("--config")
        .arg(&cfg)
        .args(["serve", "--stdio"])
        .env("WEFT_DATA_DIR", w.data_dir())
        .env("WEFT_CACHE_DIR", repo_root().join("target/test-cache"))
        .current_dir(w.dir.path());
    let (proc, _) = TokioChildProcess::builder(cmd).stderr(std::process::Stdio::null()).spawn().unwrap();
    let info = ClientConfig::new(ClientCapabilities::builder().enable_tasks().build(), Implementation::new("t", "1"));
    info.serve_with_lifecycle(
        proc,
        ClientLifecycleMode::Auto {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            legacy_version: Some(rmcp::model::ProtocolVersion::V_2025_11_25),
        },
    )
    .await
    .unwrap()
}

async fn save(client: &Client, ms: u64) {
    let def = json!({"name": "slow", "steps": [
        {"name": "a", "tool": {"server": "chaos", "name": "slow"}, "input": {"ms": ms}},
        {"name": "b", "tool": {"server": "chaos", "name": "ok"}, "input": {"text": "slept @a.slept_ms"}, "after": ["a"]}],
        "output": "@b.text"});
    let r = client
        .call_tool(CallToolRequestParams::new("template_save").with_arguments(args(json!({"definition": def}))))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
}

async fn start_task(client: &Client) -> String {
    match client.call_tool_once(CallToolRequestParams::new("wf_slow").with_arguments(Default::default())).await.unwrap()
    {
        CallToolResponse::Task(t) => t.task.task_id,
        other => panic!("a client that declares tasks gets a task: {other:?}"),
    }
}

async fn until_terminal(client: &Client, id: &str) -> rmcp::model::DetailedTask {
    for _ in 0..400 {
        let t = client.peer().get_task(GetTaskParams::new(id.to_string())).await.unwrap().task;
        if t.status().is_terminal() {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} did not finish in 20 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_call_is_a_task_that_follows_its_run() {
    let w = Weft::new();
    let client = connect(&w).await;
    save(&client, 300).await;
    let id = start_task(&client).await;
    let done = until_terminal(&client, &id).await;
    match done.payload {
        TaskPayload::Completed { result } => {
            let out = &result["structuredContent"];
            assert_eq!(out["state"], "completed", "{result:?}");
            assert_eq!(out["output"], "slept 300", "{result:?}");
        }
        other => panic!("completed expected: {other:?}"),
    }
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canceling_the_task_cancels_the_run() {
    let w = Weft::new();
    let client = connect(&w).await;
    save(&client, 20_000).await;
    let id = start_task(&client).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    client.peer().cancel_task(CancelTaskParams::new(id.clone())).await.unwrap();
    let done = until_terminal(&client, &id).await;
    assert!(matches!(done.payload, TaskPayload::Cancelled), "{:?}", done.payload);
    let r = client
        .call_tool(CallToolRequestParams::new("run_list").with_arguments(args(json!({"template": "slow"}))))
        .await
        .unwrap();
    let runs = r.structured_content.unwrap();
    assert_eq!(runs["runs"][0]["state"], "canceled", "{runs}");
    let _ = client.cancel().await;
}

/// A `weft serve` killed mid-recording loses nothing: the recording is a
/// run in state `recording` holding the steps recorded so far, which the
/// next server lists and a session continues and stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_survives_a_kill_of_the_server() {
    let w = Weft::new();
    let client = connect(&w).await;
    let r = client
        .call_tool(CallToolRequestParams::new("recording_start").with_arguments(args(json!({"name": "interrupted"}))))
        .await
        .unwrap();
    let rec_id = r.structured_content.unwrap()["recording_id"].as_str().unwrap().to_string();
    let r = client
        .call_tool(CallToolRequestParams::new("chaos__ok").with_arguments(args(json!({"text": "kept"}))))
        .await
        .unwrap();
    assert_eq!(r.meta.unwrap().0["dev.weft/step"], "ok_1");
    // SIGKILL the server (the process holding the store's lock).
    let pid = std::fs::read_to_string(w.data_dir().join("weft.db.lock")).unwrap_or_default();
    let pid: i32 = pid.split_whitespace().find_map(|t| t.parse().ok()).expect("the lock file names the owner's pid");
    assert!(std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
    drop(client);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A new server has it open, with its step; a session continues it.
    let client = connect(&w).await;
    let call = |tool: &'static str, a: serde_json::Value| {
        let client = &client;
        async move { client.call_tool(CallToolRequestParams::new(tool).with_arguments(args(a))).await.unwrap() }
    };
    let listed = call("recording_list", json!({})).await.structured_content.unwrap();
    let open = &listed["recordings"][0];
    assert_eq!((open["run_id"].as_str(), open["steps"].clone()), (Some(rec_id.as_str()), json!(["ok_1"])), "{listed}");
    let r = call("recording_open", json!({"run_id": rec_id})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let r = call("recording_stop", json!({})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let r = call("run_get", json!({"run_id": rec_id})).await;
    assert_ne!(r.is_error, Some(true), "the recording became a run: {r:?}");
    let run = r.structured_content.unwrap();
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["steps"][0]["name"], "ok_1", "{run}");
    assert_eq!(run["steps"][0]["output"], json!({"text": "kept"}), "{run}");
    let _ = client.cancel().await;
}
