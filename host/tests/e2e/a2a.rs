//! weft as an A2A server, driven by the official SDKs as clients that
//! know nothing of weft: the Python `a2a-sdk` (tests/a2a/sdk_client.py:
//! cards, send, stream, input-required answered with invalid then valid
//! data, cancel, a dropped stream resumed, tasks by context, push
//! notifications to a receiver, the wrong version) on both stores, and
//! `@a2a-js/sdk` (tests/a2a/js_client.mjs) over JSON-RPC and HTTP+JSON.
//! Then what a client gets wrong, over raw HTTP: each is refused in A2A's
//! terms, naming the field, and starts nothing.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Weft, repo_root};
use crate::serve::Server;

/// `approval` (the example: a wait with a schema) and `greet` (one
/// string field, so a text part is its input) saved in `w`, and weft.toml
/// allowing push notifications to `127.0.0.1:{push_port}/push/`.
fn templates(w: &Weft, push_port: u16) {
    crate::notify::configure(w, &format!("[a2a]\npush_urls = [\"http://127.0.0.1:{push_port}/push/\"]\n"));
    let approval = repo_root().join("examples/workflows/approval.json");
    w.run(&["templates", "save", approval.to_str().unwrap()]).expect_code(0);
    let greet = json!({"name": "greet", "description": "Greets someone by name.",
        "input_schema": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        "steps": [{"name": "hello", "code": {"plugin": "text-template"},
                   "input": {"template": "Hello, {{name}}!", "values": {"name": "@input.name"}}}],
        "output": {"greeting": "@hello.text"}});
    let file = w.write_def("greet", &greet);
    w.run(&["templates", "save", file.to_str().unwrap()]).expect_code(0);
}

/// A port nothing listens on now (for the script's push receiver).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn base(s: &Server) -> String {
    format!("http://127.0.0.1:{}", s.port())
}

on_both_stores! { fn the_python_sdk_discovers_runs_answers_streams_resumes_and_cancels(w) {
    let push = free_port();
    templates(&w, push);
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let script = repo_root().join("tests/a2a/sdk_client.py");
    let seen = crate::serve::run_script(&crate::serve_recording::python(), &script, &[base(&server), push.to_string()]);
    assert_eq!(seen["skills"], json!(["approval", "greet"]), "{seen}");
    assert_eq!(seen["asked"], "Approve the refund of 12.5 for order A-1?");
    let preview = json!({"order": "A-1", "amount": 12.5, "message": "Refund of 12.5 for order A-1 needs your approval"});
    assert_eq!(seen["preview"], preview, "the wait's preview, an artifact of the task: {seen}");
    let invalid = &seen["invalid"]["data"];
    assert!(invalid["problems"].as_str().unwrap().contains("/message/parts/0/data/approved"), "{seen}");
    assert_eq!(seen["output"]["refunded"], "Refunded 12.5 for order A-1, approved by ana");
    // The stream: the task, its status updates, then the answer's stream
    // with the output before `completed`.
    let kinds = seen["stream_kinds"].as_array().unwrap();
    assert_eq!(kinds.first(), Some(&json!("task")));
    assert_eq!(kinds.last(), Some(&json!("statusUpdate")));
    assert!(kinds.contains(&json!("artifactUpdate")), "{seen}");
    assert_eq!(seen["resumed"]["head"].as_array().unwrap().len(), 2, "{seen}");
    assert_eq!(seen["greeted"], json!({"greeting": "Hello, Ada!"}));
    assert_eq!(seen["pushed"], json!(["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"]));
    assert!(seen["push_refused"].as_str().unwrap().contains("not under an allowed push URL"), "{seen}");
    assert_eq!(seen["added_later"], json!(["TASK_STATE_COMPLETED"]), "a configuration added to a running task: {seen}");
    assert!(seen["ended_refused"].as_str().unwrap().contains("has ended"), "{seen}");
    // Each task is a run, seen by every front end: the canceled one too.
    let runs = w.runs();
    assert!(runs.iter().any(|r| r["state"] == "canceled"), "{runs:?}");
    let labeled = runs.iter().filter(|r| r["labels"]["a2a/context"].is_string()).count();
    assert_eq!(labeled, runs.len(), "every task's run has its context label: {runs:?}");
    let (ok, log) = server.stop();
    assert!(ok, "{log}");
}}

#[test]
fn the_javascript_sdk_sends_and_streams_over_both_bindings() {
    let w = Weft::new();
    templates(&w, free_port());
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let peers = crate::tools::peers();
    let out = Command::new("node")
        .arg(repo_root().join("tests/a2a/js_client.mjs"))
        .arg(base(&server))
        .current_dir(&peers)
        .stdin(Stdio::null())
        .output()
        .expect("node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    for binding in ["JSONRPC", "HTTP+JSON"] {
        assert_eq!(seen[binding]["greeting"], "Hello, Grace!", "{seen}");
        assert_eq!(seen[binding]["refunded"], "Refunded 4 for order J-1, approved by js", "{seen}");
    }
}

async fn rpc(http: &reqwest::Client, url: &str, body: Value) -> Value {
    http.post(url).json(&body).send().await.unwrap().json().await.unwrap()
}

/// What a client gets wrong is refused in A2A's terms, naming the field
/// and what to do, and starts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_a2a_errors_that_name_the_field_and_start_nothing() {
    let w = Weft::new();
    templates(&w, free_port());
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let (b, http) = (base(&server), reqwest::Client::new());
    let url = format!("{b}/a2a/approval");
    let send = |parts: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
               "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": parts}}})
    };
    // The input does not match the skill's schema: the field is named.
    let r = rpc(&http, &url, send(json!([{"data": {"order": "A", "amount": -1}}]))).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"][0]["metadata"]["path"], "/message/parts/0/data/amount", "{r}");
    // Not JSON; not JSON-RPC; an unknown method; a field of the wrong type.
    let r: Value = http
        .post(&url)
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    let r = rpc(&http, &url, json!({"id": 2, "method": "SendMessage"})).await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let r = rpc(&http, &url, json!({"jsonrpc": "2.0", "id": 3, "method": "Frobnicate", "params": {}})).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = rpc(
        &http,
        &url,
        json!({"jsonrpc": "2.0", "id": 4, "method": "SendMessage",
        "params": {"message": {"messageId": "m2", "role": "ROLE_BOSS", "parts": []}}}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"][0]["metadata"]["path"], "/message/role", "{r}");
    let r = rpc(&http, &url, json!({"jsonrpc": "2.0", "id": 4, "method": "SendMessage",
        "params": {"message": {"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"data": {"order": "A", "amount": 1}}]}}})).await;
    assert_eq!(r["error"]["data"][0]["metadata"]["path"], "/message/role", "{r}");
    // HTTP+JSON sent to the server's agent (JSON-RPC only) is told so, as HTTP.
    let r = http.post(format!("{b}/a2a/message:send")).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    // A task that does not exist; an agent that does not exist.
    let r = rpc(&http, &url, json!({"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": "r_nope"}})).await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let r = rpc(&http, &format!("{b}/a2a/nosuch"), send(json!([{"data": {}}]))).await;
    assert!(r["error"]["message"].as_str().unwrap().contains("no agent `nosuch`"), "{r}");
    // A template's agent runs its own skill only.
    let mut other = send(json!([{"data": {"name": "x"}}]));
    other["params"]["metadata"] = json!({"skill": "approval"});
    let r = rpc(&http, &format!("{b}/a2a/greet"), other).await;
    assert!(r["error"]["message"].as_str().unwrap().contains("runs skill `greet`, not `approval`"), "{r}");
    // The server's agent needs the skill named.
    let r = rpc(&http, &format!("{b}/a2a"), send(json!([{"data": {"name": "x"}}]))).await;
    assert_eq!(r["error"]["data"][0]["metadata"]["path"], "/metadata/skill", "{r}");
    // Another protocol version.
    let r: Value = http
        .post(&url)
        .header("a2a-version", "0.3")
        .json(&send(json!([{"data": {}}])))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32009, "{r}");
    // HTTP+JSON: the same refusal as google.rpc.Status, with its status.
    let r = http
        .post(format!("{url}/message:send"))
        .json(&json!({"message": {"messageId": "m3", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["details"][0]["reason"], "CONTENT_TYPE_NOT_SUPPORTED", "{body}");
    let r = http.get(format!("{url}/tasks/r_nope")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert!(w.runs().is_empty(), "nothing was started");
    // The card of a template that does not exist is a 404.
    let r = http.get(format!("{b}/a2a/nosuch/.well-known/agent-card.json")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

/// With a token, A2A is behind it like MCP and the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_guards_the_cards_and_the_agents() {
    let w = Weft::new();
    templates(&w, free_port());
    let server = Server::start(&w, &["--http", "127.0.0.1:0", "--token", "s3cret"]);
    let (b, http) = (base(&server), reqwest::Client::new());
    let card = http.get(format!("{b}/.well-known/agent-card.json")).send().await.unwrap();
    assert_eq!(card.status().as_u16(), 401);
    let r = http.post(format!("{b}/a2a/greet")).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let card: Value = http
        .get(format!("{b}/a2a/greet/.well-known/agent-card.json"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["skills"][0]["id"], "greet", "{card}");
    assert_eq!(card["supportedInterfaces"][0]["url"], format!("{b}/a2a/greet"), "{card}");
}

/// A guest's `reject(reason)` ends the task `rejected`, the reason as its
/// status message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guests_reject_ends_the_task_rejected_with_its_reason() {
    let w = Weft::new();
    w.run(&["plugin", "add", weft_test_artifacts::HOSTILE]).expect_code(0);
    let def = w.write_def(
        "refuse",
        &json!({"name": "refuse", "steps": [
        {"name": "judge", "code": {"plugin": "hostile"}, "input": {"mode": "reject"}}]}),
    );
    w.run(&["templates", "save", def.to_str().unwrap()]).expect_code(0);
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let r = rpc(&reqwest::Client::new(), &format!("{}/a2a/refuse", base(&server)), json!({"jsonrpc": "2.0", "id": 1,
        "method": "SendMessage", "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {}}]}}}))
    .await;
    let status = &r["result"]["task"]["status"];
    assert_eq!(status["state"], "TASK_STATE_REJECTED", "{r}");
    assert!(status["message"]["parts"][0]["text"].as_str().unwrap().contains("rejected on purpose"), "{r}");
}
