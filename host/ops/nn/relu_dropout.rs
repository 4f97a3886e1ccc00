//! A hidden layer's bias, ReLU and dropout fused (`y = dropout(max(z + b, 0))`, the mask drawn
//! from the counter RNG and never stored) and the backward of its ReLU and dropout from `y`
//! alone (`dz = y > 0 ? dy / (1 - p) : 0`: y > 0 exactly where the ReLU passed and the element
//! was kept). CPU references and the launchers of `kernels-gpu/src/nn/relu_dropout.rs`.
//!
//! Why: unfused, a hidden layer's tail is bias + ReLU (read and write the activation), dropout
//! (read it, write the dropped copy and a mask), and in the backward dropout' (read the
//! gradient and the mask, write) then ReLU' (read the activation and the gradient, write):
//! about twice the bytes of one read and one write each way (figures in bench/NOTES.md,
//! 2026-11-27 morning). The values are the unfused path's, bit for bit, on both backends.

use rayon::prelude::*;

use super::dropout::{DropKey, check_p, matrix_keep, scale_f32};
use super::{check_matrix_64, check_same, elementwise_shape, n4};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{
    BiasReluDropoutArgs, ReluDropoutBackwardArgs, bias_relu_dropout_in_place_f32, relu_dropout_backward_in_place_f32,
};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::rng::{dropout_seed_key, dropout_threshold};
use crate::util::Real;

/// y = dropout(max(z + b, 0)) on the host, written over z (`zy`: z before, y after; rows x cols
/// unpadded, `b` cols), element (r, c) keyed by `key` as `dropout_matrix_cpu_at` keys it: the
/// values of `bias_add_cpu`, `relu_cpu`, then that dropout.
pub fn bias_relu_dropout_in_place_cpu<T: Real>(
    zy: &mut [T],
    (rows, cols): (usize, usize),
    b: &[T],
    key: DropKey<'_>,
    step: u32,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    if zy.len() != rows * cols || b.len() != cols {
        return Err(Error::Shape(format!("bias_relu_dropout_in_place_cpu: zy {}, b {} for {rows} x {cols}", zy.len(), b.len())));
    }
    if cols == 0 {
        return Ok(());
    }
    key.check_ids(rows, "bias_relu_dropout_in_place_cpu")?;
    let keep = matrix_keep(cols, key, step);
    let keep_frac = T::one() - T::from_f64(p as f64);
    zy.par_chunks_mut(cols).enumerate().with_min_len(64).for_each(|(r, row)| {
        for (c, v) in row.iter_mut().enumerate() {
            let a = *v + b[c];
            let a = if a > T::zero() { a } else { T::zero() };
            *v = if keep(r, c) { a / keep_frac } else { T::zero() };
        }
    });
    Ok(())
}

/// dz = y > 0 ? dy / (1 - p) : 0 on the host, written over dy (`d`: dy before, dz after):
/// `dropout_backward` then `relu_backward`.
pub fn relu_dropout_backward_in_place_cpu<T: Real>(d: &mut [T], y: &[T], p: f32) -> Result<()> {
    check_p(p)?;
    if d.len() != y.len() {
        return Err(Error::Shape(format!("relu_dropout_backward_in_place_cpu: d {}, y {} elements", d.len(), y.len())));
    }
    let keep_frac = T::one() - T::from_f64(p as f64);
    d.par_iter_mut().zip(y.par_iter()).with_min_len(super::MIN_PAR_LEN).for_each(|(d, &o)| {
        *d = if o > T::zero() { *d / keep_frac } else { T::zero() };
    });
    Ok(())
}

/// y = dropout(max(z + b, 0)) on the device, written over z (`zy`: z before, y after), with the
/// mask drawn from `key` and the step counter (whole padded buffers).
pub fn bias_relu_dropout_in_place(
    zy: &mut DeviceMatrix<f32>,
    b: &DeviceMatrix<f32>,
    key: DropKey<'_, DeviceVec<u32>>,
    step: &DeviceVec<u32>,
) -> Result<()> {
    let p = key.p;
    check_p(p)?;
    check_matrix_64(b, "bias_relu_dropout_in_place b")?;
    if b.rows != 1 || b.cols != zy.cols {
        return Err(Error::Shape(format!(
            "bias_relu_dropout_in_place: zy is {} x {}, b is {} x {} (want 1 x {})",
            zy.rows, zy.cols, b.rows, b.cols, zy.cols
        )));
    }
    if step.is_empty() {
        return Err(Error::Shape("bias_relu_dropout_in_place: empty step counter".into()));
    }
    let gpu = zy.gpu().clone();
    super::check_gpu(&gpu, b.gpu(), "bias_relu_dropout_in_place")?;
    let n4 = n4(zy);
    let ids = key.ids_arg(&gpu, zy.rows, "bias_relu_dropout_in_place")?;
    let args = BiasReluDropoutArgs {
        n4,
        ld4: (zy.ld / 4) as u32,
        z: zy.arg(),
        b: b.arg(),
        y: zy.arg_mut(),
        threshold: dropout_threshold(p),
        scale: scale_f32(p),
        seed_key: dropout_seed_key(key.seed),
        step: step.arg(&gpu),
        offset: key.offset,
        ids,
    };
    // SAFETY: zy holds n4 float4s of rows of ld floats, read and written by the in-place kernel
    // (each float4 by one thread, read before written, with coherent loads); b one row of ld,
    // step one u32, ids (if any) one per row.
    unsafe { bias_relu_dropout_in_place_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

/// dz = y > 0 ? dy / (1 - p) : 0 on the device, written over dy (`d`: dy before, dz after;
/// whole padded buffers, y the forward's output).
pub fn relu_dropout_backward_in_place(d: &mut DeviceMatrix<f32>, y: &DeviceMatrix<f32>, p: f32) -> Result<()> {
    check_p(p)?;
    check_same(d, y, "relu_dropout_backward_in_place")?;
    let gpu = d.gpu().clone();
    let n4 = n4(d);
    let args = ReluDropoutBackwardArgs { n4, dy: d.arg(), y: y.arg(), scale: scale_f32(p), dz: d.arg_mut() };
    // SAFETY: d and y hold n4 float4s each (d distinct from y: a unique and a shared borrow); d
    // is read and written by the in-place kernel, each float4 by one thread, coherent loads.
    unsafe { relu_dropout_backward_in_place_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

// -- the op on each backend --

pub trait ReluDropoutOp: Backend {
    /// `y = dropout(max(z + b, 0))` written over z (`zy`: z before, y after), with the mask
    /// [`DropoutOp::dropout_at`](super::dropout::DropoutOp::dropout_at) would draw for `key` and
    /// the step counter, not stored.
    fn bias_relu_dropout_in_place(&self, zy: &mut Self::Mat, b: &Self::Mat, key: DropKey<'_, Self::Ids>) -> Result<()>;
    /// `dz = y > 0 ? dy / (1 - p) : 0` written over dy (`d`: dy before, dz after) for the `y` of
    /// [`ReluDropoutOp::bias_relu_dropout_in_place`].
    fn relu_dropout_backward_in_place(&self, d: &mut Self::Mat, y: &Self::Mat, p: f32) -> Result<()>;
}

impl<T: Real> ReluDropoutOp for CpuBackend<T> {
    fn bias_relu_dropout_in_place(&self, zy: &mut HostMat<T>, b: &HostMat<T>, key: DropKey<'_, Vec<u32>>) -> Result<()> {
        let shape = (zy.rows, zy.cols);
        bias_relu_dropout_in_place_cpu(&mut zy.data, shape, &b.data, key.host(), self.step())
    }
    fn relu_dropout_backward_in_place(&self, d: &mut HostMat<T>, y: &HostMat<T>, p: f32) -> Result<()> {
        same_shape("relu_dropout_backward_in_place", d, y)?;
        relu_dropout_backward_in_place_cpu(&mut d.data, &y.data, p)
    }
}

impl ReluDropoutOp for CudaBackend {
    fn bias_relu_dropout_in_place(
        &self,
        zy: &mut DeviceMatrix<f32>,
        b: &DeviceMatrix<f32>,
        key: DropKey<'_, DeviceVec<u32>>,
    ) -> Result<()> {
        self.timed("bias relu dropout", || bias_relu_dropout_in_place(zy, b, key, &self.step_ptr()))
    }
    fn relu_dropout_backward_in_place(&self, d: &mut DeviceMatrix<f32>, y: &DeviceMatrix<f32>, p: f32) -> Result<()> {
        self.timed("relu dropout backward", || relu_dropout_backward_in_place(d, y, p))
    }
}
