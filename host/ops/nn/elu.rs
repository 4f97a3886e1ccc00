//! ELU (alpha = 1, as `torch.nn.functional.elu`) and its backward, in place: CPU and the
//! launchers of `kernels-gpu/src/nn/elu.rs`. GAT's example puts it between its layers.

use rayon::prelude::*;

use super::{MIN_PAR_LEN, check_matrix_64, check_same, elementwise_shape, n4};
use crate::error::Result;
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{EluArgs, EluBackwardArgs, elu_backward_f32, elu_f32};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// ELU of one value: x > 0 ? x : e^x - 1.
pub(crate) fn elu1<T: Real>(v: T) -> T {
    if v <= T::zero() { v.exp() - T::one() } else { v }
}

/// dy ELU'(x) for one value, from the output y: dy where y > 0, else dy e^x = dy (y + 1).
pub(crate) fn elu_backward1<T: Real>(dy: T, y: T) -> T {
    if y <= T::zero() { dy * (y + T::one()) } else { dy }
}

/// x = x > 0 ? x : e^x - 1 in place.
pub fn elu_cpu<T: Real>(x: &mut [T]) {
    x.par_iter_mut().with_min_len(MIN_PAR_LEN).for_each(|v| *v = elu1(*v));
}

/// dy *= ELU'(x), from the output y: 1 where y > 0, else e^x = y + 1.
pub fn elu_backward_cpu<T: Real>(y: &[T], dy: &mut [T]) {
    assert_eq!(y.len(), dy.len(), "elu_backward_cpu: {} and {} elements", y.len(), dy.len());
    dy.par_iter_mut().zip(y.par_iter()).with_min_len(MIN_PAR_LEN).for_each(|(d, &o)| *d = elu_backward1(*d, o));
}

/// ELU in place on the device (whole padded buffer; ELU(0) = 0 keeps the padding 0).
pub fn elu(x: &mut DeviceMatrix<f32>) -> Result<()> {
    check_matrix_64(x, "elu")?;
    let gpu = x.gpu().clone();
    let n4 = n4(x);
    let args = EluArgs { n4, x: x.arg_mut() };
    // SAFETY: x holds n4 float4s.
    unsafe { elu_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

/// dy *= ELU'(x) on the device; `y` is the ELU's output (same shape as dy).
pub fn elu_backward(y: &DeviceMatrix<f32>, dy: &mut DeviceMatrix<f32>) -> Result<()> {
    check_same(y, dy, "elu_backward")?;
    let gpu = dy.gpu().clone();
    let n4 = n4(dy);
    let args = EluBackwardArgs { n4, y: y.arg(), dy: dy.arg_mut() };
    // SAFETY: both buffers hold n4 float4s.
    unsafe { elu_backward_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

// -- the op on each backend --

/// ELU in place and its backward, for a layer's hidden activations.
pub trait EluOp: Backend {
    fn elu(&self, x: &mut Self::Mat) -> Result<()>;
    /// `dy *= ELU'(x)` with `y` the ELU's output.
    fn elu_backward(&self, y: &Self::Mat, dy: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> EluOp for CpuBackend<T> {
    fn elu(&self, x: &mut HostMat<T>) -> Result<()> {
        elu_cpu(&mut x.data);
        Ok(())
    }
    fn elu_backward(&self, y: &HostMat<T>, dy: &mut HostMat<T>) -> Result<()> {
        same_shape("elu_backward", dy, y)?;
        elu_backward_cpu(&y.data, &mut dy.data);
        Ok(())
    }
}

impl EluOp for CudaBackend {
    fn elu(&self, x: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("elu", || elu(x))
    }
    fn elu_backward(&self, y: &DeviceMatrix<f32>, dy: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("elu backward", || elu_backward(y, dy))
    }
}
