//! The web view in a real browser: `tests/web/check.mjs` drives Debian's
//! headless Chromium (playwright-core) against a real `weft serve --http`
//! — the runs list updating live, a template started from its form, a
//! wait answered by the form generated from its schema (a wrong answer
//! shown at its field), the DAG turning green step by step, cancel — on
//! loopback and behind a token that never appears in a URL. Screenshots go
//! to `target/web-screenshots/`. Needs `tests/web/setup.sh` (CI runs it).

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
