//! Recording mode end to end, played by the official Python MCP SDK as an
//! LLM would (tests/mcp-clients/llm_recording.py): through `weft serve`'s
//! proxy it calls server-everything's `echo` and then server-filesystem's
//! `write_file` with the first result as its argument, saves the recording
//! as a template (checking the proposed refs), and replays it with a new
//! input. Then the CLI sees everything the session did: the recording as an
//! ordinary run, the template, its graph, and a replay with `weft run`.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::{Weft, repo_root};
use crate::tools::{everything_js, peers};

/// The Python with the official MCP SDK (tests/mcp-peers/.venv, or
/// `$WEFT_MCP_PYTHON`).
pub(crate) fn python() -> PathBuf {
    let py = std::env::var_os("WEFT_MCP_PYTHON").map(PathBuf::from).unwrap_or_else(|| peers().join(".venv/bin/python"));
    assert!(py.exists(), "no {} (run tests/mcp-peers/setup.sh)", py.display());
    py
}

/// What an agent script (tests/mcp-clients/agent_common.py) needs to start
/// `weft serve --stdio`: the binary, `config`, `w`'s data folder and the
/// artifact cache.
pub(crate) fn agent_args(w: &Weft, config: &std::path::Path) -> Vec<String> {
    vec![
        "--weft".to_string(),
        env!("CARGO_BIN_EXE_weft").into(),
        "--config".into(),
        config.display().to_string(),
        "--data-dir".into(),
        w.data_dir().display().to_string(),
        "--cache-dir".into(),
        repo_root().join("target/test-cache").display().to_string(),
    ]
}

/// What the agent script `tests/mcp-clients/<script>` printed, played
/// against `weft serve --stdio` in `w` with `config` as its weft.toml.
pub(crate) fn play(w: &Weft, config: &str, script: &str) -> serde_json::Value {
    std::fs::create_dir_all(w.data_dir()).unwrap();
    let file = w.dir.path().join("weft.toml");
    std::fs::write(&file, config).unwrap();
    let args = agent_args(w, &file);
    crate::serve::run_script(&python(), &repo_root().join("tests/mcp-clients").join(script), &args)
}

/// A write then a read of the same file, passing no data between them:
/// the saved template keeps the read after the write (and says why), and a
/// replay with a new file name reads what it wrote. Before, the template
/// made them parallel and the replay failed (ENOENT) or read old content.
#[test]
fn a_recorded_write_then_read_keeps_its_order_in_the_replay() {
    let w = Weft::new();
    let (config, out) = upstreams(&w);
    let mut args = agent_args(&w, &config);
    args.extend(["--out-dir".into(), out.display().to_string()]);
    let script = repo_root().join("tests/mcp-clients/llm_write_then_read.py");
    let seen = crate::serve::run_script(&python(), &script, &args);
    let order = seen["order"].as_array().unwrap();
    assert_eq!(order.len(), 1, "{seen}");
    assert_eq!(
        (order[0]["step"].as_str(), order[0]["after"].as_str()),
        (Some("read_text_file_1"), Some("write_file_1"))
    );
    assert!(
        order[0]["why"].as_str().unwrap().contains("read-only")
            || order[0]["why"].as_str().unwrap().contains("reads from")
    );
    assert_eq!(seen["definition"]["steps"][1]["after"], serde_json::json!(["write_file_1"]), "{seen}");
    assert_eq!(seen["replay"]["state"], "completed", "{seen}");
    assert_eq!(seen["replay"]["file"], "second note", "{seen}");
    assert!(seen["replay"]["output"].to_string().contains("second note"), "the read came after the write: {seen}");
}

/// Another template language's placeholder naming a recorded step or the
/// input (`{{echo_1}}`, `${input.x}`) is refused when the call is made —
/// not sent, not recorded, the ref to write named — where it was echoed
/// literally and only the save refused it. One naming nothing weft knows
/// (`{{greeting}}`) is recorded, and the dry run says of it exactly what
/// the save says (they run the same checks).
#[test]
fn a_placeholder_is_refused_at_call_time_and_the_dry_run_agrees_with_the_save() {
    let seen = with_everything("dry_run_check.py");
    let refused = &seen["mustache_ref"];
    assert_eq!(refused["is_error"], true, "{seen}");
    let text = refused["text"].as_str().unwrap();
    assert!(text.contains("not sent") && text.contains("@echo_1") && text.contains("at `/message`"), "{text}");
    let refused = &seen["shell_ref"];
    assert_eq!(refused["is_error"], true, "{seen}");
    assert!(refused["text"].as_str().unwrap().contains("@input.x"), "{seen}");
    assert_eq!((&seen["dry"]["is_error"], &seen["save"]["is_error"]), (&json!(false), &json!(false)), "{seen}");
    let (dry, save) = (&seen["dry"]["structured"], &seen["save"]["structured"]);
    assert_eq!(dry["warnings"], save["warnings"], "the dry run and the save say the same: {seen}");
    assert!(dry["warnings"].to_string().contains("{{greeting}}"), "{dry}");
    // Only the calls that were made are recorded.
    let steps: Vec<&str> =
        save["definition"]["steps"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(steps, ["echo_1", "echo_2"], "{save}");
}

/// An input value inside a longer string follows the new input
/// (tests/mcp-clients/substring_check.py): "hello zoe, welcome" recorded
/// with input name "zoe" is saved as "hello @input.name, welcome", and the
/// replay with "ann" says "hello ann". Before, the replay still said "zoe".
#[test]
fn an_input_value_inside_a_string_follows_the_new_input_in_the_replay() {
    let seen = with_everything("substring_check.py");
    let saved = &seen["saved"];
    let r = &saved["replacements"][0];
    assert_eq!(
        (&r["value"], &r["reference"]),
        (&json!("hello zoe, welcome"), &json!("hello @input.name, welcome")),
        "{saved}"
    );
    assert_eq!(saved["unused_input"], json!([]), "{saved}");
    let out = seen["replay"]["output"].to_string();
    assert!(out.contains("hello ann, welcome") && !out.contains("zoe"), "{}", seen["replay"]);
    let shown = &seen["image_meta"]["dev.weft/output"];
    assert_eq!(shown["content"][1]["artifact"], "get_tiny_image_1-image-1.png", "{seen}");
}

/// What agent script `script` (tests/mcp-clients/) saw against `weft
/// serve --stdio` with server-everything configured.
fn with_everything(script: &str) -> Value {
    let w = Weft::new();
    let (config, _) = upstreams(&w);
    let args = agent_args(&w, &config);
    crate::serve::run_script(&python(), &repo_root().join("tests/mcp-clients").join(script), &args)
}

/// `w`'s weft.toml with server-everything and server-filesystem (serving
/// the folder it returns, created), and the data folder created.
fn upstreams(w: &Weft) -> (PathBuf, PathBuf) {
    let out_dir = w.dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::create_dir_all(w.data_dir()).unwrap();
    let out_dir = out_dir.canonicalize().unwrap();
    let fs_js = peers().join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let config = w.dir.path().join("weft.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n[servers.fs]\ncommand = \"node\"\nargs = [{:?}, {:?}]\n",
            everything_js(),
            fs_js.display().to_string(),
            out_dir.display().to_string()
        ),
    )
    .unwrap();
    (config, out_dir)
}

fn setup(mode: &str) -> (Weft, PathBuf, Value) {
    let w = Weft::new();
    let (config, out_dir) = upstreams(&w);
    let mut args = agent_args(&w, &config);
    args.extend(["--mode".into(), mode.into(), "--out-dir".into(), out_dir.display().to_string()]);
    let seen = crate::serve::run_script(&python(), &repo_root().join("tests/mcp-clients/llm_recording.py"), &args);
    (w, out_dir, seen)
}

#[test]
fn an_llm_records_two_upstreams_saves_a_template_and_replays_it() {
    let (w, out_dir, seen) = setup("legacy");
    assert_eq!(seen["protocol"], "2025-11-25", "{seen}");
    let w_cfg = w.dir.path().join("weft.toml").display().to_string();
    // The recording is an ordinary run.
    let run_id = seen["saved"]["run_id"].as_str().unwrap();
    let out = w.run(&["--config", &w_cfg, "runs", "show", run_id, "--json"]);
    out.expect_code(0);
    let run = out.json();
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["template"], "greet-file", "{run}");
    let names: Vec<&str> = run["steps"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo_1", "write_file_1", "echo_2"], "{run}");
    assert_eq!(run["steps"][0]["output"], "Echo: hello", "{run}");
    assert!(run["steps"].as_array().unwrap().iter().all(|s| s["state"] == "succeeded"));
    // The template keeps the refs, is drawn by `weft graph`, and replays
    // with `weft run` like any other.
    let t = w.run(&["--config", &w_cfg, "templates", "show", "greet-file"]);
    t.expect_code(0);
    let text = t.stdout.clone();
    assert!(text.contains("@input.message") && text.contains("@echo_1"), "{text}");
    let g = w.run(&["--config", &w_cfg, "graph", "greet-file"]);
    g.expect_code(0);
    assert!(g.stdout.contains("echo_1") && g.stdout.contains("write_file_1"), "{}", g.stdout);
    let r = w.run(&["--config", &w_cfg, "run", "greet-file", "--input", r#"{"message": "from the CLI"}"#, "--json"]);
    r.expect_code(0);
    assert_eq!(r.json()["state"], "completed");
    let file = std::fs::read_to_string(out_dir.join("greeting.txt")).unwrap();
    assert_eq!(file, "Echo: from the CLI");
    // The MCP replay is a run too.
    let replay = seen["replay"]["run_id"].as_str().unwrap();
    w.run(&["--config", &w_cfg, "runs", "show", replay]).expect_code(0);
}

#[test]
fn the_2026_07_28_client_records_too() {
    let (_w, _out, seen) = setup("auto");
    assert_eq!(seen["saved"]["version"], 1, "{seen}");
    assert!(seen["protocol"].as_str().is_some(), "{seen}");
}
