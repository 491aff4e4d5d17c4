//! One task per unfinished run: decides readiness, skips, claims, outcomes
//! and the run's end, and commits each round of decisions as one batch
//! (outcomes of finished attempts + claims of the next ones) before it
//! calls any runner.

use crate::state::Transition as _;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::JoinSet;

use super::attempt::{Done, Launch, run_attempt};
use super::children::{self, ChildSpec};
use super::mail::{Mail, SignalAnswer};
use super::scope::{RunScope, Seen};
use super::{Engine, EngineError, Shared};
use crate::cancel::CancelToken;
use crate::error::{ErrorKind, StepError};
use crate::ids::{AttemptNo, ItemIndex, RunId, Seq, idempotency_key};
use crate::model_glue::{Action, Definition, EdgeOn, Graph, Join};
use crate::outside::{WaitKind, WaitRecord};
use crate::retry::{RetryDecision, decide};
use crate::runner::{EventSink, StepOutput, StepRequest};
use crate::state::{AttemptState, RunEvent, RunState, StepEvent, StepState};
use crate::store::{AttemptRecord, Batch, NewEvent, RunRecord, Write};
use weft_model::type_name;

mod ask;
mod flush;
mod load;
mod mirror;
mod notify;
mod observe;
mod outcome;
mod ready;
mod transitions;
mod undriven;
mod waits;

pub(super) use mirror::fresh_record;

pub(super) use undriven::cancel_undriven;
use undriven::fail_unloadable;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnitState {
    Pending,
    /// An item of a `for_each` wait or `workflow` step, waiting for its
    /// signal, event or child run (never claimed).
    Parked,
    Running,
    Retrying,
    Succeeded,
    Failed,
    Canceled,
}

/// One thing that gets attempts: a plain step, or one item of a `for_each`.
struct Unit {
    item: Option<ItemIndex>,
    value: Value,
    state: UnitState,
    next_attempt: AttemptNo,
    retry_at: i64,
    /// The running attempt and its token.
    running: Option<(AttemptNo, CancelToken)>,
    result: Value,
    /// Times its current attempt was interrupted in a row, and its share
    /// of the blame for those crashes (thousandths).
    interruptions: u32,
    blame: u32,
    /// Fuel the running attempt's guest reported (see [`SinkMsg::Fuel`]).
    fuel: Option<u64>,
}

impl Unit {
    fn new(item: Option<ItemIndex>, value: Value) -> Unit {
        Unit {
            item,
            value,
            state: UnitState::Pending,
            next_attempt: AttemptNo::FIRST,
            retry_at: 0,
            running: None,
            result: Value::Null,
            interruptions: 0,
            blame: 0,
            fuel: None,
        }
    }
}

struct StepRt {
    state: StepState,
    output: Value,
    /// Why it failed (for a `join: any | race` that none could satisfy).
    error: Option<String>,
    /// Skipped because its `when` was false (does not cascade).
    when_skipped: bool,
    /// Its join rule and `when` passed: its units exist.
    activated: bool,
    units: Vec<Unit>,
    /// Units before this index are not pending (claiming scans from here).
    pending_from: usize,
    running: usize,
    retrying: usize,
    succeeded: usize,
    /// A `for_each` wait or `workflow` step: what each unit waits for.
    parked: Vec<WaitKind>,
    /// A `for_each` workflow step: its units before this one have their
    /// child run started (the rest wait for room under `concurrency`).
    children_started: usize,
    /// A `sleep` step waiting: when it wakes (ms since epoch; stored as
    /// the step's `next_attempt_at`, so a restart re-arms it).
    wake_at: Option<i64>,
}

impl StepRt {
    /// Change a unit's state, keeping the counters true.
    fn set_unit(&mut self, u: usize, to: UnitState) {
        let from = self.units[u].state;
        for (st, d) in [(from, -1i64), (to, 1)] {
            let c = match st {
                UnitState::Running => &mut self.running,
                UnitState::Retrying => &mut self.retrying,
                UnitState::Succeeded => &mut self.succeeded,
                _ => continue,
            };
            *c = (*c as i64 + d) as usize;
        }
        self.units[u].state = to;
    }

    fn recount(&mut self) {
        let n = |st: UnitState| self.units.iter().filter(|u| u.state == st).count();
        (self.running, self.retrying, self.succeeded) =
            (n(UnitState::Running), n(UnitState::Retrying), n(UnitState::Succeeded));
        self.pending_from = 0;
    }
}

enum Readiness {
    Wait,
    Run,
    /// An edge's condition is not met: skipped, and the skip cascades.
    Skip(String),
    /// Only edges' `when`s held it back: skipped like a false `when` (the
    /// skip does not cascade); what was tested.
    SkipQuiet(Value),
    /// It cannot run, and that is a failure: an edge's `when` could not be
    /// evaluated, or no dependency of a `join: any | race` succeeded and
    /// one failed.
    Fail(StepError),
}

/// Whether one edge into a step fires.
enum EdgeFires {
    Yes,
    /// Its `on` does not hold.
    No,
    /// Its `on` holds, its `when` is false (what was tested).
    NotWhen(Value),
    Unresolved(StepError),
}

enum SinkMsg {
    Progress {
        step: usize,
        item: Option<ItemIndex>,
        data: Value,
    },
    Log {
        step: usize,
        item: Option<ItemIndex>,
        line: String,
    },
    /// An attempt waits for its execution slot (a CPU slot, guest memory).
    Queued {
        step: usize,
        item: Option<ItemIndex>,
    },
    /// An attempt waited `waited_ms` for its execution slot (the engine's
    /// time, not the step's).
    Admitted {
        step: usize,
        item: Option<ItemIndex>,
        waited_ms: u64,
    },
    /// Fuel an attempt's guest used, stored with the attempt's outcome.
    Fuel {
        step: usize,
        item: Option<ItemIndex>,
        used: u64,
    },
    /// A file an attempt produced.
    Artifact {
        step: usize,
        item: Option<ItemIndex>,
        name: String,
        mime: String,
        data: Vec<u8>,
    },
}

struct Sink {
    tx: mpsc::UnboundedSender<SinkMsg>,
    step: usize,
    item: Option<ItemIndex>,
    /// The attempt said it queues for a slot (one event per attempt).
    queued: std::sync::atomic::AtomicBool,
}

impl EventSink for Sink {
    fn progress(&self, data: Value) {
        let _ = self.tx.send(SinkMsg::Progress { step: self.step, item: self.item, data });
    }
    fn log(&self, line: String) {
        let _ = self.tx.send(SinkMsg::Log { step: self.step, item: self.item, line });
    }
    fn fuel(&self, used: u64) {
        let _ = self.tx.send(SinkMsg::Fuel { step: self.step, item: self.item, used });
    }
    fn artifact(&self, name: String, mime: String, data: Vec<u8>) {
        let _ = self.tx.send(SinkMsg::Artifact { step: self.step, item: self.item, name, mime, data });
    }
    fn queued(&self) {
        if !self.queued.swap(true, std::sync::atomic::Ordering::Relaxed) {
            let _ = self.tx.send(SinkMsg::Queued { step: self.step, item: self.item });
        }
    }
    fn admitted(&self, waited: std::time::Duration) {
        // Only a wait one can see: an idle machine admits at once.
        if waited >= ADMISSION_SHOWN {
            let waited_ms = waited.as_millis().min(u64::MAX as u128) as u64;
            let _ = self.tx.send(SinkMsg::Admitted { step: self.step, item: self.item, waited_ms });
        }
    }
}

/// An attempt that waited at least this long for its execution slot gets
/// an `attempt.admitted` event (`{"waited_ms"}`) in its run's history
/// (its wait began with an `attempt.queued` event).
const ADMISSION_SHOWN: std::time::Duration = std::time::Duration::from_millis(5);

enum Wake {
    Canceled,
    Done(Vec<Done>),
    Sink(SinkMsg),
    Permit(OwnedSemaphorePermit),
    Timer,
    Mail(Mail),
    Child(usize, Option<usize>, Box<Result<RunRecord, StepError>>),
}

/// An answer sent once the batch that decided it is durable.
enum Reply {
    Signal(tokio::sync::oneshot::Sender<SignalAnswer>, SignalAnswer),
    Event(tokio::sync::oneshot::Sender<bool>, bool),
    Redefine(tokio::sync::oneshot::Sender<super::mail::Redefined>, super::mail::Redefined),
}

/// What the engine keeps to talk to a run's driver.
pub(super) struct Link {
    pub mail: mpsc::UnboundedReceiver<Mail>,
    /// True while the run only waits for outside input (signals, events,
    /// child runs): `weft worker --until-idle` does not wait for it.
    pub parked: Arc<std::sync::atomic::AtomicBool>,
    /// Which start of the run this driver is (its entry in `active`).
    pub generation: u64,
    /// The run's record once it ended, for `Engine::wait` (see [`mirror`]).
    pub ended: Arc<std::sync::OnceLock<RunRecord>>,
    /// How many times this driver started again after a store error.
    pub restarts: u32,
}

struct Driver {
    sh: Arc<Shared>,
    id: RunId,
    info: observe::RunInfo,
    def: Arc<Definition>,
    graph: Graph,
    topo: Vec<usize>,
    rank: Vec<usize>,
    names: HashMap<String, usize>,
    input: Value,
    /// The run's labels as an object (`@run.labels`).
    labels: Value,
    state: RunState,
    deadline_at: Option<i64>,
    steps: Vec<StepRt>,
    seq: Seq,
    batch: Batch,
    inflight: JoinSet<Done>,
    to_launch: Vec<Launch>,
    /// Attempts that finished while being launched (see `launch`).
    done_now: Vec<Done>,
    permits: Vec<OwnedSemaphorePermit>,
    want_permit: bool,
    failures: u32,
    /// Fuel the run's code steps used so far (for `limits.run_fuel`).
    fuel_used: u64,
    /// Bytes of log lines and progress this driver added to the run's log
    /// (see `EngineConfig::max_run_log_bytes`).
    log_bytes: u64,
    unhandled: Option<StepError>,
    cancel: CancelToken,
    sink_tx: mpsc::UnboundedSender<SinkMsg>,
    sink_rx: mpsc::UnboundedReceiver<SinkMsg>,
    link: Link,
    replies: Vec<Reply>,
    depth: u32,
    /// Child runs being created or awaited, and those still to start.
    children: JoinSet<(usize, Option<usize>, Result<RunRecord, StepError>)>,
    to_spawn: Vec<ChildSpec>,
    /// Children to cancel once the batch that ended their step is durable.
    to_cancel: Vec<RunId>,
    /// Questions left unanswered, to abandon likewise (see `ask`).
    to_abandon: Vec<(Action, Value)>,
    /// Wait steps that started waiting (or were loaded waiting): once
    /// that is committed, each looks for what came before it (signals
    /// queued for it, events emitted since its run began).
    early: Vec<usize>,
    /// The signals the store holds queued for this run's steps: (step,
    /// item, message id) each.
    queued: Vec<crate::scheduler::mail::Queued>,
    /// Notifications decided at the flush (see `notify`), with their
    /// event's seq: a step's wait resolved (`Some(step)`), or a signal wait
    /// opened (`None`: the run asks for input, even when it already did).
    deferred: Vec<(Option<usize>, Seq)>,
    /// A batch of this driver is durable.
    committed: bool,
    /// Told the outcome of the first commit, which creates the run (see
    /// [`Creation`]).
    created: Option<tokio::sync::oneshot::Sender<Result<(), crate::store::StoreError>>>,
    mirror: mirror::Mirror,
}

/// What the starter of a driver knows already: the run's plan, and for a
/// run it has just created, its record.
pub(super) struct Known {
    pub def: Arc<Definition>,
    pub rec: Option<RunRecord>,
    /// The run is not stored yet: the driver's first commit creates it.
    pub create: Option<Creation>,
}

/// A run created by its driver's first commit, together with the run's
/// start and its first claims: one transaction where two were (the
/// creation, then the start), and the same pages written once. The run's
/// submitter learns the outcome through `done` before it hands the id out,
/// so nobody can know the run before it is stored; if that commit fails,
/// nothing of the run is stored.
pub(super) struct Creation {
    pub batch: Batch,
    pub done: tokio::sync::oneshot::Sender<Result<(), crate::store::StoreError>>,
}

/// Drive one run to its end (or until the task is aborted).
pub(super) async fn drive(
    sh: Arc<Shared>,
    id: RunId,
    known: Option<Known>,
    cancel: CancelToken,
    link: Link,
) -> Result<(), EngineError> {
    let (def, rec, create) = match known {
        Some(k) => (Some(k.def), k.rec, k.create),
        None => (None, None, None),
    };
    let creating = create.is_some();
    let from_memory = rec.is_some();
    // A run this engine did not just create may be another worker's (a
    // store shared by many): take it first, or leave it alone.
    if !from_memory && !sh.store.claim_run(&id).await? {
        return Ok(());
    }
    let rec = match rec {
        Some(r) => r,
        None => sh.store.run(&id).await?.ok_or_else(|| EngineError::NotFound(id.clone()))?,
    };
    // Ended, or a recording (never executed).
    if !rec.state.is_executed() {
        return Ok(());
    }
    // A run queue: only the oldest unfinished run of a key executes.
    let key = rec.concurrency_key.clone();
    if let Some(k) = &key
        && rec.state == RunState::Submitted
        && sh.store.queue_head(k).await?.as_ref() != Some(&id)
    {
        link.parked.store(true, std::sync::atomic::Ordering::Relaxed);
        // On a shared store, whichever worker ends the head starts it.
        sh.store.release_runs(std::slice::from_ref(&id)).await?;
        return Ok(());
    }
    let def = match def {
        Some(d) => d,
        None => match sh.plans.get(&rec) {
            Ok(d) => d,
            Err(p) => return fail_unloadable(&sh, &rec, p.to_string()).await,
        },
    };
    let mirror = mirror::Mirror::of(&rec, creating);
    let queued = if creating { vec![] } else { Engine::from_shared(sh.clone()).queued_for(&id, &def).await? };
    let parent = rec.parent.clone().filter(|_| rec.state.is_executed());
    let mut d = Driver::new(sh.clone(), rec, def.clone(), cancel.clone(), link, queued)?;
    d.mirror = mirror;
    if let Some(c) = create {
        // The creation comes first in the run's first batch.
        let start = std::mem::replace(&mut d.batch, c.batch);
        d.batch.writes.extend(start.writes);
        d.created = Some(c.done);
    }
    // A child run whose parent has ended ends canceled instead of running
    // on by itself: the parent's cancel may have come before the child was
    // stored (its creation in flight), and found no run.
    if let Some(parent) = &parent
        && sh.store.run(parent).await?.is_none_or(|p| p.state.is_terminal())
    {
        d.end_run(RunEvent::Cancel, None, StepError::canceled("its parent run ended"), true)?;
    }
    let r = d.main().await;
    if creating && !d.committed && matches!(r, Err(EngineError::Store(_))) {
        // The run was not created: its submitter has the error.
        return Ok(());
    }
    if from_memory
        && !creating
        && !d.committed
        && let Err(EngineError::Store(crate::store::StoreError::Conflict(_))) = &r
    {
        // The run changed between its creation and this start (canceled
        // by id meanwhile): start again from what the store holds.
        let link = d.into_link();
        return Box::pin(drive(sh, id, Some(Known { def, rec: None, create: None }), cancel, link)).await;
    }
    d.stop_inflight().await;
    if let Err(EngineError::Store(e)) = &r
        && !matches!(e, crate::store::StoreError::Closed)
        && !d.state.is_terminal()
        && (!creating || d.committed)
    {
        // A write the store refused for good (a state changed under the
        // run, a transaction the database aborted): the run is not failed
        // for it, and not left half-driven either. Its driver starts again
        // from what the store holds, after a pause that grows with each
        // restart; a run another worker drives now is left to it (the
        // claim at the start refuses it).
        let mut link = d.into_link();
        link.restarts += 1;
        let pause = std::time::Duration::from_millis((100u64 << link.restarts.min(9)).min(30_000));
        tracing::warn!(run = %id, error = %e, restarts = link.restarts,
            "the run's driver stopped on a store error; it starts again from the stored run in {pause:?}");
        tokio::time::sleep(pause).await;
        return Box::pin(drive(sh, id, Some(Known { def, rec: None, create: None }), cancel, link)).await;
    }
    if r.is_ok()
        && let Some(rec) = std::mem::replace(&mut d.mirror, mirror::Mirror::off()).ended()
    {
        let _ = d.link.ended.set(rec);
    }
    if d.state.is_terminal() && !d.queued.is_empty() {
        Engine::from_shared(sh.clone()).answer_queued(&id, d.state).await;
    }
    // The run's end lets the next run of its queue go.
    if let Some(k) = key
        && d.state.is_terminal()
        && let Ok(Some(next)) = sh.store.queue_head(&k).await
    {
        Engine::from_shared(sh).start(&next);
    }
    r
}

impl Driver {
    fn new(
        sh: Arc<Shared>,
        rec: RunRecord,
        def: Arc<Definition>,
        cancel: CancelToken,
        link: Link,
        queued: Vec<crate::scheduler::mail::Queued>,
    ) -> Result<Driver, EngineError> {
        let graph = Graph::build(&def);
        let topo = graph.topo_order().map_err(|c| EngineError::Plan(format!("cycle through steps {c:?}")))?;
        let mut rank = vec![0; topo.len()];
        for (r, &i) in topo.iter().enumerate() {
            rank[i] = r;
        }
        let names = def.steps.iter().enumerate().map(|(i, s)| (s.name.clone(), i)).collect();
        let (sink_tx, sink_rx) = mpsc::unbounded_channel();
        let steps = def.steps.iter().map(|_| StepRt::pending()).collect();
        let mut d = Driver {
            sh,
            id: rec.id.clone(),
            info: observe::RunInfo::of(&rec),
            def,
            graph,
            topo,
            rank,
            names,
            input: rec.input.clone(),
            labels: serde_json::to_value(&rec.labels).unwrap_or_default(),
            state: rec.state,
            deadline_at: rec.deadline_at,
            steps,
            seq: rec.last_seq,
            batch: Batch::new(),
            inflight: JoinSet::new(),
            to_launch: vec![],
            done_now: vec![],
            permits: vec![],
            want_permit: false,
            failures: 0,
            fuel_used: 0,
            log_bytes: 0,
            unhandled: None,
            cancel,
            sink_tx,
            sink_rx,
            link,
            replies: vec![],
            depth: rec.depth,
            children: JoinSet::new(),
            to_spawn: vec![],
            to_cancel: vec![],
            to_abandon: vec![],
            early: vec![],
            deferred: vec![],
            queued,
            committed: false,
            created: None,
            mirror: mirror::Mirror::off(),
        };
        d.load(&rec)?;
        Ok(d)
    }

    fn now(&self) -> i64 {
        self.sh.clock.now_ms()
    }

    /// The engine's link to this run, for a driver that starts over.
    fn into_link(self) -> Link {
        self.link
    }

    // ---- the loop -------------------------------------------------------

    async fn main(&mut self) -> Result<(), EngineError> {
        loop {
            if !self.state.is_terminal() {
                self.advance()?;
            }
            self.flush().await?;
            self.send_replies();
            self.launch();
            if self.state.is_terminal() {
                return Ok(());
            }
            if self.cancel.is_canceled() {
                // As for a task's outcome: the run's cancel comes first,
                // and records the attempt canceled.
                self.done_now.clear();
            }
            if !self.done_now.is_empty() {
                self.drain_sink();
                for d in std::mem::take(&mut self.done_now) {
                    self.on_done(d)?;
                }
                // A chain of such attempts never waits: let the worker's
                // other tasks in now and then.
                tokio::task::consume_budget().await;
                continue;
            }
            if self.can_hibernate() {
                let (sh, until) = (self.sh.clone(), self.next_timer());
                let (mail, sink, cancel) = (&self.link.mail, &self.sink_rx, &self.cancel);
                let idle = || mail.is_empty() && sink.is_empty() && !cancel.is_canceled();
                if sh.hibernate(&self.id, self.link.generation, idle, until) {
                    return Ok(());
                }
            }
            self.link.parked.store(self.is_parked(), std::sync::atomic::Ordering::Relaxed);
            match self.next_wake().await {
                Wake::Canceled => {
                    self.end_run(RunEvent::Cancel, None, StepError::canceled("the run was canceled"), true)?
                }
                Wake::Done(done) => {
                    self.drain_sink();
                    for d in done {
                        self.on_done(d)?;
                    }
                }
                Wake::Sink(m) => self.on_sink(m),
                Wake::Permit(p) => {
                    self.permits.push(p);
                    self.want_permit = false;
                }
                Wake::Timer => {}
                Wake::Mail(m) => self.on_mail(m)?,
                Wake::Child(i, u, r) => self.on_child(i, u, *r)?,
            }
        }
    }

    /// Record the logs and progress attempts sent so far, so that those of
    /// an attempt come before its outcome in the run's event log.
    fn drain_sink(&mut self) {
        while let Ok(m) = self.sink_rx.try_recv() {
            self.on_sink(m);
        }
    }

    async fn next_wake(&mut self) -> Wake {
        let timer = self.next_timer().map(|t| self.sh.clock.sleep_until(t));
        let permits = self.sh.permits.clone();
        tokio::select! {
            biased;
            _ = self.cancel.canceled() => Wake::Canceled,
            Some(first) = self.inflight.join_next(), if !self.inflight.is_empty() => {
                let mut all = vec![];
                for r in std::iter::once(first).chain(std::iter::from_fn(|| self.inflight.try_join_next())) {
                    match r {
                        Ok(d) => all.push(d),
                        Err(e) if e.is_cancelled() => {}
                        Err(e) => std::panic::resume_unwind(e.into_panic()),
                    }
                }
                Wake::Done(all)
            }
            Some(m) = self.sink_rx.recv() => Wake::Sink(m),
            Some(m) = self.link.mail.recv() => Wake::Mail(m),
            Some(r) = self.children.join_next(), if !self.children.is_empty() => match r {
                Ok((i, u, r)) => Wake::Child(i, u, Box::new(r)),
                Err(e) if e.is_cancelled() => Wake::Timer,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            },
            Ok(p) = permits.acquire_owned(), if self.want_permit => Wake::Permit(p),
            _ = async { timer.expect("guarded").await }, if timer.is_some() => Wake::Timer,
        }
    }

    fn next_timer(&self) -> Option<i64> {
        let now = self.now();
        let retries = self.steps.iter().enumerate().filter(|(_, s)| s.retrying > 0).flat_map(|(i, s)| {
            let cap = self.def.steps[i].concurrency.map(|c| c.max(1) as usize).unwrap_or(usize::MAX);
            // A due retry held back by a missing permit or by the
            // step's concurrency waits for an attempt to end, not for
            // time: no timer for it (no spinning). Any other due retry
            // wakes the loop at once.
            let held = self.want_permit || s.running >= cap;
            s.units
                .iter()
                .filter(move |u| u.state == UnitState::Retrying && (u.retry_at > now || !held))
                .map(|u| u.retry_at)
        });
        let sleeps = self.steps.iter().filter(|s| s.state == StepState::Waiting).filter_map(|s| s.wake_at);
        retries.chain(sleeps).chain(self.deadline_at).min()
    }

    fn launch(&mut self) {
        // The only attempt of its run, and any attempt its runner expects
        // to finish in place (a short guest, a native runner): polled once
        // right here, before it becomes a task. One that finishes without
        // waiting is done without a task spawn and a wake-up; any other
        // goes on as a task, from where it stopped. The driver cannot
        // watch the run's cancel meanwhile, so the run's token fires the
        // attempt's directly while it is polled here.
        let alone = self.to_launch.len() == 1 && self.inflight.is_empty();
        for l in self.to_launch.drain(..) {
            let token = l.token.clone();
            if token.is_canceled() {
                continue; // its run or step ended in the batch that claimed it
            }
            let in_place = alone || self.sh.runner.finishes_in_place(&l.req.action);
            let mut attempt = Box::pin(run_attempt(self.sh.runner.clone(), self.sh.clock.clone(), l));
            if in_place {
                let _linked = self.cancel.on_cancel(move || token.cancel());
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                if let std::task::Poll::Ready(done) = attempt.as_mut().poll(&mut cx) {
                    self.done_now.push(done);
                    continue;
                }
            }
            self.inflight.spawn(attempt);
        }
        for c in self.to_spawn.drain(..) {
            self.children.spawn(children::run_child(self.sh.clone(), c));
        }
        for i in std::mem::take(&mut self.early) {
            Engine::from_shared(self.sh.clone()).spawn_take_early(&self.id, &self.def.steps[i].name);
        }
        self.abandon_questions();
        for child in self.to_cancel.drain(..) {
            let engine = Engine::from_shared(self.sh.clone());
            tokio::spawn(async move {
                if let Err(e) = engine.cancel(&child).await {
                    tracing::warn!(run = %child, error = %e, "cannot cancel a child run");
                }
            });
        }
    }

    fn send_replies(&mut self) {
        for r in self.replies.drain(..) {
            match r {
                Reply::Signal(tx, a) => {
                    let _ = tx.send(a);
                }
                Reply::Event(tx, ok) => {
                    let _ = tx.send(ok);
                }
                Reply::Redefine(tx, r) => {
                    let _ = tx.send(r);
                }
            }
        }
    }

    /// Attempts still in flight when the run ended were recorded canceled
    /// and their tokens fired; give their runners a grace period to wind
    /// down (interrupt the guest, tell the MCP server), then drop them.
    async fn stop_inflight(&mut self) {
        for s in &self.steps {
            for u in &s.units {
                if let Some((_, t)) = &u.running {
                    t.cancel();
                }
            }
        }
        if self.inflight.is_empty() {
            return;
        }
        let grace = std::time::Duration::from_millis(self.sh.config.cancel_grace_ms);
        let _ = tokio::time::timeout(grace, async { while self.inflight.join_next().await.is_some() {} }).await;
        self.inflight.abort_all();
    }
}
