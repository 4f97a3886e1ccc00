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
//! Every batch runs the same work on the same buffers, so the step is recorded once (a CUDA
//! graph on the GPU) and replayed per batch after its copies: the step costs one launch on the
//! host instead of one per op. What differs between batches lives in device memory: the mean
//! loss's 1/n is folded into the per-node loss weights (diag(w / n) times the gradient, always
//! applied; the cross-entropy runs with weight 1 and its loss is the sum, divided by n when read),
//! and the nonzero counts are the capacity's. The first step of a model runs eagerly (it warms
//! every lazily built buffer); a recording that fails leaves the steps eager.
//!
//! A batch larger than the capacity rebuilds the model at the batch's size times `growth`
//! (counted in [`BoundModel::rebuilds`]). Only models whose layers share one fixed matrix
//! (GCN, SAGE, GIN: [`Stack`] over a [`GcnAdjacency`]) and have no BatchNorm (padded rows
//! would enter its statistics) are rebound; the others keep a model per batch.

use super::prepared::{PaddedBatch, PreparedBatch, PreparedFeatures};
use super::train::{Step, swap_state};
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::pad::template;
use crate::nn::gcn_conv::GcnAdjacency;
use crate::nn::input::{HostFeatures, InputFeatures};
use crate::nn::models::{self, FixedMatrixModel, Model, ModelConfig};

use crate::ops::backend::Side;

use crate::ops::nn::{AdamHyper, Ops};
use crate::tensor::Matrix;

/// The most a batch may hold without a rebuild.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Capacity {
    pub nodes: usize,
    /// Nonzeros of the model's matrix.
    pub edges: usize,
    /// Nonzeros of sparse features (0 for dense ones).
    pub feature_nnz: usize,
    /// Matrices of their own for layers 1.. (per-layer neighbour blocks: each holds `edges`);
    /// 0: every layer multiplies one matrix. A batch fits only a model with as many.
    pub later: usize,
}

impl Capacity {
    /// Whether `p` fits.
    pub fn holds(&self, p: &PreparedBatch) -> bool {
        p.later.len() == self.later && self.holds_sizes(p.n, p.matrix_nnz(), p.features.nnz())
    }

    /// Whether a batch of `nodes`, a matrix of `edges` nonzeros and sparse features of
    /// `feature_nnz` fits.
    pub fn holds_sizes(&self, nodes: usize, edges: usize, feature_nnz: usize) -> bool {
        nodes <= self.nodes && edges <= self.edges && feature_nnz <= self.feature_nnz
    }

    /// The capacity for `p` with `growth` headroom, never below `self`.
    pub fn grown_for(&self, p: &PreparedBatch, growth: f64) -> Capacity {
        Capacity { later: p.later.len(), ..self.grown_to(p.n, p.matrix_nnz(), p.features.nnz(), growth) }
    }

    /// [`Capacity::grown_for`] a batch of these sizes.
    pub fn grown_to(&self, nodes: usize, edges: usize, feature_nnz: usize, growth: f64) -> Capacity {
        let up = |x: usize| ((x as f64 * growth.max(1.0)).ceil() as usize).max(x);
        Capacity {
            nodes: self.nodes.max(up(nodes)).max(1),
            edges: self.edges.max(up(edges)).max(1),
            feature_nnz: self.feature_nnz.max(up(feature_nnz)),
            later: self.later,
        }
    }
}

/// Whether `cfg`'s model can be rebound (else the caller builds one per batch).
pub fn can_rebind(cfg: &ModelConfig) -> bool {
    models::model_info(cfg.model).is_ok_and(|m| m.aggregation.is_some()) && !cfg.batch_norm
}

/// A rebound model's batch buffers (see [`BoundModel::bind`] for what each holds).
pub(super) struct BoundParts<'a, B: Ops> {
    pub graph: &'a mut B::Graph,
    pub values: &'a mut B::Edges,
    pub values_t: &'a mut B::Edges,
    pub input: &'a mut InputFeatures<B>,
    pub labels: &'a mut B::Labels,
    /// w / n per row (the loss weights).
    pub weights: &'a mut B::Edges,
    pub resident: Option<&'a B::Mat>,
}

pub struct BoundModel<B: Ops> {
    model: Box<dyn FixedMatrixModel<B>>,
    pub input: InputFeatures<B>,
    pub labels: B::Labels,
    pub dlogits: B::Mat,
    /// diag(w / n) over the rows: the loss weight of each node (GraphSAINT's, else 1) over the
    /// batch's loss nodes n, 0 on padded rows; with the weighted gradient it writes.
    scale: (B::Graph, B::Edges, B::Mat),
    /// The whole graph's dense features, resident: each batch's rows are gathered from it on
    /// the device by node id (`None`: the batch's rows are copied from the host).
    resident: Option<B::Mat>,
    /// Where the step writes its loss (a fixed buffer a recording can write).
    stats: B::Stats,
    capacity: Capacity,
    pub rebuilds: usize,
    /// Record the step at its second run and replay it after (`false`: always eager).
    pub record: bool,
    recorded: Option<B::Recording>,
    /// Why recording failed, if it did (the steps then run eagerly).
    pub record_error: Option<String>,
    steps_run: usize,
}

impl<B: Ops + 'static> BoundModel<B> {
    /// A model for batches up to `capacity` with `features` columns (sparse or dense as the
    /// batches' are).
    pub fn new(b: &B, capacity: Capacity, features: usize, sparse: bool, classes: usize, cfg: &ModelConfig) -> Result<Self> {
        Self::with_resident(b, capacity, features, sparse, None, classes, cfg)
    }

    /// [`BoundModel::new`] with the whole graph's dense features uploaded once (`resident`):
    /// batches then bring node ids, not feature rows.
    pub fn with_resident(
        b: &B,
        capacity: Capacity,
        features: usize,
        sparse: bool,
        resident: Option<&Matrix>,
        classes: usize,
        cfg: &ModelConfig,
    ) -> Result<Self> {
        if let Some(m) = resident
            && (sparse || m.cols != features)
        {
            return Err(Error::Shape(format!(
                "resident features of {} columns for a batch of {features} {} columns",
                m.cols,
                if sparse { "sparse" } else { "dense" }
            )));
        }
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
        let mut model = models::build_on_matrix(b, s, features, classes, cfg)?;
        if capacity.later > 0 {
            let later = (0..capacity.later)
                .map(|_| GcnAdjacency::from_normalized(b, template(rows, rows, capacity.edges)?))
                .collect::<Result<Vec<_>>>()?;
            model.set_later_adjacencies(later)?;
        }
        let x = if sparse {
            HostFeatures::Sparse(template(rows, features, capacity.feature_nnz)?)
        } else {
            HostFeatures::Dense(Matrix::zeros(rows, features))
        };
        let input = InputFeatures::for_model(b, &x, cfg)?;
        let diag = Csr::new(rows, rows, (0..=rows as u32).collect(), (0..rows as u32).collect(), vec![0.0; rows])?;
        let diag = b.graph(diag)?;
        let diag_values = b.graph_values(&diag, Side::Forward)?;
        Ok(BoundModel {
            model,
            input,
            labels: b.labels(&vec![0; rows], &vec![0; rows])?,
            dlogits: b.matrix(rows, classes)?,
            scale: (diag, diag_values, b.matrix(rows, classes)?),
            resident: resident.map(|m| b.upload(m)).transpose()?,
            stats: b.stats()?,
            capacity,
            rebuilds: 0,
            record: true,
            recorded: None,
            record_error: None,
            steps_run: 0,
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
            return Err(Error::Shape(format!(
                "a batch of {} nodes and {} nonzeros in {} matrices does not fit {:?}",
                p.n,
                p.matrix_nnz(),
                p.later.len() + 1,
                self.capacity
            )));
        }
        // Padded on a worker thread already when the worker knew this capacity.
        let made;
        let padded = match &p.padded {
            Some(x) if x.capacity == self.capacity => x,
            _ => {
                made = PaddedBatch::new(p, self.capacity)?;
                &made
            }
        };
        for (l, m) in std::iter::once(&padded.matrix).chain(&padded.later).enumerate() {
            let (graph, values, values_t) = self.model.layer_adjacency(l).parts_mut()?;
            b.bind_edges(values, m.s.values())?;
            b.bind_edges(values_t, m.t.values())?;
            b.bind_graph(graph, m)?;
        }
        match (&padded.features, &mut self.input) {
            // Rebinding x would leave an f16 snapshot of it stale (only fixed features have one).
            (_, InputFeatures::DenseFused { half: Some(_), .. } | InputFeatures::Half { .. }) => {
                return Err(Error::Unsupported("a batch's features rebound into features stored in f16 as well".into()));
            }
            // Dense features on the GPU are held for the fused input dropout; either way x is the
            // batch's dense rows.
            (None, InputFeatures::Dense { x, .. } | InputFeatures::DenseFused { x, .. }) => match &p.features {
                PreparedFeatures::Dense(m) => match &self.resident {
                    Some(full) => b.bind_rows_gathered(x, full, &p.nodes)?,
                    None => b.bind_rows(x, m)?,
                },
                PreparedFeatures::Sparse(_) => {
                    return Err(Error::Unsupported("a batch's features changed between dense and sparse".into()));
                }
            },
            (Some(f), InputFeatures::Sparse { x, values, values_t, .. }) => {
                b.bind_edges(values, f.s.values())?;
                b.bind_edges(values_t, f.t.values())?;
                b.bind_graph(x, f)?;
            }
            _ => return Err(Error::Unsupported("a batch's features changed between dense and sparse".into())),
        }
        b.bind_labels(&mut self.labels, &padded.labels, &padded.mask_bits)?;
        b.bind_edges(&mut self.scale.1, &padded.weights)
    }

    /// The buffers a batch is written into, for a sampler that writes them on the device
    /// ([`super::device_saint`]).
    pub(super) fn parts(&mut self) -> Result<BoundParts<'_, B>> {
        // Layer 0's matrix is the model's shared one.
        self.layer_parts(0)
    }

    /// [`BoundModel::parts`] with layer `l`'s matrix (its own where the layers have their own:
    /// per-layer blocks; the shared one otherwise).
    pub(super) fn layer_parts(&mut self, l: usize) -> Result<BoundParts<'_, B>> {
        let (graph, values, values_t) = self.model.layer_adjacency(l).parts_mut()?;
        Ok(BoundParts {
            graph,
            values,
            values_t,
            input: &mut self.input,
            labels: &mut self.labels,
            weights: &mut self.scale.1,
            resident: self.resident.as_ref(),
        })
    }

    /// Replaces the resident dense features the batches' rows are gathered from (a layer-wise
    /// inference gives each layer's model the previous layer's output); returns the old ones.
    pub fn replace_resident(&mut self, resident: Option<B::Mat>) -> Option<B::Mat> {
        std::mem::replace(&mut self.resident, resident)
    }

    /// The logits of the batch just bound, in evaluation mode (no dropout), with `net`'s
    /// parameters (its layer `layer`'s, for a one-layer model) swapped in and back.
    pub fn forward_eval(&mut self, b: &B, swap: &mut dyn FnMut(&mut dyn Model<B>) -> Result<()>) -> Result<&B::Mat> {
        swap(self.model.model())?;
        let out = self.model.model().forward(b, &mut self.input, false).map(|_| ());
        swap(self.model.model())?;
        out?;
        Ok(self.model.logits())
    }

    /// Whether the step is recorded (replays follow).
    pub fn is_recorded(&self) -> bool {
        self.recorded.is_some()
    }

    /// One step on the batch just bound with `net`'s parameters swapped in (and back, even if
    /// the step fails): replayed when recorded, recorded at the second step when `record`, else
    /// eager. The sum of the loss nodes' losses goes to `out` (divide by the batch's loss nodes).
    pub fn step(&mut self, b: &B, net: &mut dyn Model<B>, hyper: &AdamHyper, out: &mut B::Stats, sync: bool) -> Result<()> {
        swap_state(net, self.model.model())?;
        let stepped = self.run(b, hyper, out, sync);
        swap_state(net, self.model.model())?;
        self.steps_run += 1;
        stepped
    }

    fn run(&mut self, b: &B, hyper: &AdamHyper, out: &mut B::Stats, sync: bool) -> Result<()> {
        if self.recorded.is_none() && self.record && self.steps_run >= 1 {
            // Captured work must not wait on earlier work (nor fail on an earlier error).
            b.synchronize()?;
            match b.record(&mut || self.enqueue(b, hyper)) {
                Ok(Some(r)) => self.recorded = Some(r),
                Ok(None) => self.record = false,
                Err(e) => {
                    b.synchronize()?;
                    self.record = false;
                    self.record_error = Some(e.to_string());
                }
            }
        }
        match &self.recorded {
            Some(r) => b.replay(r)?,
            None => self.enqueue(b, hyper)?,
        }
        b.copy_stats(&self.stats, out)?;
        if sync {
            b.synchronize()?;
        }
        Ok(())
    }

    /// The step's work: forward, the loss with weight 1, diag(w / n) times its gradient,
    /// backward, Adam.
    fn enqueue(&mut self, b: &B, hyper: &AdamHyper) -> Result<()> {
        let (g, v, weighted) = &mut self.scale;
        let step = Step {
            input: &mut self.input,
            labels: &self.labels,
            dlogits: &mut self.dlogits,
            scale: Some((&*g, &*v, weighted)),
            loss_nodes: 1,
            stats: &mut self.stats,
        };
        super::train::enqueue_step(b, self.model.model(), hyper, step)
    }
}
