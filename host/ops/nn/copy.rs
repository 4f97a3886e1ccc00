//! `dst = src` for matrices of one shape (a dropout of p = 0's backward, residual inputs).

use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

pub trait CopyOp: Backend {
    fn copy(&self, src: &Self::Mat, dst: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> CopyOp for CpuBackend<T> {
    fn copy(&self, src: &HostMat<T>, dst: &mut HostMat<T>) -> Result<()> {
        same_shape("copy", dst, src)?;
        dst.data.copy_from_slice(&src.data);
        Ok(())
    }
}

impl CopyOp for CudaBackend {
    fn copy(&self, src: &DeviceMatrix<f32>, dst: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("copy", || {
            if (src.rows, src.cols) != (dst.rows, dst.cols) {
                return Err(Error::Shape(format!("copy: {}x{} into {}x{}", src.rows, src.cols, dst.rows, dst.cols)));
            }
            self.gpu.stream().memcpy_dtod(src.slice(), dst.slice_mut()).map_err(|e| Error::cuda("copy", e))
        })
    }
}
