//! Labels, a caller's metadata on a run, through every front end: `weft
//! run --label`, `runs list --label`, `runs show`; `POST /runs {labels}`,
//! `GET /runs?label=`; MCP `run_start {labels}`, `run_list {labels}`
//! (tests/mcp-clients/labels_check.py). A step reads them as
//! `@run.labels.KEY`; labels over their caps are refused, nothing stored.

use serde_json::{Value, json};

use crate::common::Weft;
use crate::serve::Server;

/// A run that hands its labels on.
fn echo_labels(w: &Weft) -> std::path::PathBuf {
    let def = json!({"name": "tagged", "steps": [
        {"name": "out", "return": {"origin": "@run.labels.origin", "all": "@run.labels", "none": "@run.labels.nope?"}}]});
    w.write_def("tagged", &def)
}

on_both_stores! { fn labels_from_the_cli_are_kept_listed_and_read_by_refs(w) {
    let file = echo_labels(&w);
    let f = file.to_str().unwrap();
    let out = w.run(&["run", f, "--label", "origin=cron", "--label", "session/id=s-42"]);
    out.expect_code(0);
    assert_eq!(
        out.json(),
        json!({"origin": "cron", "all": {"origin": "cron", "session/id": "s-42"}, "none": null}),
        "refs read the labels"
    );
    w.run(&["run", f, "--label", "origin=slack"]).expect_code(0);
    // A label not given leads nowhere (`?` makes it optional).
    let none = w.run(&["run", f]);
    none.expect_code(1);
    assert!(none.stdout.contains("@run.labels.origin"), "{}", none.stdout);
    let listed = w.run(&["runs", "list", "--label", "origin=cron", "--json"]);
    listed.expect_code(0);
    let runs = listed.json();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["labels"], json!({"origin": "cron", "session/id": "s-42"}));
    let id = runs[0]["id"].as_str().unwrap().to_string();
    assert_eq!(w.show(&id)["labels"]["session/id"], "s-42");
    let human = w.run(&["runs", "show", &id]);
    assert!(human.stdout.contains("labels   origin=cron session/id=s-42"), "{}", human.stdout);
    let both = w.run(&["runs", "list", "--label", "origin=cron", "--label", "session/id=nope", "--json"]);
    assert_eq!(both.json(), json!([]), "every label must match");
    // Refused before anything is stored.
    let bad = w.run(&["run", f, "--label", "a b=c"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("`a b` is not a label key"), "{}", bad.stderr);
    let long = format!("k={}", "v".repeat(300));
    let bad = w.run(&["run", f, "--label", &long]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("300 characters long; at most 256"), "{}", bad.stderr);
    assert_eq!(w.runs().len(), 3, "the refused runs were not stored");
} }

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_over_http() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let api = format!("http://127.0.0.1:{}/api/v1", server.port());
    let http = reqwest::Client::new();
    let def = json!({"name": "tagged", "steps": [{"name": "out", "return": "@run.labels.origin"}]});
    let start = |labels: Value| {
        http.post(format!("{api}/runs")).json(&json!({"definition": def, "labels": labels, "wait_ms": 20000})).send()
    };
    let r = start(json!({"origin": "slack"})).await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let run: Value = r.json().await.unwrap();
    assert_eq!((run["output"].clone(), run["labels"].clone()), (json!("slack"), json!({"origin": "slack"})));
    start(json!({"origin": "email"})).await.unwrap();
    let r = start(json!({"bad key": "x"})).await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["problems"][0]["path"], "/labels/bad key", "{body}");
    let page: Value = http.get(format!("{api}/runs?label=origin:slack")).send().await.unwrap().json().await.unwrap();
    let runs = page["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{page}");
    assert_eq!(runs[0]["labels"]["origin"], "slack");
    let r = http.get(format!("{api}/runs?label=nocolon")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

/// Through MCP with the official Python SDK.
#[test]
fn labels_through_mcp() {
    let seen = crate::serve_recording::play(&Weft::new(), "", "labels_check.py");
    assert_eq!(seen["run"]["output"], json!({"origin": "slack", "session": "s-42"}), "{seen}");
    let listed = seen["listed"]["runs"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{seen}");
    assert_eq!(listed[0]["labels"]["origin"], "slack");
    let bad = &seen["bad"];
    assert_eq!(bad["is_error"], true, "{bad}");
    assert!(bad["text"].as_str().unwrap().contains("labels/bad key"), "{bad}");
}
