//! A batch translated on the sampler's worker thread into what a rebound model copies
//! ([`super::bound`]): the model's matrix (the GraphSAINT-weighted aggregation, or the
//! subgraph normalised as the model normalises a full graph) with its transpose, and sparse
//! features with theirs. All the CPU work of a batch happens here, overlapped with the step;
//! the step thread only pads and copies.

use super::batch::TrainBatch;
use super::bound::Capacity;
use crate::error::{Error, Result};
use crate::nn::input::HostFeatures;
use crate::nn::models;
// Padding lives with the graph (the graph task pads its batches the same way).
pub use crate::graph::pad::{WithTranspose, pad, pad_with_transpose};
use crate::ops::backend::bind::PaddedPattern;
use crate::tensor::Matrix;

pub enum PreparedFeatures {
    Dense(Matrix),
    Sparse(WithTranspose),
}

impl PreparedFeatures {
    pub fn cols(&self) -> usize {
        match self {
            PreparedFeatures::Dense(m) => m.cols,
            PreparedFeatures::Sparse(x) => x.s.n_cols(),
        }
    }
    /// Nonzeros of sparse features (0 for dense ones).
    pub fn nnz(&self) -> usize {
        match self {
            PreparedFeatures::Dense(_) => 0,
            PreparedFeatures::Sparse(x) => x.s.nnz(),
        }
    }
}

/// One batch, ready to be copied into a model built at a capacity.
pub struct PreparedBatch {
    /// Nodes of the batch (local ids 0..n).
    pub n: usize,
    /// Their global ids (local id = position): what a rebound model gathers resident feature
    /// rows by.
    pub nodes: Vec<u32>,
    /// The matrix the model multiplies (n x n; layer 0's when `later` is not empty).
    pub matrix: WithTranspose,
    /// The matrices of layers 1.. (per-layer neighbour blocks; empty: one matrix for all).
    pub later: Vec<WithTranspose>,
    pub features: PreparedFeatures,
    pub labels: Vec<i32>,
    pub mask_bits: Vec<u8>,
    pub loss_scale: Option<Vec<f32>>,
    pub loss_nodes: usize,
    pub sampled_edges: usize,
    /// The batch padded to a rebound model's capacity, where the worker knew it
    /// ([`PreparedBatch::pad_for`]); the step thread pads it itself otherwise.
    pub padded: Option<PaddedBatch>,
}

/// A batch padded to a capacity: exactly what a rebound model copies.
pub struct PaddedBatch {
    pub capacity: Capacity,
    pub matrix: PaddedPattern,
    pub later: Vec<PaddedPattern>,
    /// Sparse features (`None`: dense ones, copied row by row as they are).
    pub features: Option<PaddedPattern>,
    pub labels: Vec<i32>,
    pub mask_bits: Vec<u8>,
    /// w_v / n per row: the loss weight (GraphSAINT's, else 1) over the loss nodes; 0 on padding.
    pub weights: Vec<f32>,
}

impl PaddedBatch {
    /// `p` padded to `capacity` (which must hold it).
    pub fn new(p: &PreparedBatch, capacity: Capacity) -> Result<Self> {
        let rows = capacity.nodes + 1;
        let matrix = padded_pattern(&p.matrix, rows, rows, capacity.edges)?;
        let later = p.later.iter().map(|m| padded_pattern(m, rows, rows, capacity.edges)).collect::<Result<Vec<_>>>()?;
        let features = match &p.features {
            PreparedFeatures::Dense(_) => None,
            PreparedFeatures::Sparse(w) => Some(padded_pattern(w, rows, w.s.n_cols(), capacity.feature_nnz)?),
        };
        let mut labels = p.labels.clone();
        labels.resize(rows, 0);
        let mut mask_bits = p.mask_bits.clone();
        mask_bits.resize(rows, 0);
        // w_v / n in f64, rounded once (for w = 1: the same f32 as the 1 / n the cross-entropy
        // would take, so an unweighted batch trains exactly as on a model built for it).
        let n_loss = p.loss_nodes.max(1) as f64;
        let mut weights: Vec<f32> = match &p.loss_scale {
            Some(w) => w.iter().map(|&x| (x as f64 / n_loss) as f32).collect(),
            None => vec![(1.0 / n_loss) as f32; p.n],
        };
        weights.resize(rows, 0.0);
        Ok(PaddedBatch { capacity, matrix, later, features, labels, mask_bits, weights })
    }
}

impl PreparedBatch {
    /// The most nonzeros of its matrices (what a rebound model's matrices must hold).
    pub fn matrix_nnz(&self) -> usize {
        self.later.iter().map(|m| m.s.nnz()).fold(self.matrix.s.nnz(), usize::max)
    }

    /// Pads the batch for a model of `capacity` now (on the worker thread), if it fits.
    pub fn pad_for(&mut self, capacity: Capacity) -> Result<()> {
        if capacity.holds(self) {
            self.padded = Some(PaddedBatch::new(self, capacity)?);
        }
        Ok(())
    }
}

fn padded_pattern(w: &WithTranspose, rows: usize, cols: usize, nnz: usize) -> Result<PaddedPattern> {
    PaddedPattern::new(w, rows, cols, nnz)
}

impl PreparedBatch {
    /// `batch` for `model` (a model whose matrix is fixed: gcn, sage, gin).
    pub fn new(batch: TrainBatch, model: &str) -> Result<Self> {
        let loss_nodes = batch.loss_nodes();
        let matrix = match batch.adjacency {
            Some(adj) => adj,
            None if models::model_info(model)?.aggregation.is_some() => models::model_graph(model, &batch.graph)?,
            None => return Err(Error::Unsupported(format!("{model}: no fixed matrix to rebind (build a model per batch)"))),
        };
        Ok(PreparedBatch {
            n: batch.nodes.len(),
            nodes: batch.nodes,
            matrix: WithTranspose::new(matrix),
            later: batch.later.into_iter().map(WithTranspose::new).collect(),
            features: match batch.features {
                HostFeatures::Dense(m) => PreparedFeatures::Dense(m),
                HostFeatures::Sparse(c) => PreparedFeatures::Sparse(WithTranspose::new(c)),
            },
            labels: batch.labels,
            mask_bits: batch.mask_bits,
            loss_scale: batch.loss_scale,
            loss_nodes,
            sampled_edges: batch.sampled_edges,
            padded: None,
        })
    }
}
