//! Layer-wise inference in node batches (PyG's `inference` pattern for sampled models): the
//! exact full-graph logits of a GCN, SAGE or GIN stack, one layer at a time, so evaluation
//! needs the memory of one layer over the graph and a batch, never the whole model's.
//!
//! The graph's rows are cut into contiguous batches of about `batch_edges` nonzeros of the
//! model's matrix (Â, the mean, the sum: [`models::model_graph`], normalised on the whole
//! graph so every row is exact). A batch's nodes are its rows first (local 0..k) then every
//! other node those rows read; its matrix holds the rows' edges and is empty below row k. The
//! batches are made once and padded to one capacity: every layer and every evaluation binds
//! the same ones into a one-layer [`BoundModel`] of that layer's widths, whose input rows are
//! gathered on the device from the previous layer's output over all nodes (resident). A
//! batch's k output rows are copied into the layer's output over all nodes, on the device;
//! ReLU and the residual sum of hidden layers are applied to it whole; only the last layer's
//! rows come back, to be scored against the labels.
//!
//! Memory: the device holds the features, one layer's input and output over all nodes, and
//! the one-layer model at the batch capacity.

use rayon::prelude::*;

use super::bound::{BoundModel, Capacity, can_rebind};
use super::prepared::{PaddedBatch, PreparedBatch, PreparedFeatures, WithTranspose};
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::models::{self, Model, ModelConfig, widths};
use crate::ops::backend::{TEST_BIT, TRAIN_BIT, VAL_BIT};
use crate::ops::nn::Ops;
use crate::task::node::train::Evaluate;
use crate::tensor::Matrix;

/// Nonzeros per inference batch unless the caller says otherwise: about 1 M keeps a
/// 256-wide layer's batch buffers near 1 GB on an average degree of 10.
pub const DEFAULT_BATCH_EDGES: usize = 1 << 20;

/// One batch of output rows `first .. first + k`, translated and padded once.
struct RowBatch {
    first: usize,
    k: usize,
    prepared: PreparedBatch,
}

/// What the last layer's rows are scored against: `classes` logits per node, its label and
/// its mask bits.
pub struct Targets {
    pub classes: usize,
    pub labels: Vec<i32>,
    pub mask_bits: Vec<u8>,
}

pub struct LayerwiseInference<B: Ops> {
    cfg: ModelConfig,
    /// Widths of the layers' inputs and outputs (features, hidden..., classes).
    widths: Vec<usize>,
    batches: Vec<RowBatch>,
    capacity: Capacity,
    /// The node features over all nodes (the first layer's resident input).
    features: Option<B::Mat>,
    labels: Vec<i32>,
    mask_bits: Vec<u8>,
    n: usize,
    /// Evaluations run and their wall seconds (the GPU waited for: the logits come back).
    passes: usize,
    seconds: f64,
}

impl<B: Ops + 'static> LayerwiseInference<B> {
    /// For model `cfg` on `graph` (the raw adjacency) with dense `features` (uploaded once),
    /// scored against `targets`; batches of about `batch_edges` nonzeros.
    pub fn new(b: &B, graph: &Csr, features: &Matrix, targets: Targets, cfg: &ModelConfig, batch_edges: usize) -> Result<Self> {
        Self::build(b, graph, features, targets, cfg, batch_edges)
    }

    /// For the node representations (`width` wide) of model `cfg` alone, with nothing to score
    /// them against (link prediction scores pairs of them): [`LayerwiseInference::logits`] only.
    pub fn representations(b: &B, graph: &Csr, features: &Matrix, width: usize, cfg: &ModelConfig, batch_edges: usize) -> Result<Self> {
        let targets = Targets { classes: width, labels: Vec::new(), mask_bits: Vec::new() };
        Self::build_unchecked_targets(b, graph, features, targets, cfg, batch_edges)
    }

    fn build(b: &B, graph: &Csr, features: &Matrix, targets: Targets, cfg: &ModelConfig, batch_edges: usize) -> Result<Self> {
        let n = graph.n_rows();
        if targets.labels.len() != n || targets.mask_bits.len() != n {
            return Err(Error::Shape(format!(
                "layer-wise inference over {n} nodes given {} labels, {} masks",
                targets.labels.len(),
                targets.mask_bits.len()
            )));
        }
        Self::build_unchecked_targets(b, graph, features, targets, cfg, batch_edges)
    }

    fn build_unchecked_targets(
        b: &B,
        graph: &Csr,
        features: &Matrix,
        targets: Targets,
        cfg: &ModelConfig,
        batch_edges: usize,
    ) -> Result<Self> {
        let Targets { classes, labels, mask_bits } = targets;
        if !supports(cfg) {
            return Err(Error::Unsupported(format!("{}: layer-wise inference runs GCN, SAGE and GIN without --batch-norm", cfg.model)));
        }
        let n = graph.n_rows();
        if features.rows != n {
            return Err(Error::Shape(format!("layer-wise inference over {n} nodes given {} feature rows", features.rows)));
        }
        let m = models::model_graph(cfg.model, graph)?;
        let batches = row_batches(&m, batch_edges.max(1))?;
        let capacity = batches.iter().fold(Capacity::default(), |c, r| Capacity {
            nodes: c.nodes.max(r.prepared.n).max(1),
            edges: c.edges.max(r.prepared.matrix.s.nnz()).max(1),
            feature_nnz: 0,
            later: 0,
        });
        // Padded once here, on all cores: every bind copies them as they are.
        let mut batches = batches;
        batches.par_iter_mut().try_for_each(|r| -> Result<()> {
            r.prepared.padded = Some(PaddedBatch::new(&r.prepared, capacity)?);
            Ok(())
        })?;
        Ok(LayerwiseInference {
            cfg: *cfg,
            widths: widths(features.cols, cfg.hidden, cfg.layers, classes),
            batches,
            capacity,
            features: Some(b.upload(features)?),
            labels,
            mask_bits,
            n,
            passes: 0,
            seconds: 0.0,
        })
    }

    /// The batches (output rows and all nodes read per batch), for reports.
    pub fn batch_sizes(&self) -> Vec<(usize, usize)> {
        self.batches.iter().map(|r| (r.k, r.prepared.n)).collect()
    }

    /// The logits of every node (rows in node order) of `net`'s parameters, on the host. After
    /// an error the features may be gone with the failed layer's model: later calls refuse.
    pub fn logits(&mut self, b: &B, net: &mut dyn Model<B>) -> Result<Matrix> {
        let mut logits = Matrix::zeros(self.n, *self.widths.last().expect("widths"));
        self.run(b, net, Last::Host(&mut logits))?;
        Ok(logits)
    }

    /// [`LayerwiseInference::logits`] kept on the device (n x the last width): for a task that
    /// scores them there (link prediction's pairs), nothing comes back to the host.
    pub fn outputs(&mut self, b: &B, net: &mut dyn Model<B>) -> Result<B::Mat> {
        let mut out = b.matrix(self.n, *self.widths.last().expect("widths"))?;
        self.run(b, net, Last::Device(&mut out))?;
        Ok(out)
    }

    /// Every layer over all nodes, batch by batch; the last layer's rows go to `last`.
    fn run(&mut self, b: &B, net: &mut dyn Model<B>, mut last: Last<'_, B>) -> Result<()> {
        let layers = self.widths.len() - 1;
        // The layer's input over all nodes, on the device: batches gather their rows from it.
        let mut input = self
            .features
            .take()
            .ok_or_else(|| Error::Unsupported("layer-wise inference lost its features to an earlier error; rebuild it".into()))?;
        for l in 0..layers {
            let (w_in, w_out) = (self.widths[l], self.widths[l + 1]);
            let one = ModelConfig { layers: 1, residual: false, batch_norm: false, ..self.cfg };
            let mut model = BoundModel::<B>::new(b, self.capacity, w_in, false, w_out, &one)?;
            model.replace_resident(Some(input));
            let hidden = l + 1 < layers;
            // A hidden layer's output over all nodes stays on the device; the last goes to `last`.
            let mut next = if hidden { Some(b.matrix(self.n, w_out)?) } else { None };
            let mut swap = |one: &mut dyn Model<B>| swap_layer(net, l, one);
            for r in &self.batches {
                model.bind(b, &r.prepared)?;
                let y = model.forward_eval(b, &mut swap)?;
                match (&mut next, &mut last) {
                    (Some(next), _) => b.copy_rows(y, r.k, next, r.first)?,
                    (None, Last::Device(out)) => b.copy_rows(y, r.k, out, r.first)?,
                    (None, Last::Host(m)) => b.download_head_into(y, r.k, &mut m.data[r.first * w_out..(r.first + r.k) * w_out])?,
                }
            }
            input = model.replace_resident(None).expect("set above");
            if let Some(next) = &mut next {
                b.relu(next)?;
                // Stack::new's rule: a residual hidden layer past the first, of equal widths.
                if self.cfg.residual && l >= 1 && w_in == w_out {
                    b.add_assign(next, &input)?;
                }
            }
            if l == 0 {
                // The features stay for the next evaluation.
                self.features = Some(input);
            }
            match next {
                Some(next) => input = next,
                None => break,
            }
        }
        Ok(())
    }
}

/// Where [`LayerwiseInference::run`] puts the last layer's rows.
enum Last<'a, B: Ops> {
    Host(&'a mut Matrix),
    Device(&'a mut B::Mat),
}

impl<B: Ops + 'static> Evaluate<B> for LayerwiseInference<B> {
    fn correct(&mut self, b: &B, net: &mut dyn Model<B>) -> Result<[f64; 3]> {
        if self.labels.len() != self.n {
            return Err(Error::Unsupported("this layer-wise inference was made for representations only (no labels to score)".into()));
        }
        let t0 = std::time::Instant::now();
        let logits = self.logits(b, net)?;
        self.passes += 1;
        self.seconds += t0.elapsed().as_secs_f64();
        Ok(score(&logits, &self.labels, &self.mask_bits))
    }

    fn summary(&self) -> String {
        format!(
            "layer-wise evaluation: {} passes of {:.1} ms ({} batches of up to {} nodes a layer)",
            self.passes,
            1e3 * self.seconds / self.passes.max(1) as f64,
            self.batches.len(),
            self.capacity.nodes
        )
    }
}

/// Whether [`LayerwiseInference`] runs model `cfg`.
pub fn supports(cfg: &ModelConfig) -> bool {
    can_rebind(cfg)
}

/// Correct predictions (first maximum, as argmax) among the train, validation and test nodes.
pub fn score(logits: &Matrix, labels: &[i32], mask_bits: &[u8]) -> [f64; 3] {
    let mut correct = [0.0; 3];
    for (v, row) in logits.data.chunks_exact(logits.cols.max(1)).enumerate() {
        let best = row.iter().enumerate().fold((0, f32::NEG_INFINITY), |acc, (c, &x)| if x > acc.1 { (c, x) } else { acc }).0;
        if best as i32 == labels[v] {
            for (i, bit) in [TRAIN_BIT, VAL_BIT, TEST_BIT].into_iter().enumerate() {
                if mask_bits[v] & bit != 0 {
                    correct[i] += 1.0;
                }
            }
        }
    }
    correct
}

/// Swaps layer `layer`'s parameters of `net` with those of the one-layer model `one` (names
/// `convs.{layer}.X` against `convs.0.X`).
fn swap_layer<B: Ops>(net: &mut dyn Model<B>, layer: usize, one: &mut dyn Model<B>) -> Result<()> {
    let prefix = format!("convs.{layer}.");
    let mut theirs: Vec<_> = net.params().into_iter().filter_map(|(n, p)| n.strip_prefix(&prefix).map(|s| (s.to_string(), p))).collect();
    let mut ours: Vec<_> = one.params().into_iter().filter_map(|(n, p)| n.strip_prefix("convs.0.").map(|s| (s.to_string(), p))).collect();
    if theirs.len() != ours.len() || theirs.iter().zip(&ours).any(|(a, b)| a.0 != b.0) {
        return Err(Error::Unsupported(format!("layer {layer} of the model has other parameters than a one-layer model of its widths")));
    }
    for ((_, a), (_, b)) in theirs.iter_mut().zip(ours.iter_mut()) {
        std::mem::swap(&mut **a, &mut **b);
    }
    Ok(())
}

/// `m`'s rows cut into contiguous batches of about `batch_edges` nonzeros (at least one row
/// each), each on local ids: its rows first, then the other columns it reads in ascending order.
fn row_batches(m: &Csr, batch_edges: usize) -> Result<Vec<RowBatch>> {
    let n = m.n_rows();
    let mut cuts = vec![0usize];
    let mut start_nnz = 0usize;
    for r in 0..n {
        let end = m.row_ptr()[r + 1] as usize;
        if end - start_nnz >= batch_edges && r + 1 < n {
            cuts.push(r + 1);
            start_nnz = end;
        }
    }
    cuts.push(n);
    cuts.dedup();
    cuts.par_windows(2).map(|w| row_batch(m, w[0], w[1])).collect()
}

fn row_batch(m: &Csr, first: usize, end: usize) -> Result<RowBatch> {
    let k = end - first;
    let edges = m.row_ptr()[first] as usize..m.row_ptr()[end] as usize;
    let cols = &m.col_idx()[edges.clone()];
    let mut others: Vec<u32> = cols.iter().copied().filter(|&c| (c as usize) < first || c as usize >= end).collect();
    others.sort_unstable();
    others.dedup();
    let local = |c: u32| -> u32 {
        let c_us = c as usize;
        if (first..end).contains(&c_us) { (c_us - first) as u32 } else { (k + others.binary_search(&c).expect("collected above")) as u32 }
    };
    let n_loc = k + others.len();
    let base = m.row_ptr()[first];
    let mut row_ptr: Vec<u32> = m.row_ptr()[first..=end].iter().map(|&p| p - base).collect();
    row_ptr.resize(n_loc + 1, (edges.end - edges.start) as u32);
    let col_idx = cols.iter().map(|&c| local(c)).collect();
    let s = Csr::new(n_loc, n_loc, row_ptr, col_idx, m.values()[edges].to_vec())?;
    let nodes: Vec<u32> = (first as u32..end as u32).chain(others).collect();
    let prepared = PreparedBatch {
        n: n_loc,
        nodes,
        sampled_edges: s.nnz(),
        matrix: WithTranspose::new(s),
        later: Vec::new(),
        // Rows come from the resident layer input, by node id.
        features: PreparedFeatures::Dense(Matrix::zeros(0, 0)),
        labels: vec![0; n_loc],
        mask_bits: vec![0; n_loc],
        loss_scale: None,
        loss_nodes: 0,
        padded: None,
    };
    Ok(RowBatch { first, k, prepared })
}
