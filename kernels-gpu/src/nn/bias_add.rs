//! y[r][c] += b[c] (and `bias_relu`: y = max(y + b, 0), the bias and the ReLU after it in one
//! pass; `sum_bias_relu`: y = max(y + s x + b, 0), GIN's sum of its neighbours and itself with
//! the bias and ReLU) over the whole padded buffer (b's and x's padding is 0, so y's stays 0):
//! grid-stride over float4s; `ld4` = float4s per row (ld is a multiple of 8, so a float4 never
//! straddles two rows).

use super::grid_stride;
use crate::abi::nn::{BiasAddArgs, SumBiasReluArgs};
use crate::index::split_offset;
use crate::ptx;

#[inline(always)]
pub unsafe fn bias_add(args: BiasAddArgs) {
    unsafe { bias_then::<false>(args) }
}

/// y = max(y + b, 0): a hidden layer's bias and ReLU in one read and one write of y.
#[inline(always)]
pub unsafe fn bias_relu(args: BiasAddArgs) {
    unsafe { bias_then::<true>(args) }
}

#[inline(always)]
unsafe fn bias_then<const RELU: bool>(args: BiasAddArgs) {
    let BiasAddArgs { n4, ld4, y, b } = args;
    if ld4 == 0 {
        return; // no columns (n4 = 0 too); also lets `% ld4` compile without a panic path
    }
    for i in grid_stride(n4) {
        let bias = unsafe { ptx::ld_nc_v4_f32(b.add(4 * split_offset(i, ld4).1 as usize)) };
        let p = unsafe { y.add(4 * i as usize) };
        let v = unsafe { ptx::ld_v4_f32(p) };
        let mut o = [v[0] + bias[0], v[1] + bias[1], v[2] + bias[2], v[3] + bias[3]];
        if RELU {
            // As the ReLU kernel: NaN and -0 become 0.
            o = o.map(|x| if x > 0.0 { x } else { 0.0 });
        }
        unsafe { ptx::st_v4_f32(p, o) };
    }
}

/// y = max(y + s x + b, 0) with s = shift + alpha[0] (alpha null: s = shift), alpha read when
/// the kernel runs (GIN's learnable eps); the sum is y + s x, then the bias, as `scaled_add`
/// then `bias_relu` compute it.
#[inline(always)]
pub unsafe fn sum_bias_relu(args: SumBiasReluArgs) {
    let SumBiasReluArgs { n4, ld4, y, x, alpha, shift, b } = args;
    if ld4 == 0 {
        return;
    }
    let s = if alpha.is_null() { shift } else { shift + unsafe { ptx::ld_f32(alpha) } };
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let bias = unsafe { ptx::ld_nc_v4_f32(b.add(4 * split_offset(i, ld4).1 as usize)) };
        let xv = unsafe { ptx::ld_nc_v4_f32(x.add(o)) };
        let p = unsafe { y.add(o) };
        let v = unsafe { ptx::ld_v4_f32(p) };
        let mut out = [0f32; 4];
        for k in 0..4 {
            let z = (v[k] + s * xv[k]) + bias[k];
            out[k] = if z > 0.0 { z } else { 0.0 };
        }
        unsafe { ptx::st_v4_f32(p, out) };
    }
}
