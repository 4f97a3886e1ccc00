//! out[0] += sum_i a[i] * b[i] over whole padded buffers (padding is 0 on both sides, so it adds
//! nothing): grid-stride over float4s, one `BlockSums` flush per block (`out` zeroed by the
//! launcher).

use super::{BlockSums, grid_stride};
use crate::abi::nn::DotArgs;
use crate::ptx;

#[inline(always)]
pub unsafe fn dot(args: DotArgs) {
    let DotArgs { n4, a, b, out } = args;
    let sums = BlockSums::<1>::new();
    let mut acc = 0f32;
    for i in grid_stride(n4) {
        let o = 4 * i as usize;
        let (u, v) = unsafe { (ptx::ld_nc_v4_f32(a.add(o)), ptx::ld_nc_v4_f32(b.add(o))) };
        acc += u[0] * v[0] + u[1] * v[1] + u[2] * v[2] + u[3] * v[3];
    }
    unsafe { sums.flush([acc], out) };
}
