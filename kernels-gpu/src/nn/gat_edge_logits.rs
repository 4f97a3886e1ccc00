//! GAT's edge logits of one head, e_ij = LeakyReLU(s_dst[i] + s_src[j]), from the per-node
//! scores, the backward dz per edge with its row sums (ds_dst), and plain row sums of edge
//! values into one column of a matrix (ds_src: the row sums of dz laid out for the transpose).
//!
//! Load balance: R-MAT-like graphs have hub rows of tens of thousands of edges, which a warp
//! per row walks alone while the rest of the grid idles. So the logits run a thread per edge
//! over the COO row ids (no reduction, every thread the same work), and the kernels that sum
//! rows (dz with ds_dst in one pass, the plain row sums) give rows shorter than `long_min` a
//! lane group each and leave the listed long rows to their `_long` twins, a thread block each.
//! Every sum is a fixed tree (group or block reduction, no atomics): the results are the same
//! bits on every run.
//!
//! Element offsets are computed in 64 bits (rows x score columns may pass 2^32). Values in CSR
//! order (`slot_of` null) or at `slot_of[e]`.

use super::{block_reduce, global_thread, global_warp, grid_threads, group_sum};
use crate::abi::nn::{
    EdgeRowSumsArgs, EdgeRowSumsLongArgs, GatEdgeLogitsArgs, GatEdgeLogitsBackwardArgs, GatEdgeLogitsBackwardLongArgs, GatEdges,
};
use crate::config::NN_EDGE_GROUP;
use crate::ptx;

/// Where edge `e`'s value lives.
#[inline(always)]
unsafe fn slot(slot_of: *const u32, e: usize) -> usize {
    if slot_of.is_null() { e } else { unsafe { ptx::ld_nc_u32(slot_of.add(e)) as usize } }
}

/// Element (row, col) of a matrix with row stride `ld`, as a 64-bit offset.
#[inline(always)]
fn at(row: u32, ld: u32, col: u32) -> usize {
    row as usize * ld as usize + col as usize
}

/// Calls `f(e)` for this thread's edges (grid-stride; 64-bit counter so `e + stride` cannot wrap).
#[inline(always)]
fn for_each_edge(nnz: u32, mut f: impl FnMut(usize)) {
    let mut e = global_thread() as usize;
    let step = grid_threads() as usize;
    while e < nnz as usize {
        f(e);
        e += step;
    }
}

/// The pre-activation z of edge `e`, which lies in row `row`.
#[inline(always)]
unsafe fn z(g: &GatEdges, row: u32, e: usize) -> f32 {
    let col = unsafe { ptx::ld_nc_u32(g.col_idx.add(e)) };
    unsafe { ptx::ld_nc_f32(g.s_dst.add(at(row, g.s_ld, g.head))) + ptx::ld_nc_f32(g.s_src.add(at(col, g.s_ld, g.head))) }
}

/// logits at every edge slot, a thread per edge.
#[inline(always)]
pub unsafe fn edge_logits(args: GatEdgeLogitsArgs) {
    let GatEdgeLogitsArgs { edges: g, logits } = args;
    for_each_edge(g.nnz, |e| {
        let v = unsafe { z(&g, ptx::ld_nc_u32(g.row_of.add(e)), e) };
        unsafe { ptx::st_f32(logits.add(slot(g.slot_of, e)), if v > 0.0 { v } else { g.slope * v }) };
    });
}

/// dz of edge `e` in row `row`, stored at its slot and returned (for the row's sum).
#[inline(always)]
unsafe fn dz_at(g: &GatEdges, de: *const f32, dz: *mut f32, row: u32, e: usize) -> f32 {
    let k = unsafe { slot(g.slot_of, e) };
    let d = unsafe { ptx::ld_nc_f32(de.add(k)) };
    let v = if unsafe { z(g, row, e) } > 0.0 { d } else { g.slope * d };
    unsafe { ptx::st_f32(dz.add(k), v) };
    v
}

/// Calls `sum_row(row, start, end, first, step)` (which returns this lane's partial sum over
/// edges start + first, + step, ... below end) for every row shorter than `long_min` edges,
/// `NN_EDGE_GROUP` lanes per row, and stores the group's total at out[row][col] (empty rows
/// get 0). Every lane of a warp runs the same rounds (rows past the end or long get an empty
/// range) so all reach the group shuffles.
#[inline(always)]
fn short_row_sums(
    n_rows: u32,
    long_min: u32,
    row_ptr: *const u32,
    out: *mut f32,
    ld: u32,
    col: u32,
    mut sum_row: impl FnMut(u32, u32, u32, u32, u32) -> f32,
) {
    let per_warp = 32 / NN_EDGE_GROUP;
    let (warp, n_warps) = global_warp();
    let (group, sub) = (ptx::lane_id() / NN_EDGE_GROUP, ptx::lane_id() % NN_EDGE_GROUP);
    let mut base = warp as usize * per_warp as usize;
    while base < n_rows as usize {
        let row = base + group as usize;
        let (mut start, mut end, mut mine) = (0, 0, false);
        if row < n_rows as usize {
            (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row)), ptx::ld_nc_u32(row_ptr.add(row + 1))) };
            mine = end - start < long_min;
            if !mine {
                end = start;
            }
        }
        let sum = group_sum(sum_row(row as u32, start, end, sub, NN_EDGE_GROUP), NN_EDGE_GROUP);
        if mine && sub == 0 {
            unsafe { ptx::st_f32(out.add(at(row as u32, ld, col)), sum) };
        }
        base += n_warps as usize * per_warp as usize;
    }
}

/// The same for the row `long_rows[block]`, a thread block per row (128 bytes of dynamic
/// shared memory for the block reduction).
#[inline(always)]
fn long_row_sum(
    long_rows: *const u32,
    row_ptr: *const u32,
    out: *mut f32,
    ld: u32,
    col: u32,
    mut sum_row: impl FnMut(u32, u32, u32, u32, u32) -> f32,
) {
    let row = unsafe { ptx::ld_nc_u32(long_rows.add(ptx::ctaid_x() as usize)) };
    let (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row as usize)), ptx::ld_nc_u32(row_ptr.add(row as usize + 1))) };
    let sum = block_reduce(sum_row(row, start, end, ptx::tid_x(), ptx::ntid_x()), ptx::warp_sum, 0.0);
    if ptx::tid_x() == 0 {
        unsafe { ptx::st_f32(out.add(at(row, ld, col)), sum) };
    }
}

/// This lane's partial sum of `f(e)` over edges start + first, + step, ... below end.
#[inline(always)]
fn strided_sum(start: u32, end: u32, first: u32, step: u32, mut f: impl FnMut(usize) -> f32) -> f32 {
    let mut sum = 0f32;
    let mut e = start as usize + first as usize;
    while e < end as usize {
        sum += f(e);
        e += step as usize;
    }
    sum
}

/// dz = de * LeakyReLU'(z) at every edge slot of the rows shorter than `long_min`, and
/// ds_dst[row][head] = the row's sum of dz.
#[inline(always)]
pub unsafe fn edge_logits_backward(args: GatEdgeLogitsBackwardArgs) {
    let GatEdgeLogitsBackwardArgs { n_rows, long_min, edges: g, de, dz, ds_dst } = args;
    short_row_sums(n_rows, long_min, g.row_ptr, ds_dst, g.s_ld, g.head, |row, start, end, first, step| {
        strided_sum(start, end, first, step, |e| unsafe { dz_at(&g, de, dz, row, e) })
    });
}

/// `edge_logits_backward` for the rows in `long_rows`, a thread block per row.
#[inline(always)]
pub unsafe fn edge_logits_backward_long(args: GatEdgeLogitsBackwardLongArgs) {
    let GatEdgeLogitsBackwardLongArgs { long_rows, edges: g, de, dz, ds_dst } = args;
    long_row_sum(long_rows, g.row_ptr, ds_dst, g.s_ld, g.head, |row, start, end, first, step| {
        strided_sum(start, end, first, step, |e| unsafe { dz_at(&g, de, dz, row, e) })
    });
}

/// out[row][col] = the row's sum of `values` for every row shorter than `long_min` edges.
#[inline(always)]
pub unsafe fn edge_row_sums(args: EdgeRowSumsArgs) {
    let EdgeRowSumsArgs { n_rows, long_min, sums: s } = args;
    short_row_sums(n_rows, long_min, s.row_ptr, s.out, s.ld, s.col, |_, start, end, first, step| {
        strided_sum(start, end, first, step, |e| unsafe { ptx::ld_nc_f32(s.values.add(slot(s.slot_of, e))) })
    });
}

/// `edge_row_sums` for the rows in `long_rows`, a thread block per row.
#[inline(always)]
pub unsafe fn edge_row_sums_long(args: EdgeRowSumsLongArgs) {
    let EdgeRowSumsLongArgs { long_rows, sums: s } = args;
    long_row_sum(long_rows, s.row_ptr, s.out, s.ld, s.col, |_, start, end, first, step| {
        strided_sum(start, end, first, step, |e| unsafe { ptx::ld_nc_f32(s.values.add(slot(s.slot_of, e))) })
    });
}
