//! `GET /runs/{id}/events`: a run's event log as JSON pages, or, with
//! `Accept: text/event-stream`, as a live server-sent-event stream. Each
//! SSE event's `id` is its `seq`, so a client that lost the connection
//! resumes with `Last-Event-ID` (or `?after=`) and misses nothing and
//! repeats nothing; the stream ends after the run's final event. New
//! events are read when the engine pushes a commit of the run, not on a
//! timer (a slow read catches anything missed).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use weft_engine::view::{EventPage, EventView};
use weft_engine::{Changes, RunId, RunState, Seq};

use super::{ApiError, Params};
use crate::Core;

/// Events read from the store at a time.
const PAGE: usize = 500;

/// `?after=SEQ&limit=N`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EventsQuery {
    /// Only events after this `seq` (default 0: from the first).
    pub after: Option<u64>,
    /// At most this many (JSON pages; default 500, at most 1000).
    pub limit: Option<usize>,
}

pub(super) async fn events(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    Params(q): Params<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let rec = super::runs::load(&core, &id).await?;
    let wants_stream = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"));
    if !wants_stream {
        let limit = q.limit.unwrap_or(PAGE).clamp(1, 1000);
        let after = q.after.unwrap_or(0);
        // One more than asked: whether more are stored already.
        let read = core.store.events_after(&rec.id, Seq(after), limit + 1).await.map_err(ApiError::internal)?;
        return Ok(Json(EventPage::of(&rec, read, after, limit)).into_response());
    }
    // Resume after the last event the client saw.
    let resumed = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    let after = resumed.or(q.after).unwrap_or(0);
    // Subscribed before the first read: no commit falls in between.
    let tail =
        Tail { core: core.clone(), run: rec.id, after, changes: core.engine.subscribe(), pending: vec![], done: false };
    let stream = futures::stream::unfold(tail, |mut t| async move {
        let e = t.next().await?;
        Some((Ok::<_, Infallible>(e), t))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}

/// The state of one SSE stream.
struct Tail {
    core: Arc<Core>,
    run: RunId,
    /// The last `seq` sent.
    after: u64,
    changes: Changes,
    /// Read, not sent yet (in order, reversed).
    pending: Vec<EventView>,
    done: bool,
}

impl Tail {
    /// The next SSE event; `None` once the run's last event was sent.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.pending.pop() {
                self.after = e.seq;
                let data = serde_json::to_string(&e).unwrap_or_default();
                return Some(Event::default().id(e.seq.to_string()).event(e.kind.clone()).data(data));
            }
            if self.done {
                return None;
            }
            // Read the state first: if it is final, every event is stored.
            let state = match self.core.store.run(&self.run).await {
                Ok(Some(r)) => r.state,
                _ => return None,
            };
            let page = match self.core.store.events_after(&self.run, Seq(self.after), PAGE).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(run = %self.run, error = %e, "cannot read the run's events for a stream");
                    return None;
                }
            };
            let full = page.len() == PAGE;
            self.pending = page.iter().rev().map(EventView::of).collect();
            if !self.pending.is_empty() {
                // A full page: more may be stored; read again after sending it.
                if !full && state.is_terminal() {
                    self.done = true;
                }
                continue;
            }
            if state.is_terminal() {
                return None;
            }
            tokio::select! {
                _ = self.changes.of_run(&self.run) => {}
                _ = tokio::time::sleep(weft_runtime::usecase::FALLBACK_POLL) => {}
            }
        }
    }
}

/// One run's new state, on `GET /stream`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunChange {
    pub run_id: String,
    pub state: RunState,
}

/// `GET /stream`: server-sent events `run` (`{"run_id", "state"}`) for every
/// run created or changing state in this process, as they commit, and
/// `missed` when some went by (read `GET /runs` again). What a page of live
/// runs listens to.
pub(super) async fn runs(State(core): State<Arc<Core>>) -> Response {
    let changes = core.engine.subscribe();
    let stream = futures::stream::unfold((changes, Vec::<Event>::new()), |(mut changes, mut ready)| async move {
        loop {
            if let Some(e) = ready.pop() {
                return Some((Ok::<_, Infallible>(e), (changes, ready)));
            }
            match changes.next().await? {
                weft_engine::Change::Missed => ready.push(Event::default().event("missed").data("{}")),
                weft_engine::Change::Committed(b) => {
                    for w in b.writes.iter().rev() {
                        let change = match w {
                            weft_engine::Write::CreateRun { run, .. } => {
                                RunChange { run_id: run.id.to_string(), state: RunState::Submitted }
                            }
                            weft_engine::Write::RunState { run, to, .. } => {
                                RunChange { run_id: run.to_string(), state: *to }
                            }
                            _ => continue,
                        };
                        let data = serde_json::to_string(&change).unwrap_or_default();
                        ready.push(Event::default().event("run").data(data));
                    }
                }
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}
