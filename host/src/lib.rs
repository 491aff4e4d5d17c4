//! weft: a durable workflow engine whose code steps are sandboxed
//! WebAssembly guests and whose tool steps are MCP calls.
//!
//! This crate is the `weft` binary's library: configuration, the wiring of
//! the sandbox with the bundled plugins, and the command-line interface.
//! The pieces live in their own crates: `weft-sandbox` (wasmtime),
//! `weft-model` (definitions), `weft-engine` (the scheduler) and
//! `weft-store-sqlite` (the store).

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
