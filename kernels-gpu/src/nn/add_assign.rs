//! y += x over whole padded buffers: grid-stride over float4s.

use super::grid_stride;
use crate::abi::nn::AddAssignArgs;
use crate::ptx;

#[inline(always)]
pub unsafe fn add_assign(args: AddAssignArgs) {
    let AddAssignArgs { n4, y, x } = args;
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let a = unsafe { ptx::ld_nc_v4_f32(x.add(o)) };
        let p = unsafe { y.add(o) };
        let b = unsafe { ptx::ld_v4_f32(p) };
        unsafe { ptx::st_v4_f32(p, [b[0] + a[0], b[1] + a[1], b[2] + a[2], b[3] + a[3]]) };
    }
}
