//! The PostgreSQL implementation of the engine's Store trait: one database
//! shared by any number of `weft worker` / `weft serve` processes.
//!
//! - Writes are group-committed by one task per process over its own
//!   connection, statements pipelined (see `write`); reads go through a
//!   small pool of connections (see `read`), a run's queries pipelined.
//! - Who drives which run: each worker holds a lease (`workers`, renewed by
//!   heartbeat) and owns the runs it drives (`runs.owner`); a worker whose
//!   lease ran out commits nothing more (fencing), and its runs are taken
//!   over by another (see `workers`).
//! - Other processes learn of commits by LISTEN/NOTIFY on channel `weft`
//!   ([`RunStore::watch`]): new runs, inbox messages, ended runs, schedules.
//! - `durability = "normal"` commits with `synchronous_commit = off` (a
//!   weft process that dies loses nothing; a database server that crashes
//!   may lose its last moments of commits); `"full"` waits for the flush.
//! - Schema migrations by `weft_schema.version` (see `schema`).

mod apply;
mod event_rows;
mod manage;
mod outbox;
mod read;
mod schema;
mod sets;
#[cfg(test)]
mod tests;
mod workers;
mod write;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use weft_engine::store::*;
use weft_engine::{RunId, Seq};

pub use schema::SCHEMA_VERSION;
pub use workers::{Lease, LeaseLost};

/// What a commit survives (see the crate docs).
pub use weft_engine::store::Durability;

/// Counters of the writer.
#[derive(Debug, Default)]
pub struct Stats {
    /// Transactions committed.
    pub transactions: AtomicU64,
    /// Batches those transactions carried.
    pub batches: AtomicU64,
    /// Writes committed by set-based statements (many rows each).
    pub in_sets: AtomicU64,
    /// Groups applied again batch by batch, after a refusal in the group.
    pub retried: AtomicU64,
}

/// This process as the database knows it: a worker (with its lease's
/// epoch, the fencing token) or a client (epoch 0) that drives no run.
#[derive(Debug, Default)]
pub(crate) struct Me {
    epoch: AtomicI64,
    /// The lease of a worker, in ms (how long a message it takes is its).
    lease_ms: AtomicU64,
    /// Runs this worker claimed or created (a claim needs no round trip).
    mine: std::sync::Mutex<std::collections::HashSet<RunId>>,
}

impl Me {
    pub fn epoch(&self) -> i64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub fn lease_ms(&self) -> u64 {
        self.lease_ms.load(Ordering::Relaxed)
    }

    /// The owner of a run this process creates: itself when a worker.
    pub fn owner_of_new(&self) -> Option<i64> {
        Some(self.epoch()).filter(|e| *e != 0)
    }

    fn remember(&self, ids: impl IntoIterator<Item = RunId>) {
        let mut mine = self.mine.lock().unwrap();
        if mine.len() > 100_000 {
            mine.clear();
        }
        mine.extend(ids);
    }

    fn knows(&self, id: &RunId) -> bool {
        self.mine.lock().unwrap().contains(id)
    }

    fn forget(&self, ids: &[RunId]) {
        let mut mine = self.mine.lock().unwrap();
        for id in ids {
            mine.remove(id);
        }
    }

    fn forget_all(&self) {
        self.mine.lock().unwrap().clear();
    }
}

/// A connection with the writer's statements prepared.
pub(crate) struct Conn {
    pub client: tokio_postgres::Client,
    pub st: apply::Statements,
}

/// How to connect (kept to reconnect).
#[derive(Clone)]
pub(crate) struct Connect {
    config: tokio_postgres::Config,
    durability: Durability,
    lease: Duration,
}

impl Connect {
    /// A plain connection, its driver task spawned.
    pub async fn client(&self) -> Result<tokio_postgres::Client, StoreError> {
        let (client, conn) = self.config.connect(tokio_postgres::NoTls).await.map_err(map_err)?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "a PostgreSQL connection ended");
            }
        });
        Ok(client)
    }

    /// The writer's connection: its session settings and statements.
    pub async fn writer(&self) -> Result<Conn, StoreError> {
        let client = self.client().await?;
        let sync = match self.durability {
            Durability::Normal => "off",
            Durability::Full => "on",
        };
        // A worker paused inside a transaction (SIGSTOP) must not hold its
        // locks past its lease: the server ends such a session.
        let idle = self.lease.as_millis().max(1000);
        // Every write finds its rows by key. A plan made while a table is
        // small (a fresh database) would hash or scan the whole table for
        // each group (the runs of an event insert, the steps of attempts
        // started), and keep doing so as the history grows: on this
        // connection, joins are index lookups.
        client
            .batch_execute(&format!(
                "SET synchronous_commit = {sync}; SET idle_in_transaction_session_timeout = {idle};
                 SET enable_hashjoin = off; SET enable_mergejoin = off; SET enable_seqscan = off"
            ))
            .await
            .map_err(map_err)?;
        let st = apply::Statements::prepare(&client).await?;
        Ok(Conn { client, st })
    }
}

/// Options of [`PgStore::connect`].
#[derive(Debug, Clone)]
pub struct Options {
    pub durability: Durability,
    /// A worker's lease: renewed every third of it; a worker silent longer
    /// than this loses its runs to another.
    pub lease: Duration,
    /// Read connections at most.
    pub readers: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { durability: Durability::Normal, lease: Duration::from_secs(5), readers: 8 }
    }
}

/// See the crate docs.
pub struct PgStore {
    /// The URL without its password, for messages.
    shown: String,
    #[cfg(test)]
    url: String,
    connect: Connect,
    pool: deadpool_postgres::Pool,
    writer: write::Writer,
    me: Arc<Me>,
    stats: Arc<Stats>,
    listener: std::sync::OnceLock<workers::Listener>,
    /// When dead workers, and owners without a row, were last looked for.
    swept: std::sync::Mutex<(Option<std::time::Instant>, Option<std::time::Instant>)>,
    /// Where the next claim of free runs starts (see `workers::claim_fresh`).
    cursor: std::sync::Mutex<String>,
    /// Templates as last read (see `weft_engine::template_cache`).
    templates: weft_engine::template_cache::TemplateCache,
}

/// `url` with its password replaced, for messages and logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:pw@host:port/db`
    /// or key=value form), creating or migrating weft's tables. The store
    /// is a client until [`PgStore::join`] makes this process a worker.
    pub async fn connect(url: &str, opts: Options) -> Result<PgStore, StoreError> {
        let shown = redact(url);
        let config: tokio_postgres::Config =
            url.parse().map_err(|e| StoreError::Other(format!("{shown} is not a PostgreSQL URL: {e}")))?;
        let connect = Connect { config: config.clone(), durability: opts.durability, lease: opts.lease };
        let mut c = connect.client().await.map_err(|e| match e {
            StoreError::Io(m) | StoreError::Other(m) => StoreError::Io(format!("cannot connect to {shown}: {m}")),
            e => e,
        })?;
        schema::migrate(&mut c).await?;
        let mgr = deadpool_postgres::Manager::from_config(
            config,
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig { recycling_method: deadpool_postgres::RecyclingMethod::Fast },
        );
        let pool = deadpool_postgres::Pool::builder(mgr)
            .max_size(opts.readers.max(1))
            .build()
            .map_err(|e| StoreError::Other(e.to_string()))?;
        let me = Arc::new(Me::default());
        me.lease_ms.store(opts.lease.as_millis().min(u64::MAX as u128) as u64, Ordering::Relaxed);
        let stats = Arc::new(Stats::default());
        let writer = write::Writer::start(connect.clone(), me.clone(), stats.clone());
        Ok(PgStore {
            shown,
            #[cfg(test)]
            url: url.to_string(),
            connect,
            pool,
            writer,
            me,
            stats,
            listener: Default::default(),
            swept: Default::default(),
            cursor: Default::default(),
            templates: Default::default(),
        })
    }

    /// The database, as shown in messages (no password).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The URL to connect to this database again (tests).
    #[cfg(test)]
    pub(crate) fn shown_url_for_tests(&self) -> String {
        self.url.clone()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// This worker's epoch (0 for a client).
    pub fn epoch(&self) -> i64 {
        self.me.epoch()
    }

    pub(crate) async fn reader(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => map_err(e),
            e => StoreError::Io(format!("no connection to {}: {e}", self.shown)),
        })
    }
}

/// Hex sha256 of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

pub(crate) fn map_err(e: tokio_postgres::Error) -> StoreError {
    use tokio_postgres::error::SqlState;
    let Some(db) = e.as_db_error() else {
        // No answer from the server: the connection broke or never was.
        return StoreError::Io(e.to_string());
    };
    let m = db.message().to_string();
    let code = db.code();
    if *code == SqlState::UNIQUE_VIOLATION || *code == SqlState::FOREIGN_KEY_VIOLATION {
        StoreError::Conflict(m)
    } else if *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::LOCK_NOT_AVAILABLE
        || *code == SqlState::TOO_MANY_CONNECTIONS
        || *code == SqlState::QUERY_CANCELED
    {
        StoreError::Busy(m)
    } else if code.code().starts_with("53") || code.code().starts_with("57") || code.code().starts_with("08") {
        // insufficient resources (a full disk), operator intervention
        // (a restart), connection exceptions
        StoreError::Io(m)
    } else if code.code().starts_with("XX") {
        StoreError::Corrupt(m)
    } else {
        StoreError::Other(m)
    }
}

#[async_trait::async_trait]
impl RunStore for PgStore {
    fn watch(&self) -> Option<Box<dyn StoreWatch>> {
        let l = self.listener.get_or_init(|| workers::Listener::start(self.connect.clone()));
        Some(Box::new(l.watch()))
    }

    fn watch_work(&self) -> Option<Box<dyn StoreWatch>> {
        let l = self.listener.get_or_init(|| workers::Listener::start(self.connect.clone()));
        Some(Box::new(l.watch_work()))
    }

    async fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        self.commit_shared(Arc::new(batch)).await
    }

    async fn commit_shared(&self, batch: Arc<Batch>) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let created: Vec<RunId> = batch
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::CreateRun { run, .. } => Some(run.id.clone()),
                _ => None,
            })
            .collect();
        self.writer.send(apply::Op::Batch(batch)).await?;
        if self.me.epoch() != 0 && !created.is_empty() {
            self.me.remember(created);
        }
        Ok(())
    }

    async fn run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.runs(std::slice::from_ref(id)).await?.pop())
    }

    async fn runs(&self, ids: &[RunId]) -> Result<Vec<RunRecord>, StoreError> {
        // Its five queries see one snapshot: read apart, a run committed
        // between them showed `submitted` with a step already `waiting`.
        // A transaction object, not `BEGIN` sent by hand: if this future
        // is dropped midway (a client gone), its drop rolls back, and the
        // connection goes back to the pool outside any transaction (else
        // every later read on it saw this snapshot).
        let mut c = self.reader().await?;
        let tx = c
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(map_err)?;
        let runs = read::runs(&tx, ids).await?;
        tx.commit().await.map_err(map_err)?;
        Ok(runs)
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        read::list_runs(&self.reader().await?, filter).await
    }

    async fn events_after(&self, run: &RunId, after: Seq, limit: usize) -> Result<Vec<EventRecord>, StoreError> {
        read::events_after(&self.reader().await?, run, after, limit).await
    }

    async fn unfinished_runs(&self) -> Result<Vec<RunId>, StoreError> {
        read::unfinished_runs(&self.reader().await?).await
    }

    async fn expired_leases(&self, now_ms: i64) -> Result<Vec<ExpiredLease>, StoreError> {
        read::expired_leases(&self.reader().await?, now_ms).await
    }

    async fn event_waits(&self, event: &str) -> Result<Vec<WaitRecord>, StoreError> {
        read::event_waits(&self.reader().await?, event).await
    }

    async fn inbox_pending(&self) -> Result<Vec<InboxRecord>, StoreError> {
        workers::inbox_pending(&self.reader().await?, &self.me, self.connect.lease).await
    }

    async fn inbox_get(&self, id: &str, by_event_id: bool) -> Result<Option<InboxRecord>, StoreError> {
        read::inbox_get(&self.reader().await?, id, by_event_id).await
    }

    async fn inbox_queued(&self, run: &RunId) -> Result<Vec<InboxRecord>, StoreError> {
        read::inbox_queued(&self.reader().await?, run).await
    }

    async fn events_emitted(&self, name: &str, since_ms: i64, limit: usize) -> Result<Vec<InboxRecord>, StoreError> {
        read::events_emitted(&self.reader().await?, name, since_ms, limit).await
    }

    async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        read::schedules(&self.reader().await?).await
    }

    async fn start_key(&self, key: &str) -> Result<Option<StartKeyRecord>, StoreError> {
        outbox::start_key(&self.reader().await?, key).await
    }

    async fn deliveries_due(&self, now_ms: i64, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError> {
        outbox::deliveries_due(&self.reader().await?, now_ms, limit).await
    }

    async fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<DeliveryRecord>, StoreError> {
        outbox::deliveries(&self.reader().await?, filter).await
    }

    async fn delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, StoreError> {
        outbox::delivery(&self.reader().await?, id).await
    }

    async fn start_key_of(&self, run: &RunId) -> Result<Option<StartKeyRecord>, StoreError> {
        outbox::start_key_of(&self.reader().await?, run).await
    }

    async fn queue_head(&self, key: &str) -> Result<Option<RunId>, StoreError> {
        read::queue_head(&self.reader().await?, key).await
    }

    async fn artifacts(&self, run: &RunId) -> Result<Vec<ArtifactRecord>, StoreError> {
        read::artifacts(&self.reader().await?, run, None).await
    }

    async fn artifact(&self, run: &RunId, name: &str) -> Result<Option<(ArtifactRecord, Vec<u8>)>, StoreError> {
        read::artifact(&self.reader().await?, run, name).await
    }
}

#[async_trait::async_trait]
impl LeaseStore for PgStore {
    fn is_shared(&self) -> bool {
        true
    }

    async fn claim_run(&self, id: &RunId) -> Result<bool, StoreError> {
        if self.me.epoch() == 0 {
            return Ok(true);
        }
        if self.me.knows(id) {
            return Ok(true);
        }
        let mine = workers::claim_run(&self.reader().await?, &self.me, id).await?;
        if mine {
            self.me.remember([id.clone()]);
        }
        Ok(mine)
    }

    async fn owned_runs(&self) -> Result<Vec<RunId>, StoreError> {
        let ids = workers::owned_runs(&self.reader().await?, &self.me).await?;
        self.me.remember(ids.iter().cloned());
        Ok(ids)
    }

    async fn claim_runs(&self, limit: usize) -> Result<Vec<RunId>, StoreError> {
        if self.me.epoch() == 0 {
            return Ok(vec![]);
        }
        let c = self.reader().await?;
        let mut ids = vec![];
        // Dead workers at most every 250 ms (a look at the small `workers`
        // table first); owners with no row at all every 10 s.
        let (sweep, orphans) = {
            let mut last = self.swept.lock().unwrap();
            let now = std::time::Instant::now();
            let sweep = last.0.is_none_or(|t| now - t >= Duration::from_millis(250));
            let orphans = last.1.is_none_or(|t| now - t >= Duration::from_secs(10));
            if sweep {
                last.0 = Some(now);
            }
            if orphans {
                last.1 = Some(now);
            }
            (sweep, orphans)
        };
        if sweep || orphans {
            ids = workers::take_over(&c, &self.me, orphans).await?;
        }
        if limit > ids.len() {
            let mut cursor = self.cursor.lock().unwrap().clone();
            let fresh = workers::claim_fresh(&c, &self.me, limit - ids.len(), &mut cursor).await?;
            *self.cursor.lock().unwrap() = cursor;
            ids.extend(fresh);
        }
        self.me.remember(ids.iter().cloned());
        Ok(ids)
    }

    async fn busy_elsewhere(&self) -> Result<u64, StoreError> {
        workers::busy_elsewhere(&self.reader().await?, &self.me).await
    }

    async fn release_runs(&self, ids: &[RunId]) -> Result<(), StoreError> {
        if self.me.epoch() == 0 || ids.is_empty() {
            return Ok(());
        }
        self.me.forget(ids);
        workers::release_runs(&self.reader().await?, &self.me, ids).await
    }
}

#[async_trait::async_trait]
impl TemplateStore for PgStore {
    async fn save_template(&self, name: &str, definition: &Value, at: i64) -> Result<u32, StoreError> {
        let op = apply::Op::SaveTemplate { name: name.to_string(), definition: definition.to_string(), at };
        self.writer.send(op).await
    }

    async fn template(&self, name: &str, version: Option<u32>) -> Result<Option<TemplateRecord>, StoreError> {
        let c = self.reader().await?;
        let changes = read::template_changes(&c).await?;
        if let Some(t) = self.templates.get(name, version, changes) {
            return Ok(Some(t));
        }
        let t = read::template(&c, name, version).await?;
        self.templates.put(name, version, changes, t.as_ref());
        Ok(t)
    }

    async fn list_templates(&self) -> Result<Vec<TemplateRecord>, StoreError> {
        read::list_templates(&self.reader().await?).await
    }

    async fn delete_template(&self, name: &str) -> Result<u32, StoreError> {
        self.writer.send(apply::Op::DeleteTemplate { name: name.to_string() }).await
    }

    async fn template_versions(&self, name: &str) -> Result<Vec<TemplateRecord>, StoreError> {
        read::template_versions(&self.reader().await?, name).await
    }
}

#[async_trait::async_trait]
impl ArchiveStore for PgStore {
    async fn count_runs(&self, filter: &RunFilter) -> Result<u64, StoreError> {
        read::count_runs(&self.reader().await?, filter).await
    }

    async fn finished_before(&self, before_ms: i64, filter: &RunFilter) -> Result<Vec<RunId>, StoreError> {
        read::finished_before(&self.reader().await?, before_ms, filter).await
    }

    async fn delete_runs(&self, ids: &[RunId]) -> Result<Vec<RunId>, StoreError> {
        let mut finished = vec![];
        let c = self.reader().await?;
        for id in ids {
            if read::run_state(&c, id).await?.is_some_and(|s| s.is_terminal()) {
                finished.push(id.clone());
            }
        }
        drop(c);
        if !finished.is_empty() {
            self.writer.send(apply::Op::DeleteRuns(finished.clone())).await?;
        }
        Ok(finished)
    }

    async fn import_run(&self, run: RunExport) -> Result<(), StoreError> {
        self.writer.send(apply::Op::ImportRun(Box::new(run))).await.map(|_| ())
    }

    async fn import_template(&self, t: TemplateRecord) -> Result<(), StoreError> {
        self.writer.send(apply::Op::ImportTemplate(t)).await.map(|_| ())
    }
}
