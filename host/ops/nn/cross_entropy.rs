//! Cross-entropy (log-softmax + NLL over the train mask), fused with its gradient and the
//! accuracy counts: CPU and the launcher of `kernels-gpu/src/nn/cross_entropy.rs`.
//!
//! Per row r with label y_r and mask byte m_r (bit 0 train, bit 1 val, bit 2 test):
//! lp = log_softmax(logits_r) (max-subtracted); if train: loss += -lp[y_r] * inv_n_train and
//! dlogits_r = (softmax(logits_r) - onehot(y_r)) * inv_n_train, else dlogits_r = 0;
//! correct_r = argmax_c logits_r == y_r (the first maximum on ties); stats[1 + b] += correct_r
//! for every set bit b. stats = [loss, correct train, correct val, correct test].
//! A label outside [0, cols) is never used as an index: its row is incorrect, adds no loss and
//! gets a zero gradient (the caller is expected to validate labels beforehand).

use rayon::prelude::*;

use super::{ROW_BLOCK, check_same, row_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{CrossEntropyArgs, cross_entropy_f32, cross_entropy_rows8_f32, cross_entropy_rows16_f32};
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::partition::nn_row_group_shift;
use crate::util::Real;

/// Mask bit of training rows.
pub const MASK_TRAIN: u8 = 1;
/// Mask bit of validation rows.
pub const MASK_VAL: u8 = 2;
/// Mask bit of test rows.
pub const MASK_TEST: u8 = 4;

/// One row: writes its dlogits, returns [loss, correct train, correct val, correct test].
fn row<T: Real>(x: &[T], label: i32, bits: u8, inv_n_train: T, d: &mut [T]) -> [T; 4] {
    let cols = x.len();
    let valid = label >= 0 && (label as usize) < cols;
    let train = valid && bits & MASK_TRAIN != 0;
    let mut out = [T::zero(); 4];
    if cols == 0 {
        return out;
    }
    let (mut max, mut arg) = (x[0], 0);
    for (c, &v) in x.iter().enumerate().skip(1) {
        if v > max {
            max = v;
            arg = c;
        }
    }
    let sum: T = x.iter().map(|&v| (v - max).exp()).sum();
    if train {
        let y = label as usize;
        out[0] = -(x[y] - max - sum.ln()) * inv_n_train;
        for (c, (o, &v)) in d.iter_mut().zip(x).enumerate() {
            let p = (v - max).exp() / sum;
            *o = (if c == y { p - T::one() } else { p }) * inv_n_train;
        }
    } else {
        d.fill(T::zero());
    }
    if valid && arg == label as usize {
        for b in 0..3 {
            if bits & (1 << b) != 0 {
                out[1 + b] = T::one();
            }
        }
    }
    out
}

/// Loss, gradient and accuracy counts of `logits` (rows x cols); returns
/// [loss, correct train, correct val, correct test]. Deterministic (fixed summation order).
pub fn cross_entropy_cpu<T: Real>(
    logits: &[T],
    rows: usize,
    cols: usize,
    labels: &[i32],
    mask_bits: &[u8],
    inv_n_train: T,
    dlogits: &mut [T],
) -> [T; 4] {
    assert_eq!(logits.len(), rows * cols, "cross_entropy_cpu: logits are not {rows} x {cols}");
    assert_eq!(dlogits.len(), rows * cols, "cross_entropy_cpu: dlogits are not {rows} x {cols}");
    assert_eq!(labels.len(), rows, "cross_entropy_cpu: {} labels for {rows} rows", labels.len());
    assert_eq!(mask_bits.len(), rows, "cross_entropy_cpu: {} mask bytes for {rows} rows", mask_bits.len());
    let mut stats = [T::zero(); 4];
    if cols == 0 {
        return stats; // no class: every row incorrect, no loss
    }
    let block = ROW_BLOCK * cols;
    let partials: Vec<[T; 4]> = dlogits
        .par_chunks_mut(block)
        .zip(logits.par_chunks(block))
        .enumerate()
        .map(|(b, (d, x))| {
            let mut s = [T::zero(); 4];
            for (i, (dr, xr)) in d.chunks_mut(cols).zip(x.chunks(cols)).enumerate() {
                let r = b * ROW_BLOCK + i;
                let o = row(xr, labels[r], mask_bits[r], inv_n_train, dr);
                for k in 0..4 {
                    s[k] += o[k];
                }
            }
            s
        })
        .collect();
    for p in partials {
        for k in 0..4 {
            stats[k] += p[k];
        }
    }
    stats
}

/// Cross-entropy on the device: writes `dlogits` (same shape as `logits`, padding 0) and
/// `stats[0..4]` (zeroed with a memset, then atomic adds: the loss's last bits depend on their
/// order; the counts are exact below 2^24 rows). A thread per row for rows of 8 or 16 floats
/// (ld), else a group of lanes per row (the classes rounded up to a power of two, at most a
/// warp), any number of classes.
pub fn cross_entropy(
    logits: &DeviceMatrix<f32>,
    labels: &DeviceVec<i32>,
    mask_bits: &DeviceVec<u8>,
    inv_n_train: f32,
    dlogits: &mut DeviceMatrix<f32>,
    stats: &mut DeviceVec<f32>,
) -> Result<()> {
    check_same(logits, dlogits, "cross_entropy")?;
    let rows = logits.rows;
    if labels.len() < rows || mask_bits.len() < rows || stats.len() < 4 {
        return Err(Error::Shape(format!(
            "cross_entropy over {rows} rows: {} labels, {} mask bytes, {} stats (want 4)",
            labels.len(),
            mask_bits.len(),
            stats.len()
        )));
    }
    let gpu = logits.gpu().clone();
    gpu.stream().memset_zeros(&mut stats.slice_mut().slice_mut(0..4)).map_err(|e| Error::cuda("memset of cross_entropy stats", e))?;
    let shift = nn_row_group_shift(logits.cols as u32);
    let args = CrossEntropyArgs {
        rows: rows as u32,
        cols: logits.cols as u32,
        ld: logits.ld as u32,
        shift,
        logits: logits.arg(),
        labels: labels.arg(&gpu),
        mask_bits: mask_bits.arg(&gpu),
        inv_n_train,
        dlogits: dlogits.arg_mut(),
        stats: stats.arg_mut(&gpu),
    };
    // SAFETY: logits and dlogits hold rows x ld floats, labels and
    // mask_bits at least rows entries, stats 4 (zeroed above); 16 bytes of shared memory for
    // the block sums. Labels outside [0, cols) are never dereferenced.
    // Rows of 8 or 16 floats: a thread per row (`cross_entropy_rows`).
    let narrow = match logits.ld {
        8 => Some(cross_entropy_rows8_f32),
        16 => Some(cross_entropy_rows16_f32),
        _ => None,
    };
    if let Some(kernel) = narrow {
        // SAFETY: as below; each thread reads and writes whole rows of ld (8 or 16) floats,
        // grid-stride. Four rows a thread (128 a warp): a quarter of the blocks, each ending in
        // its atomics on the same four stats (2^18 x 8 on the H100: 16 -> 15 us, NOTES).
        return unsafe { kernel.launch(&gpu, row_shape(&gpu, rows as u64, 128, 16), &args) };
    }
    unsafe { cross_entropy_f32.launch(&gpu, row_shape(&gpu, rows as u64, 32 >> shift, 16), &args) }
}

// -- the op on each backend --

pub trait CrossEntropyOp: Backend {
    /// Log-softmax + NLL over the train nodes (mean), its gradient, and correct counts per mask.
    fn cross_entropy(
        &self,
        logits: &Self::Mat,
        labels: &Self::Labels,
        inv_n_train: f32,
        dlogits: &mut Self::Mat,
        stats: &mut Self::Stats,
    ) -> Result<()>;
}

impl<T: Real> CrossEntropyOp for CpuBackend<T> {
    fn cross_entropy(
        &self,
        logits: &HostMat<T>,
        labels: &(Vec<i32>, Vec<u8>),
        inv_n_train: f32,
        dlogits: &mut HostMat<T>,
        stats: &mut [T; 4],
    ) -> Result<()> {
        same_shape("cross_entropy", dlogits, logits)?;
        *stats = cross_entropy_cpu(
            &logits.data,
            logits.rows,
            logits.cols,
            &labels.0,
            &labels.1,
            T::from_f64(inv_n_train as f64),
            &mut dlogits.data,
        );
        Ok(())
    }
}

impl CrossEntropyOp for CudaBackend {
    fn cross_entropy(
        &self,
        logits: &DeviceMatrix<f32>,
        labels: &(DeviceVec<i32>, DeviceVec<u8>),
        inv_n_train: f32,
        dlogits: &mut DeviceMatrix<f32>,
        stats: &mut DeviceVec<f32>,
    ) -> Result<()> {
        self.timed("cross entropy", || cross_entropy(logits, &labels.0, &labels.1, inv_n_train, dlogits, stats))
    }
}
