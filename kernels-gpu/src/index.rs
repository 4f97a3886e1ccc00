// Element offsets of the dense row-major matrices the kernels read and write, shared by the
// device kernels and the host (`tcgnn::gpu::shared::index`): the very same source file is
// `include!`d by both crates, so the CPU tests run the arithmetic the kernels run.
//
// Sizes. A matrix has fewer than 2^31 rows (row ids are u32 in the graph formats, and the row
// loops add a grid's worth of rows, < 2^31, to a row id below 2^31 without wrapping) and a
// stride below 2^32 elements, but rows * ld can pass 2^32 (10M x 504 = 5.04e9): element offsets,
// element counts and the positions of grid-stride loops over elements are u64. Row ids, column
// ids (< ld) and edge ids (nnz < 2^31, the cuSPARSE 32-bit index limit) stay u32.

/// Offset of element (row, col) of a matrix with stride `ld`: the product in 64 bits.
#[inline(always)]
pub const fn elem_offset(row: u32, ld: u32, col: u32) -> u64 {
    row as u64 * ld as u64 + col as u64
}

/// (row, column) of element offset `i` in a matrix with stride `ld` (> 0) and fewer than 2^32
/// rows. Offsets below 2^32 take a 32-bit division: on the GPU a 64-bit division is a software
/// routine several times the length of the 32-bit one, and all but the largest matrices stay
/// on that path (warp-uniformly, as a warp's offsets are consecutive).
#[inline(always)]
pub const fn split_offset(i: u64, ld: u32) -> (u32, u32) {
    if i <= u32::MAX as u64 {
        let j = i as u32;
        (j / ld, j % ld)
    } else {
        ((i / ld as u64) as u32, (i % ld as u64) as u32)
    }
}

/// Positions `first, first + step, ...` below `end`, in u64: a grid-stride loop over `end`
/// items. With u32 positions a loop over n items, n near 2^32, would wrap past n and never end.
#[derive(Clone, Copy)]
pub struct Strided {
    next: u64,
    step: u64,
    end: u64,
}

impl Strided {
    /// `step` must be > 0 (the grid's thread count).
    #[inline(always)]
    pub const fn new(first: u64, step: u64, end: u64) -> Self {
        Strided { next: first, step, end }
    }
}

impl Iterator for Strided {
    type Item = u64;

    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        if self.next < self.end {
            let i = self.next;
            self.next = i.saturating_add(self.step);
            Some(i)
        } else {
            None
        }
    }
}
