//! Paths of the guests compiled from source for the test suite and the
//! benches: `HOSTILE` (a component that misbehaves on request, and computes
//! fib for benches), `HOSTILE_COMMAND` (a WASI command that does likewise)
//! and `EXAMPLE_RUST_GUEST` (examples/rust-guest, built with the SDK).

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
