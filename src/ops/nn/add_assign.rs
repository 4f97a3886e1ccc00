//! y += x: CPU and the launcher of `kernels-gpu/src/nn/add_assign.rs`.

use rayon::prelude::*;

use super::{MIN_PAR_LEN, check_same, elementwise_shape, n4};
use crate::error::Result;
use crate::gpu::DeviceMatrix;
use crate::gpu::launch::{Arg, launch};
use crate::util::Real;

/// y += x elementwise.
pub fn add_assign_cpu<T: Real>(y: &mut [T], x: &[T]) {
    assert_eq!(y.len(), x.len(), "add_assign_cpu: {} and {} elements", y.len(), x.len());
    y.par_iter_mut().zip(x.par_iter()).with_min_len(MIN_PAR_LEN).for_each(|(a, &b)| *a += b);
}

/// y += x on the device (same shape), over the padded buffers.
pub fn add_assign(y: &mut DeviceMatrix<f32>, x: &DeviceMatrix<f32>) -> Result<()> {
    check_same(y, x, "add_assign")?;
    let gpu = y.gpu().clone();
    let n4 = n4(y);
    let args = [Arg::U32(n4), Arg::Ptr(y.ptr_mut()), Arg::Ptr(x.ptr())];
    // SAFETY: matches `add_assign_f32`; both buffers hold n4 float4s.
    unsafe { launch(&gpu, "add_assign_f32", elementwise_shape(&gpu, n4 as u64), &args) }
}
