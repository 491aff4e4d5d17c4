//! Committed changes, pushed: every batch this engine commits (run and step
//! transitions, attempts, events, waits, artifacts) is published to its
//! subscribers as it commits. A front end waiting for a run (an MCP
//! `run_start` or `wf_<name>` call, a resource subscription, `weft run`
//! following the run it drives) wakes at the commit instead of re-reading
//! the store on a timer.
//!
//! A caller that waits for one run (a served run's answer) follows that
//! run alone ([`Engine::follow`], [`RunChanges`]): it wakes for that run's
//! commits only, so a hundred runs waited for at once cost each commit one
//! wake, not a hundred.
//!
//! In this process only: another process learns of a change through the
//! store (its owner's poll, for now; a store notification is the next step).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{broadcast, mpsc};

use super::{Engine, Shared};
use crate::ids::RunId;
use crate::store::{Batch, StoreError, Write};

/// Batches a slow subscriber may fall behind by before it is told it
/// missed some ([`Change::Missed`]: read the store again).
pub(crate) const BACKLOG: usize = 4096;

/// The sending side, in the engine's shared state.
pub(crate) fn channel() -> broadcast::Sender<Arc<Batch>> {
    broadcast::channel(BACKLOG).0
}

/// One thing a subscriber hears.
#[derive(Debug, Clone)]
pub enum Change {
    /// A batch that committed.
    Committed(Arc<Batch>),
    /// Some batches went by unheard (the subscriber was slow): what it
    /// keeps of the runs it follows must be read again from the store.
    Missed,
}

/// A subscription to an engine's committed changes ([`Engine::subscribe`]).
pub struct Changes {
    rx: broadcast::Receiver<Arc<Batch>>,
}

impl Changes {
    /// The next change; `None` once the engine is gone.
    pub async fn next(&mut self) -> Option<Change> {
        match self.rx.recv().await {
            Ok(b) => Some(Change::Committed(b)),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(Change::Missed),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// Waits until a committed batch changes run `run`, or some changes
    /// were missed (either way: read the run again). `false` once the
    /// engine is gone.
    pub async fn of_run(&mut self, run: &RunId) -> bool {
        loop {
            match self.next().await {
                Some(Change::Committed(b)) if b.writes.iter().any(|w| w.run_id() == Some(run)) => return true,
                Some(Change::Committed(_)) => {}
                Some(Change::Missed) => return true,
                None => return false,
            }
        }
    }

    /// Waits until a committed batch changes the state of run `run`
    /// (`submitted` → `working` → … → `completed`), or some changes were
    /// missed. `false` once the engine is gone.
    pub async fn of_run_state(&mut self, run: &RunId) -> bool {
        loop {
            match self.next().await {
                Some(Change::Committed(b)) if b.writes.iter().any(|w| is_run_state(w, run)) => return true,
                Some(Change::Committed(_)) => {}
                Some(Change::Missed) => return true,
                None => return false,
            }
        }
    }
}

fn is_run_state(w: &Write, run: &RunId) -> bool {
    match w {
        Write::RunState { run: r, .. } => r == run,
        Write::CreateRun { run: r, .. } => &r.id == run,
        _ => false,
    }
}

impl Engine {
    /// Hears every batch this engine commits from now on. Subscribe before
    /// reading what the subscription keeps up to date, so no change falls
    /// between the read and the first wait.
    pub fn subscribe(&self) -> Changes {
        Changes { rx: self.sh.changes.subscribe() }
    }

    /// Hears the batches this engine commits that change run `run`, from
    /// now on (follow before reading the run, as with [`Engine::subscribe`]).
    pub fn follow(&self, run: &RunId) -> RunChanges {
        self.sh.followers.follow(&self.sh, run)
    }
}

/// The followers of single runs ([`Engine::follow`]).
#[derive(Default)]
pub(crate) struct Followers {
    by_run: Mutex<HashMap<RunId, Vec<Follower>>>,
    /// How many follow now: a commit with none looks at nothing.
    count: AtomicUsize,
    next_key: AtomicU64,
}

struct Follower {
    key: u64,
    tx: mpsc::Sender<Arc<Batch>>,
    lagged: Arc<AtomicBool>,
}

impl Followers {
    pub(crate) fn follow(&self, sh: &Arc<Shared>, run: &RunId) -> RunChanges {
        let (tx, rx) = mpsc::channel(BACKLOG);
        let lagged = Arc::new(AtomicBool::new(false));
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let mut by_run = self.by_run.lock().unwrap_or_else(|p| p.into_inner());
        by_run.entry(run.clone()).or_default().push(Follower { key, tx, lagged: lagged.clone() });
        self.count.fetch_add(1, Ordering::Relaxed);
        RunChanges { rx, lagged, run: run.clone(), key, sh: Arc::downgrade(sh) }
    }

    /// Hands `batch` to the followers of the runs it changes.
    fn tell(&self, batch: &Arc<Batch>) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let by_run = self.by_run.lock().unwrap_or_else(|p| p.into_inner());
        let mut told: Vec<&RunId> = Vec::new();
        for run in batch.writes.iter().filter_map(Write::run_id) {
            if told.contains(&run) {
                continue;
            }
            told.push(run);
            for f in by_run.get(run).into_iter().flatten() {
                if f.tx.try_send(batch.clone()).is_err() {
                    // Full: the follower reads the run again.
                    f.lagged.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// How many follow now.
    #[cfg(test)]
    pub(crate) fn now(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    fn unfollow(&self, run: &RunId, key: u64) {
        let mut by_run = self.by_run.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = by_run.get_mut(run) {
            list.retain(|f| f.key != key);
            if list.is_empty() {
                by_run.remove(run);
            }
        }
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The committed changes of one run ([`Engine::follow`]); dropping it
/// stops following.
pub struct RunChanges {
    rx: mpsc::Receiver<Arc<Batch>>,
    lagged: Arc<AtomicBool>,
    run: RunId,
    key: u64,
    sh: Weak<Shared>,
}

impl RunChanges {
    /// The next batch that changed the run ([`Change::Missed`] when some
    /// went by unheard); `None` once the engine is gone.
    pub async fn next(&mut self) -> Option<Change> {
        if self.lagged.swap(false, Ordering::Relaxed) {
            while self.rx.try_recv().is_ok() {}
            return Some(Change::Missed);
        }
        self.rx.recv().await.map(Change::Committed)
    }
}

impl Drop for RunChanges {
    fn drop(&mut self) {
        if let Some(sh) = self.sh.upgrade() {
            sh.followers.unfollow(&self.run, self.key);
        }
    }
}

impl Shared {
    /// Commits `batch`, then tells the subscribers.
    pub(crate) async fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        self.commit_shared(Arc::new(batch)).await
    }

    /// [`Shared::commit`] of a batch the caller keeps.
    pub(crate) async fn commit_shared(&self, batch: Arc<Batch>) -> Result<(), StoreError> {
        self.store.commit_shared(batch.clone()).await?;
        self.wake_outbox(&batch);
        self.followers.tell(&batch);
        // A subscriber that went away meanwhile is no error.
        let _ = self.changes.send(batch);
        Ok(())
    }
}
