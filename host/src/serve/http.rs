//! MCP over streamable HTTP (rmcp's `StreamableHttpService` in axum, at
//! `/mcp`) and the bearer token check in front of it.
//!
//! Binding to anything but a loopback address needs a token (refused at
//! start otherwise, by the CLI). With a token, every request must carry
//! `Authorization: Bearer TOKEN`, or gets 401. Tokens are compared in
//! constant time (as SHA-256 digests, so their lengths do not leak either)
//! and never logged.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{Core, WeftServer};

/// Where and how to listen.
#[derive(Clone)]
pub struct HttpOptions {
    /// The address to bind (port 0: any free port).
    pub addr: SocketAddr,
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself.
        f.debug_struct("HttpOptions")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "***"))
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

/// Serves MCP at `http://ADDR/mcp` until `stop`. `on_bound` gets the
/// address actually bound (for port 0) before the first request.
pub async fn serve_http(
    core: Arc<Core>,
    opts: HttpOptions,
    stop: CancellationToken,
    on_bound: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .map_err(|e| crate::cli::bad(anyhow::anyhow!("cannot listen on {}: {e}", opts.addr)))?;
    let local = listener.local_addr()?;
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    if !is_loopback_only(&opts.addr) {
        // Reached by other names than localhost; the token guards it.
        config = config.disable_allowed_hosts();
    }
    let service: StreamableHttpService<WeftServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(WeftServer::new(core.clone())), Default::default(), config);
    let mut app = axum::Router::new().nest_service("/mcp", service);
    if let Some(token) = &opts.token {
        app = app.layer(middleware::from_fn_with_state(Arc::new(Bearer::new(token)), check_bearer));
    }
    on_bound(local);
    axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await?;
    Ok(())
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
        let o = HttpOptions { addr: "127.0.0.1:1".parse().unwrap(), token: Some("s3cret".into()) };
        assert!(!format!("{o:?}").contains("s3cret"));
    }
}
