//! Step 1 of both translations: per row window, sort the edges' (column, offset) keys and
//! number the window's unique columns. Outputs, indexed by CSR edge (windows' edges are
//! contiguous, so every window writes inside its own edge range):
//! - `loc[e]`: position of e's column among the window's sorted unique columns (SGT's
//!   `edge_to_col`, ME-BCRS's vector within the window);
//! - `ucol[e0 + u]`: the window's u-th unique column (u < unique <= len);
//! - `counts[w]`: unique columns of window w;
//! - `dup[e]` (if not null): duplicate chains for ME-BCRS, whose repeated (row, column) entries
//!   add into one slot in CSR order: `DUP_NOT_HEAD` set unless e is the first such entry, low
//!   31 bits the next one (`DUP_NONE` at the end).
//!
//! Windows of at most `SORT_SMEM_KEYS` edges sort in shared memory (`window_cols`, one block per
//! window; larger ones return at once); larger ones sort in global scratch
//! (`window_cols_large`, one block per listed window).

use crate::abi::format::{LargeWindowList, WindowColsArgs, WindowColsLargeArgs};
use crate::format::block::{Window, block_scan_u32};
use crate::format::sort::{Keys, sort_global, sort_smem};
use crate::ptx;
use crate::smem::SmemCarver;
use crate::translate::{DUP_NONE, DUP_NOT_HEAD, SORT_SMEM_KEYS, sort_key, sort_len, window_is_large};

/// Fill `n` keys: (column, offset) for the window's edges, then `u64::MAX` padding.
#[inline(always)]
unsafe fn fill(keys: Keys, win: &Window, n: u32, col_idx: *const u32) {
    let mut i = ptx::tid_x();
    while i < n {
        let key = if i < win.len { sort_key(unsafe { ptx::ld_nc_u32(col_idx.add((win.e0 + i) as usize)) }, i) } else { u64::MAX };
        unsafe { keys.set(i, key) };
        i += ptx::ntid_x();
    }
    ptx::sync_threads();
}

/// Walk the sorted keys in tiles of the block and write `loc`, `ucol`, `counts` and `dup`.
#[inline(always)]
unsafe fn emit(keys: Keys, win: &Window, scratch: u32, loc: *mut u32, ucol: *mut u32, counts: *mut u32, dup: *mut u32) {
    let len = win.len;
    let mut carry = 0;
    let mut tile = 0;
    while tile < len {
        let i = tile + ptx::tid_x();
        let valid = i < len;
        let key = if valid { unsafe { keys.get(i) } } else { 0 };
        let (col, off) = ((key >> 32) as u32, key as u32);
        let prev = if valid && i > 0 { unsafe { keys.get(i - 1) } } else { u64::MAX };
        let new = valid && (i == 0 || (prev >> 32) as u32 != col);
        let (before, total) = unsafe { block_scan_u32(new as u32, scratch) };
        if valid {
            let local = carry + before + new as u32 - 1;
            let e = win.e0 + off;
            unsafe { *loc.add(e as usize) = local };
            if new {
                unsafe { *ucol.add((win.e0 + local) as usize) = col };
            }
            if !dup.is_null() {
                let row = unsafe { win.row_of(off) };
                let head = new || unsafe { win.row_of(prev as u32) } != row;
                let mut next = DUP_NONE;
                if i + 1 < len {
                    let nk = unsafe { keys.get(i + 1) };
                    if (nk >> 32) as u32 == col && unsafe { win.row_of(nk as u32) } == row {
                        next = win.e0 + nk as u32;
                    }
                }
                unsafe { *dup.add(e as usize) = if head { next } else { DUP_NOT_HEAD | next } };
            }
        }
        carry += total;
        tile += ptx::ntid_x();
    }
    if ptx::tid_x() == 0 {
        unsafe { *counts.add(win.w as usize) = carry };
    }
}

/// One block per window of `win` rows (grid = windows); shared memory
/// `window_smem_bytes(longest small window)`. Windows longer than `SORT_SMEM_KEYS` are left to
/// `window_cols_large`.
#[inline(always)]
pub unsafe fn window_cols(args: WindowColsArgs) {
    let WindowColsArgs { n_rows, win, row_ptr, col_idx, loc, ucol, counts, dup } = args;
    let mut smem = SmemCarver::new();
    let w = unsafe { Window::load(ptx::ctaid_x(), win, n_rows, row_ptr, &mut smem) };
    if window_is_large(w.len) {
        return;
    }
    let scratch = smem.take(4 * 32);
    let n = sort_len(w.len);
    let keys = smem.take(8 * n);
    unsafe {
        fill(Keys::Smem(keys), &w, n, col_idx);
        sort_smem(keys, n, 0, n);
        emit(Keys::Smem(keys), &w, scratch, loc, ucol, counts, dup);
    }
}

/// One block per large window: `large[b]` is the window, `scratch_off[b]` the first of its
/// `sort_len(len)` keys in `scratch`. Shared memory `window_smem_bytes(u32::MAX)`.
#[inline(always)]
pub unsafe fn window_cols_large(args: WindowColsLargeArgs) {
    let WindowColsLargeArgs {
        cols: WindowColsArgs { n_rows, win, row_ptr, col_idx, loc, ucol, counts, dup },
        large: LargeWindowList { large, scratch_off, scratch },
    } = args;
    let b = ptx::ctaid_x() as usize;
    let mut smem = SmemCarver::new();
    let w = unsafe { Window::load(ptx::ld_nc_u32(large.add(b)), win, n_rows, row_ptr, &mut smem) };
    let sums = smem.take(4 * 32);
    let chunk = smem.take(8 * SORT_SMEM_KEYS);
    let n = sort_len(w.len);
    let keys = unsafe { scratch.add(ptx::ld_nc_u32(scratch_off.add(b)) as usize) };
    unsafe {
        fill(Keys::Global(keys), &w, n, col_idx);
        sort_global(keys, n, chunk);
        emit(Keys::Global(keys), &w, sums, loc, ucol, counts, dup);
    }
}
