//! Bandwidth probes for the benchmark floors: a read loop over a buffer small enough to stay in
//! L2, so that the step floor can charge neighbour-row gathers at the rate L2 actually serves.

use crate::abi::probe::L2ReadArgs;
use crate::nn::{global_thread, grid_threads};
use crate::ptx;

/// Every thread reads float4s of `x` (`n4` of them) grid-stride, `passes` times over, and
/// stores one sum per thread to `out` (so that the loads are not optimised away; the sums are
/// meaningless). The host sizes `x` to a fraction of L2, so after the first pass every load
/// hits L2; a store per thread is negligible beside `passes * n4 * 16` bytes read.
#[inline(always)]
pub unsafe fn l2_read(args: L2ReadArgs) {
    let L2ReadArgs { n4, passes, x, out } = args;
    let t = global_thread();
    let mut acc = 0.0f32;
    for _ in 0..passes {
        let mut i = t;
        while i < n4 {
            let v = unsafe { ptx::ld_nc_v4_f32(x.add(4 * i as usize)) };
            acc += v[0] + v[1] + v[2] + v[3];
            i += grid_threads();
        }
    }
    unsafe { *out.add(t as usize) = acc };
}
