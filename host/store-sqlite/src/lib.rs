//! The SQLite implementation of the engine's Store trait.
//!
//! - WAL journal; `synchronous = NORMAL` ([`Durability::Normal`]: a process
//!   crash loses nothing committed) or `FULL` ([`Durability::Full`]: power
//!   loss loses nothing committed).
//! - One writer thread owns the write connection and group-commits every
//!   batch waiting for it in one transaction; a refused batch leaves no
//!   trace (see `writer`).
//! - Reads use a small pool of separate connections.
//! - Every statement, `BEGIN` and `COMMIT` included, is prepared once per
//!   connection and cached (see `cache_statements`). A transition writes
//!   no `runs` row unless the run's state changes: a run's `updated_at`
//!   and `last_seq` are read from its last event (see `writer::Found`).
//! - Schema migrations by `PRAGMA user_version` (see `schema`).
//! - [`SchedulerLock`]: one process owns a store's scheduler at a time.

mod checkpoint;
mod lock;
mod manage;
mod outbox;
mod outside;
mod read;
mod schema;
#[cfg(test)]
mod tests;
#[cfg(target_os = "linux")]
pub mod watch;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde_json::Value;
use tokio::sync::oneshot;
use weft_engine::store::*;
use weft_engine::{RunId, Seq};

pub use lock::SchedulerLock;
pub use schema::SCHEMA_VERSION;
use writer::{Msg, Op};

/// What a commit survives: `Normal` is `synchronous = NORMAL` (survives a
/// process crash), `Full` is `synchronous = FULL` (survives power loss, an
/// fsync per group commit).
pub use weft_engine::store::Durability;

/// Counters of the writer (group-commit effectiveness).
#[derive(Debug, Default)]
pub struct Stats {
    /// Transactions committed by the writer.
    pub transactions: AtomicU64,
    /// Batches (and template writes) those transactions carried.
    pub batches: AtomicU64,
    /// Pages appended to the WAL by those transactions (at
    /// `durability = "normal"`, where the WAL is watched): what a commit
    /// costs grows with it.
    pub frames: AtomicU64,
    /// Checkpoints run by the checkpointer thread.
    pub checkpoints: AtomicU64,
    /// Checkpoints the writer ran itself (at an idle moment, or past
    /// `checkpoint::WRITER_AT` frames).
    pub writer_checkpoints: AtomicU64,
}

/// See the crate docs.
pub struct SqliteStore {
    path: PathBuf,
    w: Arc<writer::Writer>,
    tx: Mutex<Option<mpsc::Sender<()>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    checkpointer: Mutex<Option<checkpoint::Checkpointer>>,
    readers: Mutex<Vec<Connection>>,
    stats: Arc<Stats>,
    /// Templates as last read (see `weft_engine::template_cache`).
    templates: weft_engine::template_cache::TemplateCache,
}

const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
const MAX_IDLE_READERS: usize = 8;

pub(crate) fn map_err(e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, msg) => {
            let m = msg.clone().unwrap_or_else(|| f.to_string());
            match f.code {
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => StoreError::Busy(m),
                ErrorCode::ConstraintViolation => StoreError::Conflict(m),
                ErrorCode::SystemIoFailure | ErrorCode::DiskFull | ErrorCode::CannotOpen | ErrorCode::OutOfMemory => {
                    StoreError::Io(m)
                }
                ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => StoreError::Corrupt(m),
                _ => StoreError::Other(m),
            }
        }
        rusqlite::Error::FromSqlConversionFailure(..) | rusqlite::Error::InvalidColumnType(..) => {
            StoreError::Corrupt(e.to_string())
        }
        _ => StoreError::Other(e.to_string()),
    }
}

pub(crate) fn opt_json(v: &Option<Value>) -> Option<String> {
    v.as_ref().map(|v| v.to_string())
}

fn configure(conn: &Connection, durability: Durability) -> Result<(), StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT).map_err(map_err)?;
    // Switching a new file's journal to WAL takes its lock without calling
    // the busy handler: a process that opens the file while another
    // creates it (a worker and a `weft run` started together) is refused
    // at once. It waits here as the busy handler would have.
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mode: String = loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)).map_err(map_err) {
            Err(StoreError::Busy(_)) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            other => break other?,
        }
    };
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Other(format!("could not switch the journal to WAL (got {mode})")));
    }
    let sync = match durability {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", sync).map_err(map_err)?;
    // Sub-journals and sorts in memory, not in temp files.
    conn.pragma_update(None, "temp_store", "MEMORY").map_err(map_err)?;
    cache_statements(conn)
}

/// Keep prepared statements across uses: every statement runs through
/// `prepare_cached`, with room for all of them. The query-planner
/// stability guarantee keeps them prepared: without it SQLite makes a plan
/// depend on the values bound to some parameters (`col = ?`, `LIMIT ?`),
/// and the statement cache clearing the bindings of a statement it takes
/// back then forces a re-prepare (a full parse and plan) at every use.
fn cache_statements(conn: &Connection) -> Result<(), StoreError> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map_err(map_err)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

impl SqliteStore {
    /// Open (creating if needed) and migrate the database at `path`.
    /// Opening does not take the scheduler lock: see [`SqliteStore::lock_scheduler`].
    pub fn open(path: impl AsRef<Path>, durability: Durability) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Io(format!("{}: {e}", dir.display())))?;
        }
        let mut conn = Connection::open(&path).map_err(map_err)?;
        configure(&conn, durability)?;
        schema::migrate(&mut conn)?;
        let stats = Arc::new(Stats::default());
        let (tx, rx) = mpsc::channel();
        let w = Arc::new(writer::Writer {
            conn: Mutex::new(conn),
            queue: Mutex::new(writer::Queue::default()),
            stats: stats.clone(),
            inline: durability == Durability::Normal,
        });
        // At `Full` every commit waits for an fsync anyway, and a second
        // thread's fsyncs only compete with those (W3 10% slower): SQLite
        // checkpoints there as it always does.
        let checkpointer = match durability {
            Durability::Normal => Some(checkpoint::Checkpointer::start(&w, &path, stats.clone())?),
            Durability::Full => None,
        };
        let w2 = w.clone();
        let writer = std::thread::Builder::new()
            .name("weft-store-writer".into())
            .spawn(move || writer::run(w2, rx))
            .map_err(|e| StoreError::Io(e.to_string()))?;
        Ok(SqliteStore {
            path,
            w,
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            checkpointer: Mutex::new(checkpointer),
            readers: Mutex::new(vec![]),
            stats,
            templates: Default::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Become the one process that drives this store's runs, or learn who is.
    pub fn lock_scheduler(&self) -> Result<SchedulerLock, StoreError> {
        SchedulerLock::acquire(&self.path)
    }

    /// Own the store for a moment (see [`SchedulerLock::acquire_briefly`]).
    pub fn lock_scheduler_briefly(&self) -> Result<SchedulerLock, StoreError> {
        SchedulerLock::acquire_briefly(&self.path)
    }

    /// Own the store for good, waiting out a short command that holds it
    /// (see [`SchedulerLock::acquire_patiently`]).
    pub fn lock_scheduler_patiently(&self, patience: std::time::Duration) -> Result<SchedulerLock, StoreError> {
        SchedulerLock::acquire_patiently(&self.path, patience)
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.read(|c| c.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(map_err))
    }

    async fn send(&self, op: Op) -> Result<u32, StoreError> {
        let (reply, rx) = oneshot::channel();
        match self.enqueue(Msg { op, reply })? {
            Role::Follow => {}
            Role::Lead => drop(Lead(self)),
            Role::LeadAfterYield => {
                // Under load: let the tasks ready on this worker queue
                // their batches first, so that they share the transaction.
                // (Alone, a yield only costs: W1 +30%.)
                let lead = Lead(self);
                tokio::task::yield_now().await;
                drop(lead);
            }
        }
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Queue a message and say who commits it (see [`Role`]).
    fn enqueue(&self, m: Msg) -> Result<Role, StoreError> {
        let tx = self.tx.lock().unwrap();
        let tx = tx.as_ref().ok_or(StoreError::Closed)?;
        let mut q = self.w.queue.lock().unwrap();
        let busy = q.committing || !q.msgs.is_empty() || q.last_group > 1;
        q.msgs.push_back(m);
        if !self.w.inline {
            tx.send(()).map_err(|_| StoreError::Closed)?;
            return Ok(Role::Follow);
        }
        if q.leader {
            return Ok(Role::Follow);
        }
        q.leader = true;
        Ok(if busy { Role::LeadAfterYield } else { Role::Lead })
    }

    /// Run `f` on a reader connection (taken from the pool or opened).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let conn = self.readers.lock().unwrap().pop();
        let conn = match conn {
            Some(c) => c,
            None => {
                let flags =
                    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
                let c = Connection::open_with_flags(&self.path, flags).map_err(map_err)?;
                c.busy_timeout(BUSY_TIMEOUT).map_err(map_err)?;
                c.pragma_update(None, "query_only", true).map_err(map_err)?;
                cache_statements(&c)?;
                c
            }
        };
        let r = f(&conn);
        let mut pool = self.readers.lock().unwrap();
        if pool.len() < MAX_IDLE_READERS {
            pool.push(conn);
        }
        r
    }

    /// Stop the writer after it has committed everything queued.
    pub fn close(&self) {
        self.tx.lock().unwrap().take();
        if let Some(h) = self.writer.lock().unwrap().take() {
            let _ = h.join();
        }
        // Anything queued by a caller that raced the close.
        let c = self.w.conn.lock().unwrap();
        self.w.drain(&c);
        drop(c);
        if let Some(mut ck) = self.checkpointer.lock().unwrap().take() {
            ck.stop();
        }
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.close();
    }
}

#[async_trait::async_trait]
impl RunStore for SqliteStore {
    #[cfg(target_os = "linux")]
    fn watch(&self) -> Option<Box<dyn weft_engine::StoreWatch>> {
        watch::Watch::new(&self.path).map(|w| Box::new(w) as Box<dyn weft_engine::StoreWatch>)
    }

    async fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        self.commit_shared(Arc::new(batch)).await
    }

    async fn commit_shared(&self, batch: Arc<Batch>) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.send(Op::Batch(batch)).await.map(|_| ())
    }

    async fn run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
        self.read(|c| read::run(c, id))
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        self.read(|c| read::list_runs(c, filter))
    }

    async fn events_after(&self, run: &RunId, after: Seq, limit: usize) -> Result<Vec<EventRecord>, StoreError> {
        self.read(|c| read::events_after(c, run, after, limit))
    }

    async fn unfinished_runs(&self) -> Result<Vec<RunId>, StoreError> {
        self.read(read::unfinished_runs)
    }

    async fn expired_leases(&self, now_ms: i64) -> Result<Vec<ExpiredLease>, StoreError> {
        self.read(|c| read::expired_leases(c, now_ms))
    }

    async fn event_waits(&self, event: &str) -> Result<Vec<WaitRecord>, StoreError> {
        self.read(|c| outside::event_waits(c, event))
    }

    async fn inbox_pending(&self) -> Result<Vec<InboxRecord>, StoreError> {
        self.read(outside::inbox_pending)
    }

    async fn inbox_get(&self, id: &str, by_event_id: bool) -> Result<Option<InboxRecord>, StoreError> {
        self.read(|c| outside::inbox_get(c, id, by_event_id))
    }

    async fn inbox_queued(&self, run: &RunId) -> Result<Vec<InboxRecord>, StoreError> {
        self.read(|c| outside::inbox_queued(c, run))
    }

    async fn events_emitted(&self, name: &str, since_ms: i64, limit: usize) -> Result<Vec<InboxRecord>, StoreError> {
        self.read(|c| outside::events_emitted(c, name, since_ms, limit))
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        self.read(outside::schedules)
    }

    async fn start_key(&self, key: &str) -> Result<Option<weft_engine::store::StartKeyRecord>, StoreError> {
        self.read(|c| outbox::start_key(c, key))
    }

    async fn deliveries_due(&self, now_ms: i64, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError> {
        self.read(|c| outbox::deliveries_due(c, now_ms, limit))
    }

    async fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryRecord>, StoreError> {
        self.read(|c| outbox::deliveries(c, filter))
    }

    async fn delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, StoreError> {
        self.read(|c| outbox::delivery(c, id))
    }

    async fn start_key_of(&self, run: &RunId) -> Result<Option<StartKeyRecord>, StoreError> {
        self.read(|c| outbox::start_key_of(c, run))
    }

    async fn queue_head(&self, key: &str) -> Result<Option<RunId>, StoreError> {
        self.read(|c| outside::queue_head(c, key))
    }

    async fn artifacts(&self, run: &RunId) -> Result<Vec<weft_engine::store::ArtifactRecord>, StoreError> {
        self.read(|c| read::artifacts(c, run))
    }

    async fn artifact(
        &self,
        run: &RunId,
        name: &str,
    ) -> Result<Option<(weft_engine::store::ArtifactRecord, Vec<u8>)>, StoreError> {
        self.read(|c| read::artifact(c, run, name))
    }
}

/// One process owns the whole store: it drives every run (the defaults).
impl LeaseStore for SqliteStore {}

#[async_trait::async_trait]
impl TemplateStore for SqliteStore {
    async fn save_template(&self, name: &str, definition: &Value, at: i64) -> Result<u32, StoreError> {
        self.send(Op::SaveTemplate { name: name.to_string(), definition: definition.clone(), at }).await
    }

    async fn template(&self, name: &str, version: Option<u32>) -> Result<Option<TemplateRecord>, StoreError> {
        self.read(|c| {
            let changes = read::template_changes(c)?;
            if let Some(t) = self.templates.get(name, version, changes) {
                return Ok(Some(t));
            }
            let t = read::template(c, name, version)?;
            self.templates.put(name, version, changes, t.as_ref());
            Ok(t)
        })
    }

    async fn list_templates(&self) -> Result<Vec<TemplateRecord>, StoreError> {
        self.read(read::list_templates)
    }

    async fn delete_template(&self, name: &str) -> Result<u32, StoreError> {
        self.send(Op::DeleteTemplate { name: name.to_string() }).await
    }

    async fn template_versions(&self, name: &str) -> Result<Vec<weft_engine::store::TemplateRecord>, StoreError> {
        self.read(|c| manage::template_versions(c, name))
    }
}

#[async_trait::async_trait]
impl ArchiveStore for SqliteStore {
    async fn finished_before(&self, before_ms: i64, filter: &RunFilter) -> Result<Vec<RunId>, StoreError> {
        self.read(|c| manage::finished_before(c, before_ms, filter))
    }

    async fn delete_runs(&self, ids: &[RunId]) -> Result<Vec<RunId>, StoreError> {
        // The finished ones (a run never leaves a terminal state).
        let mut finished = vec![];
        for id in ids {
            if let Some(r) = self.read(|c| read::run_state(c, id))?
                && r.is_terminal()
            {
                finished.push(id.clone());
            }
        }
        if !finished.is_empty() {
            self.send(Op::DeleteRuns(finished.clone())).await?;
        }
        Ok(finished)
    }

    async fn import_run(&self, run: weft_engine::store::RunExport) -> Result<(), StoreError> {
        self.send(Op::ImportRun(Box::new(run))).await.map(|_| ())
    }

    async fn import_template(&self, t: weft_engine::store::TemplateRecord) -> Result<(), StoreError> {
        self.send(Op::ImportTemplate(t)).await.map(|_| ())
    }
}

/// How many batches each transaction carried on average (1.0 = no grouping).
pub fn group_factor(s: &Stats) -> f64 {
    let t = s.transactions.load(Ordering::Relaxed).max(1);
    s.batches.load(Ordering::Relaxed) as f64 / t as f64
}

/// Who commits a queued message.
enum Role {
    /// A leader or the writer thread.
    Follow,
    /// The caller, at once (no load: nothing else is being committed and
    /// the last transaction carried one message).
    Lead,
    /// The caller, after a yield (see `send`).
    LeadAfterYield,
}

/// The caller that found no leader: when dropped (after its yield, or
/// if its future is dropped meanwhile) it commits the queue on its own
/// thread if the connection is free, else wakes the writer thread, which
/// takes the connection when its holder lets go. Clearing `leader` first
/// means a batch queued from then on is not left to a leader that has
/// already looked.
struct Lead<'a>(&'a SqliteStore);

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let s = self.0;
        s.w.queue.lock().unwrap().leader = false;
        match s.w.conn.try_lock() {
            Ok(conn) => s.w.drain(&conn),
            Err(_) => {
                if let Some(tx) = s.tx.lock().unwrap().as_ref() {
                    let _ = tx.send(());
                }
            }
        }
    }
}
