//! The wasmtime engine as weft configures it: epoch interruption on
//! (wall-clock limits and cancellation) in the engine every guest runs on,
//! fuel metering only in the engine that runs guests with a CPU budget
//! (which checks no epochs: see [`SandboxConfig::epoch_interruption`]),
//! the pooling allocator sized for many short invocations, and the ticker
//! thread that advances epochs while a guest runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::error::HostError;

/// How often the epoch advances; the precision of timeouts and cancellation.
pub const EPOCH_TICK: Duration = Duration::from_millis(2);

/// How the sandbox's engine is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// Check epoch deadlines in compiled code (timeouts and cancellation).
    /// On in the engine every guest runs on. Off in the engine the sandbox
    /// builds for guests with a CPU budget: fuel bounds their time instead
    /// (they yield every 20 million fuel, where the deadline and cancel are
    /// checked, and each host call checks them), since each check costs
    /// about what the other does (W2, docs/performance.md). Without
    /// either, a guest cannot be stopped.
    pub epoch_interruption: bool,
    /// Meter fuel in every guest's code, beside epoch checks (+7–46% over
    /// them, W2). Off by default: the sandbox then builds a second, metered
    /// engine (without epoch checks) on the first invocation with a fuel
    /// limit, so only guests with a CPU budget pay for fuel.
    pub fuel_metering: bool,
    /// Use the pooling allocator (fast instantiation); false uses on-demand
    /// allocation.
    pub pooling: bool,
    /// Guests that may run at the same time (pool slots).
    pub max_concurrent: u32,
    /// Largest memory a guest may ever be granted, in MiB (pool slot size).
    pub max_memory_mb: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            epoch_interruption: true,
            fuel_metering: false,
            pooling: true,
            max_concurrent: 64,
            max_memory_mb: 4096,
        }
    }
}

impl SandboxConfig {
    /// Builds the engine. Every field changes compiled code or its layout,
    /// so each configuration has its own compiled-artifact cache folder.
    pub fn engine(&self) -> Result<Engine, HostError> {
        let mut config = Config::new();
        config.epoch_interruption(self.epoch_interruption);
        config.consume_fuel(self.fuel_metering);
        config.wasm_component_model(true);
        config.cranelift_opt_level(wasmtime::OptLevel::Speed);
        if self.pooling {
            let n = self.max_concurrent.max(1);
            let mut pool = PoolingAllocationConfig::default();
            // Components built by componentize-py / componentize-js contain
            // many core instances, memories and tables.
            pool.total_component_instances(n)
                .total_core_instances(n * 32)
                .total_memories(n * 4)
                .total_tables(n * 8)
                .total_stacks(n)
                .max_core_instances_per_component(64)
                .max_memories_per_component(8)
                .max_tables_per_component(16)
                .max_component_instance_size(4 << 20)
                .max_core_instance_size(4 << 20)
                .table_elements(200_000)
                .max_memory_size((self.max_memory_mb as usize) << 20)
                // Reset a freed memory (table) by rewriting what the guest
                // dirtied rather than by madvise, which unmaps the pages and
                // flushes every core's TLB. With PAGEMAP_SCAN (Linux 6.7+)
                // only the pages the guest wrote are rewritten, up to this
                // many bytes of them: a fib(10) call 28 -> 17 us, W4 +22%.
                // 16 MiB holds what a JS or Python guest writes in a call
                // (with 1 MiB a Python call took 1.37 ms instead of 0.78;
                // docs/performance.md), and costs only what a guest dirties.
                .linear_memory_keep_resident(16 << 20)
                .table_keep_resident(64 << 10)
                .pagemap_scan(wasmtime::Enabled::Auto);
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&config).map_err(|e| HostError::Engine(format!("{e:#}")))?;
        if self.epoch_interruption {
            start_ticker(&engine)?;
        }
        Ok(engine)
    }
}

/// One thread per engine advances the epoch every [`EPOCH_TICK`] while a
/// guest is armed with an epoch deadline ([`Ticking`]); after
/// [`IDLE_AFTER`] with none it sleeps until one is (an idle server spent 2%
/// of a core on 500 wake-ups a second). It ends when the engine is dropped
/// (it holds only a weak reference; a sleeping one looks once a minute).
fn start_ticker(engine: &Engine) -> Result<(), HostError> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("weft-epoch".into())
        .spawn(move || {
            let mut idle = Duration::ZERO;
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
                idle = if ARMED.load(Ordering::SeqCst) == 0 { idle + EPOCH_TICK } else { Duration::ZERO };
                if idle >= IDLE_AFTER {
                    let mut sleep = SLEEP.lock().unwrap_or_else(|p| p.into_inner());
                    SLEEPING.fetch_add(1, Ordering::SeqCst);
                    while ARMED.load(Ordering::SeqCst) == 0 && weak.upgrade().is_some() {
                        sleep = WAKE.wait_timeout(sleep, Duration::from_secs(60)).unwrap_or_else(|p| p.into_inner()).0;
                    }
                    SLEEPING.fetch_sub(1, Ordering::SeqCst);
                    idle = Duration::ZERO;
                }
            }
        })
        .map(|_| ())
        .map_err(|e| HostError::Engine(format!("cannot start the epoch thread: {e}")))
}

/// How long the tickers go on with no guest armed before they sleep.
pub(crate) const IDLE_AFTER: Duration = Duration::from_secs(1);

/// Guests armed with an epoch deadline, in this process.
static ARMED: AtomicUsize = AtomicUsize::new(0);
/// Tickers asleep (read without the lock by [`Ticking::start`]; a count,
/// not a flag, since one ticker waking or ending must not hide another).
pub(crate) static SLEEPING: AtomicUsize = AtomicUsize::new(0);
static SLEEP: Mutex<()> = Mutex::new(());
static WAKE: Condvar = Condvar::new();

/// A guest armed with an epoch deadline: the tickers tick while one lives.
pub(crate) struct Ticking(());

impl Ticking {
    /// Counts a guest in, waking the tickers if they sleep. A ticker
    /// counts itself in [`SLEEPING`] under [`SLEEP`] before it looks at
    /// [`ARMED`] a last time, so either it sees this guest or this guest
    /// sees it asleep and wakes it (the lock is held until it waits).
    pub(crate) fn start() -> Ticking {
        ARMED.fetch_add(1, Ordering::SeqCst);
        if SLEEPING.load(Ordering::SeqCst) > 0 {
            let _sleep = SLEEP.lock().unwrap_or_else(|p| p.into_inner());
            WAKE.notify_all();
        }
        Ticking(())
    }
}

impl Drop for Ticking {
    fn drop(&mut self) {
        ARMED.fetch_sub(1, Ordering::SeqCst);
    }
}
