//! Link prediction's training negatives, drawn every epoch: `count` slots, each the first of
//! up to `NEG_ATTEMPTS` uniform pairs (u, v) that is a non-edge of the graph with u != v
//! (`shared::rng::negative_candidate`, the counter-based stream the samplers share with
//! the device crate), so the draw is a function of (seed, epoch, slot) alone. A slot whose
//! attempts all hit edges stays empty (`u32::MAX`, both ends); the caller counts and drops it.
//! CPU (rayon over slots, the reference) and the launcher of
//! `kernels-gpu/src/nn/negative_sample.rs`: the same pairs, bit for bit.

use rayon::prelude::*;

use super::elementwise_shape;
use crate::error::{Error, Result};
use crate::gpu::DeviceVec;
use crate::gpu::abi::nn::{NegativeSampleArgs, negative_sample};
use crate::graph::Csr;
use crate::ops::backend::Backend;
use crate::ops::backend::cpu::{CpuBackend, HostGraph};
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::shared::rng::{NEG_ATTEMPTS, negative_candidate};
use crate::util::Real;

/// The pair of an empty slot.
pub const EMPTY: u32 = u32::MAX;

/// Refuses what the kernel cannot index: a graph that is not square and canonical (sorted rows,
/// the binary search needs them; `canonical` says whether it is), or counts past u32.
fn check(g: &Csr, canonical: bool, count: usize) -> Result<()> {
    if g.n_rows() != g.n_cols() || g.n_rows() == 0 {
        return Err(Error::Shape(format!("negative_sample: the graph is {} x {} (want square, >= 1 node)", g.n_rows(), g.n_cols())));
    }
    if !canonical {
        return Err(Error::Unsupported("negative_sample: the graph must be canonical (sorted rows without repeats)".into()));
    }
    if count >= (1usize << 31) {
        return Err(Error::Unsupported(format!("negative_sample: {count} negatives (at most 2^31 - 1 an epoch)")));
    }
    Ok(())
}

/// Slot `i`'s pair (see the module doc).
fn slot(g: &Csr, key: u64, i: u64) -> [u32; 2] {
    let n = g.n_rows() as u64;
    for t in 0..NEG_ATTEMPTS {
        let (u, v) = negative_candidate(key, n, i, t);
        if u != v && g.col_idx()[g.row_range(u as usize)].binary_search(&v).is_err() {
            return [u, v];
        }
    }
    [EMPTY, EMPTY]
}

/// `count` negatives of the stream `key` (`rng::negative_stream_key(seed, epoch)`) against the
/// canonical graph `g` (every edge to avoid, both directions), on the CPU.
pub fn negative_sample_cpu(g: &Csr, key: u64, count: usize) -> Result<Vec<[u32; 2]>> {
    check(g, g.is_canonical(), count)?;
    Ok((0..count as u64).into_par_iter().map(|i| slot(g, key, i)).collect())
}

/// The same on the device into `out` (`2 count` u32s, pairs interleaved).
pub fn negative_sample_device(g: &GpuGraph, key: u64, count: usize, out: &mut DeviceVec<u32>) -> Result<()> {
    let csr = g.handle.csr();
    // Whether the graph is canonical, found once per handle: the scan of every row (10M
    // entries on a 1M-node graph, ~10 ms on one core) ran every epoch before the launch, the
    // GPU idle meanwhile.
    let canonical = g.handle.cached(0, || Ok(Canonical(csr.is_canonical())))?.0;
    check(csr, canonical, count)?;
    if out.len() < 2 * count {
        return Err(Error::Shape(format!("negative_sample: {} u32s for {count} pairs", out.len())));
    }
    if count == 0 {
        return Ok(());
    }
    let gpu = g.handle.gpu()?.clone();
    let dev = g.handle.device_csr()?;
    let args = NegativeSampleArgs {
        count: count as u32,
        n: csr.n_rows() as u32,
        key,
        row_ptr: dev.row_ptr.arg(&gpu),
        col_idx: dev.col_idx.arg(&gpu),
        out: out.arg_mut(&gpu),
    };
    // SAFETY: row_ptr holds n + 1 entries, col_idx nnz, out 2 count (checked); candidate ids are
    // below n, so every row read is in range.
    unsafe { negative_sample.launch(&gpu, elementwise_shape(&gpu, count as u64), &args) }
}

/// Whether a graph handle's CSR is canonical (cached on the handle: its graph never changes).
struct Canonical(bool);

// -- the op on each backend --

pub trait NegativeSampleOp: Backend {
    /// `count` negatives of stream `key` against the graph `full` (canonical, square), returned
    /// to the host (the caller builds the epoch's pair pattern from them).
    fn negative_pairs(&self, full: &Self::Graph, key: u64, count: usize) -> Result<Vec<[u32; 2]>>;
}

impl<T: Real> NegativeSampleOp for CpuBackend<T> {
    fn negative_pairs(&self, full: &HostGraph<T>, key: u64, count: usize) -> Result<Vec<[u32; 2]>> {
        negative_sample_cpu(&full.s, key, count)
    }
}

impl NegativeSampleOp for CudaBackend {
    fn negative_pairs(&self, full: &GpuGraph, key: u64, count: usize) -> Result<Vec<[u32; 2]>> {
        let mut out = DeviceVec::zeros(&self.gpu, (2 * count).max(1))?;
        self.timed("negative sample", || negative_sample_device(full, key, count, &mut out))?;
        let flat = out.download(&self.gpu)?;
        Ok(flat[..2 * count].chunks_exact(2).map(|p| [p[0], p[1]]).collect())
    }
}
