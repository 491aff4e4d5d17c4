//! Hibernation: a run that waits only for outside input keeps no driver.
//!
//! When a driver has nothing left to do but wait (every unfinished step is
//! a signal or event `wait` that is `waiting`; no attempt, child run,
//! sleep or retry in flight; nothing left to commit), it moves the run's
//! entry from `driven` to `hibernated` under the engine's `active` lock
//! and ends. The entry is small: an optional timer (the earliest wait
//! timeout or run deadline) and, only while someone `wait`s for the run, a
//! channel that wakes them.
//!
//! Whatever would have reached the driver starts it again first: a signal
//! or event looks the mailbox up under the same lock and, finding the run
//! hibernated, starts its driver and sends it the mail (so outside input is
//! still decided by the driver, in order, with no store race); a cancel
//! wakes it and fires the new driver's token; the timer wakes it when due,
//! and the driver's `wake_timers` records the timeout.
//!
//! The race between "the driver decides to hibernate" and "a signal looks
//! up the mailbox" is closed by the lock: the driver hibernates only if its
//! entry is still its own, its mail queue is empty and its cancel token
//! unfired, all checked under the lock a sender takes to find the mailbox.
//! A sender that took the mailbox before (and sends after) sees its send
//! fail or its reply dropped, and asks again: it then finds the run
//! hibernated and wakes it.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::{Active, Engine, Shared};
use crate::ids::RunId;

/// The runs this engine drives or keeps hibernated.
#[derive(Default)]
pub(super) struct Runs {
    pub driven: HashMap<RunId, Active>,
    pub hibernated: HashMap<RunId, Hibernated>,
}

impl Runs {
    /// Stops every driver and timer, writing nothing.
    pub fn abort_all(&mut self) {
        for (_, a) in self.driven.drain() {
            // Not the run's cancel token: that would record a cancel.
            // Dropping the driver drops its attempt tasks.
            a.task.abort();
        }
        self.hibernated.clear();
    }
}

/// A hibernated run: what is kept of it while it waits.
#[derive(Default)]
pub(super) struct Hibernated {
    /// Starts the driver again when a timeout is due.
    timer: Option<AbortHandle>,
    /// Exists while someone waits for the run; dropped when it wakes.
    woke: Option<watch::Sender<()>>,
}

impl Hibernated {
    /// A receiver whose `changed()` fails once the run wakes (or is
    /// forgotten).
    pub fn subscribe(&mut self) -> watch::Receiver<()> {
        self.woke.get_or_insert_with(|| watch::channel(()).0).subscribe()
    }
}

impl Drop for Hibernated {
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            t.abort();
        }
    }
}

impl Shared {
    /// The driver of `id` (of `generation`) asks to hibernate; `idle` is
    /// checked under the lock (no mail queued, not canceled). `until`: when
    /// the driver must run again regardless (a wait timeout, the run's
    /// deadline). False when the driver must go on.
    pub(super) fn hibernate(
        self: &Arc<Self>,
        id: &RunId,
        generation: u64,
        idle: impl FnOnce() -> bool,
        until: Option<i64>,
    ) -> bool {
        let mut runs = self.active.lock().unwrap();
        let mine = runs.driven.get(id).is_some_and(|a| a.generation == generation && !a.cancel.is_canceled());
        if !mine || !idle() {
            return false;
        }
        runs.driven.remove(id);
        let timer = until.map(|at| arm(Arc::downgrade(self), self.clock.sleep_until(at), id.clone()));
        runs.hibernated.insert(id.clone(), Hibernated { timer, woke: None });
        true
    }
}

/// A task that wakes the hibernated run `id` once `due` resolves.
fn arm(sh: Weak<Shared>, due: crate::clock::BoxFuture<'static, ()>, id: RunId) -> AbortHandle {
    tokio::spawn(async move {
        due.await;
        if let Some(sh) = sh.upgrade() {
            Engine::from_shared(sh).wake_from_timer(&id);
        }
    })
    .abort_handle()
}

impl Engine {
    /// The timer of a hibernated run fired: drive it again (the driver's
    /// `wake_timers` records what is due).
    fn wake_from_timer(&self, id: &RunId) {
        let mut runs = self.sh.active.lock().unwrap();
        let Some(h) = runs.hibernated.get_mut(id) else { return };
        // This task is ending: no need to abort it.
        h.timer = None;
        let _ = self.start_locked(&mut runs, id, None);
    }

    /// The mailbox of a driven run; a run hibernated here is woken first.
    /// `None`: no driver here (the store is answered directly).
    pub(super) fn mailbox(&self, run: &RunId) -> Option<tokio::sync::mpsc::UnboundedSender<super::mail::Mail>> {
        let mut runs = self.sh.active.lock().unwrap();
        if runs.hibernated.contains_key(run) {
            let _ = self.start_locked(&mut runs, run, None);
        }
        // A closed mailbox: the driver ended (the run ended or failed to
        // load) and its entry is about to go; the store answers.
        runs.driven.get(run).filter(|a| !*a.done.borrow() && !a.mail.is_closed()).map(|a| a.mail.clone())
    }
}
