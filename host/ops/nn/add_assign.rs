//! y += x: CPU and the launcher of `kernels-gpu/src/nn/add_assign.rs`.

use rayon::prelude::*;

use super::{MIN_PAR_LEN, check_same, elementwise_shape, n4};
use crate::error::Result;
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{AddAssignArgs, add_assign_f32};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
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
    let args = AddAssignArgs { n4, y: y.arg_mut(), x: x.arg() };
    // SAFETY: both buffers hold n4 float4s.
    unsafe { add_assign_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

// -- the op on each backend --

pub trait AddAssignOp: Backend {
    /// `y += x`.
    fn add_assign(&self, y: &mut Self::Mat, x: &Self::Mat) -> Result<()>;
}

impl<T: Real> AddAssignOp for CpuBackend<T> {
    fn add_assign(&self, y: &mut HostMat<T>, x: &HostMat<T>) -> Result<()> {
        same_shape("add_assign", y, x)?;
        add_assign_cpu(&mut y.data, &x.data);
        Ok(())
    }
}

impl AddAssignOp for CudaBackend {
    fn add_assign(&self, y: &mut DeviceMatrix<f32>, x: &DeviceMatrix<f32>) -> Result<()> {
        self.timed("add assign", || add_assign(y, x))
    }
}
