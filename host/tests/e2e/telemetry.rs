//! Observability, with real receivers (docs/observability.md): traces
//! exported over OTLP/HTTP to a receiver in this process ([`crate::otlp`]),
//! `/metrics` scraped and parsed as Prometheus text, JSON log lines.
//!
//! The trace test is the operator's story: an MCP client (weft's own rmcp
//! client, sending `_meta.traceparent` as an LLM host would) calls
//! `run_start` on one `weft serve`; the run's code step runs a real guest
//! (which sees `TRACEPARENT`), its tool step calls `wf_echo` on a second
//! `weft serve` — the upstream MCP server — which starts a run of its own.
//! Both export to the receiver, and the spans form one tree in one trace.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::Weft;
use crate::otlp::{Got, Receiver, one};
use crate::serve::Server;

/// The caller's trace: what an LLM host would send in `_meta`.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn telemetry_toml(w: &Weft, receiver: &Receiver, service: &str, extra: &str) {
    let text = format!("[telemetry]\nendpoint = {:?}\nservice_name = {service:?}\n{extra}", receiver.url);
    std::fs::write(w.dir.path().join("weft.toml"), text).unwrap();
}

fn save(w: &Weft, def: &Value) {
    let p = w.dir.path().join(format!("{}.json", def["name"].as_str().unwrap()));
    std::fs::write(&p, def.to_string()).unwrap();
    w.run(&["templates", "save", p.to_str().unwrap()]).expect_code(0);
}

/// Calls `tool` of the MCP server at `url` with `_meta.traceparent`.
fn call_with_trace(url: &str, tool: &str, arguments: Value, traceparent: &str) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let server = weft_mcp_client::ServerConfig {
        name: "front".into(),
        transport: weft_mcp_client::Transport::Http { url: url.into(), headers: Default::default() },
        timeout: Some(Duration::from_secs(60)),
        tools: Default::default(),
        secrets: weft_mcp_client::Secrets::none(),
    };
    let ups = Arc::new(weft_mcp_client::Upstreams::new([server]));
    let call = weft_mcp_client::ToolCall {
        server: "front".into(),
        tool: tool.into(),
        arguments,
        idempotency_key: None,
        timeout: Some(Duration::from_secs(60)),
        progress: None,
        traceparent: Some(traceparent.into()),
    };
    let out = rt.block_on(ups.call(call, std::future::pending())).expect("the call succeeds");
    rt.block_on(ups.shutdown());
    out.value
}

fn children<'a>(spans: &'a [Got], of: &Got) -> Vec<&'a Got> {
    spans.iter().filter(|s| s.parent == of.span_id && s.trace_id == of.trace_id).collect()
}

#[test]
fn one_trace_from_the_mcp_call_through_every_step_to_the_upstream_server() {
    let receiver = Receiver::start();
    // The upstream: a second weft serving the template `echo` as `wf_echo`.
    let up = Weft::new();
    telemetry_toml(&up, &receiver, "weft-upstream", "");
    save(
        &up,
        &json!({"name": "echo", "steps": [
            {"name": "pick", "code": {"plugin": "json-select"}, "input": {"data": "@input", "path": "msg"}}]}),
    );
    let upstream = Server::start(&up, &["--http", "127.0.0.1:0"]);
    // The front: tool steps call the upstream; a code step runs a real guest.
    let front = Weft::new();
    telemetry_toml(&front, &receiver, "weft-front", &format!("[servers.up]\nurl = {:?}\n", upstream.url));
    save(
        &front,
        &json!({"name": "traced", "steps": [
            {"name": "env", "code": {"path": weft_test_artifacts::HOSTILE}, "input": {"mode": "env"}},
            {"name": "call", "tool": {"server": "up", "name": "wf_echo"}, "input": {"msg": "hi"}, "after": ["env"]}]}),
    );
    let server = Server::start(&front, &["--http", "127.0.0.1:0"]);

    let traceparent = format!("00-{TRACE}-{CALLER_SPAN}-01");
    let answer =
        call_with_trace(&server.url, "run_start", json!({"template": "traced", "wait_ms": 60000}), &traceparent);
    let run_id = answer["run_id"].as_str().or(answer["id"].as_str()).unwrap_or_else(|| panic!("{answer}")).to_string();
    let run = front.show(&run_id);
    assert_eq!(run["state"], "completed", "{run}");

    let spans = receiver.wait_for(Duration::from_secs(20), |s| {
        s.iter().any(|x| x.name == "run traced") && s.iter().any(|x| x.name == "run echo")
    });
    // The front's run: a child of the caller's span, in the caller's trace.
    let run_span = one(&spans, "weft-front", "run traced");
    assert_eq!((run_span.trace_id.as_str(), run_span.parent.as_str()), (TRACE, CALLER_SPAN), "{run_span:?}");
    assert_eq!(run_span.attr("run_id"), run_id);
    assert_eq!(run_span.attr("state"), "completed");
    // Each step attempt hangs from the run's span.
    let steps = children(&spans, run_span);
    let env = steps.iter().find(|s| s.name == "step env").unwrap_or_else(|| panic!("{spans:#?}"));
    let call = steps.iter().find(|s| s.name == "step call").unwrap_or_else(|| panic!("{spans:#?}"));
    for s in [env, call] {
        assert_eq!((s.attr("run_id"), s.attr("attempt"), s.attr("outcome")), (run_id.as_str(), "1", "succeeded"));
        assert_ne!(s.status, 2, "not an error: {s:?}");
    }
    assert_eq!(env.attr("kind"), "code");
    assert_eq!(call.attr("kind"), "tool");
    // The guest's invocation, and the guest saw its span as TRACEPARENT.
    let guest = children(&spans, env);
    assert_eq!(guest.len(), 1, "{spans:#?}");
    assert!(guest[0].name.starts_with("guest "), "{:?}", guest[0]);
    let seen_env = &crate::common::step(&run, "env")["output"]["env"];
    let tp = seen_env
        .as_array()
        .unwrap()
        .iter()
        .find(|kv| kv[0] == "TRACEPARENT")
        .unwrap_or_else(|| panic!("no TRACEPARENT in the guest's environment: {seen_env}"));
    assert_eq!(tp[1], format!("00-{TRACE}-{}-01", guest[0].span_id));
    // The tool call, and the upstream's run under it: the context went on in `_meta`.
    let tool = children(&spans, call);
    assert_eq!(tool.len(), 1, "{spans:#?}");
    assert_eq!(tool[0].name, "tools/call up.wf_echo");
    let up_run = one(&spans, "weft-upstream", "run echo");
    assert_eq!((up_run.trace_id.as_str(), up_run.parent.as_str()), (TRACE, tool[0].span_id.as_str()));
    let up_steps = children(&spans, up_run);
    assert!(up_steps.iter().any(|s| s.name == "step pick"), "{spans:#?}");
    // Every span of both wefts is in the one trace.
    assert!(spans.iter().all(|s| s.trace_id == TRACE), "{spans:#?}");
    // Attempts were exported when they ended: before the run's end.
    assert!(env.end_ns <= run_span.end_ns && run_span.start_ns <= env.start_ns, "{env:?} {run_span:?}");
    let (ok, printed) = server.stop();
    assert!(ok, "{printed}");
    upstream.stop();
}

/// `weft worker --until-idle` with the environment's OTLP endpoint.
fn worker(w: &Weft, receiver: &Receiver) -> Child {
    w.cmd()
        .args(["worker", "--until-idle"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env("OTEL_SERVICE_NAME", "weft-worker")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_run_started_over_http_keeps_its_trace_after_a_crash() {
    let receiver = Receiver::start();
    let w = Weft::new();
    telemetry_toml(&w, &receiver, "weft-first", "");
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let def = json!({"name": "napper", "steps": [
        {"name": "nap", "sleep": {"ms": 1500}},
        {"name": "after", "code": {"plugin": "json-select"}, "input": {"data": {"x": 1}, "path": "x"}, "after": ["nap"]}]});
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let api = format!("http://127.0.0.1:{}/api/v1/runs", server.port());
    let traceparent = format!("00-{TRACE}-{CALLER_SPAN}-01");
    let created: Value = rt.block_on(async {
        let r = reqwest::Client::new()
            .post(&api)
            .header("traceparent", &traceparent)
            .json(&json!({"definition": def}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        r.json().await.unwrap()
    });
    let id = created["id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(300));
    // A crash mid-run: SIGKILL, nothing flushed.
    let mut server = server;
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    // Another process finishes the run, in the same trace.
    let mut worker = worker(&w, &receiver);
    let status = worker.wait().unwrap();
    let mut err = String::new();
    BufReader::new(worker.stderr.take().unwrap()).lines().for_each(|l| err.push_str(&(l.unwrap() + "\n")));
    assert!(status.success(), "{err}");
    assert_eq!(w.show(&id)["state"], "completed");
    let spans = receiver.wait_for(Duration::from_secs(10), |s| s.iter().any(|x| x.name == "run napper"));
    let run_span = one(&spans, "weft-worker", "run napper");
    assert_eq!((run_span.trace_id.as_str(), run_span.parent.as_str()), (TRACE, CALLER_SPAN), "{run_span:?}");
    let after = one(&spans, "weft-worker", "step after");
    assert_eq!((after.trace_id.as_str(), after.parent.as_str()), (TRACE, run_span.span_id.as_str()));
    // The run's span covers the whole run, from its creation by the first process.
    assert!(run_span.start_ns <= after.start_ns && run_span.end_ns - run_span.start_ns >= 1_400_000_000);
}

/// `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`: the same spans over gRPC, sent as
/// a foreground `weft run` ends.
#[test]
fn traces_go_over_grpc_too() {
    let receiver = Receiver::start_grpc();
    let w = Weft::new();
    let file = w.dir.path().join("solo.json");
    let def = json!({"name": "solo", "steps": [
        {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": {"x": 1}, "path": "x"}}]});
    std::fs::write(&file, def.to_string()).unwrap();
    let out = w
        .cmd()
        .args(["run", file.to_str().unwrap(), "--json"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("TRACEPARENT", format!("00-{TRACE}-{CALLER_SPAN}-01"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let spans = receiver.wait_for(Duration::from_secs(10), |s| s.iter().any(|x| x.name == "run solo"));
    let run_span = one(&spans, "weft", "run solo");
    assert_eq!((run_span.trace_id.as_str(), run_span.parent.as_str()), (TRACE, CALLER_SPAN), "{run_span:?}");
    let step = one(&spans, "weft", "step a");
    assert_eq!(step.parent, run_span.span_id);
}

#[test]
fn metrics_count_the_runs_and_steps_executed() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let def = json!({"name": "pair", "steps": [
        {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": {"x": 1}, "path": "x"}},
        {"name": "b", "code": {"plugin": "json-select"}, "input": {"data": {"y": "@a"}, "path": "y"}}]});
    let bad = json!({"name": "broken", "steps": [
        {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": {"x": 1}, "path": "nowhere"}}]});
    let base = format!("http://127.0.0.1:{}", server.port());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let http = reqwest::Client::new();
    rt.block_on(async {
        for d in [&def, &def, &def, &bad] {
            let r = http
                .post(format!("{base}/api/v1/runs"))
                .json(&json!({"definition": d, "wait_ms": 20000}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 201);
        }
    });
    let text = rt.block_on(async { http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap() });
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text");
    let value = |name: &str, labels: &[(&str, &str)]| -> f64 {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
                prometheus_parse::Value::Untyped(v) => v,
                _ => 0.0,
            })
            .sum()
    };
    assert_eq!(value("weft_runs_started_total", &[("template", "pair")]), 3.0, "{text}");
    assert_eq!(value("weft_runs_finished_total", &[("template", "pair"), ("state", "completed")]), 3.0, "{text}");
    assert_eq!(value("weft_runs_finished_total", &[("template", "broken"), ("state", "failed")]), 1.0, "{text}");
    assert_eq!(value("weft_step_attempts_total", &[("kind", "code"), ("outcome", "succeeded")]), 6.0, "{text}");
    assert_eq!(value("weft_step_attempts_total", &[("kind", "code"), ("outcome", "guest_error")]), 1.0, "{text}");
    let durations = scrape
        .samples
        .iter()
        .find(|s| s.metric == "weft_step_duration_seconds" && s.labels.get("kind") == Some("code"))
        .unwrap_or_else(|| panic!("no step durations: {text}"));
    match &durations.value {
        prometheus_parse::Value::Histogram(h) => {
            // Every code attempt: six that succeeded, the one that failed.
            assert_eq!(h.iter().map(|b| b.count).fold(0.0, f64::max), 7.0, "{text}")
        }
        other => panic!("weft_step_duration_seconds is a histogram, not {other:?}"),
    }
    assert!(value("weft_commit_duration_seconds_count", &[]) > 0.0 || text.contains("weft_commit_duration_seconds"));
    assert!(text.contains("weft_queue_runs{queue=\"busy\"}"), "{text}");
    // Every guest invocation's memory peak: seven, each at least a page.
    let memory = scrape
        .samples
        .iter()
        .find(|s| s.metric == "weft_guest_memory_bytes")
        .unwrap_or_else(|| panic!("no guest memory peaks: {text}"));
    match &memory.value {
        prometheus_parse::Value::Histogram(h) => {
            assert_eq!(h.iter().map(|b| b.count).fold(0.0, f64::max), 7.0, "{text}");
            let under_a_page = h.iter().find(|b| b.less_than == 65_536.0).map(|b| b.count).unwrap_or(0.0);
            assert_eq!(under_a_page, 0.0, "a guest's memory is at least one 64 KiB page: {text}");
        }
        other => panic!("weft_guest_memory_bytes is a histogram, not {other:?}"),
    }
    // Every metric served is documented.
    let doc = std::fs::read_to_string(crate::common::repo_root().join("docs/observability.md")).unwrap();
    for s in &scrape.samples {
        let base = s.metric.trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count");
        assert!(doc.contains(&format!("`{base}`")), "{base} is not in docs/observability.md");
    }
    server.stop();
}

/// The Grafana dashboard asks only for metrics weft serves (as documented).
#[test]
fn the_dashboard_names_documented_metrics() {
    let root = crate::common::repo_root();
    let doc = std::fs::read_to_string(root.join("docs/observability.md")).unwrap();
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(root.join("docs/grafana/weft.json")).unwrap())
        .expect("the dashboard is JSON");
    let mut seen = 0;
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if let Some(rest) = word.strip_prefix("weft_") {
                    let base = format!("weft_{rest}");
                    let base = base.trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count");
                    assert!(doc.contains(&format!("`{base}`")), "the dashboard asks for {base}, not documented");
                    seen += 1;
                }
            }
        }
    }
    assert!(seen >= 12, "{seen}");
}

#[test]
fn a_worker_serves_metrics_and_json_logs_carry_run_and_trace_ids() {
    let w = Weft::new();
    let def = json!({"name": "solo", "steps": [
        {"name": "a", "code": {"plugin": "json-select"}, "input": {"data": {"x": 1}, "path": "x"}}]});
    let file = w.dir.path().join("solo.json");
    std::fs::write(&file, def.to_string()).unwrap();
    // JSON logs: `weft run` drives the run; its end is one line with the ids.
    let traceparent = format!("00-{TRACE}-{CALLER_SPAN}-01");
    let out = w
        .cmd()
        .args(["--log-format", "json", "run", file.to_str().unwrap(), "--json"])
        .env("TRACEPARENT", &traceparent)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<Value> = stderr.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let ended = lines
        .iter()
        .find(|l| l["message"] == "run ended")
        .unwrap_or_else(|| panic!("no `run ended` JSON line:\n{stderr}"));
    assert_eq!(ended["run_id"], run["id"], "{ended}");
    assert_eq!(ended["trace_id"], TRACE, "{ended}");
    assert_eq!(ended["state"], "completed", "{ended}");
    // The same by the environment variable; a bad value is refused with a clear error.
    let out = w.cmd().args(["run", file.to_str().unwrap()]).env("WEFT_LOG_FORMAT", "yaml").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`text` or `json`"));

    // A worker's /metrics.
    let mut child = w
        .cmd()
        .args(["worker", "--metrics", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let url = loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "the worker exited");
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_string();
        }
    };
    let submitted = w.run(&["run", file.to_str().unwrap(), "--detach"]);
    submitted.expect_code(0);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut text = String::new();
    for _ in 0..100 {
        text = rt.block_on(async { reqwest::get(&url).await.unwrap().text().await.unwrap() });
        if text.contains("weft_runs_finished_total{template=\"solo\",state=\"completed\"} 1") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text");
    let finished = scrape
        .samples
        .iter()
        .find(|s| s.metric == "weft_runs_finished_total" && s.labels.get("template") == Some("solo"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(matches!(finished.value, prometheus_parse::Value::Counter(v) if v == 1.0), "{text}");
    let _ = child.kill();
    let _ = child.wait();
}

/// With `--log-format json`, every line `weft serve` writes to stderr is
/// JSON, its start-up lines ("owns ...", "listening on ...") included.
#[test]
fn every_stderr_line_is_json_in_json_mode() {
    let w = Weft::new();
    let mut child = w
        .cmd()
        .args(["--log-format", "json", "serve", "--http", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = vec![];
    while let Some(Ok(line)) = lines.next() {
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        seen.push(v["message"].as_str().unwrap_or_default().to_string());
        if seen.last().is_some_and(|m| m.contains("JSON API")) {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen.iter().any(|m| m.contains("owns") || m.contains("store")), "{seen:?}");
    assert!(seen.iter().any(|m| m.contains("listening on http://127.0.0.1:")), "{seen:?}");
}
