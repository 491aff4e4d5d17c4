//! A client reads no host file (docs/reliability.md, promise 6): a definition
//! sent over MCP may name plugins and digests, and a `code.path` only under
//! a folder the operator allowed (`[guests] allow_paths`); no file outside
//! is even looked at, and an error never shows a file's content. Guest
//! files are read only when regular and under a size cap, so `/dev/zero`
//! cannot fill the server's memory.

use serde_json::{Value, json};

use crate::common::{Weft, repo_root, rss_kb};
use crate::serve::{Server, python, run_script};

fn run_of(path: &str) -> Value {
    json!(["run_start", {"definition": {"name": "p", "steps": [{"name": "a", "code": {"path": path}, "input": {"mode": "ok"}}]},
                         "wait_ms": 20000}])
}

#[test]
fn a_client_names_files_only_where_the_operator_allowed() {
    let Some(py) = python("a_client_names_files_only_where_the_operator_allowed") else { return };
    let w = Weft::new();
    let allowed = w.dir.path().join("guests");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::copy(weft_test_artifacts::HOSTILE, allowed.join("ok.wasm")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", allowed.join("sneaky.wasm")).unwrap();
    std::fs::write(
        w.dir.path().join("weft.toml"),
        format!("[guests]\nallow_paths = [{:?}, \"/dev\"]\n", allowed.display().to_string()),
    )
    .unwrap();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let before = rss_kb(server.child.id());
    let calls = json!([
        run_of("/etc/shadow"),
        run_of("/etc/passwd"),
        run_of("../../../../../../etc/passwd"),
        run_of(&format!("{}/../../../etc/passwd", allowed.display())),
        run_of(allowed.join("sneaky.wasm").to_str().unwrap()),
        run_of("/dev/zero"),
        run_of(allowed.join("ok.wasm").to_str().unwrap()),
    ]);
    let seen = run_script(
        &py,
        &repo_root().join("tests/mcp-clients/calls.py"),
        &["--url", &server.url, "--calls", &calls.to_string()],
    );
    let results = seen.as_array().unwrap();
    for (k, r) in results[..6].iter().enumerate() {
        let text = r["text"].as_str().unwrap();
        assert_eq!(r["is_error"], true, "call {k} was not refused: {r}");
        assert!(!text.contains("root:") && !text.contains("daemon"), "call {k} shows a file's content: {text}");
    }
    for (k, r) in results[..5].iter().enumerate() {
        let text = r["text"].as_str().unwrap();
        assert!(text.contains("allow_paths") && text.contains("plugin"), "call {k} does not say what to do: {text}");
    }
    assert!(results[5]["text"].as_str().unwrap().contains("not a regular file"), "{}", results[5]);
    assert_eq!(results[6]["is_error"], false, "a guest in an allowed folder runs: {}", results[6]);
    assert_eq!(results[6]["structured"]["state"], "completed", "{}", results[6]);
    let after = rss_kb(server.child.id());
    assert!(after < before + 100_000, "the server grew from {before} to {after} kB");
    let (ok, printed) = server.stop();
    assert!(ok, "{printed}");
}
