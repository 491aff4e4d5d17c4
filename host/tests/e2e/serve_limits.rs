//! docs/reliability.md, promise 6, for HTTP clients: idle and half-sent
//! connections and abandoned MCP sessions cannot starve `weft serve`. 300
//! idle sockets and 10,000 abandoned 2025-11-25 sessions later, a real
//! client's run still completes, the idle sockets are closed after the
//! header deadline, new sessions past the cap are refused with 503, and the
//! server's memory stays bounded. Answers are bounded too: a message over
//! the cap gets an error naming it, and a run too large to read whole is
//! shown in part with the calls that page it back.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Weft, rss_kb};
use crate::serve::{Server, client, post_initialize, python};

#[test]
fn idle_sockets_and_abandoned_sessions_do_not_starve_the_server() {
    let Some(py) = python("idle_sockets_and_abandoned_sessions_do_not_starve_the_server") else { return };
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let port = server.port();
    let pid = server.child.id();
    let opened = Instant::now();
    // 300 idle sockets and 20 that send half a request.
    let mut held: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    for _ in 0..20 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n").unwrap();
        held.push(s);
    }
    // A real client's run completes meanwhile.
    let seen = client(&py, &["--mode", "auto", "--url", &server.url, "--scenario", "smoke"]);
    let run = w.show(seen["run_id"].as_str().unwrap());
    assert_eq!(run["output"], json!({"greeting": "Hello Bob!"}), "{run}");

    // Abandoned sessions: up to the cap they are accepted, past it refused.
    let before = rss_kb(pid);
    for k in 0..1000 {
        assert_eq!(post_initialize(port, None), 200, "session {k}");
    }
    // 10,000 abandoned sessions in all: the other 9,000 are refused.
    for _ in 0..9000 {
        assert_eq!(post_initialize(port, None), 503, "a session past the cap");
    }
    let after = rss_kb(pid);
    assert!(after < before + 200_000, "10,000 sessions took the server from {before} to {after} kB");
    // Sessionless (2026-07-28) clients are not refused at the session cap.
    let seen = client(&py, &["--mode", "auto", "--url", &server.url, "--scenario", "smoke"]);
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");

    // The idle and half-sent sockets are closed after the header deadline.
    for (k, mut s) in held.into_iter().enumerate() {
        let left = Duration::from_secs(20).saturating_sub(opened.elapsed()).max(Duration::from_millis(100));
        s.set_read_timeout(Some(left)).unwrap();
        let mut buf = [0u8; 512];
        match s.read(&mut buf) {
            Ok(_) => {} // closed (0), or a 408 before closing
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("socket {k} still open {:?} after it was opened: {e}", opened.elapsed()),
        }
    }
    let (ok, printed) = server.stop();
    assert!(ok, "{printed}");
}

/// A message over the cap of one MCP message (20 MiB against the default
/// cap of a little over 5 MiB) is answered with a JSON-RPC error naming the
/// cap, over stdio and over HTTP, and the session goes on: before, over
/// stdio, rmcp dropped the line and the client waited forever.
#[test]
fn a_message_over_the_cap_is_answered_and_the_session_goes_on() {
    let Some(py) = python("a_message_over_the_cap_is_answered_and_the_session_goes_on") else { return };
    let script = crate::common::repo_root().join("tests/mcp-clients/oversized.py");
    let check = |seen: serde_json::Value, how: &str| {
        assert_eq!(seen["code"], -32600, "{how}: {seen}");
        let message = seen["message"].as_str().unwrap();
        assert!(message.contains("-byte cap of one MCP message") && message.contains("5505024"), "{how}: {message}");
        assert!(seen["seconds"].as_f64().unwrap() < 30.0, "{how}: answered at once: {seen}");
        assert!(seen["tools_after"].as_u64().unwrap() > 10, "{how}: {seen}");
        assert_eq!(seen["signal_after"], true, "{how}: {seen}");
    };

    let w = Weft::new();
    std::fs::create_dir_all(w.data_dir()).unwrap();
    let bin = crate::common::weft_bin();
    let data = w.data_dir();
    let seen = crate::serve::run_script(
        &py,
        &script,
        &["--stdio", bin.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--mib", "20"],
    );
    check(seen, "stdio");

    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let seen = crate::serve::run_script(&py, &script, &["--url", server.url.as_str(), "--mib", "20"]);
    check(seen, "http");
}

/// A run of a 20,000-item for_each (its input, output and step output each
/// over 1 MB as a whole) read by an agent (tests/mcp-clients/bounded_check.py,
/// the official Python SDK): `run_get` answers under 64 KB and says what it
/// trimmed; each trimmed value's `run_value` call pages it back whole.
#[test]
fn run_get_of_a_20000_item_run_is_bounded_and_pages_back_whole() {
    let w = Weft::new();
    let items: Vec<serde_json::Value> =
        (0..20_000).map(|i| json!({"id": i, "name": format!("order-{i:05}"), "qty": i % 17})).collect();
    let def = w.write_def(
        "big",
        &json!({"name": "big", "steps": [{"name": "each", "for_each": "@input.items",
            "code": {"plugin": "json-select"}, "input": {"data": "@item", "path": "name"}}], "output": "@each"}),
    );
    let input = w.dir.path().join("in.json");
    std::fs::write(&input, json!({"items": items}).to_string()).unwrap();
    let out = w.run_within(
        Duration::from_secs(300),
        &["run", def.to_str().unwrap(), "--input-file", input.to_str().unwrap(), "--json"],
    );
    out.expect_code(0);
    let id = out.json()["id"].as_str().unwrap().to_string();
    let config = w.dir.path().join("weft.toml");
    std::fs::write(&config, "").unwrap();
    let mut args = crate::serve_recording::agent_args(&w, &config);
    args.extend(["--run".to_string(), id]);
    let script = crate::common::repo_root().join("tests/mcp-clients/bounded_check.py");
    let seen = crate::serve::run_script(&crate::serve_recording::python(), &script, &args);
    let bytes = seen["run_get_bytes"].as_u64().unwrap();
    eprintln!("run_get: {bytes} bytes; {} pages, the largest {} bytes", seen["pages"], seen["largest_page_bytes"]);
    assert!(bytes < 64 * 1024, "run_get answered {bytes} bytes");
    assert_eq!(seen["state"], "completed");
    let at: Vec<&str> = seen["trimmed"].as_array().unwrap().iter().map(|t| t["at"].as_str().unwrap()).collect();
    for want in ["/input", "/output", "/steps/0/output"] {
        assert!(at.contains(&want), "{want} is listed as trimmed: {at:?}");
    }
    let marker = &seen["step_output_marker"];
    assert_eq!((marker["type"].as_str(), marker["length"].as_u64()), (Some("array"), Some(20_000)), "{marker}");
    assert_eq!(marker["head"][0], "order-00000", "{marker}");
    let names: Vec<String> = (0..20_000).map(|i| format!("order-{i:05}")).collect();
    assert_eq!(seen["step_output"], json!(names), "paged back whole, in order");
    assert!(seen["largest_page_bytes"].as_u64().unwrap() < 80 * 1024, "{}", seen["largest_page_bytes"]);
    assert_eq!(seen["one_input_item"], "order-19999");
    assert!(seen["run_start_bytes"].as_u64().unwrap() < 64 * 1024, "{}", seen["run_start_bytes"]);
    assert_eq!(seen["run_start_output_length"], 5000);
    assert!(seen["run_start_note"].as_str().unwrap().contains("run_value"), "{}", seen["run_start_note"]);
    // run_get lists 100 tries of 20,000 and says so, with the call that
    // reads an item past them.
    let tries = &seen["tries_marker"];
    assert_eq!(tries["read_with"]["arguments"]["item"], 100, "{tries}");
    assert_eq!(seen["item_input"]["data"]["name"], "order-19999", "{}", seen["item_input"]);
    assert_eq!(seen["for_each_input"]["is_error"], true);
    assert!(seen["for_each_input"]["text"].as_str().unwrap().contains("pass `item`"), "{}", seen["for_each_input"]);
    assert_eq!(seen["bad_step"]["is_error"], true);
    assert!(seen["bad_step"]["text"].as_str().unwrap().contains("each"), "names the steps: {}", seen["bad_step"]);
}
