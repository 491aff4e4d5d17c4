//! weft's sandbox: runs untrusted WebAssembly code steps under limits.
//!
//! Two kinds of guest are accepted, told apart by their bytes:
//! **components** that target the `weft:step/step` world (`wit/step.wit`),
//! and **WASI commands** (core modules with `_start`) that read their input
//! on stdin and print their result on stdout. Every invocation gets a fresh
//! store, armed with an epoch deadline (which also carries cancellation), a
//! memory limiter and, when a CPU budget is asked for, fuel; output and logs
//! are capped on the host side. Guests see no host files, no environment
//! (commands see only the `WEFT_*` context variables) and no sockets.
//!
//! Fuel metering is compiled into the code, and costs every guest ~15–40%
//! of its speed whether or not a budget is set (W2). So by default the
//! sandbox's engine meters no fuel, and a second engine that does is built
//! on the first invocation that asks for a budget (`Limits::fuel`); each
//! guest is prepared for it on demand, from the bytes it was loaded from.
//!
//! Loading is done once per guest: compiled code comes from the on-disk
//! [`ArtifactCache`] when possible and an `InstancePre` is kept per digest,
//! so an invocation costs an instantiation and a call.
//!
//! ```no_run
//! use weft_sandbox::{Invocation, Sandbox, SandboxConfig, GuestOutcome};
//! let sandbox = Sandbox::new(SandboxConfig::default(), None)?;
//! let guest = sandbox.load(&std::fs::read("guest.wasm")?)?;
//! let result = sandbox.invoke(&guest, &Invocation::new(r#"{"text": "hi"}"#));
//! match result.outcome {
//!     Ok(GuestOutcome::Done(value)) => println!("{value}"),
//!     Ok(GuestOutcome::Reject(reason)) => println!("rejected: {reason}"),
//!     Err(e) => println!("{}: {}", e.kind, e.message),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bindings;
mod bytes;
mod cache;
mod command;
mod component;
mod component_state;
mod config;
mod digest;
mod envelope;
mod error;
mod file_digests;
pub mod gate;
pub mod host_log;
mod invoke;
mod limits;
mod pipes;
pub mod registry;
mod report;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use wasmtime::Engine;

pub use bytes::{GuestBytes, StoredBlob};
pub use cache::{ArtifactCache, Compiled, compilations, write_atomic};
pub use config::{EPOCH_TICK, SandboxConfig};
pub use digest::{BadDigest, Digest};
pub use envelope::PERMANENT_EXIT;
pub use error::{GuestError, GuestErrorKind, HostError, LoadError, SandboxError};
pub use file_digests::{FileDigests, SETTLED, Stamp};
pub use invoke::{Invocation, StepContext};
pub use limits::{CancelHandle, Limits};
pub use limits::{DEFAULT_ARTIFACT_BYTES, DEFAULT_LOG_BYTES, DEFAULT_MEMORY_MB, DEFAULT_OUTPUT_BYTES, DEFAULT_TIMEOUT};
pub use report::{Artifact, Level, LogLine, Observer, PROGRESS_DATA_CAP, ProgressUpdate, Report, TRUNCATED_MARKER};

use command::CommandGuest;
use component::ComponentGuest;

/// What a successful invocation produced.
#[derive(Debug, Clone, PartialEq)]
pub enum GuestOutcome {
    /// The step's result.
    Done(serde_json::Value),
    /// The guest rejects the whole run, with a reason.
    Reject(String),
}

/// The two kinds of guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuestKindName {
    /// A component targeting `weft:step/step`.
    Component,
    /// A WASI preview-1 command.
    Command,
}

/// What a guest says about itself (`describe`), with its schemas parsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// The guest's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its version.
    pub version: String,
    /// Which kind of guest.
    pub kind: GuestKindName,
    /// JSON Schema of its input.
    pub input_schema: Option<serde_json::Value>,
    /// JSON Schema of its output.
    pub output_schema: Option<serde_json::Value>,
}

/// A loaded, prepared guest.
pub struct Guest {
    digest: Digest,
    kind: Kind,
    /// Its bytes (or where they are), to prepare it for the fuel-metered
    /// engine when an invocation asks for a CPU budget and that engine's
    /// cache does not hold it.
    bytes: GuestBytes,
    /// Prepared for the fuel-metered engine (on first need).
    metered: OnceLock<Result<Kind, String>>,
}

enum Kind {
    Component(ComponentGuest),
    Command(CommandGuest),
}

impl Guest {
    /// The sha256 of its bytes.
    pub fn digest(&self) -> Digest {
        self.digest
    }
    /// Which kind of guest it is.
    pub fn kind(&self) -> GuestKindName {
        match self.kind {
            Kind::Component(_) => GuestKindName::Component,
            Kind::Command(_) => GuestKindName::Command,
        }
    }
}

/// The result of one invocation.
#[derive(Debug)]
pub struct InvokeResult {
    /// The outcome, or why the step failed.
    pub outcome: Result<GuestOutcome, GuestError>,
    /// Logs, progress and artifacts.
    pub report: Report,
    /// Wall time of the invocation (instantiate + call).
    pub elapsed: Duration,
    /// Fuel the guest used (`None` when the sandbox meters no fuel).
    pub fuel_used: Option<u64>,
    /// The largest linear memory the guest grew to, in bytes (`None` when
    /// it never ran).
    pub memory_peak: Option<u64>,
    /// How long the invocation waited for its CPU slot and memory
    /// ([`gate`]): before it started, and again after host calls.
    pub queued: Duration,
}

/// One wasmtime engine with what goes with it: its linkers and its
/// compiled-artifact cache.
struct Tier {
    engine: Engine,
    /// How its calls are stopped: by epoch checks, or by fuel yields and
    /// host-call checks on an engine that meters fuel and checks no epochs.
    calls: invoke::Calls,
    components: component::Linkers,
    commands: wasmtime::Linker<command::CommandState>,
    cache: ArtifactCache,
}

impl Tier {
    fn new(config: &SandboxConfig, cache_dir: Option<&Path>) -> Result<Self, SandboxError> {
        let engine = config.engine()?;
        let calls = if config.fuel_metering && !config.epoch_interruption {
            invoke::Calls::Metered
        } else {
            invoke::Calls::Async
        };
        Ok(Tier {
            calls,
            components: component::linker(&engine)?,
            commands: command::linker(&engine)?,
            cache: ArtifactCache::new(cache_dir, &engine),
            engine,
        })
    }

    /// Loads from the cache (without reading the bytes) or compiles, and
    /// prepares, the guest of `digest`.
    fn prepare(&self, digest: &Digest, bytes: &GuestBytes) -> Result<Kind, SandboxError> {
        if let Some(kind) = self.prepare_cached(digest) {
            return kind;
        }
        // Compiling takes cores and hundreds of MB: a few at a time.
        let _compiling = COMPILING.acquire();
        // Another process (or tier) may have compiled it meanwhile.
        if let Some(kind) = self.prepare_cached(digest) {
            return kind;
        }
        let bytes = bytes.read()?;
        Ok(match sniff(&bytes)? {
            GuestKindName::Component => {
                let c = self.cache.compile_component(&self.engine, digest, &bytes)?;
                Kind::Component(ComponentGuest::prepare(&self.components, &c)?)
            }
            GuestKindName::Command => {
                let m = self.cache.compile_module(&self.engine, digest, &bytes)?;
                Kind::Command(CommandGuest::prepare(&self.commands, &m)?)
            }
        })
    }

    /// The guest of `digest` prepared from the artifact cache, if it holds it.
    fn prepare_cached(&self, digest: &Digest) -> Option<Result<Kind, SandboxError>> {
        let compiled = self.cache.cached(&self.engine, digest)?;
        Some(match compiled {
            Compiled::Component(c) => ComponentGuest::prepare(&self.components, &c).map(Kind::Component),
            Compiled::Module(m) => CommandGuest::prepare(&self.commands, &m).map(Kind::Command),
        })
    }
}

/// The sandbox: its engine (and, on demand, a fuel-metered one), its
/// linkers, its cache and its loaded guests.
pub struct Sandbox {
    main: Tier,
    /// The engine for invocations with a CPU budget, when `main` meters
    /// no fuel: built on first need.
    metered: OnceLock<Result<Tier, String>>,
    config: SandboxConfig,
    cache_dir: Option<std::path::PathBuf>,
    loaded: Mutex<HashMap<Digest, Arc<Guest>>>,
    /// The digests being loaded, each with the lock its loader holds.
    loading: Mutex<HashMap<Digest, Arc<Mutex<()>>>>,
    slots: Slots,
    gate: Arc<gate::Gate>,
}

impl Sandbox {
    /// A sandbox with `config`, caching compiled artifacts under
    /// `cache_dir` when given.
    pub fn new(config: SandboxConfig, cache_dir: Option<&Path>) -> Result<Self, SandboxError> {
        Ok(Sandbox {
            main: Tier::new(&config, cache_dir)?,
            metered: OnceLock::new(),
            slots: Slots::new(config.max_concurrent.max(1) as usize),
            gate: gate::Gate::new(gate::default_cpus(), gate::default_budget_mb()),
            cache_dir: cache_dir.map(Path::to_path_buf),
            loaded: Mutex::default(),
            loading: Mutex::default(),
            config,
        })
    }

    /// At most `cpus` guests compute at once and all together reserve at
    /// most `memory_budget_mb` (see [`gate`]); by default the machine's
    /// cores and half its memory.
    pub fn with_admission(mut self, cpus: usize, memory_budget_mb: u64) -> Self {
        self.gate = gate::Gate::new(cpus, memory_budget_mb);
        self
    }

    /// The admission gate guests wait at.
    pub fn gate(&self) -> &gate::Gate {
        &self.gate
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.main.engine
    }

    /// The compiled-artifact cache.
    pub fn cache(&self) -> &ArtifactCache {
        &self.main.cache
    }

    /// Loads and prepares a guest (once per digest in this process).
    pub fn load(&self, bytes: &[u8]) -> Result<Arc<Guest>, SandboxError> {
        self.load_pinned(Digest::of(bytes), GuestBytes::copy_of(bytes))
    }

    /// [`Sandbox::load`] for the guest of `digest`, whose bytes are read
    /// from `bytes` only if the artifact cache does not hold it compiled: a
    /// new process that runs a stored 17 MB JavaScript component maps its
    /// compiled artifact and never reads, hashes or copies the `.wasm`
    /// (see [`GuestBytes`]). `digest` must be the sha256 of what `bytes`
    /// holds; a [`StoredBlob`] is checked when read.
    ///
    /// One load per digest at a time (single flight): callers asking for a
    /// guest being compiled wait for that compilation instead of starting
    /// their own (200 cold requests for one guest compile it once).
    pub fn load_pinned(&self, digest: Digest, bytes: GuestBytes) -> Result<Arc<Guest>, SandboxError> {
        if let Some(g) = self.loaded.lock().unwrap_or_else(|p| p.into_inner()).get(&digest) {
            return Ok(g.clone());
        }
        let flight = self.loading.lock().unwrap_or_else(|p| p.into_inner()).entry(digest).or_default().clone();
        let _flight = flight.lock().unwrap_or_else(|p| p.into_inner());
        // Another caller may have loaded it while this one waited.
        if let Some(g) = self.loaded.lock().unwrap_or_else(|p| p.into_inner()).get(&digest) {
            return Ok(g.clone());
        }
        let prepared = self.main.prepare(&digest, &bytes);
        let result = prepared.map(|kind| {
            let guest = Arc::new(Guest { digest, kind, bytes, metered: OnceLock::new() });
            self.loaded.lock().unwrap_or_else(|p| p.into_inner()).insert(digest, guest.clone());
            guest
        });
        self.loading.lock().unwrap_or_else(|p| p.into_inner()).remove(&digest);
        result
    }

    /// The guest's metadata: `describe` for components; commands carry
    /// none (`None`).
    pub fn describe(&self, guest: &Guest) -> Result<Option<Metadata>, LoadError> {
        match &guest.kind {
            Kind::Component(c) => {
                let _slot = self.slots.acquire_blocking();
                c.describe(&self.main.engine).map(Some)
            }
            Kind::Command(_) => Ok(None),
        }
    }

    /// The engine and preparation an invocation runs with (and how its
    /// calls are stopped): the fuel-metered ones, which check no epochs,
    /// when it has a CPU budget and the main engine meters no fuel.
    fn tier_for<'a>(
        &'a self,
        guest: &'a Guest,
        inv: &Invocation,
    ) -> Result<(&'a Engine, &'a Kind, invoke::Calls), GuestError> {
        if inv.limits.fuel.is_none() || self.config.fuel_metering {
            return Ok((&self.main.engine, &guest.kind, self.main.calls));
        }
        let host = |what: &str, e: &str| GuestError::new(GuestErrorKind::Trap, format!("host error: {what}: {e}"));
        let tier = self
            .metered
            .get_or_init(|| {
                let config = SandboxConfig { fuel_metering: true, epoch_interruption: false, ..self.config.clone() };
                Tier::new(&config, self.cache_dir.as_deref()).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| host("cannot build the fuel-metered engine", e))?;
        let kind = guest
            .metered
            .get_or_init(|| tier.prepare(&guest.digest, &guest.bytes).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| host("cannot prepare the guest for fuel metering", e))?;
        Ok((&tier.engine, kind, tier.calls))
    }

    /// Runs one invocation in a fresh store, once the [`gate`] admits it
    /// (its limits start then). The guest yields to the executor at every
    /// epoch tick (2 ms), and a guest parked in a host call is dropped at
    /// its deadline or cancel, so this never holds a thread past the
    /// invocation's timeout.
    pub async fn invoke_async(&self, guest: &Guest, inv: &Invocation) -> InvokeResult {
        let queued_at = Instant::now();
        let (admitted, told) = match self.gate.try_admit(inv.limits.memory_bytes) {
            Some(a) => (a, false),
            None => {
                // A wait shorter than `QUEUE_SHOWN` (a busy machine's usual
                // turn) is neither said nor paused for: saying it costs a
                // stored event per attempt. Past it, the attempt says it
                // waits and its timeouts pause (the engine's time, not the
                // step's).
                let admit = self.gate.admit(inv.priority, inv.limits.memory_bytes);
                let mut admit = std::pin::pin!(admit);
                match tokio::time::timeout(QUEUE_SHOWN, admit.as_mut()).await {
                    Ok(a) => (a, false),
                    Err(_) => {
                        if let Some(o) = &inv.observer {
                            o.queued();
                        }
                        (admit.await, true)
                    }
                }
            }
        };
        let (_slot, told) = match self.slots.0.try_acquire() {
            Ok(p) => (p, told),
            Err(_) => {
                // Every pooled instance is held (by guests parked in host calls).
                if let (Some(o), false) = (&inv.observer, told) {
                    o.queued();
                }
                (self.slots.acquire().await, true)
            }
        };
        let waited = queued_at.elapsed();
        if let Some(o) = inv.observer.as_ref().filter(|_| told) {
            o.admitted(waited);
        }
        // The guest's own view of its deadline moves with its start.
        let moved;
        let inv = if waited >= Duration::from_millis(1) && inv.ctx.deadline_ms > 0 {
            let mut i = inv.clone();
            i.ctx.deadline_ms = i.ctx.deadline_ms.saturating_add(waited.as_millis() as u64);
            moved = i;
            &moved
        } else {
            inv
        };
        let start = Instant::now();
        let (engine, kind, calls) = match self.tier_for(guest, inv) {
            Ok(t) => t,
            Err(e) => {
                return InvokeResult {
                    outcome: Err(e),
                    report: Report::default(),
                    elapsed: start.elapsed(),
                    fuel_used: None,
                    memory_peak: None,
                    queued: waited,
                };
            }
        };
        let host_lines = host_log::HostLines::new(inv.limits.log_bytes);
        let call = async {
            match kind {
                Kind::Component(c) => c.invoke(engine, inv, calls).await,
                Kind::Command(c) => c.invoke(engine, inv, calls).await,
            }
        };
        let gated = gate::Gated::new(call, admitted, inv.priority, host_lines.clone(), inv.observer.clone());
        let rewaited = gated.waited.clone();
        let (outcome, mut collector) = gated.await;
        let (lines, dropped) = host_lines.take();
        for line in lines {
            collector.log(Level::Warn, line);
        }
        if dropped > 0 {
            collector.log(Level::Warn, format!("[weft: {dropped} more lines from wasmtime about this guest dropped]"));
        }
        let (fuel_used, memory_peak) = (collector.fuel_used, collector.memory_peak);
        let queued = waited + *rewaited.lock().unwrap_or_else(|p| p.into_inner());
        InvokeResult { outcome, report: collector.report, elapsed: start.elapsed(), fuel_used, memory_peak, queued }
    }

    /// [`Sandbox::invoke_async`] for synchronous callers (the CLI, tests,
    /// benches): blocks the calling thread until the invocation ends.
    /// Inside a multi-threaded tokio runtime it hands the worker's other
    /// tasks to another thread meanwhile; elsewhere it runs the invocation
    /// on a small runtime of the calling thread's own.
    pub fn invoke(&self, guest: &Guest, inv: &Invocation) -> InvokeResult {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| h.block_on(self.invoke_async(guest, inv)))
            }
            // A current-thread runtime cannot be blocked from inside: a
            // thread of its own runs the invocation.
            Ok(_) => std::thread::scope(|s| {
                s.spawn(|| own_runtime(|rt| rt.block_on(self.invoke_async(guest, inv))))
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            }),
            Err(_) => own_runtime(|rt| rt.block_on(self.invoke_async(guest, inv))),
        }
    }
}

/// Runs `f` with this thread's own current-thread runtime (timers on),
/// built on first use.
fn own_runtime<R>(f: impl FnOnce(&tokio::runtime::Runtime) -> R) -> R {
    thread_local! {
        static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread tokio runtime");
    }
    RT.with(f)
}

/// Tells a component from a core module by the preamble; text is accepted
/// as WAT (`(module` / `(component`).
fn sniff(bytes: &[u8]) -> Result<GuestKindName, LoadError> {
    if bytes.len() >= 8 && &bytes[..4] == b"\0asm" {
        return match bytes[4..8] {
            [1, 0, 0, 0] => Ok(GuestKindName::Command),
            [0x0d, 0, 1, 0] => Ok(GuestKindName::Component),
            ref v => Err(LoadError::Invalid(format!("unknown WebAssembly version/layer {v:02x?}"))),
        };
    }
    let text = std::str::from_utf8(bytes).unwrap_or("").trim_start();
    if text.starts_with("(component") {
        return Ok(GuestKindName::Component);
    }
    if text.starts_with("(module") {
        return Ok(GuestKindName::Command);
    }
    // Nothing of the file is shown: it may not be meant to be read.
    Err(LoadError::NotWasm("it does not start with the \\0asm preamble of WebAssembly (nor with WAT text)".into()))
}

/// How long a guest may wait for its CPU slot and memory before it says it
/// queues (`Observer::queued`, an `attempt.queued` event).
pub const QUEUE_SHOWN: Duration = Duration::from_millis(5);

/// Compilations at once in this process: wasmtime compiles a module's
/// functions in parallel itself, so two keep the cores busy; more only
/// add memory.
static COMPILING: Counting = Counting::new(2);

/// A counting semaphore for synchronous callers.
struct Counting {
    free: Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Counting {
    const fn new(n: usize) -> Self {
        Counting { free: Mutex::new(n), freed: std::sync::Condvar::new() }
    }

    fn acquire(&self) -> CountingPermit<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        CountingPermit(self)
    }
}

struct CountingPermit<'a>(&'a Counting);

impl Drop for CountingPermit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// Counts guests running at once so the pooling allocator never runs out of
/// slots: a caller past the limit waits for a slot instead of failing.
struct Slots(tokio::sync::Semaphore);

impl Slots {
    fn new(n: usize) -> Self {
        Slots(tokio::sync::Semaphore::new(n))
    }
    async fn acquire(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.0.acquire().await.expect("the slots are never closed")
    }
    /// For synchronous callers (`describe`): blocks the thread.
    fn acquire_blocking(&self) -> tokio::sync::SemaphorePermit<'_> {
        loop {
            if let Ok(p) = self.0.try_acquire() {
                return p;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests;
