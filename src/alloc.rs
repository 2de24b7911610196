//! The `dlc-egg` binary's global allocator (feature `mimalloc`, on by default): mimalloc for
//! small blocks, the system allocator for large ones.
//!
//! Why split: the optimizer allocates and frees millions of small term, region and plan values,
//! and glibc's `malloc`/`free` were a fifth to a third of `optimize`'s CPU time on a BERT export
//! (bench/results/optimize-speed-2026-11-27.md; mimalloc: BERT-12 4.1 → 3.0 s). The native
//! backend's tensors are large blocks whose placement decides the timed kernels' speed; under
//! mimalloc for every block, the BERT FFN GEMM ran 3–4 % slower than under glibc (same
//! 64-byte-aligned buffers, `bench/results/optimize-speed-2026-11-29.md`). So blocks of at
//! least [`LARGE`] bytes stay with the system allocator, where they were measured.
//!
//! Which allocator owns a block follows from its size alone (`dealloc` gets the layout the block
//! was allocated with), so no header or lookup is needed; a `realloc` across the threshold
//! moves the block.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes come from the system allocator.
pub const LARGE: usize = 256 << 10;

/// mimalloc below [`LARGE`] bytes, [`System`] from it on.
pub struct SplitAlloc;

fn small(size: usize) -> bool {
    size < LARGE
}

// SAFETY: every method forwards to the allocator that owns the block by its size (the same size
// at allocation and deallocation, as `GlobalAlloc` guarantees); a realloc across the threshold
// allocates in the other allocator, copies the common prefix and frees the old block.
unsafe impl GlobalAlloc for SplitAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if small(layout.size()) {
            mimalloc::MiMalloc.alloc(layout)
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if small(layout.size()) {
            mimalloc::MiMalloc.alloc_zeroed(layout)
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if small(layout.size()) {
            mimalloc::MiMalloc.dealloc(ptr, layout)
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (small(layout.size()), small(new_size)) {
            (true, true) => mimalloc::MiMalloc.realloc(ptr, layout, new_size),
            (false, false) => System.realloc(ptr, layout, new_size),
            _ => {
                let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_bytes_across_the_threshold() {
        let a = SplitAlloc;
        for (from, to) in [
            (100, LARGE + 100),
            (LARGE + 100, 100),
            (64, 128),
            (LARGE, 2 * LARGE),
        ] {
            let layout = Layout::from_size_align(from, 64).unwrap();
            unsafe {
                let p = a.alloc(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % 64, 0);
                for i in 0..from {
                    *p.add(i) = (i % 251) as u8;
                }
                let q = a.realloc(p, layout, to);
                assert!(!q.is_null());
                assert_eq!(q as usize % 64, 0, "{from} -> {to}");
                for i in 0..from.min(to) {
                    assert_eq!(*q.add(i), (i % 251) as u8, "{from} -> {to} at {i}");
                }
                a.dealloc(q, Layout::from_size_align(to, 64).unwrap());
            }
        }
    }

    #[test]
    fn zeroed_blocks_are_zero_on_both_sides() {
        let a = SplitAlloc;
        for size in [32, LARGE + 8] {
            let layout = Layout::from_size_align(size, 8).unwrap();
            unsafe {
                let p = a.alloc_zeroed(layout);
                assert!((0..size).all(|i| *p.add(i) == 0));
                a.dealloc(p, layout);
            }
        }
    }
}
