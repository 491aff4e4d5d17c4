//! What the run-related commands share: the store, the right to execute
//! its runs, and an [`Engine`] over the sandbox's [`CodeRunner`] with the
//! system clock.
//!
//! The store is SQLite by default (`<data_dir>/weft.db`, or `database =
//! "sqlite:PATH"`), or PostgreSQL (`database = "postgres://..."`, or
//! `$WEFT_DATABASE`). Who executes runs: on SQLite, the one process that
//! holds the store's scheduler lock (`weft worker`, `weft serve`, or a
//! `weft run` that found the store free); on PostgreSQL, every worker
//! holding a lease ([`Owner`]), each driving its own runs. Any process may
//! read the store and create runs; a created run waits until an owner
//! picks it up.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use weft_engine::{Engine, EngineConfig, SeededRng, Store, StoreError, SystemClock};
use weft_sandbox::Sandbox;
use weft_sandbox::registry::Registry;
use weft_store_postgres::{Lease, PgStore};
use weft_store_sqlite::{SchedulerLock, SqliteStore};

use crate::config::Settings;
use crate::error::{Result, RuntimeError};
use crate::runner::CodeRunner;
use crate::tool_runner::{Runners, ToolRunner};

/// Where the runs are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// An SQLite file (one process executes its runs at a time).
    Sqlite(PathBuf),
    /// A PostgreSQL database, by URL (any number of workers).
    Postgres(String),
}

/// The open store, by kind (for what only one kind does).
#[derive(Clone)]
pub enum Backend {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PgStore>),
}

impl Backend {
    /// The store as the engine's trait object.
    pub fn store(&self) -> Arc<dyn Store> {
        match self {
            Backend::Sqlite(s) => s.clone(),
            Backend::Postgres(s) => s.clone(),
        }
    }
}

/// Opens (creating and migrating if needed) the store `db` names, with
/// the durability and lease of `settings`: its name for messages and it.
pub fn open_backend(db: &Database, settings: &Settings, rt: &tokio::runtime::Runtime) -> Result<(String, Backend)> {
    let durability = settings.file.durability.unwrap_or_default();
    Ok(match db {
        Database::Sqlite(path) => {
            let store = SqliteStore::open(path, durability)
                .map_err(RuntimeError::store(format!("cannot open the store {}", path.display())))?;
            (path.display().to_string(), Backend::Sqlite(Arc::new(store)))
        }
        Database::Postgres(url) => {
            let opts = weft_store_postgres::Options {
                durability,
                lease: Duration::from_millis(settings.file.workers.lease_ms.unwrap_or(5_000).max(500)),
                ..Default::default()
            };
            let shown = weft_store_postgres::redact(url);
            let store = rt
                .block_on(PgStore::connect(url, opts))
                .map_err(RuntimeError::store(format!("cannot open the store {shown}")))?;
            (shown, Backend::Postgres(Arc::new(store)))
        }
    })
}

/// A database named on the command line: `sqlite:PATH`, a path, or a
/// `postgres://` URL.
pub fn parse_database(text: &str) -> Database {
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        return Database::Postgres(text.to_string());
    }
    let p = text.strip_prefix("sqlite:").unwrap_or(text);
    Database::Sqlite(PathBuf::from(p.strip_prefix("//").unwrap_or(p)))
}

/// The right to execute runs: SQLite's scheduler lock, or a worker's lease
/// on PostgreSQL (given back when dropped, or by [`Owner::leave`]).
pub enum Owner {
    Lock(SchedulerLock),
    Lease(Box<Lease>),
}

impl Owner {
    /// Resolves when this process must stop driving its runs: a lease that
    /// ran out (others drive them now). Never, for the scheduler lock.
    pub async fn lost(&mut self) -> String {
        match self {
            Owner::Lock(_) => std::future::pending().await,
            Owner::Lease(l) => l.lost().await.to_string(),
        }
    }

    /// Leaves in good order: a worker's runs go back to the other workers
    /// at once (instead of after its lease).
    pub async fn leave(self) {
        if let Owner::Lease(l) = self
            && let Err(e) = l.leave().await
        {
            tracing::warn!(error = %e, "could not give this worker's runs back; others take them when its lease runs out");
        }
    }
}

/// An open store and the runtime to talk to it.
pub struct App {
    /// The configuration.
    pub settings: Settings,
    /// The store, as shown in messages (a path, or a URL without password).
    pub store_name: String,
    /// The store (shared with the engine).
    pub store: Arc<dyn Store>,
    /// The same store, by kind.
    pub backend: Backend,
    /// The async runtime every command runs on.
    pub rt: tokio::runtime::Runtime,
    /// The upstream MCP servers of tool steps (started on first use,
    /// shared by every run of this process).
    pub upstreams: Arc<weft_mcp_client::Upstreams>,
}

/// The configured database: `$WEFT_DATABASE`, else `database` (a
/// `sqlite:` path is relative to the config file's folder), else
/// `<data_dir>/weft.db`.
pub fn database(settings: &Settings) -> Result<Database> {
    let env = std::env::var("WEFT_DATABASE").ok().filter(|d| !d.is_empty());
    let Some(db) = env.as_deref().or(settings.file.database.as_deref()) else {
        return Ok(Database::Sqlite(settings.data_dir.join("weft.db")));
    };
    if db.starts_with("postgres://") || db.starts_with("postgresql://") {
        return Ok(Database::Postgres(db.to_string()));
    }
    let Some(p) = db.strip_prefix("sqlite:") else {
        return Err(RuntimeError::Invalid(format!(
            "database = {:?}: write `sqlite:PATH` (the embedded store) or `postgres://USER@HOST/DB` (many workers)",
            weft_store_postgres::redact(db)
        )));
    };
    let p = p.strip_prefix("//").unwrap_or(p);
    if p.is_empty() {
        return Err(RuntimeError::Invalid(format!("database = {db:?}: the path is empty")));
    }
    let path = Path::new(p);
    if path.is_absolute() || env.is_some() {
        return Ok(Database::Sqlite(path.to_path_buf()));
    }
    let base = settings.config_path.as_ref().and_then(|c| c.parent()).map(Path::to_path_buf).unwrap_or_default();
    Ok(Database::Sqlite(base.join(path)))
}

impl App {
    /// Opens (creating and migrating if needed) the configured store.
    pub fn open(settings: &Settings) -> Result<App> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("weft")
            .build()
            .map_err(|source| RuntimeError::Io { what: "cannot start the async runtime".into(), source })?;
        let (store_name, backend) = open_backend(&database(settings)?, settings, &rt)?;
        let store = backend.store();
        let upstreams = Arc::new(settings.upstreams());
        Ok(App { settings: settings.clone(), store_name, store, backend, rt, upstreams })
    }

    /// The store as the engine's trait object.
    pub fn dyn_store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Whether many workers share the store (PostgreSQL).
    pub fn is_shared(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// The right to execute runs: `Ok(Err(pid))` when another process holds
    /// SQLite's lock (with its pid when known). On PostgreSQL this process
    /// joins the workers.
    pub fn try_lock(&self) -> Result<std::result::Result<Owner, Option<u32>>> {
        match &self.backend {
            Backend::Sqlite(s) => Self::locked(s.lock_scheduler()),
            Backend::Postgres(_) => self.join().map(Ok),
        }
    }

    /// As [`try_lock`](Self::try_lock), for a command that owns the store
    /// only for a moment: a worker starting meanwhile waits for it. On
    /// PostgreSQL such a command never executes runs: `Ok(Err(None))`.
    pub fn try_lock_briefly(&self) -> Result<std::result::Result<Owner, Option<u32>>> {
        match &self.backend {
            Backend::Sqlite(s) => Self::locked(s.lock_scheduler_briefly()),
            Backend::Postgres(_) => Ok(Err(None)),
        }
    }

    /// As [`try_lock`](Self::try_lock), for a long-lived owner (worker,
    /// server): a short command holding the lock is waited for (a few
    /// seconds at most); another owner is refused at once.
    pub fn lock_for_good(&self) -> Result<std::result::Result<Owner, Option<u32>>> {
        match &self.backend {
            Backend::Sqlite(s) => Self::locked(s.lock_scheduler_patiently(std::time::Duration::from_secs(10))),
            Backend::Postgres(_) => self.join().map(Ok),
        }
    }

    /// Joins the workers of a PostgreSQL store (again, after a lost lease).
    pub fn join(&self) -> Result<Owner> {
        let Backend::Postgres(pg) = &self.backend else {
            return Err(RuntimeError::Invalid("only a PostgreSQL store has workers".into()));
        };
        let lease = self
            .block_on(pg.join(&worker_name()))
            .map_err(RuntimeError::store(format!("cannot join the workers of {}", self.store_name)))?;
        Ok(Owner::Lease(Box::new(lease)))
    }

    fn locked(r: std::result::Result<SchedulerLock, StoreError>) -> Result<std::result::Result<Owner, Option<u32>>> {
        match r {
            Ok(l) => Ok(Ok(Owner::Lock(l))),
            Err(StoreError::Locked { pid, .. }) => Ok(Err(pid)),
            Err(e) => Err(RuntimeError::store("cannot take the store's scheduler lock")(e)),
        }
    }

    /// An engine over this store, running code steps in this process's
    /// sandbox. Cheap to build; only the lock holder should start runs with it.
    pub fn engine(&self) -> Result<Engine> {
        let base = std::env::current_dir().unwrap_or_default();
        let code = CodeRunner::new(
            self.sandbox()?,
            crate::guests::registry(&self.settings),
            self.settings.code_limits(),
            base,
        );
        let limits = &self.settings.file.limits;
        let runner = Runners::new(code, ToolRunner::new(self.upstreams.clone()))
            .with_agents(crate::agent_runner::AgentRunner::new(&self.settings.agents))
            .with_default_timeouts(limits.code_timeout_ms, limits.tool_timeout_ms);
        let engine = Engine::new(
            self.dyn_store(),
            Arc::new(runner),
            Arc::new(SystemClock),
            Arc::new(SeededRng::from_entropy()),
            {
                let d = EngineConfig::default();
                EngineConfig {
                    // A worker's attempts stop with its lease: their own
                    // leases (what `runs show` reports) need not outlast it.
                    max_interruptions: limits.max_interruptions.unwrap_or(d.max_interruptions),
                    max_run_log_bytes: limits.max_run_log_bytes.unwrap_or(d.max_run_log_bytes),
                    max_queued_signals: limits.max_queued_signals.unwrap_or(d.max_queued_signals),
                    early_ttl_ms: limits.early_ttl_ms.unwrap_or(d.early_ttl_ms),
                    max_early_events: limits.max_early_events.unwrap_or(d.max_early_events),
                    size_limits: self.settings.size_limits(),
                    delivery_retry: self.settings.file.notifications.retry(d.delivery_retry),
                    // A sender holds a delivery longer than a try may take.
                    delivery_lease_ms: 2 * self.settings.file.notifications.timeout().as_millis() as u64 + 5_000,
                    ..d
                }
            },
        );
        engine.set_planner(Arc::new(PinCode { registry: crate::guests::registry(&self.settings) }));
        let timeout = self.settings.file.notifications.timeout();
        let notifier = crate::notify::Notifier::new(
            &self.settings.webhooks,
            self.settings.file.a2a.push_urls.clone(),
            self.upstreams.clone(),
            timeout,
        );
        engine.set_deliverer(Arc::new(notifier));
        Ok(engine)
    }

    /// The sandbox of this process (built on first use; see
    /// [`crate::guests::sandbox`]).
    pub fn sandbox(&self) -> Result<Arc<Sandbox>> {
        Ok(crate::guests::sandbox(&self.settings)?)
    }

    /// Closes the connections to upstream MCP servers (stdio children get
    /// end-of-input, then SIGTERM, then SIGKILL). Call before exiting.
    pub fn shutdown_upstreams(&self) {
        self.rt.block_on(self.upstreams.shutdown());
    }

    /// The prepare-a-run pipeline over this store and sandbox.
    pub fn pipeline(&self) -> Result<crate::pipeline::Pipeline> {
        Ok(crate::pipeline::Pipeline::new(
            &self.settings,
            self.sandbox()?,
            self.upstreams.clone(),
            Some(self.dyn_store()),
            std::env::current_dir().unwrap_or_else(|_| ".".into()),
        ))
    }

    /// Runs a future to completion on the runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }
}

/// How runs the engine creates itself (child runs, scheduled runs) pin
/// their template's code: like `weft run` does for a run it creates.
struct PinCode {
    registry: Registry,
}

impl weft_engine::Planner for PinCode {
    fn prepare(&self, mut definition: Value) -> Result<Value, String> {
        crate::pipeline::pin_code(&mut definition, &self.registry, Path::new("."), false)
            .map_err(|ps| ps.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))?;
        Ok(definition)
    }
}

/// How this process is named among the workers: `host:pid`.
pub fn worker_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    format!("{host}:{}", std::process::id())
}

/// The retention in effect: `retention` of weft.toml, 30 days by default.
pub fn retention(settings: &Settings) -> Option<Duration> {
    settings.file.retention.unwrap_or_default().0
}

/// Says who holds the lock, for messages.
pub fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(p) => format!("another process (pid {p})"),
        None => "another process".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path, database: Option<&str>, config: Option<&str>) -> Settings {
        let file = crate::config::ConfigFile { database: database.map(String::from), ..Default::default() };
        Settings { config_path: config.map(PathBuf::from), file: Arc::new(file), ..Settings::in_dir(dir) }
    }

    #[test]
    fn the_database_is_in_the_data_dir_unless_configured() {
        let d = Path::new("/x");
        let sqlite = |p: &str| Database::Sqlite(PathBuf::from(p));
        assert_eq!(database(&settings(d, None, None)).unwrap(), sqlite("/x/data/weft.db"));
        assert_eq!(database(&settings(d, Some("sqlite:/db/w.db"), None)).unwrap(), sqlite("/db/w.db"));
        assert_eq!(
            database(&settings(d, Some("sqlite:state/w.db"), Some("/etc/weft/weft.toml"))).unwrap(),
            sqlite("/etc/weft/state/w.db")
        );
        assert_eq!(
            database(&settings(d, Some("postgres://w@h/db"), None)).unwrap(),
            Database::Postgres("postgres://w@h/db".into())
        );
        let e = database(&settings(d, Some("mysql://u:secret@h/db"), None)).unwrap_err();
        assert!(e.is_invalid() && e.to_string().contains("postgres://") && !e.to_string().contains("secret"), "{e}");
    }
}
