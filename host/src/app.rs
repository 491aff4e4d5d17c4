//! What the run-related commands share: the store (`<data_dir>/weft.db`,
//! or `database = "sqlite:PATH"` in weft.toml), the scheduler lock, and an
//! [`Engine`] over the sandbox's [`CodeRunner`] with the system clock.
//!
//! Who executes runs: the one process that holds the store's scheduler
//! lock (`weft worker`, or a `weft run` that found the store free). Any
//! process may read the store and create runs; a created run stays
//! `submitted` until the lock holder picks it up.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::Value;
use weft_engine::{
    Engine, EngineConfig, EngineError, RunId, RunRecord, RunState, SeededRng, Store, StoreError, SystemClock,
};
use weft_model::{CodeRef, Problem};
use weft_sandbox::registry::Registry;
use weft_store_sqlite::{Durability, SchedulerLock, SqliteStore};

use crate::cli::bad;
use crate::config::{self, Settings};
use crate::lookup::resolve_code;
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
pub fn db_path(settings: &Settings) -> anyhow::Result<PathBuf> {
    match settings.file.database.as_deref() {
        None => Ok(settings.data_dir.join("weft.db")),
        Some(db) => {
            let Some(p) = db.strip_prefix("sqlite:") else {
                return Err(bad(anyhow::anyhow!(
                    "database = {db:?}: only `sqlite:PATH` databases are supported so far"
                )));
            };
            let p = p.strip_prefix("//").unwrap_or(p);
            if p.is_empty() {
                return Err(bad(anyhow::anyhow!("database = {db:?}: the path is empty")));
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
    pub fn open(settings: &Settings) -> anyhow::Result<App> {
        let db_path = db_path(settings)?;
        let durability = match settings.file.durability.unwrap_or_default() {
            config::Durability::Normal => Durability::Normal,
            config::Durability::Full => Durability::Full,
        };
        let store = SqliteStore::open(&db_path, durability)
            .with_context(|| format!("cannot open the store {}", db_path.display()))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("weft")
            .build()
            .context("cannot start the async runtime")?;
        let upstreams = Arc::new(settings.upstreams());
        Ok(App { settings: settings.clone(), db_path, store: Arc::new(store), rt, upstreams })
    }

    /// The store as the engine's trait object.
    pub fn dyn_store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Takes the scheduler lock: `Ok(None)` when another process holds it
    /// (with its pid when known).
    pub fn try_lock(&self) -> anyhow::Result<Result<SchedulerLock, Option<u32>>> {
        Self::locked(self.store.lock_scheduler())
    }

    /// As [`try_lock`](Self::try_lock), for a command that owns the store
    /// only for a moment: a worker starting meanwhile waits for it.
    pub fn try_lock_briefly(&self) -> anyhow::Result<Result<SchedulerLock, Option<u32>>> {
        Self::locked(self.store.lock_scheduler_briefly())
    }

    /// As [`try_lock`](Self::try_lock), for a long-lived owner (worker,
    /// server): a short command holding the lock is waited for (a few
    /// seconds at most); another owner is refused at once.
    pub fn lock_for_good(&self) -> anyhow::Result<Result<SchedulerLock, Option<u32>>> {
        Self::locked(self.store.lock_scheduler_patiently(std::time::Duration::from_secs(10)))
    }

    fn locked(r: Result<SchedulerLock, StoreError>) -> anyhow::Result<Result<SchedulerLock, Option<u32>>> {
        match r {
            Ok(l) => Ok(Ok(l)),
            Err(StoreError::Locked { pid, .. }) => Ok(Err(pid)),
            Err(e) => Err(anyhow::Error::new(e).context("cannot take the store's scheduler lock")),
        }
    }

    /// An engine over this store, running code steps in the sandbox.
    /// Cheap to build; only the lock holder should start runs with it.
    pub fn engine(&self) -> anyhow::Result<Engine> {
        let sandbox = Arc::new(crate::guests::sandbox(&self.settings).context("cannot build the sandbox")?);
        Ok(self.engine_with(sandbox))
    }

    /// An engine whose code runner uses `sandbox` (shared with a caller
    /// that also validates definitions, so guests are loaded once).
    pub fn engine_with(&self, sandbox: Arc<weft_sandbox::Sandbox>) -> Engine {
        let base = std::env::current_dir().unwrap_or_default();
        let code = CodeRunner::new(sandbox, crate::guests::registry(&self.settings), self.settings.code_limits(), base);
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
        engine
    }

    /// Closes the connections to upstream MCP servers (stdio children get
    /// end-of-input, then SIGTERM, then SIGKILL). Call before exiting.
    pub fn shutdown_upstreams(&self) {
        self.rt.block_on(self.upstreams.shutdown());
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
        pin_code(&mut definition, &self.registry, Path::new("."), false)
            .map_err(|ps| ps.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))?;
        Ok(definition)
    }
}

/// What a store's owner (`weft worker`, `weft serve`, a foreground `weft
/// run`) does every poll: answer the signals and events other processes
/// left in the inbox, start the unfinished runs it is not driving yet
/// (created by other processes), and stop the attempts of runs another
/// process canceled.
#[derive(Default)]
pub struct Poller {
    started: HashSet<RunId>,
}

impl Poller {
    /// A poller that already drives `recovered` (from [`Engine::recover`]).
    pub fn new(recovered: Vec<RunId>) -> Self {
        Poller { started: recovered.into_iter().collect() }
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
        let unfinished: HashSet<RunId> = store.unfinished_runs().await?.into_iter().collect();
        let gone: Vec<RunId> = self.started.difference(&unfinished).cloned().collect();
        if !gone.is_empty() {
            self.started.retain(|id| unfinished.contains(id));
            stop_canceled(engine, store, gone).await;
        }
        let mut fresh = 0;
        for id in unfinished {
            if !self.started.contains(&id) {
                fresh += 1;
                tracing::info!(run = %id, "starting a submitted run");
                engine.start(&id);
                self.started.insert(id);
            }
        }
        Ok(fresh)
    }
}

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

/// Cancels a run, reading it again when its owner committed a transition
/// meanwhile (a store conflict), up to 20 times.
pub async fn cancel_run(engine: &Engine, id: &RunId) -> Result<RunRecord, EngineError> {
    let mut tries = 0;
    loop {
        match engine.cancel(id).await {
            Err(EngineError::Store(StoreError::Conflict(_))) if tries < 20 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            other => return other,
        }
    }
}

/// Says who holds the lock, for messages.
pub fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(p) => format!("another process (pid {p})"),
        None => "another process".to_string(),
    }
}

/// Pins a definition document's code: every code step's (and `transform`'s)
/// guest is resolved (plugin name, file relative to `base_dir`, digest),
/// stored content-addressed, and replaced by `{"sha256": HEX}`, so a run
/// executes the same code after a restart even if plugins or files changed.
/// With `paths_only`, plugin names are kept (templates keep naming their
/// plugins; runs pin them at creation).
pub fn pin_code(doc: &mut Value, registry: &Registry, base_dir: &Path, paths_only: bool) -> Result<(), Vec<Problem>> {
    let mut problems = vec![];
    let Some(steps) = doc.get_mut("steps").and_then(Value::as_array_mut) else { return Ok(()) };
    for (i, step) in steps.iter_mut().enumerate() {
        for field in ["code", "transform"] {
            let Some(v) = step.get_mut(field) else { continue };
            let Ok(code) = serde_json::from_value::<CodeRef>(v.clone()) else { continue };
            if matches!(code, CodeRef::Sha256(_)) || (paths_only && !matches!(code, CodeRef::Path(_))) {
                continue;
            }
            match resolve_code(registry, base_dir, &code) {
                Ok(found) => match registry.put_blob(&found.bytes) {
                    Ok(d) => *v = serde_json::json!({"sha256": d.hex()}),
                    Err(e) => problems
                        .push(Problem::new(format!("/steps/{i}/{field}"), format!("cannot store the guest: {e}"))),
                },
                Err(why) => problems.push(Problem::new(format!("/steps/{i}/{field}"), why)),
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(dir: &Path, database: Option<&str>, config: Option<&str>) -> Settings {
        let file = crate::config::ConfigFile { database: database.map(String::from), ..Default::default() };
        Settings {
            data_dir: dir.join("data"),
            cache_dir: dir.join("cache"),
            config_path: config.map(PathBuf::from),
            file: Arc::new(file),
            servers: Arc::default(),
        }
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
        assert!(e.downcast_ref::<crate::cli::BadInput>().is_some(), "{e}");
    }

    #[test]
    fn code_is_pinned_by_digest() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::new(dir.path(), crate::guests::bundled());
        let wasm = weft_bundled::all().iter().find(|p| p.name == "json-select").unwrap().wasm;
        std::fs::write(dir.path().join("g.wasm"), wasm).unwrap();
        let hex = weft_sandbox::Digest::of(wasm).hex();
        let mut doc = json!({"name": "x", "steps": [
            {"name": "a", "code": {"plugin": "json-select"}},
            {"name": "b", "code": {"path": "g.wasm"}},
            {"name": "c", "return": true}
        ]});
        let mut paths_only = doc.clone();
        pin_code(&mut paths_only, &registry, dir.path(), true).unwrap();
        assert_eq!(paths_only["steps"][0]["code"], json!({"plugin": "json-select"}));
        assert_eq!(paths_only["steps"][1]["code"], json!({"sha256": hex}));
        pin_code(&mut doc, &registry, dir.path(), false).unwrap();
        assert_eq!(doc["steps"][0]["code"], json!({"sha256": hex}));
        assert_eq!(registry.blob(&hex.parse().unwrap()).unwrap(), wasm);

        let mut missing = json!({"name": "x", "steps": [{"name": "a", "code": {"path": "nope.wasm"}}]});
        let p = pin_code(&mut missing, &registry, dir.path(), false).unwrap_err();
        assert_eq!(p[0].path, "/steps/0/code");
    }
}
