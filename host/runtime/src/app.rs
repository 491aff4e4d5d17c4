//! What the run-related commands share: the store (`<data_dir>/weft.db`,
//! or `database = "sqlite:PATH"` in weft.toml), the scheduler lock, and an
//! [`Engine`] over the sandbox's [`CodeRunner`] with the system clock.
//!
//! Who executes runs: the one process that holds the store's scheduler
//! lock (`weft worker`, or a `weft run` that found the store free). Any
//! process may read the store and create runs; a created run stays
//! `submitted` until the lock holder picks it up.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use weft_engine::{Engine, EngineConfig, SeededRng, Store, StoreError, SystemClock};
use weft_sandbox::Sandbox;
use weft_sandbox::registry::Registry;
use weft_store_sqlite::{Durability, SchedulerLock, SqliteStore};

use crate::config::{self, Settings};
use crate::error::{Result, RuntimeError};
use crate::runner::CodeRunner;
use crate::tool_runner::{Runners, ToolRunner};

/// An open store and the runtime to talk to it.
pub struct App {
    /// The configuration.
    pub settings: Settings,
    /// The database file.
    pub db_path: PathBuf,
    /// The store (shared with the engine).
    pub store: Arc<SqliteStore>,
    /// The async runtime every command runs on.
    pub rt: tokio::runtime::Runtime,
    /// The upstream MCP servers of tool steps (started on first use,
    /// shared by every run of this process).
    pub upstreams: Arc<weft_mcp::Upstreams>,
}

/// The database file: `database = "sqlite:PATH"` (relative to the config
/// file's folder) or `<data_dir>/weft.db`.
pub fn db_path(settings: &Settings) -> Result<PathBuf> {
    match settings.file.database.as_deref() {
        None => Ok(settings.data_dir.join("weft.db")),
        Some(db) => {
            let Some(p) = db.strip_prefix("sqlite:") else {
                return Err(RuntimeError::Invalid(format!(
                    "database = {db:?}: only `sqlite:PATH` databases are supported so far"
                )));
            };
            let p = p.strip_prefix("//").unwrap_or(p);
            if p.is_empty() {
                return Err(RuntimeError::Invalid(format!("database = {db:?}: the path is empty")));
            }
            let path = Path::new(p);
            if path.is_absolute() {
                return Ok(path.to_path_buf());
            }
            let base =
                settings.config_path.as_ref().and_then(|c| c.parent()).map(Path::to_path_buf).unwrap_or_default();
            Ok(base.join(path))
        }
    }
}

impl App {
    /// Opens (creating and migrating if needed) the configured store.
    pub fn open(settings: &Settings) -> Result<App> {
        let db_path = db_path(settings)?;
        let durability = match settings.file.durability.unwrap_or_default() {
            config::Durability::Normal => Durability::Normal,
            config::Durability::Full => Durability::Full,
        };
        let store = SqliteStore::open(&db_path, durability)
            .map_err(RuntimeError::store(format!("cannot open the store {}", db_path.display())))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("weft")
            .build()
            .map_err(|source| RuntimeError::Io { what: "cannot start the async runtime".into(), source })?;
        let upstreams = Arc::new(settings.upstreams());
        Ok(App { settings: settings.clone(), db_path, store: Arc::new(store), rt, upstreams })
    }

    /// The store as the engine's trait object.
    pub fn dyn_store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Takes the scheduler lock: `Ok(None)` when another process holds it
    /// (with its pid when known).
    pub fn try_lock(&self) -> Result<std::result::Result<SchedulerLock, Option<u32>>> {
        Self::locked(self.store.lock_scheduler())
    }

    /// As [`try_lock`](Self::try_lock), for a command that owns the store
    /// only for a moment: a worker starting meanwhile waits for it.
    pub fn try_lock_briefly(&self) -> Result<std::result::Result<SchedulerLock, Option<u32>>> {
        Self::locked(self.store.lock_scheduler_briefly())
    }

    /// As [`try_lock`](Self::try_lock), for a long-lived owner (worker,
    /// server): a short command holding the lock is waited for (a few
    /// seconds at most); another owner is refused at once.
    pub fn lock_for_good(&self) -> Result<std::result::Result<SchedulerLock, Option<u32>>> {
        Self::locked(self.store.lock_scheduler_patiently(std::time::Duration::from_secs(10)))
    }

    fn locked(
        r: std::result::Result<SchedulerLock, StoreError>,
    ) -> Result<std::result::Result<SchedulerLock, Option<u32>>> {
        match r {
            Ok(l) => Ok(Ok(l)),
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
            .with_default_timeouts(limits.code_timeout_ms, limits.tool_timeout_ms);
        let engine = Engine::new(
            self.dyn_store(),
            Arc::new(runner),
            Arc::new(SystemClock),
            Arc::new(SeededRng::from_entropy()),
            {
                let d = EngineConfig::default();
                EngineConfig {
                    max_interruptions: limits.max_interruptions.unwrap_or(d.max_interruptions),
                    max_run_log_bytes: limits.max_run_log_bytes.unwrap_or(d.max_run_log_bytes),
                    caps: self.settings.caps(),
                    ..d
                }
            },
        );
        engine.set_planner(Arc::new(PinCode { registry: crate::guests::registry(&self.settings) }));
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
        assert_eq!(db_path(&settings(d, None, None)).unwrap(), Path::new("/x/data/weft.db"));
        assert_eq!(db_path(&settings(d, Some("sqlite:/db/w.db"), None)).unwrap(), Path::new("/db/w.db"));
        assert_eq!(
            db_path(&settings(d, Some("sqlite:state/w.db"), Some("/etc/weft/weft.toml"))).unwrap(),
            Path::new("/etc/weft/state/w.db")
        );
        let e = db_path(&settings(d, Some("postgres://h/db"), None)).unwrap_err();
        assert!(e.is_invalid(), "{e}");
    }
}
