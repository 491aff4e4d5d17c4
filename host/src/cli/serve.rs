//! `weft serve [--stdio | --http [ADDR]] [--token TOKEN]`: the MCP server
//! (see `weft_server`).
//!
//! - Owns the store like `weft worker`: takes the scheduler lock (another
//!   owner: exit 2, naming it), resumes unfinished runs, executes runs
//!   other processes create.
//! - `--stdio` (the default): one MCP client on stdin/stdout; ends when
//!   the client closes stdin. Nothing but MCP is written to stdout.
//! - `--http [ADDR]` (default 127.0.0.1:7777): MCP at `http://ADDR/mcp`,
//!   the JSON API at `/api/v1` and the web view at `/` (docs/api.md).
//!   A bind address that is not loopback needs `--token` or `WEFT_TOKEN`
//!   (exit 2 otherwise); with a token every request needs
//!   `Authorization: Bearer TOKEN`. Prints `weft serve: listening on
//!   http://HOST:PORT/mcp` on stderr once bound (port 0 picks a free port).
//!   `GET /metrics` there is the Prometheus text format
//!   (docs/observability.md).
//! - SIGINT / SIGTERM: stops; runs in flight get up to 3 s, then are left
//!   to the next owner (like a crash, which the store survives).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::{Exit, bad};
use weft_runtime::app::{self, App};
use weft_runtime::config::Settings;
use weft_server::{Core, HttpOptions};

/// The default HTTP address.
pub const DEFAULT_HTTP: &str = "127.0.0.1:7777";
/// How long runs in flight get to finish when the server stops.
const GRACE: Duration = Duration::from_secs(3);

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve one MCP client over stdin/stdout (the default).
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Serve MCP over streamable HTTP at http://ADDR/mcp (ADDR: 127.0.0.1:7777 when omitted).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_HTTP)]
    http: Option<String>,
    /// The bearer token HTTP requests must carry (required for a
    /// non-loopback ADDR). Default: $WEFT_TOKEN.
    #[arg(long, value_name = "TOKEN", env = "WEFT_TOKEN", hide_env_values = true, requires = "http")]
    token: Option<String>,
    /// Another host name clients may reach weft by (repeatable). On
    /// loopback only localhost names are taken otherwise: a page that
    /// rebinds its own name to 127.0.0.1 is refused.
    #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
    allow_host: Vec<String>,
    /// A web origin (`https://ops.example`) whose pages may call weft
    /// (repeatable). Otherwise only weft's own page may.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,
}

/// Parses `FLAG ADDR` (`HOST:PORT`, `:PORT` or `PORT`).
pub fn parse_addr(text: &str, flag: &str) -> anyhow::Result<SocketAddr> {
    let t = text.trim();
    let with_host = if let Some(port) = t.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else if t.parse::<u16>().is_ok() {
        format!("127.0.0.1:{t}")
    } else {
        t.to_string()
    };
    let mut addrs = with_host.to_socket_addrs().map_err(|e| {
        bad(anyhow::anyhow!("{flag} {text:?} is not an address to listen on ({e}); use HOST:PORT, e.g. {DEFAULT_HTTP}"))
    })?;
    addrs.next().ok_or_else(|| bad(anyhow::anyhow!("{flag} {text:?} resolves to no address")))
}

/// A token a client can send: not empty, no spaces or control characters
/// (an HTTP header value cannot carry them intact).
fn check_token(token: &str) -> anyhow::Result<()> {
    if token.trim().is_empty() {
        return Err(bad(anyhow::anyhow!("the token is empty or blank: give a non-empty --token or WEFT_TOKEN")));
    }
    if let Some(c) = token.chars().find(|c| c.is_whitespace() || c.is_control() || !c.is_ascii()) {
        return Err(bad(anyhow::anyhow!(
            "the token holds {c:?}, which a client cannot send in `Authorization: Bearer TOKEN`; use printable ASCII without spaces"
        )));
    }
    Ok(())
}

/// `--allow-origin` must be an origin as browsers send it.
fn check_origin(origin: &str) -> anyhow::Result<()> {
    let o = origin.trim().trim_end_matches('/');
    let rest = o.strip_prefix("http://").or_else(|| o.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains('/') => Ok(()),
        _ => Err(bad(anyhow::anyhow!(
            "--allow-origin {origin:?} is not a web origin; give SCHEME://HOST[:PORT], e.g. https://ops.example"
        ))),
    }
}

pub fn run(settings: &Settings, args: ServeArgs) -> anyhow::Result<Exit> {
    // Refuse a bad listening setup before touching the store.
    let http = match &args.http {
        None => None,
        Some(a) => {
            let addr = parse_addr(a, "--http")?;
            let token = args.token.clone();
            if let Some(t) = &token {
                check_token(t)?;
            }
            for o in &args.allow_origin {
                check_origin(o)?;
            }
            if token.is_none() && !weft_server::is_loopback_only(&addr) {
                return Err(bad(anyhow::anyhow!(
                    "refusing to serve on {addr} without a token: any address but loopback needs --token TOKEN or WEFT_TOKEN (clients then send `Authorization: Bearer TOKEN`)"
                )));
            }
            Some(HttpOptions {
                addr,
                token,
                allowed_hosts: args.allow_host.clone(),
                allowed_origins: args.allow_origin.clone(),
            })
        }
    };
    let app = App::open(settings)?;
    let owner = match app.lock_for_good()? {
        Ok(l) => l,
        Err(pid) => {
            return Err(bad(anyhow::anyhow!(
                "the store {} is owned by {}: only one process executes a store's runs; stop it, or point weft serve at another data directory (--data-dir)",
                app.store_name,
                app::holder(pid)
            )));
        }
    };
    let _rt = app.rt.enter();
    if http.is_some() {
        // `GET /metrics` beside the API.
        weft_runtime::telemetry::metrics::install();
    }
    let engine = app.engine()?;
    // Extra tool sources (`weft_server::ToolSource`) besides the templates' own:
    // the proxy's `<server>__<tool>` tools.
    let extra: Vec<Arc<dyn weft_server::ToolSource>> = vec![Arc::new(weft_server::ProxyTools::default())];
    let core =
        Core::new(settings.clone(), app.store.clone(), engine.clone(), app.sandbox()?, app.upstreams.clone(), extra);
    weft_runtime::telemetry::say(&format!(
        "weft serve: {} {} (pid {})",
        owns(&app),
        app.store_name,
        std::process::id()
    ));
    let tenure = weft_runtime::owner::Tenure::new(owner, app.backend.clone());
    let result = app.block_on(async {
        let stop = CancellationToken::new();
        let recovered = core.recover().await?;
        let owner = tokio::spawn(core.clone().own_store(recovered, stop.clone(), tenure));
        // Fires cron schedules (`weft schedule add`); ends with the runtime.
        let schedules = tokio::spawn(engine.clone().run_schedules());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let served = async {
            match http {
                Some(opts) => {
                    let secured = if opts.token.is_some() { " (bearer token required)" } else { "" };
                    weft_server::serve_http(core.clone(), opts, stop.clone(), |a| {
                        weft_runtime::telemetry::say(&format!("weft serve: listening on http://{a}/mcp{secured}"));
                        weft_runtime::telemetry::say(&format!(
                            "weft serve: the web view is http://{a}/ and the JSON API http://{a}/api/v1"
                        ));
                    })
                    .await
                }
                None => weft_server::serve_stdio(core.clone(), stop.clone()).await,
            }
        };
        let result = tokio::select! {
            r = served => r.map_err(|e| match e {
                weft_server::ServeError::Listen(_) => bad(e),
                other => other.into(),
            }),
            _ = tokio::signal::ctrl_c() => Ok(()),
            _ = term.recv() => Ok(()),
        };
        stop.cancel();
        schedules.abort();
        let tenure = owner.await.ok();
        let active = engine.busy_runs();
        if active > 0 {
            let until = Instant::now() + GRACE;
            while engine.busy_runs() > 0 && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let left = engine.busy_runs();
            if left > 0 {
                weft_runtime::telemetry::say(&format!(
                    "weft serve: stopped; {left} unfinished run(s) resume when weft serve or weft worker starts again"
                ));
            }
        }
        // Parked runs (waiting for a signal or an event) write nothing when
        // their drivers stop; the next owner parks them again.
        engine.abort_all();
        if let Some(t) = tenure {
            t.leave().await;
        }
        result
    });
    app.shutdown_upstreams();
    result?;
    Ok(Exit::Success)
}

/// How the process holds the store, for its first line: the one owner of
/// an SQLite file, or a worker among others on PostgreSQL.
pub fn owns(app: &App) -> &'static str {
    if app.is_shared() { "works on" } else { "owns" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_loopback() {
        assert_eq!(parse_addr(":8080", "--http").unwrap(), "127.0.0.1:8080".parse().unwrap());
        assert_eq!(parse_addr("9000", "--http").unwrap(), "127.0.0.1:9000".parse().unwrap());
        assert_eq!(parse_addr("0.0.0.0:1", "--http").unwrap(), "0.0.0.0:1".parse().unwrap());
        assert!(parse_addr("not an address", "--http").is_err());
    }
}
