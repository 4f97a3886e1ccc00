//! What the two device samplers ([`super::device_saint`], [`super::device_neighbor`]) share:
//! a batch's sizes and their way to the host, the device scan, and the bind of a batch's
//! matrix into a rebound model's buffers (`kernels-gpu/src/sample/bind.rs`).

use std::sync::Arc;

use super::bound::BoundParts;
use crate::error::{Error, Result};
use crate::gpu::abi::format::{WindowScanArgs, window_scan};
use crate::gpu::abi::sample::{self as kernels, BatchBindArgs, ScanApplyArgs, ScanSumsArgs};
use crate::gpu::launch::{Ptr, PtrMut, Shape};
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::Csr;
use crate::ops::ValueOrder;
use crate::ops::backend::TRAIN_BIT;
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::config::{SCAN_BLOCK, SCAN_TILE};
use crate::shared::translate::SCAN_THREADS;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, PinnedHostSlice};

pub(super) const BLOCK: u32 = 256;

/// The sizes of a batch made on the device (read back once per batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceBatch {
    /// Which of the sampler's two batch sets holds it.
    pub(super) set: usize,
    /// Nodes.
    pub n: usize,
    /// Entries of the model's matrix (the batch's edges and the added self-loops).
    pub nnz: usize,
    /// Sampled edges (what the CPU sampler counts: induced edges, or every hop's draws).
    pub sampled_edges: usize,
    /// The loss nodes (train nodes among the batch's, or the targets).
    pub loss_nodes: usize,
    /// Entries of the batch's sparse features (0 for dense ones).
    pub feature_nnz: usize,
}

/// A sampler that makes batches on the device ([`super::device_saint::DeviceSaint`],
/// [`super::device_neighbor::DeviceNeighbor`]): queue a batch, read its sizes, bind it.
pub trait DeviceBatches {
    /// Queues the kernels of batch `i` of `epoch` and the copy of its sizes to the host, into
    /// the batch set the batch before last used: that batch must have been bound (its reads
    /// queued) already; at most two batches are in flight.
    fn enqueue(&mut self, epoch: u32, i: u32) -> Result<Pending>;

    /// The sizes of a queued batch (waits for its kernels).
    fn wait(&mut self, p: Pending) -> Result<DeviceBatch>;

    /// Writes the last batch `b` into `m`'s buffers, padded to its capacity (which must hold
    /// it), and gathers its feature rows.
    fn bind(&self, m: &mut super::bound::BoundModel<CudaBackend>, b: &DeviceBatch) -> Result<()>;

    /// Matrices of their own for layers 1.. that the batches bring (per-layer blocks; 0: one
    /// matrix for every layer): a rebound model must be built with as many
    /// ([`super::bound::Capacity::later`]).
    fn later_matrices(&self) -> usize {
        0
    }

    /// Makes batch `i` of `epoch` and returns its sizes (waits for it).
    fn sample(&mut self, epoch: u32, i: u32) -> Result<DeviceBatch> {
        let p = self.enqueue(epoch, i)?;
        self.wait(p)
    }
}

/// A batch whose kernels are queued: the sampler's `wait` gives its sizes.
#[must_use = "a queued batch is read with `wait`"]
pub struct Pending {
    pub(super) set: usize,
}

/// A batch's five sizes on the device and on their way to the host:
/// [sampled edges, loss nodes, nodes, entries, feature entries], then the sampler's own
/// (per-layer blocks' entries).
pub(super) struct Sizes {
    pub device: DeviceVec<u32>,
    host: PinnedHostSlice<u32>,
    /// Recorded after the copy (the context does not track events on its own, so the pinned
    /// slice's own event is never recorded).
    copied: CudaEvent,
}

impl Sizes {
    pub fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        Self::with_extra(gpu, 0)
    }

    /// With `extra` sizes of the sampler's own after the five ([`Sizes::extra`]).
    pub fn with_extra(gpu: &Arc<Gpu>, extra: usize) -> Result<Self> {
        Ok(Sizes {
            device: DeviceVec::zeros(gpu, 5 + extra)?,
            // SAFETY: written by the copy before it is read (`read` waits for it).
            host: unsafe { gpu.ctx.alloc_pinned::<u32>(5 + extra) }.map_err(|e| Error::cuda("pinning a batch's sizes", e))?,
            copied: gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING)).map_err(|e| Error::cuda("a batch's event", e))?,
        })
    }

    /// Queues the copy to the host (after the kernels that write the sizes).
    pub fn send(&mut self, g: &Gpu) -> Result<()> {
        g.stream().memcpy_dtoh(self.device.slice(), &mut self.host).map_err(|e| Error::cuda("a batch's sizes to the host", e))?;
        self.copied.record(g.stream()).map_err(|e| Error::cuda("a batch's event", e))
    }

    /// The sizes (waits for their copy), as the batch of set `set`.
    pub fn read(&self, set: usize) -> Result<DeviceBatch> {
        self.copied.synchronize().map_err(|e| Error::cuda("waiting for a batch's sizes", e))?;
        let t = self.host.as_slice().map_err(|e| Error::cuda("a batch's sizes", e))?;
        Ok(DeviceBatch {
            set,
            sampled_edges: t[0] as usize,
            loss_nodes: t[1] as usize,
            n: t[2] as usize,
            nnz: t[3] as usize,
            feature_nnz: t[4] as usize,
        })
    }

    /// The sizes after the five, as the last [`Sizes::read`] saw them (call it after that).
    pub fn extra(&self) -> Result<Vec<usize>> {
        let t = self.host.as_slice().map_err(|e| Error::cuda("a batch's sizes", e))?;
        Ok(t[5..].iter().map(|&x| x as usize).collect())
    }
}

/// A batch's matrix as the sampling kernels leave it.
pub(super) struct BatchMatrix<'a> {
    pub row_ptr: &'a DeviceVec<u32>,
    pub cols: &'a DeviceVec<u32>,
    pub entry_rows: &'a DeviceVec<u32>,
    pub values: &'a DeviceVec<f32>,
    /// The transpose's row pointers, columns and entry rows (`None`: the pattern's own, a
    /// symmetric batch), values and map.
    pub t_pattern: Option<(&'a DeviceVec<u32>, &'a DeviceVec<u32>, &'a DeviceVec<u32>)>,
    pub t_values: &'a DeviceVec<f32>,
    pub t_of: &'a DeviceVec<u32>,
    pub nodes: &'a DeviceVec<u32>,
}

/// Whose loss a batch trains on.
pub(super) enum BatchLoss<'a> {
    /// GraphSAINT: the batch's train nodes, weighted by the node normalisation (n_all / n_train).
    Saint { mask_bits: &'a DeviceVec<u8>, node_norm: &'a DeviceVec<f32>, to_train: f64 },
    /// Neighbour sampling: the targets (the first nodes), a plain mean.
    Targets,
}

/// Writes batch `b`'s matrix, labels, train bits and loss weights into a rebound model's
/// buffers (`parts`, of `rows` rows), padded to its capacity.
pub(super) fn bind_matrix(
    g: &Gpu,
    parts: &mut BoundParts<'_, CudaBackend>,
    rows: usize,
    b: &DeviceBatch,
    m: BatchMatrix<'_>,
    labels: &DeviceVec<i32>,
    loss: BatchLoss<'_>,
) -> Result<()> {
    let p = PatternTargets::of(g, &parts.graph.handle)?;
    let nnz_cap = p.cap;
    if (p.rows, p.cols) != (rows, rows)
        || parts.values.len() != nnz_cap
        || parts.values_t.len() != nnz_cap
        || parts.labels.0.len() != rows
        || parts.labels.1.len() != rows
        || parts.weights.len() != rows
    {
        return Err(Error::Shape(format!("a rebound model's buffers are not the sizes of its capacity ({rows} rows, {nnz_cap} entries)")));
    }
    if b.n >= rows || b.nnz > nnz_cap {
        return Err(Error::Shape(format!(
            "a device batch of {} nodes and {} entries into a model of {rows} rows and {nnz_cap} entries",
            b.n, b.nnz
        )));
    }
    let (targets, to_train, mask_bits, node_norm) = match loss {
        BatchLoss::Saint { mask_bits, node_norm, to_train } => (0, to_train, mask_bits.arg(g), node_norm.arg(g)),
        BatchLoss::Targets => (b.loss_nodes as u32, 0.0, Ptr::null(), Ptr::null()),
    };
    let t_in = |i: usize| m.t_pattern.map_or(Ptr::null(), |t| [t.0, t.1, t.2][i].arg(g));
    let args = BatchBindArgs {
        n: b.n as u32,
        nnz: b.nnz as u32,
        n_loss: b.loss_nodes as u32,
        rows: rows as u32,
        cap: nnz_cap as u32,
        train_bit: TRAIN_BIT as u32,
        targets,
        to_train,
        row_ptr: m.row_ptr.arg(g),
        cols: m.cols.arg(g),
        entry_rows: m.entry_rows.arg(g),
        values: m.values.arg(g),
        t_row_ptr_in: t_in(0),
        t_cols_in: t_in(1),
        t_rows_in: t_in(2),
        t_values: m.t_values.arg(g),
        t_of: m.t_of.arg(g),
        nodes: m.nodes.arg(g),
        labels: labels.arg(g),
        mask_bits,
        node_norm,
        s_row_ptr: p.s_row_ptr,
        s_cols: p.s_cols,
        s_rows: p.s_rows,
        t_row_ptr: p.t_row_ptr,
        t_cols: p.t_cols,
        t_rows: p.t_rows,
        s_values: parts.values.arg_mut(g),
        t_values_out: parts.values_t.arg_mut(g),
        t_of_out: p.t_of,
        labels_out: parts.labels.0.arg_mut(g),
        mask_out: parts.labels.1.arg_mut(g),
        weights_out: parts.weights.arg_mut(g),
    };
    // SAFETY: every output has the capacity's size (checked above); the batch (n <= rows - 1,
    // nnz <= cap) was made by the sampler's kernels in the buffers it reads.
    unsafe { kernels::batch_bind.launch(g, linear(g, (rows + 1).max(nnz_cap)), &args) }
}

/// Counts up to which [`scan`] runs as one block (a sweep of 32 counts a thread).
const ONE_BLOCK_SCAN: usize = 32 * SCAN_THREADS as usize;

/// `out[i] = Σ input[..i]` for i <= n (device addresses), and `compact` (if not 0) lists the
/// positions of the nonzero inputs.
pub(super) fn scan(
    g: &Gpu,
    (tile_sums, tile_offsets): (&DeviceVec<u32>, &DeviceVec<u32>),
    n: usize,
    input: u64,
    out: u64,
    compact: u64,
) -> Result<()> {
    if compact == 0 && n <= ONE_BLOCK_SCAN {
        // One launch: the window scan's block sweeps the counts itself (a batch's rows or
        // draws: three launches of a tiled scan cost more than the sweep).
        let args = WindowScanArgs { n: n as u32, counts: Ptr::new(input), block_w: 0, win_ptr: PtrMut::new(out), blk_ptr: PtrMut::null() };
        // SAFETY: n counts in, n + 1 offsets out; one block of SCAN_THREADS.
        return unsafe { window_scan.launch(g, Shape::linear(1, SCAN_THREADS, 2 * 128 + 16), &args) };
    }
    let tiles = (n + 1).div_ceil(SCAN_TILE as usize);
    debug_assert!(tiles <= tile_sums.len());
    let sums = ScanSumsArgs { n: n as u32, input: Ptr::new(input), sums: PtrMut::new(tile_sums.ptr(g)) };
    let shape = Shape::linear(tiles as u32, SCAN_BLOCK, 4 * 32);
    // SAFETY: input holds n u32s, out n + 1, compact as many as the nonzero inputs; one tile
    // sum and offset per tile (sized for the largest of the scans).
    unsafe { kernels::scan_tile_sums.launch(g, shape, &sums)? };
    let offsets = WindowScanArgs {
        n: tiles as u32,
        counts: Ptr::new(tile_sums.ptr(g)),
        block_w: 0,
        win_ptr: PtrMut::new(tile_offsets.ptr(g)),
        blk_ptr: PtrMut::null(),
    };
    // SAFETY: tiles sums in, tiles + 1 offsets out; one block of SCAN_THREADS, as the kernel's
    // run split assumes.
    unsafe { window_scan.launch(g, Shape::linear(1, SCAN_THREADS, 2 * 128 + 16), &offsets)? };
    let apply = ScanApplyArgs {
        n: n as u32,
        input: Ptr::new(input),
        tile_offsets: Ptr::new(tile_offsets.ptr(g)),
        out: PtrMut::new(out),
        compact: PtrMut::new(compact),
    };
    // SAFETY: as the sums; the offsets scanned above.
    unsafe { kernels::scan_tile_apply.launch(g, shape, &apply) }
}

/// The device arrays of a rebound model's pattern and its transpose (its graph handle's shared
/// arrays, written in place as `bind_graph` overwrites them: every kernel of the previous step
/// ran before, on this stream), checked against the model's shape.
pub(super) struct PatternTargets {
    /// Rows and columns of the pattern, and its (padded) entries.
    pub rows: usize,
    pub cols: usize,
    pub cap: usize,
    pub s_row_ptr: PtrMut<u32>,
    pub s_cols: PtrMut<u32>,
    pub s_rows: PtrMut<u32>,
    pub t_row_ptr: PtrMut<u32>,
    pub t_cols: PtrMut<u32>,
    pub t_rows: PtrMut<u32>,
    pub t_of: PtrMut<u32>,
}

impl PatternTargets {
    pub fn of(g: &Gpu, h: &crate::ops::handle::GraphHandle) -> Result<Self> {
        let (s, th) = (h.device_csr()?, h.transpose()?);
        let t = th.device_csr()?;
        let (s_rows, t_rows) = (h.device_coo_rows()?, th.device_coo_rows()?);
        let t_of = h.transpose_map(ValueOrder::Csr)?;
        let (rows, cols, cap) = (h.csr().n_rows(), h.csr().n_cols(), h.csr().nnz());
        let sized = [
            s.row_ptr.len() == rows + 1,
            t.row_ptr.len() == cols + 1,
            s.col_idx.len() == cap,
            t.col_idx.len() == cap,
            s_rows.0.len() == cap,
            t_rows.0.len() == cap,
            t_of.len() == cap,
        ];
        if !sized.iter().all(|&ok| ok) {
            return Err(Error::Shape(format!("a rebound {rows} x {cols} pattern of {cap} entries has device arrays of other sizes")));
        }
        let at = |v: &DeviceVec<u32>| PtrMut::new(v.ptr(g));
        Ok(PatternTargets {
            rows,
            cols,
            cap,
            s_row_ptr: at(&s.row_ptr),
            s_cols: at(&s.col_idx),
            s_rows: at(&s_rows.0),
            t_row_ptr: at(&t.row_ptr),
            t_cols: at(&t.col_idx),
            t_rows: at(&t_rows.0),
            t_of: at(&t_of),
        })
    }
}

/// Entries of the `k` longest rows of `a`: the most a batch of `k` of its rows can hold.
pub(super) fn longest_rows(a: &Csr, k: usize) -> usize {
    let mut lens: Vec<usize> = (0..a.n_rows()).map(|v| a.row_len(v)).collect();
    let k = k.min(lens.len());
    if k == 0 {
        return 0;
    }
    lens.select_nth_unstable_by(k - 1, |x, y| y.cmp(x));
    lens[..k].iter().sum()
}

/// Blocks of the GPU's SMs (grid-stride kernels need no more).
pub(super) fn sm_blocks(g: &Gpu) -> u32 {
    g.info().sm_count * 8
}

/// A thread per item, grid-stride past the SMs' blocks.
pub(super) fn linear(g: &Gpu, items: usize) -> Shape {
    Shape::linear((items.max(1) as u32).div_ceil(BLOCK).min(sm_blocks(g)), BLOCK, 0)
}

/// A warp per item, grid-stride past the SMs' blocks.
pub(super) fn warp_per_item(g: &Gpu, items: usize) -> Shape {
    Shape::linear((items.max(1) as u32).div_ceil(BLOCK / 32).min(sm_blocks(g)), BLOCK, 0)
}
