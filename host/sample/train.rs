//! Mini-batch training: each epoch is `steps` batches made by a sampler on CPU worker threads
//! ([`Prefetch`], ahead of the step, so the step never waits for a batch that could have been
//! made already), each trained by a model built for that batch that borrows the parameters.
//!
//! Parameters and Adam's moments live in the trainer's full-graph model (which also evaluates,
//! exactly, on the full graph, and is what `--save` and `--checkpoint` write). A batch's model
//! is built on the batch's subgraph with its own activation buffers; its freshly initialised
//! parameters and BatchNorm buffers are swapped with the persistent ones (`std::mem::swap` of
//! the [`Param`](crate::nn::param::Param)s, no copy) for the step and swapped back after it. Building costs the batch's
//! allocations, its subgraph's and features' translation and the uploads: on the CPU 20-50% of
//! a cora step (`bench/NOTES.md`, "Sampled training"), most of it the translation, which a
//! model rebound in place to a new graph would redo too; so models are not rebound (yet).

use std::sync::Arc;
use std::time::Instant;

use super::batch::{BatchSource, NodeData, TrainBatch};
use super::prefetch::{Prefetch, PrefetchConfig};
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::input::InputFeatures;
use crate::nn::models::{self, Model, ModelConfig};
use crate::nn::train::EpochSteps;
use crate::ops::backend::{AdamHyper, Ops, Side};

/// Where the time of the epochs so far went (seconds, summed over epochs).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct SampleTimes {
    pub epochs: usize,
    pub batches: usize,
    /// Worker time making batches (sampling, gathering node data), summed over the workers:
    /// overlapped with the steps.
    pub sample_s: f64,
    /// Time the step loop waited for a batch the workers had not finished.
    pub wait_s: f64,
    /// Building each batch's model: allocations, the subgraph's translation and the uploads of
    /// its graph and node data (the host-to-device transfer on the GPU).
    pub build_s: f64,
    /// Forward, loss, backward and Adam of every batch (on the GPU: enqueueing them, plus the
    /// wait for them when [`SampledTraining::sync_each_step`] is set).
    pub step_s: f64,
    /// Wall time of the training part of the epochs (no evaluation).
    pub wall_s: f64,
    pub sampled_edges: u64,
    pub batch_nodes: u64,
}

impl SampleTimes {
    /// The share of the training time spent outside steps (waiting for a batch or building its
    /// model): with a step synchronised per batch, the GPU's idle time between steps.
    pub fn idle_fraction(&self) -> f64 {
        if self.wall_s > 0.0 { (1.0 - self.step_s / self.wall_s).max(0.0) } else { 0.0 }
    }
}

/// What one sampled run needs besides the trainer's model.
pub struct SampledTraining {
    source: Arc<BatchSource>,
    data: Arc<NodeData>,
    n_all: usize,
    steps: usize,
    prefetch: PrefetchConfig,
    cfg: ModelConfig,
    classes: usize,
    /// Wait for every step to finish before taking the next batch (for timing the split only).
    pub sync_each_step: bool,
    pub times: SampleTimes,
    /// The batches of this and the following epochs, made ahead across epoch boundaries (the
    /// first batch of an epoch is made while the last one of the previous epoch trains), with
    /// the epoch the next batch belongs to.
    stream: Option<(Batches, usize)>,
}

type Batches = Prefetch<(Result<TrainBatch>, f64)>;

impl SampledTraining {
    /// `steps` batches per epoch from `source` over a graph of `n_all` nodes; models as `cfg`.
    pub fn new(source: BatchSource, data: NodeData, n_all: usize, steps: usize, prefetch: PrefetchConfig, cfg: ModelConfig, classes: usize) -> Result<Self> {
        if steps == 0 {
            return Err(Error::Unsupported("--steps-per-epoch must be at least 1".into()));
        }
        models::check(&cfg)?;
        if data.features.rows() != n_all || data.labels.len() != n_all {
            return Err(Error::Shape(format!(
                "sampled training over {n_all} nodes was given {} feature rows and {} labels (the batches gather them on the host)",
                data.features.rows(),
                data.labels.len()
            )));
        }
        Ok(SampledTraining {
            source: Arc::new(source),
            data: Arc::new(data),
            n_all,
            steps,
            prefetch,
            cfg,
            classes,
            sync_each_step: false,
            times: SampleTimes::default(),
            stream: None,
        })
    }

    /// One step on `batch` with `net`'s parameters; returns the batch's statistics (read later,
    /// so the GPU is not waited for per batch).
    fn step<B: Ops + 'static>(&mut self, b: &B, net: &mut dyn Model<B>, hyper: &AdamHyper, batch: &TrainBatch) -> Result<B::Stats> {
        let t0 = Instant::now();
        let n = batch.nodes.len();
        let mut model = build_batch_model(b, batch, self.classes, &self.cfg)?;
        let mut input = InputFeatures::new(b, &batch.features)?;
        let labels = b.labels(&batch.labels, &batch.mask_bits)?;
        let mut dlogits = b.matrix(n, self.classes)?;
        let mut stats = b.stats()?;
        let mut scale = match &batch.loss_scale {
            Some(w) => {
                let diag = Csr::new(n, n, (0..=n as u32).collect(), (0..n as u32).collect(), w.clone())?;
                let g = b.graph(diag)?;
                let v = b.graph_values(&g, Side::Forward)?;
                Some((g, v, b.matrix(n, self.classes)?))
            }
            None => None,
        };
        let t1 = Instant::now();
        swap_state(net, model.as_mut())?;
        let stepped = (|| {
            b.begin_step()?;
            let logits = model.forward(b, &mut input, true)?;
            let inv = 1.0 / batch.loss_nodes().max(1) as f32;
            b.cross_entropy(logits, &labels, inv, &mut dlogits, &mut stats)?;
            let d = match &mut scale {
                // Weighted loss: its gradient is diag(w) times the mean's (one SpMM, no new op).
                Some((g, v, weighted)) => {
                    b.spmm(g, Side::Forward, v, &dlogits, weighted)?;
                    &*weighted
                }
                None => &dlogits,
            };
            model.backward(b, &input, d)?;
            for (_, p) in model.params() {
                p.adam(b, hyper)?;
            }
            if self.sync_each_step {
                b.synchronize()?;
            }
            Ok(())
        })();
        // The parameters go back even if the step failed: the trainer must not keep the batch's.
        swap_state(net, model.as_mut())?;
        stepped?;
        let t2 = Instant::now();
        self.times.build_s += (t1 - t0).as_secs_f64();
        self.times.step_s += (t2 - t1).as_secs_f64();
        self.times.sampled_edges += batch.sampled_edges as u64;
        self.times.batch_nodes += n as u64;
        self.times.batches += 1;
        Ok(stats)
    }
}

impl<B: Ops + 'static> EpochSteps<B> for SampledTraining {
    fn train_epoch(&mut self, b: &Arc<B>, net: &mut dyn Model<B>, hyper: &AdamHyper, epoch: usize) -> Result<f64> {
        let t0 = Instant::now();
        if self.stream.as_ref().is_none_or(|(_, next)| *next != epoch) {
            // A new run (or one resumed elsewhere): batches from this epoch on, as far as u32 epochs go.
            let (source, data, n_all, steps) = (Arc::clone(&self.source), Arc::clone(&self.data), self.n_all, self.steps);
            let first = u32::try_from(epoch).map_err(|_| Error::Unsupported(format!("epoch {epoch} is past 2^32")))? as usize;
            let total = (u32::MAX as usize - first).saturating_mul(steps);
            let batches = Prefetch::new(total, self.prefetch, move |k| {
                let t = Instant::now();
                let batch = source.make(&data, n_all, (first + k / steps) as u32, (k % steps) as u32);
                (batch, t.elapsed().as_secs_f64())
            })?;
            self.stream = Some((batches, epoch));
        }
        let (mut batches, _) = self.stream.take().expect("made above");
        let waited_before = batches.waited();
        let mut stats = Vec::with_capacity(self.steps);
        for _ in 0..self.steps {
            let (batch, seconds) = batches.next().expect("batches for every epoch up to 2^32");
            self.times.sample_s += seconds;
            stats.push(self.step(&**b, net, hyper, &batch?)?);
        }
        self.times.wait_s += (batches.waited() - waited_before).as_secs_f64();
        self.stream = Some((batches, epoch + 1));
        self.times.wall_s += t0.elapsed().as_secs_f64();
        self.times.epochs += 1;
        let mut loss = 0.0;
        for s in &stats {
            loss += b.read_stats(s)?.loss;
        }
        Ok(loss / stats.len().max(1) as f64)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn summary(&self) -> String {
        let t = &self.times;
        let per = |s: f64| 1e3 * s / t.epochs.max(1) as f64;
        format!(
            "sampled training: per epoch {:.1} ms ({} batches: step {:.1} ms, model build + upload {:.1} ms, waiting for the sampler {:.1} ms; \
             sampling {:.1} ms of worker time, overlapped); {:.0} nodes and {:.0} sampled edges per batch, {:.2} M sampled edges/s",
            per(t.wall_s),
            t.batches / t.epochs.max(1),
            per(t.step_s),
            per(t.build_s),
            per(t.wait_s),
            per(t.sample_s),
            t.batch_nodes as f64 / t.batches.max(1) as f64,
            t.sampled_edges as f64 / t.batches.max(1) as f64,
            t.sampled_edges as f64 / t.wall_s.max(1e-12) / 1e6,
        )
    }
}

/// The model of `batch`: on its aggregation with the GraphSAINT weights when it has one (GCN,
/// SAGE, GIN), else on its subgraph, normalised by the model as on a full graph.
pub fn build_batch_model<B: Ops + 'static>(b: &B, batch: &TrainBatch, classes: usize, cfg: &ModelConfig) -> Result<Box<dyn Model<B>>> {
    let (n, f) = (batch.nodes.len(), batch.features.cols());
    if let Some(adj) = &batch.adjacency {
        // The weighted aggregation is the model's matrix, used as it is (`build_on`).
        debug_assert_eq!(adj.n_rows(), n);
        match cfg.model {
            "gcn" => return Ok(Box::new(models::gcn::build_on(b, adj.clone(), f, classes, cfg, None)?)),
            "sage" => return Ok(Box::new(models::sage::build_on(b, adj.clone(), f, classes, cfg, None)?)),
            "gin" => return Ok(Box::new(models::gin::build_on(b, adj.clone(), f, classes, cfg, None)?)),
            _ => {}
        }
    }
    models::build(b, &batch.graph, f, classes, cfg)
}

/// Swaps the parameters and buffers of two models of one config (names checked: a mismatch is
/// a bug, reported rather than trained on).
pub fn swap_state<B: Ops>(a: &mut dyn Model<B>, b: &mut dyn Model<B>) -> Result<()> {
    let (mut pa, mut pb) = (a.params(), b.params());
    if pa.len() != pb.len() || pa.iter().zip(&pb).any(|(x, y)| x.0 != y.0) {
        return Err(Error::Unsupported("a batch's model has other parameters than the trained model".into()));
    }
    for ((_, x), (_, y)) in pa.iter_mut().zip(pb.iter_mut()) {
        std::mem::swap(&mut **x, &mut **y);
    }
    drop((pa, pb));
    let (mut ba, mut bb) = (a.buffers(), b.buffers());
    if ba.len() != bb.len() || ba.iter().zip(&bb).any(|(x, y)| x.0 != y.0) {
        return Err(Error::Unsupported("a batch's model has other buffers than the trained model".into()));
    }
    for ((_, x), (_, y)) in ba.iter_mut().zip(bb.iter_mut()) {
        std::mem::swap(&mut **x, &mut **y);
    }
    Ok(())
}
