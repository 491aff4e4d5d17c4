//! weft-mcp-client against real MCP servers nobody here wrote:
//! `@modelcontextprotocol/server-everything` over stdio and streamable
//! HTTP, and `@modelcontextprotocol/server-filesystem` in a temp dir
//! (installed, pinned, by `tests/mcp-peers/setup.sh`).

mod peers;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use weft_mcp_client::{CallErrorKind, Progress, ToolCall, Upstreams};

fn call(server: &str, tool: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        server: server.into(),
        tool: tool.into(),
        arguments: args,
        idempotency_key: Some("r_test/step/1".into()),
        timeout: Some(Duration::from_secs(20)),
        progress: None,
        traceparent: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_lists_calls_and_maps_outputs() {
    let ups = Upstreams::new([peers::everything_stdio("everything")]);
    let tools = ups.list_tools("everything").await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for want in ["echo", "get-sum", "get-structured-content", "trigger-long-running-operation"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.input_schema["type"], "object", "{}", echo.input_schema);

    let out =
        ups.call(call("everything", "echo", json!({"message": "hi there"})), std::future::pending()).await.unwrap();
    assert_eq!(out.value, json!("Echo: hi there"));
    let out = ups.call(call("everything", "get-sum", json!({"a": 2, "b": 40})), std::future::pending()).await.unwrap();
    let text = out.value.to_string();
    assert!(text.contains("42"), "{text}");
    let out = ups
        .call(call("everything", "get-structured-content", json!({"location": "Chicago"})), std::future::pending())
        .await
        .unwrap();
    assert!(out.result.structured_content.is_some(), "{:?}", out.result);
    assert!(out.value.is_object(), "structuredContent is the output: {}", out.value);
    assert_eq!(ups.generation("everything"), 1, "one shared connection for all calls");
    ups.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_is_cut_by_its_timeout_and_the_connection_survives() {
    let ups = Upstreams::new([peers::everything_stdio("ev")]);
    let progress: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let seen = progress.clone();
    let mut c = call("ev", "trigger-long-running-operation", json!({"duration": 20, "steps": 40}));
    c.timeout = Some(Duration::from_millis(2500));
    c.progress = Some(Arc::new(move |p| seen.lock().unwrap().push(p)));
    let t0 = Instant::now();
    let e = ups.call(c, std::future::pending()).await.unwrap_err();
    let took = t0.elapsed();
    assert_eq!(e.kind, CallErrorKind::Timeout, "{e}");
    assert!(e.retryable);
    assert!(took < Duration::from_millis(6000), "cut at its timeout (2.5 s), took {took:?}");
    assert!(!progress.lock().unwrap().is_empty(), "progress notifications reached the caller");
    let out = ups.call(call("ev", "echo", json!({"message": "still here"})), std::future::pending()).await.unwrap();
    assert_eq!(out.value, json!("Echo: still here"));
    assert_eq!(ups.generation("ev"), 1, "a timeout does not restart the upstream");
    ups.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_a_call_at_once() {
    let ups = Upstreams::new([peers::everything_stdio("ev")]);
    ups.list_tools("ev").await.unwrap();
    let c = call("ev", "trigger-long-running-operation", json!({"duration": 30, "steps": 5}));
    let t0 = Instant::now();
    let e = ups.call(c, tokio::time::sleep(Duration::from_millis(300))).await.unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Canceled, "{e}");
    assert!(t0.elapsed() < Duration::from_secs(3));
    ups.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    let server = peers::EverythingHttp::start().await;
    let ups = Upstreams::new([server.config("web")]);
    let out = ups.call(call("web", "echo", json!({"message": "over http"})), std::future::pending()).await.unwrap();
    assert_eq!(out.value, json!("Echo: over http"));
    let tools = ups.list_tools("web").await.unwrap();
    assert!(tools.iter().any(|t| t.name == "get-sum"));
    ups.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_hide_and_refuse_tools_and_bad_arguments_are_refused() {
    let mut cfg = peers::everything_stdio("ev");
    cfg.tools =
        weft_mcp_client::ToolFilter { allow: Some(vec!["get-*".into(), "echo".into()]), deny: vec!["get-env".into()] };
    let ups = Upstreams::new([cfg]);
    let names: Vec<String> = ups.list_tools("ev").await.unwrap().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"echo".to_string()) && names.contains(&"get-sum".to_string()), "{names:?}");
    assert!(!names.contains(&"get-env".to_string()) && !names.iter().any(|n| n.starts_with("trigger")), "{names:?}");
    let e = ups.call(call("ev", "get-env", json!({})), std::future::pending()).await.unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Refused);
    assert!(!e.retryable && e.message.contains("allow_tools"), "{e}");
    let e = ups.call(call("ev", "echo", json!([1])), std::future::pending()).await.unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Refused);
    assert!(e.message.contains("JSON object"), "{e}");
    let e = ups.call(call("nope", "echo", json!({})), std::future::pending()).await.unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Refused);
    assert!(e.message.contains("unknown MCP server `nope`") && e.message.contains("ev"), "{e}");
    ups.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_server_writes_and_reads_in_a_temp_dir() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ups = Upstreams::new([peers::filesystem("fs", &root)]);
    let file = root.join("note.txt");
    let path = file.to_str().unwrap();
    ups.call(call("fs", "write_file", json!({"path": path, "content": "hello from weft"})), std::future::pending())
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello from weft");
    let out = ups.call(call("fs", "read_text_file", json!({"path": path})), std::future::pending()).await.unwrap();
    assert!(out.value.to_string().contains("hello from weft"), "{}", out.value);
    let outside = ups.call(call("fs", "read_text_file", json!({"path": "/etc/passwd"})), std::future::pending()).await;
    let e = outside.unwrap_err();
    assert!(matches!(e.kind, CallErrorKind::ToolError | CallErrorKind::Protocol), "{e:?}");
    ups.shutdown().await;
}
