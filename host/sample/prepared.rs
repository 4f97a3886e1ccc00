//! A batch translated on the sampler's worker thread into what a rebound model copies
//! ([`super::bound`]): the model's matrix (the GraphSAINT-weighted aggregation, or the
//! subgraph normalised as the model normalises a full graph) with its transpose, and sparse
//! features with theirs. All the CPU work of a batch happens here, overlapped with the step;
//! the step thread only pads and copies.

use super::batch::TrainBatch;
use super::bound::Capacity;
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::ops::transpose_with_map;
use crate::nn::input::HostFeatures;
use crate::nn::models;
use crate::ops::backend::bind::{PaddedPattern, coo_rows};
use crate::tensor::Matrix;

/// A pattern with its transpose and, for every nonzero of the transpose, the nonzero of the
/// pattern holding the same edge.
pub struct WithTranspose {
    pub s: Csr,
    pub t: Csr,
    pub t_of: Vec<u32>,
}

impl WithTranspose {
    pub fn new(s: Csr) -> Self {
        let (t, t_of) = transpose_with_map(&s);
        WithTranspose { s, t, t_of }
    }
}

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
    let (s, t, t_of) = pad_with_transpose(w, rows, cols, nnz)?;
    let (s_rows, t_rows) = (coo_rows(&s), coo_rows(&t));
    Ok(PaddedPattern { s, t, t_of, s_rows, t_rows })
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

/// `a` padded to `rows x cols` with `nnz` nonzeros: its rows first, then empty rows, and the
/// missing nonzeros as zeros at (rows - 1, cols - 1) appended to the last row (which may be one
/// of `a`'s own when it has all the rows). Placing the padding last in both a pattern and its
/// transpose keeps every real nonzero at its own index, so per-edge keys (dropout masks) and
/// per-row sums are the unpadded batch's; zero values make the padding contribute nothing.
pub fn pad(a: &Csr, rows: usize, cols: usize, nnz: usize) -> Result<Csr> {
    if a.n_rows() > rows || a.n_cols() > cols || a.nnz() > nnz || rows == 0 || cols == 0 {
        return Err(Error::Shape(format!(
            "padding a {}x{} batch matrix of {} nonzeros to {rows}x{cols} with {nnz}",
            a.n_rows(),
            a.n_cols(),
            a.nnz()
        )));
    }
    let extra = nnz - a.nnz();
    let mut row_ptr = Vec::with_capacity(rows + 1);
    row_ptr.extend_from_slice(a.row_ptr());
    row_ptr.resize(rows + 1, a.nnz() as u32);
    row_ptr[rows] = nnz as u32;
    let mut col_idx = Vec::with_capacity(nnz);
    col_idx.extend_from_slice(a.col_idx());
    col_idx.resize(nnz, (cols - 1) as u32);
    let mut values = Vec::with_capacity(nnz);
    values.extend_from_slice(a.values());
    values.resize(nnz, 0.0);
    debug_assert_eq!(col_idx.len(), a.nnz() + extra);
    Csr::new(rows, cols, row_ptr, col_idx, values)
}

/// [`pad`] of a pattern and its transpose, with the transpose map extended over the padding
/// (the k-th padding nonzero of the transpose is the k-th of the pattern).
pub fn pad_with_transpose(w: &WithTranspose, rows: usize, cols: usize, nnz: usize) -> Result<(Csr, Csr, Vec<u32>)> {
    let s = pad(&w.s, rows, cols, nnz)?;
    let t = pad(&w.t, cols, rows, nnz)?;
    let mut t_of = Vec::with_capacity(nnz);
    t_of.extend_from_slice(&w.t_of);
    t_of.extend(w.s.nnz() as u32..nnz as u32);
    Ok((s, t, t_of))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_keeps_real_nonzeros_in_place_and_the_transpose_consistent() {
        // 2 x 3 with an empty last row of the transpose's view.
        let a = Csr::from_triplets(2, 3, &[(0, 1, 2.0), (1, 0, 3.0), (1, 2, 4.0)]).unwrap();
        let w = WithTranspose::new(a.clone());
        let (s, t, t_of) = pad_with_transpose(&w, 4, 5, 6).unwrap();
        assert_eq!((s.n_rows(), s.n_cols(), s.nnz()), (4, 5, 6));
        assert_eq!(&s.col_idx()[..3], a.col_idx());
        assert_eq!(s.row_ptr(), &[0, 1, 3, 3, 6]);
        assert_eq!(&s.col_idx()[3..], &[4, 4, 4]);
        assert_eq!(&s.values()[3..], &[0.0, 0.0, 0.0]);
        // The transpose is 5 x 4; its padding sits in its last row, at the pattern's last row.
        assert_eq!((t.n_rows(), t.n_cols()), (5, 4));
        assert_eq!(t.row_ptr()[5], 6);
        assert_eq!(&t.col_idx()[3..], &[3, 3, 3]);
        // Every nonzero of the transpose maps to the pattern's nonzero with the same edge.
        for r in 0..t.n_rows() {
            for e in t.row_range(r) {
                let se = t_of[e] as usize;
                let srow = s.row_ptr().windows(2).position(|w| (w[0] as usize..w[1] as usize).contains(&se)).unwrap();
                assert_eq!((srow as u32, s.col_idx()[se]), (t.col_idx()[e], r as u32));
                assert_eq!(s.values()[se], t.values()[e]);
            }
        }
    }

    #[test]
    fn padding_a_full_last_row_appends_after_its_own_nonzeros() {
        let a = Csr::from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 5.0)]).unwrap();
        let s = pad(&a, 2, 2, 4).unwrap();
        assert_eq!(s.row_ptr(), &[0, 1, 4]);
        assert_eq!(s.col_idx(), &[0, 1, 1, 1]);
        assert_eq!(s.values(), &[1.0, 5.0, 0.0, 0.0]);
        assert!(pad(&a, 1, 2, 4).is_err(), "fewer rows than the batch is refused");
        assert!(pad(&a, 2, 2, 1).is_err(), "fewer nonzeros than the batch is refused");
    }
}
