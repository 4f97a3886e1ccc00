//! y += (shift + alpha[0]) * x over whole padded buffers (padding is 0 and stays 0):
//! grid-stride over float4s. `alpha` is read from device memory when the kernel runs, so a
//! learnable scalar (GIN's eps) changes between replays of a captured step.

use super::grid_stride;
use crate::abi::nn::ScaledAddArgs;
use crate::ptx;

#[inline(always)]
pub unsafe fn scaled_add(args: ScaledAddArgs) {
    let ScaledAddArgs { n4, y, x, alpha, shift } = args;
    let s = shift + unsafe { ptx::ld_f32(alpha) };
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let a = unsafe { ptx::ld_nc_v4_f32(x.add(o)) };
        let p = unsafe { y.add(o) };
        let b = unsafe { ptx::ld_v4_f32(p) };
        unsafe { ptx::st_v4_f32(p, [b[0] + s * a[0], b[1] + s * a[1], b[2] + s * a[2], b[3] + s * a[3]]) };
    }
}
