//! Node features as the first layer reads them, with the input dropout PyG's examples apply
//! (`x = F.dropout(x, p, training)` before the first layer). Dense features are dropped out
//! element by element; sparse (multi-hot) features keep their pattern and drop their nonzero
//! values, which is the same thing without touching the zeros. Where the backend fuses the
//! input dropout into the first product (`DropoutGemmOp::fuses_input_dropout`: the GPU), dense
//! features are held as `DenseFused`: no dropped copy, no mask, the first layer's operand is
//! `Operand::Dropped` and both of its products regenerate the mask.
//!
//! A graph without node features may instead learn its input: `Learnable`, an n x d table
//! trained with the model (OGB's `torch.nn.Embedding` baselines, see [`crate::nn::embedding`]).

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::model::ModelConfig;
use crate::nn::operand::Operand;
use crate::nn::param::Param;
use crate::ops::backend::Side;
use crate::ops::nn::dropout::DropKey;
use crate::ops::nn::op_set;
use crate::tensor::Matrix;

op_set!(
    /// What the input features need: uploads, the input dropout and its fused products.
    pub trait InputOps:
    crate::nn::operand::OperandOps,
    crate::ops::nn::dropout::DropoutOp,
    crate::ops::nn::transpose_edges::TransposeEdgesOp,
    crate::nn::param::ParamOps,
);

/// `ids`: the original ids the input dropout keys the rows (dense) or nonzeros (sparse) by, on
/// one part of a partitioned graph ([`InputFeatures::keyed_by`]); `None` on one device.
pub enum InputFeatures<B: crate::ops::nn::dropout_gemm::DropoutGemmOp> {
    /// `dropped`: x after the input dropout, which the first layer's products read; no mask (the
    /// features need no gradient). `half`: x stored once more in f16, which the dropout reads
    /// instead where the backend does ([`InputFeatures::with_half_features`]).
    Dense {
        x: B::Mat,
        dropped: B::Mat,
        half: Option<B::Half>,
        ids: Option<B::Ids>,
    },
    /// `seed`: the input dropout's, remembered by `forward` for the backward's `operand`.
    /// `half`: x stored once more in f16, which the products read instead where the backend
    /// does ([`InputFeatures::with_half_features`]); a snapshot of x, so features rewritten per
    /// batch never have one.
    DenseFused {
        x: B::Mat,
        half: Option<B::Half>,
        ids: Option<B::Ids>,
        seed: u64,
    },
    /// Dense features held only in f16 where every first-layer product reads them so, in
    /// training and evaluation ([`InputFeatures::with_half_features`]): the f32 features are
    /// not kept beside them. `dropped`: the unfused input dropout's output (f32, what the
    /// products read in training), `None` where the products fuse it; `seed` as `DenseFused`'s.
    Half {
        x: B::Half,
        dropped: Option<B::Mat>,
        ids: Option<B::Ids>,
        seed: u64,
    },
    Sparse {
        x: B::Graph,
        values: B::Edges,
        values_t: B::Edges,
        dropped: B::Edges,
        dropped_t: B::Edges,
        mask: B::Mask,
        ids: Option<B::Ids>,
    },
    /// A learnable n x d input (one row per node), trained with the model: the first layer
    /// writes dL/dX into its gradient ([`InputFeatures::backward_operand`]) and the optimiser
    /// steps it with the other parameters ([`InputFeatures::params`]). No input dropout: OGB's
    /// embedding baselines drop between layers only.
    Learnable {
        table: Param<B>,
    },
}

/// Node features on the host, before upload.
#[derive(Clone)]
pub enum HostFeatures {
    Dense(Matrix),
    /// An `n x f` CSR whose values are the feature values.
    Sparse(Csr),
}

impl HostFeatures {
    pub fn rows(&self) -> usize {
        match self {
            HostFeatures::Dense(m) => m.rows,
            HostFeatures::Sparse(c) => c.n_rows(),
        }
    }
    pub fn cols(&self) -> usize {
        match self {
            HostFeatures::Dense(m) => m.cols,
            HostFeatures::Sparse(c) => c.n_cols(),
        }
    }
    /// The features as a dense matrix (a copy; sparse duplicates summed).
    pub fn to_dense(&self) -> Matrix {
        match self {
            HostFeatures::Dense(m) => m.clone(),
            HostFeatures::Sparse(c) => {
                let mut m = Matrix::zeros(c.n_rows(), c.n_cols());
                for r in 0..c.n_rows() {
                    for k in c.row_range(r) {
                        m.data[r * c.n_cols() + c.col_idx()[k] as usize] += c.values()[k];
                    }
                }
                m
            }
        }
    }

    /// No negative entry (bag-of-words or multi-hot features, which `normalize_rows` is for).
    pub fn is_nonnegative(&self) -> bool {
        match self {
            HostFeatures::Dense(m) => m.data.iter().all(|&v| v >= 0.0),
            HostFeatures::Sparse(c) => c.values().iter().all(|&v| v >= 0.0),
        }
    }

    /// Scale every row to sum 1 (PyG's `NormalizeFeatures`); all-zero rows stay zero.
    pub fn normalize_rows(&mut self) {
        match self {
            HostFeatures::Dense(m) => {
                let cols = m.cols;
                for row in m.data.chunks_mut(cols.max(1)) {
                    let s: f64 = row.iter().map(|&v| v as f64).sum();
                    if s != 0.0 {
                        row.iter_mut().for_each(|v| *v = (*v as f64 / s) as f32);
                    }
                }
            }
            HostFeatures::Sparse(c) => {
                let mut vals = c.values().to_vec();
                for r in 0..c.n_rows() {
                    let range = c.row_range(r);
                    let s: f64 = vals[range.clone()].iter().map(|&v| v as f64).sum();
                    if s != 0.0 {
                        vals[range].iter_mut().for_each(|v| *v = (*v as f64 / s) as f32);
                    }
                }
                *c = c.clone().with_values(vals).expect("same length");
            }
        }
    }
}

impl<B: InputOps> InputFeatures<B> {
    /// [`InputFeatures::new`] of features the caller gives up: dense ones through
    /// [`Backend::upload_owned`](crate::ops::backend::Backend::upload_owned), so they are held
    /// once (the host copy is freed after the upload, or becomes the CPU backend's).
    /// Fused input dropout where the backend offers it and it pays for `model`'s first layer.
    pub fn from_owned(b: &B, host: HostFeatures, model: &ModelConfig) -> Result<Self> {
        match host {
            HostFeatures::Dense(m) => {
                let (rows, cols) = (m.rows, m.cols);
                let x = b.upload_owned(m)?;
                if b.fused_input_dropout_pays(cols, model.first_product_columns()) && b.fuses_input_dropout(rows, cols) {
                    return Ok(InputFeatures::DenseFused { x, half: None, ids: None, seed: 0 });
                }
                Ok(InputFeatures::Dense { x, dropped: b.matrix(rows, cols)?, half: None, ids: None })
            }
            sparse => Self::new(b, &sparse),
        }
    }

    /// The features as the backend runs them best (fused input dropout where it offers it).
    pub fn new(b: &B, host: &HostFeatures) -> Result<Self> {
        Self::with_fusion(b, host, b.fuses_input_dropout(host.rows(), host.cols()))
    }

    /// The features for `model`: fused input dropout where the backend offers it and it pays
    /// for the model's first layer (`DropoutGemmOp::fused_input_dropout_pays`).
    pub fn for_model(b: &B, host: &HostFeatures, model: &ModelConfig) -> Result<Self> {
        Self::with_fusion(
            b,
            host,
            b.fused_input_dropout_pays(host.cols(), model.first_product_columns()) && b.fuses_input_dropout(host.rows(), host.cols()),
        )
    }

    /// [`InputFeatures::new`] with the choice made by the caller: `fused` dense features keep no
    /// dropped copy (sparse features ignore it). The CPU backend runs both, for the tests.
    pub fn with_fusion(b: &B, host: &HostFeatures, fused: bool) -> Result<Self> {
        Ok(match host {
            HostFeatures::Dense(m) if fused => InputFeatures::DenseFused { x: b.upload(m)?, half: None, ids: None, seed: 0 },
            HostFeatures::Dense(m) => InputFeatures::Dense { x: b.upload(m)?, dropped: b.matrix(m.rows, m.cols)?, half: None, ids: None },
            HostFeatures::Sparse(c) => {
                let x = b.graph(c.clone())?;
                let values = b.graph_values(&x, Side::Forward)?;
                let values_t = b.graph_values(&x, Side::Transposed)?;
                let dropped = b.edges(&x, Side::Forward)?;
                let dropped_t = b.edges(&x, Side::Transposed)?;
                let mask = b.edge_mask(&dropped)?;
                InputFeatures::Sparse { x, values, values_t, dropped, dropped_t, mask, ids: None }
            }
        })
    }

    /// Dense features also stored in f16 where the backend reads them so: fused, by both
    /// first-layer products (`DropoutGemmOp::half_features`: the GPU in f16 precision, outputs
    /// of at most 64 columns); unfused, by the input dropout (`DropoutGemmOp::half_input`: the
    /// GPU in f16 precision). Half the bytes read every step. Only for features that stay fixed
    /// for the whole run (not rebound per batch).
    ///
    /// Where the model drops its input out and every first-layer product then runs on the f16
    /// copy, evaluation too
    /// (`DropoutGemmOp::half_suffices`: the GPU's f16 kernels of at most 64 columns), the f32
    /// features are dropped and the f16 ones are the only copy ([`InputFeatures::Half`]): the
    /// training step reads exactly what it read before; evaluation reads the f16 copy through
    /// the same kernels with p = 0 instead of the f32 features through cuBLAS or the narrow
    /// products (the features rounded to f16, as the step reads them).
    pub fn with_half_features(mut self, b: &B, model: &ModelConfig) -> Result<Self> {
        match &mut self {
            InputFeatures::DenseFused { x, half, .. } => *half = b.half_features(x, model.first_product_columns())?,
            // The unfused input dropout reads the copy (where the model drops its input at all).
            InputFeatures::Dense { x, half, .. } if model.dropout > 0.0 => *half = b.half_input(x)?,
            _ => {}
        }
        // Without input dropout the step reads the f32 features (`Operand::Dense`): kept then.
        if model.dropout <= 0.0 || !b.half_suffices(self.cols(), model.first_product_width()) {
            return Ok(self);
        }
        Ok(match self {
            InputFeatures::DenseFused { half: Some(x), ids, seed, .. } => InputFeatures::Half { x, dropped: None, ids, seed },
            InputFeatures::Dense { half: Some(x), dropped, ids, .. } => InputFeatures::Half { x, dropped: Some(dropped), ids, seed: 0 },
            other => other,
        })
    }

    /// The input dropout keyed by original ids (one part of a partitioned graph): for dense
    /// features its rows' original node ids, for sparse ones its nonzeros' indices in the
    /// original feature matrix, so that the part draws the one-device mask's entries.
    pub fn keyed_by(mut self, by: Option<B::Ids>) -> Self {
        match &mut self {
            InputFeatures::Dense { ids, .. }
            | InputFeatures::DenseFused { ids, .. }
            | InputFeatures::Half { ids, .. }
            | InputFeatures::Sparse { ids, .. } => *ids = by,
            // One table for the whole graph: nothing is drawn per row.
            InputFeatures::Learnable { .. } => {}
        }
        self
    }

    pub fn cols(&self) -> usize {
        match self {
            InputFeatures::Dense { x, .. } | InputFeatures::DenseFused { x, .. } => B::shape(x).1,
            InputFeatures::Half { x, .. } => B::half_shape(x).1,
            InputFeatures::Sparse { x, .. } => B::graph_shape(x).1,
            InputFeatures::Learnable { table } => B::shape(&table.value).1,
        }
    }

    /// Whether the input is a learnable table (its gradient is computed, it is trained).
    pub fn is_learnable(&self) -> bool {
        matches!(self, InputFeatures::Learnable { .. })
    }

    /// The input's trainable tensors under stable names (the learnable table as `emb.weight`,
    /// OGB's name for it; none for node features), for the optimiser and a saved model.
    pub fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        match self {
            InputFeatures::Learnable { table } => vec![(crate::nn::embedding::EMBEDDING_NAME.to_string(), table)],
            _ => Vec::new(),
        }
    }

    /// The operand of the last training `forward` for the first layer's backward, and where
    /// that layer writes dL/dX (overwritten): the learnable table's gradient, `None` for node
    /// features (they need none, so the first layer skips the product).
    pub fn backward_operand(&mut self, p: f32) -> (Operand<'_, B>, Option<&mut B::Mat>) {
        match self {
            InputFeatures::Learnable { table } => (Operand::Dense(&table.value), Some(&mut table.grad)),
            other => (other.operand(true, p), None),
        }
    }

    /// Applies the input dropout (when training and p > 0) and returns the operand the first
    /// layer multiplies.
    pub fn forward(&mut self, b: &B, train: bool, p: f32, seed: u64) -> Result<Operand<'_, B>> {
        let drop = train && p > 0.0;
        Ok(match self {
            InputFeatures::Dense { x, dropped, half, ids } => {
                if !drop {
                    return Ok(Operand::Dense(x));
                }
                b.input_dropout(x, half.as_ref(), dropped, DropKey::new(p, seed).with_ids(ids.as_ref()))?;
                Operand::Dense(dropped)
            }
            InputFeatures::DenseFused { x, half, ids, seed: kept } => {
                if !drop {
                    return Ok(Operand::Dense(x));
                }
                *kept = seed;
                Operand::Dropped { x, half: half.as_ref(), key: DropKey::new(p, seed).with_ids(ids.as_ref()) }
            }
            InputFeatures::Half { x, dropped, ids, seed: kept } => {
                if !drop {
                    return Ok(Operand::Half { x, key: DropKey::new(0.0, 0).with_ids(ids.as_ref()) });
                }
                let key = DropKey::new(p, seed).with_ids(ids.as_ref());
                match dropped {
                    Some(d) => {
                        b.half_input_dropout(x, d, key)?;
                        Operand::Dense(d)
                    }
                    None => {
                        *kept = seed;
                        Operand::Half { x, key }
                    }
                }
            }
            InputFeatures::Sparse { x, values, values_t, dropped, dropped_t, mask, ids } => {
                if !drop {
                    return Ok(Operand::Sparse { x, values, values_t });
                }
                b.dropout_edges_at(values, dropped, mask, DropKey::new(p, seed).with_ids(ids.as_ref()))?;
                b.transpose_edges(x, dropped, dropped_t)?;
                Operand::Sparse { x, values: dropped, values_t: dropped_t }
            }
            InputFeatures::Learnable { table } => Operand::Dense(&table.value),
        })
    }

    /// The operand the last `forward` returned, for the backward pass.
    pub fn operand(&self, train: bool, p: f32) -> Operand<'_, B> {
        let dropped = train && p > 0.0;
        match self {
            InputFeatures::Dense { x, dropped: d, .. } => Operand::Dense(if dropped { d } else { x }),
            InputFeatures::DenseFused { x, half, ids, seed } => {
                if dropped {
                    Operand::Dropped { x, half: half.as_ref(), key: DropKey::new(p, *seed).with_ids(ids.as_ref()) }
                } else {
                    Operand::Dense(x)
                }
            }
            InputFeatures::Half { x, dropped: d, ids, seed } => match (d, dropped) {
                (Some(d), true) => Operand::Dense(d),
                (None, true) => Operand::Half { x, key: DropKey::new(p, *seed).with_ids(ids.as_ref()) },
                (_, false) => Operand::Half { x, key: DropKey::new(0.0, 0).with_ids(ids.as_ref()) },
            },
            InputFeatures::Sparse { x, values, values_t, dropped: d, dropped_t: dt, .. } => {
                if dropped {
                    Operand::Sparse { x, values: d, values_t: dt }
                } else {
                    Operand::Sparse { x, values, values_t }
                }
            }
            InputFeatures::Learnable { table } => Operand::Dense(&table.value),
        }
    }
}

#[cfg(test)]
mod dense_tests {
    use super::*;

    #[test]
    fn to_dense_places_every_entry_and_sums_duplicates() {
        let c = Csr::new(3, 4, vec![0, 2, 2, 4], vec![1, 3, 0, 0], vec![1.0, 2.0, 0.5, 0.25]).unwrap();
        let m = HostFeatures::Sparse(c).to_dense();
        assert_eq!((m.rows, m.cols), (3, 4));
        assert_eq!(m.data, vec![0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.75, 0.0, 0.0, 0.0]);
    }
}
