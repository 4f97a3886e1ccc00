//! Binary cross entropy with logits of a link step's scores held as a `rows x 1` column (the
//! output of the decoder's last GEMM, or of `pair_hadamard`'s row sums), the targets implied
//! by position: the step's first `positives` rows are positives (t = 1), the rest of its
//! `pairs` rows negatives (t = 0), rows past them (a batch's padding to its capacity) skipped.
//! Per row: loss += loss_scale (max(s, 0) - s t + ln(1 + e^-|s|)) (torch's
//! `binary_cross_entropy_with_logits`, stable in both tails), grad = (sigmoid(s) - t)
//! grad_scale. The loss goes into the backend's stats, replacing or adding to it
//! (`accumulate`: an epoch of steps summed on the device, read once at its end).
//!
//! CPU (generic over f32 / f64) and the launcher of `kernels-gpu/src/nn/bce_column.rs`.

use super::{check_matrix_64, elementwise_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{BceColumnArgs, bce_column_f32};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// What one call scores: the step's pairs (positives first) and the two scales.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BceColumn {
    pub pairs: usize,
    pub positives: usize,
    /// The gradient's factor (1 / pairs: the mean over the step).
    pub grad_scale: f64,
    /// The loss's factor (1 / the epoch's pairs, to sum an epoch's mean over its steps).
    pub loss_scale: f64,
    /// Add to the stats' loss instead of replacing it.
    pub accumulate: bool,
}

fn check(rows: usize, cols: usize, grad: (usize, usize), c: &BceColumn) -> Result<()> {
    if cols != 1 || grad != (rows, 1) || c.pairs > rows || c.positives > c.pairs {
        return Err(Error::Shape(format!(
            "bce_column: {} pairs ({} positives) of a {rows} x {cols} column, gradient {} x {}",
            c.pairs, c.positives, grad.0, grad.1
        )));
    }
    if rows >= 1 << 31 {
        return Err(Error::Unsupported(format!("bce_column: {rows} rows (at most 2^31 - 1)")));
    }
    Ok(())
}

/// Writes `grad` and returns the loss term (sequential: deterministic).
pub fn bce_column_cpu<T: Real>(x: &[T], c: &BceColumn, grad: &mut [T]) -> T {
    assert_eq!(x.len(), grad.len(), "bce_column_cpu: lengths differ");
    let (gs, ls) = (T::from_f64(c.grad_scale), T::from_f64(c.loss_scale));
    let mut loss = T::zero();
    for (r, (g, &s)) in grad.iter_mut().zip(x).enumerate() {
        if r >= c.pairs {
            *g = T::zero();
            continue;
        }
        let t = if r < c.positives { T::one() } else { T::zero() };
        let abs = if s < T::zero() { -s } else { s };
        let e = (-abs).exp();
        loss += (s.max(T::zero()) - s * t + (T::one() + e).ln()) * ls;
        let sig = if s >= T::zero() { T::one() / (T::one() + e) } else { e / (T::one() + e) };
        *g = (sig - t) * gs;
    }
    loss
}

/// The same on the device: `grad` written whole (padding 0), `stats[0]` the loss (zeroed first
/// unless accumulating; atomic adds, so its last bits depend on their order).
pub fn bce_column(gpu: &Gpu, x: &DeviceMatrix<f32>, c: &BceColumn, grad: &mut DeviceMatrix<f32>, stats: &mut DeviceVec<f32>) -> Result<()> {
    check_matrix_64(x, "bce_column x")?;
    check_matrix_64(grad, "bce_column grad")?;
    check(x.rows, x.cols, (grad.rows, grad.cols), c)?;
    if stats.len() < 4 {
        return Err(Error::Shape(format!("bce_column: {} stats (want 4)", stats.len())));
    }
    if !c.accumulate {
        gpu.stream().memset_zeros(&mut stats.slice_mut().slice_mut(0..4)).map_err(|e| Error::cuda("memset of bce_column stats", e))?;
    }
    let args = BceColumnArgs {
        rows: x.rows as u32,
        ld: x.ld as u32,
        pairs: c.pairs as u32,
        positives: c.positives as u32,
        grad_scale: c.grad_scale as f32,
        loss_scale: c.loss_scale as f32,
        x: x.arg(),
        grad: grad.arg_mut(),
        stats: stats.arg_mut(gpu),
    };
    let mut shape = elementwise_shape(gpu, x.rows.max(1) as u64);
    shape.smem_bytes = 4;
    // SAFETY: x and grad hold `rows` rows of stride ld (both one column: ld 8), stats 4 floats;
    // 4 bytes of shared memory for BlockSums<1>.
    unsafe { bce_column_f32.launch(gpu, shape, &args) }
}

// -- the op on each backend --

pub trait BceColumnOp: Backend {
    /// Binary cross entropy with logits of the column `x` (positives first, see the module):
    /// the gradient into `grad` (x's shape), the loss into `stats`.
    fn bce_column(&self, x: &Self::Mat, c: &BceColumn, grad: &mut Self::Mat, stats: &mut Self::Stats) -> Result<()>;
}

impl<T: Real> BceColumnOp for CpuBackend<T> {
    fn bce_column(&self, x: &HostMat<T>, c: &BceColumn, grad: &mut HostMat<T>, stats: &mut [T; 4]) -> Result<()> {
        check(x.rows, x.cols, (grad.rows, grad.cols), c)?;
        let loss = bce_column_cpu(&x.data, c, &mut grad.data);
        *stats = if c.accumulate { [stats[0] + loss, stats[1], stats[2], stats[3]] } else { [loss, T::zero(), T::zero(), T::zero()] };
        Ok(())
    }
}

impl BceColumnOp for CudaBackend {
    fn bce_column(&self, x: &DeviceMatrix<f32>, c: &BceColumn, grad: &mut DeviceMatrix<f32>, stats: &mut DeviceVec<f32>) -> Result<()> {
        self.timed("bce column", || bce_column(&self.gpu, x, c, grad, stats))
    }
}
