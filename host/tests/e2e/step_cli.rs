//! `weft step run` and `weft plugin add|list|inspect` as a user types them:
//! exit codes, the JSON on stdout, clear errors for bad input.

use std::path::Path;

use serde_json::json;

use crate::common::Weft;

fn hostile() -> &'static Path {
    Path::new(weft_test_artifacts::HOSTILE)
}

#[test]
fn a_guest_file_runs_and_prints_its_output() {
    let w = Weft::new();
    let out = w.step_run(hostile(), &json!({"mode": "ok", "echo": "hi"}), &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["echo"], "hi");
    assert_eq!(v["step"], "weft_test_hostile");
}

#[test]
fn a_failing_guest_prints_a_classified_error_and_exits_1() {
    let w = Weft::new();
    let out = w.step_run(hostile(), &json!({"mode": "loop"}), &["--timeout-ms", "200", "--fuel", "100000000000"]);
    out.expect_code(1);
    let v = out.json();
    assert_eq!(v["kind"], "timeout");
    assert_eq!(v["retryable"], true);
    let out = w.step_run(hostile(), &json!({"mode": "loop"}), &["--fuel", "1000000"]);
    out.expect_code(1);
    assert_eq!(out.json()["kind"], "fuel_exhausted");
    let out = w.step_run(hostile(), &json!({"mode": "alloc"}), &["--memory-mb", "16"]);
    out.expect_code(1);
    assert_eq!(out.json()["kind"], "memory_limit");
    let out = w.step_run(hostile(), &json!({"mode": "reject"}), &[]);
    out.expect_code(1);
    assert_eq!(out.json(), json!({"kind": "rejected", "message": "rejected on purpose", "retryable": false}));
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let w = Weft::new();
    let out = w.run(&["step", "run", weft_test_artifacts::HOSTILE, "--input", "{\"mode\": "]);
    out.expect_code(2);
    assert!(out.stderr.contains("not valid JSON") && out.stderr.contains("line 1"), "{}", out.stderr);

    let garbage = w.dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"definitely not wasm").unwrap();
    let out = w.run(&["step", "run", garbage.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("not a WebAssembly module or component"), "{}", out.stderr);

    let truncated = w.dir.path().join("truncated.wasm");
    let bytes = std::fs::read(weft_test_artifacts::HOSTILE).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let out = w.run(&["step", "run", truncated.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("invalid WebAssembly"), "{}", out.stderr);

    let other_world = w.dir.path().join("other.wat");
    std::fs::write(&other_world, "(component (import \"acme:x/y\" (instance)))").unwrap();
    let out = w.run(&["step", "run", other_world.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("does not target the weft:step/step world"), "{}", out.stderr);

    let out = w.run(&["step", "run", "no-such-plugin"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("unknown plugin `no-such-plugin`") && out.stderr.contains("json-select"),
        "{}",
        out.stderr
    );

    let out = w.run(&["step", "run", "./missing.wasm"]);
    out.expect_code(2);
    let out = w.run(&["step", "run", weft_test_artifacts::HOSTILE, "--timeout-ms", "0"]);
    out.expect_code(2);
    let out = w.run(&["step", "frobnicate"]);
    out.expect_code(2);
}

#[test]
fn a_command_guest_gets_its_context_and_its_logs_go_to_stderr() {
    let w = Weft::new();
    let out = w.step_run(Path::new(weft_test_artifacts::HOSTILE_COMMAND), &json!({"mode": "ok", "echo": 5}), &[]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["echo"], 5);
    assert_eq!(v["env"][1], json!(["WEFT_STEP", "hostile-command"]));
    assert!(out.stderr.contains("hello from the command guest"), "{}", out.stderr);
    let out = w.step_run(Path::new(weft_test_artifacts::HOSTILE_COMMAND), &json!({"mode": "exit"}), &[]);
    out.expect_code(1);
    let v = out.json();
    assert_eq!(v["kind"], "guest_error");
    assert!(v["message"].as_str().unwrap().contains("code 7"), "{v}");
}

#[test]
fn plugins_are_added_listed_inspected_and_run_by_name() {
    let w = Weft::new();
    let out = w.run(&["plugin", "add", weft_test_artifacts::HOSTILE]);
    out.expect_code(0);
    let added = out.json();
    assert_eq!(added["name"], "hostile");
    let digest = added["digest"].as_str().unwrap().to_string();
    assert!(w.data_dir().join(format!("plugins/blobs/{digest}.wasm")).is_file());

    let out = w.run(&["plugin", "add", weft_test_artifacts::HOSTILE_COMMAND, "--name", "snoop"]);
    out.expect_code(0);
    let out = w.run(&["plugin", "add", weft_test_artifacts::HOSTILE, "--name", "Bad Name"]);
    out.expect_code(2);
    assert!(out.stderr.contains("not a valid plugin name"), "{}", out.stderr);

    let out = w.run(&["plugin", "list", "--json"]);
    out.expect_code(0);
    let list = out.json();
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    for expected in
        ["hostile", "snoop", "json-select", "text-template", "regex-extract", "json-validate", "csv-to-json"]
    {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    assert!(!names.contains(&"Bad Name"));

    let out = w.run(&["plugin", "inspect", "hostile"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["kind"], "component");
    assert_eq!(v["input_schema"]["required"], json!(["mode"]));
    let out = w.run(&["step", "inspect", "snoop"]);
    out.expect_code(0);
    assert_eq!(out.json()["kind"], "command");

    let out = w.run(&["step", "run", "hostile", "--input", r#"{"mode":"ok"}"#]);
    out.expect_code(0);
    assert_eq!(out.json()["ok"], true);
    let out = w.run(&["step", "run", &format!("sha256:{digest}"), "--input", r#"{"mode":"ok"}"#]);
    out.expect_code(0);
}
