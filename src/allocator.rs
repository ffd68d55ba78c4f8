//! The binary's global allocator: mimalloc, entered through its plain
//! `mi_malloc`/`mi_realloc` wherever the layout asks for no more alignment
//! than mimalloc gives every block anyway. The `mimalloc` crate's
//! `MiMalloc` calls the aligned entry points for every allocation, whose
//! extra checks cost about 30 instructions a call; a 1 KB modelcar review
//! makes about 70 allocations (callgrind over `examples/review_loop.rs`,
//! docs/performance.md). Everything else is forwarded to `MiMalloc`.

use libmimalloc_sys::{mi_free, mi_malloc, mi_realloc, mi_zalloc};
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The alignment every mimalloc block has, in any build of it: a word.
/// (Where `MI_MAX_ALIGN_SIZE` is 16 it rounds sizes to two words, so 16
/// holds there too; almost every Rust layout asks for 8 or less, so the
/// word is all this needs.) A block smaller than the alignment asked for
/// may sit at any word, hence the size check as well, as std's `System`.
const PLAIN_ALIGN: usize = std::mem::size_of::<usize>();

fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

pub struct Allocator;

// Each method returns memory from mimalloc with at least the layout's
// alignment (the plain entry points only where `plain` holds, which
// mimalloc's block alignment guarantees), and frees or resizes only
// pointers mimalloc handed out, as `GlobalAlloc`'s contract lets callers
// pass. `mi_free` takes blocks from either family of entry points.
#[allow(unsafe_code)]
// SAFETY: as said above.
unsafe impl GlobalAlloc for Allocator {
    // SAFETY (callers'): `layout` has a non-zero size, as GlobalAlloc requires.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align(), layout.size()) {
            // SAFETY: see the impl.
            unsafe { mi_malloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's layout contract, forwarded.
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    // SAFETY (callers'): as for `alloc`.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align(), layout.size()) {
            // SAFETY: see the impl.
            unsafe { mi_zalloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's layout contract, forwarded.
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    // SAFETY (callers'): `ptr` is a live block of this allocator.
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    // SAFETY (callers'): `ptr` is a live block allocated with `layout`,
    // and `new_size` is non-zero and fits `layout`'s alignment.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if plain(layout.align(), new_size) {
            // SAFETY: `ptr` came from mimalloc; the new block keeps the alignment.
            unsafe { mi_realloc(ptr.cast::<c_void>(), new_size).cast() }
        } else {
            // SAFETY: the caller's contract, forwarded.
            unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many blocks of each shape live at once, so they come from all over
    /// a page (one block freed and asked for again is the same block).
    #[test]
    fn blocks_have_the_alignment_asked_for() {
        let sizes = [1, 3, 8, 15, 16, 24, 40, 100, 4096, 70_000];
        let aligns = [1, 2, 4, 8, 16, 32, 64, 4096];
        for size in sizes {
            for align in aligns {
                let layout = Layout::from_size_align(size, align).expect("a valid layout");
                let grown = Layout::from_size_align(size * 3, align).expect("a valid layout");
                #[allow(unsafe_code)]
                // SAFETY: non-zero sizes; each block is freed once, with
                // the layout it has at that point.
                unsafe {
                    let blocks: Vec<*mut u8> = (0..64)
                        .map(|_| {
                            let p = Allocator.alloc(layout);
                            assert!(!p.is_null());
                            assert_eq!(p as usize % align, 0, "alloc {size} aligned {align}");
                            p.write_bytes(0xa5, size);
                            p
                        })
                        .collect();
                    for p in blocks {
                        let q = Allocator.realloc(p, layout, size * 3);
                        assert_eq!(q as usize % align, 0, "realloc {size}x3 aligned {align}");
                        assert!(
                            (0..size).all(|i| *q.add(i) == 0xa5),
                            "realloc kept the bytes"
                        );
                        Allocator.dealloc(q, grown);
                    }
                    let zeroed: Vec<*mut u8> =
                        (0..64).map(|_| Allocator.alloc_zeroed(layout)).collect();
                    for z in zeroed {
                        assert_eq!(z as usize % align, 0, "zeroed {size} aligned {align}");
                        assert!((0..size).all(|i| *z.add(i) == 0), "zeroed");
                        Allocator.dealloc(z, layout);
                    }
                }
            }
        }
    }
}
