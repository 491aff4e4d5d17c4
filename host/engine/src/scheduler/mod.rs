//! The scheduler: creates runs, drives each unfinished run with one task
//! (`driver`), recovers after a crash, cancels. It sees only the [`Store`],
//! [`StepRunner`], [`Clock`] and [`Rng`] traits.
//!
//! A driven run whose only unfinished steps wait for outside input (a
//! signal or an event `wait`; no attempt, child run, sleep or retry in
//! flight) *hibernates*: its driver ends and the engine keeps a small
//! entry (plus a timer when a wait timeout or the run's deadline is due
//! some day). A signal, an event, a cancel or the timer starts the driver
//! again (see `hibernate.rs`).

mod attempt;
mod changes;
mod children;
mod driver;
mod early;
mod hibernate;
mod inbox;
mod mail;
mod mail_undriven;
mod outbox;
mod plans;
mod redefine;
mod schedules;

pub use changes::{Change, Changes, RunChanges};
pub use mail::{Delivered, EmitAnswer, SignalAnswer};
pub use outbox::{OUTBOX_POLL, OutboxTask};
pub use schedules::{next_fire, parse_cron};
mod scope;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinHandle;

use crate::cancel::CancelToken;
use crate::clock::Clock;
use crate::ids::{RunId, Seq};
use crate::model_glue::{Definition, Problem, Problems, check_input};
use crate::rng::Rng;
use crate::runner::StepRunner;
use crate::state::{RunState, TransitionRefused};
use crate::store::{Batch, NewEvent, NewRun, RunRecord, Store, StoreError, Write};

/// Knobs of the scheduler.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Attempts running at once, across all runs: from their claim (which
    /// waits for its commit) until they end. Those whose runner expects
    /// them to finish in place count against [`Self::max_in_place`]
    /// instead, as long as it has room. 64 by default: an attempt holds no
    /// thread (guests are async and yield, tool calls wait on sockets), so
    /// this bounds memory, not cores: the sandbox has 64 guest slots, and
    /// a few guests parked in host calls (or slow tools) must not keep
    /// every other run's steps from starting (it was 4 per core, 8 here).
    pub max_concurrency: usize,
    /// Attempts in flight at once whose runner expects them to finish in
    /// place ([`StepRunner::finishes_in_place`]: a guest whose recent calls
    /// were all short). Such an attempt runs on the thread of its run's
    /// driver, so at most one per async worker computes at a time; what it
    /// mostly waits for is the commit of its claim. Bounding these by
    /// `max_concurrency` (sized for guests that compute for long) kept
    /// group commits small and the cores idle: W3 with 200 runs in flight
    /// committed ~7 claims per transaction, one per permit.
    ///
    /// The runner's guess can be wrong: a guest whose calls were short may
    /// compute for long on the next inputs (W6 mixes fib(27) and trivial
    /// calls of one guest). Its attempts claimed meanwhile then share the
    /// async workers (a guest yields every epoch tick), their `timeout_ms`
    /// running; this bound (a little above W3's 200 runs in flight) keeps
    /// that crowd small.
    ///
    /// [`StepRunner::finishes_in_place`]: crate::runner::StepRunner::finishes_in_place
    pub max_in_place: usize,
    /// A lease lasts the attempt's timeout plus this slack.
    pub lease_slack_ms: u64,
    /// The lease of an attempt without a timeout.
    pub default_lease_ms: u64,
    /// A retryable store error (busy, I/O, a full disk) is retried for as
    /// long as the process lives, with a backoff doubling from 10 ms up to
    /// 1 s; past this many tries each failure is logged as a warning (the
    /// first is logged too), and once the batch commits the run's log gets
    /// a `store.recovered` event saying how long the store could not write.
    pub commit_retries: u32,
    /// After a run ends, how long (real time) its canceled attempts get to
    /// wind down before they are dropped.
    pub cancel_grace_ms: u64,
    /// How deep `workflow` steps may nest child runs (a root run is 0).
    pub max_depth: u32,
    /// A step whose attempt is interrupted (its process died, the host
    /// panicked) this many times in a row fails as `crashed`.
    pub max_interruptions: u32,
    /// Log lines and progress a run's attempts may add to its event log, in
    /// bytes (each invocation's logs are capped too; this bounds a run of
    /// many chatty items). Past it, one `log.truncated` event says so and
    /// the rest is dropped.
    pub max_run_log_bytes: u64,
    /// Caps on inputs, data and step outputs (the front ends apply the
    /// definition cap as they read one).
    pub size_limits: crate::size_limits::SizeLimits,
    /// On a store shared by many workers: runs nobody drives that one look
    /// takes at most (the others are left for the other workers).
    pub claim_batch: usize,
    /// On a store shared by many workers: how long a signal or cancel for
    /// a run another worker drives waits for that worker's answer.
    pub relay_timeout_ms: u64,
    /// Signals a live run may hold for steps that do not wait yet (each
    /// taken when its wait starts); past it a signal is refused.
    pub max_queued_signals: usize,
    /// How long a queued signal, or an event emitted before its wait
    /// started, stays good for it: older ones are dropped (a queued signal
    /// is answered `expired`) when the wait starts.
    pub early_ttl_ms: u64,
    /// Events emitted before a wait started that it looks at when it
    /// starts, oldest first (of those younger than [`Self::early_ttl_ms`]
    /// and than its run).
    pub max_early_events: usize,
    /// How a notification is retried when its definition does not say
    /// (`[notifications]` in weft.toml).
    pub delivery_retry: crate::delivery::DeliveryRetry,
    /// On a store shared by many workers: how long a sender holds a
    /// delivery it tries (longer than a try may take; a sender that died
    /// leaves it to another once this passed).
    pub delivery_lease_ms: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_concurrency: 64,
            max_in_place: 256,
            lease_slack_ms: 30_000,
            default_lease_ms: 300_000,
            commit_retries: 5,
            cancel_grace_ms: 2_000,
            max_depth: 16,
            max_interruptions: 3,
            max_run_log_bytes: 16 << 20,
            size_limits: crate::size_limits::SizeLimits::default(),
            claim_batch: 256,
            relay_timeout_ms: 30_000,
            max_queued_signals: 100,
            early_ttl_ms: 86_400_000,
            max_early_events: 100,
            delivery_retry: crate::delivery::DeliveryRetry {
                max_attempts: 8,
                backoff_ms: 1_000,
                max_backoff_ms: 300_000,
            },
            delivery_lease_ms: 25_000,
        }
    }
}

/// How a run is created.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The run's id (default: a new one). A creation with an id that
    /// exists is a store conflict: a retried creation cannot run twice.
    pub id: Option<RunId>,
    /// The template's name (default: the definition's `name`).
    pub template: Option<String>,
    /// The template's version (default: the definition's `version`).
    pub version: Option<u32>,
    pub parent: Option<RunId>,
    pub depth: u32,
    pub concurrency_key: Option<String>,
    /// Steps whose output is given instead of computed (mock a step, inject
    /// known data, resume a recording): committed `succeeded` with the run.
    pub presets: Vec<(String, Value)>,
    /// The W3C `traceparent` of whoever started the run (see
    /// [`crate::trace`]); ignored unless it parses.
    pub traceparent: Option<String>,
    /// The caller's labels (checked here: over a cap, refused).
    pub labels: weft_model::Labels,
    /// An idempotency key and the digest of what the start asked: stored
    /// with the run, in its creating batch (a key taken is a conflict).
    pub start_key: Option<(String, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The input does not match `input_schema` (nothing was stored).
    #[error("invalid input: {0}")]
    Invalid(Problems),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no run {0}")]
    NotFound(RunId),
    #[error(transparent)]
    Transition(#[from] TransitionRefused),
    #[error("the run's stored plan does not load: {0}")]
    Plan(String),
}

/// A value over a cap, as the invalid-input error (nothing is stored);
/// the problem's hint says how to get under it.
pub(crate) fn over(v: &Value, cap: usize, path: &str, what: &str, setting: &str) -> Result<(), EngineError> {
    crate::size_limits::check(v, cap).map_err(|o| {
        EngineError::Invalid(Problems(vec![Problem::new(path, o.message(what, setting)).hint(o.hint(setting))]))
    })
}

/// Prepares a stored template's definition for a run the engine creates
/// itself (a child run, a scheduled run): e.g. pins its code by digest.
pub trait Planner: Send + Sync + 'static {
    fn prepare(&self, definition: Value) -> Result<Value, String>;
}

/// A driver's end: `true` once it stopped, and the record it kept if it
/// ended the run.
type EndWatch = (watch::Receiver<bool>, Arc<std::sync::OnceLock<RunRecord>>);

/// The end of a run, watched since [`Engine::submit_watched`] started it
/// (see [`Engine::ended`]).
pub struct RunEnd {
    id: RunId,
    watch: Option<EndWatch>,
}

impl RunEnd {
    /// The end of a run started elsewhere: [`Engine::ended`] waits as
    /// [`Engine::wait`] does.
    pub fn of(id: RunId) -> RunEnd {
        RunEnd { id, watch: None }
    }
}

/// A run driven by a task of this engine.
struct Active {
    generation: u64,
    mail: mpsc::UnboundedSender<mail::Mail>,
    parked: Arc<std::sync::atomic::AtomicBool>,
    cancel: CancelToken,
    done: watch::Receiver<bool>,
    /// The run's record once its driver ended it (see `driver::Link`).
    ended: Arc<std::sync::OnceLock<RunRecord>>,
    task: JoinHandle<()>,
}

pub(crate) struct Shared {
    pub store: Arc<dyn Store>,
    pub runner: Arc<dyn StepRunner>,
    pub clock: Arc<dyn Clock>,
    pub rng: Arc<dyn Rng>,
    /// New run ids, in creation order (see [`crate::ids::RunIds`]).
    run_ids: crate::ids::RunIds,
    pub config: EngineConfig,
    pub permits: Arc<Semaphore>,
    /// Permits of attempts expected to finish in place (see
    /// [`EngineConfig::max_in_place`]).
    pub in_place_permits: Arc<Semaphore>,
    /// Driven and hibernated runs (one lock: a run moves between the two
    /// atomically, so a signal never finds it in neither).
    active: Mutex<hibernate::Runs>,
    generation: std::sync::atomic::AtomicU64,
    planner: std::sync::OnceLock<Arc<dyn Planner>>,
    /// One inbox message is handled at a time; an event [`Engine::emit`]
    /// stores is stored under it too, so no poll sees it pending.
    inbox: tokio::sync::Mutex<()>,
    /// Wakes the schedule loop when a schedule changes in this process.
    schedules_changed: tokio::sync::Notify,
    /// Parsed plans shared by the runs of one definition.
    plans: plans::Plans,
    /// How many attempts the process that died was running, as `recover`
    /// found them (at least 1): each shares the blame for the crash (see
    /// `driver::outcome`'s `attempt_interrupted`).
    pub crash_width: std::sync::atomic::AtomicUsize,
    /// Committed batches, to subscribers ([`Engine::subscribe`]).
    changes: tokio::sync::broadcast::Sender<Arc<crate::store::Batch>>,
    /// Committed batches of one run, to its followers ([`Engine::follow`]).
    followers: changes::Followers,
    /// Who sends deliveries (see `outbox`).
    deliverer: std::sync::OnceLock<Arc<dyn crate::delivery::Deliverer>>,
    /// Wakes the outbox's sender when deliveries were written here.
    outbox_wake: tokio::sync::Notify,
}

/// The scheduler. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Engine {
    sh: Arc<Shared>,
}

impl Engine {
    pub fn new(
        store: Arc<dyn Store>,
        runner: Arc<dyn StepRunner>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Rng>,
        config: EngineConfig,
    ) -> Self {
        let permits = Arc::new(Semaphore::new(config.max_concurrency.max(1)));
        let in_place_permits = Arc::new(Semaphore::new(config.max_in_place));
        Engine {
            sh: Arc::new(Shared {
                store,
                runner,
                clock,
                rng,
                run_ids: Default::default(),
                config,
                permits,
                in_place_permits,
                active: Mutex::default(),
                generation: Default::default(),
                planner: Default::default(),
                inbox: Default::default(),
                schedules_changed: Default::default(),
                plans: Default::default(),
                crash_width: std::sync::atomic::AtomicUsize::new(1),
                changes: changes::channel(),
                followers: Default::default(),
                deliverer: Default::default(),
                outbox_wake: Default::default(),
            }),
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.sh.store
    }

    /// How runs the engine creates itself (children, schedules) prepare
    /// their template (set once; later calls are ignored).
    pub fn set_planner(&self, p: Arc<dyn Planner>) {
        let _ = self.sh.planner.set(p);
    }

    pub(crate) fn from_shared(sh: Arc<Shared>) -> Engine {
        Engine { sh }
    }

    /// Validate the input, then commit the run (`submitted`) with every step
    /// `pending` in one batch. Returns its id; nothing runs until [`Engine::start`].
    pub async fn create_run(&self, def: &Definition, input: Value, opts: RunOptions) -> Result<RunId, EngineError> {
        let (id, batch) = self.run_batch(def, input, opts).await?;
        self.sh.commit(batch).await?;
        Ok(id)
    }

    /// The batch that creates a run (validated; not committed).
    pub(crate) async fn run_batch(
        &self,
        def: &Definition,
        input: Value,
        opts: RunOptions,
    ) -> Result<(RunId, Batch), EngineError> {
        let (id, batch, _) = self.run_batch_shared(&Arc::new(def.clone()), input, opts).await?;
        Ok((id, batch))
    }

    /// [`Engine::run_batch`] of a shared definition; also returns the plan
    /// the run follows (`def` itself unless a `workflow` step's template
    /// version was pinned).
    async fn run_batch_shared(
        &self,
        def: &Arc<Definition>,
        input: Value,
        opts: RunOptions,
    ) -> Result<(RunId, Batch, Arc<Definition>), EngineError> {
        let caps = self.sh.config.size_limits;
        over(&input, caps.max_input_bytes, "", "the run's input", "max_input_bytes")?;
        check_input(def, &input).map_err(EngineError::Invalid)?;
        let bad_labels = weft_model::labels::check_labels(&opts.labels, "/labels");
        if !bad_labels.is_empty() {
            return Err(EngineError::Invalid(Problems(bad_labels)));
        }
        let now = self.sh.clock.now_ms();
        let id = opts.id.clone().unwrap_or_else(|| self.sh.run_ids.next(now, self.sh.rng.as_ref()));
        let plan = children::pin_versions(self.sh.store.as_ref(), def).await?.into_owned();
        let definition = self.sh.plans.json(&plan).map_err(|e| EngineError::Plan(e.to_string()))?;
        let def = &*plan;
        let run = NewRun {
            id: id.clone(),
            template: opts.template.unwrap_or_else(|| def.name.clone()),
            version: opts.version.or(Some(def.version)),
            definition,
            input,
            parent: opts.parent,
            depth: opts.depth,
            concurrency_key: opts.concurrency_key,
            created_at: now,
            deadline_at: def.timeout_ms.map(|t| now.saturating_add(t.min(i64::MAX as u64) as i64)),
            traceparent: opts.traceparent.filter(|t| crate::trace::TraceParent::parse(t).is_some()),
            labels: opts.labels,
        };
        for (name, _) in &opts.presets {
            let Some(step) = def.steps.iter().find(|s| &s.name == name) else {
                let names: Vec<&str> = def.steps.iter().map(|s| s.name.as_str()).collect();
                let hint = crate::model_glue::did_you_mean(name, names.iter().copied())
                    .unwrap_or_else(|| format!("its steps are: {}", names.join(", ")));
                return Err(EngineError::Invalid(Problems(vec![
                    Problem::new(format!("/presets/{name}"), format!("no step `{name}` in the definition")).hint(hint),
                ])));
            };
            if step.for_each.is_some() {
                return Err(EngineError::Invalid(Problems(vec![Problem::new(
                    format!("/presets/{name}"),
                    format!("step `{name}` has `for_each`: its items cannot be preset"),
                )])));
            }
        }
        let mut batch = Batch::new();
        batch.push(Write::CreateRun { run, steps: def.steps.iter().map(|s| s.name.clone()).collect() });
        if let Some((key, digest)) = opts.start_key {
            batch.push(Write::PutStartKey(crate::delivery::StartKeyRecord {
                key,
                run: id.clone(),
                digest,
                created_at: now,
            }));
        }
        batch.push(Write::Event(NewEvent {
            run: id.clone(),
            seq: Seq(1),
            at: now,
            kind: "run.submitted".into(),
            step: None,
            item: None,
            data: serde_json::json!({"state": "submitted"}),
        }));
        let mut seq = 1;
        for (name, output) in opts.presets {
            let done =
                crate::recorded::DoneStep { name, input: None, output, started_at: now, ended_at: now, how: "preset" };
            let writes =
                crate::recorded::done_step(&id, &done, &mut seq).map_err(|e| EngineError::Plan(e.to_string()))?;
            for w in writes {
                batch.push(w);
            }
        }
        Ok((id, batch, plan))
    }

    /// Create a run and start driving it.
    pub async fn submit(&self, def: &Definition, input: Value, opts: RunOptions) -> Result<RunId, EngineError> {
        self.submit_shared(Arc::new(def.clone()), input, opts).await
    }

    /// [`Engine::submit`] of a definition the caller keeps: runs of it
    /// share it rather than copying it each.
    pub async fn submit_shared(
        &self,
        def: Arc<Definition>,
        input: Value,
        opts: RunOptions,
    ) -> Result<RunId, EngineError> {
        Ok(self.submit_run(def, input, opts, false).await?.0)
    }

    /// [`Engine::submit_shared`], with the run's end watched from before
    /// its driver started: [`Engine::ended`] gives the record the driver
    /// committed without a read of the store, however soon the run ends;
    /// and its changes followed from its first ([`Engine::follow`]).
    pub async fn submit_watched(
        &self,
        def: Arc<Definition>,
        input: Value,
        opts: RunOptions,
    ) -> Result<(RunId, RunEnd, RunChanges), EngineError> {
        let (id, end, changes) = self.submit_run(def, input, opts, true).await?;
        Ok((id, end, changes.expect("followed")))
    }

    async fn submit_run(
        &self,
        def: Arc<Definition>,
        input: Value,
        opts: RunOptions,
        follow: bool,
    ) -> Result<(RunId, RunEnd, Option<RunChanges>), EngineError> {
        let (id, batch, def) = self.run_batch_shared(&def, input, opts).await?;
        let changes = follow.then(|| self.follow(&id));
        // The driver starts from the record the batch writes instead of
        // reading it back (a read transaction per run saved); a run with
        // preset steps is read back.
        let rec = driver::fresh_record(&batch);
        let mut known = driver::Known { def, rec, create: None };
        // A run of no queue is created by its driver's first commit, with
        // its start (see `driver::Creation`).
        if known.rec.as_ref().is_some_and(|r| r.concurrency_key.is_none()) {
            let (done, created) = tokio::sync::oneshot::channel();
            known.create = Some(driver::Creation { batch, done });
            let Some(watch) = self.start_creating(&id, known) else {
                // Driven or hibernated here (or being created): it exists.
                return Err(StoreError::Conflict(format!("run {id} exists")).into());
            };
            return match created.await {
                Ok(r) => {
                    r.map(|()| (id.clone(), RunEnd { id, watch: Some(watch) }, changes)).map_err(EngineError::from)
                }
                Err(_) => Err(EngineError::Plan("the run could not start; nothing was stored".into())),
            };
        }
        self.sh.commit(batch).await?;
        let watch = self.start_with(&id, Some(known));
        Ok((id.clone(), RunEnd { id, watch }, changes))
    }

    /// The record of a run [`Engine::submit_watched`] started, once it
    /// ended (as [`Engine::wait`]). The record kept in memory is handed
    /// out once: a second call with the same `end` reads the store.
    pub async fn ended(&self, end: &mut RunEnd) -> Result<RunRecord, EngineError> {
        if let Some((done, ended)) = &mut end.watch {
            if done.wait_for(|v| *v).await.is_ok() && ended.get().is_some() {
                // The driver has let go of the record: the only waiter
                // takes it (no copy of its attempts); another copies it.
                let (_, ended) = end.watch.take().expect("watched");
                return Ok(match Arc::try_unwrap(ended) {
                    Ok(cell) => cell.into_inner().expect("set"),
                    Err(shared) => shared.get().expect("set").clone(),
                });
            }
            // It hibernated (waits for something outside it), or its
            // driver stopped: wait as anyone would.
            end.watch = None;
        }
        self.wait(&end.id).await
    }

    /// Start the driver that creates a run, unless a run of that id is
    /// driven or hibernated here (false).
    fn start_creating(&self, id: &RunId, known: driver::Known) -> Option<EndWatch> {
        let mut runs = self.sh.active.lock().unwrap();
        if runs.hibernated.contains_key(id) || runs.driven.get(id).is_some_and(|a| !*a.done.borrow()) {
            return None;
        }
        Some(self.start_locked(&mut runs, id, Some(known)))
    }

    /// Start driving a stored run (no-op when it is already driven, or
    /// hibernated here: outside input or its timer wakes it).
    pub fn start(&self, id: &RunId) {
        let _ = self.start_with(id, None);
    }

    /// Drives runs this process claimed from a shared store
    /// ([`LeaseStore::claim_runs`](crate::store::LeaseStore::claim_runs)), read at once ([`RunStore::runs`](crate::store::RunStore::runs)): each
    /// driver starts from its record, without claiming or reading it again.
    /// A run whose plan does not load starts as [`Engine::start`] starts it.
    pub fn start_claimed(&self, claimed: Vec<RunRecord>) {
        for rec in claimed {
            let id = rec.id.clone();
            match self.sh.plans.get(&rec) {
                Ok(def) => {
                    let _ = self.start_with(&id, Some(driver::Known { def, rec: Some(rec), create: None }));
                }
                Err(_) => self.start(&id),
            }
        }
    }

    /// Claims at most `limit` runs nobody drives on a shared store and
    /// drives them ([`Engine::start_claimed`]): their ids.
    pub async fn claim(&self, limit: usize) -> Result<Vec<RunId>, StoreError> {
        let ids = self.sh.store.claim_runs(limit).await?;
        if ids.is_empty() {
            return Ok(ids);
        }
        let recs = self.sh.store.runs(&ids).await?;
        self.start_claimed(recs);
        Ok(ids)
    }

    fn start_with(&self, id: &RunId, def: Option<driver::Known>) -> Option<EndWatch> {
        let mut runs = self.sh.active.lock().unwrap();
        if runs.hibernated.contains_key(id) {
            return None;
        }
        Some(self.start_locked(&mut runs, id, def))
    }

    /// Starts a driver unless one runs; a hibernated run wakes. Called
    /// with the `active` lock held. Returns a watch of the driver's end.
    fn start_locked(&self, runs: &mut hibernate::Runs, id: &RunId, def: Option<driver::Known>) -> EndWatch {
        if let Some(a) = runs.driven.get(id)
            && !*a.done.borrow()
        {
            return (a.done.clone(), a.ended.clone());
        }
        // Dropping the entry aborts its timer and wakes its waiters.
        runs.hibernated.remove(id);
        let cancel = CancelToken::new();
        let (tx, rx) = watch::channel(false);
        let (mail_tx, mail_rx) = mpsc::unbounded_channel();
        let sh = self.sh.clone();
        let run = id.clone();
        let c = cancel.clone();
        let generation = self.sh.generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let parked = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ended = Arc::new(std::sync::OnceLock::new());
        let link =
            driver::Link { mail: mail_rx, parked: parked.clone(), generation, ended: ended.clone(), restarts: 0 };
        let task = tokio::spawn(async move {
            if let Err(e) = driver::drive(sh.clone(), run.clone(), def, c, link).await {
                tracing::error!(run = %run, error = %e, "run driver stopped");
            }
            // Forget the finished driver (waiters fall back to the store;
            // a hibernating driver already moved its entry).
            {
                let mut runs = sh.active.lock().unwrap();
                if runs.driven.get(&run).is_some_and(|a| a.generation == generation) {
                    runs.driven.remove(&run);
                }
            }
            let _ = tx.send(true);
        });
        let watch = (rx.clone(), ended.clone());
        runs.driven.insert(id.clone(), Active { generation, mail: mail_tx, parked, cancel, done: rx, ended, task });
        watch
    }

    /// After a restart: drive every unfinished run. Running attempts of the
    /// previous owner are treated as failed (their leases are void once
    /// this process owns the store) and retried per their policy.
    pub async fn recover(&self) -> Result<Vec<RunId>, EngineError> {
        // The attempts the dead process was running share the blame for
        // its death: the more there were, the less each is suspect.
        let width = self.sh.store.expired_leases(i64::MAX).await?.len().max(1);
        self.sh.crash_width.store(width, std::sync::atomic::Ordering::Relaxed);
        // Every unfinished run of a store this process owns whole; on a
        // shared store, its own, the runs of dead workers and a share of
        // the new.
        let mut ids = self.sh.store.owned_runs().await?;
        for id in &ids {
            self.start(id);
        }
        for id in self.claim(self.sh.config.claim_batch).await? {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Wait until the run's driver stops for good (the run ended, or this
    /// engine does not drive it), then return the stored run: the record
    /// its driver kept when it ended the run here (the same, without a read
    /// transaction; see `driver::mirror`), else a read of the store. A run
    /// that hibernates is waited for across its hibernation: this returns
    /// when it ends, as when its driver stayed.
    pub async fn wait(&self, id: &RunId) -> Result<RunRecord, EngineError> {
        loop {
            let w = {
                let mut runs = self.sh.active.lock().unwrap();
                match runs.driven.get(id) {
                    Some(a) => Some(Ok((a.done.clone(), a.ended.clone()))),
                    None => runs.hibernated.get_mut(id).map(|h| Err(h.subscribe())),
                }
            };
            match w {
                None => break,
                Some(Ok((mut done, ended))) => {
                    if done.wait_for(|v| *v).await.is_err() {
                        break; // the driver panicked
                    }
                    // The run ended: as its driver committed it.
                    if let Some(r) = ended.get() {
                        return Ok(r.clone());
                    }
                }
                // Resolves (as an error) when the entry goes: the run woke.
                Some(Err(mut woke)) => while woke.changed().await.is_ok() {},
            }
        }
        self.sh.store.run(id).await?.ok_or_else(|| EngineError::NotFound(id.clone()))
    }

    /// Cancel a run: running attempts get their cancel token fired and are
    /// recorded `canceled`, like every unfinished step; the run ends `canceled`.
    /// A hibernated run wakes to be canceled by its driver.
    ///
    /// A run not driven here whose owner commits a transition meanwhile (a
    /// store conflict) is read again and canceled, up to 20 times.
    pub async fn cancel(&self, id: &RunId) -> Result<RunRecord, EngineError> {
        let mut tries = 0;
        loop {
            let driven = {
                let mut runs = self.sh.active.lock().unwrap();
                if runs.hibernated.contains_key(id) {
                    let _ = self.start_locked(&mut runs, id, None);
                }
                // Fired under the lock: a driver deciding to hibernate sees it.
                runs.driven.get(id).filter(|a| !*a.done.borrow()).map(|a| {
                    a.cancel.cancel();
                    a.done.clone()
                })
            };
            match driven {
                Some(mut done) => {
                    let _ = done.wait_for(|v| *v).await;
                }
                None => match driver::cancel_undriven(&self.sh, id).await {
                    // Another worker drives it: it cancels it.
                    Err(EngineError::Store(StoreError::Fenced(_))) => {
                        let answer =
                            self.relay(crate::outside::InboxKind::Cancel { run: id.clone() }, Value::Null).await?;
                        if let Some(e) = answer.get("error").and_then(Value::as_str) {
                            return Err(EngineError::Plan(e.to_string()));
                        }
                    }
                    Err(EngineError::Store(StoreError::Conflict(_))) if tries < 20 => {
                        tries += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                    other => other?,
                },
            }
            return self.sh.store.run(id).await?.ok_or_else(|| EngineError::NotFound(id.clone()));
        }
    }

    /// Runs with a driver task now (hibernated runs are not counted: see
    /// [`Engine::hibernated_runs`]).
    pub fn active_runs(&self) -> usize {
        self.sh.active.lock().unwrap().driven.values().filter(|a| !*a.done.borrow()).count()
    }

    /// Runs hibernated here: they wait only for outside input, keep no
    /// driver, and wake when it comes (or when a timeout is due).
    pub fn hibernated_runs(&self) -> usize {
        self.sh.active.lock().unwrap().hibernated.len()
    }

    /// Whether this engine drives run `id` now: a driver task that has not
    /// stopped nor ended the run, or a hibernated run.
    pub fn drives(&self, id: &RunId) -> bool {
        let runs = self.sh.active.lock().unwrap();
        runs.driven.get(id).is_some_and(|a| !*a.done.borrow() && a.ended.get().is_none())
            || runs.hibernated.contains_key(id)
    }

    /// Whether run `id` is hibernated in this engine.
    pub fn is_hibernated(&self, id: &RunId) -> bool {
        self.sh.active.lock().unwrap().hibernated.contains_key(id)
    }

    /// Runs being driven that do not just wait for outside input (a
    /// signal, an event, a child run): what `worker --until-idle` awaits.
    /// Hibernated runs are never busy.
    pub fn busy_runs(&self) -> usize {
        let runs = self.sh.active.lock().unwrap();
        runs.driven
            .values()
            .filter(|a| !*a.done.borrow() && !a.parked.load(std::sync::atomic::Ordering::Relaxed))
            .count()
    }

    /// Stop every driver at once, writing nothing (what a crash does; also
    /// a hard shutdown). Running attempts keep their leases in the store;
    /// hibernated runs are forgotten (with their timers).
    pub fn abort_all(&self) {
        let mut runs = self.sh.active.lock().unwrap();
        runs.abort_all();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Ok(mut runs) = self.active.lock() {
            runs.abort_all();
        }
    }
}

/// The RunState of a record, for callers that only need the state.
pub fn is_finished(r: &RunRecord) -> bool {
    r.state.is_terminal() || matches!(r.state, RunState::InputRequired | RunState::AuthRequired)
}
