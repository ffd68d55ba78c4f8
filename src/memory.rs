//! Handing freed memory back to the system after a large input was
//! refused. The binary's allocator, mimalloc, keeps the pages a thread
//! freed for that thread's next allocations; a reload task that refused a
//! large config and then went quiet kept its peak resident (113 MiB where
//! it was 38 MiB before, in tests/server/memory.rs).

/// Returns the calling thread's free pages (and abandoned ones) to the
/// system. Why: the 113 MiB against 38 MiB above, which
/// `tests/server/memory.rs` checks; neither `mimalloc` nor std offers a
/// safe call that does it.
#[allow(unsafe_code)]
pub(crate) fn give_back() {
    // Callable from any thread at any time, also where mimalloc is not the
    // global allocator (its heaps are then empty, as in the test binaries).
    // SAFETY: mi_collect trusts no argument and walks only mimalloc's heaps.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// mimalloc.h's `mi_option_purge_delay`, for which libmimalloc-sys names no
/// constant: 15 in the `mi_option_e` of mimalloc 2.3.2 and 3.3.2, the two
/// builds of libmimalloc-sys 0.1.49. The test below fails when another
/// mimalloc is linked, whose header has to be read again.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The linked mimalloc versions (`mi_version`) whose mimalloc.h gave
/// [`MI_OPTION_PURGE_DELAY`].
#[cfg(test)]
const PURGE_DELAY_READ_IN: [u32; 2] = [20302, 30302];

/// Makes freed memory go back to the system at once, where mimalloc waits
/// 10 ms by default. For the one-shot commands: a buffer that grows by
/// doubling while a huge document is read frees each smaller copy within
/// that delay, and they could all stay resident at once, so the peak of a
/// refused huge document varied by half from one run to the next.
/// No safe call sets a mimalloc option, and the environment variable is
/// read before `main` could set it.
#[allow(unsafe_code)]
pub fn purge_at_once() {
    // SAFETY: mi_option_set only stores an integer in mimalloc's option
    // table, which may be changed at any time; an index past the table's
    // end is ignored (and the test below keeps this one in it).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
}

/// Turns transparent huge pages off for this process. mimalloc advises
/// huge pages for its arenas, and where the system's THP mode is
/// `madvise` (a common default) every 2 MiB region a heap touches is then
/// resident in full: `serve`'s peak under load with the 23 KB pod was
/// 34 MiB with huge pages and is 25 MiB without (docs/performance.md).
/// A request touches a few pages, so huge pages buy it nothing
/// measurable. Where the prctl is missing (a kernel before 3.15) the
/// system's default stays: that costs memory, not correctness.
pub fn small_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_index_was_read_for_the_linked_mimalloc() {
        let linked = mimalloc::MiMalloc.version();
        assert!(
            PURGE_DELAY_READ_IN.contains(&linked),
            "mimalloc {linked} is linked: find mi_option_purge_delay's index in its \
             mimalloc.h (mi_option_e), set MI_OPTION_PURGE_DELAY and add {linked} to \
             PURGE_DELAY_READ_IN"
        );
    }
}
