//! An in-memory [`Store`], for unit tests of the scheduler. It applies the
//! same rules as the SQLite store: batches are atomic, state writes are
//! compare-and-set, attempts and event seqs are unique.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::ids::{RunId, Seq};
use crate::state::AttemptState;
use crate::store::*;

#[derive(Default)]
struct Inner {
    runs: BTreeMap<RunId, RunRecord>,
    events: HashMap<RunId, Vec<NewEvent>>,
    templates: BTreeMap<String, Vec<TemplateRecord>>,
    inbox: Vec<InboxRecord>,
    schedules: BTreeMap<String, ScheduleRecord>,
    /// Artifacts by run, then name.
    artifacts: HashMap<RunId, BTreeMap<String, StoredArtifact>>,
    outbox: crate::memstore_outbox::Outbox,
}

/// An artifact's record and bytes.
type StoredArtifact = (crate::store::ArtifactRecord, std::sync::Arc<[u8]>);

/// What a test runs after each committed batch (see [`MemStore::after_commit`]).
type AfterCommit = std::sync::Arc<dyn Fn(&Batch) -> Option<crate::clock::BoxFuture<'static, ()>> + Send + Sync>;

/// See the module docs.
#[derive(Default)]
pub struct MemStore {
    inner: Mutex<Inner>,
    commits: AtomicU64,
    run_reads: AtomicU64,
    /// The next commits fail with this error, this many times.
    fail_next: Mutex<Option<(StoreError, u32)>>,
    after_commit: Mutex<Option<AfterCommit>>,
}

impl MemStore {
    pub fn new() -> Self {
        MemStore::default()
    }

    /// How many batches were committed.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::SeqCst)
    }

    /// How many times a run was read (`RunStore::run`).
    pub fn run_reads(&self) -> u64 {
        self.run_reads.load(Ordering::SeqCst)
    }

    /// Make the next commit fail with `err` (nothing applied).
    pub fn fail_next_commit(&self, err: StoreError) {
        self.fail_next_commits(err, 1);
    }

    /// Make the next `n` commits fail with `err` (a full disk, say).
    pub fn fail_next_commits(&self, err: StoreError, n: u32) {
        *self.fail_next.lock().unwrap() = (n > 0).then_some((err, n));
    }

    /// Calls `hook` with every batch once it is committed, before its
    /// `commit` returns, and awaits the future it gives (if any): what
    /// another task of the process does when a commit wakes it, at the
    /// worst moment for the committer.
    pub fn after_commit(
        &self,
        hook: impl Fn(&Batch) -> Option<crate::clock::BoxFuture<'static, ()>> + Send + Sync + 'static,
    ) {
        *self.after_commit.lock().unwrap() = Some(std::sync::Arc::new(hook));
    }

    /// Commits `batch`, then runs the [`MemStore::after_commit`] hook.
    async fn commit_then_hook(&self, batch: &Batch) -> Result<(), StoreError> {
        self.commit_ref(batch)?;
        let hook = self.after_commit.lock().unwrap().clone();
        if let Some(then) = hook.and_then(|h| h(batch)) {
            then.await;
        }
        Ok(())
    }

    /// Every write of every committed batch, for assertions.
    pub fn all_events(&self, run: &RunId) -> Vec<NewEvent> {
        self.inner.lock().unwrap().events.get(run).cloned().unwrap_or_default()
    }

    /// An inbox message by its id, for assertions.
    pub fn inbox_message(&self, id: &str) -> Option<InboxRecord> {
        self.inner.lock().unwrap().inbox.iter().find(|m| m.id == id).cloned()
    }

    fn commit_ref(&self, batch: &Batch) -> Result<(), StoreError> {
        {
            let mut next = self.fail_next.lock().unwrap();
            if let Some((e, n)) = next.take() {
                if n > 1 {
                    *next = Some((e.clone(), n - 1));
                }
                return Err(e);
            }
        }
        let mut inner = self.inner.lock().unwrap();
        MemStore::apply(&mut inner, batch)?;
        self.commits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn apply(inner: &mut Inner, batch: &Batch) -> Result<(), StoreError> {
        // Stage every touched run and log, apply, then swap in.
        let mut runs: HashMap<RunId, Option<RunRecord>> = HashMap::new();
        let mut events: HashMap<RunId, Vec<NewEvent>> = HashMap::new();
        let global = batch.writes.iter().any(|w| w.run_id().is_none());
        let mut inbox = if global { inner.inbox.clone() } else { vec![] };
        let mut schedules = if global { inner.schedules.clone() } else { BTreeMap::new() };
        let outbound = batch.writes.iter().any(crate::memstore_outbox::Outbox::owns);
        let mut outbox = if outbound { inner.outbox.clone() } else { Default::default() };
        for w in &batch.writes {
            if crate::memstore_outbox::Outbox::owns(w) {
                outbox.apply(w)?;
                continue;
            }
            let Some(id) = w.run_id().cloned() else { continue };
            runs.entry(id.clone()).or_insert_with(|| inner.runs.get(&id).cloned());
            events.entry(id.clone()).or_insert_with(|| inner.events.get(&id).cloned().unwrap_or_default());
        }
        for w in batch.writes.iter().filter(|w| !crate::memstore_outbox::Outbox::owns(w)) {
            match w.run_id() {
                Some(id) => {
                    let slot = runs.get_mut(id).expect("staged");
                    apply_write(slot, events.get_mut(id).expect("staged"), w)?;
                }
                None => apply_global(&mut inbox, &mut schedules, w)?,
            }
        }
        for (id, r) in runs {
            if let Some(r) = r {
                inner.runs.insert(id, r);
            }
        }
        inner.events.extend(events);
        for w in &batch.writes {
            if let Write::PutArtifact { artifact, data } = w {
                let of_run = inner.artifacts.entry(artifact.run.clone()).or_default();
                of_run.insert(artifact.name.clone(), (artifact.clone(), data.clone()));
            }
        }
        if global {
            inner.inbox = inbox;
            inner.schedules = schedules;
        }
        if outbound {
            inner.outbox = outbox;
        }
        Ok(())
    }
}

/// Whether a message is a signal queued for a step that does not wait yet.
fn is_queued(m: &InboxRecord) -> bool {
    matches!(m.kind, InboxKind::Signal { .. }) && m.answer.as_ref().is_some_and(crate::outside::is_queued_answer)
}

/// The reference semantics of the writes that belong to no run.
fn apply_global(
    inbox: &mut Vec<InboxRecord>,
    schedules: &mut BTreeMap<String, ScheduleRecord>,
    w: &Write,
) -> Result<(), StoreError> {
    let conflict = |m: String| Err(StoreError::Conflict(m));
    match w {
        Write::InboxPut(m) => {
            let event_id = |k: &InboxKind| k.event_id().map(str::to_string);
            if inbox.iter().any(|x| x.id == m.id) {
                return conflict(format!("inbox message {} exists", m.id));
            }
            if let Some(e) = event_id(&m.kind)
                && inbox.iter().any(|x| event_id(&x.kind).as_deref() == Some(e.as_str()))
            {
                return conflict(format!("event id {e} was already emitted"));
            }
            inbox.push(m.clone());
        }
        // One process owns the store: nobody else takes messages.
        Write::InboxTake { .. } => {}
        Write::InboxAnswer { id, answer } => match inbox.iter_mut().find(|x| x.id == *id) {
            Some(m) if m.answer.is_none() => m.answer = Some(answer.clone()),
            _ => return conflict(format!("inbox message {id} is not pending")),
        },
        Write::InboxSettle { id, answer } => {
            if let Some(m) = inbox.iter_mut().find(|x| x.id == *id && is_queued(x)) {
                m.answer = Some(answer.clone());
            }
        }
        Write::PutSchedule(s) => {
            if schedules.contains_key(&s.name) {
                return conflict(format!("schedule {} exists", s.name));
            }
            schedules.insert(s.name.clone(), s.clone());
        }
        Write::DeleteSchedule { name } => {
            if schedules.remove(name).is_none() {
                return Err(missing(&format!("schedule {name}")));
            }
        }
        Write::SchedulePaused { name, paused, next } => match schedules.get_mut(name) {
            Some(s) => {
                s.paused = *paused;
                s.next_fire_at = *next;
            }
            None => return Err(missing(&format!("schedule {name}"))),
        },
        Write::ScheduleFired { name, from, next, run } => match schedules.get_mut(name) {
            Some(s) if s.next_fire_at == *from => {
                s.next_fire_at = *next;
                s.last_fire_at = Some(*from);
                if run.is_some() {
                    s.last_run = run.clone();
                }
            }
            _ => return conflict(format!("schedule {name} does not fire at {from}")),
        },
        other => unreachable!("a run's write: {other:?}"),
    }
    Ok(())
}

fn missing(what: &str) -> StoreError {
    StoreError::Conflict(format!("{what} does not exist"))
}

/// Where [`apply_write`] logs a run's events: whole (the store's log) or
/// by seq only (a driver's mirror, which needs no copy of their data).
pub(crate) trait EventLog {
    fn contains(&self, seq: Seq) -> bool;
    fn add(&mut self, e: &NewEvent);
    fn clear(&mut self);
}

impl EventLog for Vec<NewEvent> {
    fn contains(&self, seq: Seq) -> bool {
        self.iter().any(|x| x.seq == seq)
    }
    fn add(&mut self, e: &NewEvent) {
        let pos = self.partition_point(|x| x.seq < e.seq);
        self.insert(pos, e.clone());
    }
    fn clear(&mut self) {
        Vec::clear(self)
    }
}

impl EventLog for Vec<Seq> {
    fn contains(&self, seq: Seq) -> bool {
        self.as_slice().contains(&seq)
    }
    fn add(&mut self, e: &NewEvent) {
        self.push(e.seq);
    }
    fn clear(&mut self) {
        Vec::clear(self)
    }
}

/// The reference semantics of one write against one run.
pub(crate) fn apply_write(slot: &mut Option<RunRecord>, log: &mut impl EventLog, w: &Write) -> Result<(), StoreError> {
    match w {
        // Kept beside the run's record (see `MemStore::apply`).
        Write::PutArtifact { artifact, .. } => {
            let r = slot.as_mut().ok_or_else(|| missing(&format!("run {}", artifact.run)))?;
            r.artifacts.retain(|a| a.name != artifact.name);
            r.artifacts.push(artifact.clone());
            r.artifacts.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Write::CreateRun { run, steps } => {
            if slot.is_some() {
                return Err(StoreError::Conflict(format!("run {} exists", run.id)));
            }
            *slot = Some(RunRecord::submitted(run, steps));
        }
        Write::RunState { run, from, to, output, error, at } => {
            let r = slot.as_mut().ok_or_else(|| missing(&format!("run {run}")))?;
            if r.state != *from {
                return Err(StoreError::Conflict(format!("run {run} is {} not {from}", r.state)));
            }
            r.state = *to;
            r.output = output.clone();
            r.error = error.clone();
            r.updated_at = r.updated_at.max(*at);
        }
        Write::StepState { run, step, from, to, output, error, next_attempt_at, at } => {
            let r = slot.as_mut().ok_or_else(|| missing(&format!("run {run}")))?;
            let s =
                r.steps.iter_mut().find(|s| s.name == *step).ok_or_else(|| missing(&format!("step {run}/{step}")))?;
            if s.state != *from {
                return Err(StoreError::Conflict(format!("step {run}/{step} is {} not {from}", s.state)));
            }
            s.state = *to;
            s.output = output.clone();
            s.error = error.clone();
            s.next_attempt_at = *next_attempt_at;
            if *to == crate::state::StepState::Running && s.started_at.is_none() {
                s.started_at = Some(*at);
            }
            if to.is_terminal() {
                s.ended_at = Some(*at);
            }
        }
        Write::StartAttempt { run, step, item, attempt, lease_until, at, input } => {
            let r = slot.as_mut().ok_or_else(|| missing(&format!("run {run}")))?;
            // An interrupted attempt runs again: same number, same row.
            let again = r.attempts.iter().position(|a| {
                a.step == *step && a.item == *item && a.attempt == *attempt && a.state == AttemptState::Interrupted
            });
            if r.attempts.iter().any(|a| a.step == *step && a.item == *item && a.state == AttemptState::Running) {
                return Err(StoreError::Conflict(format!("another attempt of {run}/{step} is running")));
            }
            if let Some(k) = again {
                let a = &mut r.attempts[k];
                a.state = a.state.rerun().map_err(|e| StoreError::Conflict(e.to_string()))?;
                (a.lease_until, a.started_at, a.ended_at) = (*lease_until, *at, None);
                (a.output, a.error, a.input) = (None, None, input.clone());
                return Ok(());
            }
            if r.attempts.iter().any(|a| a.step == *step && a.item == *item && a.attempt == *attempt) {
                return Err(StoreError::Conflict(format!(
                    "attempt {attempt} of {run}/{step} exists or another is running"
                )));
            }
            let s =
                r.steps.iter_mut().find(|s| s.name == *step).ok_or_else(|| missing(&format!("step {run}/{step}")))?;
            s.attempts += 1;
            r.attempts.push(AttemptRecord {
                step: step.clone(),
                item: *item,
                attempt: *attempt,
                state: AttemptState::Running,
                lease_until: *lease_until,
                started_at: *at,
                ended_at: None,
                output: None,
                error: None,
                interruptions: 0,
                blame: 0,
                fuel: None,
                input: input.clone(),
            });
            let order: HashMap<&str, usize> = r.steps.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
            let mut atts = std::mem::take(&mut r.attempts);
            atts.sort_by_key(|a| (order.get(a.step.as_str()).copied(), a.item, a.attempt));
            r.attempts = atts;
        }
        Write::FinishAttempt { run, step, item, attempt, state, output, error, fuel, blame, at } => {
            let r = slot.as_mut().ok_or_else(|| missing(&format!("run {run}")))?;
            let a = r
                .attempts
                .iter_mut()
                .find(|a| a.step == *step && a.item == *item && a.attempt == *attempt)
                .ok_or_else(|| missing(&format!("attempt {attempt} of {run}/{step}")))?;
            a.state = a.state.finish(*state).map_err(|e| StoreError::Conflict(e.to_string()))?;
            a.output = output.clone();
            a.error = error.clone();
            a.ended_at = Some(*at);
            if let Some(f) = fuel {
                a.fuel = Some(a.fuel.unwrap_or(0).saturating_add(*f));
            }
            if *state == AttemptState::Interrupted {
                a.interruptions += 1;
                a.blame = *blame;
            }
        }
        Write::Event(e) => {
            let r = slot.as_mut().ok_or_else(|| missing(&format!("run {}", e.run)))?;
            if log.contains(e.seq) {
                return Err(StoreError::Conflict(format!("event {} of {} exists", e.seq.0, e.run)));
            }
            log.add(e);
            // A run's last event says when it last changed.
            if e.seq > r.last_seq {
                r.updated_at = r.updated_at.max(e.at);
            }
            r.last_seq = r.last_seq.max(e.seq);
        }
        Write::OpenWait(w) => {
            let r = slot.as_mut().ok_or_else(|| missing(&format!("run {}", w.run)))?;
            if r.waits.iter().any(|x| x.step == w.step) {
                return Err(StoreError::Conflict(format!("step {}/{} already waits", w.run, w.step)));
            }
            let order: HashMap<&str, usize> = r.steps.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
            let pos = r.waits.partition_point(|x| order.get(x.step.as_str()) < order.get(w.step.as_str()));
            r.waits.insert(pos, w.clone());
        }
        // Kept in the outbox, beside the run (see `MemStore::apply`).
        Write::PutStartKey(_) | Write::PutDelivery(_) => {}
        Write::CloseWait { run, step } => {
            let r = slot.as_mut().ok_or_else(|| missing(&format!("run {run}")))?;
            r.waits.retain(|x| x.step != *step);
        }
        Write::DeleteRecording { run } => {
            if slot.as_ref().is_none_or(|r| r.state != crate::state::RunState::Recording) {
                return Err(StoreError::Conflict(format!("run {run} is not recording")));
            }
            *slot = None;
            log.clear();
        }
        Write::RunDefinition { run, definition } => {
            let r = slot.as_mut().ok_or_else(|| missing(&format!("run {run}")))?;
            if r.state.is_terminal() {
                return Err(StoreError::Conflict(format!("run {run} has ended")));
            }
            r.definition = definition.clone();
        }
        other => unreachable!("not a run's write: {other:?}"),
    }
    Ok(())
}

#[async_trait::async_trait]
impl RunStore for MemStore {
    async fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        self.commit_then_hook(&batch).await
    }

    async fn commit_shared(&self, batch: std::sync::Arc<Batch>) -> Result<(), StoreError> {
        self.commit_then_hook(&batch).await
    }

    async fn run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.run_reads.fetch_add(1, Ordering::SeqCst);
        Ok(self.inner.lock().unwrap().runs.get(id).cloned())
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        let inner = self.inner.lock().unwrap();
        let it = inner.runs.values().rev().filter(|r| filter.matches(r)).map(|r| RunSummary {
            id: r.id.clone(),
            template: r.template.clone(),
            version: r.version,
            state: r.state,
            parent: r.parent.clone(),
            created_at: r.created_at,
            updated_at: r.updated_at,
            labels: r.labels.clone(),
            error: r.error.clone(),
        });
        Ok(it.take(filter.limit.unwrap_or(usize::MAX)).collect())
    }

    async fn events_after(&self, run: &RunId, after: Seq, limit: usize) -> Result<Vec<EventRecord>, StoreError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner
            .events
            .get(run)
            .map(|l| l.iter().filter(|e| e.seq > after).take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn unfinished_runs(&self) -> Result<Vec<RunId>, StoreError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.runs.values().filter(|r| r.state.is_executed()).map(|r| r.id.clone()).collect())
    }

    async fn expired_leases(&self, now_ms: i64) -> Result<Vec<ExpiredLease>, StoreError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner
            .runs
            .values()
            .filter(|r| !r.state.is_terminal())
            .flat_map(|r| {
                r.attempts.iter().filter(|a| a.state == AttemptState::Running && a.lease_until < now_ms).map(|a| {
                    ExpiredLease {
                        run: r.id.clone(),
                        step: a.step.clone(),
                        item: a.item,
                        attempt: a.attempt,
                        lease_until: a.lease_until,
                    }
                })
            })
            .collect())
    }

    async fn event_waits(&self, event: &str) -> Result<Vec<WaitRecord>, StoreError> {
        let inner = self.inner.lock().unwrap();
        let mut all: Vec<WaitRecord> = inner
            .runs
            .values()
            .filter(|r| !r.state.is_terminal())
            .flat_map(|r| r.waits.iter())
            .filter(|w| w.kind.index_columns().1 == Some(event))
            .cloned()
            .collect();
        all.sort_by_key(|w| w.since);
        Ok(all)
    }

    async fn inbox_pending(&self) -> Result<Vec<InboxRecord>, StoreError> {
        Ok(self.inner.lock().unwrap().inbox.iter().filter(|m| m.answer.is_none()).cloned().collect())
    }

    async fn inbox_queued(&self, run: &RunId) -> Result<Vec<InboxRecord>, StoreError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.inbox.iter().filter(|m| m.kind.run() == Some(run) && is_queued(m)).cloned().collect())
    }

    async fn events_emitted(&self, name: &str, since_ms: i64, limit: usize) -> Result<Vec<InboxRecord>, StoreError> {
        let inner = self.inner.lock().unwrap();
        let named = |m: &&InboxRecord| matches!(&m.kind, InboxKind::Event { event, .. } if event == name);
        Ok(inner.inbox.iter().filter(named).filter(|m| m.at >= since_ms).take(limit).cloned().collect())
    }

    async fn inbox_get(&self, id: &str, by_event_id: bool) -> Result<Option<InboxRecord>, StoreError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner
            .inbox
            .iter()
            .find(|m| match (&m.kind, by_event_id) {
                (InboxKind::Event { id: e, .. }, true) => e == id,
                (_, true) => false,
                (_, false) => m.id == id,
            })
            .cloned())
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        Ok(self.inner.lock().unwrap().schedules.values().cloned().collect())
    }

    async fn queue_head(&self, key: &str) -> Result<Option<RunId>, StoreError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner
            .runs
            .values()
            .filter(|r| !r.state.is_terminal() && r.concurrency_key.as_deref() == Some(key))
            .min_by_key(|r| (r.created_at, r.id.clone()))
            .map(|r| r.id.clone()))
    }

    async fn artifacts(&self, run: &RunId) -> Result<Vec<crate::store::ArtifactRecord>, StoreError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.artifacts.get(run).map(|m| m.values().map(|(a, _)| a.clone()).collect()).unwrap_or_default())
    }

    async fn artifact(
        &self,
        run: &RunId,
        name: &str,
    ) -> Result<Option<(crate::store::ArtifactRecord, Vec<u8>)>, StoreError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.artifacts.get(run).and_then(|m| m.get(name)).map(|(a, d)| (a.clone(), d.to_vec())))
    }

    async fn start_key(&self, key: &str) -> Result<Option<StartKeyRecord>, StoreError> {
        Ok(self.inner.lock().unwrap().outbox.start_key(key))
    }

    async fn deliveries_due(&self, now_ms: i64, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError> {
        Ok(self.inner.lock().unwrap().outbox.due(now_ms, limit))
    }

    async fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryRecord>, StoreError> {
        Ok(self.inner.lock().unwrap().outbox.list(filter))
    }

    async fn delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, StoreError> {
        Ok(self.inner.lock().unwrap().outbox.get(id))
    }

    async fn start_key_of(&self, run: &RunId) -> Result<Option<StartKeyRecord>, StoreError> {
        Ok(self.inner.lock().unwrap().outbox.start_key_of(run))
    }
}

/// One process owns the whole store: it drives every run (the defaults).
impl LeaseStore for MemStore {}

#[async_trait::async_trait]
impl TemplateStore for MemStore {
    async fn save_template(&self, name: &str, definition: &Value, at: i64) -> Result<u32, StoreError> {
        let mut inner = self.inner.lock().unwrap();
        let versions = inner.templates.entry(name.to_string()).or_default();
        let v = versions.last().map(|t| t.version + 1).unwrap_or(1);
        versions.push(TemplateRecord {
            name: name.to_string(),
            version: v,
            definition: definition.clone(),
            created_at: at,
        });
        Ok(v)
    }

    async fn template(&self, name: &str, version: Option<u32>) -> Result<Option<TemplateRecord>, StoreError> {
        let inner = self.inner.lock().unwrap();
        let Some(vs) = inner.templates.get(name) else { return Ok(None) };
        Ok(match version {
            None => vs.last().cloned(),
            Some(v) => vs.iter().find(|t| t.version == v).cloned(),
        })
    }

    async fn list_templates(&self) -> Result<Vec<TemplateRecord>, StoreError> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.templates.values().filter_map(|v| v.last().cloned()).collect())
    }

    async fn delete_template(&self, name: &str) -> Result<u32, StoreError> {
        let mut inner = self.inner.lock().unwrap();
        Ok(inner.templates.remove(name).map(|v| v.len() as u32).unwrap_or(0))
    }

    async fn template_versions(&self, name: &str) -> Result<Vec<TemplateRecord>, StoreError> {
        Ok(self.inner.lock().unwrap().templates.get(name).cloned().unwrap_or_default())
    }
}

#[async_trait::async_trait]
impl ArchiveStore for MemStore {
    async fn finished_before(&self, before_ms: i64, f: &RunFilter) -> Result<Vec<RunId>, StoreError> {
        let inner = self.inner.lock().unwrap();
        let mut ended: Vec<(i64, RunId)> = inner
            .runs
            .values()
            .filter(|r| {
                r.state.is_terminal()
                    && r.updated_at < before_ms
                    && f.state.is_none_or(|s| s == r.state)
                    && f.template.as_deref().is_none_or(|t| t == r.template)
            })
            .map(|r| (r.updated_at, r.id.clone()))
            .collect();
        ended.sort();
        Ok(ended.into_iter().take(f.limit.unwrap_or(usize::MAX)).map(|(_, id)| id).collect())
    }

    async fn delete_runs(&self, ids: &[RunId]) -> Result<Vec<RunId>, StoreError> {
        let mut inner = self.inner.lock().unwrap();
        let mut deleted = vec![];
        for id in ids {
            if inner.runs.get(id).is_some_and(|r| r.state.is_terminal()) {
                inner.runs.remove(id);
                inner.events.remove(id);
                inner.artifacts.remove(id);
                inner.inbox.retain(|m| m.kind.run() != Some(id));
                inner.outbox.forget(id);
                deleted.push(id.clone());
            }
        }
        Ok(deleted)
    }

    async fn import_run(&self, e: RunExport) -> Result<(), StoreError> {
        let mut inner = self.inner.lock().unwrap();
        let id = e.run.id.clone();
        if inner.runs.contains_key(&id) {
            return Err(StoreError::Conflict(format!("run {id} exists")));
        }
        inner.events.insert(id.clone(), e.events);
        let arts = e.artifacts.into_iter().map(|(a, d)| (a.name.clone(), (a, std::sync::Arc::from(d)))).collect();
        inner.artifacts.insert(id.clone(), arts);
        inner.outbox.import(&e.deliveries, e.start_key.as_ref());
        inner.runs.insert(id, e.run);
        Ok(())
    }

    async fn import_template(&self, t: TemplateRecord) -> Result<(), StoreError> {
        let mut inner = self.inner.lock().unwrap();
        let versions = inner.templates.entry(t.name.clone()).or_default();
        if versions.iter().any(|v| v.version == t.version) {
            return Err(StoreError::Conflict(format!("template {} version {} exists", t.name, t.version)));
        }
        versions.push(t);
        versions.sort_by_key(|v| v.version);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{AttemptNo, ItemIndex};
    use crate::rng::SeededRng;
    use crate::state::{RunState, StepState};
    use serde_json::json;

    fn new_run(id: &RunId) -> Write {
        Write::CreateRun {
            run: NewRun {
                id: id.clone(),
                template: "t".into(),
                version: Some(1),
                definition: std::sync::Arc::new(json!({"name": "t"})),
                input: json!({"a": 1}),
                parent: None,
                depth: 0,
                concurrency_key: None,
                created_at: 10,
                deadline_at: None,
                traceparent: None,
                labels: Default::default(),
            },
            steps: vec!["a".into(), "b".into()],
        }
    }

    #[tokio::test]
    async fn failed_batch_leaves_no_trace() {
        let s = MemStore::new();
        let id = RunId::generate(1, &SeededRng::new(1));
        let mut b = Batch::new();
        b.push(new_run(&id));
        b.push(Write::RunState {
            run: id.clone(),
            from: RunState::Working,
            to: RunState::Completed,
            output: None,
            error: None,
            at: 11,
        });
        assert!(matches!(s.commit(b).await, Err(StoreError::Conflict(_))));
        assert!(s.run(&id).await.unwrap().is_none());
        assert_eq!(s.commits(), 0);
    }

    #[tokio::test]
    async fn attempts_unique_and_cas() {
        let s = MemStore::new();
        let id = RunId::generate(1, &SeededRng::new(1));
        s.commit(Batch { writes: vec![new_run(&id)] }).await.unwrap();
        let start = |n: u32| Write::StartAttempt {
            run: id.clone(),
            step: "a".into(),
            item: Some(ItemIndex(0)),
            attempt: AttemptNo::new(n).unwrap(),
            lease_until: 100,
            at: 12,
            input: None,
        };
        s.commit(Batch { writes: vec![start(1)] }).await.unwrap();
        // a second running attempt of the same unit is refused
        assert!(s.commit(Batch { writes: vec![start(2)] }).await.is_err());
        let st = Write::StepState {
            run: id.clone(),
            step: "a".into(),
            from: StepState::Pending,
            to: StepState::Running,
            output: None,
            error: None,
            next_attempt_at: None,
            at: 12,
        };
        s.commit(Batch { writes: vec![st.clone()] }).await.unwrap();
        assert!(s.commit(Batch { writes: vec![st] }).await.is_err(), "the same transition twice is refused");
        assert_eq!(s.expired_leases(101).await.unwrap().len(), 1);
        assert_eq!(s.expired_leases(100).await.unwrap().len(), 0);
        let r = s.run(&id).await.unwrap().unwrap();
        assert_eq!(r.steps[0].state, StepState::Running);
        assert_eq!(r.steps[0].attempts, 1);
        assert_eq!(r.steps[0].started_at, Some(12));
    }

    #[tokio::test]
    async fn templates_version() {
        let s = MemStore::new();
        assert_eq!(s.save_template("x", &json!(1), 1).await.unwrap(), 1);
        assert_eq!(s.save_template("x", &json!(2), 2).await.unwrap(), 2);
        assert_eq!(s.template("x", None).await.unwrap().unwrap().definition, json!(2));
        assert_eq!(s.template("x", Some(1)).await.unwrap().unwrap().definition, json!(1));
        assert_eq!(s.list_templates().await.unwrap().len(), 1);
        assert_eq!(s.delete_template("x").await.unwrap(), 2);
        assert!(s.template("x", None).await.unwrap().is_none());
    }
}
