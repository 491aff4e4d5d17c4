//! A connection flood does not lock the user out:
//! past the connection cap the oldest idle connection makes room, event
//! streams are capped at half the connections, so `/healthz` and an
//! authenticated client stay served with 1,100 idle sockets, with a client
//! that keeps reconnecting 1,050, and with 1,030 event streams open on a
//! parked run. Loopback only; the server's own defaults.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::Weft;
use crate::csrf::raw;
use crate::serve::Server;

const TOKEN: &str = "tok-flood-7c1e";

/// `GET path` on a fresh connection within `limit`: its status, or 0.
fn get(port: u16, path: &str, limit: Duration) -> u16 {
    let Ok(mut s) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), limit) else { return 0 };
    s.set_read_timeout(Some(limit)).unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).is_err() {
        return 0;
    }
    let mut head = [0u8; 64];
    match s.read(&mut head) {
        Ok(n) if n > 12 => std::str::from_utf8(&head[9..12]).ok().and_then(|c| c.parse().ok()).unwrap_or(0),
        _ => 0,
    }
}

fn served(port: u16) -> bool {
    get(port, "/healthz", Duration::from_secs(2)) == 200 && get(port, "/api/v1/runs", Duration::from_secs(2)) == 200
}

#[test]
fn idle_and_reconnecting_floods_leave_the_user_served() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0", "--token", TOKEN]);
    let port = server.port();
    // 1,100 idle sockets (no request, no token).
    let idle: Vec<TcpStream> = (0..1100).filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok()).collect();
    assert!(idle.len() >= 1000, "the test could open only {} sockets", idle.len());
    for k in 0..5 {
        let t = Instant::now();
        assert!(served(port), "with 1,100 idle sockets, try {k} was not served");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
    drop(idle);

    // A client that keeps 1,050 sockets open, reconnecting all the time.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut held = std::collections::VecDeque::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
                    held.push_back(s);
                }
                if held.len() > 1050 {
                    held.pop_front();
                }
            }
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    let mut ok = 0;
    for _ in 0..40 {
        ok += usize::from(get(port, "/healthz", Duration::from_secs(2)) == 200);
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flooder.join().unwrap();
    assert!(ok >= 38, "only {ok} of 40 health checks answered while a client reconnected 1,050 sockets");
    let (done, printed) = server.stop();
    assert!(done, "{printed}");
}

#[test]
fn a_thousand_event_streams_leave_the_user_served() {
    let w = Weft::new();
    let server = Server::start(&w, &["--http", "127.0.0.1:0", "--token", TOKEN]);
    let port = server.port();
    let auth = format!("Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json");
    let def = json!({"definition": {"name": "parked", "steps": [{"name": "w", "wait": {"prompt": "go?"}}]}});
    let (st, run) = raw(port, &format!("POST /api/v1/runs HTTP/1.1\r\n{auth}"), &def.to_string());
    assert_eq!(st, 201, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    // 1,030 event streams on the parked run, each on its own connection.
    let mut streams = vec![];
    let (mut open, mut refused) = (0, 0);
    for _ in 0..1030 {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { continue };
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let req = format!(
            "GET /api/v1/runs/{id}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut head = [0u8; 12];
        match s.read_exact(&mut head) {
            Ok(()) if &head[9..12] == b"200" => open += 1,
            Ok(()) if &head[9..12] == b"503" => refused += 1,
            other => panic!("a stream got {other:?} {:?}", String::from_utf8_lossy(&head)),
        }
        streams.push(s);
    }
    assert!(open >= 256 && refused > 0, "{open} streams open, {refused} refused");
    for k in 0..5 {
        assert!(served(port), "with {open} event streams open, try {k} was not served");
    }
    // A real client's call completes: the run is answered and ends.
    let (st, body) = raw(
        port,
        &format!("POST /api/v1/runs/{id}/steps/w/signal HTTP/1.1\r\n{auth}"),
        &json!({"data": {"ok": true}}).to_string(),
    );
    assert!((200..300).contains(&st), "{st} {body}");
    drop(streams);
    let (done, printed) = server.stop();
    assert!(done, "{printed}");
    eprintln!("1,030 event streams: {open} open, {refused} refused with 503; the user was served");
}
