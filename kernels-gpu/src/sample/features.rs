//! A sampled batch's sparse node features on the device, for both GPU samplers (GraphSAINT's
//! `saint.rs`, `neighbor.rs`), from the whole graph's X and Xᵀ kept resident:
//!
//! 1. `features_count` and a scan: the batch's feature row pointers (row r is node `nodes[r]`'s
//!    full row of X);
//! 2. `features_fill`: the rows copied, a warp per row;
//! 3. `features_t_count`, a scan, `features_t_fill`: the transpose cut from Xᵀ's entries whose
//!    node is in the batch, a warp per 128-entry segment of Xᵀ (a common feature's row holds
//!    most nodes), with each entry's place in the batch's rows;
//! 4. `features_bind` (after the host has read the sizes): everything padded into a rebound
//!    model's sparse input, as `PaddedBatch` pads it on the CPU.

use crate::abi::sample::{BatchFeaturesArgs, BatchFeaturesBindArgs};
use crate::nn::{global_thread, global_warp, grid_threads};
use crate::ptx;

/// Whether node `u` is in the batch: GraphSAINT marks its nodes (`marks[u] != 0`); without
/// marks (the neighbour sampler) a node is in the batch when it has a local id.
#[inline(always)]
unsafe fn in_batch(a: &BatchFeaturesArgs, u: u32) -> bool {
    let u = u as usize;
    if a.marks.is_null() { unsafe { *a.local.add(u) != u32::MAX } } else { unsafe { *a.marks.add(u) != 0 } }
}

/// Sparse node features of the batch: row r is the full feature row of node `nodes[r]`, copied
/// (`fx_ptr` from a scan of the rows' lengths, written by `features_count`).
#[inline(always)]
pub unsafe fn features_count(a: BatchFeaturesArgs) {
    let n = unsafe { *a.n_batch };
    let mut r = global_thread();
    while r < a.rows {
        let len = if r < n {
            let v = unsafe { *a.nodes.add(r as usize) } as usize;
            unsafe { *a.x_ptr.add(v + 1) - *a.x_ptr.add(v) }
        } else {
            0
        };
        unsafe { *a.counts.add(r as usize) = len };
        r += grid_threads();
    }
}

/// Copies the batch's feature rows (a warp per row) and writes the row of every entry.
#[inline(always)]
pub unsafe fn features_fill(a: BatchFeaturesArgs) {
    let n = unsafe { *a.n_batch };
    let (mut r, warps) = global_warp();
    while r < n {
        let v = unsafe { *a.nodes.add(r as usize) } as usize;
        let (start, end) = unsafe { (*a.x_ptr.add(v), *a.x_ptr.add(v + 1)) };
        let out0 = unsafe { *a.fx_ptr.add(r as usize) };
        let mut e = start + ptx::lane_id();
        while e < end {
            let at = (out0 + e - start) as usize;
            unsafe {
                *a.fx_cols.add(at) = *a.x_cols.add(e as usize);
                *a.fx_values.add(at) = *a.x_values.add(e as usize);
                *a.fx_rows.add(at) = r;
            }
            e += 32;
        }
        r += warps;
    }
}

/// The transpose of the batch's features: row f of Xᵀ keeps the entries of the batch's nodes,
/// in node order (GraphSAINT's local order, as a counting transpose of its batch lists them; a
/// neighbour batch's local order is reach order, so there a row's entries are not sorted by
/// local row: the products over Xᵀ do not need them to be). Xᵀ is
/// cut into segments of at most `CHUNK` entries of one row (a common feature's row holds most
/// nodes): a warp per segment counts (`fill` false) or writes from the segment's scanned offset:
/// local row ids, values, the entry's place in the batch's features (its node's batch row start
/// plus its rank in the node's full row), and the row of every entry.
#[inline(always)]
unsafe fn features_transpose(a: &BatchFeaturesArgs, fill: bool) {
    let lane = ptx::lane_id();
    let lower = (1u32 << lane) - 1;
    let (mut seg, warps) = global_warp();
    while seg < a.n_segments {
        let (start, end) = unsafe { (*a.seg_start.add(seg as usize), *a.seg_start.add(seg as usize + 1)) };
        let f = unsafe { *a.seg_row.add(seg as usize) };
        let mut at = if fill { unsafe { *a.fxt_seg_off.add(seg as usize) } } else { 0 };
        let mut u = [u32::MAX; 4];
        crate::unroll4!(k => {
            let e = start + 32 * k as u32 + lane;
            if e < end {
                u[k] = unsafe { *a.xt_nodes.add(e as usize) };
            }
        });
        let mut m = [false; 4];
        crate::unroll4!(k => {
            m[k] = u[k] != u32::MAX && unsafe { in_batch(a, u[k]) };
        });
        crate::unroll4!(k => {
            let kept = ptx::ballot(m[k]);
            if fill && m[k] {
                let e = start + 32 * k as u32 + lane;
                let q = (at + (kept & lower).count_ones()) as usize;
                let l = unsafe { *a.local.add(u[k] as usize) };
                let x = unsafe { *a.xt_of.add(e as usize) };
                unsafe {
                    *a.fxt_cols.add(q) = l;
                    *a.fxt_values.add(q) = *a.x_values.add(x as usize);
                    *a.fxt_of.add(q) = *a.fx_ptr.add(l as usize) + (x - *a.x_ptr.add(u[k] as usize));
                    *a.fxt_rows.add(q) = f;
                }
            }
            at += kept.count_ones();
        });
        if !fill && lane == 0 {
            unsafe { *a.counts.add(seg as usize) = at };
        }
        seg += warps;
    }
    // Row pointers of the transpose: each row starts where its first segment's entries go
    // (an empty row where the next row's do).
    if fill {
        let mut f = global_thread();
        while f <= a.n_features {
            unsafe { *a.fxt_ptr.add(f as usize) = *a.fxt_seg_off.add(*a.first_seg.add(f as usize) as usize) };
            f += grid_threads();
        }
    }
}

#[inline(always)]
pub unsafe fn features_t_count(a: BatchFeaturesArgs) {
    unsafe { features_transpose(&a, false) }
}

#[inline(always)]
pub unsafe fn features_t_fill(a: BatchFeaturesArgs) {
    unsafe { features_transpose(&a, true) }
}

/// The batch's sparse features (n rows, nnz entries) padded into a model's input of `rows`
/// rows and `cap` entries, as `pad_with_transpose` pads them: the missing entries as zeros at
/// (rows - 1, F - 1) after the last row's, the transpose's at (F - 1, rows - 1) after its
/// last row's, the map extended by the identity.
#[inline(always)]
pub unsafe fn features_bind(a: BatchFeaturesBindArgs) {
    let BatchFeaturesBindArgs { n, nnz, rows, cap, n_features, .. } = a;
    let items = if cap > rows + 1 { cap } else { rows + 1 };
    let items = if items > n_features + 1 { items } else { n_features + 1 };
    let mut i = global_thread();
    while i < items {
        let iu = i as usize;
        if i <= rows {
            let p = if i <= n {
                unsafe { *a.fx_ptr.add(iu) }
            } else if i < rows {
                nnz
            } else {
                cap
            };
            unsafe { *a.s_row_ptr.add(iu) = p };
        }
        if i <= n_features {
            let p = if i < n_features { unsafe { *a.fxt_ptr.add(iu) } } else { cap };
            unsafe { *a.t_row_ptr.add(iu) = p };
        }
        if i < cap {
            let real = i < nnz;
            unsafe {
                *a.s_cols.add(iu) = if real { *a.fx_cols.add(iu) } else { n_features - 1 };
                *a.s_rows.add(iu) = if real { *a.fx_rows.add(iu) } else { rows - 1 };
                *a.s_values.add(iu) = if real { *a.fx_values.add(iu) } else { 0.0 };
                *a.t_cols.add(iu) = if real { *a.fxt_cols.add(iu) } else { rows - 1 };
                *a.t_rows.add(iu) = if real { *a.fxt_rows.add(iu) } else { n_features - 1 };
                *a.t_values.add(iu) = if real { *a.fxt_values.add(iu) } else { 0.0 };
                *a.t_of.add(iu) = if real { *a.fxt_of.add(iu) } else { i };
            }
        }
        i += grid_threads();
    }
}
