//! ReLU and its backward, in place over whole padded buffers (padding is 0 and stays 0):
//! grid-stride over float4s.

use super::grid_stride;
use crate::abi::nn::{ReluArgs, ReluBackwardArgs};
use crate::ptx;

#[inline(always)]
fn relu1(v: f32) -> f32 {
    if v > 0.0 { v } else { 0.0 }
}

/// x = max(x, 0) over `n4` float4s.
#[inline(always)]
pub unsafe fn relu(args: ReluArgs) {
    let ReluArgs { n4, x } = args;
    for i in grid_stride(n4) {
        let p = unsafe { x.add(4 * i as usize) };
        let v = unsafe { ptx::ld_v4_f32(p) };
        unsafe { ptx::st_v4_f32(p, [relu1(v[0]), relu1(v[1]), relu1(v[2]), relu1(v[3])]) };
    }
}

/// dy = y > 0 ? dy : 0 over `n4` float4s (y: the ReLU's output).
#[inline(always)]
pub unsafe fn relu_backward(args: ReluBackwardArgs) {
    let ReluBackwardArgs { n4, y, dy } = args;
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let yv = unsafe { ptx::ld_nc_v4_f32(y.add(o)) };
        let p = unsafe { dy.add(o) };
        let d = unsafe { ptx::ld_v4_f32(p) };
        let g = |k: usize| if yv[k] > 0.0 { d[k] } else { 0.0 };
        unsafe { ptx::st_v4_f32(p, [g(0), g(1), g(2), g(3)]) };
    }
}
