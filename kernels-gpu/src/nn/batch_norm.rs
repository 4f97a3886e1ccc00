//! BatchNorm1d over the rows of a matrix (one set of statistics per column), in four steps the
//! launcher chains (`host/ops/nn/batch_norm.rs`):
//! - `batch_norm_sq`: sq[c] += sum_r (x[r][c] - sum[c] / rows)^2, after `col_sums` gave `sum`
//!   (two passes: the centred sum of squares does not cancel the way E[x^2] - E[x]^2 does);
//! - `batch_norm_finish`: a thread per column turns (sum, sq) into mean and 1 / sqrt(var + eps)
//!   with the biased variance and updates the running statistics (unbiased variance, as torch),
//!   or in evaluation reads the running statistics;
//! - `batch_norm_apply`: y = (x - mean) * inv_std * gamma + beta, elementwise;
//! - backward: `batch_norm_backward_sums` (dbeta = sum_r dy, dgamma = sum_r dy * xhat), then
//!   `batch_norm_backward` (dx = gamma * inv_std / N * (N dy - dbeta - xhat dgamma)).
//!
//! A device count of live rows (`live`, null: every row) restricts every step to the leading
//! rows: a batch padded to a model's capacity keeps its padding out of the statistics, and the
//! padded rows' outputs and input gradients are written 0 (`sum` replaces `col_sums` for it).
//!
//! The per-column vectors are `1 x cols` matrices with the same padded stride as x and padding
//! 0, so the elementwise kernels run over whole padded rows and write padding 0 (gamma's padding
//! is 0).

use super::{global_thread, grid_stride};
use crate::abi::nn::{
    BatchNormApplyArgs, BatchNormBackwardArgs, BatchNormBackwardSumsArgs, BatchNormFinishArgs, BatchNormSqArgs, BatchNormSumArgs,
};
use crate::index::split_offset;
use crate::ptx;

#[inline(always)]
unsafe fn v4(p: *const f32, c4: u32) -> [f32; 4] {
    unsafe { ptx::ld_nc_v4_f32(p.add(4 * c4 as usize)) }
}

/// The rows that count: `rows`, or the device count `live` when given (never more than `rows`).
#[inline(always)]
unsafe fn live_rows(rows: u32, live: *const u32) -> u32 {
    if live.is_null() { rows } else { rows.min(unsafe { ptx::ld_u32(live) }) }
}

/// out[k][c] += sum_r f(r, c4)[k][c % 4] for every column c < cols: the tiling of `col_sums`
/// (narrow rows: `blockDim / ld4` rows per step combined in `16 * N * ld4` bytes of shared
/// memory; wider rows: a thread per float4 column) with `N` sums at once.
#[inline(always)]
unsafe fn col_reduce<const N: usize>(rows: u32, cols: u32, ld4: u32, f: impl Fn(u32, u32) -> [[f32; 4]; N], out: [*mut f32; N]) {
    let (t, nt) = (ptx::tid_x(), ptx::ntid_x());
    let (b, nb) = (ptx::ctaid_x(), ptx::nctaid_x());
    if ld4 == 0 {
        return;
    }
    let width = 4 * ld4; // floats per sum in shared memory
    if ld4 <= nt {
        let base = ptx::dyn_smem_base();
        let mut c = t;
        while c < N as u32 * width {
            unsafe { ptx::st_shared_f32(base + 4 * c, 0.0) };
            c += nt;
        }
        ptx::sync_threads();
        let rpi = nt / ld4;
        if t < rpi * ld4 {
            let (c4, rsub) = (t % ld4, t / ld4);
            let mut acc = [[0f32; 4]; N];
            let mut r = b * rpi + rsub;
            while r < rows {
                let v = f(r, c4);
                for k in 0..N {
                    for j in 0..4 {
                        acc[k][j] += v[k][j];
                    }
                }
                r += nb * rpi;
            }
            for k in 0..N {
                for j in 0..4 {
                    unsafe { ptx::red_shared_add_f32(base + 4 * (k as u32 * width + 4 * c4 + j as u32), acc[k][j]) };
                }
            }
        }
        ptx::sync_threads();
        let mut c = t;
        while c < cols {
            for k in 0..N {
                unsafe { ptx::red_add_f32(out[k].add(c as usize), ptx::ld_shared_f32(base + 4 * (k as u32 * width + c))) };
            }
            c += nt;
        }
    } else {
        let mut c4 = t;
        while c4 < ld4 {
            let mut acc = [[0f32; 4]; N];
            let mut r = b;
            while r < rows {
                let v = f(r, c4);
                for k in 0..N {
                    for j in 0..4 {
                        acc[k][j] += v[k][j];
                    }
                }
                r += nb;
            }
            for k in 0..N {
                for j in 0..4 {
                    let c = 4 * c4 + j as u32;
                    if c < cols {
                        unsafe { ptx::red_add_f32(out[k].add(c as usize), acc[k][j]) };
                    }
                }
            }
            c4 += nt;
        }
    }
}

#[inline(always)]
pub unsafe fn batch_norm_sum(args: BatchNormSumArgs) {
    let BatchNormSumArgs { rows, cols, ld4, live, x, sum } = args;
    let rows = unsafe { live_rows(rows, live) };
    let ld = 4 * ld4 as usize;
    let f = |r: u32, c4: u32| [unsafe { v4(x.add(r as usize * ld), c4) }];
    unsafe { col_reduce::<1>(rows, cols, ld4, f, [sum]) };
}

#[inline(always)]
pub unsafe fn batch_norm_sq(args: BatchNormSqArgs) {
    let BatchNormSqArgs { rows, cols, ld4, live, x, sum, sq } = args;
    let rows = unsafe { live_rows(rows, live) };
    let ld = 4 * ld4 as usize;
    let inv_n = 1.0 / rows.max(1) as f32;
    let f = |r: u32, c4: u32| {
        let (v, s) = unsafe { (v4(x.add(r as usize * ld), c4), v4(sum, c4)) };
        let mut d = [0f32; 4];
        for j in 0..4 {
            let e = v[j] - s[j] * inv_n;
            d[j] = e * e;
        }
        [d]
    };
    unsafe { col_reduce::<1>(rows, cols, ld4, f, [sq]) };
}

#[inline(always)]
pub unsafe fn batch_norm_finish(args: BatchNormFinishArgs) {
    let BatchNormFinishArgs { rows, cols, live, train, eps, momentum, sum, sq, running_mean, running_var, mean, inv_std } = args;
    let c = global_thread();
    if c >= cols {
        return;
    }
    let rows = unsafe { live_rows(rows, live) };
    let c = c as usize;
    let (m, var) = if train != 0 {
        let n = rows.max(1) as f32;
        let m = unsafe { ptx::ld_f32(sum.add(c)) } / n;
        let ss = unsafe { ptx::ld_f32(sq.add(c)) };
        // torch updates the running variance with the unbiased estimate (N - 1); one row has none.
        let unbiased = if rows > 1 { ss / (rows - 1) as f32 } else { ss };
        unsafe {
            let rm = running_mean.add(c);
            let rv = running_var.add(c);
            ptx::st_f32(rm, (1.0 - momentum) * ptx::ld_f32(rm) + momentum * m);
            ptx::st_f32(rv, (1.0 - momentum) * ptx::ld_f32(rv) + momentum * unbiased);
        }
        (m, ss / n)
    } else {
        unsafe { (ptx::ld_f32(running_mean.add(c)), ptx::ld_f32(running_var.add(c))) }
    };
    unsafe {
        ptx::st_f32(mean.add(c), m);
        ptx::st_f32(inv_std.add(c), 1.0 / ptx::sqrt(var + eps));
    }
}

#[inline(always)]
pub unsafe fn batch_norm_apply(args: BatchNormApplyArgs) {
    let BatchNormApplyArgs { n4, ld4, live, x, y, mean, inv_std, gamma, beta } = args;
    if ld4 == 0 {
        return; // no columns; also lets `% ld4` compile without a panic path
    }
    let rows = unsafe { live_rows(u32::MAX, live) };
    for i in grid_stride(n4) {
        let (r, c4) = split_offset(i, ld4);
        let o = 4 * i as usize;
        if r >= rows {
            unsafe { ptx::st_v4_f32(y.add(o), [0.0; 4]) };
            continue;
        }
        let (v, m, s, g, be) = unsafe { (v4(x.add(o), 0), v4(mean, c4), v4(inv_std, c4), v4(gamma, c4), v4(beta, c4)) };
        let mut out = [0f32; 4];
        for j in 0..4 {
            out[j] = (v[j] - m[j]) * s[j] * g[j] + be[j];
        }
        unsafe { ptx::st_v4_f32(y.add(o), out) };
    }
}

#[inline(always)]
pub unsafe fn batch_norm_backward_sums(args: BatchNormBackwardSumsArgs) {
    let BatchNormBackwardSumsArgs { rows, cols, ld4, live, x, dy, mean, inv_std, dgamma, dbeta } = args;
    let rows = unsafe { live_rows(rows, live) };
    let ld = 4 * ld4 as usize;
    let f = |r: u32, c4: u32| {
        let at = r as usize * ld;
        let (v, d, m, s) = unsafe { (v4(x.add(at), c4), v4(dy.add(at), c4), v4(mean, c4), v4(inv_std, c4)) };
        let mut dg = [0f32; 4];
        for j in 0..4 {
            dg[j] = d[j] * (v[j] - m[j]) * s[j];
        }
        [dg, d]
    };
    unsafe { col_reduce::<2>(rows, cols, ld4, f, [dgamma, dbeta]) };
}

#[inline(always)]
pub unsafe fn batch_norm_backward(args: BatchNormBackwardArgs) {
    let BatchNormBackwardArgs { n4, ld4, rows, live, x, dy, mean, inv_std, gamma, dgamma, dbeta, dx } = args;
    if ld4 == 0 {
        return; // no columns; also lets `% ld4` compile without a panic path
    }
    let rows = unsafe { live_rows(rows, live) };
    let n = rows as f32;
    let inv_n = 1.0 / rows.max(1) as f32;
    for i in grid_stride(n4) {
        let (r, c4) = split_offset(i, ld4);
        let o = 4 * i as usize;
        if r >= rows {
            unsafe { ptx::st_v4_f32(dx.add(o), [0.0; 4]) };
            continue;
        }
        let (v, d, m, s, g) = unsafe { (v4(x.add(o), 0), v4(dy.add(o), 0), v4(mean, c4), v4(inv_std, c4), v4(gamma, c4)) };
        let (dg, db) = unsafe { (v4(dgamma, c4), v4(dbeta, c4)) };
        let mut out = [0f32; 4];
        for j in 0..4 {
            let xhat = (v[j] - m[j]) * s[j];
            out[j] = g[j] * s[j] * inv_n * (n * d[j] - db[j] - xhat * dg[j]);
        }
        unsafe { ptx::st_v4_f32(dx.add(o), out) };
    }
}
