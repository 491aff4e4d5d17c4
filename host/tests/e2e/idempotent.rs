//! Idempotent starts through every front end: `weft run
//! --idempotency-key` (the key's run followed again; other input exits 2
//! naming it), `POST /api/v1/runs` with `Idempotency-Key` (201, then 200
//! `Idempotent-Replayed`, 409 naming the run; a burst of 20 concurrent
//! starts of one key makes one run), and MCP `run_start {idempotency_key}`
//! and a `wf_` tool with the key in `_meta` (tests/mcp-clients/idempotent_check.py).

use serde_json::{Value, json};

use crate::common::Weft;
use crate::serve::Server;

on_both_stores! { fn the_cli_starts_one_run_per_key(w) {
    let def = w.write_def("g", &json!({"name": "g", "steps": [{"name": "out", "return": "hi @input.who"}]}));
    let f = def.to_str().unwrap();
    let first = w.run(&["run", f, "--input", r#"{"who": "ada"}"#, "--idempotency-key", "k-1"]);
    first.expect_code(0);
    let again = w.run(&["run", f, "--input", r#"{"who":"ada"}"#, "--idempotency-key", "k-1"]);
    again.expect_code(0);
    assert_eq!(again.stdout, first.stdout, "the same run's output");
    assert!(again.stderr.contains("started run") && again.stderr.contains("no new run"), "{}", again.stderr);
    let runs = w.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let id = runs[0]["id"].as_str().unwrap();
    let other = w.run(&["run", f, "--input", r#"{"who": "bob"}"#, "--idempotency-key", "k-1"]);
    other.expect_code(2);
    assert!(other.stderr.contains(id) && other.stderr.contains("another request"), "{}", other.stderr);
    // A new key is a new run; so is no key.
    w.run(&["run", f, "--input", r#"{"who": "ada"}"#, "--idempotency-key", "k-2"]).expect_code(0);
    w.run(&["run", f, "--input", r#"{"who": "ada"}"#]).expect_code(0);
    assert_eq!(w.runs().len(), 3);
}}

async fn post(http: &reqwest::Client, url: &str, key: &str, body: &Value) -> (u16, Option<String>, Value) {
    let r = http.post(url).header("idempotency-key", key).json(body).send().await.unwrap();
    let status = r.status().as_u16();
    let replayed = r.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap().to_string());
    (status, replayed, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_starts_one_run_per_key_even_in_a_burst() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let (url, http) = (format!("http://127.0.0.1:{}/api/v1/runs", server.port()), reqwest::Client::new());
    let def = json!({"name": "g", "steps": [{"name": "out", "return": "hi @input.who"}]});
    let body = json!({"definition": def, "input": {"who": "ada"}, "wait_ms": 10000});
    let (st, replayed, first) = post(&http, &url, "order-1", &body).await;
    assert_eq!((st, replayed), (201, None), "{first}");
    // Keys in another order: the same request.
    let same = json!({"wait_ms": 10000, "input": {"who": "ada"}, "definition": def});
    let (st, replayed, again) = post(&http, &url, "order-1", &same).await;
    assert_eq!((st, replayed.as_deref()), (200, Some("true")), "{again}");
    assert_eq!(
        (&again["id"], &again["state"], &again["output"]),
        (&first["id"], &json!("completed"), &json!("hi ada"))
    );
    let (st, _, conflict) = post(&http, &url, "order-1", &json!({"definition": def, "input": {"who": "bob"}})).await;
    assert_eq!(st, 409, "{conflict}");
    let said = conflict["message"].as_str().unwrap();
    assert!(said.contains(first["id"].as_str().unwrap()) && said.contains("(its input differ)"), "{conflict}");
    let (st, _, bad) = post(&http, &url, "", &body).await;
    assert_eq!(st, 400, "{bad}");

    // 20 at once with one key: one run, every answer names it.
    let burst = json!({"definition": def, "input": {"who": "burst"}});
    let answers = futures::future::join_all((0..20).map(|_| post(&http, &url, "burst-1", &burst))).await;
    let ids: std::collections::BTreeSet<String> =
        answers.iter().map(|(_, _, v)| v["id"].as_str().unwrap_or_else(|| panic!("{v}")).to_string()).collect();
    assert_eq!(ids.len(), 1, "{answers:?}");
    assert_eq!(answers.iter().filter(|(st, _, _)| *st == 201).count(), 1, "one created, the rest replayed");
    let listed: Value = http.get(format!("{url}?limit=100")).send().await.unwrap().json().await.unwrap();
    let burst_runs =
        listed["runs"].as_array().unwrap().iter().filter(|r| ids.contains(r["id"].as_str().unwrap())).count();
    assert_eq!((listed["runs"].as_array().unwrap().len(), burst_runs), (2, 1), "{listed}");
}

#[test]
fn mcp_starts_one_run_per_key_from_arguments_and_meta() {
    let seen = crate::serve_recording::play(&Weft::new(), "", "idempotent_check.py");
    let (first, again) = (&seen["first"], &seen["again"]);
    assert_eq!(first["run_id"], again["run_id"], "{seen}");
    assert_eq!(again["output"], "hi ada", "{seen}");
    assert!(again["note"].as_str().unwrap().contains("started this run before"), "{seen}");
    let other = &seen["other"];
    assert_eq!(other["is_error"], true, "{seen}");
    assert!(other["text"].as_str().unwrap().contains(first["run_id"].as_str().unwrap()), "{seen}");
    let wf = seen["wf"].as_array().unwrap();
    assert!(wf.iter().all(|c| c["is_error"] == false), "{seen}");
    let greets = seen["runs"].as_array().unwrap().iter().filter(|r| r["template"] == "greet").count();
    assert_eq!(greets, 2, "run_start's run and ONE wf_greet run: {seen}");
    let again = &seen["wf_then_run_start"];
    assert_eq!(again["is_error"], false, "the wf_ call and run_start {{template}} are one request: {seen}");
    assert!(again["structured"]["note"].as_str().unwrap().contains("started this run before"), "{seen}");
    let bad = &seen["bad_notify"];
    assert_eq!(bad["is_error"], true, "{seen}");
    let text = bad["text"].as_str().unwrap();
    assert!(text.contains("notify/0/webhook") && !text.contains("definition/"), "the argument's own path: {seen}");
}
