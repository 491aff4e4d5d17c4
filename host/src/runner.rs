//! [`CodeRunner`]: the engine's [`StepRunner`] for code steps, over the
//! sandbox. It resolves the step's guest (a plugin name, a file, or — for
//! runs that pinned their code at creation — a digest), loads it (compiled
//! once per digest), invokes it with the step's limits and the attempt's
//! deadline, forwards its logs and progress to the run's event log, and
//! maps the outcome to the engine's vocabulary.
//!
//! Where a guest runs: a guest is synchronous code, so by default it gets
//! a thread of its own (`block_in_place`: the async worker's other tasks
//! move to another thread meanwhile). That hand-off costs about as much as
//! a short guest itself (~80 µs on the 2-core VM of performance.md), so a
//! pinned guest whose recent calls all finished quickly (see [`FAST`]) runs
//! in place on the async worker instead. A guest that suddenly runs long
//! then holds that worker until it ends or its deadline interrupts it, and
//! its next calls go back to a thread of their own. WASI commands never
//! run in place: their stdio goes through wasmtime-wasi's blocking bridge
//! (`block_on`), which panics on an async worker ("Cannot start a runtime
//! from within a runtime"), so only components are tracked as fast.
//!
//! A panic while a guest runs is caught and reported as an interrupted
//! attempt (the engine runs it again, and fails it as `crashed` if it keeps
//! happening), never a dead thread and a hung run.
//!
//! Guests on threads of their own compute at most as many at once as the
//! engine's default `max_concurrency` (4 per core); a call past that waits
//! (asynchronously) for a thread. The engine bounds attempts expected in
//! place separately and loosely (see `EngineConfig::max_in_place`), so
//! when a guest that was fast turns slow, the attempts claimed meanwhile
//! must not all take threads at once.
//!
//! Other actions (tool, ...) are refused with a failure saying so: tool
//! steps get their own runner with the MCP client pool.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use weft_engine::{CancelToken, ErrorKind, EventSink, StepError, StepFailure, StepOutput, StepRequest, StepRunner};
use weft_model::{Action, CodeRef};
use weft_sandbox::registry::Registry;
use weft_sandbox::{
    CancelHandle, Digest, Guest, GuestError, GuestErrorKind, GuestOutcome, Invocation, LogLine, Observer, Sandbox,
    SandboxError, StepContext,
};

use crate::config::Settings;
use crate::lookup::resolve_code;

/// Runs code steps in the sandbox.
#[derive(Clone)]
pub struct CodeRunner {
    inner: Arc<Inner>,
    /// Calls that may run on threads of their own at once.
    threads: Arc<tokio::sync::Semaphore>,
}

/// A pinned guest whose recent calls took less than this (a decaying
/// average; see [`Recent`] for how a slow call raises it) runs in place.
pub const FAST: Duration = Duration::from_micros(300);

/// How long a pinned guest's recent calls took.
///
/// What a call took is its thread's CPU time, unless the thread blocked
/// during the call (a voluntary context switch: the guest waited in a
/// host call, e.g. a sleep), in which case it is the time on the wall
/// clock. Time the thread spent preempted is not the guest's: on a busy
/// 2-core machine one call in a few dozen is preempted for a millisecond
/// or so, and counting that sent the guest's next calls to threads of
/// their own — each such hand-off costs as much as the call, so a busy
/// engine got slower exactly when it was busiest (W3: ~1% of the calls,
/// each a hand-off of the worker to another thread).
///
/// A call that took [`FAST`] or more raises the average at once: the
/// guest is slow now; faster calls bring it down gradually.
#[derive(Debug, Clone, Copy, Default)]
struct Recent {
    /// Decaying average (µs).
    avg_us: f64,
}

impl Recent {
    fn new(took_us: f64) -> Self {
        Recent { avg_us: took_us }
    }

    fn took(&mut self, took_us: f64) {
        if took_us <= self.avg_us {
            self.avg_us = 0.8 * self.avg_us + 0.2 * took_us;
        } else {
            self.avg_us = took_us;
        }
    }
}

/// What the calls so far cost the thread that made them.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Usage {
    /// CPU time (user and system).
    cpu: Duration,
    /// Voluntary context switches: times the thread blocked.
    waits: u64,
}

impl Usage {
    /// The calling thread's usage so far; `None` where it cannot be read
    /// (not Linux), and then the wall clock decides, as before.
    fn of_thread() -> Option<Usage> {
        #[cfg(target_os = "linux")]
        {
            // The CPU time from the thread's CPU clock (getrusage's is
            // split into user and system time by tick counts, and its sum
            // can lag and then jump by milliseconds).
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
            #[allow(unsafe_code)]
            // SAFETY: both point to valid, writable values that the calls
            // fill; `ru` was zero-initialised in case getrusage does not.
            let ru = unsafe {
                if libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) != 0
                    || libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr()) != 0
                {
                    return None;
                }
                ru.assume_init()
            };
            let cpu = Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.clamp(0, 999_999_999) as u32);
            Some(Usage { cpu, waits: ru.ru_nvcsw.max(0) as u64 })
        }
        #[cfg(not(target_os = "linux"))]
        None
    }
}

/// What a call took (see [`Recent`]), from its thread's usage before and
/// after it and its time on the wall clock.
fn took(before: Option<Usage>, after: Option<Usage>, wall: Duration) -> Duration {
    match (before, after) {
        (Some(b), Some(a)) if a.waits == b.waits => a.cpu.saturating_sub(b.cpu).min(wall),
        _ => wall,
    }
}

struct Inner {
    /// Recent calls of pinned guests, by digest (hex).
    recent: Mutex<HashMap<String, Recent>>,
    sandbox: Arc<Sandbox>,
    registry: Registry,
    /// Limits of a step that sets none (weft.toml `[limits]`).
    defaults: weft_sandbox::Limits,
    /// Where relative `path`s are resolved (the definition file's folder).
    base_dir: PathBuf,
    /// Guests by digest, so a pinned (`sha256`) step does not read its
    /// blob again.
    by_digest: Mutex<HashMap<Digest, Arc<Guest>>>,
}

impl CodeRunner {
    /// A runner over `sandbox` and `registry`, with `defaults` for steps
    /// that set no limits and relative paths resolved against `base_dir`.
    pub fn new(sandbox: Arc<Sandbox>, registry: Registry, defaults: weft_sandbox::Limits, base_dir: PathBuf) -> Self {
        CodeRunner {
            inner: Arc::new(Inner {
                recent: Mutex::default(),
                sandbox,
                registry,
                defaults,
                base_dir,
                by_digest: Mutex::default(),
            }),
            threads: Arc::new(tokio::sync::Semaphore::new(weft_engine::EngineConfig::default().max_concurrency)),
        }
    }

    /// The same runner with at most `n` guests on threads of their own at once.
    pub fn with_threads(mut self, n: usize) -> Self {
        self.threads = Arc::new(tokio::sync::Semaphore::new(n.max(1)));
        self
    }

    /// A runner with the configured sandbox, registry and `[limits]`.
    pub fn from_settings(settings: &Settings, base_dir: PathBuf) -> Result<Self, SandboxError> {
        let sandbox = Arc::new(crate::guests::sandbox(settings)?);
        Ok(Self::new(sandbox, crate::guests::registry(settings), settings.code_limits(), base_dir))
    }
}

impl Inner {
    /// Whether `code` is a pinned guest known to finish quickly.
    fn is_fast(&self, code: &CodeRef) -> bool {
        let CodeRef::Sha256(hex) = code else { return false };
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.get(hex.as_str()).is_some_and(|r| r.avg_us < FAST.as_micros() as f64)
    }

    /// Whether the guest pinned as `hex` is a loaded component (a WASI
    /// command, or a guest not loaded yet, is not).
    fn is_component(&self, hex: &str) -> bool {
        let Ok(d) = hex.parse::<Digest>() else { return false };
        let loaded = self.by_digest.lock().unwrap_or_else(|p| p.into_inner());
        loaded.get(&d).is_some_and(|g| g.kind() == weft_sandbox::GuestKindName::Component)
    }

    /// Records how long a call of `code` took (see [`Recent`]); only
    /// components are tracked, so a WASI command never runs in place.
    fn took(&self, code: &CodeRef, took: Duration) {
        let CodeRef::Sha256(hex) = code else { return };
        if !self.is_component(hex) {
            return;
        }
        let us = took.as_secs_f64() * 1e6;
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        match recent.get_mut(hex.as_str()) {
            Some(r) => r.took(us),
            None => {
                recent.insert(hex.clone(), Recent::new(us));
            }
        }
    }

    /// The loaded guest of `code`.
    fn guest(&self, code: &CodeRef) -> Result<Arc<Guest>, StepError> {
        if let CodeRef::Sha256(hex) = code
            && let Ok(d) = hex.parse::<Digest>()
            && let Some(g) = self.by_digest.lock().unwrap_or_else(|p| p.into_inner()).get(&d)
        {
            return Ok(g.clone());
        }
        let found = resolve_code(&self.registry, &self.base_dir, code).map_err(|why| {
            StepError::new(ErrorKind::Validation, format!("cannot find the step's code: {why}"), false)
        })?;
        let guest = self.sandbox.load(&found.bytes).map_err(|e| load_failure(&found.name, e))?;
        self.by_digest.lock().unwrap_or_else(|p| p.into_inner()).insert(guest.digest(), guest.clone());
        Ok(guest)
    }

    /// One attempt, on a blocking thread.
    fn run_blocking(&self, code: &CodeRef, req: &StepRequest, cancel: CancelHandle) -> Result<StepOutput, StepFailure> {
        let guest = self.guest(code)?;
        let mut limits = self.defaults.clone();
        if let Some(l) = &req.limits {
            if let Some(f) = l.fuel {
                limits.fuel = Some(f);
            }
            if let Some(mb) = l.memory_mb {
                limits.memory_bytes = (mb as usize) << 20;
            }
        }
        // The run's CPU budget: this attempt may use what is left of it.
        let run_budget_binds = match req.run_fuel_left {
            Some(0) => return Err(run_budget_spent(0)),
            Some(left) if limits.fuel.is_none_or(|f| f > left) => {
                limits.fuel = Some(left);
                true
            }
            _ => false,
        };
        let now = now_ms();
        let deadline_ms = match req.deadline_ms {
            Some(d) => {
                let left = d - now;
                if left <= 0 {
                    return Err(StepError::timeout("the attempt's deadline passed before the guest started"));
                }
                limits.timeout = Duration::from_millis(left as u64);
                d
            }
            None => now + limits.timeout.as_millis() as i64,
        };
        let inv = Invocation {
            ctx: StepContext {
                run_id: req.run.to_string(),
                step: req.step.clone(),
                attempt: req.attempt.get(),
                idempotency_key: req.idempotency_key.clone(),
                deadline_ms: deadline_ms.max(0) as u64,
            },
            input: req.input.to_string(),
            limits,
            cancel,
            observer: Some(Arc::new(ToEvents(req.events.clone()))),
        };
        let result = self.sandbox.invoke(&guest, &inv);
        if let Some(used) = result.fuel_used {
            req.events.fuel(used);
        }
        if run_budget_binds && matches!(&result.outcome, Err(e) if e.kind == GuestErrorKind::FuelExhausted) {
            return Err(run_budget_spent(req.run_fuel_left.unwrap_or(0)));
        }
        for a in &result.report.artifacts {
            // The engine's event sink has no artifacts yet: say they existed.
            req.events.log(format!("[artifact] {} ({}, {} bytes) not stored", a.name, a.mime, a.data.len()));
        }
        map_outcome(result.outcome)
    }
}

/// The error of an attempt that hit its run's CPU budget (`limits.run_fuel`).
fn run_budget_spent(left: u64) -> StepError {
    StepError::new(
        ErrorKind::FuelExhausted,
        format!(
            "the run's CPU budget is spent: this step could use only the {left} fuel left of the run's \
             `limits.run_fuel`; raise `limits.run_fuel` in the definition if the work is legitimate"
        ),
        false,
    )
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A guest that cannot be loaded: bad input (no retry helps) unless the
/// host failed (disk, cache), which a retry may fix.
fn load_failure(name: &str, e: SandboxError) -> StepError {
    if e.is_bad_input() {
        StepError::new(ErrorKind::Validation, format!("cannot load the guest `{name}`: {e}"), false)
    } else {
        StepError::new(ErrorKind::Transport, format!("host error loading the guest `{name}`: {e}"), true)
    }
}

/// Maps the sandbox's outcome to the engine's (the kinds correspond one to
/// one; a guest's own error code leads the message as `[code]`).
pub fn map_outcome(outcome: Result<GuestOutcome, GuestError>) -> Result<StepOutput, StepFailure> {
    match outcome {
        Ok(GuestOutcome::Done(v)) => Ok(StepOutput::Done(v)),
        Ok(GuestOutcome::Reject(reason)) => Ok(StepOutput::Reject(reason)),
        Err(e) => Err(map_error(e)),
    }
}

/// The engine's error for a sandbox error (see [`map_outcome`]).
pub fn map_error(e: GuestError) -> StepError {
    let kind = match e.kind {
        GuestErrorKind::GuestError => ErrorKind::GuestError,
        GuestErrorKind::Trap => ErrorKind::Trap,
        GuestErrorKind::Timeout => ErrorKind::Timeout,
        GuestErrorKind::Canceled => ErrorKind::Canceled,
        GuestErrorKind::FuelExhausted => ErrorKind::FuelExhausted,
        GuestErrorKind::MemoryLimit => ErrorKind::MemoryLimit,
        GuestErrorKind::OutputTooLarge => ErrorKind::OutputTooLarge,
        GuestErrorKind::InvalidOutput => ErrorKind::InvalidOutput,
    };
    let mut message = e.message;
    if let Some(code) = e.code {
        message = format!("[{code}] {message}");
    }
    StepError::new(kind, message, e.retryable)
}

/// The error of an attempt whose guest call panicked in the host.
fn interrupted_by_panic(payload: &(dyn std::any::Any + Send)) -> StepError {
    let what = weft_engine::runner::panic_message(payload);
    tracing::error!(error = %what, "the sandbox panicked running a guest; the attempt is interrupted");
    StepError::new(ErrorKind::Interrupted, format!("the host panicked running the guest: {what}"), true)
}

/// Guest logs and progress into the run's event log.
struct ToEvents(Arc<dyn EventSink>);

impl Observer for ToEvents {
    fn log(&self, line: &LogLine) {
        self.0.log(format!("[{}] {}", line.level.as_str(), line.message));
    }
    fn progress(&self, message: &str) {
        self.0.progress(json!({"message": message}));
    }
}

/// Owns the bridge from the engine's cancel token to the guest's cancel
/// handle: a callback the token calls on the canceling thread, so it
/// reaches a guest even while the guest holds an async worker. Dropped when
/// the call ends — normally, or because the engine stopped waiting and
/// dropped the call, in which case the guest is told to stop too (nobody
/// will read its result).
struct Bridge {
    _on_cancel: weft_engine::cancel::OnCancel,
    handle: CancelHandle,
    finished: bool,
}

impl Bridge {
    fn new(cancel: &CancelToken, handle: CancelHandle) -> Self {
        let h = handle.clone();
        Bridge { _on_cancel: cancel.on_cancel(move || h.cancel()), handle, finished: false }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if !self.finished {
            self.handle.cancel();
        }
    }
}

#[async_trait::async_trait]
impl StepRunner for CodeRunner {
    /// A pinned guest whose recent calls were all fast runs in place.
    fn finishes_in_place(&self, action: &Action) -> bool {
        matches!(action, Action::Code(c) if self.inner.is_fast(c))
    }

    async fn run(&self, req: StepRequest, cancel: CancelToken) -> Result<StepOutput, StepFailure> {
        let code = match &req.action {
            Action::Code(c) => c.clone(),
            other => {
                return Err(StepError::new(
                    ErrorKind::Validation,
                    format!("`{}` steps are not supported yet (only code steps run so far)", other.key()),
                    false,
                ));
            }
        };
        if cancel.is_canceled() {
            return Err(StepError::canceled("canceled before the guest started"));
        }
        let handle = CancelHandle::new();
        let mut bridge = Bridge::new(&cancel, handle.clone());
        let inner = self.inner.clone();
        // The call, and what it took on the thread that made it. A panic in
        // the sandbox is the host's fault: the attempt is interrupted.
        let call = |inner: &Inner, code: &CodeRef, req: &StepRequest, handle| {
            let (before, start) = (Usage::of_thread(), std::time::Instant::now());
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.run_blocking(code, req, handle)))
                .unwrap_or_else(|panic| Err(interrupted_by_panic(panic.as_ref())));
            // A call fast by the wall clock was fast: its thread's usage
            // is read again only for a long one.
            let wall = start.elapsed();
            (r, if wall < FAST { wall } else { took(before, Usage::of_thread(), wall) })
        };
        let joined = if inner.is_fast(&code) {
            Ok(call(&inner, &code, &req, handle))
        } else {
            // Waiting here is canceled by dropping this future (the engine
            // does on a cancel or a timeout); the semaphore is never closed.
            let _thread = self.threads.acquire().await.ok();
            if tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
                // The worker's other tasks move to another thread meanwhile.
                Ok(tokio::task::block_in_place(|| call(&inner, &code, &req, handle)))
            } else {
                let (inner, code) = (inner.clone(), code.clone());
                tokio::task::spawn_blocking(move || call(&inner, &code, &req, handle)).await
            }
        };
        let joined = joined.map(|(r, took)| {
            inner.took(&code, took);
            r
        });
        bridge.finished = true;
        drop(bridge);
        match joined {
            Ok(r) => r,
            Err(e) => {
                Err(StepError::new(ErrorKind::Trap, format!("internal error: the sandbox thread failed: {e}"), false))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_engine::runner::NoEvents;
    use weft_engine::{AttemptNo, RunId};

    #[test]
    fn every_sandbox_kind_maps_to_the_same_kind() {
        let cases = [
            (GuestErrorKind::GuestError, ErrorKind::GuestError),
            (GuestErrorKind::Trap, ErrorKind::Trap),
            (GuestErrorKind::Timeout, ErrorKind::Timeout),
            (GuestErrorKind::Canceled, ErrorKind::Canceled),
            (GuestErrorKind::FuelExhausted, ErrorKind::FuelExhausted),
            (GuestErrorKind::MemoryLimit, ErrorKind::MemoryLimit),
            (GuestErrorKind::OutputTooLarge, ErrorKind::OutputTooLarge),
            (GuestErrorKind::InvalidOutput, ErrorKind::InvalidOutput),
        ];
        for (from, to) in cases {
            let e = map_error(GuestError::new(from, "boom"));
            assert_eq!(e.kind, to, "{from}");
            assert_eq!(e.kind.as_str(), from.as_str(), "the JSON names agree");
            assert_eq!(e.retryable, from == GuestErrorKind::Timeout, "{from}");
            assert_eq!(e.message, "boom");
        }
        let mut g = GuestError::new(GuestErrorKind::GuestError, "no such user");
        g.code = Some("not_found".into());
        g.retryable = true;
        let e = map_error(g);
        assert_eq!((e.message.as_str(), e.retryable), ("[not_found] no such user", true));
        assert_eq!(map_outcome(Ok(GuestOutcome::Reject("r".into()))), Ok(StepOutput::Reject("r".into())));
    }

    #[derive(Default)]
    struct Collect(Mutex<Vec<String>>);
    impl EventSink for Collect {
        fn progress(&self, data: serde_json::Value) {
            self.0.lock().unwrap().push(data.to_string());
        }
        fn log(&self, line: String) {
            self.0.lock().unwrap().push(line);
        }
    }

    fn runner(dir: &std::path::Path) -> CodeRunner {
        let sandbox = Arc::new(Sandbox::new(weft_sandbox::SandboxConfig::default(), None).unwrap());
        CodeRunner::new(
            sandbox,
            Registry::new(dir, crate::guests::bundled()),
            weft_sandbox::Limits::default(),
            dir.to_path_buf(),
        )
    }

    fn request(action: Action, input: serde_json::Value, events: Arc<dyn EventSink>) -> StepRequest {
        let run: RunId = "r_0000000000000000000000000a".parse().unwrap();
        StepRequest {
            idempotency_key: format!("{run}/pick/1"),
            run,
            step: "pick".into(),
            item: None,
            attempt: AttemptNo::FIRST,
            deadline_ms: Some(now_ms() + 30_000),
            action,
            input,
            limits: None,
            run_fuel_left: None,
            transform: None,
            events,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bundled_plugin_runs_through_the_runner() {
        let dir = tempfile::tempdir().unwrap();
        let r = runner(dir.path());
        let events: Arc<Collect> = Arc::default();
        let select = Action::Code(CodeRef::Plugin("json-select".into()));
        let req = request(select.clone(), json!({"data": {"a": [1, {"b": "x"}]}, "path": "a.1.b"}), events.clone());
        assert_eq!(r.run(req, CancelToken::new()).await, Ok(StepOutput::Done(json!("x"))));

        // The same guest pinned by digest.
        let digest =
            weft_sandbox::Digest::of(weft_bundled::all().iter().find(|p| p.name == "json-select").unwrap().wasm);
        let pinned = Action::Code(CodeRef::Sha256(digest.hex()));
        let req = request(pinned, json!({"data": [5, 6], "path": "1"}), events.clone());
        assert_eq!(r.run(req, CancelToken::new()).await, Ok(StepOutput::Done(json!(6))));

        // A guest's own error, classified.
        let req = request(select.clone(), json!({"data": {}, "path": "missing"}), events.clone());
        let e = r.run(req, CancelToken::new()).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::GuestError, "{e}");
        assert!(e.message.contains("not_found"), "{e}");

        // Unknown plugins and other actions fail clearly.
        let req = request(Action::Code(CodeRef::Plugin("nope".into())), json!({}), Arc::new(NoEvents));
        let e = r.run(req, CancelToken::new()).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Validation);
        assert!(e.message.contains("unknown plugin `nope`"), "{e}");
        let req = request(Action::Return, json!({}), Arc::new(NoEvents));
        let e = r.run(req, CancelToken::new()).await.unwrap_err();
        assert!(e.message.contains("`return` steps are not supported yet"), "{e}");

        // A canceled token stops the attempt; a passed deadline times it out.
        let cancel = CancelToken::new();
        cancel.cancel();
        let req = request(select.clone(), json!({"data": 1, "path": ""}), Arc::new(NoEvents));
        assert_eq!(r.run(req, cancel).await.unwrap_err().kind, ErrorKind::Canceled);
        let mut req = request(select, json!({"data": 1, "path": ""}), Arc::new(NoEvents));
        req.deadline_ms = Some(now_ms() - 1);
        assert_eq!(r.run(req, CancelToken::new()).await.unwrap_err().kind, ErrorKind::Timeout);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn canceling_interrupts_a_running_guest_and_limits_apply() {
        let dir = tempfile::tempdir().unwrap();
        let r = runner(dir.path());
        let hostile = Action::Code(CodeRef::Path(weft_test_artifacts::HOSTILE.into()));
        let events: Arc<Collect> = Arc::default();

        let mut req = request(hostile.clone(), json!({"mode": "loop"}), events.clone());
        req.limits = Some(weft_model::Limits { fuel: Some(100_000_000_000), memory_mb: None });
        let cancel = CancelToken::new();
        let c2 = cancel.clone();
        let started = std::time::Instant::now();
        let fire = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            c2.cancel();
        });
        let e = r.run(req, cancel).await.unwrap_err();
        fire.await.unwrap();
        assert_eq!(e.kind, ErrorKind::Canceled, "{e}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());

        let mut req = request(hostile.clone(), json!({"mode": "loop"}), events.clone());
        req.limits = Some(weft_model::Limits { fuel: Some(1_000_000), memory_mb: None });
        assert_eq!(r.run(req, CancelToken::new()).await.unwrap_err().kind, ErrorKind::FuelExhausted);

        let mut req = request(hostile, json!({"mode": "alloc"}), events.clone());
        req.limits = Some(weft_model::Limits { fuel: None, memory_mb: Some(16) });
        assert_eq!(r.run(req, CancelToken::new()).await.unwrap_err().kind, ErrorKind::MemoryLimit);
    }
    #[test]
    fn only_pinned_guests_with_fast_recent_calls_run_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let r = runner(dir.path());
        // A loaded component, pinned by digest.
        let digest =
            weft_sandbox::Digest::of(weft_bundled::all().iter().find(|p| p.name == "json-select").unwrap().wasm);
        let pinned = CodeRef::Sha256(digest.hex());
        let plugin = CodeRef::Plugin("json-select".into());
        r.inner.took(&pinned, Duration::from_micros(40));
        assert!(!r.inner.is_fast(&pinned), "unknown (not loaded) guests get a thread of their own");
        r.inner.guest(&plugin).unwrap();
        let us = Duration::from_micros;
        r.inner.took(&pinned, us(40));
        r.inner.took(&plugin, us(40));
        assert!(r.inner.is_fast(&pinned));
        assert!(!r.inner.is_fast(&plugin), "only pinned code is tracked");
        // One slow call sends it back to a thread at once ...
        r.inner.took(&pinned, us(5000));
        assert!(!r.inner.is_fast(&pinned));
        // ... and it takes a run of fast calls to come back.
        r.inner.took(&pinned, us(40));
        assert!(!r.inner.is_fast(&pinned));
        for _ in 0..20 {
            r.inner.took(&pinned, us(40));
        }
        assert!(r.inner.is_fast(&pinned));
    }

    /// What a call took: its CPU time when the thread never blocked (time
    /// preempted is not the guest's), the wall clock when it did.
    #[test]
    fn a_call_took_its_cpu_time_unless_its_thread_waited() {
        let ms = Duration::from_millis;
        let at = |cpu: u64, waits: u64| Some(Usage { cpu: ms(cpu), waits });
        assert_eq!(took(at(10, 3), at(12, 3), ms(40)), ms(2), "preempted for 38 ms");
        assert_eq!(took(at(10, 3), at(12, 4), ms(40)), ms(40), "waited");
        assert_eq!(took(at(10, 3), at(50, 3), ms(40)), ms(40), "never more than the wall clock");
        assert_eq!(took(None, at(12, 3), ms(40)), ms(40), "unknown: the wall clock");

        // The thread's real usage: sleeping is a wait, computing is not.
        let before = Usage::of_thread().expect("getrusage(RUSAGE_THREAD) on Linux");
        std::thread::sleep(ms(20));
        let slept = Usage::of_thread().unwrap();
        assert!(slept.waits > before.waits, "{before:?} {slept:?}");
        assert!(slept.cpu - before.cpu < ms(10), "{before:?} {slept:?}");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < ms(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let computed = Usage::of_thread().unwrap();
        assert!(computed.cpu - slept.cpu >= ms(5), "{slept:?} {computed:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fast_guest_that_turns_slow_in_place_is_still_canceled() {
        let dir = tempfile::tempdir().unwrap();
        let r = runner(dir.path());
        let bytes = std::fs::read(weft_test_artifacts::HOSTILE).unwrap();
        let hostile = CodeRef::Sha256(weft_sandbox::Digest::of(&bytes).hex());
        // Load it (by path) so the digest resolves, and call it fast.
        let by_path = Action::Code(CodeRef::Path(weft_test_artifacts::HOSTILE.into()));
        let _ = r.run(request(by_path, json!({"mode": "ok"}), Arc::new(NoEvents)), CancelToken::new()).await.unwrap();
        r.inner.took(&hostile, Duration::from_micros(20));
        assert!(r.inner.is_fast(&hostile));

        let mut req = request(Action::Code(hostile.clone()), json!({"mode": "loop"}), Arc::new(NoEvents));
        req.limits = Some(weft_model::Limits { fuel: Some(100_000_000_000), memory_mb: None });
        let cancel = CancelToken::new();
        let c2 = cancel.clone();
        let started = std::time::Instant::now();
        let fire = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            c2.cancel();
        });
        // On a worker thread, as the engine calls it.
        let r2 = r.clone();
        let e = tokio::spawn(async move { r2.run(req, cancel).await }).await.unwrap().unwrap_err();
        fire.join().unwrap();
        assert_eq!(e.kind, ErrorKind::Canceled, "{e}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(!r.inner.is_fast(&hostile), "its next call gets a thread of its own");
    }

    /// A WASI command's stdio goes through wasmtime-wasi's blocking bridge,
    /// which panics on an async worker: however fast its calls, a command
    /// is never run in place (the cause of chains of command steps that
    /// hung: in a debug build its calls are too slow to count as fast, so
    /// the e2e chains cannot show it; this test can).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_command_never_runs_in_place_however_fast() {
        let dir = tempfile::tempdir().unwrap();
        let r = runner(dir.path());
        let bytes = std::fs::read(weft_test_artifacts::HOSTILE_COMMAND).unwrap();
        let pinned = CodeRef::Sha256(weft_sandbox::Digest::of(&bytes).hex());
        let by_path = Action::Code(CodeRef::Path(weft_test_artifacts::HOSTILE_COMMAND.into()));
        let ok = json!({"mode": "ok", "echo": 1});
        assert!(matches!(r.run(request(by_path, ok.clone(), Arc::new(NoEvents)), CancelToken::new()).await, Ok(_)));
        for _ in 0..30 {
            r.inner.took(&pinned, Duration::from_micros(5));
        }
        assert!(!r.inner.is_fast(&pinned), "a command was taken for a guest that may run in place");
        // Called on a worker thread, as the engine calls it, many times.
        for k in 0..20 {
            let (r2, input) = (r.clone(), json!({"mode": "ok", "echo": k}));
            let req = request(Action::Code(pinned.clone()), input, Arc::new(NoEvents));
            let out = tokio::spawn(async move { r2.run(req, CancelToken::new()).await }).await.unwrap();
            match out {
                Ok(StepOutput::Done(v)) => assert_eq!(v["echo"], json!(k)),
                other => panic!("call {k}: {other:?}"),
            }
        }
        // A component that is fast does run in place.
        let bytes = std::fs::read(weft_test_artifacts::HOSTILE).unwrap();
        let component = CodeRef::Sha256(weft_sandbox::Digest::of(&bytes).hex());
        let by_path = Action::Code(CodeRef::Path(weft_test_artifacts::HOSTILE.into()));
        let _ = r.run(request(by_path, json!({"mode": "ok"}), Arc::new(NoEvents)), CancelToken::new()).await.unwrap();
        r.inner.took(&component, Duration::from_micros(5));
        assert!(r.inner.is_fast(&component));
    }

    /// A call past the threads a runner may use waits for one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_on_threads_wait_for_a_free_one() {
        let dir = tempfile::tempdir().unwrap();
        let r = runner(dir.path()).with_threads(1);
        let by_path = Action::Code(CodeRef::Path(weft_test_artifacts::HOSTILE.into()));
        // A guest that loops until canceled holds the only thread.
        let mut req = request(by_path.clone(), json!({"mode": "loop"}), Arc::new(NoEvents));
        req.limits = Some(weft_model::Limits { fuel: Some(100_000_000_000), memory_mb: None });
        let cancel = CancelToken::new();
        let (r2, c2) = (r.clone(), cancel.clone());
        let looping = tokio::spawn(async move { r2.run(req, c2).await });
        for _ in 0..5000 {
            if r.threads.available_permits() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(r.threads.available_permits(), 0, "the looping guest never took the thread");
        // A short call waits for it (it takes ~1 ms once it has a thread).
        let r3 = r.clone();
        let mut short = tokio::spawn(async move {
            r3.run(request(by_path, json!({"mode": "ok"}), Arc::new(NoEvents)), CancelToken::new()).await
        });
        assert!(tokio::time::timeout(Duration::from_millis(300), &mut short).await.is_err(), "it did not wait");
        cancel.cancel();
        assert_eq!(looping.await.unwrap().unwrap_err().kind, ErrorKind::Canceled);
        let done = tokio::time::timeout(Duration::from_secs(10), short).await.expect("it never got the thread");
        assert!(matches!(done.unwrap(), Ok(StepOutput::Done(_))));
        assert_eq!(r.threads.available_permits(), 1);
    }
}
