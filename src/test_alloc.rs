//! A counting allocator for the unit tests (see `COUNTING` in lib.rs).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
    /// Allocated less freed, by this thread.
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

pub(crate) struct Counting;

// SAFETY: every call is forwarded to `System` unchanged; the thread-local
// counter is a const-initialised `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    // SAFETY (callers'): `layout` has a non-zero size.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + layout.size() as u64));
        let _ = LIVE.try_with(|a| a.set(a.get() + layout.size() as i64));
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    // SAFETY (callers'): `ptr` is a live block allocated with `layout`.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|a| a.set(a.get() - layout.size() as i64));
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    // SAFETY (callers'): `ptr` is a live block allocated with `layout`.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = new_size.saturating_sub(layout.size()) as u64;
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + grown));
        let _ = LIVE.try_with(|a| a.set(a.get() + new_size as i64 - layout.size() as i64));
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes the current thread allocated while running `f`, and its result.
pub(crate) fn allocated_by<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = ALLOCATED.with(Cell::get);
    let out = f();
    (ALLOCATED.with(Cell::get) - before, out)
}

/// Bytes `f` left allocated on the current thread (allocated less freed),
/// and its result: what a structure it built holds.
pub(crate) fn kept_by<T>(f: impl FnOnce() -> T) -> (i64, T) {
    let before = LIVE.with(Cell::get);
    let out = f();
    (LIVE.with(Cell::get) - before, out)
}
