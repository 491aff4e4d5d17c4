//! Component guests: WebAssembly components that target the
//! `weft:step/step` world. Prepared once per guest (an `InstancePre` per
//! linker), instantiated in a fresh store for every invocation. `run` goes
//! through the async linker (WASI 0.2's async host calls, `*_async`
//! calls) so a deadline or a cancel drops a guest parked in a host call;
//! `describe` through the plain one, so it works from any thread.

use std::sync::Arc;

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};

use crate::bindings::{asynk, sync};
use crate::component_state::ComponentState;
use crate::error::{GuestError, GuestErrorKind, LoadError, SandboxError};
use crate::invoke::{self, Armed, Calls, Invocation};
use crate::pipes::CappedPipe;
use crate::report::{Collector, Level};
use crate::{GuestOutcome, Metadata};

/// The linkers shared by every component guest: all of WASI 0.2 (guests
/// from componentize-py import sockets; the context denies them) plus the
/// weft host interface; one with WASI's async host calls, one plain.
pub(crate) struct Linkers {
    asynk: Linker<ComponentState>,
    sync: Linker<ComponentState>,
}

pub(crate) fn linker(engine: &Engine) -> Result<Linkers, SandboxError> {
    let host = |e: wasmtime::Error| crate::HostError::Engine(format!("{e:#}"));
    let mut asynk = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut asynk).map_err(host)?;
    asynk::Step::add_to_linker::<_, HasSelf<_>>(&mut asynk, |s| s).map_err(host)?;
    let mut sync = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut sync).map_err(host)?;
    sync::Step::add_to_linker::<_, HasSelf<_>>(&mut sync, |s| s).map_err(host)?;
    Ok(Linkers { asynk, sync })
}

/// A prepared component guest.
pub(crate) struct ComponentGuest {
    pre: asynk::StepPre<ComponentState>,
    describe: sync::StepPre<ComponentState>,
}

impl ComponentGuest {
    pub(crate) fn prepare(linkers: &Linkers, component: &Component) -> Result<Self, SandboxError> {
        let wrong = |e: wasmtime::Error| LoadError::WrongWorld(format!("{e:#}"));
        let pre = asynk::StepPre::new(linkers.asynk.instantiate_pre(component).map_err(wrong)?).map_err(wrong)?;
        let describe = sync::StepPre::new(linkers.sync.instantiate_pre(component).map_err(wrong)?).map_err(wrong)?;
        Ok(ComponentGuest { pre, describe })
    }

    fn store(&self, engine: &Engine, inv: &Invocation) -> (Store<ComponentState>, CappedPipe) {
        // Stdout and stderr of a component guest are log lines; they share
        // the log budget through one pipe.
        let out = CappedPipe::new(inv.limits.log_bytes);
        let wasi = wasmtime_wasi::WasiCtxBuilder::new()
            .stdout(out.clone())
            .stderr(out.clone())
            .envs(inv.ctx.traceparent.as_ref().map(|t| ("TRACEPARENT", t)).as_slice())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        let state = ComponentState {
            wasi,
            table: ResourceTable::new(),
            limits: invoke::store_limits(&inv.limits),
            collector: Collector::new(inv.limits.log_bytes, inv.limits.artifact_bytes, inv.observer.clone()),
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limits);
        (store, out)
    }

    pub(crate) fn describe(&self, engine: &Engine) -> Result<Metadata, LoadError> {
        let inv = Invocation::describe();
        let (mut store, _) = self.store(engine, &inv);
        let _armed = Armed::arm(&mut store, &inv, Calls::Sync).map_err(|e| LoadError::Describe(e.message))?;
        let step = self.describe.instantiate(&mut store).map_err(|e| LoadError::Describe(format!("{e:#}")))?;
        let m = step.call_describe(&mut store).map_err(|e| LoadError::Describe(format!("{e:#}")))?;
        let schema = |s: Option<String>, which: &str| -> Result<Option<serde_json::Value>, LoadError> {
            s.map(|t| {
                serde_json::from_str(&t)
                    .map_err(|e| LoadError::Describe(format!("its {which} schema is not valid JSON: {e}")))
            })
            .transpose()
        };
        Ok(Metadata {
            name: m.name,
            description: m.description,
            version: m.version,
            kind: crate::GuestKindName::Component,
            input_schema: schema(m.input_schema, "input")?,
            output_schema: schema(m.output_schema, "output")?,
        })
    }

    pub(crate) async fn invoke(
        &self,
        engine: &Engine,
        inv: &Invocation,
        calls: Calls,
    ) -> (Result<GuestOutcome, GuestError>, Collector) {
        let (mut store, out) = self.store(engine, inv);
        let result = self.call(&mut store, inv, calls).await;
        let (text, _) = out.take();
        let mut collector = std::mem::replace(&mut store.data_mut().collector, Collector::new(0, 0, None));
        collector.fuel_used = invoke::fuel_used(&store, inv);
        collector.memory_peak = Some(store.data().limits.peak as u64);
        collector.log_text(Level::Info, &text);
        (result, collector)
    }

    async fn call(
        &self,
        store: &mut Store<ComponentState>,
        inv: &Invocation,
        calls: Calls,
    ) -> Result<GuestOutcome, GuestError> {
        let armed = Armed::arm(store, inv, calls)?;
        let ctx = asynk::Context {
            run_id: inv.ctx.run_id.clone(),
            step: inv.ctx.step.clone(),
            attempt: inv.ctx.attempt,
            idempotency_key: inv.ctx.idempotency_key.clone(),
            deadline_ms: inv.ctx.deadline_ms,
        };
        let step = armed.bounded(self.pre.instantiate_async(&mut *store)).await?;
        let result = armed.bounded(step.call_run(&mut *store, &ctx, &inv.input)).await?;
        match result {
            Ok(asynk::Outcome::Done(text)) => invoke::parse_output(text.as_bytes(), false, &inv.limits),
            Ok(asynk::Outcome::Reject(reason)) => Ok(GuestOutcome::Reject(reason)),
            Err(e) => Err(GuestError {
                kind: GuestErrorKind::GuestError,
                message: e.message,
                retryable: e.retryable,
                code: Some(e.code),
            }),
        }
    }
}

#[allow(dead_code)]
fn _assert_send(_: Arc<ComponentGuest>) {}
