//! Step 3 of CSR -> SGT: with window and block pointers known, list every window's edges block
//! by block, CSR order inside a block (the CPU's stable counting sort): sort the window's
//! (block, offset) keys, so sorted position i is block-edge `e0 + i`. Also copies the window's
//! unique columns to `win_cols` and writes `blk_edge_ptr` at every block's first edge.
//! One block per window (`sgt_edges`, shared memory sort, larger windows return at once) or
//! per listed large window (`sgt_edges_large`, global scratch), like `window_cols`.

use crate::abi::format::{LargeWindowList, SgtEdgesArgs, SgtEdgesLargeArgs};
use crate::format::block::Window;
use crate::format::sort::{Keys, sort_global, sort_smem};
use crate::ptx;
use crate::smem::SmemCarver;
use crate::translate::{SORT_SMEM_KEYS, div_or_zero, sgt_pos, sort_key, sort_len, window_is_large};

#[inline(always)]
unsafe fn run(a: &SgtEdgesArgs, w: &Window, keys: Keys, n: u32, large_chunk: u32) {
    let bw = a.block_w;
    // Unique columns.
    let u0 = unsafe { ptx::ld_nc_u32(a.win_ptr.add(w.w as usize)) };
    let n_u = unsafe { ptx::ld_nc_u32(a.win_ptr.add(w.w as usize + 1)) } - u0;
    let mut u = ptx::tid_x();
    while u < n_u {
        unsafe { *a.win_cols.add((u0 + u) as usize) = ptx::ld_nc_u32(a.ucol.add((w.e0 + u) as usize)) };
        u += ptx::ntid_x();
    }
    // Keys (block within window, offset).
    let mut i = ptx::tid_x();
    while i < n {
        let key =
            if i < w.len { sort_key(div_or_zero(unsafe { ptx::ld_nc_u32(a.loc.add((w.e0 + i) as usize)) }, bw), i) } else { u64::MAX };
        unsafe { keys.set(i, key) };
        i += ptx::ntid_x();
    }
    ptx::sync_threads();
    match keys {
        Keys::Smem(s) => unsafe { sort_smem(s, n, 0, n) },
        Keys::Global(g) => unsafe { sort_global(g, n, large_chunk) },
    }
    let b0 = unsafe { ptx::ld_nc_u32(a.blk_ptr.add(w.w as usize)) };
    let mut i = ptx::tid_x();
    while i < w.len {
        let key = unsafe { keys.get(i) };
        let (blk, off) = ((key >> 32) as u32, key as u32);
        let e = w.e0 + off;
        let d = (w.e0 + i) as usize;
        let local = unsafe { ptx::ld_nc_u32(a.loc.add(e as usize)) };
        let row = unsafe { w.row_of(off) };
        unsafe {
            *a.blk_edge_pos.add(d) = sgt_pos(row, local, bw) as u8;
            *a.blk_edge_val.add(d) = ptx::ld_nc_f32(a.values.add(e as usize));
            *a.blk_edge_csr.add(d) = e;
        }
        if i == 0 || (unsafe { keys.get(i - 1) } >> 32) as u32 != blk {
            unsafe { *a.blk_edge_ptr.add((b0 + blk) as usize) = d as u32 };
        }
        i += ptx::ntid_x();
    }
}

/// One block per window of 16 rows (grid = windows); shared memory
/// `window_smem_bytes(longest small window)`.
#[inline(always)]
pub unsafe fn sgt_edges(a: SgtEdgesArgs) {
    let mut smem = SmemCarver::new();
    let w = unsafe { Window::load(ptx::ctaid_x(), 16, a.n_rows, a.row_ptr, &mut smem) };
    if w.w + 1 == a.n_windows && ptx::tid_x() == 0 {
        // The closing pointer: total blocks -> nnz.
        unsafe { *a.blk_edge_ptr.add(ptx::ld_nc_u32(a.blk_ptr.add(a.n_windows as usize)) as usize) = a.nnz };
    }
    if window_is_large(w.len) {
        return;
    }
    let _scratch = smem.take(4 * 32);
    let n = sort_len(w.len);
    let keys = smem.take(8 * n);
    unsafe { run(&a, &w, Keys::Smem(keys), n, 0) };
}

/// One block per large window (`large`, `scratch_off` as in `window_cols_large`); shared memory
/// `window_smem_bytes(u32::MAX)`.
#[inline(always)]
pub unsafe fn sgt_edges_large(args: SgtEdgesLargeArgs) {
    let SgtEdgesLargeArgs { edges: a, large: LargeWindowList { large, scratch_off, scratch } } = args;
    let b = ptx::ctaid_x() as usize;
    let mut smem = SmemCarver::new();
    let w = unsafe { Window::load(ptx::ld_nc_u32(large.add(b)), 16, a.n_rows, a.row_ptr, &mut smem) };
    let _sums = smem.take(4 * 32);
    let chunk = smem.take(8 * SORT_SMEM_KEYS);
    let n = sort_len(w.len);
    let keys = unsafe { scratch.add(ptx::ld_nc_u32(scratch_off.add(b)) as usize) };
    unsafe { run(&a, &w, Keys::Global(keys), n, chunk) };
}
