//! `weft serve --http`: MCP over streamable HTTP (rmcp's
//! `StreamableHttpService` in axum, at `/mcp`), the JSON API (`/api/v1`),
//! the web view (`/`), the bearer token check in front of MCP and the
//! API, and [`crate::guard`] (no other site's page, no other host name) in
//! front of everything.
//!
//! Binding to anything but a loopback address needs a token (refused at
//! start otherwise, by the CLI). With a token, every request must carry
//! `Authorization: Bearer TOKEN`, or gets 401. Tokens are compared in
//! constant time (as SHA-256 digests, so their lengths do not leak either)
//! and never logged.
//!
//! A client cannot starve the server (docs/reliability.md, promise 6): the
//! accept loop is weft's own (hyper's HTTP/1 connection, as axum's), with
//! a deadline for a request's headers that also closes idle keep-alive
//! connections ([`HEADER_READ_TIMEOUT`]), a cap on open connections sized
//! to the process's file-descriptor limit (at it the oldest idle
//! connection makes room, and event streams are capped: `crate::conns`;
//! a run's steps keep their descriptors), idle
//! 2025-11-25 sessions expire ([`SESSION_IDLE`]) and at most
//! [`MAX_SESSIONS`] live at once (past it, 503 for a new one).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{Core, ServeError, WeftServer};
use crate::conns::{Conn, Conns};
use crate::mcp::oversized::Kept;

/// Where and how to listen.
#[derive(Clone)]
pub struct HttpOptions {
    /// The address to bind (port 0: any free port).
    pub addr: SocketAddr,
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
    /// Host names besides the bound address's that requests may name
    /// (`--allow-host`; see `guard.rs`).
    pub allowed_hosts: Vec<String>,
    /// Web origins whose pages may call weft (`--allow-origin`).
    pub allowed_origins: Vec<String>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself.
        f.debug_struct("HttpOptions")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .finish()
    }
}

/// Whether binding `addr` only listens on this machine.
pub fn is_loopback_only(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// The expected token, kept as its digest.
struct Bearer {
    digest: [u8; 32],
}

impl Bearer {
    fn new(token: &str) -> Self {
        Bearer { digest: Sha256::digest(token.as_bytes()).into() }
    }

    /// Constant time in the content of `given`.
    fn matches(&self, given: &str) -> bool {
        let d: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        let diff = d.iter().zip(self.digest.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }
}

async fn check_bearer(State(bearer): State<Arc<Bearer>>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    match given {
        Some(t) if bearer.matches(t) => next.run(req).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer realm=\"weft\"")],
            "401 Unauthorized: send `Authorization: Bearer <token>` with the token weft serve was started with\n",
        )
            .into_response(),
    }
}

/// How long a client has to send a request's headers, and how long a
/// keep-alive connection may sit idle between requests.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most 2025-11-25 MCP sessions alive at once.
pub const MAX_SESSIONS: usize = 1000;
/// A session without a request for this long is closed.
pub const SESSION_IDLE: Duration = Duration::from_secs(300);
/// The most connections open at once, whatever the descriptor limit.
const MAX_CONNECTIONS: usize = 1024;

/// Connections the server may hold open: [`MAX_CONNECTIONS`], or a quarter
/// of the process's file-descriptor limit when that is lower, so guests,
/// upstream MCP servers and the store always have descriptors left.
fn connection_cap() -> usize {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        #[allow(unsafe_code)]
        // SAFETY: getrlimit fills the struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            return MAX_CONNECTIONS.min((lim.rlim_cur / 4) as usize).max(16);
        }
    }
    MAX_CONNECTIONS
}

/// Refuses a new 2025-11-25 session (an `initialize` POST without
/// `Mcp-Session-Id`) while [`MAX_SESSIONS`] are alive. Only then is the
/// body read to tell an `initialize` from a sessionless 2026-07-28 call.
async fn cap_sessions(State(sessions): State<Arc<LocalSessionManager>>, req: Request, next: Next) -> Response {
    let maybe_new = req.method() == axum::http::Method::POST && !req.headers().contains_key("mcp-session-id");
    if !maybe_new || sessions.sessions.read().await.len() < MAX_SESSIONS {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "413: the request body is over 1 MiB\n").into_response();
    };
    let initialize = serde_json::from_slice::<serde_json::Value>(&bytes)
        .is_ok_and(|v| v.get("method").and_then(|m| m.as_str()) == Some("initialize"));
    if initialize {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "30")],
            format!(
                "503: {MAX_SESSIONS} MCP sessions are open; close one (DELETE with its Mcp-Session-Id) or retry later\n"
            ),
        )
            .into_response();
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

/// A body of at most `cap` bytes; past it, what is kept of it (read to
/// its end, not kept whole); `Err(None)` when it cannot be read.
async fn read_capped(body: axum::body::Body, cap: usize) -> Result<axum::body::Bytes, Option<Kept>> {
    use futures::StreamExt as _;
    let mut stream = body.into_data_stream();
    let mut read: Vec<u8> = Vec::new();
    let mut over: Option<Kept> = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| None)?;
        match &mut over {
            None if read.len() + chunk.len() <= cap => read.extend_from_slice(&chunk),
            None => {
                let mut kept = Kept::of(&read);
                kept.push(&chunk);
                read = Vec::new();
                over = Some(kept);
            }
            Some(kept) => kept.push(&chunk),
        }
    }
    match over {
        Some(kept) => Err(Some(kept)),
        None => Ok(read.into()),
    }
}

/// A body rmcp cannot read as a JSON-RPC message gets 415 from it, as if
/// the type were wrong; a client that did send `application/json` gets
/// 400 with a JSON-RPC error instead: -32700 (parse error) for text that
/// is not JSON, -32600 (invalid request) for JSON that is not a message.
async fn mcp_body_errors(State(cap): State<usize>, req: Request, next: Next) -> Response {
    let json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    if req.method() != axum::http::Method::POST || !json {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match read_capped(body, cap).await {
        Ok(bytes) => bytes,
        // Over the cap: a JSON-RPC error naming it, with the request's id.
        Err(Some(kept)) => return (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(kept.refusal(cap))).into_response(),
        Err(None) => return (StatusCode::BAD_REQUEST, "400: the request body could not be read\n").into_response(),
    };
    // A key given twice (`"name"` in a definition, or the message's `id`):
    // JSON keeps one silently, so the request is refused, naming it.
    if let Ok(Err(e)) = std::str::from_utf8(&bytes).map(weft_model::check_json_text)
        && let Some(path) = &e.path
    {
        let message = format!("Invalid Request: {} (at {path}, line {} column {})", e.message, e.line, e.column);
        let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}});
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    let response = next.run(Request::from_parts(parts, axum::body::Body::from(bytes.clone()))).await;
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    let detail = axum::body::to_bytes(response.into_body(), 64 << 10).await.unwrap_or_default();
    let (code, message) = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Err(e) => (-32700, format!("Parse error: the body is not JSON ({e})")),
        Ok(_) => (
            -32600,
            format!(
                "Invalid Request: the body is JSON but not a JSON-RPC 2.0 message ({})",
                String::from_utf8_lossy(&detail)
            ),
        ),
    };
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// Serves MCP at `http://ADDR/mcp` until `stop`. `on_bound` gets the
/// address actually bound (for port 0) before the first request.
pub async fn serve_http(
    core: Arc<Core>,
    opts: HttpOptions,
    stop: CancellationToken,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .map_err(|e| ServeError::Listen(format!("cannot listen on {}: {e}", opts.addr)))?;
    let local = listener.local_addr()?;
    // A request may carry an input and a definition at their caps (over
    // them, the tool answers with the cap named); past that, 413.
    let body_cap = core.message_cap();
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        .with_max_request_body_bytes(body_cap)
        // A stateless (2026-07-28) call that sends nothing before its result
        // is answered as plain JSON, not as a one-event SSE stream (rmcp
        // falls back to SSE when the handler notifies first): W9 over MCP.
        .with_json_response(true)
        // Host and Origin are checked for every route by `crate::guard`,
        // with the operator's allow-lists, before rmcp sees the request.
        .disable_allowed_hosts();
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let sessions = Arc::new(sessions);
    let api = crate::api::router(core.clone()).layer(axum::extract::DefaultBodyLimit::max(body_cap));
    let a2a = crate::a2a::router(core.clone()).layer(axum::extract::DefaultBodyLimit::max(body_cap));
    let service: StreamableHttpService<WeftServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(WeftServer::new(core.clone())), sessions.clone(), config);
    let mcp = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(body_cap, mcp_body_errors))
        .layer(middleware::from_fn_with_state(sessions, cap_sessions));
    let mut app = mcp.merge(api).merge(a2a);
    if let Some(token) = &opts.token {
        app = app.layer(middleware::from_fn_with_state(Arc::new(Bearer::new(token)), check_bearer));
    }
    // The web view's page and assets hold no data: outside the token check
    // (the page asks for the token and sends it with every API call).
    let app = app.merge(crate::web::router());
    let conns = Conns::new(connection_cap());
    let app = app.layer(middleware::from_fn_with_state(conns.clone(), crate::conns::cap_streams));
    // Outermost: no route (nor the token check) sees a request from
    // another site or to another host name.
    let guard = Arc::new(crate::guard::Guard::new(local, &opts.allowed_hosts, &opts.allowed_origins));
    let app = app.layer(middleware::from_fn_with_state(guard, crate::guard::guard));
    on_bound(local);
    accept_loop(listener, app, conns, stop).await;
    Ok(())
}

/// Accepts connections until `stop`, each served by hyper with the
/// header-read deadline, at most [`connection_cap`] at once; at the cap
/// the oldest idle one makes room ([`crate::conns`]).
async fn accept_loop(listener: tokio::net::TcpListener, app: axum::Router, conns: Arc<Conns>, stop: CancellationToken) {
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            a = listener.accept() => a,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors (EMFILE) or a connection reset before
                // it was accepted: wait a little rather than spin.
                tracing::warn!(error = %e, "weft serve: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some((conn, pressed)) = conns.admit(peer.ip()) else {
            // Every connection is busy: closed at once, before anything is read.
            drop(stream);
            continue;
        };
        // A response hyper writes in more than one piece (an MCP result:
        // its head, then its body) must not wait for the client's delayed
        // ACK of the first (Nagle): ~40 ms per call on a kept-alive
        // connection, as every pooling client (httpx, undici) keeps them.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "weft serve: cannot set TCP_NODELAY");
        }
        let service = ConnService { app: app.clone(), conn: conn.clone() };
        let stop = stop.clone();
        tasks.spawn(async move {
            let header_deadline = if pressed { crate::conns::PRESSED_FIRST_REQUEST } else { HEADER_READ_TIMEOUT };
            let served = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_deadline)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let mut served = std::pin::pin!(served);
            tokio::select! {
                _ = served.as_mut() => {}
                // Dropped for a newer connection: it was idle.
                _ = conn.evict.cancelled() => {}
                _ = stop.cancelled() => {
                    served.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(5), served).await;
                }
            }
            conn.close();
        });
    }
    // Stopping: let open connections finish their graceful shutdown.
    let _ = tokio::time::timeout(Duration::from_secs(6), async { while tasks.join_next().await.is_some() {} }).await;
}

/// The app, for one connection: each request carries the connection (for
/// [`crate::conns::cap_streams`]) and keeps it busy until its response's
/// body ends.
#[derive(Clone)]
struct ConnService {
    app: axum::Router,
    conn: Conn,
}

impl hyper::service::Service<Request<hyper::body::Incoming>> for ConnService {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response, Self::Error>> + Send>>;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Self::Future {
        let busy = self.conn.begin();
        let mut req = req.map(axum::body::Body::new);
        req.extensions_mut().insert(self.conn.clone());
        let call = hyper::service::Service::call(&hyper_util::service::TowerToHyperService::new(self.app.clone()), req);
        Box::pin(async move {
            let response = call.await?;
            let (parts, body) = response.into_parts();
            Ok(Response::from_parts(parts, axum::body::Body::new(crate::conns::Holding { body, _held: busy })))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_exactly() {
        let b = Bearer::new("s3cret");
        assert!(b.matches("s3cret"));
        assert!(!b.matches("s3cre"));
        assert!(!b.matches("s3cret "));
        assert!(!b.matches(""));
    }

    #[test]
    fn only_loopback_addresses_are_loopback() {
        assert!(is_loopback_only(&"127.0.0.1:1".parse().unwrap()));
        assert!(is_loopback_only(&"[::1]:1".parse().unwrap()));
        assert!(!is_loopback_only(&"0.0.0.0:1".parse().unwrap()));
        assert!(!is_loopback_only(&"192.168.1.2:1".parse().unwrap()));
    }

    #[test]
    fn debug_never_shows_the_token() {
        let o = HttpOptions {
            addr: "127.0.0.1:1".parse().unwrap(),
            token: Some("s3cret".into()),
            allowed_hosts: vec![],
            allowed_origins: vec![],
        };
        assert!(!format!("{o:?}").contains("s3cret"));
    }
}
