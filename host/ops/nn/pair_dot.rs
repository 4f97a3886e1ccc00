//! Link prediction's dot-product decoder on a pair list kept as a **symmetric pair pattern**:
//! pair (u, v) is entry `v << 1` of row u and entry `u << 1 | 1` of row v (the low bit says
//! which end the row is, so a pair (u, v) and a pair (v, u) stay two), rows sorted by key,
//! each entry with a target (+1 a positive, -1 a negative, 0 a repeat of the entry before it:
//! skipped). Scoring is a row pass (score(e) = z_u . z_c), and the gradient of z another,
//! dz_u = sum over row u of grad(e) z_c, with no transpose: every pair reaches both its ends
//! through its two entries, in a fixed order (deterministic, no atomics). Each pair's loss
//! counts half at each of its entries; the mean is over the distinct pairs of the two lists a
//! step scores (the training positives, built once, and the epoch's negatives, built on the
//! device by `negative_pattern`).
//!
//! CPU (the reference, generic over f32 / f64) and the launchers of
//! `kernels-gpu/src/nn/pair_dot.rs`.

use rayon::prelude::*;

use super::{check_matrix_64, elementwise_shape, row_runs, row_shape};
use crate::error::{Error, Result};
use crate::gpu::abi::nn::{PairBceArgs, PairDotArgs, PairDotBackwardArgs, pair_bce_f32, pair_dot_backward_f32, pair_dot_f32};
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostMat};
use crate::ops::backend::cuda::CudaBackend;
use crate::util::Real;

/// A pair pattern as plain arrays (what the host builds and uploads, and what a test reads back).
#[derive(Clone, Debug, PartialEq)]
pub struct PairPattern {
    pub n: usize,
    pub row_ptr: Vec<u32>,
    pub keys: Vec<u32>,
    pub targets: Vec<f32>,
    /// Pairs counted once (repeats left out).
    pub distinct: usize,
}

/// At most this many pairs in one list (two entries each, below 2^31).
pub const MAX_PAIRS: usize = (1 << 30) - 1;

impl PairPattern {
    /// The pattern of `pairs` on `n` nodes, each with `target` (+1 / -1); a pair given twice is
    /// marked a repeat (target 0) at its later entries. Refuses a pair out of range or joining a
    /// node to itself.
    pub fn new(n: usize, pairs: &[[u32; 2]], target: f32) -> Result<Self> {
        if n >= 1 << 31 {
            return Err(Error::Unsupported(format!("pair pattern: {n} nodes (at most 2^31 - 1)")));
        }
        if pairs.len() > MAX_PAIRS {
            return Err(Error::Unsupported(format!("pair pattern: {} pairs (at most 2^30 - 1)", pairs.len())));
        }
        if let Some(p) = pairs.iter().find(|p| p[0] as usize >= n || p[1] as usize >= n) {
            return Err(Error::Unsupported(format!("pair ({}, {}) is out of range for {n} nodes", p[0], p[1])));
        }
        if let Some(p) = pairs.iter().find(|p| p[0] == p[1]) {
            return Err(Error::Unsupported(format!("pair ({}, {}) joins a node to itself", p[0], p[1])));
        }
        let mut row_ptr = vec![0u32; n + 1];
        for p in pairs {
            row_ptr[p[0] as usize + 1] += 1;
            row_ptr[p[1] as usize + 1] += 1;
        }
        for i in 0..n {
            row_ptr[i + 1] += row_ptr[i];
        }
        let mut at = row_ptr.clone();
        let mut keys = vec![0u32; 2 * pairs.len()];
        for &[u, v] in pairs {
            keys[at[u as usize] as usize] = v << 1;
            at[u as usize] += 1;
            keys[at[v as usize] as usize] = (u << 1) | 1;
            at[v as usize] += 1;
        }
        let mut targets = vec![target; keys.len()];
        let distinct = row_runs(&row_ptr, &mut keys)
            .into_par_iter()
            .map(|(r0, rows, run)| {
                let base = row_ptr[r0] as usize;
                let mut firsts = 0;
                let mut marks = Vec::new();
                for r in r0..r0 + rows {
                    let (lo, hi) = (row_ptr[r] as usize - base, row_ptr[r + 1] as usize - base);
                    let row = &mut run[lo..hi];
                    row.sort_unstable();
                    for (i, &k) in row.iter().enumerate() {
                        if i > 0 && row[i - 1] == k {
                            marks.push(base + lo + i);
                        } else if k & 1 == 0 {
                            firsts += 1;
                        }
                    }
                }
                (firsts, marks)
            })
            .collect::<Vec<_>>()
            .into_iter()
            .fold(0, |sum, (firsts, marks)| {
                for e in marks {
                    targets[e] = 0.0;
                }
                sum + firsts
            });
        Ok(PairPattern { n, row_ptr, keys, targets, distinct })
    }

    /// Entries (twice the pairs).
    pub fn nnz(&self) -> usize {
        self.keys.len()
    }
}

/// A pair pattern on the host with its scores and gradients.
pub struct HostPairs<T> {
    pub p: PairPattern,
    pub targets: Vec<T>,
    pub scores: Vec<T>,
    pub grad: Vec<T>,
}

impl<T: Real> HostPairs<T> {
    pub fn new(p: PairPattern) -> Self {
        let targets = p.targets.iter().map(|&t| T::from_f64(t as f64)).collect();
        let nnz = p.nnz();
        HostPairs { p, targets, scores: vec![T::zero(); nnz], grad: vec![T::zero(); nnz] }
    }
}

fn check_z(n: usize, rows: usize, what: &str) -> Result<()> {
    if rows != n {
        return Err(Error::Shape(format!("{what}: z has {rows} rows for a pair pattern of {n} nodes")));
    }
    Ok(())
}

/// scores(e) = z_u . z_c for every entry (sums over the columns in order).
pub fn pair_dot_cpu<T: Real>(p: &mut HostPairs<T>, z: &HostMat<T>) -> Result<()> {
    check_z(p.p.n, z.rows, "pair_dot")?;
    let (row_ptr, keys) = (&p.p.row_ptr, &p.p.keys);
    row_runs(row_ptr, &mut p.scores).into_par_iter().for_each(|(r0, rows, run)| {
        let base = row_ptr[r0] as usize;
        for u in r0..r0 + rows {
            for e in row_ptr[u] as usize..row_ptr[u + 1] as usize {
                let (a, b) = (z.row(u), z.row((keys[e] >> 1) as usize));
                run[e - base] = a.iter().zip(b).fold(T::zero(), |s, (&x, &y)| s + x * y);
            }
        }
    });
    Ok(())
}

/// One entry's (half the loss term, gradient), as `bce_logits`'s over the mean of `pairs`.
fn entry<T: Real>(s: T, y: T, inv: T) -> (T, T) {
    if y == T::zero() {
        return (T::zero(), T::zero());
    }
    let t = if y > T::zero() { T::one() } else { T::zero() };
    let abs = if s < T::zero() { -s } else { s };
    let e = (-abs).exp();
    let loss = s.max(T::zero()) - s * t + (T::one() + e).ln();
    let sig = if s >= T::zero() { T::one() / (T::one() + e) } else { e / (T::one() + e) };
    (T::from_f64(0.5) * loss * inv, (sig - t) * inv)
}

/// Both lists' gradients (overwritten) and the loss: the mean over their distinct pairs.
pub fn pair_bce_cpu<T: Real>(a: &mut HostPairs<T>, b: &mut HostPairs<T>) -> T {
    let pairs = (a.p.distinct + b.p.distinct).max(1);
    let inv = T::one() / T::from_f64(pairs as f64);
    let mut loss = T::zero();
    for l in [a, b] {
        let partials: Vec<T> = l
            .grad
            .par_chunks_mut(super::ROW_BLOCK)
            .zip(l.scores.par_chunks(super::ROW_BLOCK).zip(l.targets.par_chunks(super::ROW_BLOCK)))
            .map(|(g, (s, y))| {
                let mut sum = T::zero();
                for ((g, &s), &y) in g.iter_mut().zip(s).zip(y) {
                    let (l, d) = entry(s, y, inv);
                    sum += l;
                    *g = d;
                }
                sum
            })
            .collect();
        loss = partials.into_iter().fold(loss, |a, b| a + b);
    }
    loss
}

/// dz_u (= or +=) sum over row u's entries in order of grad(e) z_c.
pub fn pair_dot_backward_cpu<T: Real>(p: &HostPairs<T>, z: &HostMat<T>, accumulate: bool, dz: &mut HostMat<T>) -> Result<()> {
    check_z(p.p.n, z.rows, "pair_dot_backward")?;
    if (dz.rows, dz.cols) != (z.rows, z.cols) {
        return Err(Error::Shape(format!("pair_dot_backward: dz is {} x {}, z {} x {}", dz.rows, dz.cols, z.rows, z.cols)));
    }
    let (row_ptr, keys, grad) = (&p.p.row_ptr, &p.p.keys, &p.grad);
    let d = z.cols.max(1);
    dz.data.par_chunks_mut(d).enumerate().for_each(|(u, out)| {
        let mut acc = vec![T::zero(); out.len()];
        for e in row_ptr[u] as usize..row_ptr[u + 1] as usize {
            let zc = z.row((keys[e] >> 1) as usize);
            for (a, &x) in acc.iter_mut().zip(zc) {
                *a += grad[e] * x;
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            *o = if accumulate { *o + a } else { a };
        }
    });
    Ok(())
}

/// A pair pattern on the device: its arrays at a capacity of `cap` entries (the negatives'
/// pattern is rebuilt in place every epoch), scores and gradients per entry, and the distinct
/// pairs as a device counter (the loss's divisor, read by the kernels: a step never waits for
/// the host).
pub struct DevicePairs {
    pub n: usize,
    pub cap: usize,
    pub row_ptr: DeviceVec<u32>,
    pub keys: DeviceVec<u32>,
    pub targets: DeviceVec<f32>,
    pub scores: DeviceVec<f32>,
    pub grad: DeviceVec<f32>,
    pub distinct: DeviceVec<u32>,
    /// The negatives' draw buffers (`negative_pattern`); `None` for an uploaded list.
    pub(crate) draw: Option<super::negative_pattern::DrawScratch>,
}

impl DevicePairs {
    /// Room for `cap` entries on `n` nodes, empty (`row_ptr` zero).
    pub fn with_capacity(gpu: &Gpu, n: usize, cap: usize) -> Result<Self> {
        if n >= 1 << 31 || cap >= 1 << 31 {
            return Err(Error::Unsupported(format!("pair pattern: {n} nodes, {cap} entries (at most 2^31 - 1 each)")));
        }
        Ok(DevicePairs {
            n,
            cap,
            row_ptr: DeviceVec::zeros(gpu, n + 1)?,
            keys: DeviceVec::zeros(gpu, cap.max(1))?,
            targets: DeviceVec::zeros(gpu, cap.max(1))?,
            scores: DeviceVec::zeros(gpu, cap.max(1))?,
            grad: DeviceVec::zeros(gpu, cap.max(1))?,
            distinct: DeviceVec::zeros(gpu, 1)?,
            draw: None,
        })
    }

    pub fn upload(gpu: &Gpu, p: &PairPattern) -> Result<Self> {
        let mut d = DevicePairs::with_capacity(gpu, p.n, p.nnz())?;
        d.row_ptr = DeviceVec::upload(gpu, &p.row_ptr)?;
        if p.nnz() > 0 {
            d.keys = DeviceVec::upload(gpu, &p.keys)?;
            d.targets = DeviceVec::upload(gpu, &p.targets)?;
        }
        d.distinct = DeviceVec::upload(gpu, &[p.distinct as u32])?;
        Ok(d)
    }

    /// The pattern, scores and gradients (downloaded; waits for the stream).
    pub fn download(&self, gpu: &Gpu) -> Result<(PairPattern, Vec<f32>, Vec<f32>)> {
        let row_ptr = self.row_ptr.download(gpu)?;
        let nnz = row_ptr[self.n] as usize;
        let cut = |v: Vec<f32>| v[..nnz].to_vec();
        let p = PairPattern {
            n: self.n,
            keys: self.keys.download(gpu)?[..nnz].to_vec(),
            targets: cut(self.targets.download(gpu)?),
            distinct: self.distinct.download(gpu)?[0] as usize,
            row_ptr,
        };
        Ok((p, cut(self.scores.download(gpu)?), cut(self.grad.download(gpu)?)))
    }
}

fn check_device_z(p: &DevicePairs, z: &DeviceMatrix<f32>, what: &str) -> Result<()> {
    check_matrix_64(z, what)?;
    check_z(p.n, z.rows, what)
}

/// [`pair_dot_cpu`] on the device.
pub fn pair_dot(gpu: &Gpu, p: &mut DevicePairs, z: &DeviceMatrix<f32>) -> Result<()> {
    check_device_z(p, z, "pair_dot")?;
    if p.n == 0 {
        return Ok(());
    }
    let args = PairDotArgs {
        n: p.n as u32,
        d: z.cols as u32,
        ld: z.ld as u32,
        row_ptr: p.row_ptr.arg(gpu),
        keys: p.keys.arg(gpu),
        z: z.arg(),
        scores: p.scores.arg_mut(gpu),
    };
    // SAFETY: row_ptr holds n + 1 offsets up to at most cap entries (built by the host or by
    // `negative_pattern` within cap), keys' columns are below n = z's rows, scores hold cap.
    unsafe { pair_dot_f32.launch(gpu, row_shape(gpu, p.n as u64, 1, 0), &args) }
}

/// [`pair_bce_cpu`] on the device: both lists' gradients, `stats[0]` the loss (zeroed first;
/// atomic adds, so its last bits depend on their order; the gradients do not).
pub fn pair_bce(gpu: &Gpu, a: &mut DevicePairs, b: &mut DevicePairs, stats: &mut DeviceVec<f32>) -> Result<()> {
    if stats.len() < 4 {
        return Err(Error::Shape(format!("pair_bce: {} stats (want 4)", stats.len())));
    }
    gpu.stream().memset_zeros(&mut stats.slice_mut().slice_mut(0..4)).map_err(|e| Error::cuda("memset of pair_bce stats", e))?;
    let (ca, cb) = (a.distinct.ptr(gpu), b.distinct.ptr(gpu));
    for l in [a, b] {
        let args = PairBceArgs {
            n: l.n as u32,
            row_ptr: l.row_ptr.arg(gpu),
            scores: l.scores.arg(gpu),
            targets: l.targets.arg(gpu),
            count_a: crate::gpu::launch::Ptr::new(ca),
            count_b: crate::gpu::launch::Ptr::new(cb),
            grad: l.grad.arg_mut(gpu),
            stats: stats.arg_mut(gpu),
        };
        let mut shape = elementwise_shape(gpu, l.cap.max(1) as u64);
        shape.smem_bytes = 4;
        // SAFETY: row_ptr[n] <= cap entries of scores, targets and grad; the counters are one
        // u32 each; stats 4 floats (zeroed above); 4 bytes of shared memory for BlockSums<1>.
        unsafe { pair_bce_f32.launch(gpu, shape, &args)? };
    }
    Ok(())
}

/// [`pair_dot_backward_cpu`] on the device.
pub fn pair_dot_backward(gpu: &Gpu, p: &DevicePairs, z: &DeviceMatrix<f32>, accumulate: bool, dz: &mut DeviceMatrix<f32>) -> Result<()> {
    check_device_z(p, z, "pair_dot_backward")?;
    check_matrix_64(dz, "pair_dot_backward dz")?;
    if (dz.rows, dz.cols) != (z.rows, z.cols) {
        return Err(Error::Shape(format!("pair_dot_backward: dz is {} x {}, z {} x {}", dz.rows, dz.cols, z.rows, z.cols)));
    }
    if p.n == 0 {
        return Ok(());
    }
    let args = PairDotBackwardArgs {
        n: p.n as u32,
        ld: z.ld as u32,
        row_ptr: p.row_ptr.arg(gpu),
        keys: p.keys.arg(gpu),
        grad: p.grad.arg(gpu),
        z: z.arg(),
        accumulate: accumulate as u32,
        dz: dz.arg_mut(),
    };
    // SAFETY: as `pair_dot`; dz has z's shape and stride (checked).
    unsafe { pair_dot_backward_f32.launch(gpu, row_shape(gpu, p.n as u64, 1, 0), &args) }
}

// -- the op on each backend --

pub trait PairDotOp: Backend {
    /// A pair pattern with its scores and gradients.
    type Pairs;
    /// The pattern of `pairs` (positives if `positive`, else negatives), checked: a pair out
    /// of range, joining a node to itself or given twice is refused.
    fn pair_list(&self, n: usize, pairs: &[[u32; 2]], positive: bool) -> Result<Self::Pairs>;
    /// Every entry's score z_u . z_c.
    fn pair_dot(&self, p: &mut Self::Pairs, z: &Self::Mat) -> Result<()>;
    /// BCE with logits over the distinct pairs of `a` and `b` together: their gradients, the
    /// loss into `stats`.
    fn pair_bce(&self, a: &mut Self::Pairs, b: &mut Self::Pairs, stats: &mut Self::Stats) -> Result<()>;
    /// dz (= or +=) the gradient through `p`'s scores.
    fn pair_dot_backward(&self, p: &Self::Pairs, z: &Self::Mat, accumulate: bool, dz: &mut Self::Mat) -> Result<()>;
    /// The distinct pairs of `p` (read back: waits for the stream).
    fn pair_distinct(&self, p: &Self::Pairs) -> Result<usize>;
    /// The pattern, scores and gradients (downloaded).
    fn read_pairs(&self, p: &Self::Pairs) -> Result<(PairPattern, Vec<f64>, Vec<f64>)>;
}

fn checked(n: usize, pairs: &[[u32; 2]], positive: bool) -> Result<PairPattern> {
    let p = PairPattern::new(n, pairs, if positive { 1.0 } else { -1.0 })?;
    if p.distinct != pairs.len() {
        return Err(Error::Unsupported(format!("{} of {} pairs are given twice", pairs.len() - p.distinct, pairs.len())));
    }
    Ok(p)
}

impl<T: Real> PairDotOp for CpuBackend<T> {
    type Pairs = HostPairs<T>;
    fn pair_list(&self, n: usize, pairs: &[[u32; 2]], positive: bool) -> Result<HostPairs<T>> {
        Ok(HostPairs::new(checked(n, pairs, positive)?))
    }
    fn pair_dot(&self, p: &mut HostPairs<T>, z: &HostMat<T>) -> Result<()> {
        pair_dot_cpu(p, z)
    }
    fn pair_bce(&self, a: &mut HostPairs<T>, b: &mut HostPairs<T>, stats: &mut [T; 4]) -> Result<()> {
        *stats = [pair_bce_cpu(a, b), T::zero(), T::zero(), T::zero()];
        Ok(())
    }
    fn pair_dot_backward(&self, p: &HostPairs<T>, z: &HostMat<T>, accumulate: bool, dz: &mut HostMat<T>) -> Result<()> {
        pair_dot_backward_cpu(p, z, accumulate, dz)
    }
    fn pair_distinct(&self, p: &HostPairs<T>) -> Result<usize> {
        Ok(p.p.distinct)
    }
    fn read_pairs(&self, p: &HostPairs<T>) -> Result<(PairPattern, Vec<f64>, Vec<f64>)> {
        let f = |v: &[T]| v.iter().map(|x| x.to_f64()).collect();
        Ok((p.p.clone(), f(&p.scores), f(&p.grad)))
    }
}

impl PairDotOp for CudaBackend {
    type Pairs = DevicePairs;
    fn pair_list(&self, n: usize, pairs: &[[u32; 2]], positive: bool) -> Result<DevicePairs> {
        DevicePairs::upload(&self.gpu, &checked(n, pairs, positive)?)
    }
    fn pair_dot(&self, p: &mut DevicePairs, z: &DeviceMatrix<f32>) -> Result<()> {
        self.timed("pair dot", || pair_dot(&self.gpu, p, z))
    }
    fn pair_bce(&self, a: &mut DevicePairs, b: &mut DevicePairs, stats: &mut DeviceVec<f32>) -> Result<()> {
        self.timed("pair bce", || pair_bce(&self.gpu, a, b, stats))
    }
    fn pair_dot_backward(&self, p: &DevicePairs, z: &DeviceMatrix<f32>, accumulate: bool, dz: &mut DeviceMatrix<f32>) -> Result<()> {
        self.timed("pair dot backward", || pair_dot_backward(&self.gpu, p, z, accumulate, dz))
    }
    fn pair_distinct(&self, p: &DevicePairs) -> Result<usize> {
        Ok(p.distinct.download(&self.gpu)?[0] as usize)
    }
    fn read_pairs(&self, p: &DevicePairs) -> Result<(PairPattern, Vec<f64>, Vec<f64>)> {
        let (pat, s, g) = p.download(&self.gpu)?;
        let f = |v: Vec<f32>| v.into_iter().map(|x| x as f64).collect();
        Ok((pat, f(s), f(g)))
    }
}
