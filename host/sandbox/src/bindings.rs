//! The one `bindgen!` of the `weft:step/step` world, and the host side of
//! its `host` interface (log, progress, artifact).

use crate::component::ComponentState;
use crate::report::Level;

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "weft:step/step",
});

impl weft::step::types::Host for ComponentState {}

impl weft::step::host::Host for ComponentState {
    fn log(&mut self, level: weft::step::host::Level, message: String) {
        use weft::step::host::Level as L;
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
        self.collector.progress(message);
    }

    fn artifact(&mut self, name: String, mime: String, data: Vec<u8>) {
        self.collector.artifact(name, mime, data);
    }
}
