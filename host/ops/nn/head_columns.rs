//! Column blocks of a wide matrix (GAT's heads): `take` copies an n x F block out of an
//! n x W matrix, `put` writes (or adds) an n x F matrix into one. GAT computes `W h` for all
//! heads in one GEMM (n x H F) and runs each head's SpMM on its block; the heads' outputs go
//! back side by side (concat) or summed with weight 1/H (mean). CPU and the launchers of
//! `kernels-gpu/src/nn/head_columns.rs`.

use super::{check_gpu, check_matrix_64, elementwise_shape};
use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{HeadColumnsArgs, head_put_f32, head_take_f32};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

fn check_block(narrow: (usize, usize), wide: (usize, usize), col0: usize, what: &str) -> Result<()> {
    if narrow.0 != wide.0 || col0 + narrow.1 > wide.1 {
        return Err(Error::Shape(format!(
            "{what}: columns {col0}..{} of a {} x {} matrix against a {} x {} block",
            col0 + narrow.1,
            wide.0,
            wide.1,
            narrow.0,
            narrow.1
        )));
    }
    Ok(())
}

/// dst = alpha src[:, col0 .. col0 + dst.cols].
pub fn head_take_cpu<T: Real>(src: &HostMat<T>, col0: usize, alpha: T, dst: &mut HostMat<T>) -> Result<()> {
    check_block((dst.rows, dst.cols), (src.rows, src.cols), col0, "head_take")?;
    for r in 0..dst.rows {
        let s = &src.row(r)[col0..col0 + dst.cols];
        for (d, &v) in dst.data[r * dst.cols..(r + 1) * dst.cols].iter_mut().zip(s) {
            *d = alpha * v;
        }
    }
    Ok(())
}

/// dst[:, col0 .. col0 + src.cols] = (accumulate ? that : 0) + alpha src.
pub fn head_put_cpu<T: Real>(src: &HostMat<T>, col0: usize, alpha: T, accumulate: bool, dst: &mut HostMat<T>) -> Result<()> {
    check_block((src.rows, src.cols), (dst.rows, dst.cols), col0, "head_put")?;
    let w = dst.cols;
    for r in 0..src.rows {
        for (d, &v) in dst.data[r * w + col0..r * w + col0 + src.cols].iter_mut().zip(src.row(r)) {
            *d = if accumulate { *d + alpha * v } else { alpha * v };
        }
    }
    Ok(())
}

fn check_device(src: &DeviceMatrix<f32>, dst: &DeviceMatrix<f32>, what: &str) -> Result<()> {
    check_matrix_64(src, what)?;
    check_matrix_64(dst, what)?;
    check_gpu(src.gpu(), dst.gpu(), what)
}

/// [`head_take_cpu`] on the device (dst's padding written 0).
pub fn head_take(src: &DeviceMatrix<f32>, col0: usize, alpha: f32, dst: &mut DeviceMatrix<f32>) -> Result<()> {
    check_device(src, dst, "head_take")?;
    check_block((dst.rows, dst.cols), (src.rows, src.cols), col0, "head_take")?;
    let gpu = dst.gpu().clone();
    let items = (dst.rows * dst.ld) as u64;
    let args = HeadColumnsArgs {
        rows: dst.rows as u32,
        cols: dst.cols as u32,
        src_ld: src.ld as u32,
        dst_ld: dst.ld as u32,
        col0: col0 as u32,
        alpha,
        accumulate: 0,
        src: src.arg(),
        dst: dst.arg_mut(),
    };
    if items == 0 {
        return Ok(());
    }
    // SAFETY: both matrices are valid (stride, length, u32 row and column ids) and the block lies
    // inside src (checked above); dst's padded rows are written, nothing past them.
    unsafe { head_take_f32.launch(&gpu, elementwise_shape(&gpu, items), &args) }
}

/// [`head_put_cpu`] on the device (dst's other columns and padding untouched).
pub fn head_put(src: &DeviceMatrix<f32>, col0: usize, alpha: f32, accumulate: bool, dst: &mut DeviceMatrix<f32>) -> Result<()> {
    check_device(src, dst, "head_put")?;
    check_block((src.rows, src.cols), (dst.rows, dst.cols), col0, "head_put")?;
    let gpu = dst.gpu().clone();
    let items = (src.rows * src.cols) as u64;
    let args = HeadColumnsArgs {
        rows: src.rows as u32,
        cols: src.cols as u32,
        src_ld: src.ld as u32,
        dst_ld: dst.ld as u32,
        col0: col0 as u32,
        alpha,
        accumulate: accumulate as u32,
        src: src.arg(),
        dst: dst.arg_mut(),
    };
    if items == 0 {
        return Ok(());
    }
    // SAFETY: as in `head_take`; the block lies inside dst (checked above).
    unsafe { head_put_f32.launch(&gpu, elementwise_shape(&gpu, items), &args) }
}

// -- the op on each backend --

/// Column blocks of a wide matrix, for per-head products on one n x (H F) matrix.
pub trait HeadColumnsOp: Backend {
    /// `dst = alpha src[:, col0 .. col0 + dst.cols]`.
    fn head_take(&self, src: &Self::Mat, col0: usize, alpha: f32, dst: &mut Self::Mat) -> Result<()>;
    /// `dst[:, col0 .. col0 + src.cols] = (accumulate ? that : 0) + alpha src`.
    fn head_put(&self, src: &Self::Mat, col0: usize, alpha: f32, accumulate: bool, dst: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> HeadColumnsOp for CpuBackend<T> {
    fn head_take(&self, src: &HostMat<T>, col0: usize, alpha: f32, dst: &mut HostMat<T>) -> Result<()> {
        head_take_cpu(src, col0, T::from_f64(alpha as f64), dst)
    }
    fn head_put(&self, src: &HostMat<T>, col0: usize, alpha: f32, accumulate: bool, dst: &mut HostMat<T>) -> Result<()> {
        head_put_cpu(src, col0, T::from_f64(alpha as f64), accumulate, dst)
    }
}

impl HeadColumnsOp for CudaBackend {
    fn head_take(&self, src: &DeviceMatrix<f32>, col0: usize, alpha: f32, dst: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("head take", || head_take(src, col0, alpha, dst))
    }
    fn head_put(&self, src: &DeviceMatrix<f32>, col0: usize, alpha: f32, accumulate: bool, dst: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("head put", || head_put(src, col0, alpha, accumulate, dst))
    }
}
