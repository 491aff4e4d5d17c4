//! The use-case layer: what any front end asks of weft about runs, as
//! typed requests with typed refusals. The CLI, the MCP tools, the HTTP
//! API (and the A2A endpoint to come) are adapters over it: each decodes
//! its wire's request into these types, calls one method, and phrases the
//! answer and each refusal in its reader's terms (an MCP client gets tool
//! names, an HTTP client JSON paths, a person at a terminal commands).
//!
//! | module | owns |
//! |---|---|
//! | `mod.rs` | [`UseCases`] (one per audience, over the engine that owns the store), finding a run ([`LookupRefused`]) |
//! | [`start`] | starting a run of a saved template or a definition ([`StartRequest`] → [`Started`] or [`StartRefused`]) |
//! | [`settle`] | waiting for a run to end or to wait for input, reporting progress ([`Progress`]) |
//! | [`catalog`] | what a definition can name: plugins and the configured servers' tools ([`catalog::PluginView`], [`catalog::ServerView`]) |
//! | [`answer`] | signal, emit and cancel ([`Signaled`], [`SignalRefused`], [`EmitRefused`], [`Canceled`]) |
//! | [`notifications`] | a run's notifications (the outbox): list, send a failed one again ([`NotificationView`]) |
//! | [`schedules`] | cron schedules: add, list, pause or resume, remove ([`ScheduleRequest`], [`ScheduleRefused`]) |
//! | [`outside`] | the same from a process that may not own the store (`weft signal`, `weft emit`, `weft runs cancel`) |
//!
//! Operations this wave adds (retrying a run) belong here too, so no
//! front end writes them a second time.

pub mod answer;
pub mod catalog;
pub mod notifications;
pub mod outside;
pub mod retry;
pub mod schedules;
pub mod settle;
pub mod start;

use std::sync::Arc;

use weft_engine::{Engine, RunId, RunRecord, Store, StoreError};

use crate::pipeline::Pipeline;

pub use answer::{Canceled, EmitRefused, SignalRefused, Signaled, Taken, WaitRefused};
pub use notifications::{NotificationView, ResendRefused};
pub use schedules::{ScheduleRefused, ScheduleRequest};
pub use settle::{FALLBACK_POLL, Fresh, PROGRESS_AFTER, Progress, ProgressReport, settles};
pub use start::{RunSource, StartRefused, StartRequest, Started};

/// The use cases over the engine that drives this store's runs, with the
/// prepare-a-run pipeline whose hints are written for one audience.
#[derive(Clone)]
pub struct UseCases {
    engine: Engine,
    store: Arc<dyn Store>,
    pipeline: Pipeline,
}

impl UseCases {
    /// The use cases of `engine` over `store`, preparing runs with
    /// `pipeline` (its audience is whom the refusals' hints are for).
    pub fn new(engine: Engine, store: Arc<dyn Store>, pipeline: Pipeline) -> UseCases {
        UseCases { engine, store, pipeline }
    }

    /// The pipeline runs are prepared with (validation and template saving
    /// use it directly).
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The stored run whose id is `text`.
    pub async fn run(&self, text: &str) -> Result<RunRecord, LookupRefused> {
        let id = parse_run_id(text)?;
        self.store.run(&id).await.map_err(LookupRefused::Failed)?.ok_or(LookupRefused::NotFound(id))
    }
}

/// `text` as a run id.
pub fn parse_run_id(text: &str) -> Result<RunId, LookupRefused> {
    text.trim().parse().map_err(|_| LookupRefused::NotAnId(text.to_string()))
}

/// Why a run named by a client cannot be found.
#[derive(Debug, thiserror::Error)]
pub enum LookupRefused {
    /// The text is not a run id (`r_…`).
    #[error("{0:?} is not a run id")]
    NotAnId(String),
    /// No run has this id.
    #[error("no run `{0}`")]
    NotFound(RunId),
    /// The store failed (trying again can help).
    #[error("reading the run: {0}")]
    Failed(#[source] StoreError),
}
