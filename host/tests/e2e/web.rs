//! The web view in a real browser: `tests/web/check.mjs` drives Debian's
//! headless Chromium (playwright-core) against a real `weft serve --http`
//! — the runs list updating live, a template started from its form, a
//! wait answered by the form generated from its schema (a wrong answer
//! shown at its field), the DAG turning green step by step, cancel, retry
//! — on loopback and behind a token that never appears in a URL. On
//! loopback also the operator's tasks at scale (`tests/web/operator.mjs`):
//! search and page through 300 runs, a step's panel, a multi-line answer,
//! a 1,500-item run, a 40-step graph with no edge behind a node, a server
//! that does not answer, and axe-core on every page at 1300 and 390 px.
//! A recording reviewed as it grows and saved from the page
//! (`tests/web/review.mjs`). Screenshots go to `target/web-screenshots/`. Needs `tests/web/setup.sh` (CI runs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::common::Weft;
use crate::serve::Server;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn save(w: &Weft, name: &str, def: serde_json::Value) {
    let file = w.write_def(name, &def);
    w.run(&["templates", "save", file.to_str().unwrap()]).expect_code(0);
}

fn templates(w: &Weft) {
    w.run(&["plugin", "add", weft_test_artifacts::HOSTILE]).expect_code(0);
    let sleep = |name: &str, after: &str| json!({"name": name, "sleep": {"ms": 250}, "after": [after]});
    let pick = |name: &str, after: &str| json!({"name": name, "code": {"plugin": "json-select"}, "input": {"data": "@approve", "path": "by"}, "after": [after]});
    save(
        w,
        "approval",
        json!({"name": "approval",
        "input_schema": {"type": "object", "required": ["order"], "properties": {"order": {"type": "string"}}},
        "steps": [
            {"name": "approve", "wait": {"prompt": "Approve @input.order?", "preview": {"order": "@input.order"}, "schema": {"type": "object",
                "required": ["ok", "by"], "properties": {"ok": {"type": "boolean"}, "by": {"type": "string", "minLength": 2}}}}},
            sleep("pause1", "approve"), pick("record", "pause1"), sleep("pause2", "record"), pick("notify", "pause2"),
            // A status update with data, shown in the event log.
            {"name": "tally", "code": {"plugin": "hostile"}, "input": {"mode": "updates", "n": 1}, "after": ["notify"]}
        ]}),
    );
    save(w, "gate", json!({"name": "gate", "steps": [{"name": "hold", "wait": {"prompt": "go?"}}]}));
    // 1,500 items in one step (operator.mjs reads it in the page).
    save(
        w,
        "fanout",
        json!({"name": "fanout", "input_schema": {"type": "object", "properties": {"items": {"type": "array"}}},
        "steps": [{"name": "each", "for_each": "@input.items", "code": {"plugin": "json-select"},
                   "input": {"data": {"v": "@item"}, "path": "v"}}]}),
    );
    // 40 steps in 8 layers, each reading two of the layer before; some
    // edges with conditions.
    let mut steps = vec![];
    for l in 0..8 {
        for i in 0..5 {
            let mut s = json!({"name": format!("s{l}_{i}"), "sleep": {"ms": 1}});
            if l > 0 {
                let a = json!(format!("s{}_{i}", l - 1));
                let b = if i == 0 && l % 2 == 1 {
                    json!({"step": format!("s{}_{}", l - 1, 2), "when": {"ref": "@input.go", "eq": true}})
                } else {
                    json!(format!("s{}_{}", l - 1, (i + 1) % 5))
                };
                s["after"] = json!([a, b]);
            }
            steps.push(s);
        }
    }
    save(w, "wide", json!({"name": "wide", "steps": steps}));
    // A step that succeeds, then one that fails on a bad input (a retry
    // keeps the first).
    save(
        w,
        "twostep",
        json!({"name": "twostep", "steps": [
            {"name": "first", "code": {"plugin": "json-select"}, "input": {"data": {"a": 1}, "path": "a"}},
            {"name": "second", "for_each": "@input.v", "code": {"plugin": "json-select"},
             "input": {"data": {"v": "@item"}, "path": "v"}, "after": ["first"]}]}),
    );
    // Two branches by a condition on the input (the editor changes it).
    save(
        w,
        "branch",
        json!({"name": "branch", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "steps": [{"name": "big", "when": {"ref": "@input.n", "gte": 10}, "sleep": {"ms": 1}},
                  {"name": "small", "when": {"ref": "@input.n", "lt": 10}, "sleep": {"ms": 1}}]}),
    );
}

fn browse(server: &Server, shots: &str, token: Option<&str>) {
    let node_modules = root().join("tests/web/node_modules/playwright-core");
    assert!(
        node_modules.exists() && Path::new("/usr/bin/chromium").exists(),
        "the browser test needs Chromium and playwright-core: run tests/web/setup.sh (scripts/test.sh does)"
    );
    let base = format!("http://127.0.0.1:{}", server.port());
    let dir = root().join("target/web-screenshots").join(shots);
    let mut cmd = Command::new("node");
    cmd.arg(root().join("tests/web/check.mjs")).arg(&base).arg(&dir);
    if let Some(t) = token {
        cmd.arg(t);
    }
    let out = cmd.output().expect("node runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the browser checks failed (screenshots in {}):\n{text}", dir.display());
    assert!(text.contains("the DAG turned green step by step"), "{text}");
    eprintln!("{text}");
}

#[test]
fn an_operator_starts_watches_answers_and_cancels_runs_in_chromium() {
    let w = Weft::new();
    templates(&w);
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    browse(&server, "loopback", None);
}

#[test]
fn behind_a_token_the_page_asks_for_it_and_never_puts_it_in_a_url() {
    let w = Weft::new();
    templates(&w);
    let server = Server::start(&w, &["--http", "0.0.0.0:0", "--token", "web-s3cret"]);
    browse(&server, "token", Some("web-s3cret"));
}

/// A recording reviewed in the page (`tests/web/review.mjs`): made by the
/// official Python MCP SDK through the real server-everything upstream, a
/// call added while the page is open appears, a proposed ref is refused,
/// and the recording is saved as a template from the page.
#[test]
fn an_operator_reviews_a_recording_as_it_grows_and_saves_it_in_chromium() {
    use std::io::{BufRead, BufReader};
    let w = crate::tools::with_config(&crate::tools::everything_toml("everything"));
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let started = crate::recordings::phase(&server, &["--phase", "start"]);
    let run = started["run_id"].as_str().unwrap().to_string();
    let dir = root().join("target/web-screenshots/review");
    let mut child = Command::new("node")
        .arg(root().join("tests/web/review.mjs"))
        .arg(format!("http://127.0.0.1:{}", server.port()))
        .arg(&dir)
        .arg(&run)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("node runs");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut said = vec![];
    for line in lines.by_ref() {
        let line = line.unwrap();
        said.push(line.clone());
        if line == "waiting for a call" {
            let added = crate::recordings::phase(&server, &["--phase", "add", "--run", &run]);
            assert_eq!(added["steps"], json!(["echo_1", "extra", "echo_2"]), "{added}");
        }
    }
    let status = child.wait().unwrap();
    let text = said.join("\n");
    assert!(status.success(), "the review checks failed (screenshots in {}):\n{text}", dir.display());
    assert!(text.contains("a call made through MCP appears without a reload"), "{text}");
    eprintln!("{text}");
}
