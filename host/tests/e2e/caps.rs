//! docs/reliability.md, "oversized": run input, signal and event data, a
//! definition and a step's output (a guest's and a tool's) over their caps
//! are refused with the cap named (exit 2 on the CLI), and nothing is
//! stored. The run-input cap is tested at its default (4 MiB); the others
//! with small caps in weft.toml to stay fast.

use serde_json::{Value, json};

use crate::common::Weft;
use crate::tools::{everything_toml, with_config};

const CAPS: &str = "[limits]\nmax_input_bytes = 1000\nmax_definition_bytes = 8000\nmax_output_bytes = 5000\n";

#[test]
fn a_run_input_over_the_default_cap_is_refused_and_nothing_is_stored() {
    let w = Weft::new();
    let file = w.write_def("echo", &json!({"name": "echo", "steps": [{"name": "a", "return": {"x": "@input.x"}}]}));
    let big = w.dir.path().join("big.json");
    std::fs::write(&big, json!({"x": "y".repeat(5 << 20)}).to_string()).unwrap();
    let out = w.run(&["run", file.to_str().unwrap(), "--input-file", big.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("4194304-byte cap") && out.stderr.contains("max_input_bytes"), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("is {} bytes as JSON", (5 << 20) + 8)), "the size is named: {}", out.stderr);
    assert!(out.stderr.contains("weft.toml"), "how to raise it: {}", out.stderr);
    assert!(w.runs().is_empty(), "nothing stored");
    // Under the cap it runs.
    std::fs::write(&big, json!({"x": "y".repeat(1 << 20)}).to_string()).unwrap();
    let out = w.run(&["run", file.to_str().unwrap(), "--input-file", big.to_str().unwrap()]);
    out.expect_code(0);
}

#[test]
fn signal_event_data_definitions_and_outputs_over_their_caps() {
    let w = with_config(&format!("{CAPS}{}", everything_toml("everything")));
    let big = json!({"d": "z".repeat(2000)}).to_string();

    // A definition over its cap.
    let steps: Vec<Value> = (0..400).map(|i| json!({"name": format!("s{i}"), "return": {"i": i}})).collect();
    let file = w.write_def("huge", &json!({"name": "huge", "steps": steps}));
    let out = w.run(&["run", file.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("8000-byte cap") && out.stderr.contains("max_definition_bytes"), "{}", out.stderr);
    let out = w.run(&["templates", "save", file.to_str().unwrap()]);
    out.expect_code(2);
    assert!(w.runs().is_empty());

    // Signal data over the cap: refused, the run still waits; under it, taken.
    let file = w.write_def(
        "wait",
        &json!({"name": "wait", "steps": [{"name": "w", "wait": {"prompt": "ok?"}}, {"name": "r", "return": "@w"}]}),
    );
    let out = w.run(&["run", file.to_str().unwrap(), "--detach"]);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    w.run(&["worker", "--until-idle"]).expect_code(0);
    let out = w.run(&["signal", &id, "w", "--data", &big]);
    out.expect_code(2);
    assert!(out.stderr.contains("1000-byte cap"), "{}", out.stderr);
    let out = w.run(&["signal", &id, "w", "--data", r#"{"ok": true}"#]);
    out.expect_code(0);
    w.run(&["worker", "--until-idle"]).expect_code(0);
    assert_eq!(w.show(&id)["output"], json!({"ok": true}));

    // Event data over the cap.
    let out = w.run(&["emit", "ev", "--data", &big]);
    out.expect_code(2);
    assert!(out.stderr.contains("1000-byte cap"), "{}", out.stderr);

    // A schedule's input (stored, and the input of every run it fires).
    let file = w.write_def("tick", &json!({"name": "tick", "steps": [{"name": "a", "return": "@input"}]}));
    w.run(&["templates", "save", file.to_str().unwrap()]).expect_code(0);
    let out = w.run(&["schedule", "add", "tick", "--cron", "0 2 * * *", "--input", &big]);
    out.expect_code(2);
    assert!(out.stderr.contains("1000-byte cap") && out.stderr.contains("max_input_bytes"), "{}", out.stderr);
    let out = w.run(&["schedule", "list", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json(), json!([]), "no schedule stored");

    // A guest's output over the cap: output_too_large, not retried.
    let retry = json!({"max_attempts": 3, "initial_delay_ms": 1});
    let file = w.write_def(
        "bigout",
        &json!({"name": "bigout", "steps": [{"name": "g", "code": {"path": weft_test_artifacts::HOSTILE},
            "input": {"mode": "big_output", "n": 1}, "retry": retry}]}),
    );
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(1);
    let step = &out.json()["steps"][0];
    assert_eq!(step["error"]["kind"], "output_too_large", "{}", out.stdout);
    let msg = step["error"]["message"].as_str().unwrap();
    assert!(msg.contains("5000-byte cap") && msg.contains("max_output_bytes"), "{msg}");
    assert_eq!(step["attempts"], 1, "not retried");
    assert!(step["output"].is_null());

    // A tool's output over the cap (a real MCP server's echo of 6,000 characters).
    let file = w.write_def(
        "echo",
        &json!({"name": "echo", "steps": [{"name": "e", "tool": {"server": "everything", "name": "echo"},
            "input": {"message": "m".repeat(6000)}}]}),
    );
    let out = w.run(&["run", file.to_str().unwrap(), "--json"]);
    out.expect_code(1);
    let step = &out.json()["steps"][0];
    assert_eq!(step["error"]["kind"], "output_too_large", "{}", out.stdout);
    assert!(step["error"]["message"].as_str().unwrap().contains("max_output_bytes"), "{}", out.stdout);
}

/// An output nested too deep to be read back (127 levels: serde_json reads
/// 128, and a stored output sits inside another value) or past what a
/// parser takes (100,000) fails its step as `invalid_output`; the run can
/// always be shown, and a worker finishes it.
#[test]
fn a_deeply_nested_output_is_refused_and_the_run_stays_readable() {
    let w = Weft::new();
    for n in [127u64, 100_000] {
        let file = w.write_def(
            "deep",
            &json!({"name": "deep", "steps": [{"name": "d", "code": {"path": weft_test_artifacts::HOSTILE},
                "input": {"mode": "deep", "n": n}}]}),
        );
        let out = w.run(&["run", file.to_str().unwrap(), "--detach"]);
        out.expect_code(0);
        let id = out.stdout.trim().to_string();
        w.run(&["worker", "--until-idle"]).expect_code(0);
        let run = w.show(&id);
        assert_eq!(run["state"], "failed", "{n}: {run}");
        assert_eq!(run["steps"][0]["error"]["kind"], "invalid_output", "{n}: {run}");
    }
    let out = w.run(&["runs", "list", "--json"]);
    out.expect_code(0);
    assert_eq!(out.json().as_array().unwrap().len(), 2);
}

/// A `return` step's value and a run's `output` are built from stored
/// values and stored again: over `max_output_bytes` the run fails
/// `output_too_large` naming the cap, and the value is not stored.
#[test]
fn a_return_or_output_built_over_the_output_cap_fails_the_run() {
    let w = with_config(CAPS);
    let input = json!({"x": "q".repeat(900)}).to_string();
    let six: serde_json::Map<String, Value> = (0..6).map(|i| (format!("k{i}"), json!("@input.x"))).collect();
    for (name, def) in [
        ("ret", json!({"name": "ret", "steps": [{"name": "r", "return": six}]})),
        ("out", json!({"name": "out", "output": six, "steps": [{"name": "r", "return": {"small": true}}]})),
    ] {
        let file = w.write_def(name, &def);
        let out = w.run(&["run", file.to_str().unwrap(), "--input", &input, "--json"]);
        out.expect_code(1);
        let run = out.json();
        assert_eq!(run["state"], "failed", "{name}: {run}");
        assert_eq!(run["error"]["kind"], "output_too_large", "{name}: {run}");
        let msg = run["error"]["message"].as_str().unwrap();
        assert!(msg.contains("5000-byte cap") && msg.contains("max_output_bytes"), "{name}: {msg}");
        assert!(run["output"].is_null(), "{name}: nothing of it is stored: {run}");
        if name == "ret" {
            assert!(run["steps"][0]["output"].is_null(), "{run}");
        }
    }
    // Under the cap the same return completes.
    let file = w.write_def("ret", &json!({"name": "ret", "steps": [{"name": "r", "return": {"a": "@input.x"}}]}));
    let out = w.run(&["run", file.to_str().unwrap(), "--input", &input, "--json"]);
    out.expect_code(0);
    assert_eq!(out.json()["output"]["a"], "q".repeat(900));
}
