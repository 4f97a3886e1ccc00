//! GAT's per-node attention scores: s[i][h] = <W h_i (head h), a_h>, one dot of length F per
//! node and head (never per edge), and the elementwise part of its backward (the gradient of a
//! is the column sums of `prod`, taken by the host with `col_sums`).

use super::grid_stride;
use crate::index::{elem_offset, split_offset};
use crate::abi::nn::{GatScoresArgs, GatScoresBackwardArgs};
use crate::ptx;

/// s[i][h] for every (i, h) of s's padded rows (padding columns written 0), a thread each.
#[inline(always)]
pub unsafe fn scores(args: GatScoresArgs) {
    let GatScoresArgs { rows, heads, head_dim, wh_ld, s_ld, wh, a, s } = args;
    if s_ld == 0 {
        return; // no columns; also lets `/ s_ld` compile without a panic path
    }
    for i in grid_stride(rows as u64 * s_ld as u64) {
        let (r, h) = split_offset(i, s_ld);
        let mut acc = 0f32;
        if h < heads {
            let base = h * head_dim;
            let row = elem_offset(r, wh_ld, 0) as usize;
            for f in 0..head_dim {
                let c = (base + f) as usize;
                acc += unsafe { ptx::ld_nc_f32(wh.add(row + c)) * ptx::ld_nc_f32(a.add(c)) };
            }
        }
        unsafe { ptx::st_f32(s.add(i as usize), acc) };
    }
}

/// For every element (i, c) of wh's padded rows, with d = ds[i][c / head_dim]:
/// dwh[i][c] += d a[c] and prod[i][c] = d wh[i][c] (padding: dwh untouched, prod 0).
#[inline(always)]
pub unsafe fn scores_backward(args: GatScoresBackwardArgs) {
    let GatScoresBackwardArgs { rows, heads, head_dim, wh_ld, s_ld, wh, a, ds, dwh, prod } = args;
    if wh_ld == 0 || head_dim == 0 {
        return; // no columns; also lets the divisions compile without a panic path
    }
    let width = heads * head_dim;
    for i in grid_stride(rows as u64 * wh_ld as u64) {
        let (r, c) = split_offset(i, wh_ld);
        let mut p = 0f32;
        if c < width {
            let d = unsafe { ptx::ld_nc_f32(ds.add(elem_offset(r, s_ld, c / head_dim) as usize)) };
            let q = unsafe { dwh.add(i as usize) };
            unsafe { ptx::st_f32(q, ptx::ld_f32(q) + d * ptx::ld_nc_f32(a.add(c as usize))) };
            p = d * unsafe { ptx::ld_nc_f32(wh.add(i as usize)) };
        }
        unsafe { ptx::st_f32(prod.add(i as usize), p) };
    }
}
