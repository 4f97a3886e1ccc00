//! A training batch as a model takes it: a square subgraph on local ids with the node data
//! gathered for it, made on a sampler's worker thread (host memory only; the step uploads it).
//!
//! - GraphSAINT: the induced subgraph; the loss over its train nodes, weighted by the
//!   normalisation when there is one; the aggregation weights folded into the model's
//!   full-graph normalisation ([`Aggregation`]) for models with a fixed aggregation.
//! - Neighbour sampling, for models with a fixed aggregation ([`TrainBatch::from_blocks_normalized`]):
//!   one matrix per layer, layer l aggregating block l's edges into block l's destination
//!   nodes only (as PyG's `trim_to_layer` and DGL's blocks), each with the full graph's
//!   normalisation ([`Aggregation::block_matrix`]); the loss on the seed nodes only. Every
//!   matrix is n x n over the batch's nodes with the rows past the block's destinations empty:
//!   the outputs there are never read (layer l + 1's columns and the loss rows are a prefix of
//!   layer l's destinations), so their gradients are zero.
//! - Neighbour sampling as before ([`TrainBatch::from_blocks`]; attention models, BatchNorm
//!   with the union below, `--neighbor-union`, the GPU sampler's union batches): the union of
//!   every layer's sampled edges, which PyG's `NeighborLoader` hands a model that does not call
//!   `trim_to_layer`: every layer runs on the whole sampled subgraph.

use std::sync::Arc;

use super::aggregation::Aggregation;
use super::neighbor::{Blocks, NeighborSampler};
use super::saint::{Batch, SaintSampler};
use crate::error::Result;
use crate::graph::Csr;
use crate::nn::input::HostFeatures;
use crate::ops::backend::TRAIN_BIT;
use crate::tensor::Matrix;

/// The node data of the whole graph, shared by the worker threads.
pub struct NodeData {
    pub features: HostFeatures,
    pub labels: Vec<i32>,
    pub mask_bits: Vec<u8>,
    /// Train nodes of the whole graph (GraphSAINT's loss weights estimate the mean over them).
    pub n_train: usize,
}

/// One batch, ready to build a model on.
pub struct TrainBatch {
    /// Global ids of the batch's nodes; local id = position.
    pub nodes: Vec<u32>,
    /// The subgraph on local ids, values 1: what a model normalises itself.
    pub graph: Csr,
    /// The aggregation with the GraphSAINT weights already in (models with a fixed aggregation,
    /// normalised GraphSAINT batches), or neighbour sampling's with the full graph's
    /// normalisation (layer 0's when `later` is not empty); `None`: the model normalises
    /// `graph` itself.
    pub adjacency: Option<Csr>,
    /// The matrices of layers 1.. (neighbour sampling on per-layer blocks; empty: every layer
    /// multiplies `adjacency`).
    pub later: Vec<Csr>,
    pub features: HostFeatures,
    pub labels: Vec<i32>,
    /// Only [`TRAIN_BIT`], on the nodes the loss covers.
    pub mask_bits: Vec<u8>,
    /// Per node, the weight of its loss term relative to the batch mean (`None`: the plain mean
    /// over the loss nodes).
    pub loss_scale: Option<Vec<f32>>,
    /// Sampled edges (all layers' for neighbour sampling).
    pub sampled_edges: usize,
}

impl TrainBatch {
    /// Nodes the loss covers.
    pub fn loss_nodes(&self) -> usize {
        self.mask_bits.iter().filter(|&&m| m & TRAIN_BIT != 0).count()
    }

    /// A GraphSAINT batch: loss on its train nodes. Normalised (`b.normalized`), the loss is
    /// `Σ_train w_v ℓ_v` with `w_v = num_samples / C_v / N_train` (GraphSAINT's own code divides
    /// by the train nodes, PyG's example by all nodes: with N_train it estimates the full-graph
    /// mean train loss, so the full-graph learning rate and weight decay carry over).
    pub fn from_saint(b: Batch, data: &NodeData, n_all: usize, agg: Option<&Aggregation>) -> Result<Self> {
        let mask_bits: Vec<u8> = b.nodes.iter().map(|&v| data.mask_bits[v as usize] & TRAIN_BIT).collect();
        let n_loss = mask_bits.iter().filter(|&&m| m != 0).count();
        let loss_scale = b.normalized.then(|| {
            // w_v / (1 / n_loss): the cross-entropy op's mean is scaled back to the weighted sum.
            let to_train = n_all as f64 / data.n_train.max(1) as f64;
            b.loss_weight.iter().map(|&w| (w as f64 * to_train * n_loss as f64) as f32).collect()
        });
        let adjacency = match (agg, b.normalized) {
            (Some(agg), true) => Some(agg.batch_adjacency(&b.graph, &b.nodes, &b.edge_ids)?),
            _ => None,
        };
        let sampled_edges = b.graph.nnz();
        let graph = crate::graph::ops::pattern(&b.graph);
        Ok(TrainBatch {
            features: gather_rows(&data.features, &b.nodes)?,
            labels: b.nodes.iter().map(|&v| data.labels[v as usize]).collect(),
            mask_bits,
            loss_scale,
            adjacency,
            later: Vec::new(),
            graph,
            nodes: b.nodes,
            sampled_edges,
        })
    }

    /// A neighbour-sampling batch: the union of the blocks' edges over the input nodes, the loss
    /// on the output (seed) nodes; the model normalises the union itself.
    pub fn from_blocks(b: Blocks, data: &NodeData) -> Result<Self> {
        let (graph, _) = union(&b)?;
        Self::neighbor(b, data, graph, None, Vec::new())
    }

    /// A neighbour-sampling batch with the full graph's normalisation `agg` of `full` (the
    /// sampler's graph): one matrix per block when `per_layer` (layer l on block l), else every
    /// layer on the union of the blocks (see the module docs).
    pub fn from_blocks_normalized(b: Blocks, data: &NodeData, agg: &Aggregation, full: &Csr, per_layer: bool) -> Result<Self> {
        let n = b.input_nodes.len();
        let (graph, edge_ids) = union(&b)?;
        let mut mats = Vec::with_capacity(b.layers.len());
        if per_layer {
            for block in &b.layers {
                mats.push(agg.block_matrix(full, &block.graph, &block.edge_ids, &b.input_nodes, n)?);
            }
        } else {
            mats.push(agg.block_matrix(full, &graph, &edge_ids, &b.input_nodes, n)?);
        }
        let mut mats = mats.into_iter();
        let first = mats.next();
        Self::neighbor(b, data, graph, first, mats.collect())
    }

    fn neighbor(b: Blocks, data: &NodeData, graph: Csr, adjacency: Option<Csr>, later: Vec<Csr>) -> Result<Self> {
        let n = b.input_nodes.len();
        let mut mask_bits = vec![0u8; n];
        mask_bits[..b.output_nodes.len()].fill(TRAIN_BIT);
        Ok(TrainBatch {
            features: gather_rows(&data.features, &b.input_nodes)?,
            labels: b.input_nodes.iter().map(|&v| data.labels[v as usize]).collect(),
            mask_bits,
            loss_scale: None,
            adjacency,
            later,
            sampled_edges: b.n_edges(),
            graph,
            nodes: b.input_nodes,
        })
    }
}

/// The union of the blocks' edges over the input nodes (n x n, values 1), with each entry's
/// position in the full graph (an edge drawn for several layers is one edge of the union).
fn union(b: &Blocks) -> Result<(Csr, Vec<u32>)> {
    let n = b.input_nodes.len();
    let mut t: Vec<(u32, u32, u32)> = Vec::with_capacity(b.n_edges());
    for block in &b.layers {
        let g = &block.graph;
        for r in 0..g.n_rows() {
            let range = g.row_range(r);
            t.extend(g.col_idx()[range.clone()].iter().zip(&block.edge_ids[range]).map(|(&c, &e)| (r as u32, c, e)));
        }
    }
    t.sort_unstable_by_key(|&(r, c, _)| (r, c));
    t.dedup_by_key(|&mut (r, c, _)| (r, c));
    let mut row_ptr = vec![0u32; n + 1];
    for &(r, _, _) in &t {
        row_ptr[r as usize + 1] += 1;
    }
    for r in 0..n {
        row_ptr[r + 1] += row_ptr[r];
    }
    let cols = t.iter().map(|x| x.1).collect();
    let edge_ids = t.iter().map(|x| x.2).collect();
    Ok((Csr::new(n, n, row_ptr, cols, vec![1.0; t.len()])?, edge_ids))
}

/// Rows `nodes` of the features, in that order.
pub fn gather_rows(x: &HostFeatures, nodes: &[u32]) -> Result<HostFeatures> {
    Ok(match x {
        HostFeatures::Dense(m) => {
            let mut data = Vec::with_capacity(nodes.len() * m.cols);
            for &v in nodes {
                data.extend_from_slice(m.row(v as usize));
            }
            HostFeatures::Dense(Matrix::from_vec(nodes.len(), m.cols, data)?)
        }
        HostFeatures::Sparse(c) => {
            let mut row_ptr = Vec::with_capacity(nodes.len() + 1);
            row_ptr.push(0u32);
            let (mut cols, mut vals) = (Vec::new(), Vec::new());
            for &v in nodes {
                let r = c.row_range(v as usize);
                cols.extend_from_slice(&c.col_idx()[r.clone()]);
                vals.extend_from_slice(&c.values()[r]);
                row_ptr.push(cols.len() as u32);
            }
            HostFeatures::Sparse(Csr::new(nodes.len(), c.n_cols(), row_ptr, cols, vals)?)
        }
    })
}

/// Which sampler makes the batches.
pub enum BatchSource {
    Saint {
        sampler: Arc<SaintSampler>,
        aggregation: Option<Aggregation>,
    },
    /// Neighbour sampling, every layer on the union subgraph, normalised by the model.
    Neighbor(Arc<NeighborSampler>),
    /// Neighbour sampling with the full graph's normalisation, per-layer blocks when `per_layer`
    /// ([`TrainBatch::from_blocks_normalized`]).
    NeighborNormalized {
        sampler: Arc<NeighborSampler>,
        aggregation: Aggregation,
        per_layer: bool,
    },
}

impl BatchSource {
    /// Batch `i` of `epoch` (a pure function of the sampler's seed, `epoch` and `i`).
    pub fn make(&self, data: &NodeData, n_all: usize, epoch: u32, i: u32) -> Result<TrainBatch> {
        match self {
            BatchSource::Saint { sampler, aggregation } => {
                TrainBatch::from_saint(sampler.batch(epoch, i), data, n_all, aggregation.as_ref())
            }
            BatchSource::Neighbor(s) => TrainBatch::from_blocks(s.batch(epoch, i), data),
            BatchSource::NeighborNormalized { sampler, aggregation, per_layer } => {
                TrainBatch::from_blocks_normalized(sampler.batch(epoch, i), data, aggregation, sampler.graph(), *per_layer)
            }
        }
    }
}
