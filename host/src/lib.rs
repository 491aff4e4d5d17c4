//! weft: a durable workflow engine whose code steps are sandboxed
//! WebAssembly guests and whose tool steps are MCP calls.
//!
//! This crate is the `weft` binary's library: configuration, the wiring of
//! the sandbox with the bundled plugins, and the command-line interface.
//! The pieces live in their own crates: `weft-sandbox` (wasmtime),
//! `weft-model` (definitions), `weft-engine` (the scheduler) and
//! `weft-store-sqlite` (the store).

/// The allocator of everything that links weft (the binary, its benches
/// and tests): with many runs in flight the engine allocates from both
/// async workers at once, and glibc's malloc then spends about a fifth of
/// the time in its own locks and free lists (W3 throughput +12% measured).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod app;
pub mod bench;
pub mod cli;
pub mod config;
pub mod guests;
pub mod lookup;
pub mod online;
pub mod proxy;
pub mod recording;
pub mod runner;
pub mod serve;
pub mod servers;
pub mod tool_runner;
