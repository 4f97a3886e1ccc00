//! GAT's per-node attention scores: s[i][h] = <W h_i (head h), a_h>, one dot of length F per
//! node and head (never per edge), and the elementwise part of its backward (the gradient of a
//! is the column sums of `prod`, taken by the host with `col_sums`).

use super::{global_thread, grid_threads};
use crate::abi::nn::{GatScoresArgs, GatScoresBackwardArgs};
use crate::ptx;

/// s[i][h] for every (i, h) of s's padded rows (padding columns written 0), a thread each.
#[inline(always)]
pub unsafe fn scores(args: GatScoresArgs) {
    let GatScoresArgs { rows, heads, head_dim, wh_ld, s_ld, wh, a, s } = args;
    if s_ld == 0 {
        return; // no columns; also lets `/ s_ld` compile without a panic path
    }
    let n = rows * s_ld;
    let mut i = global_thread();
    while i < n {
        let (r, h) = (i / s_ld, i % s_ld);
        let mut acc = 0f32;
        if h < heads {
            let base = h * head_dim;
            for f in 0..head_dim {
                let c = (base + f) as usize;
                acc += unsafe { ptx::ld_nc_f32(wh.add((r * wh_ld) as usize + c)) * ptx::ld_nc_f32(a.add(c)) };
            }
        }
        unsafe { ptx::st_f32(s.add(i as usize), acc) };
        i += grid_threads();
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
    let n = rows * wh_ld;
    let width = heads * head_dim;
    let mut i = global_thread();
    while i < n {
        let (r, c) = (i / wh_ld, i % wh_ld);
        let mut p = 0f32;
        if c < width {
            let d = unsafe { ptx::ld_nc_f32(ds.add((r * s_ld + c / head_dim) as usize)) };
            let q = unsafe { dwh.add(i as usize) };
            unsafe { ptx::st_f32(q, ptx::ld_f32(q) + d * ptx::ld_nc_f32(a.add(c as usize))) };
            p = d * unsafe { ptx::ld_nc_f32(wh.add(i as usize)) };
        }
        unsafe { ptx::st_f32(prod.add(i as usize), p) };
        i += grid_threads();
    }
}
