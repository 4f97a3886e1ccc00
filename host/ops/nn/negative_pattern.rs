//! An epoch's training negatives straight into the symmetric pair pattern the dot decoder
//! scores (`pair_dot`): the slots of `negative_sample` (the same pairs, bit for bit, on both
//! backends), empty slots left out, and a pair drawn twice in the epoch kept once (its later
//! entries marked repeats: no loss, no gradient). On the device nothing goes through the host:
//! draw, count the rows, scan, place, sort each row and mark its repeats
//! (`kernels-gpu/src/nn/negative_pattern.rs`); the count of distinct pairs stays a device
//! counter the loss reads. The CPU builds the same pattern ([`PairPattern::new`]): the
//! device's is bit for bit this one (a sorted row is a function of its keys).

use super::elementwise_shape;
use super::negative_sample::{EMPTY, negative_sample_cpu, negative_sample_device};
use super::pair_dot::{DevicePairs, HostPairs, PairDotOp, PairPattern};
use super::row_shape;
use crate::error::{Error, Result};
use crate::gpu::abi::format::{WindowScanArgs, window_scan};
use crate::gpu::abi::nn::{NegativePatternArgs, negative_pattern_count, negative_pattern_fill, negative_pattern_sort};
use crate::gpu::abi::sample::{ScanApplyArgs, ScanSumsArgs, scan_tile_apply, scan_tile_sums};
use crate::gpu::launch::{Ptr, PtrMut, Shape};
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::Csr;
use crate::ops::backend::cpu::CpuBackend;
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::shared::config::{SCAN_BLOCK, SCAN_TILE};
use crate::shared::translate::SCAN_THREADS;
use crate::util::Real;

/// The pattern of `count` negatives of stream `key` against `full` (canonical, square), on the
/// CPU.
pub fn negative_pattern_cpu(full: &Csr, key: u64, count: usize) -> Result<PairPattern> {
    let slots = negative_sample_cpu(full, key, count)?;
    let drawn: Vec<[u32; 2]> = slots.into_iter().filter(|p| p[0] != EMPTY).collect();
    PairPattern::new(full.n_rows(), &drawn, -1.0)
}

/// The device buffers of the draw: the slots, the row counters and the scan's tiles.
pub struct DrawScratch {
    count: usize,
    slots: DeviceVec<u32>,
    counts: DeviceVec<u32>,
    tile_sums: DeviceVec<u32>,
    tile_offsets: DeviceVec<u32>,
}

/// An empty pattern with room for `count` negatives a draw on `n` nodes.
pub fn negative_pairs_device(gpu: &Gpu, n: usize, count: usize) -> Result<DevicePairs> {
    if count > super::pair_dot::MAX_PAIRS {
        return Err(Error::Unsupported(format!("negative_pattern: {count} negatives (at most 2^30 - 1 an epoch)")));
    }
    let mut p = DevicePairs::with_capacity(gpu, n, 2 * count)?;
    let tiles = (n + 1).div_ceil(SCAN_TILE as usize);
    p.draw = Some(DrawScratch {
        count,
        slots: DeviceVec::zeros(gpu, (2 * count).max(1))?,
        counts: DeviceVec::zeros(gpu, n.max(1))?,
        tile_sums: DeviceVec::zeros(gpu, tiles)?,
        tile_offsets: DeviceVec::zeros(gpu, tiles + 1)?,
    });
    Ok(p)
}

/// Counts up to which the scan runs as one block (the window scan's block sweeps them).
const ONE_BLOCK_SCAN: usize = 32 * SCAN_THREADS as usize;

/// out[i] = the sum of counts[..i] for i <= n, on the stream (the samplers' tiled scan).
fn scan(gpu: &Gpu, s: &DrawScratch, n: usize, out: &mut DeviceVec<u32>) -> Result<()> {
    let (input, out) = (s.counts.ptr(gpu), out.ptr_mut(gpu));
    let window = |n: usize, counts: u64, out: u64| WindowScanArgs {
        n: n as u32,
        counts: Ptr::new(counts),
        block_w: 0,
        win_ptr: PtrMut::new(out),
        blk_ptr: PtrMut::null(),
    };
    if n <= ONE_BLOCK_SCAN {
        // SAFETY: n counts in, n + 1 offsets out; one block of SCAN_THREADS.
        return unsafe { window_scan.launch(gpu, Shape::linear(1, SCAN_THREADS, 2 * 128 + 16), &window(n, input, out)) };
    }
    let tiles = (n + 1).div_ceil(SCAN_TILE as usize);
    let shape = Shape::linear(tiles as u32, SCAN_BLOCK, 4 * 32);
    let sums = ScanSumsArgs { n: n as u32, input: Ptr::new(input), sums: PtrMut::new(s.tile_sums.ptr(gpu)) };
    // SAFETY: n counts in; a sum per tile (sized for n in `negative_pairs_device`).
    unsafe { scan_tile_sums.launch(gpu, shape, &sums)? };
    let offsets = window(tiles, s.tile_sums.ptr(gpu), s.tile_offsets.ptr(gpu));
    // SAFETY: tiles sums in, tiles + 1 offsets out; one block of SCAN_THREADS.
    unsafe { window_scan.launch(gpu, Shape::linear(1, SCAN_THREADS, 2 * 128 + 16), &offsets)? };
    let apply = ScanApplyArgs {
        n: n as u32,
        input: Ptr::new(input),
        tile_offsets: Ptr::new(s.tile_offsets.ptr(gpu)),
        out: PtrMut::new(out),
        compact: PtrMut::null(),
    };
    // SAFETY: as the sums; out holds n + 1.
    unsafe { scan_tile_apply.launch(gpu, shape, &apply) }
}

/// [`negative_pattern_cpu`] on the device, into `out` (made by [`negative_pairs_device`] for
/// at least `count` negatives on `full`'s nodes): enqueued only, no copy to or from the host.
pub fn negative_pattern_device(full: &GpuGraph, key: u64, count: usize, out: &mut DevicePairs) -> Result<()> {
    let n = full.handle.csr().n_rows();
    let gpu = full.handle.gpu()?.clone();
    let g = &*gpu;
    let Some(s) = out.draw.as_mut() else {
        return Err(Error::Unsupported("negative_pattern: the pattern was not made for drawing (negative_pairs_device)".into()));
    };
    if count > s.count || n != out.n {
        return Err(Error::Shape(format!("negative_pattern: {count} negatives on {n} nodes into room for {} on {} nodes", s.count, out.n)));
    }
    negative_sample_device(full, key, count, &mut s.slots)?;
    let st = g.stream();
    st.memset_zeros(&mut s.counts.slice_mut().slice_mut(0..n.max(1))).map_err(|e| Error::cuda("memset of negative_pattern counts", e))?;
    st.memset_zeros(out.distinct.slice_mut()).map_err(|e| Error::cuda("memset of negative_pattern distinct", e))?;
    let args = NegativePatternArgs {
        count: count as u32,
        n: n as u32,
        slots: s.slots.arg(g),
        counts: s.counts.arg_mut(g),
        row_ptr: out.row_ptr.arg(g),
        keys: out.keys.arg_mut(g),
        targets: out.targets.arg_mut(g),
        distinct: out.distinct.arg_mut(g),
    };
    let per_slot = elementwise_shape(g, count.max(1) as u64);
    // SAFETY: the slots hold 2 count u32s, each a node below n or EMPTY (the sampler's), the
    // counters n.
    unsafe { negative_pattern_count.launch(g, per_slot, &args)? };
    scan(g, s, n, &mut out.row_ptr)?;
    // SAFETY: row_ptr is the scan of the counts (at most 2 count <= cap entries); every entry
    // takes one place of its row (the counters count down to 0).
    unsafe { negative_pattern_fill.launch(g, per_slot, &args)? };
    // SAFETY: a warp a row within row_ptr's ranges; targets hold cap.
    unsafe { negative_pattern_sort.launch(g, row_shape(g, n as u64, 1, 0), &args) }
}

// -- the op on each backend --

pub trait NegativePatternOp: PairDotOp {
    /// A pattern with room for `count` negatives a draw on `n` nodes.
    fn negative_list(&self, n: usize, count: usize) -> Result<Self::Pairs>;
    /// `count` negatives of stream `key` against `full` into `out` (made by `negative_list`).
    fn negative_pattern(&self, full: &Self::Graph, key: u64, count: usize, out: &mut Self::Pairs) -> Result<()>;
}

impl<T: Real> NegativePatternOp for CpuBackend<T> {
    fn negative_list(&self, n: usize, _count: usize) -> Result<HostPairs<T>> {
        Ok(HostPairs::new(PairPattern::new(n, &[], -1.0)?))
    }
    fn negative_pattern(
        &self,
        full: &crate::ops::backend::cpu::HostGraph<T>,
        key: u64,
        count: usize,
        out: &mut HostPairs<T>,
    ) -> Result<()> {
        *out = HostPairs::new(negative_pattern_cpu(&full.s, key, count)?);
        Ok(())
    }
}

impl NegativePatternOp for CudaBackend {
    fn negative_list(&self, n: usize, count: usize) -> Result<DevicePairs> {
        negative_pairs_device(&self.gpu, n, count)
    }
    fn negative_pattern(&self, full: &GpuGraph, key: u64, count: usize, out: &mut DevicePairs) -> Result<()> {
        self.timed("negative pattern", || negative_pattern_device(full, key, count, out))
    }
}
