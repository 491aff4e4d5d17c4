//! The one loop of a store's owner (`weft worker`, `weft serve`): when
//! another process writes the store (the store's watch tells; without one,
//! every 20 ms) it answers the signals and events other processes left in
//! the inbox, starts the unfinished runs it is not driving yet (created by
//! other processes) and stops the attempts of runs another process
//! canceled. A foreground `weft run` that holds the lock only answers the
//! inbox while it follows its run.
//!
//! On a store shared by many workers (PostgreSQL) the owner is one worker
//! among others: it claims the runs nobody drives (new ones, and those of
//! workers whose lease ran out) instead of every unfinished run, looks at
//! least every [`SHARED_FALLBACK`] (a dead worker is noticed within its
//! lease and that much), and when its own lease is lost it stops every run
//! it drives (another worker drives them now) and joins again.

use std::collections::HashSet;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use weft_engine::{Engine, EngineError, RunId, RunState, Store, StoreError, StoreWatch};

use crate::app::{Backend, Owner};

/// The most often the owner looks for runs created by other processes.
pub const POLL: Duration = Duration::from_millis(20);

/// How often it looks when the store's watch told nothing (or there is no
/// watch: then every [`POLL`]).
pub const FALLBACK: Duration = Duration::from_secs(1);

/// The same on a store shared by many workers: how soon after its lease a
/// dead worker's runs are taken over.
pub const SHARED_FALLBACK: Duration = Duration::from_millis(500);

/// The most often a worker on a shared store looks. Its watch wakes only
/// for work (runs nobody owns, messages), not at its own commits, so a
/// short floor keeps a run's pick-up quick while a flood of new runs (each
/// waking every worker) still costs each worker at most one claim query
/// per 2 ms.
pub const SHARED_POLL: Duration = Duration::from_millis(2);

/// Waits for a write of another process (or, without a watch, for
/// [`POLL`]); a broken watch is dropped and polling takes over.
pub async fn changed(watch: &mut Option<Box<dyn StoreWatch>>) {
    match watch {
        Some(w) => {
            if !w.changed().await {
                tracing::warn!("the store's change watch broke; looking every {} ms", POLL.as_millis());
                *watch = None;
            }
        }
        None => tokio::time::sleep(POLL).await,
    }
}

/// How [`own_store`] goes on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Owning {
    /// Return once no run is driven and none waits to start (runs waiting
    /// for outside input do not count).
    pub until_idle: bool,
    /// On a store error that retrying cannot help, log it and try again a
    /// second later (a server keeps serving) instead of returning it.
    pub outlive_errors: bool,
    /// Finished runs older than this are deleted (`retention`), by a task
    /// of the owner's; `None` keeps them.
    pub retention: Option<Duration>,
}

/// This process's right to execute the store's runs, and how to get it
/// back after losing it (a worker's lease on a shared store).
pub struct Tenure {
    pub owner: Owner,
    backend: Backend,
}

impl Tenure {
    pub fn new(owner: Owner, backend: Backend) -> Tenure {
        Tenure { owner, backend }
    }

    /// After a lost lease: joins the workers again.
    async fn rejoin(&mut self, stop: &CancellationToken) -> bool {
        let Backend::Postgres(pg) = &self.backend else { return false };
        loop {
            match pg.join(&crate::app::worker_name()).await {
                Ok(l) => {
                    self.owner = Owner::Lease(Box::new(l));
                    return true;
                }
                Err(e) => tracing::error!(error = %e, "cannot join the workers again; trying again in a second"),
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = stop.cancelled() => return false,
            }
        }
    }

    /// Leaves in good order (see [`Owner::leave`]).
    pub async fn leave(self) {
        self.owner.leave().await;
    }
}

/// Owns the store until `stop` (or, with `until_idle`, until idle):
/// `recovered` are the runs [`Engine::recover`] already drives.
pub async fn own_store(
    engine: &Engine,
    store: &dyn Store,
    recovered: Vec<RunId>,
    how: Owning,
    stop: &CancellationToken,
    tenure: &mut Tenure,
) -> Result<(), StoreError> {
    let mut poller = Poller::new(recovered);
    // Other processes' writes wake the owner (runs they created, signals
    // they left in the inbox); without a watch it looks every POLL.
    // (Waiting to be idle, it looks every POLL: its own runs' ends are what
    // it waits for.)
    let mut watch = if how.until_idle { None } else { store.watch_work() };
    let (floor, fallback) = if store.is_shared() { (SHARED_POLL, SHARED_FALLBACK) } else { (POLL, FALLBACK) };
    let _reaper = how.retention.map(|keep| crate::retention::Reaper::start(engine.store().clone(), keep));
    // Notifications go out while this process owns the store.
    let _outbox = engine.start_outbox();
    let mut last = tokio::time::Instant::now() - floor;
    loop {
        // This process's own commits wake an SQLite store's watch too:
        // under load, at most one look every POLL.
        tokio::select! {
            _ = tokio::time::sleep_until(last + floor) => {}
            _ = stop.cancelled() => return Ok(()),
        }
        let room = async {
            // A backlog nobody announces again: look once half the room
            // freed up (runs end here without waking the watch).
            if !poller.full {
                return std::future::pending().await;
            }
            while engine.active_runs() > CLAIM_BATCH / 2 {
                tokio::time::sleep(floor).await;
            }
        };
        tokio::select! {
            _ = changed(&mut watch) => {}
            _ = room => {}
            _ = tokio::time::sleep(fallback) => {}
            why = tenure.owner.lost() => {
                // Another worker drives this one's runs now: stop them all
                // (nothing more of theirs can commit), join again, resume.
                tracing::error!("{why}: stopping every run this worker drives and joining again");
                engine.abort_all();
                if !tenure.rejoin(stop).await {
                    return Ok(());
                }
                poller = Poller::new(match engine.recover().await {
                    Ok(ids) => ids,
                    Err(EngineError::Store(e)) => return Err(e),
                    Err(e) => {
                        tracing::error!(error = %e, "cannot resume runs after joining again");
                        vec![]
                    }
                });
                continue;
            }
            _ = stop.cancelled() => return Ok(()),
        }
        last = tokio::time::Instant::now();
        match poller.poll(engine, store).await {
            Ok(fresh) => {
                // On a shared store, idle means nobody's runs are busy: a
                // dead worker's are this one's to take once its lease ends.
                if how.until_idle
                    && fresh == 0
                    && engine.busy_runs() == 0
                    && (!store.is_shared() || store.busy_elsewhere().await? == 0)
                {
                    return Ok(());
                }
            }
            Err(e) if e.is_retryable() => {}
            Err(e) if how.outlive_errors => {
                // Runs started here still run; say why runs created
                // elsewhere wait, and try again later.
                tracing::error!(error = %e, "cannot read the store's unfinished runs or inbox");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stop.cancelled() => return Ok(()),
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// What a store's owner does every poll: answer the signals and events other processes
/// left in the inbox, start the unfinished runs it is not driving yet
/// (created by other processes), and stop the attempts of runs another
/// process canceled.
#[derive(Default)]
pub struct Poller {
    started: HashSet<RunId>,
    /// On a shared store: the last look took all it had room for (there may
    /// be more: look again once there is room, not at the next notice).
    full: bool,
}

impl Poller {
    /// A poller that already drives `recovered` (from [`Engine::recover`]).
    pub fn new(recovered: Vec<RunId>) -> Self {
        Poller { started: recovered.into_iter().collect(), full: false }
    }

    /// One poll: returns how many runs it started. Unfinished runs are read
    /// through a partial index: cheap even with a long history. A store
    /// error starts nothing (poll again when it `is_retryable()`).
    pub async fn poll(&mut self, engine: &Engine, store: &dyn Store) -> Result<usize, StoreError> {
        match engine.process_inbox().await {
            Ok(_) => {}
            Err(EngineError::Store(e)) => return Err(e),
            Err(e) => tracing::warn!(error = %e, "cannot handle the inbox"),
        }
        if store.is_shared() {
            // The runs nobody drives (new, given back, or a dead worker's),
            // as many as there is room for; cancels reach its runs as
            // messages.
            let room = CLAIM_BATCH.saturating_sub(engine.active_runs());
            let fresh = engine.claim(room).await?.len();
            self.full = room > 0 && fresh >= room;
            return Ok(fresh);
        }
        let unfinished: HashSet<RunId> = store.unfinished_runs().await?.into_iter().collect();
        // A run that left the unfinished set while a driver here still
        // runs it was canceled elsewhere: its attempts are stopped. Most
        // such runs were ending here, their driver not yet let go: looked
        // at again after a moment, they need nothing (and no read).
        let mut gone: Vec<RunId> =
            self.started.difference(&unfinished).filter(|id| engine.drives(id)).cloned().collect();
        if !gone.is_empty() {
            tokio::time::sleep(LET_GO).await;
            gone.retain(|id| engine.drives(id));
        }
        self.started.retain(|id| unfinished.contains(id));
        if !gone.is_empty() {
            stop_canceled(engine, store, gone).await;
        }
        let mut fresh = 0;
        for id in unfinished {
            if self.started.contains(&id) {
                continue;
            }
            // This process's own runs (started by its front ends) are
            // driven already: watched for a cancel elsewhere, not started.
            if !engine.drives(&id) {
                fresh += 1;
                tracing::info!(run = %id, "starting a submitted run");
                engine.start(&id);
            }
            self.started.insert(id);
        }
        Ok(fresh)
    }
}

/// How long a poll gives the drivers of runs that just ended here to let
/// go before it takes them for runs canceled elsewhere.
const LET_GO: Duration = Duration::from_millis(5);

/// Runs a worker on a shared store drives at most from its claims (it takes
/// more as they end; its own new runs and their children do not count
/// against the others').
pub const CLAIM_BATCH: usize = 256;

/// Runs this owner started that left the unfinished set: one canceled by
/// another process (`weft runs cancel` while this process owns the store)
/// is already recorded `canceled` but its attempts still run here, so they
/// are stopped. (The engine has no cross-process cancel request yet.)
async fn stop_canceled(engine: &Engine, store: &dyn Store, gone: Vec<RunId>) {
    for id in gone {
        if let Ok(Some(r)) = store.run(&id).await
            && r.state == RunState::Canceled
        {
            let engine = engine.clone();
            tokio::spawn(async move {
                let _ = engine.cancel(&id).await;
            });
        }
    }
}
