//! Neighbour-sampled batches made on the GPU (`kernels-gpu/src/sample/neighbor.rs`): the
//! targets, every hop's draws and newly reached nodes, the union of the hops' edges normalised
//! as the model normalises a graph, its transpose and the padding into a rebound model's
//! buffers, all from a resident copy of the graph, with no per-batch host work but reading
//! five sizes back. The batch is the CPU sampler's bit for bit (same counter streams, same
//! node order, same layout; tested), so `--sample-on gpu` and `cpu` train the same model.
//!
//! Per-layer blocks with the full graph's normalisation (`BatchSource::NeighborNormalized`
//! with `per_layer`, [`DeviceNeighbor::new`] given the [`Aggregation`]): instead of the union,
//! one matrix per layer, layer l on hop H - 1 - l's block over the batch's local ids with
//! `Aggregation::block_matrix`'s values (from the full graph's degrees and per-entry values,
//! resident) and its transpose, each bound into the layer's own matrix of the rebound model;
//! bit for bit the CPU workers' `TrainBatch::from_blocks_normalized` (tested). The graph's rows
//! must be sorted with unique columns (an entry's raw position is found by binary search).
//!
//! What it takes (else the CPU workers run): a model with a fixed aggregation (GCN, SAGE, GIN)
//! on a rebound model. Dense features are gathered from the model's resident copy; sparse ones
//! stay sparse (`device_features.rs` cuts each batch's rows and their transpose). Any graph:
//! unlike GraphSAINT's, the batch's transpose is built, not mirrored.

use crate::nn::models::{FixedAggregation, model_info};
use std::sync::Arc;

use super::aggregation::Aggregation;
use super::bound::BoundModel;
use super::device_batch::{BatchLoss, BatchMatrix, Sizes, bind_matrix, linear, longest_rows, scan, warp_per_item};
pub use super::device_batch::{DeviceBatch, DeviceBatches, Pending};
use super::device_features::{BatchNodes, DeviceFeatures, FeatureSet, bind_input, check_bounds};
use super::neighbor::NeighborSampler;
use super::stream::Stream;
use crate::error::{Error, Result};
use crate::gpu::abi::sample::{
    self as kernels, NEIGHBOR_NORM_GCN, NEIGHBOR_NORM_MEAN, NEIGHBOR_NORM_SUM, NeighborBatchArgs, NeighborHopArgs, NeighborTargetsArgs,
};
use crate::gpu::launch::{Ptr, PtrMut};
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::Csr;
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::config::SCAN_TILE;

/// A batch downloaded (tests): what `PreparedBatch` holds for the same batch on the CPU.
pub struct NeighborHostBatch {
    pub nodes: Vec<u32>,
    /// The model's matrix and its transpose, with the transpose's map (layer 0's with
    /// per-layer blocks).
    pub s: Csr,
    pub t: Csr,
    pub t_of: Vec<u32>,
    /// Layers 1..'s matrices, transposes and maps (per-layer blocks; else empty).
    pub later: Vec<(Csr, Csr, Vec<u32>)>,
    /// Sparse features: the batch's rows, their transpose and its map (the transpose's rows
    /// list the batch's nodes in node-id order, not local order).
    pub features: Option<(Csr, Csr, Vec<u32>)>,
}

/// The model's normalisation of a batch, as the kernels take it (`None`: no fixed one).
pub fn norm_of(model: &str) -> Option<u32> {
    match model_info(model).ok()?.aggregation? {
        FixedAggregation::GcnNorm => Some(NEIGHBOR_NORM_GCN),
        FixedAggregation::Mean => Some(NEIGHBOR_NORM_MEAN),
        FixedAggregation::Sum => Some(NEIGHBOR_NORM_SUM),
    }
}

/// Why the device sampler cannot make `sampler`'s batches for `model` (`None`: it can).
pub fn unsupported(sampler: &NeighborSampler, model: &str) -> Option<String> {
    if norm_of(model).is_none() {
        return Some(format!("{model} normalises each batch itself (GCN, SAGE and GIN have a fixed aggregation)"));
    }
    let g = sampler.graph();
    if g.nnz() > i32::MAX as usize || g.n_rows() > (i32::MAX as usize) / 2 {
        return Some("the graph is past 2^31 entries".into());
    }
    if sampler.config().fanouts.is_empty() {
        return Some("no hops (--fanout is empty)".into());
    }
    None
}

/// Why the device sampler cannot make `sampler`'s per-layer blocks with the full graph's
/// normalisation for `model` (`None`: it can).
pub fn unsupported_per_layer(sampler: &NeighborSampler, model: &str) -> Option<String> {
    if let Some(why) = unsupported(sampler, model) {
        return Some(why);
    }
    if !sampler.graph().is_canonical() {
        return Some("per-layer blocks need the graph's rows sorted with unique columns".into());
    }
    None
}

/// The full graph's normalisation on the device (per-layer blocks).
struct BlockNorm {
    entry: DeviceVec<f32>,
    self_loops: DeviceVec<f32>,
}

/// Bounds of every hop: the most rows (nodes so far) and draws it can have.
struct HopBounds {
    rows: Vec<usize>,
    entries: Vec<usize>,
}

impl HopBounds {
    fn new(g: &Csr, targets: usize, fanouts: &[i32]) -> Self {
        let (mut rows, mut entries) = (vec![targets], Vec::new());
        for &f in fanouts {
            let r = *rows.last().expect("one");
            let whole = longest_rows(g, r);
            let e = if f < 0 { whole } else { whole.min(r.saturating_mul(f as usize)) };
            entries.push(e);
            rows.push(g.n_rows().min(r + e));
        }
        HopBounds { rows, entries }
    }
}

/// One neighbour sampler's state on the device, and the scratch of the batch it makes.
pub struct DeviceNeighbor {
    gpu: Arc<Gpu>,
    seed: u64,
    shuffle: bool,
    batch_size: usize,
    n_targets: usize,
    n_nodes: usize,
    fanouts: Vec<i32>,
    norm: u32,
    bounds: HopBounds,
    /// The most nodes and entries a batch can have.
    max_nodes: usize,
    max_entries: usize,
    row_ptr: DeviceVec<u32>,
    col_idx: DeviceVec<u32>,
    targets: DeviceVec<u32>,
    labels: DeviceVec<i32>,
    /// Sparse node features (`None`: dense ones, gathered from the model's resident copy).
    features: Option<DeviceFeatures>,
    // Scratch of the sampling kernels (used in stream order, one batch at a time).
    /// Per graph node: its local id in the batch being made, and the first draw reaching it.
    local: DeviceVec<u32>,
    first: DeviceVec<u32>,
    /// Nodes after each hop.
    hop_sizes: DeviceVec<u32>,
    /// Every hop's row pointers and drawn neighbours, hop h at `ptr_at[h]` and `nbr_at[h]`.
    hop_ptr: DeviceVec<u32>,
    hop_nbrs: DeviceVec<u32>,
    ptr_at: Vec<usize>,
    nbr_at: Vec<usize>,
    ptr_at_dev: DeviceVec<u32>,
    nbr_at_dev: DeviceVec<u32>,
    counts: DeviceVec<u32>,
    flags: DeviceVec<u32>,
    new_pos: DeviceVec<u32>,
    scratch: DeviceVec<u32>,
    unique: DeviceVec<u32>,
    t_counts: DeviceVec<u32>,
    t_cursor: DeviceVec<u32>,
    tile_sums: DeviceVec<u32>,
    tile_offsets: DeviceVec<u32>,
    /// Per-layer blocks: the full graph's normalisation (`None`: the union).
    blocks: Option<BlockNorm>,
    /// Two batches' outputs: batch i + 1 is made into one while batch i, in the other, is bound
    /// and trained on.
    sets: [BatchSet; 2],
    next_set: usize,
    /// Entries of each matrix of the batch in each set (read with its sizes).
    set_nnz: [Vec<usize>; 2],
}

/// A batch's matrix as the kernels leave it, with its transpose.
struct MatrixSet {
    row_ptr: DeviceVec<u32>,
    cols: DeviceVec<u32>,
    values: DeviceVec<f32>,
    entry_rows: DeviceVec<u32>,
    t_ptr: DeviceVec<u32>,
    t_cols: DeviceVec<u32>,
    t_rows: DeviceVec<u32>,
    t_values: DeviceVec<f32>,
    t_of: DeviceVec<u32>,
}

impl MatrixSet {
    fn new(gpu: &Arc<Gpu>, n: usize, e: usize) -> Result<Self> {
        Ok(MatrixSet {
            row_ptr: DeviceVec::zeros(gpu, n + 1)?,
            cols: DeviceVec::zeros(gpu, e)?,
            values: DeviceVec::zeros(gpu, e)?,
            entry_rows: DeviceVec::zeros(gpu, e)?,
            t_ptr: DeviceVec::zeros(gpu, n + 1)?,
            t_cols: DeviceVec::zeros(gpu, e)?,
            t_rows: DeviceVec::zeros(gpu, e)?,
            t_values: DeviceVec::zeros(gpu, e)?,
            t_of: DeviceVec::zeros(gpu, e)?,
        })
    }

    fn batch_matrix<'a>(&'a self, nodes: &'a DeviceVec<u32>) -> BatchMatrix<'a> {
        BatchMatrix {
            row_ptr: &self.row_ptr,
            cols: &self.cols,
            entry_rows: &self.entry_rows,
            values: &self.values,
            t_pattern: Some((&self.t_ptr, &self.t_cols, &self.t_rows)),
            t_values: &self.t_values,
            t_of: &self.t_of,
            nodes,
        }
    }

    fn download(&self, g: &Gpu, n: usize, nnz: usize) -> Result<(Csr, Csr, Vec<u32>)> {
        let take = |v: &DeviceVec<u32>, k: usize| -> Result<Vec<u32>> { Ok(v.download(g)?[..k].to_vec()) };
        let takef = |v: &DeviceVec<f32>, k: usize| -> Result<Vec<f32>> { Ok(v.download(g)?[..k].to_vec()) };
        let s = Csr::new(n, n, take(&self.row_ptr, n + 1)?, take(&self.cols, nnz)?, takef(&self.values, nnz)?)?;
        let t = Csr::new(n, n, take(&self.t_ptr, n + 1)?, take(&self.t_cols, nnz)?, takef(&self.t_values, nnz)?)?;
        Ok((s, t, take(&self.t_of, nnz)?))
    }
}

/// One batch as the kernels leave it.
struct BatchSet {
    nodes: DeviceVec<u32>,
    /// The union's matrix, or every layer's block (layer l's at l).
    matrices: Vec<MatrixSet>,
    features: Option<FeatureSet>,
    sizes: Sizes,
}

impl BatchSet {
    /// A set for batches of up to `max_nodes` nodes, one matrix per entry bound of `entries`
    /// (per-layer blocks when `blocks`, whose entries come after the five sizes; else the union).
    fn new(gpu: &Arc<Gpu>, max_nodes: usize, (entries, blocks): (&[usize], bool), features: Option<&DeviceFeatures>) -> Result<Self> {
        Ok(BatchSet {
            nodes: DeviceVec::zeros(gpu, max_nodes)?,
            matrices: entries.iter().map(|&e| MatrixSet::new(gpu, max_nodes, e)).collect::<Result<_>>()?,
            features: features.map(|f| f.set(gpu)).transpose()?,
            sizes: Sizes::with_extra(gpu, if blocks { entries.len() } else { 0 })?,
        })
    }
}

impl DeviceNeighbor {
    /// The device copy of `sampler` for `model` (its normalisation) with the node labels;
    /// fails with the reason where [`unsupported`] says so. With `sparse_features` (N x F),
    /// each batch gets its rows of them and their transpose; else the batches' dense rows are
    /// gathered from the rebound model's resident features. With `per_layer` (the model's
    /// normalisation of the sampler's graph), per-layer blocks with it instead of the union
    /// (see the module docs; [`unsupported_per_layer`]).
    pub fn new(
        gpu: &Arc<Gpu>,
        sampler: &NeighborSampler,
        model: &str,
        labels: &[i32],
        sparse_features: Option<&Csr>,
        per_layer: Option<&Aggregation>,
    ) -> Result<Self> {
        let why = if per_layer.is_some() { unsupported_per_layer(sampler, model) } else { unsupported(sampler, model) };
        if let Some(why) = why {
            return Err(Error::Unsupported(format!("sampling on the GPU: {why}; use --sample-on cpu")));
        }
        let g = sampler.graph();
        let n = g.n_rows();
        if labels.len() != n {
            return Err(Error::Shape(format!("sampling on the GPU: {} labels for {n} nodes", labels.len())));
        }
        let blocks = match per_layer.map(|a| a.parts()) {
            Some((entry, own)) if entry.len() != g.nnz() || own.len() != n => {
                return Err(Error::Shape(format!(
                    "sampling on the GPU: a normalisation of {} entries and {} nodes for a graph of {} and {n}",
                    entry.len(),
                    own.len(),
                    g.nnz()
                )));
            }
            Some((entry, own)) => Some(BlockNorm {
                entry: DeviceVec::upload(gpu, if entry.is_empty() { &[0.0] } else { entry })?,
                self_loops: DeviceVec::upload(gpu, if own.is_empty() { &[0.0] } else { own })?,
            }),
            None => None,
        };
        let cfg = sampler.config();
        let n_targets = sampler.targets().len();
        let bounds = HopBounds::new(g, cfg.batch_size.min(n_targets), &cfg.fanouts);
        let max_nodes = bounds.rows.last().copied().expect("one").max(1);
        let drawn: usize = bounds.entries.iter().sum();
        let max_entries = (drawn + max_nodes).max(1);
        if max_entries > i32::MAX as usize {
            return Err(Error::Unsupported(format!("sampling on the GPU: batches of up to {max_entries} entries are past 2^31")));
        }
        let (mut ptr_at, mut nbr_at) = (Vec::new(), Vec::new());
        let (mut p, mut e) = (0, 0);
        for h in 0..cfg.fanouts.len() {
            ptr_at.push(p);
            nbr_at.push(e);
            p += bounds.rows[h] + 1;
            e += bounds.entries[h];
        }
        let widest_hop = bounds.entries.iter().chain(&bounds.rows).copied().max().expect("one");
        let tiles = (widest_hop.max(max_nodes) + 1).div_ceil(SCAN_TILE as usize);
        // Layer l's block is hop H - 1 - l's draws plus a self-loop per row.
        let matrix_entries: Vec<usize> = match &blocks {
            Some(_) => (0..cfg.fanouts.len()).rev().map(|h| (bounds.entries[h] + bounds.rows[h]).max(1)).collect(),
            None => vec![max_entries],
        };
        let u32s = |v: &[usize]| v.iter().map(|&x| x as u32).collect::<Vec<u32>>();
        let absent = vec![u32::MAX; n.max(1)];
        let features = match sparse_features {
            Some(x) if x.n_rows() != n => {
                return Err(Error::Shape(format!("sampling on the GPU: {} feature rows for {n} nodes", x.n_rows())));
            }
            Some(x) => Some(DeviceFeatures::new(gpu, x, max_nodes)?),
            None => None,
        };
        Ok(DeviceNeighbor {
            gpu: gpu.clone(),
            seed: cfg.seed,
            shuffle: cfg.shuffle,
            batch_size: cfg.batch_size,
            n_targets,
            n_nodes: n,
            fanouts: cfg.fanouts.clone(),
            norm: norm_of(model).expect("checked"),
            max_nodes,
            max_entries,
            row_ptr: DeviceVec::upload(gpu, g.row_ptr())?,
            col_idx: DeviceVec::upload(gpu, if g.nnz() == 0 { &[0] } else { g.col_idx() })?,
            targets: DeviceVec::upload(gpu, if n_targets == 0 { &[0] } else { sampler.targets() })?,
            labels: DeviceVec::upload(gpu, labels)?,
            local: DeviceVec::upload(gpu, &absent)?,
            first: DeviceVec::upload(gpu, &absent)?,
            hop_sizes: DeviceVec::zeros(gpu, cfg.fanouts.len() + 1)?,
            hop_ptr: DeviceVec::zeros(gpu, p.max(1))?,
            hop_nbrs: DeviceVec::zeros(gpu, e.max(1))?,
            ptr_at_dev: DeviceVec::upload(gpu, &u32s(&ptr_at))?,
            nbr_at_dev: DeviceVec::upload(gpu, &u32s(&nbr_at))?,
            ptr_at,
            nbr_at,
            counts: DeviceVec::zeros(gpu, widest_hop.max(max_nodes).max(1))?,
            flags: DeviceVec::zeros(gpu, widest_hop.max(1))?,
            new_pos: DeviceVec::zeros(gpu, widest_hop + 1)?,
            scratch: DeviceVec::zeros(gpu, drawn.max(1))?,
            unique: DeviceVec::zeros(gpu, max_nodes)?,
            t_counts: DeviceVec::zeros(gpu, max_nodes)?,
            t_cursor: DeviceVec::zeros(gpu, max_nodes)?,
            tile_sums: DeviceVec::zeros(gpu, tiles)?,
            tile_offsets: DeviceVec::zeros(gpu, tiles + 1)?,
            sets: [
                BatchSet::new(gpu, max_nodes, (&matrix_entries, blocks.is_some()), features.as_ref())?,
                BatchSet::new(gpu, max_nodes, (&matrix_entries, blocks.is_some()), features.as_ref())?,
            ],
            set_nnz: [Vec::new(), Vec::new()],
            blocks,
            features,
            next_set: 0,
            bounds,
        })
    }

    /// The last batch, downloaded (tests and inspection).
    pub fn download(&self, b: &DeviceBatch) -> Result<NeighborHostBatch> {
        let (g, set) = (&self.gpu, &self.sets[b.set]);
        let nnz = &self.set_nnz[b.set];
        let mut matrices = set.matrices.iter().zip(nnz).map(|(m, &k)| m.download(g, b.n, k)).collect::<Result<Vec<_>>>()?.into_iter();
        let (s, t, t_of) = matrices.next().expect("one matrix at least");
        let features = match (&self.features, &set.features) {
            (Some(f), Some(fs)) => Some(f.download(g, fs, b.n, b.feature_nnz)?),
            _ => None,
        };
        let nodes = set.nodes.download(g)?[..b.n].to_vec();
        Ok(NeighborHostBatch { nodes, s, t, t_of, later: matrices.collect(), features })
    }

    /// Queues per-layer step 3 and the transposes: every hop's block into its layer's matrix.
    fn enqueue_blocks(&mut self, set: usize, union: &NeighborBatchArgs) -> Result<()> {
        let g = &*self.gpu;
        let out = &mut self.sets[set];
        let hops = self.fanouts.len();
        for (l, m) in out.matrices.iter_mut().enumerate() {
            let h = hops - 1 - l;
            let args = NeighborBatchArgs {
                entries: (self.bounds.entries[h] + self.bounds.rows[h]) as u32,
                block: h as u32,
                row_ptr: m.row_ptr.arg(g),
                cols: m.cols.arg_mut(g),
                values: m.values.arg_mut(g),
                entry_rows: m.entry_rows.arg_mut(g),
                t_ptr: m.t_ptr.arg(g),
                t_cols: m.t_cols.arg_mut(g),
                t_rows: m.t_rows.arg_mut(g),
                t_values: m.t_values.arg_mut(g),
                t_of: m.t_of.arg_mut(g),
                block_nnz: PtrMut::new(out.sizes.device.ptr(g) + 4 * (5 + l) as u64),
                ..*union
            };
            let n = self.max_nodes;
            // SAFETY: the block has at most `rows` (max_nodes) rows and `entries` entries (the
            // hop's draws and a self-loop per row: the matrix's buffers); its rows' scratch is
            // the hop's draws' place in the scratch (the hops' draws in all); the graph's rows
            // are sorted and unique (checked at construction), and the normalisation holds a
            // value per graph entry and node; the sizes hold 5 + layers values.
            unsafe { kernels::neighbor_block_count.launch(g, warp_per_item(g, n), &args)? };
            scan(g, (&self.tile_sums, &self.tile_offsets), n, self.counts.ptr(g), m.row_ptr.ptr(g), 0)?;
            unsafe { kernels::neighbor_block_fill.launch(g, warp_per_item(g, n), &args)? };
            scan(g, (&self.tile_sums, &self.tile_offsets), n, self.t_counts.ptr(g), m.t_ptr.ptr(g), 0)?;
            unsafe { kernels::neighbor_transpose_fill.launch(g, linear(g, args.entries as usize), &args)? };
            unsafe { kernels::neighbor_transpose_sort.launch(g, warp_per_item(g, n), &args)? };
        }
        Ok(())
    }
}

impl DeviceBatches for DeviceNeighbor {
    fn enqueue(&mut self, epoch: u32, i: u32) -> Result<Pending> {
        let gpu = self.gpu.clone();
        let g = &gpu;
        let set = self.next_set;
        self.next_set ^= 1;
        let start = (i as usize).saturating_mul(self.batch_size).min(self.n_targets);
        let n_out = (start + self.batch_size).min(self.n_targets) - start;
        let out = &mut self.sets[set];
        let at = |v: &DeviceVec<u32>, k: usize| v.ptr(g) + 4 * k as u64;
        let targets = NeighborTargetsArgs {
            n_out: n_out as u32,
            start: start as u32,
            n_targets: self.n_targets as u32,
            shuffle: self.shuffle as u32,
            // The epoch's order has its own stream (batch index u32::MAX), as the CPU's.
            key: Stream::new(self.seed, epoch, u32::MAX).bits(0),
            targets: self.targets.arg(g),
            nodes: out.nodes.arg_mut(g),
            local: self.local.arg_mut(g),
            sizes: self.hop_sizes.arg_mut(g),
        };
        // SAFETY: positions start..start + n_out of the targets (a permutation of their indices
        // when shuffled); targets are distinct node ids, nodes holds max_nodes >= n_out.
        unsafe { kernels::neighbor_targets.launch(g, linear(g, n_out), &targets)? };
        let batch = Stream::new(self.seed, epoch, i);
        for (h, &fanout) in self.fanouts.iter().enumerate() {
            let (rows, entries) = (self.bounds.rows[h], self.bounds.entries[h]);
            let hop_ptr = at(&self.hop_ptr, self.ptr_at[h]);
            let args = NeighborHopArgs {
                hop: h as u32,
                rows: rows as u32,
                entries: entries as u32,
                fanout,
                key: batch.substream(h as u32).key(),
                row_ptr: self.row_ptr.arg(g),
                col_idx: self.col_idx.arg(g),
                nodes: out.nodes.arg_mut(g),
                local: self.local.arg_mut(g),
                first: self.first.arg_mut(g),
                sizes: self.hop_sizes.arg_mut(g),
                counts: self.counts.arg_mut(g),
                hop_ptr: Ptr::new(hop_ptr),
                nbrs: PtrMut::new(at(&self.hop_nbrs, self.nbr_at[h])),
                flags: self.flags.arg_mut(g),
                new_pos: self.new_pos.arg(g),
            };
            // SAFETY: the hop has at most `rows` rows (the nodes so far) and `entries` draws (its
            // bounds, from the graph's longest rows); its row pointers (rows + 1) and neighbours
            // are its slices of the hop buffers; local and first hold a value per node.
            unsafe { kernels::neighbor_hop_count.launch(g, linear(g, rows), &args)? };
            scan(g, (&self.tile_sums, &self.tile_offsets), rows, self.counts.ptr(g), hop_ptr, 0)?;
            unsafe { kernels::neighbor_hop_draw.launch(g, warp_per_item(g, rows), &args)? };
            unsafe { kernels::neighbor_hop_first.launch(g, linear(g, entries), &args)? };
            unsafe { kernels::neighbor_hop_flags.launch(g, linear(g, entries), &args)? };
            scan(g, (&self.tile_sums, &self.tile_offsets), entries, self.flags.ptr(g), self.new_pos.ptr(g), 0)?;
            unsafe { kernels::neighbor_hop_assign.launch(g, linear(g, entries), &args)? };
        }
        let first = &mut out.matrices[0];
        let null = Ptr::null();
        let (entry_values, self_loops) = self.blocks.as_ref().map_or((null, null), |b| (b.entry.arg(g), b.self_loops.arg(g)));
        let args = NeighborBatchArgs {
            hops: self.fanouts.len() as u32,
            rows: self.max_nodes as u32,
            entries: self.max_entries as u32,
            norm: self.norm,
            sizes: self.hop_sizes.arg(g),
            hop_ptr: self.hop_ptr.arg(g),
            hop_nbrs: self.hop_nbrs.arg(g),
            ptr_at: self.ptr_at_dev.arg(g),
            nbr_at: self.nbr_at_dev.arg(g),
            nodes: out.nodes.arg(g),
            local: self.local.arg_mut(g),
            scratch: self.scratch.arg_mut(g),
            counts: self.counts.arg_mut(g),
            unique: self.unique.arg_mut(g),
            row_ptr: first.row_ptr.arg(g),
            cols: first.cols.arg_mut(g),
            values: first.values.arg_mut(g),
            entry_rows: first.entry_rows.arg_mut(g),
            t_counts: self.t_counts.arg_mut(g),
            t_cursor: self.t_cursor.arg_mut(g),
            t_ptr: first.t_ptr.arg(g),
            t_cols: first.t_cols.arg_mut(g),
            t_rows: first.t_rows.arg_mut(g),
            t_values: first.t_values.arg_mut(g),
            t_of: first.t_of.arg_mut(g),
            fx_ptr: out.features.as_ref().map_or(Ptr::null(), |f| f.fx_ptr.arg(g)),
            totals: out.sizes.device.arg_mut(g),
            block: 0,
            graph_ptr: self.row_ptr.arg(g),
            graph_cols: self.col_idx.arg(g),
            entry_values,
            self_loops,
            block_nnz: PtrMut::null(),
        };
        let n = self.max_nodes;
        if self.blocks.is_some() {
            self.enqueue_blocks(set, &args)?;
        } else {
            let m = &self.sets[set].matrices[0];
            // SAFETY: the batch has at most max_nodes nodes and max_entries entries (every hop's
            // draws plus a self-loop per node), the sizes of every per-row and per-entry buffer;
            // each row's union fits at the sum of its hop rows' starts in the scratch (the hops'
            // draws in all).
            unsafe { kernels::neighbor_union_count.launch(g, warp_per_item(g, n), &args)? };
            scan(g, (&self.tile_sums, &self.tile_offsets), n, self.counts.ptr(g), m.row_ptr.ptr(g), 0)?;
            unsafe { kernels::neighbor_union_fill.launch(g, warp_per_item(g, n), &args)? };
            scan(g, (&self.tile_sums, &self.tile_offsets), n, self.t_counts.ptr(g), m.t_ptr.ptr(g), 0)?;
            unsafe { kernels::neighbor_transpose_fill.launch(g, linear(g, self.max_entries), &args)? };
            unsafe { kernels::neighbor_transpose_sort.launch(g, warp_per_item(g, n), &args)? };
        }
        let out = &mut self.sets[set];
        if let (Some(f), Some(fs)) = (&mut self.features, &mut out.features) {
            // Before `finish` clears the local ids that say which nodes are in the batch.
            let batch = BatchNodes {
                n_batch: Ptr::new(at(&self.hop_sizes, self.fanouts.len())),
                nodes: out.nodes.arg(g),
                marks: Ptr::null(),
                local: self.local.arg(g),
            };
            f.enqueue(g, &batch, fs)?;
        }
        // `totals[3]`: the entries of the first matrix (the union's, or layer 0's block).
        unsafe { kernels::neighbor_finish.launch(g, linear(g, n), &args)? };
        out.sizes.send(g)?;
        Ok(Pending { set })
    }

    fn wait(&mut self, p: Pending) -> Result<DeviceBatch> {
        let sizes = &self.sets[p.set].sizes;
        let mut batch = sizes.read(p.set)?;
        let nnz = if self.blocks.is_some() { sizes.extra()? } else { vec![batch.nnz] };
        if nnz.first() != Some(&batch.nnz) {
            return Err(Error::Shape(format!("a device neighbour batch's first matrix has {} entries and {nnz:?}", batch.nnz)));
        }
        // What a rebound model's matrices must each hold: the largest.
        batch.nnz = nnz.iter().copied().max().unwrap_or(0);
        check_bounds(&batch, (self.max_nodes, self.max_entries), self.features.as_ref(), "neighbour")?;
        for (l, (&k, m)) in nnz.iter().zip(&self.sets[p.set].matrices).enumerate() {
            if k > m.cols.len() {
                return Err(Error::Shape(format!(
                    "a device neighbour batch's layer {l} block of {k} entries past its bound {}",
                    m.cols.len()
                )));
            }
        }
        self.set_nnz[p.set] = nnz;
        Ok(batch)
    }

    fn later_matrices(&self) -> usize {
        self.sets[0].matrices.len() - 1
    }

    fn bind(&self, m: &mut BoundModel<CudaBackend>, b: &DeviceBatch) -> Result<()> {
        let cap = m.capacity();
        if !cap.holds_sizes(b.n, b.nnz, b.feature_nnz) {
            return Err(Error::Shape(format!("a device batch of {} nodes and {} entries into a model of {cap:?}", b.n, b.nnz)));
        }
        if cap.later != self.later_matrices() {
            return Err(Error::Shape(format!(
                "a device batch of {} matrices into a model of {} (per-layer blocks need a matrix per layer)",
                self.later_matrices() + 1,
                cap.later + 1
            )));
        }
        let rows = m.rows();
        let (g, set) = (&self.gpu, &self.sets[b.set]);
        // Each layer's matrix with its own entries (labels and loss weights rewritten alike).
        for (l, (matrix, &nnz)) in set.matrices.iter().zip(&self.set_nnz[b.set]).enumerate() {
            let mut parts = m.layer_parts(l)?;
            let layer = DeviceBatch { nnz, ..*b };
            bind_matrix(g, &mut parts, rows, &layer, matrix.batch_matrix(&set.nodes), &self.labels, BatchLoss::Targets)?;
        }
        let parts = m.parts()?;
        let sparse = self.features.as_ref().zip(set.features.as_ref());
        bind_input(g, (parts.input, parts.resident), rows, b, &set.nodes, self.n_nodes, sparse)
    }
}
