//! Column sums out[c] = sum_r x[r][c] (the bias gradient): CPU and the launcher of
//! `kernels-gpu/src/nn/col_sums.rs`.

use rayon::prelude::*;

use super::{ROW_BLOCK, check_gpu, check_matrix_64};
use crate::error::{Error, Result};
use crate::gpu::DeviceMatrix;
use crate::gpu::abi::nn::{ColSumsArgs, col_sums_f32};
use crate::gpu::launch::Shape;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::config::NN_BLOCK;
use crate::util::Real;

/// out[c] = sum_r x[r][c] (overwrites `out`). Deterministic: rows are summed in order within
/// fixed blocks of `ROW_BLOCK` rows, and the blocks' sums in order.
pub fn col_sums_cpu<T: Real>(x: &[T], rows: usize, cols: usize, out: &mut [T]) {
    assert_eq!(x.len(), rows * cols, "col_sums_cpu: x is not {rows} x {cols}");
    assert_eq!(out.len(), cols, "col_sums_cpu: out has {} values for {cols} columns", out.len());
    out.fill(T::zero());
    if cols == 0 {
        return;
    }
    let partials: Vec<Vec<T>> = x
        .par_chunks(ROW_BLOCK * cols)
        .map(|block| {
            let mut s = vec![T::zero(); cols];
            for row in block.chunks(cols) {
                for (a, &v) in s.iter_mut().zip(row) {
                    *a += v;
                }
            }
            s
        })
        .collect();
    for p in partials {
        for (o, v) in out.iter_mut().zip(p) {
            *o += v;
        }
    }
}

/// out[c] = sum_r x[r][c] on the device (`out` 1 x cols, overwritten: zeroed with a memset,
/// then one atomic add per block and column; the order of those adds is not fixed, so the
/// last bits may differ between runs).
pub fn col_sums(x: &DeviceMatrix<f32>, out: &mut DeviceMatrix<f32>) -> Result<()> {
    check_matrix_64(x, "col_sums x")?;
    check_matrix_64(out, "col_sums out")?;
    if out.rows != 1 || out.cols != x.cols {
        return Err(Error::Shape(format!(
            "col_sums: x is {} x {}, out is {} x {} (want 1 x {})",
            x.rows, x.cols, out.rows, out.cols, x.cols
        )));
    }
    check_gpu(x.gpu(), out.gpu(), "col_sums")?;
    let gpu = x.gpu().clone();
    out.zero()?;
    let ld4 = (x.ld / 4) as u32;
    if ld4 == 0 {
        return Ok(());
    }
    // Narrow rows: the block tiles NN_BLOCK / ld4 rows per step and combines in shared memory.
    let (rows_per_step, smem) = if ld4 <= NN_BLOCK { (NN_BLOCK / ld4, 4 * x.ld as u32) } else { (1, 0) };
    // Every block ends in one atomic per column on the same few addresses, and each thread's
    // row steps are a chain of dependent adds (two loads in flight): 4 row steps a block, at
    // most 4 blocks per SM (pubmed 19717 x 16 took 14.5 us with a block per row step; 19717 x
    // 64 took 17 us with 16 steps a block, 77 blocks: fewer blocks than SMs).
    let blocks = (x.rows as u64).div_ceil(4 * rows_per_step as u64).min((gpu.info().sm_count * 4) as u64);
    let args = ColSumsArgs { rows: x.rows as u32, cols: x.cols as u32, ld4, x: x.arg(), out: out.arg_mut() };
    // SAFETY: x holds rows x ld floats, out at least cols; the shared memory is the 4 * ld
    // bytes the narrow path uses (the wide path uses none).
    unsafe { col_sums_f32.launch(&gpu, Shape::linear(blocks as u32, NN_BLOCK, smem), &args) }
}

// -- the op on each backend --

pub trait ColSumsOp: Backend {
    /// `out = 1ᵀ x` (`out` is `1 x cols`): a bias gradient.
    fn col_sums(&self, x: &Self::Mat, out: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> ColSumsOp for CpuBackend<T> {
    fn col_sums(&self, x: &HostMat<T>, out: &mut HostMat<T>) -> Result<()> {
        if out.rows != 1 || out.cols != x.cols {
            return Err(Error::Shape(format!("col_sums: out {}x{} for {} columns", out.rows, out.cols, x.cols)));
        }
        col_sums_cpu(&x.data, x.rows, x.cols, &mut out.data);
        Ok(())
    }
}

impl ColSumsOp for CudaBackend {
    fn col_sums(&self, x: &DeviceMatrix<f32>, out: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("col sums", || col_sums(x, out))
    }
}
