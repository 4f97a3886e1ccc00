//! ReLU and its backward, in place: CPU and the launchers of `kernels-gpu/src/nn/relu.rs`.

use rayon::prelude::*;

use super::{MIN_PAR_LEN, check_matrix_64, check_same, elementwise_shape, n4};
use crate::error::Result;
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{ReluArgs, ReluBackwardArgs, relu_backward_f32, relu_f32};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// x = max(x, 0) in place (NaN and -0 become 0, as on the GPU).
pub fn relu_cpu<T: Real>(x: &mut [T]) {
    x.par_iter_mut().with_min_len(MIN_PAR_LEN).for_each(|v| *v = if *v > T::zero() { *v } else { T::zero() });
}

/// dy = y > 0 ? dy : 0, where `y` is the ReLU's output.
pub fn relu_backward_cpu<T: Real>(y: &[T], dy: &mut [T]) {
    assert_eq!(y.len(), dy.len(), "relu_backward_cpu: {} and {} elements", y.len(), dy.len());
    dy.par_iter_mut().zip(y.par_iter()).with_min_len(MIN_PAR_LEN).for_each(|(d, &o)| *d = if o > T::zero() { *d } else { T::zero() });
}

/// x = max(x, 0) in place on the device (whole padded buffer; padding 0 stays 0).
pub fn relu(x: &mut DeviceMatrix<f32>) -> Result<()> {
    check_matrix_64(x, "relu")?;
    let gpu = x.gpu().clone();
    let n4 = n4(x);
    let args = ReluArgs { n4, x: x.arg_mut() };
    // SAFETY: x holds n4 float4s.
    unsafe { relu_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

/// dy = y > 0 ? dy : 0 on the device; `y` is the ReLU's output (same shape as dy).
pub fn relu_backward(y: &DeviceMatrix<f32>, dy: &mut DeviceMatrix<f32>) -> Result<()> {
    check_same(y, dy, "relu_backward")?;
    let gpu = dy.gpu().clone();
    let n4 = n4(dy);
    let args = ReluBackwardArgs { n4, y: y.arg(), dy: dy.arg_mut() };
    // SAFETY: both buffers hold n4 float4s.
    unsafe { relu_backward_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

// -- the op on each backend --

/// ReLU in place and its backward, for a layer's hidden activations.
pub trait ReluOp: Backend {
    fn relu(&self, x: &mut Self::Mat) -> Result<()>;
    /// `dy *= (y > 0)` with `y` the ReLU's output.
    fn relu_backward(&self, y: &Self::Mat, dy: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> ReluOp for CpuBackend<T> {
    fn relu(&self, x: &mut HostMat<T>) -> Result<()> {
        relu_cpu(&mut x.data);
        Ok(())
    }
    fn relu_backward(&self, y: &HostMat<T>, dy: &mut HostMat<T>) -> Result<()> {
        same_shape("relu_backward", dy, y)?;
        relu_backward_cpu(&y.data, &mut dy.data);
        Ok(())
    }
}

impl ReluOp for CudaBackend {
    fn relu(&self, x: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("relu", || relu(x))
    }
    fn relu_backward(&self, y: &DeviceMatrix<f32>, dy: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("relu backward", || relu_backward(y, dy))
    }
}
