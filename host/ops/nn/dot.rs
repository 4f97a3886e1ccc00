//! The full dot product out = sum_ij a_ij b_ij of two matrices of one shape (the gradient of a
//! scalar that multiplies a matrix, GIN's eps): CPU and the launcher of
//! `kernels-gpu/src/nn/dot.rs`.

use rayon::prelude::*;

use super::{ROW_BLOCK, check_gpu, check_matrix_64, check_same, n4};
use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{DotArgs, dot_f32};
use crate::gpu::launch::Shape;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::config::{NN_BLOCK, NN_BLOCKS_PER_SM};
use crate::util::Real;

/// sum_i a[i] b[i]. Deterministic: fixed blocks of `ROW_BLOCK` elements summed in order.
pub fn dot_cpu<T: Real>(a: &[T], b: &[T]) -> T {
    assert_eq!(a.len(), b.len(), "dot_cpu: {} and {} elements", a.len(), b.len());
    let partials: Vec<T> =
        a.par_chunks(ROW_BLOCK).zip(b.par_chunks(ROW_BLOCK)).map(|(x, y)| x.iter().zip(y).map(|(&u, &v)| u * v).sum()).collect();
    partials.into_iter().sum()
}

/// out[0] = sum a * b on the device (`out` 1 x 1, zeroed with a memset, then one atomic add
/// per block: the last bits may differ between runs).
pub fn dot(a: &DeviceMatrix<f32>, b: &DeviceMatrix<f32>, out: &mut DeviceMatrix<f32>) -> Result<()> {
    check_same(a, b, "dot")?;
    check_matrix_64(out, "dot out")?;
    check_gpu(a.gpu(), out.gpu(), "dot")?;
    if (out.rows, out.cols) != (1, 1) {
        return Err(Error::Shape(format!("dot: out is {} x {} (want 1 x 1)", out.rows, out.cols)));
    }
    let gpu = a.gpu().clone();
    out.zero()?;
    let n4 = n4(a);
    let blocks = n4.div_ceil(NN_BLOCK as u64).clamp(1, (gpu.info().sm_count * NN_BLOCKS_PER_SM) as u64);
    let args = DotArgs { n4, a: a.arg(), b: b.arg(), out: out.arg_mut() };
    // SAFETY: a and b hold n4 float4s, out one float; 4 bytes of shared memory for BlockSums<1>.
    unsafe { dot_f32.launch(&gpu, Shape::linear(blocks as u32, NN_BLOCK, 4), &args) }
}

// -- the op on each backend --

pub trait DotOp: Backend {
    /// `out = Σ a ⊙ b` (`out` is `1 x 1`).
    fn dot(&self, a: &Self::Mat, b: &Self::Mat, out: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> DotOp for CpuBackend<T> {
    fn dot(&self, a: &HostMat<T>, b: &HostMat<T>, out: &mut HostMat<T>) -> Result<()> {
        same_shape("dot", a, b)?;
        if (out.rows, out.cols) != (1, 1) {
            return Err(Error::Shape(format!("dot: out is {} x {} (want 1 x 1)", out.rows, out.cols)));
        }
        out.data[0] = dot_cpu(&a.data, &b.data);
        Ok(())
    }
}

impl DotOp for CudaBackend {
    fn dot(&self, a: &DeviceMatrix<f32>, b: &DeviceMatrix<f32>, out: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("dot", || dot(a, b, out))
    }
}
