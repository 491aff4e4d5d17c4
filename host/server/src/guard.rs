//! Who may drive `weft serve --http` from a browser: the guard in front of
//! every route (MCP, the API, the web view, and any route added later)
//! against cross-site request forgery and DNS rebinding.
//!
//! Why: weft listens on loopback without a token by default, and a run can
//! call every configured MCP server, so any web page the user visits must
//! not be able to start, cancel or answer runs. A browser lets a page send
//! a "simple" request (a form post, a `fetch` with `text/plain`) to any
//! address without asking first; it cannot hide where the request comes
//! from. So, for every request:
//!
//! 1. **Host** must name this server: on a loopback bind, `localhost`,
//!    `127.0.0.1`, `[::1]` (or any `*.localhost`) with the bound port, or a
//!    host the operator allowed (`--allow-host`). A DNS-rebinding page's
//!    requests carry its own host name and are refused. Off loopback the
//!    token guards the server and any host is taken unless an allow-list is
//!    given.
//! 2. **Origin**, when a browser sends one, must be this server's own
//!    (`http://` + the Host) or one the operator allowed (`--allow-origin`);
//!    `Sec-Fetch-Site: cross-site` / `same-site` is refused the same way.
//!    Clients that are not browsers send neither and pass.
//! 3. **Mutations** (`POST`, `PUT`, `PATCH`, `DELETE`) with a body must say
//!    `Content-Type: application/json` (or `application/*+json`): a browser
//!    cannot send that cross-origin without a preflight, which weft never
//!    grants (it sends no CORS headers).
//!
//! The web view's own requests are same-origin JSON and pass. Refusals are
//! JSON (`{"kind", "message", "hint"}`, as the API's errors) with 403 or
//! 415, and change nothing.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// What the guard accepts, from the bound address and the operator's lists.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The bound address, for the hints.
    addr: std::net::SocketAddr,
    port: u16,
    loopback: bool,
    /// Lower-case host names (no port) the operator allowed.
    hosts: Vec<String>,
    /// Lower-case origins (`scheme://host[:port]`) the operator allowed.
    origins: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, PartialEq)]
enum Refusal {
    Host(String),
    Origin(String),
    CrossSite(String),
    NotJson(String),
}

impl Guard {
    /// For a server bound at `addr`, with the operator's extra hosts and
    /// origins (`--allow-host`, `--allow-origin`).
    pub fn new(addr: std::net::SocketAddr, hosts: &[String], origins: &[String]) -> Self {
        Guard {
            addr,
            port: addr.port(),
            loopback: addr.ip().is_loopback(),
            hosts: hosts.iter().map(|h| h.trim().to_ascii_lowercase()).collect(),
            origins: origins.iter().map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase()).collect(),
        }
    }

    fn check(&self, method: &Method, headers: &HeaderMap, has_body: bool) -> Result<(), Refusal> {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("").trim().to_ascii_lowercase();
        if !self.host_allowed(&host) {
            return Err(Refusal::Host(host));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("").trim().to_ascii_lowercase();
            let own = !host.is_empty() && (origin == format!("http://{host}") || origin == format!("https://{host}"))
                || self.is_loopback_origin(&origin);
            if !own && !self.origins.contains(&origin) {
                return Err(Refusal::Origin(origin));
            }
        } else if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
            // A browser that sends no Origin (a GET) still says where from.
            if matches!(site, "cross-site" | "same-site") {
                return Err(Refusal::CrossSite(site.to_string()));
            }
        }
        let mutation = matches!(*method, Method::POST | Method::PUT | Method::PATCH | Method::DELETE);
        if mutation {
            let ctype = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
            match ctype {
                Some(t) if is_json(t) => {}
                None if !has_body => {}
                other => return Err(Refusal::NotJson(other.unwrap_or("").to_string())),
            }
        }
        Ok(())
    }

    /// On a loopback bind, `http://localhost:PORT` and `http://127.0.0.1:PORT`
    /// are the same server: a page of one may call the other.
    fn is_loopback_origin(&self, origin: &str) -> bool {
        let Some(host) = origin.strip_prefix("http://") else { return false };
        let (name, port) = split_host(host);
        self.loopback && port == Some(self.port) && is_loopback_name(name)
    }

    /// Where the server's own page is, for a hint.
    fn own_page(&self) -> String {
        if self.loopback { format!("http://{}/", self.addr) } else { "http://HOST:PORT/ (this server)".to_string() }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let (name, port) = split_host(host);
        if self.hosts.iter().any(|h| h == name || h == host) {
            return true;
        }
        if !self.loopback {
            // Reached by names weft cannot know; the token guards it, and an
            // allow-list narrows it when given.
            return self.hosts.is_empty();
        }
        is_loopback_name(name) && port.is_none_or(|p| p == self.port)
    }
}

/// `localhost`, `*.localhost`, `[::1]` or `127.x.y.z`.
fn is_loopback_name(name: &str) -> bool {
    name == "localhost"
        || name.ends_with(".localhost")
        || name == "[::1]"
        || name.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// `name` and `port` of a Host header (`[::1]:80` → `("[::1]", Some(80))`).
fn split_host(host: &str) -> (&str, Option<u16>) {
    let colon = if host.starts_with('[') { host.rfind("]:").map(|i| i + 1) } else { host.rfind(':') };
    match colon {
        Some(i) => (&host[..i], host[i + 1..].parse().ok()),
        None => (host, None),
    }
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Whether a request has a body: a length above 0, or a chunked one.
fn has_body(headers: &HeaderMap) -> bool {
    match headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()) {
        Some(n) => n.trim() != "0",
        None => headers.contains_key(header::TRANSFER_ENCODING),
    }
}

/// The middleware: refuses what [`Guard`] does not accept, before any
/// route (or the bearer check) sees it.
pub async fn guard(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let refusal = guard.check(req.method(), req.headers(), has_body(req.headers()));
    let Err(refusal) = refusal else {
        return next.run(req).await;
    };
    let page = guard.own_page();
    let (status, kind, message, hint) = match refusal {
        Refusal::Host(h) => (
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("the Host {h:?} is not this server's name"),
            format!(
                "use {page} (or localhost with the same port); to reach weft by another name, start it with --allow-host NAME"
            ),
        ),
        Refusal::Origin(o) => (
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("requests from the web origin {o:?} are refused: a page on another site may not drive weft"),
            format!("open weft's own page ({page}), or start weft serve with --allow-origin ORIGIN to trust that site"),
        ),
        Refusal::CrossSite(s) => (
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("a {s} request from a browser is refused: a page on another site may not drive weft"),
            format!("open weft's own page ({page}), or start weft serve with --allow-origin ORIGIN to trust that site"),
        ),
        Refusal::NotJson(t) => (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            if t.is_empty() {
                "a request with a body must say its type".to_string()
            } else {
                format!("the body's Content-Type {t:?} is not JSON")
            },
            "send the body as JSON with `Content-Type: application/json`".to_string(),
        ),
    };
    let body = serde_json::json!({ "kind": kind, "message": message, "hint": hint });
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    fn local() -> Guard {
        Guard::new("127.0.0.1:7777".parse().unwrap(), &[], &[])
    }

    #[test]
    fn loopback_names_with_the_port_pass_others_do_not() {
        let g = local();
        for ok in
            ["127.0.0.1:7777", "localhost:7777", "LOCALHOST:7777", "[::1]:7777", "app.localhost:7777", "localhost"]
        {
            assert_eq!(g.check(&Method::GET, &headers(&[("host", ok)]), false), Ok(()), "{ok}");
        }
        for bad in ["evil.example:7777", "evil.example", "127.0.0.1:8080", "10.0.0.1:7777", ""] {
            assert!(matches!(g.check(&Method::GET, &headers(&[("host", bad)]), false), Err(Refusal::Host(_))), "{bad}");
        }
    }

    #[test]
    fn allowed_hosts_and_origins_pass() {
        let g =
            Guard::new("127.0.0.1:7777".parse().unwrap(), &["weft.internal".into()], &["https://ops.example/".into()]);
        let h = headers(&[
            ("host", "weft.internal:7777"),
            ("origin", "https://ops.example"),
            ("content-type", "application/json"),
        ]);
        assert_eq!(g.check(&Method::POST, &h, true), Ok(()));
    }

    #[test]
    fn cross_origin_and_cross_site_are_refused_same_origin_passes() {
        let g = local();
        let evil = headers(&[("host", "127.0.0.1:7777"), ("origin", "http://evil.example")]);
        assert!(matches!(g.check(&Method::GET, &evil, false), Err(Refusal::Origin(_))));
        let null = headers(&[("host", "127.0.0.1:7777"), ("origin", "null")]);
        assert!(matches!(g.check(&Method::POST, &null, false), Err(Refusal::Origin(_))));
        let site = headers(&[("host", "127.0.0.1:7777"), ("sec-fetch-site", "cross-site")]);
        assert!(matches!(g.check(&Method::GET, &site, false), Err(Refusal::CrossSite(_))));
        let own = headers(&[
            ("host", "127.0.0.1:7777"),
            ("origin", "http://127.0.0.1:7777"),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/json; charset=utf-8"),
        ]);
        assert_eq!(g.check(&Method::POST, &own, true), Ok(()));
        let other_name = headers(&[("host", "127.0.0.1:7777"), ("origin", "http://localhost:7777")]);
        assert_eq!(g.check(&Method::GET, &other_name, false), Ok(()), "localhost and 127.0.0.1 are one server");
        let other_port = headers(&[("host", "127.0.0.1:7777"), ("origin", "http://localhost:8080")]);
        assert!(g.check(&Method::GET, &other_port, false).is_err(), "another port is another site");
    }

    #[test]
    fn mutations_with_a_body_must_be_json() {
        let g = local();
        for t in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
            let h = headers(&[("host", "127.0.0.1:7777"), ("content-type", t)]);
            assert!(matches!(g.check(&Method::POST, &h, true), Err(Refusal::NotJson(_))), "{t}");
            // A declared type that is not JSON is refused even without a body.
            assert!(matches!(g.check(&Method::POST, &h, false), Err(Refusal::NotJson(_))), "{t}");
        }
        let untyped = headers(&[("host", "127.0.0.1:7777")]);
        assert!(matches!(g.check(&Method::POST, &untyped, true), Err(Refusal::NotJson(_))));
        assert_eq!(g.check(&Method::POST, &untyped, false), Ok(()), "a bodiless POST needs no type");
        let patch = headers(&[("host", "127.0.0.1:7777"), ("content-type", "application/merge-patch+json")]);
        assert_eq!(g.check(&Method::PATCH, &patch, true), Ok(()));
    }

    #[test]
    fn off_loopback_any_host_unless_listed() {
        let any = Guard::new("0.0.0.0:7777".parse().unwrap(), &[], &[]);
        assert_eq!(any.check(&Method::GET, &headers(&[("host", "weft.corp:7777")]), false), Ok(()));
        let listed = Guard::new("0.0.0.0:7777".parse().unwrap(), &["weft.corp".into()], &[]);
        assert_eq!(listed.check(&Method::GET, &headers(&[("host", "weft.corp:7777")]), false), Ok(()));
        assert!(listed.check(&Method::GET, &headers(&[("host", "other:7777")]), false).is_err());
    }
}
