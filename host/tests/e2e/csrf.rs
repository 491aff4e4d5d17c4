//! No web page can drive `weft serve --http`: what a
//! page's `fetch` or form can send without a preflight — another
//! `Origin`, `text/plain` or form bodies — and what a DNS-rebinding page
//! sends (its own `Host`) are refused on every route and change nothing;
//! the page's own same-origin JSON requests, and hosts and origins the
//! operator allowed, pass. Also two HTTP refusals: malformed JSON
//! to `/mcp` is a 400 with a JSON-RPC error, and a `code.path` refusal
//! over HTTP does not speak of MCP. (The web view still works in Chromium:
//! `web.rs` starts, answers and cancels runs through it.)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::Weft;
use crate::serve::Server;

/// Sends raw HTTP/1.1 `head` (without the final blank line) and `body`;
/// returns the status and the body as JSON (or a string).
pub(crate) fn raw(port: u16, head: &str, body: &str) -> (u16, Value) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let payload = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    // A chunked body: its JSON is between the size lines.
    let json = payload.find('{').and_then(|i| payload[i..].rfind('}').map(|j| &payload[i..i + j + 1]));
    (status, json.and_then(|j| serde_json::from_str(j).ok()).unwrap_or_else(|| Value::String(payload.into())))
}

fn waiting_def() -> Value {
    json!({"name": "approval", "steps": [{"name": "approve", "wait": {"prompt": "approve?"}}]})
}

#[test]
fn cross_site_and_rebinding_requests_are_refused_and_change_nothing() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0"]);
    let port = server.port();
    let host = format!("Host: 127.0.0.1:{port}");
    let start = json!({"definition": waiting_def()}).to_string();

    // A page's simple request: another origin, text/plain. Refused.
    let (st, body) = raw(
        port,
        &format!("POST /api/v1/runs HTTP/1.1\r\n{host}\r\nOrigin: http://evil.example\r\nContent-Type: text/plain"),
        &start,
    );
    assert_eq!(st, 403, "{body}");
    assert_eq!(body["kind"], "forbidden", "{body}");
    assert!(body["message"].as_str().unwrap().contains("evil.example"), "{body}");
    // Without an Origin (a client that is not a browser) a non-JSON body
    // is still refused: 415, saying what to send.
    let (st, body) = raw(port, &format!("POST /api/v1/runs HTTP/1.1\r\n{host}\r\nContent-Type: text/plain"), &start);
    assert_eq!(st, 415, "{body}");
    assert!(body["hint"].as_str().unwrap().contains("application/json"), "{body}");
    let (st, _) = raw(
        port,
        &format!("POST /api/v1/events HTTP/1.1\r\n{host}\r\nContent-Type: text/plain"),
        &json!({"name": "x", "data": {}}).to_string(),
    );
    assert_eq!(st, 415);
    // A browser's no-cors GET from another site (it sends no Origin).
    let (st, _) = raw(port, &format!("GET /api/v1/runs HTTP/1.1\r\n{host}\r\nSec-Fetch-Site: cross-site"), "");
    assert_eq!(st, 403);
    assert!(w.runs().is_empty(), "a refused request created a run: {:?}", w.runs());

    // DNS rebinding: the page's own name in Host, on every route.
    for (method, path) in [("GET", "/api/v1/runs"), ("GET", "/"), ("POST", "/mcp"), ("GET", "/healthz")] {
        let (st, body) = raw(
            port,
            &format!("{method} {path} HTTP/1.1\r\nHost: evil.example:{port}\r\nContent-Type: application/json"),
            if method == "POST" { "{}" } else { "" },
        );
        assert_eq!(st, 403, "{method} {path}: {body}");
    }

    // The page's own request (same origin, JSON) starts a run.
    let (st, run) = raw(
        port,
        &format!(
            "POST /api/v1/runs HTTP/1.1\r\n{host}\r\nOrigin: http://127.0.0.1:{port}\r\nSec-Fetch-Site: same-origin\r\nContent-Type: application/json"
        ),
        &start,
    );
    assert_eq!(st, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    // A form-encoded cancel from another site, and one without an Origin:
    // refused; the run still waits.
    let cancel =
        format!("POST /api/v1/runs/{id}/cancel HTTP/1.1\r\n{host}\r\nContent-Type: application/x-www-form-urlencoded");
    let (st, _) = raw(port, &format!("{cancel}\r\nOrigin: http://evil.example"), "x=1");
    assert_eq!(st, 403);
    let (st, _) = raw(port, &cancel, "x=1");
    assert_eq!(st, 415);
    let (st, _) = raw(port, &format!("POST /api/v1/runs/{id}/cancel HTTP/1.1\r\n{host}\r\nOrigin: null"), "");
    assert_eq!(st, 403, "a sandboxed page's `null` origin");
    assert_eq!(w.show(&id)["state"], "input-required", "a refused cancel changed the run");
    // The page's own bodiless cancel passes.
    let (st, body) =
        raw(port, &format!("POST /api/v1/runs/{id}/cancel HTTP/1.1\r\n{host}\r\nOrigin: http://127.0.0.1:{port}"), "");
    assert!(st == 200 || st == 202, "{st} {body}");
    assert_eq!(w.runs().len(), 1);

    // Malformed JSON to /mcp: 400 with a JSON-RPC parse error, not 415.
    let mcp = format!(
        "POST /mcp HTTP/1.1\r\n{host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream"
    );
    let (st, body) = raw(port, &mcp, "{\"jsonrpc\": \"2.0\", ");
    assert_eq!(st, 400, "{body}");
    assert_eq!(body["error"]["code"], -32700, "{body}");
    let (st, body) = raw(port, &mcp, "{\"hello\": 1}");
    assert_eq!(st, 400, "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    // A key given twice (JSON would keep one silently): refused, named.
    let twice = r#"{"jsonrpc": "2.0", "id": 3, "id": 4, "method": "tools/list"}"#;
    let (st, body) = raw(port, &mcp, twice);
    assert_eq!(st, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("\"id\" appears twice"), "{body}");
    // The same server by its other loopback name is not another site.
    let (st, _) = raw(port, &format!("GET /api/v1/runs HTTP/1.1\r\n{host}\r\nOrigin: http://localhost:{port}"), "");
    assert_eq!(st, 200);

    // A code.path over HTTP: the refusal speaks of clients, not of MCP.
    let def = json!({"name": "p", "steps": [{"name": "s", "code": {"path": "/etc/passwd"}}]});
    let (st, body) = raw(
        port,
        &format!("POST /api/v1/validate HTTP/1.1\r\n{host}\r\nContent-Type: application/json"),
        &json!({"definition": def}).to_string(),
    );
    let text = body.to_string();
    assert!(st >= 400 || text.contains("code.path"), "{st} {text}");
    assert!(text.contains("code.path") && !text.contains("over MCP cannot"), "{text}");
    drop(server);
}

#[test]
fn hosts_and_origins_the_operator_allowed_pass() {
    let w = Weft::new();
    let server = Server::start(
        &w,
        &["--http", "127.0.0.1:0", "--allow-host", "weft.test", "--allow-origin", "https://ops.example"],
    );
    let port = server.port();
    let (st, run) = raw(
        port,
        &format!(
            "POST /api/v1/runs HTTP/1.1\r\nHost: weft.test:{port}\r\nOrigin: https://ops.example\r\nContent-Type: application/json"
        ),
        &json!({"definition": waiting_def()}).to_string(),
    );
    assert_eq!(st, 201, "{run}");
    let (st, _) = raw(port, &format!("GET /api/v1/runs HTTP/1.1\r\nHost: other.test:{port}"), "");
    assert_eq!(st, 403, "only the allowed host");
    let (st, _) =
        raw(port, &format!("GET /api/v1/runs HTTP/1.1\r\nHost: weft.test:{port}\r\nOrigin: https://evil.example"), "");
    assert_eq!(st, 403, "only the allowed origin");
    // A bad --allow-origin is refused at start, with what to give.
    let out = w.run(&["serve", "--http", "127.0.0.1:0", "--allow-origin", "ops.example"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("SCHEME://HOST"), "{}", out.stderr);
}

#[test]
fn a_token_that_cannot_be_sent_is_refused_at_start() {
    let w = Weft::new();
    for bad in [" ", "two words", "tab\there"] {
        let out = w.run(&["serve", "--http", "127.0.0.1:0", "--token", bad]);
        assert_eq!(out.code, 2, "{bad:?}: {}", out.stderr);
        assert!(out.stderr.contains("token"), "{}", out.stderr);
    }
}
