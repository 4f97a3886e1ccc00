//! BatchNorm1d over the rows of a matrix (torch's `BatchNorm1d` on `n x c`): CPU and the
//! launchers of `kernels-gpu/src/nn/batch_norm.rs`.
//!
//! Training: per column, mean and biased variance of the batch normalise; the running mean and
//! variance move by `momentum` towards the batch mean and the *unbiased* variance (as torch).
//! Evaluation: the running statistics normalise. Both keep `mean` and `inv_std = 1 /
//! sqrt(var + eps)` for the backward pass, which is the standard one through the batch
//! statistics: with xhat = (x - mean) inv_std,
//! dgamma = Σ_r dy xhat, dbeta = Σ_r dy, dx = gamma inv_std / N (N dy - dbeta - xhat dgamma).
//!
//! Live rows: a model built at a capacity and rebound per batch (graph classification) pads its
//! batches with rows past the live ones. Given a count of live rows (`live`: one u32 where the
//! ops read it, rewritten per batch), both passes run over the leading `live` rows alone, as on
//! the unpadded batch, and write 0 to the padded rows' outputs and input gradients.

use rayon::prelude::*;

use super::col_sums::col_sums_cpu;
use super::{check_gpu, check_matrix_64, check_same, elementwise_shape, n4};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{
    BatchNormApplyArgs, BatchNormBackwardArgs, BatchNormBackwardSumsArgs, BatchNormFinishArgs, BatchNormSqArgs, BatchNormSumArgs,
    batch_norm_apply_f32, batch_norm_backward_f32, batch_norm_backward_sums_f32, batch_norm_finish_f32, batch_norm_sq_f32,
    batch_norm_sum_f32,
};
use crate::gpu::launch::Ptr;
use crate::gpu::launch::Shape;
use crate::gpu::{DeviceMatrix, DeviceVec};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat, same_shape};
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::config::{NN_BLOCK, NN_BLOCKS_PER_SM};
use crate::util::Real;

/// torch's defaults.
pub const BN_MOMENTUM: f32 = 0.1;
pub const BN_EPS: f32 = 1e-5;

/// Mode and constants of one BatchNorm call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormHyper {
    /// Batch statistics (and update the running ones) or the running statistics.
    pub train: bool,
    pub momentum: f32,
    pub eps: f32,
}

impl BatchNormHyper {
    /// torch's momentum and eps.
    pub fn torch(train: bool) -> Self {
        BatchNormHyper { train, momentum: BN_MOMENTUM, eps: BN_EPS }
    }
}

/// The forward pass on `x` (rows x cols, row-major): y, and mean / inv_std per column (kept for
/// the backward). `affine` = (gamma, beta), `running` = (mean, var), each `cols` values.
pub fn batch_norm_cpu<T: Real>(
    x: &[T],
    cols: usize,
    affine: (&[T], &[T]),
    running: (&mut [T], &mut [T]),
    hyper: BatchNormHyper,
    y: &mut [T],
    saved: (&mut [T], &mut [T]),
) {
    let rows = x.len().checked_div(cols).unwrap_or(0);
    assert_eq!(x.len(), rows * cols, "batch_norm_cpu: x is not a multiple of {cols} columns");
    assert_eq!(y.len(), x.len(), "batch_norm_cpu: y has {} values for {}", y.len(), x.len());
    let (gamma, beta) = affine;
    let (rm, rv) = running;
    let (mean, inv_std) = saved;
    for v in [gamma.len(), beta.len(), rm.len(), rv.len(), mean.len(), inv_std.len()] {
        assert_eq!(v, cols, "batch_norm_cpu: a per-column vector has {v} values for {cols} columns");
    }
    if cols == 0 {
        return;
    }
    let eps = T::from_f64(hyper.eps as f64);
    if hyper.train {
        let n = T::from_f64(rows.max(1) as f64);
        col_sums_cpu(x, rows, cols, mean);
        mean.iter_mut().for_each(|m| *m /= n);
        // Centred sum of squares (two passes: no cancellation of E[x^2] - E[x]^2).
        let mut sq = vec![T::zero(); cols];
        for row in x.chunks(cols) {
            for ((s, &v), &m) in sq.iter_mut().zip(row).zip(mean.iter()) {
                *s += (v - m) * (v - m);
            }
        }
        let mom = T::from_f64(hyper.momentum as f64);
        let unbiased_n = T::from_f64(rows.saturating_sub(1).max(1) as f64);
        for c in 0..cols {
            rm[c] = (T::one() - mom) * rm[c] + mom * mean[c];
            rv[c] = (T::one() - mom) * rv[c] + mom * (sq[c] / unbiased_n);
            inv_std[c] = T::one() / (sq[c] / n + eps).sqrt();
        }
    } else {
        mean.copy_from_slice(rm);
        for c in 0..cols {
            inv_std[c] = T::one() / (rv[c] + eps).sqrt();
        }
    }
    let (mean, inv_std) = (&*mean, &*inv_std);
    y.par_chunks_mut(cols).zip(x.par_chunks(cols)).with_min_len(64).for_each(|(yr, xr)| {
        for c in 0..cols {
            yr[c] = (xr[c] - mean[c]) * inv_std[c] * gamma[c] + beta[c];
        }
    });
}

/// The backward pass through the batch statistics: dx (overwritten) and the parameter gradients
/// `grads` = (dgamma, dbeta) (overwritten), from `x`, `dy` and what the forward kept.
pub fn batch_norm_backward_cpu<T: Real>(
    x: &[T],
    dy: &[T],
    cols: usize,
    gamma: &[T],
    saved: (&[T], &[T]),
    dx: &mut [T],
    grads: (&mut [T], &mut [T]),
) {
    let rows = x.len().checked_div(cols).unwrap_or(0);
    assert_eq!(x.len(), rows * cols, "batch_norm_backward_cpu: x is not a multiple of {cols} columns");
    assert_eq!(dy.len(), x.len(), "batch_norm_backward_cpu: dy has {} values for {}", dy.len(), x.len());
    assert_eq!(dx.len(), x.len(), "batch_norm_backward_cpu: dx has {} values for {}", dx.len(), x.len());
    let (mean, inv_std) = saved;
    let (dgamma, dbeta) = grads;
    if cols == 0 {
        return;
    }
    col_sums_cpu(dy, rows, cols, dbeta);
    dgamma.fill(T::zero());
    for (xr, dr) in x.chunks(cols).zip(dy.chunks(cols)) {
        for c in 0..cols {
            dgamma[c] += dr[c] * (xr[c] - mean[c]) * inv_std[c];
        }
    }
    let n = T::from_f64(rows as f64);
    let inv_n = T::one() / T::from_f64(rows.max(1) as f64);
    let (dgamma, dbeta) = (&*dgamma, &*dbeta);
    dx.par_chunks_mut(cols).zip(x.par_chunks(cols).zip(dy.par_chunks(cols))).with_min_len(64).for_each(|(o, (xr, dr))| {
        for c in 0..cols {
            let xhat = (xr[c] - mean[c]) * inv_std[c];
            o[c] = gamma[c] * inv_std[c] * inv_n * (n * dr[c] - dbeta[c] - xhat * dgamma[c]);
        }
    });
}

/// A `1 x cols` vector on the device for a matrix of `cols` columns.
fn check_vec(v: &DeviceMatrix<f32>, cols: usize, what: &str) -> Result<()> {
    check_matrix_64(v, what)?;
    if (v.rows, v.cols) != (1, cols) {
        return Err(Error::Shape(format!("{what}: {} x {} (want 1 x {cols})", v.rows, v.cols)));
    }
    Ok(())
}

/// Launch shape and shared memory of the column reductions with `sums` sums per column (the
/// tiling of `col_sums`).
fn reduce_shape(x: &DeviceMatrix<f32>, sums: u32) -> Shape {
    let ld4 = (x.ld / 4) as u32;
    let (rows_per_step, smem) = if ld4 <= NN_BLOCK { (NN_BLOCK / ld4.max(1), 16 * sums * ld4) } else { (1, 0) };
    let blocks = (x.rows as u64).div_ceil(16 * rows_per_step as u64).clamp(1, (x.gpu().info().sm_count * NN_BLOCKS_PER_SM) as u64);
    Shape::linear(blocks as u32, NN_BLOCK, smem)
}

/// The device address of a live-row count (null: every row counts), checked to hold one.
fn live_arg(x: &DeviceMatrix<f32>, live: Option<&DeviceVec<u32>>, what: &str) -> Result<Ptr<u32>> {
    match live {
        None => Ok(Ptr::null()),
        Some(v) if v.is_empty() => Err(Error::Shape(format!("{what}: an empty live-row count"))),
        Some(v) => Ok(v.arg(x.gpu())),
    }
}

/// The forward pass on the device (see [`batch_norm_cpu`]); `saved` = (mean, inv_std) also
/// serve as the scratch for the batch's column sums and centred sums of squares. With `live`,
/// over its leading rows only (see the module note).
pub fn batch_norm(
    x: &DeviceMatrix<f32>,
    affine: (&DeviceMatrix<f32>, &DeviceMatrix<f32>),
    running: (&mut DeviceMatrix<f32>, &mut DeviceMatrix<f32>),
    hyper: BatchNormHyper,
    y: &mut DeviceMatrix<f32>,
    saved: (&mut DeviceMatrix<f32>, &mut DeviceMatrix<f32>),
    live: Option<&DeviceVec<u32>>,
) -> Result<()> {
    check_same(x, y, "batch_norm")?;
    let live = live_arg(x, live, "batch_norm")?;
    let (gamma, beta) = affine;
    let (rm, rv) = running;
    let (mean, inv_std) = saved;
    for (v, what) in
        [(gamma, "batch_norm gamma"), (beta, "batch_norm beta"), (&*rm, "batch_norm running mean"), (&*rv, "batch_norm running var")]
    {
        check_vec(v, x.cols, what)?;
        check_gpu(x.gpu(), v.gpu(), what)?;
    }
    for (v, what) in [(&*mean, "batch_norm mean"), (&*inv_std, "batch_norm inv_std")] {
        check_vec(v, x.cols, what)?;
        check_gpu(x.gpu(), v.gpu(), what)?;
    }
    let gpu = x.gpu().clone();
    let ld4 = (x.ld / 4) as u32;
    if hyper.train {
        // sum -> mean's buffer, centred squares -> inv_std's; `finish` turns them into both.
        mean.zero()?;
        let sum = BatchNormSumArgs { rows: x.rows as u32, cols: x.cols as u32, ld4, live, x: x.arg(), sum: mean.arg_mut() };
        // SAFETY: x holds rows x ld floats, sum one padded row (zeroed above); the shared memory is
        // what the narrow tiling uses for one sum; `live` is null or one u32.
        unsafe { batch_norm_sum_f32.launch(&gpu, reduce_shape(x, 1), &sum)? };
        inv_std.zero()?;
        let args =
            BatchNormSqArgs { rows: x.rows as u32, cols: x.cols as u32, ld4, live, x: x.arg(), sum: mean.arg(), sq: inv_std.arg_mut() };
        // SAFETY: x holds rows x ld floats, sum and sq one padded row; the shared memory is what
        // the narrow tiling uses for one sum.
        unsafe { batch_norm_sq_f32.launch(&gpu, reduce_shape(x, 1), &args)? };
    }
    let finish = BatchNormFinishArgs {
        rows: x.rows as u32,
        cols: x.cols as u32,
        live,
        train: hyper.train as u32,
        eps: hyper.eps,
        momentum: hyper.momentum,
        // Each column's thread reads sum / sq before writing mean / inv_std in the same slots.
        sum: mean.arg(),
        sq: inv_std.arg(),
        running_mean: rm.arg_mut(),
        running_var: rv.arg_mut(),
        mean: mean.arg_mut(),
        inv_std: inv_std.arg_mut(),
    };
    // SAFETY: every vector holds cols floats; one thread per column.
    unsafe { batch_norm_finish_f32.launch(&gpu, Shape::linear((x.cols as u32).div_ceil(NN_BLOCK).max(1), NN_BLOCK, 0), &finish)? };
    let n4 = n4(x);
    let apply = BatchNormApplyArgs {
        n4,
        ld4,
        live,
        x: x.arg(),
        y: y.arg_mut(),
        mean: mean.arg(),
        inv_std: inv_std.arg(),
        gamma: gamma.arg(),
        beta: beta.arg(),
    };
    // SAFETY: x and y hold n4 float4s of rows of ld floats, the vectors one padded row each.
    unsafe { batch_norm_apply_f32.launch(&gpu, elementwise_shape(&gpu, n4), &apply) }
}

/// The backward pass on the device (see [`batch_norm_backward_cpu`]); with `live`, over its
/// leading rows only.
pub fn batch_norm_backward(
    x: &DeviceMatrix<f32>,
    dy: &DeviceMatrix<f32>,
    gamma: &DeviceMatrix<f32>,
    saved: (&DeviceMatrix<f32>, &DeviceMatrix<f32>),
    dx: &mut DeviceMatrix<f32>,
    grads: (&mut DeviceMatrix<f32>, &mut DeviceMatrix<f32>),
    live: Option<&DeviceVec<u32>>,
) -> Result<()> {
    check_same(x, dy, "batch_norm_backward")?;
    let live = live_arg(x, live, "batch_norm_backward")?;
    check_same(x, dx, "batch_norm_backward")?;
    let (mean, inv_std) = saved;
    let (dgamma, dbeta) = grads;
    for (v, what) in [(gamma, "batch_norm_backward gamma"), (mean, "batch_norm_backward mean"), (inv_std, "batch_norm_backward inv_std")] {
        check_vec(v, x.cols, what)?;
        check_gpu(x.gpu(), v.gpu(), what)?;
    }
    for (v, what) in [(&*dgamma, "batch_norm_backward dgamma"), (&*dbeta, "batch_norm_backward dbeta")] {
        check_vec(v, x.cols, what)?;
        check_gpu(x.gpu(), v.gpu(), what)?;
    }
    let gpu = x.gpu().clone();
    let ld4 = (x.ld / 4) as u32;
    dgamma.zero()?;
    dbeta.zero()?;
    let sums = BatchNormBackwardSumsArgs {
        rows: x.rows as u32,
        cols: x.cols as u32,
        ld4,
        live,
        x: x.arg(),
        dy: dy.arg(),
        mean: mean.arg(),
        inv_std: inv_std.arg(),
        dgamma: dgamma.arg_mut(),
        dbeta: dbeta.arg_mut(),
    };
    // SAFETY: x and dy hold rows x ld floats, the vectors one padded row; shared memory for two sums.
    unsafe { batch_norm_backward_sums_f32.launch(&gpu, reduce_shape(x, 2), &sums)? };
    let n4 = n4(x);
    let args = BatchNormBackwardArgs {
        n4,
        ld4,
        rows: x.rows as u32,
        live,
        x: x.arg(),
        dy: dy.arg(),
        mean: mean.arg(),
        inv_std: inv_std.arg(),
        gamma: gamma.arg(),
        dgamma: dgamma.arg(),
        dbeta: dbeta.arg(),
        dx: dx.arg_mut(),
    };
    // SAFETY: x, dy and dx hold n4 float4s of rows of ld floats, the vectors one padded row.
    unsafe { batch_norm_backward_f32.launch(&gpu, elementwise_shape(&gpu, n4), &args) }
}

// -- the op on each backend --

pub trait BatchNormOp: Backend {
    /// `y = BN(x)` with `affine` = (gamma, beta), `running` = (mean, var) and `saved` = (mean,
    /// inv_std) for the backward, all `1 x cols`; `input` = (x, live): with a count of live rows
    /// (one id, see [`crate::ops::backend::bind::BindOps::bind_ids`]) over the leading rows it
    /// counts, the others 0.
    fn batch_norm(
        &self,
        input: (&Self::Mat, Option<&Self::Ids>),
        affine: (&Self::Mat, &Self::Mat),
        running: (&mut Self::Mat, &mut Self::Mat),
        hyper: BatchNormHyper,
        y: &mut Self::Mat,
        saved: (&mut Self::Mat, &mut Self::Mat),
    ) -> Result<()>;
    /// `dx` and `grads` = (dgamma, dbeta) from `dy` after a training `batch_norm` of `input` =
    /// (x, live).
    fn batch_norm_backward(
        &self,
        input: (&Self::Mat, Option<&Self::Ids>),
        dy: &Self::Mat,
        gamma: &Self::Mat,
        saved: (&Self::Mat, &Self::Mat),
        dx: &mut Self::Mat,
        grads: (&mut Self::Mat, &mut Self::Mat),
    ) -> Result<()>;
}

fn host_vecs<T>(cols: usize, vs: &[(&HostMat<T>, &str)]) -> Result<()> {
    for (v, what) in vs {
        if (v.rows, v.cols) != (1, cols) {
            return Err(Error::Shape(format!("{what}: {} x {} (want 1 x {cols})", v.rows, v.cols)));
        }
    }
    Ok(())
}

/// The live rows of a `rows`-row matrix: all, or the count `live` holds (at most `rows`).
fn host_live(rows: usize, live: Option<&Vec<u32>>, what: &str) -> Result<usize> {
    match live.map(|v| v.first()) {
        None => Ok(rows),
        Some(Some(&n)) => Ok(rows.min(n as usize)),
        Some(None) => Err(Error::Shape(format!("{what}: an empty live-row count"))),
    }
}

impl<T: Real> BatchNormOp for CpuBackend<T> {
    fn batch_norm(
        &self,
        (x, live): (&HostMat<T>, Option<&Vec<u32>>),
        affine: (&HostMat<T>, &HostMat<T>),
        running: (&mut HostMat<T>, &mut HostMat<T>),
        hyper: BatchNormHyper,
        y: &mut HostMat<T>,
        saved: (&mut HostMat<T>, &mut HostMat<T>),
    ) -> Result<()> {
        same_shape("batch_norm", y, x)?;
        let c = x.cols;
        host_vecs(c, &[(affine.0, "batch_norm gamma"), (affine.1, "batch_norm beta"), (running.0, "batch_norm running mean")])?;
        host_vecs(c, &[(running.1, "batch_norm running var"), (saved.0, "batch_norm mean"), (saved.1, "batch_norm inv_std")])?;
        // The live rows are the batch: normalised as an unpadded one, the rest written 0.
        let n = host_live(x.rows, live, "batch_norm")? * c;
        batch_norm_cpu(
            &x.data[..n],
            c,
            (&affine.0.data, &affine.1.data),
            (&mut running.0.data, &mut running.1.data),
            hyper,
            &mut y.data[..n],
            (&mut saved.0.data, &mut saved.1.data),
        );
        y.data[n..].fill(T::zero());
        Ok(())
    }
    fn batch_norm_backward(
        &self,
        (x, live): (&HostMat<T>, Option<&Vec<u32>>),
        dy: &HostMat<T>,
        gamma: &HostMat<T>,
        saved: (&HostMat<T>, &HostMat<T>),
        dx: &mut HostMat<T>,
        grads: (&mut HostMat<T>, &mut HostMat<T>),
    ) -> Result<()> {
        same_shape("batch_norm_backward", dy, x)?;
        same_shape("batch_norm_backward", dx, x)?;
        let c = x.cols;
        host_vecs(
            c,
            &[(gamma, "batch_norm_backward gamma"), (saved.0, "batch_norm_backward mean"), (saved.1, "batch_norm_backward inv_std")],
        )?;
        host_vecs(c, &[(grads.0, "batch_norm_backward dgamma"), (grads.1, "batch_norm_backward dbeta")])?;
        let n = host_live(x.rows, live, "batch_norm_backward")? * c;
        batch_norm_backward_cpu(
            &x.data[..n],
            &dy.data[..n],
            c,
            &gamma.data,
            (&saved.0.data, &saved.1.data),
            &mut dx.data[..n],
            (&mut grads.0.data, &mut grads.1.data),
        );
        dx.data[n..].fill(T::zero());
        Ok(())
    }
}

impl BatchNormOp for CudaBackend {
    fn batch_norm(
        &self,
        (x, live): (&DeviceMatrix<f32>, Option<&DeviceVec<u32>>),
        affine: (&DeviceMatrix<f32>, &DeviceMatrix<f32>),
        running: (&mut DeviceMatrix<f32>, &mut DeviceMatrix<f32>),
        hyper: BatchNormHyper,
        y: &mut DeviceMatrix<f32>,
        saved: (&mut DeviceMatrix<f32>, &mut DeviceMatrix<f32>),
    ) -> Result<()> {
        self.timed("batch norm", || batch_norm(x, affine, running, hyper, y, saved, live))
    }
    fn batch_norm_backward(
        &self,
        (x, live): (&DeviceMatrix<f32>, Option<&DeviceVec<u32>>),
        dy: &DeviceMatrix<f32>,
        gamma: &DeviceMatrix<f32>,
        saved: (&DeviceMatrix<f32>, &DeviceMatrix<f32>),
        dx: &mut DeviceMatrix<f32>,
        grads: (&mut DeviceMatrix<f32>, &mut DeviceMatrix<f32>),
    ) -> Result<()> {
        self.timed("batch norm backward", || batch_norm_backward(x, dy, gamma, saved, dx, grads, live))
    }
}
