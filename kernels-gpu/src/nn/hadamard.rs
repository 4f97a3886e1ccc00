//! y = a ⊙ b over whole padded buffers: grid-stride over float4s.

use super::grid_stride;
use crate::abi::nn::HadamardArgs;
use crate::ptx;

#[inline(always)]
pub unsafe fn hadamard(args: HadamardArgs) {
    let HadamardArgs { n4, a, b, y } = args;
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let (u, v) = unsafe { (ptx::ld_nc_v4_f32(a.add(o)), ptx::ld_nc_v4_f32(b.add(o))) };
        unsafe { ptx::st_v4_f32(y.add(o), [u[0] * v[0], u[1] * v[1], u[2] * v[2], u[3] * v[3]]) };
    }
}
