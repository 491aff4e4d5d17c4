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

/// Turns transparent huge pages off for this process (Linux; elsewhere a
/// no-op). Called first thing by `main` of the binary and the benches.
///
/// Where the kernel backs all anonymous memory with huge pages
/// (`transparent_hugepage=always`, common), each page the allocator takes
/// afresh after giving memory back is a 2 MiB page zeroed in the fault:
/// with many runs in flight the heap breathes by a few MiB per burst, and
/// that zeroing was ~7% of W3's CPU. With 4 KiB pages W3 takes ~10% less
/// CPU per run (measured A/B, interleaved). It is what mimalloc does itself
/// when started with `MIMALLOC_ALLOW_THP=0`, made the default here.
pub fn small_pages() {
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    // SAFETY: PR_SET_THP_DISABLE takes an integer flag and no pointers; it
    // only changes which pages later faults of this process get.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

pub mod app;
pub mod bench;
pub mod cli;
pub mod config;
pub mod guests;
pub mod logging;
pub mod lookup;
pub mod online;
pub mod proxy;
pub mod recording;
pub mod runner;
pub mod serve;
pub mod servers;
pub mod tool_runner;

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn small_pages_turns_huge_pages_off_for_the_process() {
        super::small_pages();
        #[allow(unsafe_code)]
        // SAFETY: PR_GET_THP_DISABLE reads a flag; no pointers.
        let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(disabled, 1);
    }
}
