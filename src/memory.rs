//! Handing freed memory back to the system after a large input was
//! refused. The binary's allocator, mimalloc, keeps the pages a thread
//! freed for that thread's next allocations; a reload task that refused a
//! large config and then went quiet kept its peak resident (113 MiB where
//! it was 38 MiB before, in tests/server/memory.rs).

/// Returns the calling thread's free pages (and abandoned ones) to the
/// system.
#[allow(unsafe_code)]
pub fn give_back() {
    // SAFETY: mi_collect takes no arguments to trust and only walks
    // mimalloc's own heaps; it may be called from any thread at any time,
    // also where mimalloc is not the global allocator (its heaps are then
    // empty, as in this crate's own test binaries).
    unsafe { libmimalloc_sys::mi_collect(true) }
}
