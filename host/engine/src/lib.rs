//! The durable scheduler: state machine, retry policy, recovery; sees only traits.
//!
//! - [`state`]: the one state machine of runs, steps and attempts.
//! - [`store`]: the persistence seam ([`store::Store`]), [`memstore`] for tests.
//! - [`runner`]: the seam that does code and tool steps ([`runner::StepRunner`]).
//! - [`clock`], [`rng`]: injected time and randomness.
//! - [`retry`]: retry decisions and delays.
//! - [`size_limits`]: size and depth caps on what is accepted and stored.
//! - [`scheduler`]: the [`Engine`] that creates, drives, recovers and cancels runs.
//! - [`delivery`]: the outbox of notifications and the idempotency keys of starts.
//! - [`view`]: the `runs show --json` shape.
//! - [`compare`]: two runs side by side, step by step (`runs diff`, `run_compare`).
//! - [`trace`]: a run's W3C trace context (stored with it) and the metrics switch.

pub mod bounded;
pub mod cancel;
pub mod clock;
pub mod compare;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod delivery;
pub mod error;
pub mod ids;
pub mod memstore;
mod memstore_outbox;
pub mod model_glue;
pub mod notices;
pub mod outside;
pub mod recorded;
pub mod resume;
pub mod retry;
pub mod rng;
pub mod runner;
pub mod scheduler;
pub mod size_limits;
pub mod state;
pub mod store;
pub mod stored;
pub mod template_cache;
pub mod trace;
pub mod view;

pub use cancel::CancelToken;
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{ErrorKind, StepError};
pub use ids::{AttemptNo, ItemIndex, RunId, RunIds, Seq};
pub use memstore::MemStore;
pub use rng::{Rng, SeededRng};
pub use runner::{Answer, EventSink, Question, StepFailure, StepOutput, StepRequest, StepRunner};
pub use scheduler::{
    Change, Changes, Delivered, EmitAnswer, Engine, EngineConfig, EngineError, Planner, RunChanges, RunEnd, RunOptions,
    SignalAnswer,
};
pub use state::{RunState, StepState, TransitionRefused};
pub use store::{Batch, RunRecord, Store, StoreError, StoreWatch, Write};
pub use weft_model::Labels;
