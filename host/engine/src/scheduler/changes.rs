//! Committed changes, pushed: every batch this engine commits (run and step
//! transitions, attempts, events, waits, artifacts) is published to its
//! subscribers as it commits. A front end waiting for a run (an MCP
//! `run_start` or `wf_<name>` call, a resource subscription, `weft run`
//! following the run it drives) wakes at the commit instead of re-reading
//! the store on a timer.
//!
//! In this process only: another process learns of a change through the
//! store (its owner's poll, for now; a store notification is the next step).

use std::sync::Arc;

use tokio::sync::broadcast;

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
}

impl Shared {
    /// Commits `batch`, then tells the subscribers.
    pub(crate) async fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        self.commit_shared(Arc::new(batch)).await
    }

    /// [`Shared::commit`] of a batch the caller keeps.
    pub(crate) async fn commit_shared(&self, batch: Arc<Batch>) -> Result<(), StoreError> {
        if self.changes.receiver_count() == 0 {
            self.store.commit_shared(batch.clone()).await?;
            self.wake_outbox(&batch);
            return Ok(());
        }
        self.store.commit_shared(batch.clone()).await?;
        self.wake_outbox(&batch);
        // A subscriber that went away meanwhile is no error.
        let _ = self.changes.send(batch);
        Ok(())
    }
}
