//! GraphSAINT batches made on the GPU (`kernels-gpu/src/sample/saint.rs`): the draws, the
//! induced subgraph, the aggregation with its weights, the transpose and the padding into a
//! rebound model's buffers, all from a resident copy of the graph, with no per-batch host work
//! but reading four sizes back. The batch is the CPU sampler's bit for bit (same counter
//! streams, same layout; tested), so `--sample-on gpu` and `cpu` train the same model.
//!
//! What it takes (else the CPU sampler runs): normalised GraphSAINT (pre-sampled weights) for a
//! model with a fixed aggregation (GCN, SAGE, GIN) and a graph whose pattern is symmetric with
//! sorted rows (the transpose of a batch is then its own pattern). Dense features are gathered
//! from the model's resident copy; sparse ones are kept here and each batch gets its rows and
//! their transpose.

use std::sync::Arc;

use super::aggregation::Aggregation;
use super::batch::NodeData;
use super::bound::BoundModel;
use super::device_batch::{BatchLoss, BatchMatrix, Sizes, bind_matrix, linear, longest_rows, scan, warp_per_item};
pub use super::device_batch::{DeviceBatch, DeviceBatches, Pending};
use super::device_features::{BatchNodes, DeviceFeatures, FeatureSet, bind_input, check_bounds};
use super::saint::{SaintKind, SaintSampler};
use super::stream::Stream;
use crate::error::{Error, Result};
use crate::gpu::abi::sample::{
    self as kernels, SAINT_KIND_EDGE, SAINT_KIND_NODE, SAINT_KIND_WALK, SaintDrawArgs, SaintFinishArgs, SaintRowsArgs, SaintTransposeArgs,
};
use crate::gpu::launch::Ptr;
use crate::gpu::{DeviceVec, Gpu};
use crate::graph::Csr;
use crate::nn::input::HostFeatures;
use crate::ops::backend::TRAIN_BIT;
use crate::ops::backend::cuda::CudaBackend;
use crate::shared::config::SCAN_TILE;

/// A batch downloaded (tests): what `PreparedBatch` holds for the same batch on the CPU.
pub struct HostBatch {
    pub nodes: Vec<u32>,
    /// The model's matrix.
    pub s: Csr,
    /// Its transpose's values and map (the pattern is `s`'s).
    pub t_values: Vec<f32>,
    pub t_of: Vec<u32>,
    /// Sparse features: the batch's rows, their transpose and its map.
    pub features: Option<(Csr, Csr, Vec<u32>)>,
}

/// Why the device sampler cannot make `sampler`'s batches (`None`: it can).
pub fn unsupported(sampler: &SaintSampler, aggregation: Option<&Aggregation>) -> Option<String> {
    if sampler.norm().is_none() || aggregation.is_none() {
        return Some("GraphSAINT without normalisation (--saint-coverage 0) normalises each batch as a graph of its own".into());
    }
    let g = sampler.graph();
    if !g.is_canonical() || !pattern_symmetric(g) {
        return Some("the graph's pattern is not symmetric with sorted, unique columns".into());
    }
    if g.nnz() > i32::MAX as usize || g.n_rows() > (i32::MAX as usize) / 2 {
        return Some("the graph is past 2^31 entries".into());
    }
    None
}

/// Whether entry (r, c) exists exactly when (c, r) does (rows sorted).
fn pattern_symmetric(g: &Csr) -> bool {
    use rayon::prelude::*;
    g.n_rows() == g.n_cols()
        && (0..g.n_rows())
            .into_par_iter()
            .all(|r| g.col_idx()[g.row_range(r)].iter().all(|&c| g.col_idx()[g.row_range(c as usize)].binary_search(&(r as u32)).is_ok()))
}

/// One GraphSAINT sampler's state on the device, and the scratch of the batch it makes.
pub struct DeviceSaint {
    gpu: Arc<Gpu>,
    kind: u32,
    draws: u32,
    walk_length: u32,
    seed: u64,
    n_nodes: usize,
    to_train: f64,
    row_ptr: DeviceVec<u32>,
    col_idx: DeviceVec<u32>,
    alias: Option<(DeviceVec<f64>, DeviceVec<u32>)>,
    /// The aggregation's value of every entry times its GraphSAINT weight (as the CPU multiplies
    /// them), the self-loop of every node, the loss weight of every node.
    entry_w: DeviceVec<f32>,
    self_loop: DeviceVec<f32>,
    node_norm: DeviceVec<f32>,
    labels: DeviceVec<i32>,
    mask_bits: DeviceVec<u8>,
    /// Sparse node features (`None`: dense ones, gathered from the model's resident copy).
    features: Option<DeviceFeatures>,
    /// The most nodes and entries a batch can have.
    max_nodes: usize,
    max_entries: usize,
    // Scratch of the sampling kernels (used in stream order, one batch at a time).
    marks: DeviceVec<u32>,
    local: DeviceVec<u32>,
    counts: DeviceVec<u32>,
    loops: DeviceVec<u32>,
    tile_sums: DeviceVec<u32>,
    tile_offsets: DeviceVec<u32>,
    /// Two batches' outputs: batch i + 1 is made into one while batch i, in the other, is bound
    /// and trained on.
    sets: [BatchSet; 2],
    next_set: usize,
}

/// One batch as the sampling kernels leave it, and its sizes on their way to the host.
struct BatchSet {
    nodes: DeviceVec<u32>,
    batch_ptr: DeviceVec<u32>,
    cols: DeviceVec<u32>,
    values: DeviceVec<f32>,
    entry_rows: DeviceVec<u32>,
    t_values: DeviceVec<f32>,
    t_of: DeviceVec<u32>,
    features: Option<FeatureSet>,
    sizes: Sizes,
}

impl BatchSet {
    fn new(gpu: &Arc<Gpu>, max_nodes: usize, max_entries: usize, features: Option<&DeviceFeatures>) -> Result<Self> {
        Ok(BatchSet {
            nodes: DeviceVec::zeros(gpu, max_nodes)?,
            batch_ptr: DeviceVec::zeros(gpu, max_nodes + 1)?,
            cols: DeviceVec::zeros(gpu, max_entries)?,
            values: DeviceVec::zeros(gpu, max_entries)?,
            entry_rows: DeviceVec::zeros(gpu, max_entries)?,
            t_values: DeviceVec::zeros(gpu, max_entries)?,
            t_of: DeviceVec::zeros(gpu, max_entries)?,
            features: features.map(|f| f.set(gpu)).transpose()?,
            sizes: Sizes::new(gpu)?,
        })
    }
}

impl DeviceSaint {
    /// The device copy of `sampler` (normalised) with `aggregation` (the model's) and the node
    /// data's labels and train bits; fails with the reason where [`unsupported`] says so.
    /// With `sparse_features`, the node data's sparse features go along (each batch gets its rows
    /// and their transpose); else the batches' dense rows are gathered from the model's
    /// resident features.
    pub fn new(
        gpu: &Arc<Gpu>,
        sampler: &SaintSampler,
        aggregation: Option<&Aggregation>,
        data: &NodeData,
        sparse_features: bool,
    ) -> Result<Self> {
        if let Some(why) = unsupported(sampler, aggregation) {
            return Err(Error::Unsupported(format!("sampling on the GPU: {why}; use --sample-on cpu")));
        }
        let (g, norm, agg) = (sampler.graph(), sampler.norm().expect("checked"), aggregation.expect("checked"));
        let n = g.n_rows();
        if data.labels.len() != n || data.mask_bits.len() != n {
            return Err(Error::Shape(format!(
                "sampling on the GPU: {} labels and {} masks for {n} nodes",
                data.labels.len(),
                data.mask_bits.len()
            )));
        }
        let (kind, draws, walk_length, max_drawn) = match sampler.config().kind {
            SaintKind::Node { budget } => (SAINT_KIND_NODE, budget, 0, budget),
            SaintKind::Edge { budget } => (SAINT_KIND_EDGE, budget, 0, budget.saturating_mul(2)),
            SaintKind::RandomWalk { roots, walk_length } => (SAINT_KIND_WALK, roots, walk_length, roots.saturating_mul(walk_length + 1)),
        };
        let too_big = |what: &str, x: usize| Error::Unsupported(format!("sampling on the GPU: {what} {x} is past 2^31"));
        let draws = u32::try_from(draws).ok().filter(|&d| d <= i32::MAX as u32).ok_or_else(|| too_big("batch size", draws))?;
        let walk_length = u32::try_from(walk_length).map_err(|_| too_big("walk length", walk_length))?;
        let max_nodes = max_drawn.min(n).max(1);
        // A batch's entries: at most its rows' full lengths, plus a self-loop each.
        let max_entries = (longest_rows(g, max_nodes) + max_nodes).max(1);
        if max_entries > i32::MAX as usize {
            return Err(too_big("the largest batch's entries", max_entries));
        }
        let (entry, self_loop) = agg.parts();
        let entry_w: Vec<f32> = entry.iter().zip(&norm.edge_norm).map(|(&a, &w)| a * w).collect();
        let alias = match sampler.edge_draws() {
            Some(d) => {
                let (prob, alias) = d.table().parts();
                Some((DeviceVec::upload(gpu, prob)?, DeviceVec::upload(gpu, alias)?))
            }
            None => None,
        };
        let features = match (&data.features, sparse_features) {
            (HostFeatures::Sparse(x), true) => Some(DeviceFeatures::new(gpu, x, max_nodes)?),
            (HostFeatures::Dense(_), true) => {
                return Err(Error::Unsupported("sampling on the GPU: sparse features asked for, the node data's are dense".into()));
            }
            (_, false) => None,
        };
        let tiles = (n.max(max_nodes) + 1).div_ceil(SCAN_TILE as usize);
        Ok(DeviceSaint {
            gpu: gpu.clone(),
            kind,
            draws,
            walk_length,
            seed: sampler.config().seed,
            n_nodes: n,
            to_train: n as f64 / data.n_train.max(1) as f64,
            row_ptr: DeviceVec::upload(gpu, g.row_ptr())?,
            col_idx: DeviceVec::upload(gpu, if g.nnz() == 0 { &[0] } else { g.col_idx() })?,
            alias,
            entry_w: DeviceVec::upload(gpu, if entry_w.is_empty() { &[0.0] } else { &entry_w })?,
            self_loop: DeviceVec::upload(gpu, self_loop)?,
            node_norm: DeviceVec::upload(gpu, &norm.node_norm)?,
            labels: DeviceVec::upload(gpu, &data.labels)?,
            mask_bits: DeviceVec::upload(gpu, &data.mask_bits)?,
            max_nodes,
            max_entries,
            marks: DeviceVec::zeros(gpu, n)?,
            local: DeviceVec::zeros(gpu, n + 1)?,
            counts: DeviceVec::zeros(gpu, max_nodes)?,
            loops: DeviceVec::zeros(gpu, max_nodes)?,
            tile_sums: DeviceVec::zeros(gpu, tiles)?,
            tile_offsets: DeviceVec::zeros(gpu, tiles + 1)?,
            sets: [
                BatchSet::new(gpu, max_nodes, max_entries, features.as_ref())?,
                BatchSet::new(gpu, max_nodes, max_entries, features.as_ref())?,
            ],
            features,
            next_set: 0,
        })
    }

    /// The last batch, downloaded (tests and inspection).
    pub fn download(&self, b: &DeviceBatch) -> Result<HostBatch> {
        let (g, set) = (&self.gpu, &self.sets[b.set]);
        let take = |v: &DeviceVec<u32>, k: usize| -> Result<Vec<u32>> { Ok(v.download(g)?[..k].to_vec()) };
        let nodes = take(&set.nodes, b.n)?;
        let row_ptr = take(&set.batch_ptr, b.n + 1)?;
        let cols = take(&set.cols, b.nnz)?;
        let values = set.values.download(g)?[..b.nnz].to_vec();
        let s = Csr::new(b.n, b.n, row_ptr, cols, values)?;
        let features = match (&self.features, &set.features) {
            (Some(f), Some(fs)) => Some(f.download(g, fs, b.n, b.feature_nnz)?),
            _ => None,
        };
        Ok(HostBatch { nodes, s, t_values: set.t_values.download(g)?[..b.nnz].to_vec(), t_of: take(&set.t_of, b.nnz)?, features })
    }
}

impl DeviceBatches for DeviceSaint {
    fn enqueue(&mut self, epoch: u32, i: u32) -> Result<Pending> {
        let gpu = self.gpu.clone();
        let g = &gpu;
        let set = self.next_set;
        self.next_set ^= 1;
        let out = &mut self.sets[set];
        g.stream().memset_zeros(out.sizes.device.slice_mut()).map_err(|e| Error::cuda("memset", e))?;
        let key = Stream::new(self.seed, epoch, i).key();
        let draw = SaintDrawArgs {
            kind: self.kind,
            draws: self.draws,
            walk_length: self.walk_length,
            key,
            n_nodes: self.n_nodes as u32,
            row_ptr: self.row_ptr.arg(g),
            col_idx: self.col_idx.arg(g),
            alias_prob: self.alias.as_ref().map_or(Ptr::null(), |a| a.0.arg(g)),
            alias: self.alias.as_ref().map_or(Ptr::null(), |a| a.1.arg(g)),
            marks: self.marks.arg_mut(g),
        };
        // SAFETY: the graph's arrays as uploaded (n + 1 row pointers, nnz columns), the alias
        // table of nnz slots for the edge kind, one mark per node; draws land on node ids.
        unsafe { kernels::saint_draw.launch(g, linear(g, self.draws as usize), &draw)? };
        scan(g, (&self.tile_sums, &self.tile_offsets), self.n_nodes, self.marks.ptr(g), self.local.ptr(g), out.nodes.ptr(g))?;
        let n_batch = Ptr::new(self.local.ptr(g) + 4 * self.n_nodes as u64);
        let rows = SaintRowsArgs {
            rows: self.max_nodes as u32,
            n_batch,
            nodes: out.nodes.arg(g),
            row_ptr: self.row_ptr.arg(g),
            col_idx: self.col_idx.arg(g),
            marks: self.marks.arg(g),
            local: self.local.arg(g),
            entry_w: self.entry_w.arg(g),
            self_loop: self.self_loop.arg(g),
            mask_bits: self.mask_bits.arg(g),
            train_bit: TRAIN_BIT as u32,
            counts: self.counts.arg_mut(g),
            loops: self.loops.arg_mut(g),
            totals: out.sizes.device.arg_mut(g),
            out_ptr: out.batch_ptr.arg(g),
            out_cols: out.cols.arg_mut(g),
            out_values: out.values.arg_mut(g),
            out_rows: out.entry_rows.arg_mut(g),
        };
        let warps = warp_per_item(g, self.max_nodes);
        // SAFETY: the batch has at most max_nodes nodes (the draws' bound, clamped to N), each a
        // marked node with its local id; counts and loops hold max_nodes entries.
        unsafe { kernels::saint_rows_count.launch(g, warps, &rows)? };
        scan(g, (&self.tile_sums, &self.tile_offsets), self.max_nodes, self.counts.ptr(g), out.batch_ptr.ptr(g), 0)?;
        // SAFETY: the row pointers just scanned; a batch has at most max_entries entries (its
        // rows' full lengths plus a loop each), the size of every entry buffer.
        unsafe { kernels::saint_rows_fill.launch(g, warps, &rows)? };
        let t = SaintTransposeArgs {
            rows: self.max_nodes as u32,
            row_ptr: out.batch_ptr.arg(g),
            cols: out.cols.arg(g),
            entry_rows: out.entry_rows.arg(g),
            values: out.values.arg(g),
            t_values: out.t_values.arg_mut(g),
            t_of: out.t_of.arg_mut(g),
        };
        // SAFETY: as the fill; every entry's mirror exists (symmetric pattern, checked at setup).
        unsafe { kernels::saint_transpose.launch(g, linear(g, self.max_entries), &t)? };
        if let (Some(f), Some(fs)) = (&mut self.features, &mut out.features) {
            let batch = BatchNodes { n_batch, nodes: out.nodes.arg(g), marks: self.marks.arg(g), local: self.local.arg(g) };
            f.enqueue(g, &batch, fs)?;
        }
        let fx_ptr = out.features.as_ref().map_or(Ptr::null(), |f| f.fx_ptr.arg(g));
        let finish = SaintFinishArgs {
            n_batch,
            nodes: out.nodes.arg(g),
            marks: self.marks.arg_mut(g),
            rows: self.max_nodes as u32,
            row_ptr: out.batch_ptr.arg(g),
            fx_ptr,
            totals: out.sizes.device.arg_mut(g),
        };
        // SAFETY: the batch's nodes are node ids; totals holds 4.
        unsafe { kernels::saint_finish.launch(g, linear(g, self.max_nodes), &finish)? };
        out.sizes.send(g)?;
        Ok(Pending { set })
    }

    fn wait(&mut self, p: Pending) -> Result<DeviceBatch> {
        let batch = self.sets[p.set].sizes.read(p.set)?;
        check_bounds(&batch, (self.max_nodes, self.max_entries), self.features.as_ref(), "GraphSAINT")?;
        Ok(batch)
    }

    fn bind(&self, m: &mut BoundModel<CudaBackend>, b: &DeviceBatch) -> Result<()> {
        let cap = m.capacity();
        if !cap.holds_sizes(b.n, b.nnz, b.feature_nnz) {
            return Err(Error::Shape(format!("a device batch of {} nodes and {} entries into a model of {cap:?}", b.n, b.nnz)));
        }
        let rows = m.rows();
        let (g, set) = (&self.gpu, &self.sets[b.set]);
        let mut parts = m.parts()?;
        let matrix = BatchMatrix {
            row_ptr: &set.batch_ptr,
            cols: &set.cols,
            entry_rows: &set.entry_rows,
            values: &set.values,
            t_pattern: None,
            t_values: &set.t_values,
            t_of: &set.t_of,
            nodes: &set.nodes,
        };
        let loss = BatchLoss::Saint { mask_bits: &self.mask_bits, node_norm: &self.node_norm, to_train: self.to_train };
        bind_matrix(g, &mut parts, rows, b, matrix, &self.labels, loss)?;
        let sparse = self.features.as_ref().zip(set.features.as_ref());
        bind_input(g, (parts.input, parts.resident), rows, b, &set.nodes, self.n_nodes, sparse)
    }
}
