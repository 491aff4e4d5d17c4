//! The OpenAPI document generates working clients in two languages, from
//! the live `/api/v1/openapi.json`: openapi-python-client (pinned in
//! tests/openapi) generates a Python package that tests/openapi/use_client.py
//! makes real calls with (start and wait, read, list by state, events,
//! retry, a typed error); @hey-api/openapi-ts (pinned in tests/openapi/ts)
//! generates a TypeScript client that `tsc --strict` compiles and Node runs
//! the same calls with.

use std::process::Command;

use serde_json::Value;

use crate::common::{Weft, repo_root};
use crate::serve::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_generates_a_python_client_that_works() {
    let generator = repo_root().join("tests/openapi/.venv/bin/openapi-python-client");
    assert!(generator.exists(), "no {} (run tests/openapi/setup.sh)", generator.display());
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let base = format!("http://127.0.0.1:{}", server.port());
    let doc = reqwest::get(format!("{base}/api/v1/openapi.json")).await.unwrap().text().await.unwrap();
    let dir = w.dir.path().join("gen");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("openapi.json");
    std::fs::write(&spec, doc).unwrap();
    let out = Command::new(&generator)
        .args(["generate", "--path", spec.to_str().unwrap(), "--meta", "none", "--output-path"])
        .arg(dir.join("weft_client"))
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the generator failed: {said}");
    // It warns only that ruff is not on PATH (formatting), never about a schema.
    for line in said.lines().filter(|l| l.contains("Warning") || l.contains("Unable") || l.contains("Cannot")) {
        assert!(line.contains("Warning(s) encountered while generating"), "{said}");
    }
    assert!(!said.contains("Unable to parse") && !said.contains("Cannot parse"), "{said}");
    let python = repo_root().join("tests/openapi/.venv/bin/python");
    let script = repo_root().join("tests/openapi/use_client.py");
    let out = Command::new(python).arg(script).arg(&dir).arg(&base).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the generated client failed:\n{stdout}\n{stderr}");
    let seen: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    assert_eq!(seen["started"]["status"], 201, "{seen}");
    assert_eq!(seen["started"]["state"], "completed", "{seen}");
    assert_eq!(seen["started"]["output"], serde_json::json!({"x": 1}), "{seen}");
    assert_eq!(seen["steps"], serde_json::json!(["a"]), "{seen}");
    assert!(seen["listed"].as_array().unwrap().contains(&seen["run_id"]), "{seen}");
    assert!(seen["events"].as_array().unwrap().contains(&serde_json::json!("run.completed")), "{seen}");
    assert_eq!((seen["retried"]["status"].as_i64(), seen["retried"]["state"].as_str()), (Some(201), Some("completed")));
    assert_eq!(seen["error"]["status"], 400, "{seen}");
    assert_eq!(seen["error"]["typed"], true, "an error reads as the typed ApiError: {seen}");
}

/// And a TypeScript one: @hey-api/openapi-ts (pinned in tests/openapi/ts)
/// generates it from the live document, `tsc --strict` compiles it with
/// tests/openapi/ts/use.ts, and Node makes the same calls with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_generates_a_typescript_client_that_compiles_and_works() {
    let ts = repo_root().join("tests/openapi/ts");
    let bin = ts.join("node_modules/.bin");
    assert!(bin.join("openapi-ts").exists(), "no {} (run tests/openapi/setup.sh)", bin.display());
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let base = format!("http://127.0.0.1:{}", server.port());
    let doc = reqwest::get(format!("{base}/api/v1/openapi.json")).await.unwrap().text().await.unwrap();
    // A folder of its own: the generator reads tsconfig.json (NodeNext:
    // imports with `.js`), tsc compiles `use.ts` with what it generated.
    let dir = w.dir.path().join("ts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("openapi.json"), doc).unwrap();
    for f in ["tsconfig.json", "use.ts", "package.json"] {
        std::fs::copy(ts.join(f), dir.join(f)).unwrap();
    }
    std::os::unix::fs::symlink(ts.join("node_modules"), dir.join("node_modules")).unwrap();
    let run = |program: std::path::PathBuf, args: &[&str]| {
        let out = Command::new(&program).args(args).current_dir(&dir).output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{} {args:?} failed:\n{said}", program.display());
        said
    };
    run(bin.join("openapi-ts"), &["-i", "openapi.json", "-o", "gen", "-s"]);
    run(bin.join("tsc"), &["-p", "."]);
    let said = run("node".into(), &["out/use.js", &base]);
    let seen: Value = serde_json::from_str(said.trim().lines().last().unwrap()).unwrap();
    assert_eq!(seen["started"]["status"], 201, "{seen}");
    assert_eq!(seen["started"]["output"], serde_json::json!({"x": 1}), "{seen}");
    assert_eq!(seen["steps"], serde_json::json!(["a"]), "{seen}");
    assert!(seen["listed"].as_array().unwrap().contains(&seen["run_id"]), "{seen}");
    assert!(seen["events"].as_array().unwrap().contains(&serde_json::json!("run.completed")), "{seen}");
    assert_eq!(seen["retried"]["again"], serde_json::json!(["a"]), "{seen}");
    assert_eq!((seen["error"]["status"].as_i64(), seen["error"]["kind"].as_str()), (Some(400), Some("invalid")));
}
