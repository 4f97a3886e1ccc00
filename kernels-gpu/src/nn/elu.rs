//! ELU (alpha = 1) and its backward, in place over whole padded buffers (ELU(0) = 0, so the
//! padding stays 0): grid-stride over float4s.

use super::grid_stride;
use crate::abi::nn::{EluArgs, EluBackwardArgs};
use crate::ptx;

/// ELU (alpha 1) of one value.
#[inline(always)]
pub(crate) fn elu1(v: f32) -> f32 {
    if v > 0.0 { v } else { ptx::exp(v) - 1.0 }
}

/// x = ELU(x) over `n4` float4s.
#[inline(always)]
pub unsafe fn elu(args: EluArgs) {
    let EluArgs { n4, x } = args;
    for i in grid_stride(n4) {
        let p = unsafe { x.add(4 * i as usize) };
        let v = unsafe { ptx::ld_v4_f32(p) };
        unsafe { ptx::st_v4_f32(p, [elu1(v[0]), elu1(v[1]), elu1(v[2]), elu1(v[3])]) };
    }
}

/// dy *= ELU'(x) over `n4` float4s, from the output y: 1 where y > 0, else e^x = y + 1.
#[inline(always)]
pub unsafe fn elu_backward(args: EluBackwardArgs) {
    let EluBackwardArgs { n4, y, dy } = args;
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let yv = unsafe { ptx::ld_nc_v4_f32(y.add(o)) };
        let p = unsafe { dy.add(o) };
        let d = unsafe { ptx::ld_v4_f32(p) };
        let g = |k: usize| if yv[k] > 0.0 { d[k] } else { d[k] * (yv[k] + 1.0) };
        unsafe { ptx::st_v4_f32(p, [g(0), g(1), g(2), g(3)]) };
    }
}
