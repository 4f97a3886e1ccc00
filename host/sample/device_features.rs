//! A sampled batch's sparse node features made on the GPU (`kernels-gpu/src/sample/features.rs`),
//! for both device samplers: the whole graph's X and Xᵀ stay resident, and each batch gets its
//! nodes' rows of X, their transpose and its map, padded into the rebound model's sparse input.
//! Multi-hot features stay sparse this way (musae_facebook: about 20 nonzeros of 4714 a node),
//! so a batch moves and multiplies its nonzeros, not dense rows.

use std::sync::Arc;

use super::device_batch::{DeviceBatch, PatternTargets, linear, longest_rows, scan, warp_per_item};
use crate::error::{Error, Result};
use crate::gpu::abi::sample::{self as kernels, BatchFeaturesArgs, BatchFeaturesBindArgs};
use crate::gpu::launch::Ptr;
use crate::gpu::{DeviceMatrix, DeviceVec, Gpu};
use crate::graph::Csr;
use crate::nn::input::InputFeatures;
use crate::ops::backend::cuda::{CudaBackend, GpuGraph};
use crate::shared::config::SCAN_TILE;

/// A device batch's features into a rebound model's input, for either sampler: dense rows
/// gathered by node id from the model's resident copy (`sparse` None), or the batch's sparse rows
/// and transpose padded into its sparse input.
pub(super) fn bind_input(
    g: &Gpu,
    (input, resident): (&mut InputFeatures<CudaBackend>, Option<&DeviceMatrix<f32>>),
    rows: usize,
    b: &DeviceBatch,
    nodes: &DeviceVec<u32>,
    n_nodes: usize,
    sparse: Option<(&DeviceFeatures, &FeatureSet)>,
) -> Result<()> {
    match (input, resident, sparse) {
        // Rebinding x would leave an f16 snapshot of it stale (only fixed features have one).
        (InputFeatures::DenseFused { half: Some(_), .. } | InputFeatures::Half { .. }, _, _) => {
            Err(Error::Unsupported("a device batch's features rebound into features stored in f16 as well".into()))
        }
        (InputFeatures::Dense { x, .. } | InputFeatures::DenseFused { x, .. }, Some(full), None) => {
            crate::ops::nn::gather_rows::gather_rows_device_ids(full, nodes, b.n, n_nodes, x)
        }
        (InputFeatures::Sparse { x, values, values_t, .. }, None, Some((f, fs))) => f.bind(g, (x, values, values_t), rows, fs, b),
        _ => Err(Error::Unsupported("a device batch's features and the model's input differ (dense resident or sparse)".into())),
    }
}

/// A batch's sizes against the bounds its buffers were made for (past them: a bug, said so).
pub(super) fn check_bounds(
    batch: &DeviceBatch,
    (max_nodes, max_entries): (usize, usize),
    features: Option<&DeviceFeatures>,
    sampler: &str,
) -> Result<()> {
    if batch.n > max_nodes || batch.nnz > max_entries || batch.feature_nnz > features.map_or(0, |f| f.max_nnz) {
        return Err(Error::Unsupported(format!(
            "a device {sampler} batch of {batch:?} passed its bounds ({max_nodes} nodes, {max_entries} entries): a bug"
        )));
    }
    Ok(())
}

/// Entries of Xᵀ per segment: one step of a warp (four chunks of 32).
const SEGMENT: usize = 128;

/// Sparse node features on the device: X and Xᵀ with, per entry of Xᵀ, its entry of X, and the
/// scratch of the kernels that cut a batch from them.
pub(super) struct DeviceFeatures {
    pub n_features: usize,
    /// The most entries a batch's rows can hold.
    pub max_nnz: usize,
    /// The most rows a batch can have.
    max_rows: usize,
    x_ptr: DeviceVec<u32>,
    x_cols: DeviceVec<u32>,
    x_values: DeviceVec<f32>,
    xt_nodes: DeviceVec<u32>,
    xt_of: DeviceVec<u32>,
    /// Xᵀ cut into segments of at most `SEGMENT` entries of one row (a warp each): their starts
    /// (and the end), rows, and each row's first segment.
    n_segments: usize,
    seg_start: DeviceVec<u32>,
    seg_row: DeviceVec<u32>,
    first_seg: DeviceVec<u32>,
    // Scratch (used in stream order, one batch at a time): counts of the scans (batch rows,
    // then segments of Xᵀ), the segments' offsets, the scans' tiles.
    counts: DeviceVec<u32>,
    seg_off: DeviceVec<u32>,
    tile_sums: DeviceVec<u32>,
    tile_offsets: DeviceVec<u32>,
}

/// One batch's sparse features as the kernels leave them.
pub(super) struct FeatureSet {
    pub fx_ptr: DeviceVec<u32>,
    fx_cols: DeviceVec<u32>,
    fx_values: DeviceVec<f32>,
    fx_rows: DeviceVec<u32>,
    fxt_ptr: DeviceVec<u32>,
    fxt_cols: DeviceVec<u32>,
    fxt_values: DeviceVec<f32>,
    fxt_of: DeviceVec<u32>,
    fxt_rows: DeviceVec<u32>,
}

/// The batch whose features are cut: its node count (on the device), nodes, and how a node is
/// known to be in it.
pub(super) struct BatchNodes {
    pub n_batch: Ptr<u32>,
    pub nodes: Ptr<u32>,
    /// GraphSAINT's marks (non-zero: in the batch), or null: a node with a local id is in it.
    pub marks: Ptr<u32>,
    pub local: Ptr<u32>,
}

impl DeviceFeatures {
    /// X resident, for batches of at most `max_rows` nodes.
    pub fn new(gpu: &Arc<Gpu>, x: &Csr, max_rows: usize) -> Result<Self> {
        let (xt, xt_of) = crate::graph::ops::transpose_with_map(x);
        let max_nnz = longest_rows(x, max_rows).max(1);
        if max_nnz > i32::MAX as usize || x.n_cols() == 0 || x.nnz() > u32::MAX as usize {
            return Err(Error::Unsupported(format!(
                "sampling on the GPU: sparse features of {} columns, batches of up to {max_nnz} entries",
                x.n_cols()
            )));
        }
        let some = |v: &[u32]| if v.is_empty() { vec![0] } else { v.to_vec() };
        let (mut seg_start, mut seg_row, mut first_seg) = (Vec::new(), Vec::new(), Vec::with_capacity(xt.n_rows() + 1));
        for f in 0..xt.n_rows() {
            first_seg.push(seg_row.len() as u32);
            seg_start.extend(xt.row_range(f).step_by(SEGMENT).map(|e| e as u32));
            seg_row.resize(seg_start.len(), f as u32);
        }
        first_seg.push(seg_row.len() as u32);
        seg_start.push(xt.nnz() as u32);
        let n_segments = seg_row.len();
        let tiles = (max_rows.max(n_segments) + 1).div_ceil(SCAN_TILE as usize);
        Ok(DeviceFeatures {
            n_features: x.n_cols(),
            max_nnz,
            max_rows,
            x_ptr: DeviceVec::upload(gpu, x.row_ptr())?,
            x_cols: DeviceVec::upload(gpu, &some(x.col_idx()))?,
            x_values: DeviceVec::upload(gpu, if x.nnz() == 0 { &[0.0] } else { x.values() })?,
            xt_nodes: DeviceVec::upload(gpu, &some(xt.col_idx()))?,
            xt_of: DeviceVec::upload(gpu, &some(&xt_of))?,
            n_segments,
            seg_start: DeviceVec::upload(gpu, &seg_start)?,
            seg_row: DeviceVec::upload(gpu, &some(&seg_row))?,
            first_seg: DeviceVec::upload(gpu, &first_seg)?,
            counts: DeviceVec::zeros(gpu, max_rows.max(n_segments).max(1))?,
            seg_off: DeviceVec::zeros(gpu, n_segments + 1)?,
            tile_sums: DeviceVec::zeros(gpu, tiles)?,
            tile_offsets: DeviceVec::zeros(gpu, tiles + 1)?,
        })
    }

    /// The outputs of one batch's features.
    pub fn set(&self, gpu: &Arc<Gpu>) -> Result<FeatureSet> {
        let e = self.max_nnz;
        Ok(FeatureSet {
            fx_ptr: DeviceVec::zeros(gpu, self.max_rows + 1)?,
            fx_cols: DeviceVec::zeros(gpu, e)?,
            fx_values: DeviceVec::zeros(gpu, e)?,
            fx_rows: DeviceVec::zeros(gpu, e)?,
            fxt_ptr: DeviceVec::zeros(gpu, self.n_features + 1)?,
            fxt_cols: DeviceVec::zeros(gpu, e)?,
            fxt_values: DeviceVec::zeros(gpu, e)?,
            fxt_of: DeviceVec::zeros(gpu, e)?,
            fxt_rows: DeviceVec::zeros(gpu, e)?,
        })
    }

    /// Queues the kernels that cut `batch`'s features into `fs` (after the kernels that list
    /// its nodes and local ids; before anything clears them). `fs.fx_ptr[max_rows]` ends as the
    /// batch's feature entries.
    pub fn enqueue(&mut self, g: &Gpu, batch: &BatchNodes, fs: &mut FeatureSet) -> Result<()> {
        let args = BatchFeaturesArgs {
            rows: self.max_rows as u32,
            n_features: self.n_features as u32,
            n_batch: batch.n_batch,
            nodes: batch.nodes,
            marks: batch.marks,
            local: batch.local,
            x_ptr: self.x_ptr.arg(g),
            x_cols: self.x_cols.arg(g),
            x_values: self.x_values.arg(g),
            xt_nodes: self.xt_nodes.arg(g),
            xt_of: self.xt_of.arg(g),
            n_segments: self.n_segments as u32,
            seg_start: self.seg_start.arg(g),
            seg_row: self.seg_row.arg(g),
            first_seg: self.first_seg.arg(g),
            counts: self.counts.arg_mut(g),
            fx_ptr: fs.fx_ptr.arg(g),
            fx_cols: fs.fx_cols.arg_mut(g),
            fx_values: fs.fx_values.arg_mut(g),
            fx_rows: fs.fx_rows.arg_mut(g),
            fxt_seg_off: self.seg_off.arg(g),
            fxt_ptr: fs.fxt_ptr.arg_mut(g),
            fxt_cols: fs.fxt_cols.arg_mut(g),
            fxt_values: fs.fxt_values.arg_mut(g),
            fxt_of: fs.fxt_of.arg_mut(g),
            fxt_rows: fs.fxt_rows.arg_mut(g),
        };
        let tiles = (&self.tile_sums, &self.tile_offsets);
        let (rows, segments) = (warp_per_item(g, self.max_rows), warp_per_item(g, self.n_segments.max(self.n_features + 1)));
        // SAFETY: the batch's nodes (at most max_rows, distinct node ids with their local ids)
        // and their rows of X, whose lengths sum to at most max_nnz (the size of every feature
        // entry buffer); counts holds max(max_rows, segments); Xᵀ's segments hold node ids.
        unsafe { kernels::batch_features_count.launch(g, linear(g, self.max_rows), &args)? };
        scan(g, tiles, self.max_rows, self.counts.ptr(g), fs.fx_ptr.ptr(g), 0)?;
        unsafe { kernels::batch_features_fill.launch(g, rows, &args)? };
        unsafe { kernels::batch_features_t_count.launch(g, segments, &args)? };
        scan(g, tiles, self.n_segments, self.counts.ptr(g), self.seg_off.ptr(g), 0)?;
        unsafe { kernels::batch_features_t_fill.launch(g, segments, &args)? };
        Ok(())
    }

    /// A batch's features downloaded (tests): X's rows, their transpose, its map.
    pub fn download(&self, g: &Gpu, fs: &FeatureSet, n: usize, nnz: usize) -> Result<(Csr, Csr, Vec<u32>)> {
        let take = |v: &DeviceVec<u32>, k: usize| -> Result<Vec<u32>> { Ok(v.download(g)?[..k].to_vec()) };
        let nf = self.n_features;
        let x = Csr::new(n, nf, take(&fs.fx_ptr, n + 1)?, take(&fs.fx_cols, nnz)?, fs.fx_values.download(g)?[..nnz].to_vec())?;
        let xt = Csr::new(nf, n, take(&fs.fxt_ptr, nf + 1)?, take(&fs.fxt_cols, nnz)?, fs.fxt_values.download(g)?[..nnz].to_vec())?;
        Ok((x, xt, take(&fs.fxt_of, nnz)?))
    }

    /// The batch's sparse features padded into a model's sparse input of `rows` rows (its
    /// pattern, transpose, map and both value arrays), as `PaddedBatch` pads them.
    pub fn bind(
        &self,
        g: &Gpu,
        (x, values, values_t): (&mut GpuGraph, &mut DeviceVec<f32>, &mut DeviceVec<f32>),
        rows: usize,
        fs: &FeatureSet,
        b: &DeviceBatch,
    ) -> Result<()> {
        let p = PatternTargets::of(g, &x.handle)?;
        let (cap, nf) = (p.cap, self.n_features);
        if (p.rows, p.cols) != (rows, nf) || values.len() != cap || values_t.len() != cap || b.feature_nnz > cap || b.n > rows {
            return Err(Error::Shape(format!(
                "a rebound model's sparse input ({} x {}, {cap} entries) does not take a device batch of {} x {nf} with {}",
                p.rows, p.cols, b.n, b.feature_nnz
            )));
        }
        let args = BatchFeaturesBindArgs {
            n: b.n as u32,
            nnz: b.feature_nnz as u32,
            rows: rows as u32,
            cap: cap as u32,
            n_features: nf as u32,
            fx_ptr: fs.fx_ptr.arg(g),
            fx_cols: fs.fx_cols.arg(g),
            fx_values: fs.fx_values.arg(g),
            fx_rows: fs.fx_rows.arg(g),
            fxt_ptr: fs.fxt_ptr.arg(g),
            fxt_cols: fs.fxt_cols.arg(g),
            fxt_values: fs.fxt_values.arg(g),
            fxt_of: fs.fxt_of.arg(g),
            fxt_rows: fs.fxt_rows.arg(g),
            s_row_ptr: p.s_row_ptr,
            s_cols: p.s_cols,
            s_rows: p.s_rows,
            s_values: values.arg_mut(g),
            t_row_ptr: p.t_row_ptr,
            t_cols: p.t_cols,
            t_rows: p.t_rows,
            t_values: values_t.arg_mut(g),
            t_of: p.t_of,
        };
        // SAFETY: every output has the model's sizes (checked above); the batch (n <= rows,
        // feature_nnz <= cap) was cut by `enqueue` into the set it reads.
        unsafe { kernels::batch_features_bind.launch(g, linear(g, (rows + 1).max(cap).max(nf + 1)), &args) }
    }
}
