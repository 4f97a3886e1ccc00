//! y = a ⊙ b (elementwise product of two matrices of one shape; the MLP link decoder's
//! pair features z_u ⊙ z_v and their gradients): CPU and the launcher of
//! `kernels-gpu/src/nn/hadamard.rs`.

use rayon::prelude::*;

use super::{MIN_PAR_LEN, check_same, elementwise_shape, n4};
use crate::error::Result;
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{HadamardArgs, hadamard_f32};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// y = a ⊙ b elementwise.
pub fn hadamard_cpu<T: Real>(a: &[T], b: &[T], y: &mut [T]) {
    assert!(a.len() == b.len() && y.len() == a.len(), "hadamard_cpu: {}, {} and {} elements", a.len(), b.len(), y.len());
    y.par_iter_mut().zip(a.par_iter().zip(b.par_iter())).with_min_len(MIN_PAR_LEN).for_each(|(y, (&a, &b))| *y = a * b);
}

/// y = a ⊙ b on the device (one shape), over the padded buffers (padding stays 0).
pub fn hadamard(a: &DeviceMatrix<f32>, b: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
    check_same(a, b, "hadamard")?;
    check_same(a, y, "hadamard")?;
    let gpu = y.gpu().clone();
    let n4 = n4(y);
    let args = HadamardArgs { n4, a: a.arg(), b: b.arg(), y: y.arg_mut() };
    // SAFETY: the three buffers hold n4 float4s.
    unsafe { hadamard_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

// -- the op on each backend --

pub trait HadamardOp: Backend {
    /// `y = a ⊙ b`.
    fn hadamard(&self, a: &Self::Mat, b: &Self::Mat, y: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> HadamardOp for CpuBackend<T> {
    fn hadamard(&self, a: &HostMat<T>, b: &HostMat<T>, y: &mut HostMat<T>) -> Result<()> {
        same_shape("hadamard", a, b)?;
        same_shape("hadamard", a, y)?;
        hadamard_cpu(&a.data, &b.data, &mut y.data);
        Ok(())
    }
}

impl HadamardOp for CudaBackend {
    fn hadamard(&self, a: &DeviceMatrix<f32>, b: &DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("hadamard", || hadamard(a, b, y))
    }
}
