//! What a component guest's store holds: its WASI context and resources,
//! its limits and what it reports. A leaf: the weft host interface
//! (`bindings.rs`) is implemented on it, the component guest
//! (`component.rs`) builds it.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::invoke;
use crate::report::Collector;

/// What a component guest's store holds.
pub(crate) struct ComponentState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limits: invoke::Limiter,
    pub(crate) collector: Collector,
}

impl WasiView for ComponentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}
