//! Tool steps through the real `weft` binary against real MCP servers
//! nobody here wrote (`@modelcontextprotocol/server-everything`, pinned in
//! `tests/mcp-peers` and installed by its `setup.sh`): the example
//! workflow mixing tool and code steps, `weft tools list`, validation
//! against configured and live servers, configuration errors, step
//! timeouts that cut a long tool call, HTTP upstreams and progress events.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Weft, repo_root};

/// `tests/mcp-peers`, asserting its packages are installed.
pub fn peers() -> PathBuf {
    let d = repo_root().join("tests/mcp-peers");
    assert!(
        d.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js").exists(),
        "the MCP test peers are not installed: run tests/mcp-peers/setup.sh (scripts/setup.sh does)"
    );
    d
}

pub fn everything_js() -> String {
    peers().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js").display().to_string()
}

/// A `weft` whose weft.toml holds `servers` (TOML text).
pub fn with_config(servers: &str) -> Weft {
    let w = Weft::new();
    std::fs::write(w.dir.path().join("weft.toml"), servers).unwrap();
    w
}

pub fn everything_toml(name: &str) -> String {
    format!("[servers.{name}]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n", everything_js())
}

fn write(w: &Weft, name: &str, v: &Value) -> String {
    let p = w.dir.path().join(name);
    std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
    p.display().to_string()
}

/// The example in examples/tools: two tool steps feed a third and a code
/// step renders the report; every step succeeded once.
#[test]
fn the_tools_example_mixes_tool_and_code_steps() {
    peers();
    let w = Weft::new();
    let ex = repo_root().join("examples/tools");
    let cfg = ex.join("weft.toml").display().to_string();
    let wf = ex.join("sum-and-report.json").display().to_string();
    let input = json!({"a": 20, "b": 22, "city": "Chicago"}).to_string();
    let out = w.run(&["--config", &cfg, "run", &wf, "--input", &input, "--json"]);
    out.expect_code(0);
    let run = out.json();
    assert_eq!(run["state"], "completed", "{run}");
    let text = run["output"].as_str().unwrap();
    assert!(text.starts_with("Echo: The sum of 20 and 22 is 42."), "{text}");
    assert!(text.contains("Temperature in Chicago:"), "{text}");
    for s in run["steps"].as_array().unwrap() {
        assert_eq!(s["state"], "succeeded", "{s}");
        assert_eq!(s["attempts"], 1, "{s}");
    }
    let weather = run["steps"].as_array().unwrap().iter().find(|s| s["name"] == "weather").unwrap();
    assert!(weather["output"]["temperature"].is_number(), "structuredContent is the output: {weather}");
    // Another city, same definition: the output follows the input.
    let input = json!({"a": 1, "b": 2, "city": "New York"}).to_string();
    let out = w.run(&["--config", &cfg, "run", &wf, "--input", &input]);
    out.expect_code(0);
    let text: String = serde_json::from_str(out.stdout.trim()).unwrap();
    assert!(text.contains("sum of 1 and 2 is 3") && text.contains("New York"), "{text}");
}

#[test]
fn tools_list_shows_what_the_configuration_allows() {
    let w = with_config(&format!("{}deny_tools = [\"get-env\"]\n", everything_toml("ev")));
    let out = w.run(&["tools", "list", "--json"]);
    out.expect_code(0);
    let v = out.json();
    let server = &v["servers"][0];
    assert_eq!(server["name"], "ev");
    assert_eq!(server["transport"], "stdio");
    assert!(server["protocol"].as_str().is_some_and(|p| p.starts_with("20")), "{server}");
    let tools = server["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "echo").expect("echo listed");
    assert_eq!(echo["input_schema"]["properties"]["message"]["type"], "string", "{echo}");
    assert!(!tools.iter().any(|t| t["name"] == "get-env"), "denied tools are not listed");
    let human = w.run(&["tools", "list", "ev"]);
    human.expect_code(0);
    assert!(human.stdout.contains("echo") && human.stdout.contains("tools, MCP"), "{}", human.stdout);
    let unknown = w.run(&["tools", "list", "nope"]);
    unknown.expect_code(2);
    assert!(
        unknown.stderr.contains("unknown MCP server `nope`") && unknown.stderr.contains("ev"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn an_unreachable_server_is_reported_without_hiding_the_others() {
    let w = with_config(&format!("{}[servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n", everything_toml("ev")));
    let out = w.run(&["tools", "list", "--json"]);
    out.expect_code(1);
    let v = out.json();
    let servers = v["servers"].as_array().unwrap();
    let broken = servers.iter().find(|s| s["name"] == "broken").unwrap();
    assert_eq!(broken["error"]["kind"], "transport", "{broken}");
    assert!(broken["error"]["message"].as_str().unwrap().contains("cannot start"), "{broken}");
    let ev = servers.iter().find(|s| s["name"] == "ev").unwrap();
    assert!(!ev["tools"].as_array().unwrap().is_empty(), "{ev}");
}

#[test]
fn validation_names_unknown_servers_tools_and_bad_inputs() {
    let w = with_config(&everything_toml("ev"));
    let def = json!({"name": "v", "version": 1, "steps": [
        {"name": "a", "tool": {"server": "evv", "name": "echo"}, "input": {"message": "x"}},
        {"name": "b", "tool": {"server": "ev", "name": "ecko"}, "input": {"message": "x"}},
        {"name": "c", "tool": {"server": "ev", "name": "echo"}, "input": {"message": 5}}
    ]});
    let f = write(&w, "wf.json", &def);
    // Offline: the unknown server only (nothing is started).
    let out = w.run(&["validate", "--offline", &f]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("/steps/0/tool/server") && out.stderr.contains("unknown MCP server `evv`"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("did you mean `ev`?"), "the hint names the server meant: {}", out.stderr);
    assert!(!out.stderr.contains("/steps/1/"), "{}", out.stderr);
    // A server that is not configured at all: the hint says what to add.
    let other = write(
        &w,
        "other.json",
        &json!({"name": "o", "steps": [
        {"name": "a", "tool": {"server": "crm", "name": "x"}}]}),
    );
    let out = w.run(&["validate", "--offline", &other]);
    assert!(out.stderr.contains("[servers.crm]"), "the hint says what to add: {}", out.stderr);
    // By default (as `weft run`, MCP and the API check): the unknown tool
    // and the input that breaks echo's schema too, all at once.
    let out = w.run(&["validate", "--json", &f]);
    out.expect_code(2);
    let v = out.json();
    let tool = v["problems"].as_array().unwrap().iter().find(|p| p["path"] == "/steps/1/tool/name").unwrap();
    assert!(tool["hint"].as_str().unwrap().contains("did you mean `echo`?"), "{tool}");
    let out = w.run(&["validate", "--online", "--json", &f]);
    out.expect_code(2);
    let v = out.json();
    let paths: Vec<&str> = v["problems"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"/steps/0/tool/server"), "{paths:?}");
    assert!(paths.contains(&"/steps/1/tool/name"), "{paths:?}");
    assert!(paths.iter().any(|p| p.starts_with("/steps/2/input")), "{paths:?}");
    let tool = v["problems"].as_array().unwrap().iter().find(|p| p["path"] == "/steps/1/tool/name").unwrap();
    assert!(tool["hint"].as_str().unwrap().contains("echo"), "the hint lists the tools: {tool}");
    // A good definition validates online.
    let good = json!({"name": "g", "version": 1, "steps": [
        {"name": "c", "tool": {"server": "ev", "name": "echo"}, "input": {"message": "@input.m"}}]});
    let f = write(&w, "good.json", &good);
    w.run(&["validate", "--online", &f]).expect_code(0);
}

#[test]
fn a_run_whose_tool_input_breaks_the_schema_is_refused_and_nothing_is_stored() {
    let w = with_config(&everything_toml("ev"));
    let def = json!({"name": "r", "version": 1, "steps": [
        {"name": "s", "tool": {"server": "ev", "name": "get-sum"}, "input": {"a": "one", "b": 2}}]});
    let f = write(&w, "wf.json", &def);
    let out = w.run(&["run", &f]);
    out.expect_code(2);
    assert!(out.stderr.contains("/steps/0/input"), "{}", out.stderr);
    let list = w.run(&["runs", "list", "--json"]);
    list.expect_code(0);
    assert_eq!(list.json().as_array().map(Vec::len), Some(0), "nothing stored: {}", list.stdout);
}

#[test]
fn configuration_mistakes_name_the_file_and_line() {
    let w = with_config(
        "[servers.crm]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer ${WEFT_TEST_UNSET_TOKEN}\" }\n",
    );
    let out = w.run(&["tools", "list"]);
    out.expect_code(2);
    assert!(out.stderr.contains("weft.toml:3:"), "{}", out.stderr);
    assert!(out.stderr.contains("WEFT_TEST_UNSET_TOKEN"), "{}", out.stderr);
    let w = with_config("[servers.x]\ncommand = \"node\"\nargz = []\n");
    let out = w.run(&["validate", "nothing.json"]);
    out.expect_code(2);
    assert!(out.stderr.contains("weft.toml:3:") && out.stderr.contains("argz"), "{}", out.stderr);
    // A set variable is expanded (and the server is reachable through it).
    let w =
        with_config("[servers.ev]\ncommand = \"${WEFT_TEST_NODE}\"\nargs = [\"${WEFT_TEST_EVERYTHING}\", \"stdio\"]\n");
    let out = w
        .cmd()
        .env("WEFT_TEST_NODE", "node")
        .env("WEFT_TEST_EVERYTHING", everything_js())
        .args(["tools", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A long-running tool is cut by the step's `timeout_ms`: the step fails
/// with `timeout` (the cancellation goes upstream), and the run ends.
#[test]
fn a_step_timeout_cuts_a_long_tool_call() {
    let w = with_config(&everything_toml("ev"));
    let def = json!({"name": "slow", "version": 1, "steps": [
        {"name": "long", "tool": {"server": "ev", "name": "trigger-long-running-operation"},
         "input": {"duration": 60, "steps": 10}, "timeout_ms": 1500}]});
    let f = write(&w, "wf.json", &def);
    let t0 = Instant::now();
    let out = w.run(&["run", &f, "--json"]);
    let took = t0.elapsed();
    out.expect_code(1);
    let run = out.json();
    assert_eq!(run["state"], "failed", "{run}");
    assert_eq!(run["steps"][0]["error"]["kind"], "timeout", "{run}");
    assert!(took < Duration::from_secs(15), "the 60 s tool was cut: {took:?}");
}

/// Progress notifications of a tool become `progress` events of the run.
#[test]
fn tool_progress_is_recorded_in_the_event_log() {
    let w = with_config(&everything_toml("ev"));
    let def = json!({"name": "p", "version": 1, "steps": [
        {"name": "long", "tool": {"server": "ev", "name": "trigger-long-running-operation"},
         "input": {"duration": 1, "steps": 4}}]});
    let f = write(&w, "wf.json", &def);
    let out = w.run(&["run", &f, "--json"]);
    out.expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_string();
    let ev = w.run(&["runs", "events", &id, "--json"]);
    ev.expect_code(0);
    let progress: Vec<Value> = ev
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "progress")
        .collect();
    assert!(progress.len() >= 2, "progress events: {}", ev.stdout);
    assert_eq!(progress[0]["step"], "long");
    assert_eq!(progress[0]["data"]["total"], 4.0, "{}", progress[0]);
}

/// An upstream over streamable HTTP, configured by `url`.
#[test]
fn an_http_upstream_serves_tool_steps() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = std::process::Command::new("node")
        .arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _server = crate::common::KillOnDrop(server);
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "server-everything did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let w = with_config(&format!("[servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"));
    let def = json!({"name": "h", "version": 1, "steps": [
        {"name": "sum", "tool": {"server": "web", "name": "get-sum"}, "input": {"a": 40, "b": 2}}],
        "output": "@sum"});
    let f = write(&w, "wf.json", &def);
    let out = w.run(&["run", &f]);
    out.expect_code(0);
    assert!(out.stdout.contains("42"), "{}", out.stdout);
}

/// `weft bench` prints greppable figures and writes them as JSON; an
/// unknown workload is bad usage.
#[test]
fn weft_bench_runs_w8_and_refuses_unknown_workloads() {
    let w = Weft::new();
    let json_file = w.dir.path().join("figures.json");
    let out = w.run(&["bench", "w8", "--rounds", "2", "--json", json_file.to_str().unwrap()]);
    out.expect_code(0);
    assert!(out.stdout.lines().any(|l| l.starts_with("W8 cold runs=2 wall_ms_p50=")), "{}", out.stdout);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    assert_eq!(v[0]["workload"], "W8");
    assert!(v[0]["wall_ms_p50"].as_f64().unwrap() > 0.0, "{v}");
    let bad = w.run(&["bench", "w1"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("cargo bench -p weft --bench engine"), "{}", bad.stderr);
}

/// A tool result loses nothing: server-everything's image comes back as
/// an artifact of the step (its bytes, PNG, content-addressed like a
/// guest's), named in the step's output beside the text around it; resource
/// links and embedded resources are in the output; `structuredContent` is
/// the output when the tool gives it. Before, only the text was kept.
#[test]
fn a_tool_results_images_links_and_resources_are_kept() {
    peers();
    let w = with_config(&everything_toml("everything"));
    let def = json!({"name": "content", "steps": [
        {"name": "img", "tool": {"server": "everything", "name": "get-tiny-image"}},
        {"name": "links", "tool": {"server": "everything", "name": "get-resource-links"}, "input": {"count": 2}},
        {"name": "blob", "tool": {"server": "everything", "name": "get-resource-reference"},
         "input": {"resourceType": "Blob", "resourceId": 1}},
        {"name": "weather", "tool": {"server": "everything", "name": "get-structured-content"},
         "input": {"location": "Chicago"}}],
        "output": {"img": "@img", "links": "@links", "blob": "@blob", "weather": "@weather"}});
    let wf = write(&w, "content.json", &def);
    let out = w.run(&["run", &wf, "--json"]);
    out.expect_code(0);
    let run = out.json();
    let o = &run["output"];
    // The image: the text around it, and the image as an artifact.
    let blocks = o["img"]["content"].as_array().unwrap();
    assert!(o["img"]["text"].as_str().unwrap().contains("Here's the image"), "{o}");
    let image = blocks.iter().find(|b| b["type"] == "image").unwrap();
    assert_eq!(
        (image["mime"].as_str(), image["artifact"].as_str()),
        (Some("image/png"), Some("img-image-1.png")),
        "{o}"
    );
    let artifacts = run["artifacts"].as_array().unwrap();
    let a = artifacts.iter().find(|a| a["name"] == "img-image-1.png").unwrap_or_else(|| panic!("{run}"));
    assert_eq!((a["mime"].as_str(), a["step"].as_str()), (Some("image/png"), Some("img")), "{a}");
    assert_eq!(a["size"], image["bytes"], "{a}");
    let dir = w.dir.path().join("files");
    w.run(&["runs", "artifacts", run["id"].as_str().unwrap(), "--out", dir.to_str().unwrap()]).expect_code(0);
    let png = std::fs::read(dir.join("img-image-1.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "the image's bytes");
    // Resource links as the tool sent them.
    let links: Vec<&Value> =
        o["links"]["content"].as_array().unwrap().iter().filter(|b| b["type"] == "resource_link").collect();
    assert_eq!(links.len(), 2, "{o}");
    assert!(links[0]["uri"].as_str().unwrap().starts_with("demo://"), "{o}");
    // An embedded blob resource: its bytes an artifact, its uri in the output.
    let res = o["blob"]["content"].as_array().unwrap().iter().find(|b| b["type"] == "resource").unwrap().clone();
    assert!(res["uri"].is_string() && res["artifact"].as_str().unwrap().starts_with("blob-resource-1"), "{o}");
    assert!(artifacts.iter().any(|a| a["name"] == res["artifact"]), "{run}");
    // structuredContent is the output.
    assert!(o["weather"]["temperature"].is_number(), "{o}");
}
