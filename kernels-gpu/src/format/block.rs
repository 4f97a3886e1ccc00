//! Block-level helpers of the translation kernels: a block-wide prefix sum and the window a
//! block works on (its rows' pointers staged in shared memory, the row of an edge offset).

use crate::ptx;
use crate::smem::SmemCarver;
use crate::translate::window_rows;

/// Exclusive prefix of `v` over the block's threads (x-major) and the block total; every thread
/// must call it. `scratch`: 32 u32 of shared memory, free again on return.
#[inline(always)]
pub unsafe fn block_scan_u32(v: u32, scratch: u32) -> (u32, u32) {
    let inc = ptx::warp_inclusive_scan_u32(v);
    let (lane, warp, n_warps) = (ptx::lane_id(), ptx::tid_x() / 32, ptx::ntid_x().div_ceil(32));
    if lane == 31 {
        unsafe { ptx::st_shared_u32(scratch + 4 * warp, inc) };
    }
    ptx::sync_threads();
    let (mut before, mut total) = (inc - v, 0);
    let mut w = 0;
    while w < n_warps {
        let s = unsafe { ptx::ld_shared_u32(scratch + 4 * w) };
        if w < warp {
            before += s;
        }
        total += s;
        w += 1;
    }
    ptx::sync_threads();
    (before, total)
}

/// One window of rows as a block sees it.
#[derive(Clone, Copy)]
pub struct Window {
    pub w: u32,
    /// First CSR edge of the window.
    pub e0: u32,
    /// Edges of the window.
    pub len: u32,
    /// Rows in the window (at most 16).
    pub n_rows: u32,
    /// Shared address of the window's `n_rows + 1` row pointers.
    rows: u32,
}

impl Window {
    /// Window `w` of `win` rows; stages its row pointers in shared memory (carved from `smem`)
    /// and ends with a barrier. Every thread must call it.
    #[inline(always)]
    pub unsafe fn load(w: u32, win: u32, n_rows: u32, row_ptr: *const u32, smem: &mut SmemCarver) -> Window {
        let (r0, r1) = window_rows(w, win, n_rows);
        let rows = smem.take(4 * 17);
        let t = ptx::tid_x();
        if t <= r1 - r0 {
            unsafe { ptx::st_shared_u32(rows + 4 * t, ptx::ld_nc_u32(row_ptr.add((r0 + t) as usize))) };
        }
        let (e0, e1) = unsafe { (ptx::ld_nc_u32(row_ptr.add(r0 as usize)), ptx::ld_nc_u32(row_ptr.add(r1 as usize))) };
        ptx::sync_threads();
        Window { w, e0, len: e1 - e0, n_rows: r1 - r0, rows }
    }

    /// Row inside the window of the edge at offset `off` (< len): the last row starting at or
    /// before it (empty rows start where the next row does, so they are skipped).
    #[inline(always)]
    pub unsafe fn row_of(&self, off: u32) -> u32 {
        let e = self.e0 + off;
        let mut r = 0;
        let mut i = 1;
        while i < self.n_rows {
            if unsafe { ptx::ld_shared_u32(self.rows + 4 * i) } <= e {
                r = i;
            }
            i += 1;
        }
        r
    }
}
