//! Binary cross entropy with logits (link prediction's loss), fused with its gradient: CPU
//! and the launcher of `kernels-gpu/src/nn/bce_logits.rs`.
//!
//! Per entry with score s and target y (+1: an edge, -1: a non-edge, 0: no pair, e.g. the
//! padding slots of a value layout: skipped), t = (y + 1) / 2:
//! loss += inv_n (max(s, 0) - s t + ln(1 + e^-|s|)) (torch's `binary_cross_entropy_with_logits`,
//! stable in both tails), grad = (sigmoid(s) - t) inv_n. stats = [loss, 0, 0, 0].

use rayon::prelude::*;

use super::{ROW_BLOCK, elementwise_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{BceLogitsArgs, bce_logits_f32};
use crate::gpu::{DeviceVec, Gpu};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::CpuBackend;
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// One entry: (loss term before the 1/n, gradient).
fn entry<T: Real>(s: T, y: T, inv_n: T) -> (T, T) {
    if y == T::zero() {
        return (T::zero(), T::zero());
    }
    let t = if y > T::zero() { T::one() } else { T::zero() };
    let abs = if s < T::zero() { -s } else { s };
    let e = (-abs).exp();
    let loss = s.max(T::zero()) - s * t + (T::one() + e).ln();
    let sig = if s >= T::zero() { T::one() / (T::one() + e) } else { e / (T::one() + e) };
    (loss * inv_n, (sig - t) * inv_n)
}

/// Writes `grad` and returns the loss (deterministic: fixed blocks summed in order).
pub fn bce_logits_cpu<T: Real>(scores: &[T], targets: &[T], inv_n: T, grad: &mut [T]) -> T {
    assert!(scores.len() == targets.len() && grad.len() == scores.len(), "bce_logits_cpu: lengths differ");
    let partials: Vec<T> = grad
        .par_chunks_mut(ROW_BLOCK)
        .zip(scores.par_chunks(ROW_BLOCK).zip(targets.par_chunks(ROW_BLOCK)))
        .map(|(g, (s, y))| {
            let mut sum = T::zero();
            for ((g, &s), &y) in g.iter_mut().zip(s).zip(y) {
                let (l, d) = entry(s, y, inv_n);
                sum += l;
                *g = d;
            }
            sum
        })
        .collect();
    partials.into_iter().fold(T::zero(), |a, b| a + b)
}

/// The same on the device: `grad` written, `stats[0..4]` zeroed then `stats[0]` the loss
/// (atomic adds: the last bits depend on their order).
pub fn bce_logits(
    gpu: &Gpu,
    scores: &DeviceVec<f32>,
    targets: &DeviceVec<f32>,
    inv_n: f32,
    grad: &mut DeviceVec<f32>,
    stats: &mut DeviceVec<f32>,
) -> Result<()> {
    let n = scores.len();
    if targets.len() != n || grad.len() != n || stats.len() < 4 {
        return Err(Error::Shape(format!(
            "bce_logits: {n} scores, {} targets, {} gradients, {} stats (want 4)",
            targets.len(),
            grad.len(),
            stats.len()
        )));
    }
    if n >= (1usize << 31) {
        return Err(Error::Unsupported(format!("bce_logits: {n} entries (at most 2^31 - 1)")));
    }
    gpu.stream().memset_zeros(&mut stats.slice_mut().slice_mut(0..4)).map_err(|e| Error::cuda("memset of bce_logits stats", e))?;
    let args = BceLogitsArgs {
        n: n as u32,
        scores: scores.arg(gpu),
        targets: targets.arg(gpu),
        inv_n,
        grad: grad.arg_mut(gpu),
        stats: stats.arg_mut(gpu),
    };
    // SAFETY: scores, targets and grad hold n floats, stats 4 (zeroed above); 4 bytes of shared
    // memory for BlockSums<1>.
    let mut shape = elementwise_shape(gpu, n.max(1) as u64);
    shape.smem_bytes = 4;
    unsafe { bce_logits_f32.launch(gpu, shape, &args) }
}

// -- the op on each backend --

pub trait BceLogitsOp: Backend {
    /// Binary cross entropy with logits of `scores` against `targets` (+1 / -1, 0 skipped),
    /// scaled by `inv_n`: the gradient into `grad`, the loss into `stats` (its `loss`).
    fn bce_logits(
        &self,
        scores: &Self::Edges,
        targets: &Self::Edges,
        inv_n: f32,
        grad: &mut Self::Edges,
        stats: &mut Self::Stats,
    ) -> Result<()>;
}

impl<T: Real> BceLogitsOp for CpuBackend<T> {
    fn bce_logits(&self, scores: &Vec<T>, targets: &Vec<T>, inv_n: f32, grad: &mut Vec<T>, stats: &mut [T; 4]) -> Result<()> {
        if targets.len() != scores.len() || grad.len() != scores.len() {
            return Err(Error::Shape(format!("bce_logits: {} scores, {} targets, {} gradients", scores.len(), targets.len(), grad.len())));
        }
        *stats = [bce_logits_cpu(scores, targets, T::from_f64(inv_n as f64), grad), T::zero(), T::zero(), T::zero()];
        Ok(())
    }
}

impl BceLogitsOp for CudaBackend {
    fn bce_logits(
        &self,
        scores: &DeviceVec<f32>,
        targets: &DeviceVec<f32>,
        inv_n: f32,
        grad: &mut DeviceVec<f32>,
        stats: &mut DeviceVec<f32>,
    ) -> Result<()> {
        self.timed("bce logits", || bce_logits(&self.gpu, scores, targets, inv_n, grad, stats))
    }
}
