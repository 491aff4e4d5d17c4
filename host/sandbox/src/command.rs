//! WASI-command guests: core modules with `_start`, any language that
//! targets WASI preview 1. The input arrives on stdin, the result is read
//! from stdout, stderr lines become log lines, a non-zero exit is a step
//! error (retried by a retry policy, unless it is 65: `envelope`), stdout
//! may carry a `$weft` envelope (an error of the guest's own, artifacts),
//! and the context arrives as the only environment variables
//! (`WEFT_RUN_ID`, `WEFT_STEP`, `WEFT_ATTEMPT`, `WEFT_IDEMPOTENCY_KEY`,
//! `WEFT_DEADLINE_MS`).

use wasmtime::{Engine, InstancePre, Linker, Module, Store};
use wasmtime_wasi::I32Exit;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;

use crate::error::{GuestError, GuestErrorKind, LoadError, SandboxError};
use crate::invoke::{self, Armed, Calls, Invocation};
use crate::pipes::CappedPipe;
use crate::report::{Collector, Level};
use crate::{GuestOutcome, envelope};

/// What a command guest's store holds.
pub(crate) struct CommandState {
    wasi: WasiP1Ctx,
    limits: invoke::Limiter,
}

/// The linker shared by every command guest: WASI preview 1 only, with
/// its async host calls, so a deadline or a cancel drops a command parked
/// in one (a sleep: `poll_oneoff`) instead of waiting it out.
pub(crate) fn linker(engine: &Engine) -> Result<Linker<CommandState>, SandboxError> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |s: &mut CommandState| &mut s.wasi)
        .map_err(|e| crate::HostError::Engine(format!("{e:#}")))?;
    Ok(linker)
}

/// A prepared command guest.
pub(crate) struct CommandGuest {
    pre: InstancePre<CommandState>,
}

impl CommandGuest {
    pub(crate) fn prepare(linker: &Linker<CommandState>, module: &Module) -> Result<Self, SandboxError> {
        if module.get_export("_start").is_none() {
            return Err(LoadError::NotCommand("it has no `_start` export (is it a library/reactor?)".into()).into());
        }
        let pre = linker.instantiate_pre(module).map_err(|e| LoadError::NotCommand(format!("{e:#}")))?;
        Ok(CommandGuest { pre })
    }

    pub(crate) async fn invoke(
        &self,
        engine: &Engine,
        inv: &Invocation,
        calls: Calls,
    ) -> (Result<GuestOutcome, GuestError>, Collector) {
        let stdout = CappedPipe::new(inv.limits.output_bytes);
        let stderr = CappedPipe::new(inv.limits.log_bytes);
        let mut b = wasmtime_wasi::WasiCtxBuilder::new();
        b.stdin(MemoryInputPipe::new(inv.input.clone().into_bytes()))
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .arg("guest")
            .env("WEFT_RUN_ID", &inv.ctx.run_id)
            .env("WEFT_STEP", &inv.ctx.step)
            .env("WEFT_ATTEMPT", inv.ctx.attempt.to_string())
            .env("WEFT_IDEMPOTENCY_KEY", &inv.ctx.idempotency_key)
            .env("WEFT_DEADLINE_MS", inv.ctx.deadline_ms.to_string())
            .envs(inv.ctx.traceparent.as_ref().map(|t| ("TRACEPARENT", t)).as_slice())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        let state = CommandState { wasi: b.build_p1(), limits: invoke::store_limits(&inv.limits) };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limits);

        let exit = self.run(&mut store, inv, calls).await;
        let (err_text, err_overflow) = stderr.take();
        let mut collector = Collector::new(inv.limits.log_bytes, inv.limits.artifact_bytes, inv.observer.clone());
        collector.fuel_used = invoke::fuel_used(&store, inv);
        collector.memory_peak = Some(store.data().limits.peak as u64);
        collector.log_text(Level::Info, &err_text);
        if err_overflow {
            collector.log(Level::Warn, crate::report::TRUNCATED_MARKER.to_string());
        }
        let (out, out_overflow) = stdout.take();
        let result = match exit {
            // A flood of output is the story, however the guest ended.
            _ if out_overflow => invoke::parse_output(&out, true, &inv.limits),
            Ok(0) => match invoke::parse_output(&out, false, &inv.limits) {
                Ok(GuestOutcome::Done(v)) => envelope::unwrap(v, &mut collector),
                other => other,
            },
            // A non-zero exit may still carry the guest's own error.
            Ok(code) => match serde_json::from_slice::<serde_json::Value>(&out) {
                Ok(v) if v.get("$weft").is_some() => envelope::unwrap(v, &mut collector)
                    .and_then(|_| Err(envelope::exit_error(code, &last_lines(&err_text, 5)))),
                _ => Err(envelope::exit_error(code, &last_lines(&err_text, 5))),
            },
            Err(e) => Err(e),
        };
        (result, collector)
    }

    /// Runs `_start`; the exit code, or a classified failure.
    async fn run(&self, store: &mut Store<CommandState>, inv: &Invocation, calls: Calls) -> Result<i32, GuestError> {
        let armed = Armed::arm(store, inv, calls)?;
        let instance = armed.bounded(self.pre.instantiate_async(&mut *store)).await?;
        let start = instance
            .get_typed_func::<(), ()>(&mut *store, "_start")
            .map_err(|e| GuestError::new(GuestErrorKind::Trap, format!("{e:#}")))?;
        // An exit is an error of `call_async`, not a failure: let it through.
        let call = async { Ok(start.call_async(&mut *store, ()).await) };
        match armed.bounded(call).await? {
            Ok(()) => Ok(0),
            Err(e) => match e.downcast_ref::<I32Exit>() {
                Some(I32Exit(code)) => Ok(*code),
                None => Err(armed.classify(&e)),
            },
        }
    }
}

fn last_lines(text: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(text);
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}
