//! Retry from failure through the CLI (`weft runs retry`), on both stores:
//! a failed run retried keeps the outputs of the steps that succeeded
//! (preset, not run again) and runs the failed and skipped ones; with new
//! input only the steps whose inputs change run again; `--from` runs a
//! step and what follows it again; the retry is linked to its run; a run
//! that has not ended is not retried.

use serde_json::{Value, json};

use crate::common::Weft;

/// `a` reads `@input.x`, `b` fails unless `@input.mode` is `ok`, `c`
/// follows `b`, `d` stands alone (`b` waits for it: `b`'s failure never
/// cancels it half-way).
fn flaky(w: &Weft) -> std::path::PathBuf {
    w.run(&["plugin", "add", weft_test_artifacts::HOSTILE]).expect_code(0);
    w.write_def(
        "flaky",
        &json!({"name": "flaky", "steps": [
            {"name": "a", "code": {"plugin": "text-template"}, "input": {"template": "A {{x}}", "values": {"x": "@input.x"}}},
            {"name": "b", "after": ["d"], "code": {"plugin": "hostile"}, "input": {"mode": "@input.mode", "echo": "@a.text"}},
            {"name": "c", "code": {"plugin": "text-template"}, "input": {"template": "C {{e}}", "values": {"e": "@b.echo"}}},
            {"name": "d", "code": {"plugin": "text-template"}, "input": {"template": "D", "values": {}}}
        ], "output": {"c": "@c.text", "d": "@d.text"}}),
    )
}

/// How each step of run `id` got its output: `preset` (kept) or `run`.
fn how(w: &Weft, id: &str) -> Vec<(String, String)> {
    let out = w.run(&["runs", "events", id, "--json"]);
    out.expect_code(0);
    let events: Vec<Value> = out.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut how: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["kind"] == "step.running")
        .map(|e| {
            let step = e["step"].as_str().unwrap().to_string();
            (step, if e["data"]["how"] == "preset" { "preset" } else { "run" }.to_string())
        })
        .collect();
    how.sort();
    how.dedup();
    how
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

on_both_stores! { fn a_failed_run_retried_keeps_what_succeeded_and_runs_the_rest(w) {
    let def = flaky(&w);
    let out = w.run(&["run", def.to_str().unwrap(), "--input", r#"{"x": "1", "mode": "invalid_json"}"#, "--json"]);
    let first = out.json();
    assert_eq!(first["state"], "failed", "{first}");
    let id = first["id"].as_str().unwrap().to_string();

    // Again, with input that lets `b` succeed: `a` and `d` read nothing
    // that changed, so they are kept; `b` and `c` run.
    let out = w.run(&["runs", "retry", &id, "--input", r#"{"x": "1", "mode": "ok"}"#, "--json"]);
    out.expect_code(0);
    assert!(out.stderr.contains("keeps a, d; runs b, c"), "{}", out.stderr);
    let retry = out.json();
    assert_eq!(retry["state"], "completed", "{retry}");
    assert_eq!(retry["output"], json!({"c": "C A 1", "d": "D"}), "{retry}");
    assert_eq!(retry["labels"]["weft/retry-of"], id.as_str(), "linked to the run it retries: {retry}");
    let again = retry["id"].as_str().unwrap();
    assert_eq!(how(&w, again), pairs(&[("a", "preset"), ("b", "run"), ("c", "run"), ("d", "preset")]));

    // From a step: it and what follows it run again, the rest is kept.
    let out = w.run(&["runs", "retry", again, "--from", "a", "--json"]);
    out.expect_code(0);
    let from = out.json();
    assert_eq!(from["state"], "completed", "{from}");
    assert_eq!(how(&w, from["id"].as_str().unwrap()), pairs(&[("a", "run"), ("b", "run"), ("c", "run"), ("d", "preset")]));

    // New input that reaches `a`: `a` and everything reading it run again.
    let out = w.run(&["runs", "retry", again, "--input", r#"{"x": "2", "mode": "ok"}"#, "--json"]);
    let changed = out.json();
    assert_eq!(changed["output"]["c"], "C A 2", "{changed}");
    assert_eq!(how(&w, changed["id"].as_str().unwrap()), pairs(&[("a", "run"), ("b", "run"), ("c", "run"), ("d", "preset")]));

    // Refusals change nothing.
    let before = w.runs().len();
    let out = w.run(&["runs", "retry", &id, "--from", "nope"]);
    out.expect_code(2);
    assert!(out.stderr.contains("no step `nope`") && out.stderr.contains("a, b, c, d"), "{}", out.stderr);
    assert_eq!(w.runs().len(), before);
}}

#[test]
fn a_run_that_has_not_ended_is_not_retried() {
    let w = Weft::new();
    let def = w.write_def("gate", &json!({"name": "gate", "steps": [{"name": "hold", "wait": {"prompt": "go?"}}]}));
    w.run(&["run", def.to_str().unwrap()]).expect_code(3);
    let id = w.runs()[0]["id"].as_str().unwrap().to_string();
    let out = w.run(&["runs", "retry", &id]);
    out.expect_code(2);
    assert!(out.stderr.contains("only an ended run is retried"), "{}", out.stderr);
}

/// MCP's `run_retry` (the official Python SDK as the client).
#[test]
fn an_mcp_client_retries_a_failed_run_with_new_input() {
    let w = Weft::new();
    let seen = crate::serve_recording::play(&w, "", "retry_check.py");
    let retry = &seen["retry"];
    assert_eq!(retry["state"], "completed", "{seen}");
    assert_eq!(retry["output"], json!({"a": "A 1", "b": 7}), "{seen}");
    assert!(retry["note"].as_str().unwrap().contains("keeps a; runs b, c"), "{seen}");
    assert!(seen["labels"]["weft/retry-of"].as_str().unwrap().starts_with("r_"), "{seen}");
    assert_eq!(seen["bad"]["is_error"], true, "{seen}");
    assert!(seen["bad"]["text"].as_str().unwrap().contains("no step `nope`"), "{seen}");
}

/// `POST /api/v1/runs/{id}/retry`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_retries_an_ended_run_and_refuses_one_that_runs() {
    let w = Weft::new();
    let server = crate::serve::Server::start(&w, &["--http", "127.0.0.1:0"]);
    let api = format!("http://127.0.0.1:{}/api/v1", server.port());
    let http = reqwest::Client::new();
    let post = |url: String, body: Value| {
        let req = http.post(url).json(&body).send();
        async move {
            let r = req.await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let def = json!({"name": "flaky", "steps": [
        {"name": "a", "code": {"plugin": "text-template"}, "input": {"template": "A {{x}}", "values": {"x": "@input.x"}}},
        {"name": "b", "after": ["a"], "code": {"plugin": "json-select"}, "input": {"data": "@input.data", "path": "v"}}]});
    let (st, first) =
        post(format!("{api}/runs"), json!({"definition": def, "input": {"x": "1", "data": 5}, "wait_ms": 20000})).await;
    assert_eq!((st, first["state"].as_str()), (201, Some("failed")), "{first}");
    let id = first["id"].as_str().unwrap();
    let (st, retry) =
        post(format!("{api}/runs/{id}/retry"), json!({"input": {"x": "1", "data": {"v": 2}}, "wait_ms": 20000})).await;
    assert_eq!(st, 201, "{retry}");
    assert_eq!((retry["kept"].clone(), retry["again"].clone()), (json!(["a"]), json!(["b"])), "{retry}");
    assert_eq!(retry["run"]["state"], "completed", "{retry}");
    assert_eq!(retry["run"]["labels"]["weft/retry-of"], id, "{retry}");
    let (st, bad) = post(format!("{api}/runs/{id}/retry"), json!({"from": "nope"})).await;
    assert_eq!((st, bad["path"].as_str()), (400, Some("/from")), "{bad}");
    // A run still waiting is not retried.
    let gate = json!({"name": "gate", "steps": [{"name": "hold", "wait": {"prompt": "go?"}}]});
    let (_, waiting) = post(format!("{api}/runs"), json!({"definition": gate, "wait_ms": 20000})).await;
    let (st, refused) = post(format!("{api}/runs/{}/retry", waiting["id"].as_str().unwrap()), json!({})).await;
    assert_eq!(st, 409, "{refused}");
}
