//! Process-wide settings every weft process (the binary, its benches)
//! makes first thing.

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
