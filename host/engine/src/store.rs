//! The persistence seam. The engine owns this trait; `weft-store-sqlite`
//! implements it, and [`crate::memstore::MemStore`] implements it in memory
//! for tests.
//!
//! Writes come in [`Batch`]es that commit atomically: every write of a
//! batch is applied, or none is. State writes carry the state they expect
//! to replace (`from`): a store refuses a batch whose expectation does not
//! hold ([`StoreError::Conflict`]), so two writers can never both apply a
//! transition. An implementation may group-commit many callers' batches in
//! one transaction; `commit` returns once the caller's batch is durable.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::delivery::{DeliveryFilter, DeliveryRecord, DeliveryState, StartKeyRecord};
use crate::error::StepError;
use crate::ids::{AttemptNo, ItemIndex, RunId, Seq};
pub use crate::outside::{InboxKind, InboxRecord, ScheduleRecord, WaitKind, WaitRecord};
use crate::state::{AttemptState, RunState, StepState};

/// What a commit survives: the one vocabulary of `durability` in
/// `weft.toml`, each store mapping it to its own settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Survives a process crash (a power loss may lose the last moments).
    #[default]
    Normal,
    /// Survives power loss: every group commit is flushed to disk.
    Full,
}

/// A run to create, with the plan it pins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    pub id: RunId,
    /// The template's name, or the definition's `name` for an inline run.
    pub template: String,
    pub version: Option<u32>,
    /// The definition as it will execute (pinned at creation); shared by
    /// the runs of one plan.
    pub definition: Arc<Value>,
    pub input: Value,
    pub parent: Option<RunId>,
    pub depth: u32,
    pub concurrency_key: Option<String>,
    pub created_at: i64,
    /// The whole-run deadline (ms since epoch), from `timeout_ms`.
    pub deadline_at: Option<i64>,
    /// The W3C `traceparent` the run was started under (an MCP request's
    /// `_meta`, an HTTP header, the parent run's span): its trace goes on
    /// after a crash or a takeover (see [`crate::trace`]).
    #[serde(default)]
    pub traceparent: Option<String>,
    /// The caller's labels (see [`weft_model::labels`]), checked.
    #[serde(default, skip_serializing_if = "weft_model::Labels::is_empty")]
    pub labels: weft_model::Labels,
}

/// One write of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Write {
    /// A run in state `submitted` with every step `pending`.
    CreateRun { run: NewRun, steps: Vec<String> },
    /// A run transition (refused unless the run is in `from`).
    RunState { run: RunId, from: RunState, to: RunState, output: Option<Value>, error: Option<StepError>, at: i64 },
    /// A step transition (refused unless the step is in `from`).
    StepState {
        run: RunId,
        step: String,
        from: StepState,
        to: StepState,
        output: Option<Value>,
        error: Option<StepError>,
        /// Set with `to = retrying`, cleared otherwise.
        next_attempt_at: Option<i64>,
        at: i64,
    },
    /// A new attempt, running, with its lease. Refused when this attempt
    /// exists (unless it was interrupted: then the same attempt runs again
    /// and keeps its count of interruptions) or another attempt of the same
    /// (run, step, item) is running.
    /// `input`: the attempt's resolved input as shown (see
    /// [`crate::size_limits::shown_input`]); `None` when it could not be resolved.
    StartAttempt {
        run: RunId,
        step: String,
        item: Option<ItemIndex>,
        attempt: AttemptNo,
        lease_until: i64,
        at: i64,
        input: Option<Value>,
    },
    /// Ends a running attempt (refused unless it is running).
    FinishAttempt {
        run: RunId,
        step: String,
        item: Option<ItemIndex>,
        attempt: AttemptNo,
        state: AttemptState,
        output: Option<Value>,
        error: Option<StepError>,
        /// Fuel the attempt's guest used (code steps), for a run's budget.
        fuel: Option<u64>,
        /// With `state = interrupted`: the attempt's blame for the crashes
        /// that interrupted it so far, in thousandths (replaces the stored).
        blame: u32,
        at: i64,
    },
    /// An event of the run's log (refused when its seq is taken).
    Event(NewEvent),
    /// A step parks on something outside (refused when it already waits).
    OpenWait(WaitRecord),
    /// The step no longer waits (no-op when it did not).
    CloseWait { run: RunId, step: String },
    /// An open recording (a run in state `recording`) goes, with its
    /// events, to be stored again whole in the same batch (refused unless
    /// the run is `recording`: saved or discarded meanwhile).
    DeleteRecording { run: RunId },
    /// A run's stored definition is replaced by one with the same steps:
    /// only its `notify` changed (an A2A push configuration added to, or
    /// deleted from, a task that started). Refused unless the run exists
    /// and has not ended.
    RunDefinition { run: RunId, definition: Arc<Value> },
    /// A message for the store's owner (refused when its id, or for an
    /// event its event id, is taken); stored with its answer when it has
    /// one (a signal queued for a step that does not wait yet).
    InboxPut(InboxRecord),
    /// A message was handled (refused unless it is pending).
    InboxAnswer { id: String, answer: Value },
    /// A queued signal was taken (or refused) by the wait it was for: its
    /// answer `queued` becomes `answer`. No-op once it is settled, so the
    /// first decision stands.
    InboxSettle { id: String, answer: Value },
    /// This process handles message `id` now: on a store shared by many
    /// workers, no other takes it (for the store's lease: if this process
    /// dies first, another handles it). Nothing on a store one process
    /// owns whole.
    InboxTake { id: String },
    /// A new schedule (refused when the name is taken).
    PutSchedule(ScheduleRecord),
    /// Refused when there is no such schedule.
    DeleteSchedule { name: String },
    /// A schedule paused or resumed, firing next at `next` (refused when
    /// there is no such schedule).
    SchedulePaused { name: String, paused: bool, next: i64 },
    /// A schedule fired (refused unless its next fire time is `from`, so a
    /// fire time is used once); `run` is the run it started, if any.
    ScheduleFired { name: String, from: i64, next: i64, run: Option<RunId> },
    /// An artifact of a run: its bytes stored once per sha256, its record
    /// by (run, name) (a later one of the same name replaces it).
    PutArtifact { artifact: ArtifactRecord, data: std::sync::Arc<[u8]> },
    /// An idempotency key for the run created in the same batch (refused
    /// when the key is taken).
    PutStartKey(StartKeyRecord),
    /// A notification to send (refused when its id is taken).
    PutDelivery(DeliveryRecord),
    /// A sender takes delivery `id` until `until` (refused unless it is
    /// pending after `attempts` tries and no lease runs at `now`).
    DeliveryLease { id: String, attempts: u32, until: i64, now: i64 },
    /// A try of delivery `id` ended (refused unless it is pending after
    /// `attempts` tries): one more try, now in `state`, due again at
    /// `next_at` when pending; its lease ends.
    DeliveryTried { id: String, attempts: u32, state: DeliveryState, next_at: i64, error: Option<String>, at: i64 },
    /// A failed delivery goes out again from its first try, its error
    /// cleared (refused unless it failed).
    DeliveryResend { id: String, at: i64 },
}

/// A file a step produced (`artifact(name, mime, data)`), kept with its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactRecord {
    pub run: RunId,
    pub name: String,
    pub mime: String,
    pub size: u64,
    /// Hex sha256 of the bytes (they are stored once per digest).
    pub sha256: String,
    pub step: String,
    pub item: Option<ItemIndex>,
    pub attempt: AttemptNo,
    pub created_at: i64,
}

impl Write {
    /// The run a write changes (`None` for the inbox and schedules).
    pub fn run_id(&self) -> Option<&RunId> {
        match self {
            Write::CreateRun { run, .. } => Some(&run.id),
            Write::RunState { run, .. }
            | Write::StepState { run, .. }
            | Write::StartAttempt { run, .. }
            | Write::FinishAttempt { run, .. }
            | Write::CloseWait { run, .. }
            | Write::DeleteRecording { run }
            | Write::RunDefinition { run, .. } => Some(run),
            Write::Event(e) => Some(&e.run),
            Write::PutArtifact { artifact, .. } => Some(&artifact.run),
            Write::OpenWait(w) => Some(&w.run),
            Write::PutStartKey(k) => Some(&k.run),
            Write::PutDelivery(d) => Some(&d.run),
            Write::DeliveryLease { .. } | Write::DeliveryTried { .. } | Write::DeliveryResend { .. } => None,
            Write::InboxPut(_)
            | Write::InboxAnswer { .. }
            | Write::InboxSettle { .. }
            | Write::InboxTake { .. }
            | Write::PutSchedule(_)
            | Write::DeleteSchedule { .. }
            | Write::SchedulePaused { .. }
            | Write::ScheduleFired { .. } => None,
        }
    }
}

/// Writes that commit together or not at all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    pub writes: Vec<Write>,
}

impl Batch {
    pub fn new() -> Self {
        Batch::default()
    }
    pub fn push(&mut self, w: Write) {
        self.writes.push(w);
    }
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
    pub fn len(&self) -> usize {
        self.writes.len()
    }
}

/// An event to append to a run's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    pub run: RunId,
    pub seq: Seq,
    pub at: i64,
    /// `run.<state>`, `step.<state>`, `attempt.started`, `attempt.<state>`,
    /// `progress`, `log`.
    pub kind: String,
    pub step: Option<String>,
    pub item: Option<ItemIndex>,
    pub data: Value,
}

/// A stored event.
pub type EventRecord = NewEvent;

/// A run with its steps and attempts (what `runs show` prints).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: RunId,
    pub template: String,
    pub version: Option<u32>,
    pub state: RunState,
    pub definition: Arc<Value>,
    pub input: Value,
    pub output: Option<Value>,
    pub error: Option<StepError>,
    pub parent: Option<RunId>,
    pub depth: u32,
    pub concurrency_key: Option<String>,
    pub created_at: i64,
    /// When it last changed: the latest of its run-state changes and its
    /// last event (every transition writes an event).
    pub updated_at: i64,
    pub deadline_at: Option<i64>,
    /// See [`NewRun::traceparent`].
    #[serde(default)]
    pub traceparent: Option<String>,
    /// See [`NewRun::labels`].
    #[serde(default)]
    pub labels: weft_model::Labels,
    /// In definition order.
    pub steps: Vec<StepRecord>,
    /// Ordered by step (definition order), item, attempt.
    pub attempts: Vec<AttemptRecord>,
    /// The highest event seq of the run (0 when none).
    pub last_seq: Seq,
    /// What its parked steps wait for, in definition order.
    #[serde(default)]
    pub waits: Vec<WaitRecord>,
    /// Its artifacts (without their bytes), by name.
    #[serde(default)]
    pub artifacts: Vec<ArtifactRecord>,
}

impl RunRecord {
    /// A run as its creation leaves it: `submitted`, every step `pending`,
    /// no attempts and no events yet.
    pub fn submitted(run: &NewRun, steps: &[String]) -> RunRecord {
        RunRecord {
            id: run.id.clone(),
            template: run.template.clone(),
            version: run.version,
            state: RunState::Submitted,
            definition: run.definition.clone(),
            input: run.input.clone(),
            output: None,
            error: None,
            parent: run.parent.clone(),
            depth: run.depth,
            concurrency_key: run.concurrency_key.clone(),
            created_at: run.created_at,
            updated_at: run.created_at,
            deadline_at: run.deadline_at,
            labels: run.labels.clone(),
            traceparent: run.traceparent.clone(),
            steps: steps
                .iter()
                .map(|n| StepRecord {
                    name: n.clone(),
                    state: StepState::Pending,
                    attempts: 0,
                    output: None,
                    error: None,
                    started_at: None,
                    ended_at: None,
                    next_attempt_at: None,
                })
                .collect(),
            attempts: vec![],
            last_seq: Seq::ZERO,
            waits: vec![],
            artifacts: vec![],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub name: String,
    pub state: StepState,
    /// How many attempts were started (all items together).
    pub attempts: u32,
    pub output: Option<Value>,
    pub error: Option<StepError>,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub next_attempt_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub step: String,
    pub item: Option<ItemIndex>,
    pub attempt: AttemptNo,
    pub state: AttemptState,
    pub lease_until: i64,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub output: Option<Value>,
    pub error: Option<StepError>,
    /// Times this attempt was interrupted (it ran again each time).
    pub interruptions: u32,
    /// Its share of the blame for those interruptions, in thousandths of a
    /// crash (a crash is shared by the attempts its process was running).
    pub blame: u32,
    /// Fuel its guest used, summed over its interrupted runs.
    pub fuel: Option<u64>,
    /// Its input with refs resolved, as shown (see
    /// [`crate::size_limits::shown_input`]); `None` when unknown (runs stored
    /// before inputs were kept, or a ref that resolved to nothing).
    #[serde(default)]
    pub input: Option<Value>,
}

/// One line of `runs list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub id: RunId,
    pub template: String,
    pub version: Option<u32>,
    pub state: RunState,
    pub parent: Option<RunId>,
    pub created_at: i64,
    pub updated_at: i64,
    #[serde(default)]
    pub labels: weft_model::Labels,
    /// Why it failed, for a run that did.
    #[serde(default)]
    pub error: Option<StepError>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFilter {
    pub state: Option<RunState>,
    pub template: Option<String>,
    /// Only the children of this run.
    pub parent: Option<RunId>,
    /// Newest first; `None` = no limit.
    pub limit: Option<usize>,
    /// Only runs created before this one (ids sort by creation): the
    /// cursor of the next page.
    pub before: Option<RunId>,
    /// Only runs of this concurrency key (`--key`, `key`).
    pub key: Option<String>,
    /// Only runs with every one of these labels.
    #[serde(default)]
    pub labels: weft_model::Labels,
    /// Only runs whose template's name contains this, ignoring ASCII case
    /// (the page's search; `template` is the exact name).
    pub template_contains: Option<String>,
    /// Only runs created at or after this time (ms since the epoch).
    pub created_from: Option<i64>,
    /// Only runs created before this time (ms since the epoch).
    pub created_until: Option<i64>,
}

impl RunFilter {
    /// Whether `run` passes this filter (the reference store's reading;
    /// the SQL stores say the same in their `WHERE`).
    pub fn matches(&self, run: &RunRecord) -> bool {
        let contains = |t: &str| run.template.to_ascii_lowercase().contains(&t.to_ascii_lowercase());
        self.labels.iter().all(|(k, v)| run.labels.get(k) == Some(v))
            && self.before.as_ref().is_none_or(|b| &run.id < b)
            && self.key.as_deref().is_none_or(|k| Some(k) == run.concurrency_key.as_deref())
            && self.state.is_none_or(|s| s == run.state)
            && self.template.as_deref().is_none_or(|t| t == run.template)
            && self.template_contains.as_deref().is_none_or(contains)
            && self.created_from.is_none_or(|t| run.created_at >= t)
            && self.created_until.is_none_or(|t| run.created_at < t)
            && self.parent.as_ref().is_none_or(|p| Some(p) == run.parent.as_ref())
    }
}

/// A running attempt whose lease ran out (its owner is gone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpiredLease {
    pub run: RunId,
    pub step: String,
    pub item: Option<ItemIndex>,
    pub attempt: AttemptNo,
    pub lease_until: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateRecord {
    pub name: String,
    pub version: u32,
    pub definition: Value,
    pub created_at: i64,
}

/// What can go wrong in a store. [`StoreError::is_retryable`] splits
/// transient faults (busy, locked database, I/O) from the rest.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    #[error("the store is busy: {0}")]
    Busy(String),
    #[error("store I/O error: {0}")]
    Io(String),
    #[error("the store {path} is owned by another process{}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Locked { path: String, pid: Option<u32> },
    /// A batch's expectation did not hold (a state changed meanwhile, an
    /// attempt or event already exists): nothing of the batch was applied.
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("the store holds invalid data: {0}")]
    Corrupt(String),
    #[error("the store's schema version {found} is newer than this build supports ({supported})")]
    SchemaTooNew { found: u32, supported: u32 },
    #[error("the store is closed")]
    Closed,
    /// On a store shared by many workers: this worker's lease ran out (it
    /// was paused or cut off) and another worker may drive its runs now, or
    /// the run written belongs to another worker. Nothing of the batch was
    /// applied; the run must be left to its owner.
    #[error("fenced: {0}")]
    Fenced(String),
    /// Anything else the database reported (not retryable).
    #[error("store error: {0}")]
    Other(String),
}

impl StoreError {
    /// True for faults that may pass if the same batch is tried again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Busy(_) | StoreError::Io(_))
    }
}

/// Everything stored of one run, to copy it to another store (`weft store
/// copy`): its record, its whole event log and its artifacts' bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct RunExport {
    pub run: RunRecord,
    pub events: Vec<EventRecord>,
    pub artifacts: Vec<(ArtifactRecord, Vec<u8>)>,
    /// Its notifications, as they stand (oldest first).
    pub deliveries: Vec<DeliveryRecord>,
    /// The idempotency key that started it, if one did.
    pub start_key: Option<StartKeyRecord>,
}

/// Waits for commits of other processes to the same store (see
/// [`RunStore::watch`]).
#[async_trait::async_trait]
pub trait StoreWatch: Send {
    /// Resolves after the store was written (by any process) since the last
    /// call; `false` once the watch broke (then poll instead).
    async fn changed(&mut self) -> bool;
}

// The seam is split by role, as the engine's callers use it: the engine
// writes and reads runs ([`RunStore`]); workers of a shared store hold
// leases on the runs they drive ([`LeaseStore`]); templates are saved and
// read by name and version ([`TemplateStore`]); runs are pruned, exported
// and imported ([`ArchiveStore`]). A store implements all four: [`Store`].

/// Everything a store is: the four roles below. Implemented for every type
/// that has them all; front ends and the engine hold an `Arc<dyn Store>`.
pub trait Store: RunStore + LeaseStore + TemplateStore + ArchiveStore {}

impl<T: RunStore + LeaseStore + TemplateStore + ArchiveStore> Store for T {}

/// What the engine writes and reads of runs: batches committed atomically,
/// runs with their steps, events, waits, the inbox, schedules, queues and
/// artifacts, and a watch on other processes' writes.
#[async_trait::async_trait]
pub trait RunStore: Send + Sync + 'static {
    /// A way to wait for writes of other processes to this store without
    /// reading it in a loop (SQLite: the file system tells; PostgreSQL:
    /// LISTEN/NOTIFY). `None` when the store cannot tell: poll.
    fn watch(&self) -> Option<Box<dyn StoreWatch>> {
        None
    }

    /// As [`RunStore::watch`], for a store's owner loop: wakes when there may
    /// be work for it (runs created elsewhere, messages, schedules), not at
    /// every commit. The same watch where the store cannot tell them apart.
    fn watch_work(&self) -> Option<Box<dyn StoreWatch>> {
        self.watch()
    }

    /// Commit a batch atomically; returns once it is durable.
    async fn commit(&self, batch: Batch) -> Result<(), StoreError>;

    /// [`RunStore::commit`] of a batch the caller keeps (to try it again, to
    /// apply it to a record of its own), without copying it where the
    /// store can avoid that.
    async fn commit_shared(&self, batch: std::sync::Arc<Batch>) -> Result<(), StoreError> {
        self.commit((*batch).clone()).await
    }

    /// A run with its steps and attempts.
    async fn run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreError>;

    /// The records of runs `ids` that exist, in any order: a store that can
    /// read many at once (a worker starting the runs it claimed) does.
    async fn runs(&self, ids: &[RunId]) -> Result<Vec<RunRecord>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(r) = self.run(id).await? {
                out.push(r);
            }
        }
        Ok(out)
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError>;

    /// Events of a run with `seq > after`, in order, at most `limit`.
    async fn events_after(&self, run: &RunId, after: Seq, limit: usize) -> Result<Vec<EventRecord>, StoreError>;

    /// Runs not in a terminal state, oldest first.
    async fn unfinished_runs(&self) -> Result<Vec<RunId>, StoreError>;

    /// Running attempts of unfinished runs whose lease ended before `now_ms`.
    async fn expired_leases(&self, now_ms: i64) -> Result<Vec<ExpiredLease>, StoreError>;

    /// Open event waits for `event`, oldest first.
    async fn event_waits(&self, event: &str) -> Result<Vec<WaitRecord>, StoreError>;

    /// Inbox messages not answered yet, oldest first.
    async fn inbox_pending(&self) -> Result<Vec<InboxRecord>, StoreError>;

    /// One inbox message by its id, or (`by_event_id`) by its event id.
    async fn inbox_get(&self, id: &str, by_event_id: bool) -> Result<Option<InboxRecord>, StoreError>;
    /// The signals queued for steps of `run` that did not wait yet (their
    /// answer's `status` is `queued`), oldest first.
    async fn inbox_queued(&self, run: &RunId) -> Result<Vec<InboxRecord>, StoreError>;
    /// Events named `name` emitted at or after `since_ms`, oldest first, at
    /// most `limit` (for a wait that starts after them).
    async fn events_emitted(&self, name: &str, since_ms: i64, limit: usize) -> Result<Vec<InboxRecord>, StoreError>;

    /// Every schedule, by name.
    async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError>;

    /// The oldest unfinished run with this concurrency key: the only one
    /// of its key that may execute.
    async fn queue_head(&self, key: &str) -> Result<Option<RunId>, StoreError>;

    /// A run's artifacts, by name.
    async fn artifacts(&self, run: &RunId) -> Result<Vec<ArtifactRecord>, StoreError>;

    /// One artifact of a run and its bytes.
    async fn artifact(&self, run: &RunId, name: &str) -> Result<Option<(ArtifactRecord, Vec<u8>)>, StoreError>;

    /// The run an idempotency key started, while that run is kept.
    async fn start_key(&self, key: &str) -> Result<Option<StartKeyRecord>, StoreError>;

    /// Pending deliveries due at `now_ms` that no lease holds and that are
    /// the oldest pending one of their key, oldest first, at most `limit`.
    async fn deliveries_due(&self, now_ms: i64, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError>;

    /// Deliveries matching `filter`, newest first.
    async fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryRecord>, StoreError>;

    /// One delivery by its id.
    async fn delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, StoreError>;

    /// The idempotency key that started run `run`, if one did.
    async fn start_key_of(&self, run: &RunId) -> Result<Option<StartKeyRecord>, StoreError>;
}

/// Who drives which run. A store that one process owns whole (SQLite: its
/// scheduler lock) lets that process drive every run: the defaults. A
/// store shared by many workers (PostgreSQL) gives each run an owner, a
/// worker holding a lease it renews; a batch writing a run another worker
/// owns, or written after this worker's lease ran out, is refused
/// ([`StoreError::Fenced`]).
#[async_trait::async_trait]
pub trait LeaseStore: RunStore {
    /// Whether many processes drive this store's runs, each its own (see
    /// above): then cancels and signals for a run go to its owner.
    fn is_shared(&self) -> bool {
        false
    }

    /// Takes run `id` for this process before it drives it: `false` when a
    /// live worker owns it (leave it alone).
    async fn claim_run(&self, _id: &RunId) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// The unfinished runs this process owns: every one of a store it owns
    /// whole; on a shared store, the worker's own (a client's: nobody's).
    async fn owned_runs(&self) -> Result<Vec<RunId>, StoreError> {
        self.unfinished_runs().await
    }

    /// On a shared store: at most `limit` runs nobody drives (created by a
    /// client, given back) and every run of a worker whose lease ran out,
    /// now this worker's. None on a store one process owns whole.
    async fn claim_runs(&self, _limit: usize) -> Result<Vec<RunId>, StoreError> {
        Ok(vec![])
    }

    /// Unfinished runs other processes drive (or will: a dead worker's)
    /// that do not just wait for outside input: what a worker waiting to be
    /// idle (`weft worker --until-idle`) waits for besides its own.
    async fn busy_elsewhere(&self) -> Result<u64, StoreError> {
        Ok(0)
    }

    /// Gives runs back for any worker to take (a worker shutting down).
    async fn release_runs(&self, _ids: &[RunId]) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Templates: named definitions, each save a new version.
#[async_trait::async_trait]
pub trait TemplateStore: Send + Sync + 'static {
    /// Save a new version of a template (1 for a new name); returns it.
    async fn save_template(&self, name: &str, definition: &Value, at: i64) -> Result<u32, StoreError>;

    /// A version of a template, or its latest when `version` is `None`.
    async fn template(&self, name: &str, version: Option<u32>) -> Result<Option<TemplateRecord>, StoreError>;

    /// The latest version of every template, by name.
    async fn list_templates(&self) -> Result<Vec<TemplateRecord>, StoreError>;

    /// Delete every version of a template; returns how many were deleted.
    async fn delete_template(&self, name: &str) -> Result<u32, StoreError>;

    /// Every version of a template, oldest first.
    async fn template_versions(&self, name: &str) -> Result<Vec<TemplateRecord>, StoreError>;
}

/// Keeping a store in shape: counting and pruning finished runs (retention,
/// `weft runs prune`), and copying runs and templates between stores
/// (`weft store export|import`).
#[async_trait::async_trait]
pub trait ArchiveStore: RunStore {
    /// How many runs match `filter` (its `limit` and `before` apply).
    async fn count_runs(&self, filter: &RunFilter) -> Result<u64, StoreError> {
        Ok(self.list_runs(&RunFilter { limit: None, ..filter.clone() }).await?.len() as u64)
    }

    /// Finished runs that ended before `before_ms`, oldest first: those of
    /// `filter.state` and `filter.template` when given, at most
    /// `filter.limit` (its other fields are ignored).
    async fn finished_before(&self, before_ms: i64, filter: &RunFilter) -> Result<Vec<RunId>, StoreError>;

    /// Deletes finished runs with everything stored of them (steps,
    /// attempts, events, waits, artifacts, their messages, deliveries and
    /// idempotency keys); an unfinished
    /// or unknown run is left out. Returns the runs deleted.
    async fn delete_runs(&self, ids: &[RunId]) -> Result<Vec<RunId>, StoreError>;

    /// Everything stored of a run.
    async fn export_run(&self, id: &RunId) -> Result<Option<RunExport>, StoreError> {
        let Some(run) = self.run(id).await? else { return Ok(None) };
        let mut events = vec![];
        loop {
            let after = events.last().map(|e: &EventRecord| e.seq).unwrap_or(Seq::ZERO);
            let page = self.events_after(id, after, 10_000).await?;
            if page.is_empty() {
                break;
            }
            events.extend(page);
        }
        let mut artifacts = vec![];
        for a in &run.artifacts {
            if let Some(x) = self.artifact(id, &a.name).await? {
                artifacts.push(x);
            }
        }
        let mut deliveries = self.deliveries(&DeliveryFilter { run: Some(id.clone()), ..Default::default() }).await?;
        deliveries.reverse();
        let start_key = self.start_key_of(id).await?;
        Ok(Some(RunExport { run, events, artifacts, deliveries, start_key }))
    }

    /// Stores a run exported from another store as it was, with its
    /// notifications and idempotency key (refused when a run of its id
    /// exists).
    async fn import_run(&self, run: RunExport) -> Result<(), StoreError>;

    /// Stores a template version as it was (refused when it exists).
    async fn import_template(&self, t: TemplateRecord) -> Result<(), StoreError>;
}
