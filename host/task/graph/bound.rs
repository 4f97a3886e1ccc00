//! One net for a whole fold, built at a capacity and rebound to every batch of graphs (the
//! graph task's counterpart of `sample::bound`, on the same pieces: [`crate::graph::pad`],
//! [`BindOps`](crate::ops::backend::bind::BindOps), the diag-scaled loss).
//!
//! Building a net per batch costs ~2.6 ms of host time on the GPU (~150 allocations, uploads and
//! parameter initialisations thrown away), enqueuing its eager step ~1.5 ms more: 50x the GPU's
//! work on NCI1 (`bench/NOTES.md`, "where a graph-classification epoch goes"). Here the net is
//! built once with the most nodes, nonzeros and graphs any batch of the fold holds
//! ([`GraphCapacity::plan`], from the fold's shuffles, computed ahead), and a batch is padded to
//! exactly those sizes on a worker thread ([`PaddedGraphBatch`]):
//! - node rows: the batch's `n` first, then empty rows up to `nodes + 1` (the last row holds
//!   the zero-valued padding nonzeros of the model's matrix);
//! - graph rows: the batch's `g` first, then empty segments, then a sink segment owning every
//!   padded node row (`graphs + 1` segments in all: the segment offsets end at the row count);
//! - BatchNorm (encoder and head) counts only the live rows (`BatchNorm::set_live_rows`: a
//!   count in device memory, rewritten per batch) and writes 0 to the padded ones, forward and
//!   backward, so the statistics are the unpadded batch's;
//! - the loss: cross entropy with weight 1 over the live graphs (membership bits; padded graphs
//!   have none, so no loss and no gradient), its gradient scaled by diag(1 / g) (0 on padding):
//!   the mean over the live graphs, with 1 / g in device memory, not in a launch argument. The
//!   loss the step writes is the sum; [`PaddedGraphBatch::graphs`] divides it.
//!
//! Nothing flows from padded rows to live ones (no nonzero links them; the padding's values are
//! 0), and the padded rows get zero gradients (their graphs carry no loss; BatchNorm zeroes
//! them), so a padded batch's per-graph logits and parameter gradients are the unpadded
//! batch's (tested in f64). Every batch runs the same work on the same buffers, so the step is
//! recorded once (a CUDA graph) at its second run and replayed after each batch's copies; a new
//! learning rate (halved every 50 epochs) records it again.

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::graph::pad::{WithTranspose, template};
use crate::nn::input::{HostFeatures, InputFeatures};
use crate::nn::models::{self, FixedMatrixModel};
use crate::nn::param::Param;
use crate::ops::backend::bind::PaddedPattern;
use crate::ops::backend::{Side, Stats, TEST_BIT, TRAIN_BIT};
use crate::ops::nn::{AdamHyper, Ops};
use crate::tensor::Matrix;

use super::batch::GraphBatch;
use super::dataset::GraphSet;
use super::head::{GraphHead, HeadShape};
use super::net::GraphModel;

/// The most a batch may hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GraphCapacity {
    pub nodes: usize,
    /// Nonzeros of the model's matrix.
    pub edges: usize,
    pub graphs: usize,
}

impl GraphCapacity {
    /// Node rows of the net: the capacity and the sink row.
    pub fn rows(&self) -> usize {
        self.nodes + 1
    }
    /// Graph rows (segments) of the net: the capacity and the sink segment.
    pub fn graph_rows(&self) -> usize {
        self.graphs + 1
    }
    /// Nonzeros of the net's matrix (at least one: the padding's).
    fn matrix_nnz(&self) -> usize {
        self.edges.clamp(1, self.rows() * self.rows())
    }

    /// The least capacity holding every batch of `batches` (graph ids of `set`), where graph g's
    /// rows of the model's matrix hold `nnz[g]` nonzeros ([`model_nnz`]).
    pub fn plan<'a>(set: &GraphSet, nnz: &[u32], batches: impl IntoIterator<Item = &'a [u32]>) -> Self {
        let mut cap = GraphCapacity::default();
        for ids in batches {
            cap.hold(set, nnz, ids);
        }
        cap
    }

    /// Grows to hold the batch of graphs `ids` (see [`GraphCapacity::plan`]).
    pub fn hold(&mut self, set: &GraphSet, nnz: &[u32], ids: &[u32]) {
        let nodes: usize = ids.iter().map(|&g| set.tu.graph_nodes(g as usize).len()).sum();
        let edges: usize = ids.iter().map(|&g| nnz[g as usize] as usize).sum();
        self.nodes = self.nodes.max(nodes);
        self.edges = self.edges.max(edges);
        self.graphs = self.graphs.max(ids.len());
    }
}

/// Nonzeros of every graph's rows of `model`'s matrix: the model's matrix of the whole set's
/// block-diagonal adjacency is row-local (self-loops, the degree normalisations of GCN and the
/// mean read only a row's own graph), so graph g's rows of it are its matrix in any batch.
pub fn model_nnz(set: &GraphSet, model: &str) -> Result<Vec<u32>> {
    let m = models::model_graph(model, &set.tu.adjacency)?;
    let rp = m.row_ptr();
    Ok((0..set.graphs())
        .map(|g| {
            let r = set.tu.graph_nodes(g);
            rp[r.end] - rp[r.start]
        })
        .collect())
}

/// Whether the graph task trains `m` on `b` with one bound net per fold (else a net per batch):
/// models over a fixed matrix (GCN, SAGE, GIN; not GAT's attention) on a backend that can
/// rebind a graph (the CPU; on the GPU the CUDA-core kernels: `--precision f32`, HP or CSR).
pub fn can_bind<B: Ops>(b: &B, m: &GraphModel) -> bool {
    models::model_info(m.encoder.model).is_ok_and(|i| i.aggregation.is_some()) && b.can_bind()
}

/// A batch padded to a capacity: exactly what a bound net copies (made on a worker thread).
pub struct PaddedGraphBatch {
    pub capacity: GraphCapacity,
    /// The model's matrix of the batch graph, padded.
    pub matrix: PaddedPattern,
    /// `rows x features`, the padded rows 0.
    pub features: Matrix,
    /// `graph_rows + 1` offsets: the batch's graphs, empty ones, the sink segment.
    pub offsets: Vec<u32>,
    /// Per graph row: the class (0 on padding) and the membership (train and test for the
    /// batch's graphs: a training step reads the first, an evaluation the second; none on
    /// padding).
    pub labels: Vec<i32>,
    pub mask_bits: Vec<u8>,
    /// 1 / g on the batch's graphs, 0 on padding: the mean loss's scale.
    pub weights: Vec<f32>,
    /// Live node rows and graphs.
    pub nodes: usize,
    pub graphs: usize,
}

impl PaddedGraphBatch {
    /// `batch` with `model`'s matrix (as `models::build` would make it from the batch graph),
    /// padded to `capacity` (which must hold it).
    pub fn new(batch: GraphBatch, model: &str, capacity: GraphCapacity) -> Result<Self> {
        let (n, g) = (batch.nodes(), batch.len());
        let matrix = models::model_graph(model, &batch.adjacency)?;
        if n > capacity.nodes || g > capacity.graphs || matrix.nnz() > capacity.edges.max(1) {
            return Err(Error::Shape(format!(
                "a batch of {g} graphs, {n} nodes and {} nonzeros does not fit the capacity planned for the fold ({capacity:?})",
                matrix.nnz()
            )));
        }
        let (rows, grows) = (capacity.rows(), capacity.graph_rows());
        let matrix = PaddedPattern::new(&WithTranspose::new(matrix), rows, rows, capacity.matrix_nnz())?;
        let mut features = batch.features;
        features.data.resize(rows * features.cols, 0.0);
        features.rows = rows;
        let mut offsets = batch.offsets;
        offsets.resize(grows, n as u32);
        offsets.push(rows as u32);
        let mut labels = batch.labels;
        labels.resize(grows, 0);
        let mut mask_bits = vec![TRAIN_BIT | TEST_BIT; g];
        mask_bits.resize(grows, 0);
        // The f32 the per-batch net's cross entropy takes as 1 / g.
        let mut weights = vec![1.0 / g as f32; g];
        weights.resize(grows, 0.0);
        Ok(PaddedGraphBatch { capacity, matrix, features, offsets, labels, mask_bits, weights, nodes: n, graphs: g })
    }

    /// Graphs `ids` of `set`, made and padded.
    pub fn of(set: &GraphSet, ids: &[u32], model: &str, capacity: GraphCapacity) -> Result<Self> {
        Self::new(GraphBatch::new(set, ids)?, model, capacity)
    }
}

/// The graph task's net at a capacity (see the module note). It holds the trained state: the
/// fold's parameters, Adam moments and BatchNorm statistics live here for the whole fold.
pub struct BoundGraphNet<B: Ops> {
    encoder: Box<dyn FixedMatrixModel<B>>,
    head: GraphHead<B>,
    input: InputFeatures<B>,
    labels: B::Labels,
    dlogits: B::Mat,
    /// diag(1 / g) over the graph rows (0 on padding), its values, and the scaled gradient.
    scale: (B::Graph, B::Edges, B::Mat),
    /// Where the step writes its loss (a fixed buffer a recording can write).
    stats: B::Stats,
    capacity: GraphCapacity,
    /// Record the step at its second run and replay it after (`false`: always eager).
    pub record: bool,
    /// The recorded step and the hyperparameters it was recorded with (launch arguments).
    recorded: Option<(B::Recording, AdamHyper)>,
    /// Why recording failed, if it did (the steps then run eagerly).
    pub record_error: Option<String>,
    /// Times the step was recorded.
    pub recordings: usize,
    steps_run: usize,
}

impl<B: Ops + 'static> BoundGraphNet<B> {
    pub fn new(b: &B, capacity: GraphCapacity, m: &GraphModel) -> Result<Self> {
        if capacity.nodes == 0 || capacity.graphs == 0 {
            return Err(Error::Shape(format!("a graph net for batches of no nodes or no graphs ({capacity:?})")));
        }
        let enc = m.encoder_config();
        let width = m.width();
        let (rows, grows) = (capacity.rows(), capacity.graph_rows());
        let mut encoder = models::build_on_matrix(b, template(rows, rows, capacity.matrix_nnz())?, m.features, width, &enc)?;
        for bn in encoder.model().batch_norms() {
            bn.set_live_rows(b, rows)?;
        }
        let shape = HeadShape {
            nodes: rows,
            graphs: grows,
            width,
            classes: m.classes,
            pooling: m.pooling,
            dropout: m.encoder.dropout,
            norm: m.encoder.batch_norm,
            seed: m.encoder.seed,
        };
        // Every row in the sink segment until a batch is bound.
        let mut offsets = vec![0u32; grows];
        offsets.push(rows as u32);
        let mut head = GraphHead::new(b, &shape, &offsets)?;
        head.bind(b, &offsets, rows, grows)?;
        let input = InputFeatures::for_model(b, &HostFeatures::Dense(Matrix::zeros(rows, m.features)), &enc)?;
        let diag = Csr::new(grows, grows, (0..=grows as u32).collect(), (0..grows as u32).collect(), vec![0.0; grows])?;
        let diag = b.graph(diag)?;
        let diag_values = b.graph_values(&diag, Side::Forward)?;
        Ok(BoundGraphNet {
            encoder,
            head,
            input,
            labels: b.labels(&vec![0; grows], &vec![0; grows])?,
            dlogits: b.matrix(grows, m.classes)?,
            scale: (diag, diag_values, b.matrix(grows, m.classes)?),
            stats: b.stats()?,
            capacity,
            record: true,
            recorded: None,
            record_error: None,
            recordings: 0,
            steps_run: 0,
        })
    }

    pub fn capacity(&self) -> GraphCapacity {
        self.capacity
    }

    /// Whether the step is recorded (replays follow).
    pub fn is_recorded(&self) -> bool {
        self.recorded.is_some()
    }

    /// Copies `p` (padded to this net's capacity) into the net's buffers (queued on the GPU).
    pub fn bind(&mut self, b: &B, p: &PaddedGraphBatch) -> Result<()> {
        if p.capacity != self.capacity {
            return Err(Error::Shape(format!("a batch padded to {:?} for a net of {:?}", p.capacity, self.capacity)));
        }
        let (graph, values, values_t) = self.encoder.adjacency().parts_mut()?;
        b.bind_edges(values, p.matrix.s.values())?;
        b.bind_edges(values_t, p.matrix.t.values())?;
        b.bind_graph(graph, &p.matrix)?;
        match &mut self.input {
            // Rebinding x would leave an f16 snapshot of it stale.
            InputFeatures::DenseFused { half: Some(_), .. } | InputFeatures::Dense { half: Some(_), .. } | InputFeatures::Half { .. } => {
                return Err(Error::Unsupported("a batch's features rebound into features stored in f16 as well".into()));
            }
            InputFeatures::Dense { x, .. } | InputFeatures::DenseFused { x, .. } => b.bind_rows(x, &p.features)?,
            InputFeatures::Sparse { .. } | InputFeatures::Learnable { .. } => {
                return Err(Error::Unsupported("the graph task's features are dense node data".into()));
            }
        }
        b.bind_labels(&mut self.labels, &p.labels, &p.mask_bits)?;
        b.bind_edges(&mut self.scale.1, &p.weights)?;
        for bn in self.encoder.model().batch_norms() {
            bn.set_live_rows(b, p.nodes)?;
        }
        self.head.bind(b, &p.offsets, p.nodes, p.graphs)
    }

    /// The logits of every graph row of the batch bound (the first `graphs` are its graphs').
    pub fn forward(&mut self, b: &B, train: bool) -> Result<&B::Mat> {
        let h = self.encoder.model().forward(b, &mut self.input, train)?;
        self.head.forward(b, h, train)
    }

    /// Forward (training), the loss and backward on the batch bound: every parameter's
    /// gradient, no update; the sum of the graphs' losses goes to `stats`.
    pub fn gradients(&mut self, b: &B, stats: &mut B::Stats) -> Result<()> {
        self.gradients_into(b, Some(stats))
    }

    /// [`BoundGraphNet::gradients`] into `stats`, or the net's own (a recorded step's).
    fn gradients_into(&mut self, b: &B, out: Option<&mut B::Stats>) -> Result<()> {
        let BoundGraphNet { encoder, head, input, labels, dlogits, scale: (g, v, weighted), stats, .. } = self;
        let stats = match out {
            Some(s) => s,
            None => stats,
        };
        let h = encoder.model().forward(b, input, true)?;
        let logits = head.forward(b, h, true)?;
        b.cross_entropy(logits, labels, 1.0, dlogits, stats)?;
        // The mean over the live graphs: diag(1 / g, 0 on padding) times the summed loss's
        // gradient (one SpMM on a diagonal, no new op).
        b.spmm(g, Side::Forward, v, dlogits, weighted)?;
        let dh = head.backward(b, h, weighted)?;
        encoder.model().backward(b, input, dh)
    }

    /// One training step on the batch bound (forward, loss, backward, Adam): replayed when
    /// recorded, recorded at the second step (again when `hyper` changes) when `record`, else
    /// eager. The sum of the batch's graphs' losses and their correct count (`correct[0]`) go to
    /// `out` (divide the loss by [`PaddedGraphBatch::graphs`]).
    pub fn step(&mut self, b: &B, hyper: &AdamHyper, out: &mut B::Stats) -> Result<()> {
        let stale = self.recorded.as_ref().is_some_and(|(_, h)| h != hyper);
        if stale {
            self.recorded = None;
        }
        if self.recorded.is_none() && self.record && self.steps_run >= 1 {
            // Captured work must not wait on earlier work (nor fail on an earlier error).
            b.synchronize()?;
            match b.record(&mut || self.enqueue(b, hyper)) {
                Ok(Some(r)) => {
                    self.recorded = Some((r, *hyper));
                    self.recordings += 1;
                }
                Ok(None) => self.record = false,
                Err(e) => {
                    b.synchronize()?;
                    self.record = false;
                    self.record_error = Some(e.to_string());
                }
            }
        }
        let stepped = match &self.recorded {
            Some((r, _)) => b.replay(r),
            None => self.enqueue(b, hyper),
        };
        self.steps_run += 1;
        stepped?;
        b.copy_stats(&self.stats, out)
    }

    /// The step's work (queued only: recordable).
    fn enqueue(&mut self, b: &B, hyper: &AdamHyper) -> Result<()> {
        b.begin_step()?;
        self.gradients_into(b, None)?;
        Param::adam_all(b, self.params().into_iter().map(|(_, p)| p), hyper)
    }

    /// Correctly classified graphs of the batch bound (evaluation: no dropout, BatchNorm's
    /// running statistics).
    pub fn correct(&mut self, b: &B) -> Result<f64> {
        let mut stats = b.stats()?;
        let BoundGraphNet { encoder, head, input, labels, dlogits, .. } = self;
        let h = encoder.model().forward(b, input, false)?;
        let logits = head.forward(b, h, false)?;
        b.cross_entropy(logits, labels, 0.0, dlogits, &mut stats)?;
        let s: Stats = b.read_stats(&stats)?;
        Ok(s.correct[2])
    }

    pub fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        let mut p = self.encoder.model().params();
        p.extend(self.head.params());
        p
    }
}
