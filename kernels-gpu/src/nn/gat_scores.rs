//! GAT's per-node attention scores: s[i][h] = <W h_i (head h), a_h>, one dot of length F per
//! node and head (never per edge), for both attention vectors at once (Wh read once); and
//! their backward, which adds both vectors' parts to dWh (unless the fused attention did) and
//! sums the vectors' gradients per column in the same pass (no n x (H F) product matrix, no
//! separate column sums).

use super::{global_thread, grid_stride, grid_threads};
use crate::abi::nn::{GatScoresArgs, GatScoresBackwardArgs, gat_scores_one_head_rows as one_head_rows};
use crate::index::{elem_offset, split_offset};
use crate::ptx;
use crate::translate::{div_or_zero, rem_or_zero};

/// s_src[i][h] and s_dst[i][h] for every (i, h) of the scores' padded rows (padding columns
/// written 0), a thread each: a warp's stores are whole rows (a thread per (node, head) with
/// the padding written by the row's last head made the stores of a one-head layer 32-way
/// scattered: 0.054 -> 0.088 ms for both layers on R-MAT 2^18).
#[inline(always)]
pub unsafe fn scores(args: GatScoresArgs) {
    let GatScoresArgs { rows, heads, head_dim, wh_ld, s_ld, wh, a_src, a_dst, s_src, s_dst } = args;
    if s_ld == 0 {
        return; // no columns; also lets `/ s_ld` compile without a panic path
    }
    if one_head_rows(heads, wh_ld, s_ld) {
        unsafe { scores_one_head(args) };
        return;
    }
    for i in grid_stride(rows as u64 * s_ld as u64) {
        let (r, h) = split_offset(i, s_ld);
        let (mut src, mut dst) = (0f32, 0f32);
        if h < heads {
            let base = h * head_dim;
            let row = elem_offset(r, wh_ld, 0) as usize;
            if head_dim % 4 == 0 {
                // 16-byte loads (wh_ld is a multiple of 8, every head starts at a multiple of
                // 4): a quarter of the load instructions.
                let mut f = 0;
                while f < head_dim {
                    let c = (base + f) as usize;
                    let (x, s, d) =
                        unsafe { (ptx::ld_nc_v4_f32(wh.add(row + c)), ptx::ld_nc_v4_f32(a_src.add(c)), ptx::ld_nc_v4_f32(a_dst.add(c))) };
                    for k in 0..4 {
                        src = ptx::fma_f32(x[k], s[k], src);
                        dst = ptx::fma_f32(x[k], d[k], dst);
                    }
                    f += 4;
                }
            } else {
                for f in 0..head_dim {
                    let c = (base + f) as usize;
                    let x = unsafe { ptx::ld_nc_f32(wh.add(row + c)) };
                    src += x * unsafe { ptx::ld_nc_f32(a_src.add(c)) };
                    dst += x * unsafe { ptx::ld_nc_f32(a_dst.add(c)) };
                }
            }
        }
        unsafe { ptx::st_f32(s_src.add(i as usize), src) };
        unsafe { ptx::st_f32(s_dst.add(i as usize), dst) };
    }
}

/// One head's scores a thread a row (`gat_scores_one_head_rows`): Wh's row in two 16-byte
/// loads, the score row (the score and 7 zeros of padding) in two 16-byte stores. (A thread per padded column left 7 of 8
/// threads storing zeros and the others one load chain each: 21 us for R-MAT 2^18.)
#[inline(always)]
unsafe fn scores_one_head(args: GatScoresArgs) {
    let GatScoresArgs { rows, head_dim, wh, a_src, a_dst, s_src, s_dst, .. } = args;
    let (a, d) = unsafe {
        ([ptx::ld_nc_v4_f32(a_src), ptx::ld_nc_v4_f32(a_src.add(4))], [ptx::ld_nc_v4_f32(a_dst), ptx::ld_nc_v4_f32(a_dst.add(4))])
    };
    for r in grid_stride(rows as u64) {
        let o = 8 * r as usize;
        let x = unsafe { [ptx::ld_nc_v4_f32(wh.add(o)), ptx::ld_nc_v4_f32(wh.add(o + 4))] };
        let (mut src, mut dst) = (0f32, 0f32);
        for c in 0..8 {
            // (Columns past the head's are wh's padding, zero, but the vectors' may not be.)
            if (c as u32) < head_dim {
                src = ptx::fma_f32(x[c / 4][c % 4], a[c / 4][c % 4], src);
                dst = ptx::fma_f32(x[c / 4][c % 4], d[c / 4][c % 4], dst);
            }
        }
        unsafe {
            ptx::st_v4_f32(s_src.add(o), [src, 0.0, 0.0, 0.0]);
            ptx::st_v4_f32(s_src.add(o + 4), [0.0; 4]);
            ptx::st_v4_f32(s_dst.add(o), [dst, 0.0, 0.0, 0.0]);
            ptx::st_v4_f32(s_dst.add(o + 4), [0.0; 4]);
        }
    }
}

/// The backward (`dwh` null: the vectors' gradients only, where the fused attention's column
/// pass already added ds ⊗ a to dWh; for heads of 8 columns [`vector_grads_by_head`]). A
/// thread keeps one column c = t % cols of `cols = min(wh_ld, blockDim)` per pass (columns c,
/// c + cols, ...) over the rows `ctaid * rpi + t / cols + k * gridDim * rpi` (`rpi = blockDim /
/// cols` rows a block step), adding its part of dwh per element and summing both gradients of
/// a[c] in registers; then per column into shared memory and one atomic per column and block
/// (or straight to the atomics without `smem`).
#[inline(always)]
pub unsafe fn scores_backward(args: GatScoresBackwardArgs) {
    let GatScoresBackwardArgs { rows, heads, head_dim, wh_ld, s_ld, smem, wh, a_src, a_dst, ds_src, ds_dst, dwh, da_src, da_dst } = args;
    let (t, nt) = (ptx::tid_x(), ptx::ntid_x());
    let (b, nb) = (ptx::ctaid_x(), ptx::nctaid_x());
    if wh_ld == 0 || head_dim == 0 {
        return; // no columns; also lets the divisions compile without a panic path
    }
    if smem != 0 && dwh.is_null() && head_rows(heads, head_dim, wh_ld) {
        unsafe { vector_grads_by_head(args) };
        return;
    }
    let width = heads * head_dim;
    let cols = if wh_ld < nt { wh_ld } else { nt };
    let rpi = div_or_zero(nt, cols);
    let base = ptx::dyn_smem_base();
    if smem != 0 {
        let mut c = t;
        while c < 2 * wh_ld {
            unsafe { ptx::st_shared_f32(base + 4 * c, 0.0) };
            c += nt;
        }
        ptx::sync_threads();
    }
    if t < rpi * cols {
        let mut c = rem_or_zero(t, cols);
        while c < width {
            let (h, a_s, a_d) = unsafe { (c / head_dim, ptx::ld_nc_f32(a_src.add(c as usize)), ptx::ld_nc_f32(a_dst.add(c as usize))) };
            let (mut g_s, mut g_d) = (0f32, 0f32);
            let mut r = b * rpi + div_or_zero(t, cols);
            let step = nb * rpi;
            // Row r's (ds_src, ds_dst, wh); then dwh's part and the sums.
            let load = |r: u32| unsafe {
                (
                    ptx::ld_nc_f32(ds_src.add(elem_offset(r, s_ld, h) as usize)),
                    ptx::ld_nc_f32(ds_dst.add(elem_offset(r, s_ld, h) as usize)),
                    ptx::ld_nc_f32(wh.add(elem_offset(r, wh_ld, c) as usize)),
                )
            };
            let mut use_ = |r: u32, (d_s, d_d, x): (f32, f32, f32)| {
                if !dwh.is_null() {
                    let q = unsafe { dwh.add(elem_offset(r, wh_ld, c) as usize) };
                    unsafe { ptx::st_f32(q, ptx::ld_f32(q) + d_s * a_s + d_d * a_d) };
                }
                g_s += d_s * x;
                g_d += d_d * x;
            };
            // Four rows' loads in flight before the first is used (a thread's rows are a
            // chain otherwise: one load latency a row).
            while r.saturating_add(3 * step) < rows {
                let v = [load(r), load(r + step), load(r + 2 * step), load(r + 3 * step)];
                crate::unroll4!(u => {
                    use_(r + u as u32 * step, v[u]);
                });
                r += 4 * step;
            }
            while r < rows {
                use_(r, load(r));
                r += step;
            }
            if smem != 0 {
                unsafe { ptx::red_shared_add_f32(base + 4 * c, g_s) };
                unsafe { ptx::red_shared_add_f32(base + 4 * (wh_ld + c), g_d) };
            } else {
                unsafe { ptx::red_add_f32(da_src.add(c as usize), g_s) };
                unsafe { ptx::red_add_f32(da_dst.add(c as usize), g_d) };
            }
            c += cols;
        }
    }
    if smem != 0 {
        ptx::sync_threads();
        let mut c = t;
        while c < width {
            unsafe { ptx::red_add_f32(da_src.add(c as usize), ptx::ld_shared_f32(base + 4 * c)) };
            unsafe { ptx::red_add_f32(da_dst.add(c as usize), ptx::ld_shared_f32(base + 4 * (wh_ld + c))) };
            c += nt;
        }
    }
}

/// Whether [`vector_grads_by_head`] takes the scores' backward: heads of 8 columns filling Wh's
/// rows, 1, 2, 4 or 8 of them (so a thread's head is fixed across its grid-stride steps).
#[inline(always)]
fn head_rows(heads: u32, head_dim: u32, wh_ld: u32) -> bool {
    head_dim == 8 && wh_ld == 8 * heads && heads <= 8 && heads & (heads - 1) == 0
}

/// The vectors' gradients alone (no dWh), a thread per (row, head): its head's 8 columns of Wh
/// in two 16-byte loads (a warp reads whole rows), both score gradients, 16 sums in registers;
/// the warp's lanes of a head add by shuffles, its first lanes into the block's sums in shared
/// memory, one atomic per column and block. (A thread per column over strided rows read a
/// score pair per element: 47 us at 54 % DRAM for R-MAT 2^18 x 64.)
#[inline(always)]
unsafe fn vector_grads_by_head(args: GatScoresBackwardArgs) {
    let GatScoresBackwardArgs { rows, heads, wh_ld, s_ld, wh, ds_src, ds_dst, da_src, da_dst, .. } = args;
    let base = ptx::dyn_smem_base();
    let mut c = ptx::tid_x();
    while c < 2 * wh_ld {
        unsafe { ptx::st_shared_f32(base + 4 * c, 0.0) };
        c += ptx::ntid_x();
    }
    ptx::sync_threads();
    // The grid's threads are a multiple of heads (a power of two below the block's 256).
    let t = global_thread();
    let h = t & (heads - 1);
    let step = grid_threads() >> heads.trailing_zeros();
    let (mut gs, mut gd) = ([0f32; 8], [0f32; 8]);
    let mut r = t >> heads.trailing_zeros();
    while r < rows {
        let o = elem_offset(r, wh_ld, 8 * h) as usize;
        let q = elem_offset(r, s_ld, h) as usize;
        let (x0, x1, d_s, d_d) = unsafe {
            (ptx::ld_nc_v4_f32(wh.add(o)), ptx::ld_nc_v4_f32(wh.add(o + 4)), ptx::ld_nc_f32(ds_src.add(q)), ptx::ld_nc_f32(ds_dst.add(q)))
        };
        for k in 0..4 {
            gs[k] = ptx::fma_f32(d_s, x0[k], gs[k]);
            gs[4 + k] = ptx::fma_f32(d_s, x1[k], gs[4 + k]);
            gd[k] = ptx::fma_f32(d_d, x0[k], gd[k]);
            gd[4 + k] = ptx::fma_f32(d_d, x1[k], gd[4 + k]);
        }
        r += step;
    }
    // Lanes l and l + heads, l + 2 heads, ... hold the same head.
    let mut off = heads;
    while off < 32 {
        for k in 0..8 {
            gs[k] += ptx::shfl_xor_f32(gs[k], off);
            gd[k] += ptx::shfl_xor_f32(gd[k], off);
        }
        off <<= 1;
    }
    if ptx::lane_id() < heads {
        for k in 0..8 {
            let c = 8 * h + k as u32;
            unsafe { ptx::red_shared_add_f32(base + 4 * c, gs[k]) };
            unsafe { ptx::red_shared_add_f32(base + 4 * (wh_ld + c), gd[k]) };
        }
    }
    ptx::sync_threads();
    let mut c = ptx::tid_x();
    while c < wh_ld {
        unsafe { ptx::red_add_f32(da_src.add(c as usize), ptx::ld_shared_f32(base + 4 * c)) };
        unsafe { ptx::red_add_f32(da_dst.add(c as usize), ptx::ld_shared_f32(base + 4 * (wh_ld + c))) };
        c += ptx::ntid_x();
    }
}
