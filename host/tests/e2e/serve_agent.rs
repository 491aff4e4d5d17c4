//! An LLM agent that knows weft only through MCP, played by a script on the
//! official Python SDK (tests/mcp-clients/llm_agent.py): it learns the
//! format from `tools/list`, the instructions and the guide resource,
//! builds, validates, saves and runs a workflow, makes every mistake agents
//! were seen to make (another template language's placeholders, misspelt
//! tool, server, plugin, template and step names, a tool written as
//! `server__tool`, a `when` written as a string, a literal input that
//! breaks the tool's schema, a ref to a field the output does not have)
//! and checks the answer, records a session with two independent
//! calls (the saved DAG keeps them parallel), replays it with new input
//! (new output), uses `step_preset`, `step_code`, `recording_remove_step`
//! and `run_start.presets`, diffs the replay against its recording, and
//! checks that a recording whose literals are coincidences says so. Then
//! the CLI and the HTTP API see the same diff and the same validation.

use serde_json::Value;

use crate::common::{Weft, repo_root};
use crate::serve_recording::{agent_args, python};
use crate::tools::everything_js;

/// `tools/list` of `weft serve` with server-everything configured, before
/// the guide and the schema resource (measured on commit 2032c4b with
/// `llm_agent.py --measure-only`): 72,778 bytes.
const TOOLS_LIST_BYTES_BEFORE: usize = 72_778;

#[test]
fn an_agent_learns_weft_from_its_tools_and_records_replays_and_diffs() {
    let w = Weft::new();
    std::fs::create_dir_all(w.data_dir()).unwrap();
    let config = w.dir.path().join("weft.toml");
    // `gone` cannot be started: its tool steps are saved with a warning.
    let servers = format!(
        "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n[servers.gone]\ncommand = \"/nonexistent/mcp-server\"\n",
        everything_js()
    );
    std::fs::write(&config, servers).unwrap();
    let args = agent_args(&w, &config);
    let seen = crate::serve::run_script(&python(), &repo_root().join("tests/mcp-clients/llm_agent.py"), &args);
    let bytes = seen["tools_list_bytes"].as_u64().unwrap() as usize;
    eprintln!("tools/list: {bytes} bytes (before: {TOOLS_LIST_BYTES_BEFORE})");
    // The definition's schema is a resource now, no longer inlined three
    // times: with three more tools, under 70% of what it was.
    assert!(bytes * 10 < TOOLS_LIST_BYTES_BEFORE * 7, "tools/list stays lean: {bytes} bytes");
    // weft's own tools: at most 30 KB (output schemas brief, the full ones
    // resources weft://schema/tools/<tool>); 47,481 bytes before.
    let own = seen["own_tools_bytes"].as_u64().unwrap();
    eprintln!("weft's own tools: {own} bytes");
    assert!(own <= 30_000, "weft's own tools stay under 30 KB: {own} bytes");

    // The CLI shows the same diff of the replay against its recording.
    let cfg = config.display().to_string();
    let replay = seen["recording"]["replay"].as_str().unwrap();
    let out = w.run(&["--config", &cfg, "runs", "diff", replay, "--json"]);
    out.expect_code(0);
    let diff = out.json();
    assert_eq!(diff["with"], seen["recording"]["saved"], "{diff}");
    assert_eq!(diff["first_divergence"]["step"], "get_sum_1", "{diff}");
    let text = w.run(&["--config", &cfg, "runs", "diff", replay]);
    text.expect_code(0);
    assert!(text.stdout.contains("get_sum_1") && text.stdout.contains("first divergence"), "{}", text.stdout);
    assert!(text.stdout.contains("/a: 1  ≠  15"), "{}", text.stdout);
    // Each attempt's resolved input is in `runs show`.
    let show = w.run(&["--config", &cfg, "runs", "show", replay]);
    show.expect_code(0);
    assert!(show.stdout.contains(r#"input:  {"a":1,"b":2}"#), "{}", show.stdout);
    let shown: Value = w.run(&["--config", &cfg, "runs", "show", replay, "--json"]).json();
    let sum = shown["steps"].as_array().unwrap().iter().find(|s| s["name"] == "get_sum_1").unwrap();
    assert_eq!(sum["input"], serde_json::json!({"a": 1, "b": 2}), "{sum}");
}
