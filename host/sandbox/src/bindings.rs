//! The `bindgen!` of the `weft:step/step` world, twice: [`sync`] for plain
//! calls (`describe`, which must work from any thread, async or not) and
//! [`asynk`] for `run`, called with `*_async` so that a deadline or a
//! cancel can drop a guest parked in a host call. And the host side of its
//! `host` interface (log, progress, artifact), the same for both.

use crate::component_state::ComponentState;
use crate::report::Level;

/// Plain calls.
pub(crate) mod sync {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "weft:step/step",
    });
}

/// `*_async` calls (the name `async` is a keyword).
pub(crate) mod asynk {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "weft:step/step",
        exports: { default: async },
    });
}

/// The `host` interface of one set of bindings: log lines, progress and
/// artifacts go to the invocation's collector.
macro_rules! host_interface {
    ($m:ident) => {
        impl $m::weft::step::types::Host for ComponentState {}

        impl $m::weft::step::host::Host for ComponentState {
            fn log(&mut self, level: $m::weft::step::host::Level, message: String) {
                use $m::weft::step::host::Level as L;
                let level = match level {
                    L::Trace => Level::Trace,
                    L::Debug => Level::Debug,
                    L::Info => Level::Info,
                    L::Warn => Level::Warn,
                    L::Error => Level::Error,
                };
                self.collector.log(level, message);
            }

            fn progress(&mut self, message: String) {
                self.collector.progress(message, None);
            }

            fn progress_data(&mut self, message: String, data: String) {
                self.collector.progress_text(message, &data);
            }

            fn artifact(&mut self, name: String, mime: String, data: Vec<u8>) {
                self.collector.artifact(name, mime, data);
            }
        }
    };
}

host_interface!(sync);
host_interface!(asynk);
