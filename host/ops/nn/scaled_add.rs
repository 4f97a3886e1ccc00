//! y += (shift + alpha) x with `alpha` a 1 x 1 matrix (GIN's (1 + eps) x_i with a learnable eps):
//! CPU and the launcher of `kernels-gpu/src/nn/scaled_add.rs`. The GPU kernel reads alpha from
//! device memory when it runs, so a captured step sees the eps Adam wrote last.

use rayon::prelude::*;

use super::{MIN_PAR_LEN, check_gpu, check_matrix_64, check_same, elementwise_shape, n4};
use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{ScaledAddArgs, scaled_add_f32};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// y += s x elementwise.
pub fn scaled_add_cpu<T: Real>(y: &mut [T], x: &[T], s: T) {
    assert_eq!(y.len(), x.len(), "scaled_add_cpu: {} and {} elements", y.len(), x.len());
    y.par_iter_mut().zip(x.par_iter()).with_min_len(MIN_PAR_LEN).for_each(|(a, &b)| *a += s * b);
}

/// y += (shift + alpha[0]) x on the device (same shape), over the padded buffers.
pub fn scaled_add(y: &mut DeviceMatrix<f32>, x: &DeviceMatrix<f32>, alpha: &DeviceMatrix<f32>, shift: f32) -> Result<()> {
    check_same(y, x, "scaled_add")?;
    check_matrix_64(alpha, "scaled_add alpha")?;
    check_gpu(y.gpu(), alpha.gpu(), "scaled_add")?;
    if (alpha.rows, alpha.cols) != (1, 1) {
        return Err(Error::Shape(format!("scaled_add: alpha is {} x {} (want 1 x 1)", alpha.rows, alpha.cols)));
    }
    let gpu = y.gpu().clone();
    let n4 = n4(y);
    let args = ScaledAddArgs { n4, y: y.arg_mut(), x: x.arg(), alpha: alpha.arg(), shift };
    // SAFETY: y and x hold n4 float4s, alpha at least one float.
    unsafe { scaled_add_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

// -- the op on each backend --

pub trait ScaledAddOp: Backend {
    /// `y += (shift + alpha) x` with `alpha` a `1 x 1` matrix.
    fn scaled_add(&self, y: &mut Self::Mat, x: &Self::Mat, alpha: &Self::Mat, shift: f32) -> Result<()>;
}

impl<T: Real> ScaledAddOp for CpuBackend<T> {
    fn scaled_add(&self, y: &mut HostMat<T>, x: &HostMat<T>, alpha: &HostMat<T>, shift: f32) -> Result<()> {
        same_shape("scaled_add", y, x)?;
        if (alpha.rows, alpha.cols) != (1, 1) {
            return Err(Error::Shape(format!("scaled_add: alpha is {} x {} (want 1 x 1)", alpha.rows, alpha.cols)));
        }
        scaled_add_cpu(&mut y.data, &x.data, T::from_f64(shift as f64) + alpha.data[0]);
        Ok(())
    }
}

impl ScaledAddOp for CudaBackend {
    fn scaled_add(&self, y: &mut DeviceMatrix<f32>, x: &DeviceMatrix<f32>, alpha: &DeviceMatrix<f32>, shift: f32) -> Result<()> {
        self.timed("scaled add", || scaled_add(y, x, alpha, shift))
    }
}
