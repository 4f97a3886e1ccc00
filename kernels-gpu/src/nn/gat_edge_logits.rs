//! GAT's edge logits of one head, e_ij = LeakyReLU(s_dst[i] + s_src[j]), from the per-node
//! scores, their backward (dz per edge and its row sums = ds_dst), and plain row sums of edge
//! values (ds_src: the row sums of dz laid out for the transpose). A warp per row (grid-stride
//! over rows), lanes over the row's edges. Values in CSR order (`slot_of` null) or at
//! `slot_of[e]`.

use super::global_warp;
use crate::abi::nn::{EdgeRowSumsArgs, GatEdgeLogitsArgs, GatEdgeLogitsBackwardArgs, GatEdges};
use crate::ptx;

/// Where edge `e`'s value lives.
#[inline(always)]
unsafe fn slot(slot_of: *const u32, e: u32) -> usize {
    if slot_of.is_null() { e as usize } else { unsafe { ptx::ld_nc_u32(slot_of.add(e as usize)) as usize } }
}

/// Calls `f(row, start, end)` for the rows of this warp (every lane the same rows).
#[inline(always)]
fn for_each_warp_row(n_rows: u32, row_ptr: *const u32, mut f: impl FnMut(u32, u32, u32)) {
    let (mut row, n_warps) = global_warp();
    while row < n_rows {
        let (start, end) = unsafe { (ptx::ld_nc_u32(row_ptr.add(row as usize)), ptx::ld_nc_u32(row_ptr.add(row as usize + 1))) };
        f(row, start, end);
        row += n_warps;
    }
}

/// The pre-activation z of edge `e` in row `row`.
#[inline(always)]
unsafe fn z(g: &GatEdges, row: u32, e: u32) -> f32 {
    let col = unsafe { ptx::ld_nc_u32(g.col_idx.add(e as usize)) };
    unsafe { ptx::ld_nc_f32(g.s_dst.add((row * g.s_ld + g.head) as usize)) + ptx::ld_nc_f32(g.s_src.add((col * g.s_ld + g.head) as usize)) }
}

#[inline(always)]
pub unsafe fn edge_logits(args: GatEdgeLogitsArgs) {
    let GatEdgeLogitsArgs { edges: g, logits } = args;
    for_each_warp_row(g.n_rows, g.row_ptr, |row, start, end| {
        let mut e = start + ptx::lane_id();
        while e < end {
            let v = unsafe { z(&g, row, e) };
            unsafe { ptx::st_f32(logits.add(slot(g.slot_of, e)), if v > 0.0 { v } else { g.slope * v }) };
            e += 32;
        }
    });
}

#[inline(always)]
pub unsafe fn edge_logits_backward(args: GatEdgeLogitsBackwardArgs) {
    let GatEdgeLogitsBackwardArgs { edges: g, de, dz, ds_dst } = args;
    for_each_warp_row(g.n_rows, g.row_ptr, |row, start, end| {
        let mut sum = 0f32;
        let mut e = start + ptx::lane_id();
        while e < end {
            let k = unsafe { slot(g.slot_of, e) };
            let d = unsafe { ptx::ld_nc_f32(de.add(k)) };
            let v = if unsafe { z(&g, row, e) } > 0.0 { d } else { g.slope * d };
            unsafe { ptx::st_f32(dz.add(k), v) };
            sum += v;
            e += 32;
        }
        let sum = ptx::warp_sum(sum);
        if ptx::lane_id() == 0 {
            unsafe { ptx::st_f32(ds_dst.add((row * g.s_ld + g.head) as usize), sum) };
        }
    });
}

#[inline(always)]
pub unsafe fn edge_row_sums(args: EdgeRowSumsArgs) {
    let EdgeRowSumsArgs { n_rows, col, ld, row_ptr, slot_of, values, out } = args;
    for_each_warp_row(n_rows, row_ptr, |row, start, end| {
        let mut sum = 0f32;
        let mut e = start + ptx::lane_id();
        while e < end {
            sum += unsafe { ptx::ld_nc_f32(values.add(slot(slot_of, e))) };
            e += 32;
        }
        let sum = ptx::warp_sum(sum);
        if ptx::lane_id() == 0 {
            unsafe { ptx::st_f32(out.add((row * ld + col) as usize), sum) };
        }
    });
}
