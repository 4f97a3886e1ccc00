//! `dst = src` for matrices of one shape (a dropout of p = 0's backward, residual inputs).

use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

pub trait CopyOp: Backend {
    fn copy(&self, src: &Self::Mat, dst: &mut Self::Mat) -> Result<()>;
    /// Rows `0 .. n` of `src` into rows `dst_row0 .. dst_row0 + n` of `dst` (equal widths): a
    /// batch's leading output rows into their place in a matrix over all nodes.
    fn copy_rows(&self, src: &Self::Mat, n: usize, dst: &mut Self::Mat, dst_row0: usize) -> Result<()>;
}

fn check_rows(src: (usize, usize), n: usize, dst: (usize, usize), dst_row0: usize) -> Result<()> {
    if src.1 != dst.1 || n > src.0 || dst_row0.checked_add(n).is_none_or(|end| end > dst.0) {
        return Err(Error::Shape(format!(
            "copy_rows: {n} rows of a {}x{} matrix to row {dst_row0} of a {}x{}",
            src.0, src.1, dst.0, dst.1
        )));
    }
    Ok(())
}

impl<T: Real> CopyOp for CpuBackend<T> {
    fn copy(&self, src: &HostMat<T>, dst: &mut HostMat<T>) -> Result<()> {
        same_shape("copy", dst, src)?;
        dst.data.copy_from_slice(&src.data);
        Ok(())
    }
    fn copy_rows(&self, src: &HostMat<T>, n: usize, dst: &mut HostMat<T>, dst_row0: usize) -> Result<()> {
        check_rows((src.rows, src.cols), n, (dst.rows, dst.cols), dst_row0)?;
        let c = src.cols;
        dst.data[dst_row0 * c..(dst_row0 + n) * c].copy_from_slice(&src.data[..n * c]);
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
    fn copy_rows(&self, src: &DeviceMatrix<f32>, n: usize, dst: &mut DeviceMatrix<f32>, dst_row0: usize) -> Result<()> {
        self.timed("copy rows", || {
            check_rows((src.rows, src.cols), n, (dst.rows, dst.cols), dst_row0)?;
            if src.ld != dst.ld {
                return Err(Error::Shape(format!("copy_rows: row strides {} and {}", src.ld, dst.ld)));
            }
            if n == 0 {
                return Ok(());
            }
            let ld = src.ld;
            let from = src.slice().slice(..n * ld);
            let mut to = dst.slice_mut().slice_mut(dst_row0 * ld..(dst_row0 + n) * ld);
            self.gpu.stream().memcpy_dtod(&from, &mut to).map_err(|e| Error::cuda("copy_rows", e))
        })
    }
}
