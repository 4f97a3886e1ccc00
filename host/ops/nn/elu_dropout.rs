//! GAT's hidden tail fused: `h = ELU(h)` in place and `y = dropout(h)` in one pass (the mask
//! drawn from the counter RNG and never stored), and the backward of the dropout and the ELU in
//! one pass (`dz = keep ? dy / (1 - p) · ELU'(h) : 0`, the mask drawn again). CPU references and
//! the launchers of `kernels-gpu/src/nn/elu_dropout.rs`.
//!
//! Why: unfused, the tail is ELU (read and write h), dropout (read h, write y and a mask), and in
//! the backward dropout' (read the gradient and the mask, write) then ELU' (read h and the
//! gradient, write): fused, one read and two writes forward, two reads and a write backward, two
//! launches fewer. The values are the unfused path's, bit for bit, on both backends.

use rayon::prelude::*;

use super::dropout::{check_p, matrix_keep, scale_f32};
use super::elu::{elu1, elu_backward1};
use super::{check_same, elementwise_shape, n4};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{EluDropoutArgs, EluDropoutBackwardArgs, elu_dropout_backward_f32, elu_dropout_f32};
use crate::gpu::shared::rng::{dropout_seed_key, dropout_threshold};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// h = ELU(h), y = dropout(h) on the host (`h`, `y` rows x cols unpadded): the values of
/// `elu_cpu` then `dropout_matrix_cpu_at` with the same key.
#[allow(clippy::too_many_arguments)]
pub fn elu_dropout_cpu<T: Real>(h: &mut [T], rows: usize, cols: usize, y: &mut [T], p: f32, seed: u64, step: u32, offset: u64) -> Result<()> {
    check_p(p)?;
    if h.len() != rows * cols || y.len() != rows * cols {
        return Err(Error::Shape(format!("elu_dropout_cpu: h {}, y {} for {rows} x {cols}", h.len(), y.len())));
    }
    if cols == 0 {
        return Ok(());
    }
    let keep = matrix_keep(cols, p, seed, step, offset);
    let keep_frac = T::one() - T::from_f64(p as f64);
    h.par_chunks_mut(cols).zip(y.par_chunks_mut(cols)).enumerate().with_min_len(64).for_each(|(r, (hr, yr))| {
        for (c, (v, out)) in hr.iter_mut().zip(yr.iter_mut()).enumerate() {
            *v = elu1(*v);
            *out = if keep(r, c) { *v / keep_frac } else { T::zero() };
        }
    });
    Ok(())
}

/// dz = keep ? dy / (1 - p) · ELU'(h) : 0 on the host (`h` the forward's ELU output): the values
/// of `dropout_backward_cpu` then `elu_backward_cpu`.
#[allow(clippy::too_many_arguments)]
pub fn elu_dropout_backward_cpu<T: Real>(dy: &[T], h: &[T], rows: usize, cols: usize, p: f32, seed: u64, step: u32, offset: u64, dz: &mut [T]) -> Result<()> {
    check_p(p)?;
    if dy.len() != rows * cols || h.len() != rows * cols || dz.len() != rows * cols {
        return Err(Error::Shape(format!("elu_dropout_backward_cpu: dy {}, h {}, dz {} for {rows} x {cols}", dy.len(), h.len(), dz.len())));
    }
    if cols == 0 {
        return Ok(());
    }
    let keep = matrix_keep(cols, p, seed, step, offset);
    let keep_frac = T::one() - T::from_f64(p as f64);
    dz.par_chunks_mut(cols).enumerate().with_min_len(64).for_each(|(r, dr)| {
        for (c, d) in dr.iter_mut().enumerate() {
            let g = if keep(r, c) { dy[r * cols + c] / keep_frac } else { T::zero() };
            *d = elu_backward1(g, h[r * cols + c]);
        }
    });
    Ok(())
}

fn check_step(step: &DeviceVec<u32>, what: &str) -> Result<()> {
    if step.is_empty() {
        return Err(Error::Shape(format!("{what}: empty step counter")));
    }
    Ok(())
}

/// h = ELU(h), y = dropout(h) on the device (whole padded buffers), the mask of `step[0]` when
/// the kernel runs, keyed from `offset` as [`super::dropout::dropout_matrix_at`]'s.
pub fn elu_dropout(h: &mut DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>, p: f32, seed: u64, step: &DeviceVec<u32>, offset: u64) -> Result<()> {
    check_p(p)?;
    check_same(h, y, "elu_dropout")?;
    check_step(step, "elu_dropout")?;
    let gpu = h.gpu().clone();
    let n4 = n4(h);
    let (threshold, scale, seed_key) = (dropout_threshold(p), scale_f32(p), dropout_seed_key(seed));
    let args = EluDropoutArgs { n4, h: h.arg_mut(), y: y.arg_mut(), threshold, scale, seed_key, step: step.arg(&gpu), offset };
    // SAFETY: h and y hold n4 float4s each (distinct: two unique borrows), step one u32.
    unsafe { elu_dropout_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

/// dz = keep ? dy · scale · ELU'(h) : 0 on the device (whole padded buffers; h the forward's
/// ELU output, the mask of [`elu_dropout`] with the same `seed`, step and `offset`).
pub fn elu_dropout_backward(dy: &DeviceMatrix<f32>, h: &DeviceMatrix<f32>, p: f32, seed: u64, step: &DeviceVec<u32>, offset: u64, dz: &mut DeviceMatrix<f32>) -> Result<()> {
    check_p(p)?;
    check_same(dy, h, "elu_dropout_backward")?;
    check_same(dy, dz, "elu_dropout_backward")?;
    check_step(step, "elu_dropout_backward")?;
    let gpu = dy.gpu().clone();
    let n4 = n4(dy);
    let (threshold, scale, seed_key) = (dropout_threshold(p), scale_f32(p), dropout_seed_key(seed));
    let args = EluDropoutBackwardArgs { n4, dy: dy.arg(), h: h.arg(), threshold, scale, seed_key, step: step.arg(&gpu), offset, dz: dz.arg_mut() };
    // SAFETY: dy, h and dz hold n4 float4s each (dz distinct from both: a unique borrow), step
    // one u32.
    unsafe { elu_dropout_backward_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

// -- the op on each backend --

pub trait EluDropoutOp: Backend {
    /// `h = ELU(h)` and `y = dropout(h)` with the mask [`DropoutOp::dropout_at`](super::dropout::DropoutOp::dropout_at)
    /// would draw for (`seed`, the step counter, `offset`), not stored.
    fn elu_dropout(&self, h: &mut Self::Mat, y: &mut Self::Mat, p: f32, seed: u64, offset: u64) -> Result<()>;
    /// `dz = keep ? dy / (1 - p) · ELU'(h) : 0` after [`EluDropoutOp::elu_dropout`] in the same
    /// step (same `seed` and `offset`).
    fn elu_dropout_backward(&self, dy: &Self::Mat, h: &Self::Mat, p: f32, seed: u64, offset: u64, dz: &mut Self::Mat) -> Result<()>;
}

impl<T: Real> EluDropoutOp for CpuBackend<T> {
    fn elu_dropout(&self, h: &mut HostMat<T>, y: &mut HostMat<T>, p: f32, seed: u64, offset: u64) -> Result<()> {
        same_shape("elu_dropout", y, h)?;
        elu_dropout_cpu(&mut h.data, h.rows, h.cols, &mut y.data, p, seed, self.step(), offset)
    }
    fn elu_dropout_backward(&self, dy: &HostMat<T>, h: &HostMat<T>, p: f32, seed: u64, offset: u64, dz: &mut HostMat<T>) -> Result<()> {
        same_shape("elu_dropout_backward", dy, h)?;
        same_shape("elu_dropout_backward", dz, h)?;
        elu_dropout_backward_cpu(&dy.data, &h.data, h.rows, h.cols, p, seed, self.step(), offset, &mut dz.data)
    }
}

impl EluDropoutOp for CudaBackend {
    fn elu_dropout(&self, h: &mut DeviceMatrix<f32>, y: &mut DeviceMatrix<f32>, p: f32, seed: u64, offset: u64) -> Result<()> {
        self.timed("elu dropout", || elu_dropout(h, y, p, seed, &self.step_ptr(), offset))
    }
    fn elu_dropout_backward(&self, dy: &DeviceMatrix<f32>, h: &DeviceMatrix<f32>, p: f32, seed: u64, offset: u64, dz: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("elu dropout backward", || elu_dropout_backward(dy, h, p, seed, &self.step_ptr(), offset, dz))
    }
}
