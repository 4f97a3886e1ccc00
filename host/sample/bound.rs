//! One model for a whole sampled run, built at a capacity and rebound to every batch.
//!
//! Building a model per batch pays, per batch, for the parameters' initialisation (thrown away:
//! the trainer's are swapped in), every activation buffer, the graph's translation and the
//! uploads, one allocation each. Here the model is built once with `capacity.nodes + 1` rows, a
//! matrix of `capacity.edges` nonzeros and (sparse features) a feature matrix of
//! `capacity.feature_nnz`; a batch is padded to exactly those sizes ([`pad`](super::prepared::pad): empty rows, and
//! zero-valued nonzeros in the last row, a sink no batch node uses) and copied into the
//! buffers ([`BindOps`](crate::ops::backend::bind::BindOps)). The padding changes nothing for the batch's nodes: the padded rows
//! have no edges to them, carry no loss (membership 0) and so get zero gradients; every real
//! nonzero keeps its index, so dropout masks are the unpadded batch's. The loss of a rebound
//! model is the freshly built one's (tested).
//!
//! A batch larger than the capacity rebuilds the model at the batch's size times `growth`
//! (counted in [`BoundModel::rebuilds`]). Only models whose layers share one fixed matrix
//! (GCN, SAGE, GIN: [`Stack`] over a [`GcnAdjacency`]) and have no BatchNorm (padded rows
//! would enter its statistics) are rebound; the others keep a model per batch.

use super::train::Step;
use super::prepared::{PreparedBatch, PreparedFeatures, pad_with_transpose};
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::gcn_conv::GcnAdjacency;
use crate::nn::input::{HostFeatures, InputFeatures};
use crate::nn::models::{self, Model, ModelConfig};
use crate::nn::stack::{Conv, Stack};
use crate::ops::backend::{Ops, Side};
use crate::tensor::Matrix;

/// The most a batch may hold without a rebuild.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Capacity {
    pub nodes: usize,
    /// Nonzeros of the model's matrix.
    pub edges: usize,
    /// Nonzeros of sparse features (0 for dense ones).
    pub feature_nnz: usize,
}

impl Capacity {
    /// Whether `p` fits.
    pub fn holds(&self, p: &PreparedBatch) -> bool {
        p.n <= self.nodes && p.matrix.s.nnz() <= self.edges && p.features.nnz() <= self.feature_nnz
    }

    /// The capacity for `p` with `growth` headroom, never below `self`.
    pub fn grown_for(&self, p: &PreparedBatch, growth: f64) -> Capacity {
        let up = |x: usize| ((x as f64 * growth.max(1.0)).ceil() as usize).max(x);
        Capacity {
            nodes: self.nodes.max(up(p.n)).max(1),
            edges: self.edges.max(up(p.matrix.s.nnz())).max(1),
            feature_nnz: self.feature_nnz.max(up(p.features.nnz())),
        }
    }
}

/// Whether `cfg`'s model can be rebound (else the caller builds one per batch).
pub fn can_rebind(cfg: &ModelConfig) -> bool {
    matches!(cfg.model, "gcn" | "sage" | "gin") && !cfg.batch_norm
}

/// A stack over a fixed matrix, seen as a model whose matrix can be reached.
trait OnMatrix<B: Ops> {
    fn model(&mut self) -> &mut dyn Model<B>;
    fn adjacency(&mut self) -> &mut GcnAdjacency<B>;
}

impl<B: Ops + 'static, C: Conv<B, Adj = GcnAdjacency<B>> + 'static> OnMatrix<B> for Stack<B, C> {
    fn model(&mut self) -> &mut dyn Model<B> {
        self
    }
    fn adjacency(&mut self) -> &mut GcnAdjacency<B> {
        self.adjacency_mut()
    }
}

pub struct BoundModel<B: Ops> {
    model: Box<dyn OnMatrix<B>>,
    pub input: InputFeatures<B>,
    pub labels: B::Labels,
    pub dlogits: B::Mat,
    /// diag(w) over the rows, for GraphSAINT's weighted loss: its pattern is fixed, its values
    /// are the batch's weights (0 on padded rows); with the weighted gradient it writes.
    scale: (B::Graph, B::Edges, B::Mat),
    capacity: Capacity,
    pub rebuilds: usize,
}

/// A canonical `rows x cols` pattern of `nnz` nonzeros (row-major fill) to build buffers of
/// that size on; every batch's pattern overwrites it.
fn template(rows: usize, cols: usize, nnz: usize) -> Result<Csr> {
    if nnz > rows * cols {
        return Err(Error::Shape(format!("a {rows}x{cols} template cannot hold {nnz} nonzeros")));
    }
    let mut row_ptr: Vec<u32> = (0..=rows).map(|r| (r * cols).min(nnz) as u32).collect();
    row_ptr[rows] = nnz as u32;
    let col_idx = (0..nnz).map(|k| (k % cols) as u32).collect();
    Csr::new(rows, cols, row_ptr, col_idx, vec![0.0; nnz])
}

impl<B: Ops + 'static> BoundModel<B> {
    /// A model for batches up to `capacity` with `features` columns (sparse or dense as the
    /// batches' are).
    pub fn new(b: &B, capacity: Capacity, features: usize, sparse: bool, classes: usize, cfg: &ModelConfig) -> Result<Self> {
        if !can_rebind(cfg) {
            return Err(Error::Unsupported(format!("{}: a rebound model needs a fixed matrix and no BatchNorm", cfg.model)));
        }
        let rows = capacity.nodes + 1;
        // The matrix may not be denser than rows x rows (nor the features than rows x features).
        let capacity = Capacity {
            edges: capacity.edges.min(rows * rows),
            feature_nnz: if sparse { capacity.feature_nnz.clamp(1, rows * features) } else { 0 },
            ..capacity
        };
        let s = template(rows, rows, capacity.edges)?;
        let model: Box<dyn OnMatrix<B>> = match cfg.model {
            "gcn" => Box::new(models::gcn::build_on(b, s, features, classes, cfg, None)?),
            "sage" => Box::new(models::sage::build_on(b, s, features, classes, cfg, None)?),
            "gin" => Box::new(models::gin::build_on(b, s, features, classes, cfg, None)?),
            other => return Err(Error::Unsupported(format!("{other}: no fixed matrix to rebind"))),
        };
        let x = if sparse { HostFeatures::Sparse(template(rows, features, capacity.feature_nnz)?) } else { HostFeatures::Dense(Matrix::zeros(rows, features)) };
        let input = InputFeatures::new(b, &x)?;
        let diag = Csr::new(rows, rows, (0..=rows as u32).collect(), (0..rows as u32).collect(), vec![0.0; rows])?;
        let diag = b.graph(diag)?;
        let diag_values = b.graph_values(&diag, Side::Forward)?;
        Ok(BoundModel {
            model,
            input,
            labels: b.labels(&vec![0; rows], &vec![0; rows])?,
            dlogits: b.matrix(rows, classes)?,
            scale: (diag, diag_values, b.matrix(rows, classes)?),
            capacity,
            rebuilds: 0,
        })
    }

    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// Rows of every buffer (the capacity's nodes and the sink row).
    pub fn rows(&self) -> usize {
        self.capacity.nodes + 1
    }

    pub fn model(&mut self) -> &mut dyn Model<B> {
        self.model.model()
    }

    /// Copies `p` (which must fit: [`Capacity::holds`]) into the model's buffers.
    pub fn bind(&mut self, b: &B, p: &PreparedBatch) -> Result<()> {
        if !self.capacity.holds(p) {
            return Err(Error::Shape(format!("a batch of {} nodes and {} nonzeros does not fit {:?}", p.n, p.matrix.s.nnz(), self.capacity)));
        }
        let rows = self.rows();
        let (s, t, t_of) = pad_with_transpose(&p.matrix, rows, rows, self.capacity.edges)?;
        let (graph, values, values_t) = self.model.adjacency().parts_mut();
        b.bind_edges(values, s.values())?;
        b.bind_edges(values_t, t.values())?;
        b.bind_graph(graph, s, t, t_of)?;
        match (&p.features, &mut self.input) {
            (PreparedFeatures::Dense(m), InputFeatures::Dense { x, .. }) => b.bind_rows(x, m)?,
            (PreparedFeatures::Sparse(w), InputFeatures::Sparse { x, values, values_t, .. }) => {
                let (s, t, t_of) = pad_with_transpose(w, rows, w.s.n_cols(), self.capacity.feature_nnz)?;
                b.bind_edges(values, s.values())?;
                b.bind_edges(values_t, t.values())?;
                b.bind_graph(x, s, t, t_of)?;
            }
            _ => return Err(Error::Unsupported("a batch's features changed between dense and sparse".into())),
        }
        let mut labels = p.labels.clone();
        labels.resize(rows, 0);
        let mut mask = p.mask_bits.clone();
        mask.resize(rows, 0);
        b.bind_labels(&mut self.labels, &labels, &mask)?;
        if let Some(w) = &p.loss_scale {
            let mut w = w.clone();
            w.resize(rows, 0.0);
            b.bind_edges(&mut self.scale.1, &w)?;
        }
        Ok(())
    }

    /// The model and the step's operands for the batch `p` just bound (and `stats`, which the
    /// step's loss is written to).
    pub fn parts<'a>(&'a mut self, p: &PreparedBatch, stats: &'a mut B::Stats) -> (&'a mut dyn Model<B>, Step<'a, B>) {
        let (g, v, weighted) = &mut self.scale;
        let scale = p.loss_scale.as_ref().map(|_| (&*g, &*v, weighted));
        let step = Step { input: &mut self.input, labels: &self.labels, dlogits: &mut self.dlogits, scale, loss_nodes: p.loss_nodes, stats };
        (self.model.model(), step)
    }
}
