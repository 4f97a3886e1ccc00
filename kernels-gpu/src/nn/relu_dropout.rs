//! A hidden layer's bias, ReLU and dropout in one pass, and the backward of ReLU and dropout
//! together (`ops::nn::relu_dropout`): grid-stride over float4s of whole padded buffers (ld is a
//! multiple of 8, so a float4 never straddles two rows; padding is 0 and stays 0).
//!
//! Forward: y = dropout(max(z + b, 0)), the mask drawn as the dropout kernel draws it (element
//! (r, c) keyed `offset + r ld + c`), not stored. Backward: with a = max(z + b, 0) ≥ 0 and
//! y = a · keep · scale, y > 0 exactly where the ReLU passed and the element was kept, so
//! dz = y > 0 ? dy · scale : 0 — the two backwards from y alone, no mask and no a.
//!
//! In place: y is z's own buffer (forward) and dz is dy's (backward), so that a hidden layer
//! holds no dropped copy and no gradient copy beside them (bench/NOTES.md, issue 42 item 4).
//! Each thread reads its float4 before it writes it and no other thread reads it, so in place is
//! exact; the kernels read that buffer with plain loads (`ld.global`), not the read-only path,
//! which requires the data to stay unwritten while the kernel runs.

use super::dropout::keep4_rows;
use super::grid_stride;
use crate::abi::nn::{BiasReluDropoutArgs, ReluDropoutBackwardArgs};
use crate::index::split_offset;
use crate::ptx;
use crate::rng::DropoutStep;

/// y = dropout(max(z + b, 0)) over `n4` float4s, z and y one buffer.
#[inline(always)]
pub unsafe fn bias_relu_dropout_in_place(args: BiasReluDropoutArgs) {
    let BiasReluDropoutArgs { n4, ld4, z, b, y, threshold, scale, seed_key, step, offset, ids } = args;
    if ld4 == 0 {
        return; // no columns (n4 = 0 too); also lets `% ld4` compile without a panic path
    }
    let draw = DropoutStep::new(seed_key, unsafe { ptx::ld_nc_u32(step) });
    for i in grid_stride(n4) {
        let o = 4 * i;
        let bias = unsafe { ptx::ld_nc_v4_f32(b.add(4 * split_offset(i, ld4).1 as usize)) };
        let v = unsafe { ptx::ld_v4_f32(z.add(o as usize)) };
        let keep = keep4_rows(draw, seed_key, threshold, offset, ids, ld4, i);
        let mut out = [0f32; 4];
        crate::unroll4!(k => {
            // As the ReLU kernel: NaN and -0 become 0; then as the dropout kernel.
            let a = v[k] + bias[k];
            if a > 0.0 && keep[k] {
                out[k] = a * scale;
            }
        });
        unsafe { ptx::st_v4_f32(y.add(o as usize), out) };
    }
}

/// dz = y > 0 ? dy · scale : 0 over `n4` float4s (y: the forward's output), dy and dz one
/// buffer.
#[inline(always)]
pub unsafe fn relu_dropout_backward_in_place(args: ReluDropoutBackwardArgs) {
    let ReluDropoutBackwardArgs { n4, dy, y, scale, dz } = args;
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let yv = unsafe { ptx::ld_nc_v4_f32(y.add(o)) };
        let d = unsafe { ptx::ld_v4_f32(dy.add(o)) };
        let g = |k: usize| if yv[k] > 0.0 { d[k] * scale } else { 0.0 };
        unsafe { ptx::st_v4_f32(dz.add(o), [g(0), g(1), g(2), g(3)]) };
    }
}
