//! GAT's hidden tail, ELU then dropout, in one pass, and the backward of both in one pass
//! (`ops::nn::elu_dropout`): grid-stride over float4s of whole padded buffers (padding is 0 and
//! stays 0: ELU(0) = 0).
//!
//! Forward: h = ELU(h) in place (the backward's ELU' reads it, as the unfused ELU's does) and
//! y = dropout(h), the mask drawn as the dropout kernel draws it (element i keyed `offset + i`,
//! or by its row's original id: `DropoutArgs::ids`),
//! not stored. Backward: the mask drawn again, dz = keep ? dy · scale · ELU'(h) : 0 with
//! ELU' = 1 where h > 0, else h + 1 — the unfused dropout' then ELU', in the same order. Where
//! dy is the next layer's dX = g wᵀ with g at most 8 columns wide (GAT's output layer: the
//! classes), `elu_dropout_backward_product` forms dy per element instead of reading it: the
//! n x 64 dX is never written (nor read back). With `pre`, h holds the ELU's input z (the ELU
//! and the dropout then applied inside the next layer's products, `nn/dropout_gemm.rs`):
//! ELU'(z) = e^z for z ≤ 0.

use super::col_sums::{add_to_block, flush_block};
use super::dropout::keep4_rows;
use super::elu::elu1;
use super::{global_thread, grid_stride};
use crate::abi::nn::{EluDropoutArgs, EluDropoutBackwardArgs, EluDropoutBackwardProductArgs};
use crate::ptx;
use crate::rng::DropoutStep;
use crate::translate::{div_or_zero, rem_or_zero};

/// h = ELU(h), y = dropout(h) over `n4` float4s.
#[inline(always)]
pub unsafe fn elu_dropout(args: EluDropoutArgs) {
    let EluDropoutArgs { n4, h, y, threshold, scale, seed_key, step, offset, ld4, ids } = args;
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    for i in grid_stride(n4) {
        let o = 4 * i;
        let p = unsafe { h.add(o as usize) };
        let v = unsafe { ptx::ld_v4_f32(p) };
        let keep = keep4_rows(draw, seed_key, threshold, offset, ids, ld4, i);
        let a = [elu1(v[0]), elu1(v[1]), elu1(v[2]), elu1(v[3])];
        let mut out = [0f32; 4];
        crate::unroll4!(k => {
            if keep[k] {
                out[k] = a[k] * scale;
            }
        });
        unsafe {
            ptx::st_v4_f32(p, a);
            ptx::st_v4_f32(y.add(o as usize), out);
        }
    }
}

/// Four elements' dz = keep ? dy · scale · ELU'(h) : 0 (dropout' then ELU', in that order),
/// from the ELU's output h (ELU' = h + 1 for h ≤ 0) or, with `pre`, its input (e^h).
#[inline(always)]
fn grad4(dy: [f32; 4], h: [f32; 4], keep: [bool; 4], scale: f32, pre: bool) -> [f32; 4] {
    let mut out = [0f32; 4];
    crate::unroll4!(k => {
        if keep[k] {
            let g = dy[k] * scale;
            out[k] = if h[k] > 0.0 { g } else if pre { g * ptx::exp(h[k]) } else { g * (h[k] + 1.0) };
        }
    });
    out
}

/// The four elements of h (f32, or f16 with `h16`) at flat index `o` (a multiple of 4).
#[inline(always)]
unsafe fn h4(h: *const f32, o: u64, h16: bool) -> [f32; 4] {
    if h16 {
        let [a, b] = unsafe { ptx::ld_nc_v2_u32((h as *const u16).add(o as usize) as *const u32) };
        [ptx::f16_to_f32(a as u16), ptx::f16_to_f32((a >> 16) as u16), ptx::f16_to_f32(b as u16), ptx::f16_to_f32((b >> 16) as u16)]
    } else {
        unsafe { ptx::ld_nc_v4_f32(h.add(o as usize)) }
    }
}

/// dz = keep ? dy · scale · ELU'(h) : 0 over `n4` float4s (h: the forward's ELU output).
#[inline(always)]
pub unsafe fn elu_dropout_backward(args: EluDropoutBackwardArgs) {
    let EluDropoutBackwardArgs { n4, dy, h, threshold, scale, seed_key, step, offset, dz, pre, h16, ld4, ids } = args;
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    for i in grid_stride(n4) {
        let o = 4 * i;
        let hv = unsafe { h4(h, o as u64, h16 != 0) };
        let d = unsafe { ptx::ld_nc_v4_f32(dy.add(o as usize)) };
        let out = grad4(d, hv, keep4_rows(draw, seed_key, threshold, offset, ids, ld4, i), scale, pre != 0);
        unsafe { ptx::st_v4_f32(dz.add(o as usize), out) };
    }
}

/// `elu_dropout_backward` of dy = g wᵀ formed in registers: g (rows x k, k ≤ 8, stride 8) and
/// w (cols x k, stride 8), `n4` float4s of the padded buffer (< 2^32), `q` float4s a row. wᵀ
/// waits in shared memory (8 rows of 4q floats): a thread's four columns are one 16-byte read a
/// k, consecutive across a warp's lanes (read from w in global memory, the 16 lanes of a row hit
/// 16 different rows of w: the L1 was the limit, 0.18 ms for 2^18 x 64). With `col_sums` (not
/// null; the launch's thread count a multiple of q, so a thread keeps one float4 column) dz's
/// column sums are added there too: the layer below's bias gradient, without reading dz again.
#[inline(always)]
pub unsafe fn elu_dropout_backward_product(args: EluDropoutBackwardProductArgs) {
    let EluDropoutBackwardProductArgs { n4, q, cols, g, w, h, threshold, scale, seed_key, step, offset, dz, col_sums, pre, h16, ids } =
        args;
    let ws = ptx::dyn_smem_base();
    let width = 4 * q;
    // The block's column sums, after wᵀ.
    let sums = ws + 4 * 8 * width;
    let summed = !col_sums.is_null();
    let mut e = ptx::tid_x();
    while e < 8 * width {
        let (k, c) = (div_or_zero(e, width), rem_or_zero(e, width));
        let v = if c < cols { unsafe { ptx::ld_nc_f32(w.add(8 * c as usize + k as usize)) } } else { 0.0 };
        unsafe { ptx::st_shared_f32(ws + 4 * e, v) };
        if summed && e < width {
            unsafe { ptx::st_shared_f32(sums + 4 * e, 0.0) };
        }
        e += ptx::ntid_x();
    }
    ptx::sync_threads();
    let mut acc = [0f32; 4];
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    for i in grid_stride(n4 as u64) {
        let (r, c) = (div_or_zero(i as u32, q), 4 * rem_or_zero(i as u32, q));
        let (g0, g1) = unsafe { (ptx::ld_nc_v4_f32(g.add(8 * r as usize)), ptx::ld_nc_v4_f32(g.add(8 * r as usize + 4))) };
        let gr = [g0[0], g0[1], g0[2], g0[3], g1[0], g1[1], g1[2], g1[3]];
        let mut d = [0f32; 4];
        for (k, gk) in gr.iter().enumerate() {
            let wk = unsafe { ptx::ld_shared_v4_u32(ws + 4 * (k as u32 * width + c)) };
            crate::unroll4!(j => {
                d[j] = ptx::fma_f32(*gk, f32::from_bits(wk[j]), d[j]);
            });
        }
        let o = 4 * i;
        let hv = unsafe { h4(h, o as u64, h16 != 0) };
        let keep = if ids.is_null() {
            draw.keep4(seed_key, offset + o, threshold)
        } else {
            draw.keep4(seed_key, offset + super::dropout::key_row(ids, r) * width as u64 + c as u64, threshold)
        };
        let out = grad4(d, hv, keep, scale, pre != 0);
        unsafe { ptx::st_v4_f32(dz.add(o as usize), out) };
        crate::unroll4!(k => {
            acc[k] += out[k];
        });
    }
    if summed {
        unsafe { add_to_block(acc, rem_or_zero(global_thread(), q), q, sums) };
        ptx::sync_threads();
        unsafe { flush_block(sums, cols, col_sums) };
    }
}
