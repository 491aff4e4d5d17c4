//! Who holds `weft serve --http`'s connections, so a flood of them cannot
//! lock the user out (docs/reliability.md, promise 6).
//!
//! Why: the server holds at most [`Conns::cap`] connections (descriptors
//! are finite); once ~1,024 idle sockets or event streams held them all,
//! every new connection was reset, `/healthz` and authenticated clients
//! included, and idle sockets never send a token to be refused for. So:
//!
//! - **At the cap, the oldest idle connection is dropped** for the new one
//!   (idle: no request in flight; a keep-alive connection between
//!   requests, or one that never sent a request). Only when every
//!   connection is busy is the new one closed.
//! - **Under pressure** (three quarters of the cap open) a new
//!   connection gets [`PRESSED_FIRST_REQUEST`] instead of the usual header
//!   deadline for its first request.
//! - **One peer** (an address other than loopback) holds at most a quarter
//!   of the cap; past it, its own oldest idle connection goes first.
//! - **Event streams** (SSE: `Accept: text/event-stream`) are long
//!   requests, so they are capped: at most half the cap in all, and
//!   [`STREAMS_PER_PEER`] per peer off loopback; past that, 503 with
//!   `Retry-After` (a stream resumes from `Last-Event-ID`, so nothing is
//!   lost). The rest of the connections stay for ordinary requests.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

/// The first request's header deadline for a connection opened under
/// pressure.
pub const PRESSED_FIRST_REQUEST: Duration = Duration::from_secs(2);
/// Event streams one peer (off loopback) may hold.
pub const STREAMS_PER_PEER: usize = 32;

/// The open connections and event streams.
pub(crate) struct Conns {
    cap: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    open: HashMap<u64, Entry>,
    streams: usize,
    streams_by_peer: HashMap<IpAddr, usize>,
}

struct Entry {
    peer: IpAddr,
    /// Its last request's end (or its opening).
    idle_since: Instant,
    in_flight: usize,
    evict: CancellationToken,
}

impl Conns {
    pub(crate) fn new(cap: usize) -> Arc<Conns> {
        Arc::new(Conns { cap: cap.max(4), inner: Mutex::default() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a new connection from `peer`, dropping the oldest idle one
    /// if the server (or this peer) is at its share; `None`: every
    /// connection is busy, close the new one. The bool: under pressure.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<(Conn, bool)> {
        let mut inner = self.lock();
        if !peer.is_loopback() {
            let mine = inner.open.values().filter(|e| e.peer == peer).count();
            if mine >= self.cap / 4 && !inner.evict_oldest_idle(Some(peer)) {
                return None;
            }
        }
        if inner.open.len() >= self.cap && !inner.evict_oldest_idle(None) {
            return None;
        }
        let pressed = inner.open.len() * 4 >= self.cap * 3;
        inner.next += 1;
        let id = inner.next;
        let evict = CancellationToken::new();
        inner.open.insert(id, Entry { peer, idle_since: Instant::now(), in_flight: 0, evict: evict.clone() });
        Some((Conn { id, peer, conns: self.clone(), evict }, pressed))
    }
}

impl Inner {
    /// Drops the connection idle longest (of `peer`, when given).
    fn evict_oldest_idle(&mut self, peer: Option<IpAddr>) -> bool {
        let victim = self
            .open
            .iter()
            .filter(|(_, e)| e.in_flight == 0 && peer.is_none_or(|p| e.peer == p))
            .min_by_key(|(_, e)| e.idle_since)
            .map(|(id, _)| *id);
        match victim.and_then(|id| self.open.remove(&id)) {
            Some(e) => {
                e.evict.cancel();
                true
            }
            None => false,
        }
    }
}

/// One admitted connection; dropped when it closes.
#[derive(Clone)]
pub(crate) struct Conn {
    id: u64,
    peer: IpAddr,
    conns: Arc<Conns>,
    /// Fires when the connection was dropped for a newer one.
    pub(crate) evict: CancellationToken,
}

impl Conn {
    /// A request began on this connection; it is busy until the guard
    /// (kept with the response's body) drops.
    pub(crate) fn begin(&self) -> Busy {
        if let Some(e) = self.conns.lock().open.get_mut(&self.id) {
            e.in_flight += 1;
        }
        Busy(self.clone())
    }

    /// The connection closed.
    pub(crate) fn close(&self) {
        self.conns.lock().open.remove(&self.id);
    }

    pub(crate) fn peer(&self) -> IpAddr {
        self.peer
    }
}

/// A request in flight (until its response's body ends).
pub(crate) struct Busy(Conn);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(e) = self.0.conns.lock().open.get_mut(&self.0.id) {
            e.in_flight = e.in_flight.saturating_sub(1);
            e.idle_since = Instant::now();
        }
    }
}

/// An event stream's place, given back when its body ends.
pub(crate) struct StreamSlot {
    conns: Arc<Conns>,
    peer: IpAddr,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut inner = self.conns.lock();
        inner.streams = inner.streams.saturating_sub(1);
        if let Some(n) = inner.streams_by_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                inner.streams_by_peer.remove(&self.peer);
            }
        }
    }
}

impl Conns {
    fn stream(self: &Arc<Self>, peer: IpAddr) -> Result<StreamSlot, String> {
        let mut inner = self.lock();
        let all = self.cap / 2;
        if inner.streams >= all {
            return Err(format!("{all} event streams are open, the most this server holds at once"));
        }
        let mine = inner.streams_by_peer.get(&peer).copied().unwrap_or(0);
        if !peer.is_loopback() && mine >= STREAMS_PER_PEER {
            return Err(format!("this client holds {mine} event streams, the most one client may"));
        }
        inner.streams += 1;
        *inner.streams_by_peer.entry(peer).or_default() += 1;
        Ok(StreamSlot { conns: self.clone(), peer })
    }
}

/// A response body that holds `G` until it ends (or is dropped).
pub(crate) struct Holding<G> {
    pub(crate) body: axum::body::Body,
    pub(crate) _held: G,
}

impl<G: Send + Unpin + 'static> axum::body::HttpBody for Holding<G> {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The middleware that caps event streams (see the module docs).
pub(crate) async fn cap_streams(State(conns): State<Arc<Conns>>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let stream_route =
        path == "/mcp" || path == "/api/v1/stream" || (path.starts_with("/api/v1/runs/") && path.ends_with("/events"));
    let sse = stream_route
        && req.method() == axum::http::Method::GET
        && req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/event-stream"));
    let Some(peer) = req.extensions().get::<Conn>().map(Conn::peer).filter(|_| sse) else {
        return next.run(req).await;
    };
    match conns.stream(peer) {
        Ok(slot) => {
            let response = next.run(req).await;
            let (parts, body) = response.into_parts();
            Response::from_parts(parts, axum::body::Body::new(Holding { body, _held: slot }))
        }
        Err(why) => {
            let body = serde_json::json!({
                "kind": "unavailable",
                "message": why,
                "hint": "close an event stream you no longer read, or retry later (a stream resumes from Last-Event-ID)",
            });
            let mut r = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn at_the_cap_the_oldest_idle_goes_and_busy_ones_stay() {
        let conns = Conns::new(4);
        let held: Vec<Conn> = (0..4).map(|_| conns.admit(LOCAL).unwrap().0).collect();
        let busy0 = held[0].begin();
        // The oldest idle is held[1] (held[0] is busy).
        let (_new, pressed) = conns.admit(LOCAL).unwrap();
        assert!(pressed);
        assert!(!held[0].evict.is_cancelled());
        assert!(held[1].evict.is_cancelled());
        // All busy: the new one is refused.
        let _b: Vec<Busy> = held[2..].iter().map(Conn::begin).collect();
        let _b2 = _new.begin();
        assert!(conns.admit(LOCAL).is_none());
        drop(busy0);
        assert!(conns.admit(LOCAL).is_some(), "held[0] is idle again");
    }

    #[test]
    fn one_remote_peer_holds_a_quarter() {
        let conns = Conns::new(16);
        let peer: IpAddr = "10.0.0.9".parse().unwrap();
        let mine: Vec<Conn> = (0..4).map(|_| conns.admit(peer).unwrap().0).collect();
        let _busy: Vec<Busy> = mine.iter().map(Conn::begin).collect();
        assert!(conns.admit(peer).is_none(), "a fifth busy connection of one peer");
        assert!(conns.admit("10.0.0.10".parse().unwrap()).is_some(), "another peer is served");
    }

    #[test]
    fn streams_are_capped_in_all_and_per_remote_peer() {
        let conns = Conns::new(8);
        let slots: Vec<StreamSlot> = (0..4).map(|_| conns.stream(LOCAL).unwrap()).collect();
        assert!(conns.stream(LOCAL).is_err(), "half the cap in all");
        drop(slots);
        let big = Conns::new(1000);
        let peer: IpAddr = "10.0.0.9".parse().unwrap();
        let _s: Vec<StreamSlot> = (0..STREAMS_PER_PEER).map(|_| big.stream(peer).unwrap()).collect();
        assert!(big.stream(peer).is_err());
        assert!(big.stream(LOCAL).is_ok());
    }
}
