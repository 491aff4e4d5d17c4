//! [`CodeRunner`]: the engine's [`StepRunner`] for code steps, over the
//! sandbox. It resolves the step's guest (a plugin name, a file, or — for
//! runs that pinned their code at creation — a digest), loads it (compiled
//! once per digest), invokes it with the step's limits and the attempt's
//! deadline, forwards its logs and progress to the run's event log, and
//! maps the outcome to the engine's vocabulary.
//!
//! Where a guest runs: on the async worker that polls the attempt. An
//! invocation is async (`Sandbox::invoke_async`): the guest yields to the
//! executor at every epoch tick (2 ms), and one parked in a host call (a
//! WASI sleep) holds no thread at all and is dropped at its deadline or
//! cancel. So no guest needs a thread of its own, and a guest whose recent
//! calls were all fast (see [`FAST`]) is even polled in place by its run's
//! driver (`finishes_in_place`): no task spawn for a call of ~15 µs.
//!
//! A panic while a guest runs is caught and reported as an interrupted
//! attempt (the engine runs it again, and fails it as `crashed` if it keeps
//! happening), never a dead thread and a hung run.
//!
//! Other actions (tool, ...) are refused with a failure saying so: tool
//! steps get their own runner with the MCP client pool.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weft_engine::clock::system_now_ms as now_ms;

use futures::FutureExt;
use serde_json::json;
use tracing::Instrument as _;
use weft_engine::{CancelToken, ErrorKind, EventSink, StepError, StepFailure, StepOutput, StepRequest, StepRunner};
use weft_model::{Action, CodeRef};
use weft_sandbox::registry::Registry;
use weft_sandbox::{
    CancelHandle, Digest, Guest, GuestError, GuestErrorKind, GuestOutcome, Invocation, LogLine, Observer, Sandbox,
    SandboxError, StepContext,
};

use crate::config::Settings;
use crate::guests::resolve_code;

/// Runs code steps in the sandbox.
#[derive(Clone)]
pub struct CodeRunner {
    inner: Arc<Inner>,
}

/// A pinned guest whose recent calls took less than this (a decaying
/// average; see `Recent` for how a slow call raises it) runs in place.
pub const FAST: Duration = Duration::from_micros(300);

/// How long a pinned guest's recent calls took, on the wall clock.
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
        }
    }

    /// A runner with the configured sandbox, registry and `[limits]`.
    pub fn from_settings(settings: &Settings, base_dir: PathBuf) -> Result<Self, SandboxError> {
        let sandbox = crate::guests::sandbox(settings)?;
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

    /// Records how long a call of `code` took (see [`Recent`]).
    fn took(&self, code: &CodeRef, took: Duration) {
        let CodeRef::Sha256(hex) = code else { return };
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
        // A stored guest's bytes are read only if its compiled artifact is
        // not cached (see `GuestBytes`).
        let guest = self.sandbox.load_pinned(found.digest, found.bytes).map_err(|e| load_failure(&found.name, e))?;
        self.by_digest.lock().unwrap_or_else(|p| p.into_inner()).insert(guest.digest(), guest.clone());
        Ok(guest)
    }

    /// One attempt.
    async fn invoke(&self, code: &CodeRef, req: &StepRequest, cancel: CancelHandle) -> Result<StepOutput, StepFailure> {
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
        let span = crate::telemetry::guest_span(req, &guest.digest().hex());
        let inv = Invocation {
            ctx: StepContext {
                run_id: req.run.to_string(),
                step: req.step.clone(),
                attempt: req.attempt.get(),
                idempotency_key: req.idempotency_key.clone(),
                deadline_ms: deadline_ms.max(0) as u64,
                traceparent: span.in_scope(|| crate::telemetry::traceparent_here(req.trace.as_deref())),
            },
            input: req.input.to_string(),
            limits,
            cancel,
            observer: Some(Arc::new(ToEvents(req.events.clone()))),
            priority: req.priority,
        };
        let result = self.sandbox.invoke_async(&guest, &inv).instrument(span.clone()).await;
        if let Some(used) = result.fuel_used {
            req.events.fuel(used);
            span.record("fuel", used);
        }
        if weft_engine::trace::metrics_on() {
            if let Some(used) = result.fuel_used {
                metrics::histogram!("weft_guest_fuel").record(used as f64);
            }
            metrics::histogram!("weft_guest_duration_seconds").record(result.elapsed.as_secs_f64());
            metrics::histogram!("weft_guest_queued_seconds").record(result.queued.as_secs_f64());
            if let Some(peak) = result.memory_peak {
                metrics::histogram!("weft_guest_memory_bytes").record(peak as f64);
            }
        }
        if run_budget_binds && matches!(&result.outcome, Err(e) if e.kind == GuestErrorKind::FuelExhausted) {
            return Err(run_budget_spent(req.run_fuel_left.unwrap_or(0)));
        }
        for a in result.report.artifacts {
            req.events.artifact(a.name, a.mime, a.data);
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
    fn progress(&self, message: &str, data: Option<&serde_json::Value>) {
        self.0.progress(match data {
            Some(d) => json!({"message": message, "data": d}),
            None => json!({"message": message}),
        });
    }
    fn queued(&self) {
        self.0.queued();
    }
    fn admitted(&self, waited: Duration) {
        self.0.admitted(waited);
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
        // A panic in the sandbox is the host's fault: the attempt is interrupted.
        let start = std::time::Instant::now();
        let r = AssertUnwindSafe(self.inner.invoke(&code, &req, handle))
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| Err(interrupted_by_panic(panic.as_ref())));
        self.inner.took(&code, start.elapsed());
        bridge.finished = true;
        drop(bridge);
        r
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
            priority: 0,
            input,
            limits: None,
            run_fuel_left: None,
            transform: None,
            events,
            trace: None,
            answer: None,
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
        // A guest pinned by digest.
        let digest =
            weft_sandbox::Digest::of(weft_bundled::all().iter().find(|p| p.name == "json-select").unwrap().wasm);
        let pinned = CodeRef::Sha256(digest.hex());
        let plugin = CodeRef::Plugin("json-select".into());
        assert!(!r.inner.is_fast(&pinned), "a guest not called yet is not known to be fast");
        let us = Duration::from_micros;
        r.inner.took(&pinned, us(40));
        r.inner.took(&plugin, us(40));
        assert!(r.inner.is_fast(&pinned));
        assert!(!r.inner.is_fast(&plugin), "only pinned code is tracked");
        // One slow call makes it a task of its own at once ...
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
        assert!(!r.inner.is_fast(&hostile), "its next call is a task of its own");
    }

    /// A WASI command's stdio once went through wasmtime-wasi's blocking
    /// bridge, which panics on an async worker: a command that ran in place
    /// (its recent calls fast) hung its run. Invocations are async now: a
    /// command pinned and fast runs in place on a worker, many times over.
    /// (In a debug build its calls are too slow to count as fast, so the
    /// e2e chains cannot show this; this test marks it fast by hand.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fast_command_runs_in_place_on_a_worker() {
        let dir = tempfile::tempdir().unwrap();
        let r = runner(dir.path());
        let bytes = std::fs::read(weft_test_artifacts::HOSTILE_COMMAND).unwrap();
        let pinned = CodeRef::Sha256(weft_sandbox::Digest::of(&bytes).hex());
        let by_path = Action::Code(CodeRef::Path(weft_test_artifacts::HOSTILE_COMMAND.into()));
        let ok = json!({"mode": "ok", "echo": 1});
        assert!(r.run(request(by_path, ok.clone(), Arc::new(NoEvents)), CancelToken::new()).await.is_ok());
        for _ in 0..30 {
            r.inner.took(&pinned, Duration::from_micros(5));
        }
        assert!(r.finishes_in_place(&Action::Code(pinned.clone())));
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
    }

    /// A guest asleep in a host call holds no worker: with both workers'
    /// worth of sleepers parked, a short call still runs at once, and the
    /// sleepers meet their deadline.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleeping_guests_hold_no_worker() {
        let dir = tempfile::tempdir().unwrap();
        let r = runner(dir.path());
        let by_path = Action::Code(CodeRef::Path(weft_test_artifacts::HOSTILE.into()));
        let mut sleepers = vec![];
        for _ in 0..4 {
            let mut req = request(by_path.clone(), json!({"mode": "sleep", "n": 3600}), Arc::new(NoEvents));
            req.deadline_ms = Some(now_ms() + 5000);
            let r2 = r.clone();
            sleepers.push(tokio::spawn(async move { r2.run(req, CancelToken::new()).await }));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = std::time::Instant::now();
        let out = r.run(request(by_path, json!({"mode": "ok"}), Arc::new(NoEvents)), CancelToken::new()).await;
        assert!(matches!(out, Ok(StepOutput::Done(_))), "{out:?}");
        assert!(started.elapsed() < Duration::from_millis(2500), "waited for the sleepers: {:?}", started.elapsed());
        for s in sleepers {
            assert_eq!(s.await.unwrap().unwrap_err().kind, ErrorKind::Timeout);
        }
    }
}
