//! The link-prediction loop, as PyG's `examples/link_pred.py`: every epoch draws one set of
//! training negatives (`neg_ratio` per training edge, uniform over the whole graph's
//! non-edges, deterministic in (seed, epoch)), scores the training edges and the negatives with
//! the decoder on the encoder's representations of the message-passing graph, takes binary
//! cross entropy with logits (mean over the pairs), and one Adam step; then scores the fixed
//! validation and test pairs in evaluation mode. The run reports the test metrics of the epoch
//! with the best validation AUC, whose weights it keeps. Generic over the backend: the same code
//! on the CPU and the GPU. With the dot decoder the training step keeps its pairs as symmetric
//! pair patterns on the backend ([`LinkTrainer::step`]: the negatives drawn into theirs on the
//! device, nothing read back); the MLP decoder's step reads its pairs by index
//! ([`crate::task::link::step_pairs`]).
//! The best epoch is by validation AUC or Hits@K ([`BestBy`]). With `batch_edges` an epoch is
//! several steps instead, as OGB's baselines train (`batched`).

use std::sync::Arc;
use std::time::Instant;

use rayon::slice::ParallelSliceMut;

use crate::error::{Error, Result};
use crate::nn::embedding::NodeInput;
use crate::nn::input::InputFeatures;
use crate::nn::models::{self, Model, ModelConfig};
use crate::nn::param::Param;
use crate::ops::nn::negative_sample::EMPTY;
use crate::ops::nn::pair_dot::PairDotOp;
use crate::ops::nn::{AdamHyper, Ops};
use crate::shared::rng::negative_stream_key;
use crate::task::Flow;
use crate::task::link::decoder::{Decoder, DecoderKind};
use crate::task::link::metric::LinkMetrics;
use crate::task::link::pairs::PairSet;
use crate::task::link::split::{LinkSplit, Pair};
use crate::tensor::Matrix;

/// Settings of a link-prediction run besides the encoder's.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkConfig {
    pub lr: f32,
    pub weight_decay: f32,
    /// Training negatives per training edge, every epoch.
    pub neg_ratio: f64,
    /// Seeds the training negatives (the split has its own seed).
    pub seed: u64,
    pub decoder: DecoderKind,
    /// Training positives per optimiser step (`None`: all of them, one step an epoch).
    #[serde(default)]
    pub batch_edges: Option<usize>,
    /// Which validation metric picks the reported epoch.
    #[serde(default)]
    pub best_by: BestBy,
}

/// The validation metric that picks the run's epoch (its test metrics are reported, its weights
/// kept): ROC AUC as PyG's link_pred.py, or Hits@K as OGB's leaderboards (ogbl-ddi: Hits@20).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
pub enum BestBy {
    #[default]
    Auc,
    #[value(name = "hits20")]
    Hits20,
    #[value(name = "hits50")]
    Hits50,
    #[value(name = "hits100")]
    Hits100,
}

impl BestBy {
    /// The metric's value in `m`.
    pub fn of(self, m: &LinkMetrics) -> f64 {
        match self {
            BestBy::Auc => m.auc,
            BestBy::Hits20 => m.hits[0],
            BestBy::Hits50 => m.hits[1],
            BestBy::Hits100 => m.hits[2],
        }
    }
}

impl Default for LinkConfig {
    /// PyG's `link_pred.py`: Adam at lr 0.01 without weight decay, one negative per edge.
    fn default() -> Self {
        LinkConfig {
            lr: 0.01,
            weight_decay: 0.0,
            neg_ratio: 1.0,
            seed: 0,
            decoder: DecoderKind::Dot,
            batch_edges: None,
            best_by: BestBy::Auc,
        }
    }
}

/// One epoch of a run.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkEpoch {
    pub epoch: usize,
    pub loss: f64,
    pub val: LinkMetrics,
    pub test: LinkMetrics,
    /// Negative slots left empty this epoch (every attempt hit an edge) or drawn twice.
    pub negatives_dropped: usize,
}

/// A finished run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LinkHistory {
    pub epochs: Vec<LinkEpoch>,
    /// The first epoch with the highest validation metric ([`BestBy`]; 1-based) and its metrics.
    pub best_epoch: usize,
    pub best_val: LinkMetrics,
    pub test: LinkMetrics,
    pub seconds: f64,
    /// Median milliseconds of an epoch's training part (sampling, step) and of its evaluation.
    pub train_ms: f64,
    pub eval_ms: f64,
}

impl LinkHistory {
    pub(crate) fn new(epochs: Vec<LinkEpoch>, by: BestBy, seconds: f64, mut train_ms: Vec<f64>, mut eval_ms: Vec<f64>) -> Self {
        let best = epochs.iter().fold(None::<&LinkEpoch>, |best, e| match best {
            Some(b) if by.of(&b.val) >= by.of(&e.val) => Some(b),
            _ => Some(e),
        });
        let (best_epoch, best_val, test) = best.map_or((0, LinkMetrics::default(), LinkMetrics::default()), |b| (b.epoch, b.val, b.test));
        LinkHistory { epochs, best_epoch, best_val, test, seconds, train_ms: median(&mut train_ms), eval_ms: median(&mut eval_ms) }
    }
}

/// Negative slots an epoch: `neg_ratio` per training edge, at least one.
fn negative_count(train: usize, neg_ratio: f64) -> usize {
    ((train as f64 * neg_ratio).round() as usize).max(1)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What the encoder of a [`LinkTrainer`] is built on: the message-passing graph and the input
/// over its nodes (`full_batch`: the full-graph step's pair patterns are made too), or one node.
struct Encoder<'a> {
    graph: &'a crate::graph::Csr,
    input: NodeInput<'a>,
    full_batch: bool,
}

/// Every node's representation from an encoder's parameters, computed another way than its
/// full-graph forward (layer by layer in node batches: `sample::layerwise`, wired by the CLI,
/// since the task and sample layers do not import each other).
pub trait Representations<B: Ops> {
    /// The n x width output of `net`'s parameters, rows in node order, on the backend.
    fn all_nodes(&mut self, b: &B, net: &mut dyn Model<B>) -> Result<B::Mat>;
}

/// The validation and test pairs scored from `z` in evaluation mode, and their metrics.
fn score_sets<B: Ops + 'static>(
    b: &B,
    decoder: &Decoder<B>,
    val: &mut PairSet<B>,
    test: &mut PairSet<B>,
    z: &B::Mat,
) -> Result<(LinkMetrics, LinkMetrics)> {
    decoder.score(b, val, z)?;
    decoder.score(b, test, z)?;
    let (vp, vn) = val.split_scores(b)?;
    let (tp, tn) = test.split_scores(b)?;
    Ok((LinkMetrics::of(&vp, &vn)?, LinkMetrics::of(&tp, &tn)?))
}

/// The dot decoder's pair lists of a training step.
struct DotPairs<B: Ops> {
    pos: <B as PairDotOp>::Pairs,
    neg: <B as PairDotOp>::Pairs,
}

mod batched;

pub struct LinkTrainer<B: Ops + 'static> {
    backend: Arc<B>,
    net: Box<dyn Model<B>>,
    input: InputFeatures<B>,
    n: usize,
    /// The whole graph (every split edge, both directions): training negatives avoid it.
    full: B::Graph,
    train_pos: Vec<Pair>,
    val: PairSet<B>,
    test: PairSet<B>,
    decoder: Decoder<B>,
    /// The dot decoder's training pairs as symmetric pair patterns (`ops::nn::pair_dot`): the
    /// training positives (built once) and the epoch's negatives (rebuilt on the backend every
    /// epoch: nothing of a step goes through the host). `None` with the MLP decoder, whose
    /// step reads its pairs by index (`step_pairs`).
    dot_pairs: Option<DotPairs<B>>,
    /// A step's pairs as index arrays (`step_on`: batched epochs, and the MLP decoder's
    /// full-batch one), made at the first such step.
    step_pairs: Option<crate::task::link::step_pairs::StepPairs<B>>,
    dz: B::Mat,
    stats: B::Stats,
    hyper: AdamHyper,
    cfg: LinkConfig,
    /// Seconds spent building the model and the pair patterns.
    pub setup_seconds: f64,
}

impl<B: Ops + 'static> LinkTrainer<B> {
    /// The encoder `model` (output width = `embedding`) on `split`'s message-passing graph with
    /// `input` (node features, or a learnable table trained with the model), and the fixed
    /// validation and test pairs.
    pub fn new<'a>(
        backend: Arc<B>,
        input: impl Into<NodeInput<'a>>,
        split: &LinkSplit,
        model: &ModelConfig,
        embedding: usize,
        cfg: &LinkConfig,
    ) -> Result<Self> {
        let t0 = Instant::now();
        let input: NodeInput = input.into();
        Self::check(split.nodes, Some(&input), cfg, embedding)?;
        let mp = split.message_passing_graph()?;
        let t = Self::build_on(backend, Encoder { graph: &mp, input, full_batch: true }, split, model, embedding, cfg)?;
        Ok(LinkTrainer { setup_seconds: t0.elapsed().as_secs_f64(), ..t })
    }

    /// A trainer whose encoder holds only the parameters (and Adam's moments), built on a
    /// one-node graph with a one-row input of the features' width: it never runs on the whole
    /// graph. For link-neighbour sampled training (the batches borrow the parameters) evaluated
    /// by [`LinkTrainer::evaluate_from`] (layer by layer) where the full-graph model does not fit.
    pub fn params_only(
        backend: Arc<B>,
        feature_width: usize,
        split: &LinkSplit,
        model: &ModelConfig,
        embedding: usize,
        cfg: &LinkConfig,
    ) -> Result<Self> {
        Self::check(split.nodes, None, cfg, embedding)?;
        let one = crate::graph::Csr::new(1, 1, vec![0, 0], Vec::new(), Vec::new())?;
        let x = crate::nn::input::HostFeatures::Dense(Matrix::zeros(1, feature_width));
        Self::build_on(backend, Encoder { graph: &one, input: NodeInput::Features(&x), full_batch: false }, split, model, embedding, cfg)
    }

    /// What `new` refuses before anything is built.
    fn check(n: usize, input: Option<&NodeInput>, cfg: &LinkConfig, embedding: usize) -> Result<()> {
        match input {
            Some(NodeInput::Features(f)) if f.rows() != n => {
                return Err(Error::Shape(format!("link prediction: {} feature rows for {n} nodes", f.rows())));
            }
            // Refused before the model is built.
            Some(NodeInput::Learnable { width }) => crate::nn::embedding::check_table(n, *width)?,
            _ => {}
        }
        if cfg.batch_edges == Some(0) {
            return Err(Error::Unsupported("--batch-edges 0: a batch needs at least one training edge".into()));
        }
        if !(cfg.neg_ratio.is_finite() && cfg.neg_ratio > 0.0 && cfg.neg_ratio <= 1000.0) {
            return Err(Error::Unsupported(format!("--neg-ratio {} must be in (0, 1000]", cfg.neg_ratio)));
        }
        if embedding == 0 {
            return Err(Error::Unsupported("the embedding width must be at least 1".into()));
        }
        Ok(())
    }

    /// The trainer with its encoder as `enc` says; the evaluation pairs, the negatives' graph and
    /// the decoder over all of `split`'s nodes.
    fn build_on(backend: Arc<B>, enc: Encoder, split: &LinkSplit, model: &ModelConfig, embedding: usize, cfg: &LinkConfig) -> Result<Self> {
        let t0 = Instant::now();
        let Encoder { graph, input, full_batch } = enc;
        let n = split.nodes;
        let b = &*backend;
        let net = models::build(b, graph, input.cols(), embedding, model)?;
        let input = input.build(b, graph.n_rows(), model)?;
        let full = b.graph(split.full_graph()?)?;
        let val = PairSet::new(b, n, &split.val_pos, &split.val_neg)?;
        let test = PairSet::new(b, n, &split.test_pos, &split.test_neg)?;
        val.check_order(b)?;
        let hyper = AdamHyper { lr: cfg.lr, weight_decay: cfg.weight_decay, ..AdamHyper::default() };
        let dot_pairs = match cfg.decoder {
            DecoderKind::Dot if full_batch => Some(DotPairs {
                pos: b.pair_list(n, &split.train, true)?,
                neg: b.negative_list(n, negative_count(split.train.len(), cfg.neg_ratio))?,
            }),
            DecoderKind::Dot | DecoderKind::Mlp => None,
        };
        let trainer = LinkTrainer {
            net,
            input,
            n,
            full,
            train_pos: split.train.clone(),
            val,
            test,
            decoder: Decoder::new(b, cfg.decoder, n, embedding, model.seed)?,
            dot_pairs,
            step_pairs: None,
            dz: b.matrix(n, embedding)?,
            stats: b.stats()?,
            hyper,
            cfg: *cfg,
            setup_seconds: 0.0,
            backend: backend.clone(),
        };
        backend.synchronize()?;
        Ok(LinkTrainer { setup_seconds: t0.elapsed().as_secs_f64(), ..trainer })
    }

    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    /// Negative slots drawn an epoch.
    pub fn negative_count(&self) -> usize {
        negative_count(self.train_pos.len(), self.cfg.neg_ratio)
    }

    /// The training negatives of `epoch` (0-based): empty slots and repeats dropped; returns
    /// them with the number dropped.
    pub fn negatives(&self, epoch: usize) -> Result<(Vec<Pair>, usize)> {
        let count = self.negative_count();
        let key = negative_stream_key(self.cfg.seed, epoch as u32);
        let mut negs = self.backend.negative_pairs(&self.full, key, count)?;
        negs.retain(|p| p[0] != EMPTY);
        // A pair drawn twice in one epoch is scored once (a repeated pattern entry).
        // In parallel: a whole epoch's negatives (907k on ogbl-ddi) in a batched epoch of
        // a few ms of device work.
        negs.par_sort_unstable();
        negs.dedup();
        let dropped = count - negs.len();
        Ok((negs, dropped))
    }

    /// One training step on the training edges and `epoch`'s negatives; returns the loss and
    /// the negatives dropped.
    pub fn train_epoch(&mut self, epoch: usize) -> Result<(f64, usize)> {
        if let Some(k) = self.cfg.batch_edges {
            return self.train_epoch_batched(epoch, k);
        }
        if self.dot_pairs.is_some() {
            self.step(epoch)?;
            let b = &*self.backend;
            let loss = b.read_stats(&self.stats)?.loss;
            let pairs = self.dot_pairs.as_ref().expect("checked above");
            return Ok((loss, self.negative_count() - b.pair_distinct(&pairs.neg)?));
        }
        let (negs, dropped) = self.negatives(epoch)?;
        // The whole training set as one batch (`step_on`, the batched epoch's step).
        let pos = std::mem::take(&mut self.train_pos);
        let pairs = pos.len() + negs.len();
        let step = self.step_on(&pos, &negs, 1.0 / pairs.max(1) as f64, false);
        self.train_pos = pos;
        step?;
        Ok((self.backend.read_stats(&self.stats)?.loss, dropped))
    }

    /// The dot decoder's training step of `epoch`, enqueued only (the loss stays in the stats;
    /// nothing is read back): the negatives drawn into their pattern on the backend, the
    /// encoder's forward, the scores of both lists, the loss, the gradient of z through both
    /// patterns, the encoder's backward and Adam. What `bench link` times.
    pub fn step(&mut self, epoch: usize) -> Result<()> {
        let count = self.negative_count();
        let key = negative_stream_key(self.cfg.seed, epoch as u32);
        let b = self.backend.clone();
        let b = &*b;
        let Some(p) = self.dot_pairs.as_mut() else {
            return Err(Error::Unsupported(
                "LinkTrainer::step is the full-graph dot decoder's step (the MLP decoder and a params-only trainer train otherwise)".into(),
            ));
        };
        b.negative_pattern(&self.full, key, count, &mut p.neg)?;
        b.begin_step()?;
        let z = self.net.forward(b, &mut self.input, true)?;
        b.pair_dot(&mut p.pos, z)?;
        b.pair_dot(&mut p.neg, z)?;
        b.pair_bce(&mut p.pos, &mut p.neg, &mut self.stats)?;
        b.pair_dot_backward(&p.pos, z, false, &mut self.dz)?;
        b.pair_dot_backward(&p.neg, z, true, &mut self.dz)?;
        self.net.backward(b, &mut self.input, &mut self.dz)?;
        let params = self.net.params().into_iter().chain(self.decoder.params()).chain(self.input.params()).map(|(_, p)| p);
        Param::adam_all(b, params, &self.hyper)
    }

    /// Scores of the validation and test pairs in evaluation mode, and their metrics.
    pub fn evaluate(&mut self) -> Result<(LinkMetrics, LinkMetrics)> {
        let b = self.backend.clone();
        let b = &*b;
        let z = self.net.forward(b, &mut self.input, false)?;
        score_sets(b, &self.decoder, &mut self.val, &mut self.test, z)
    }

    /// [`LinkTrainer::evaluate`] with every node's representation computed by `r` from the
    /// encoder's parameters (layer by layer, for a [`LinkTrainer::params_only`] trainer) instead
    /// of the full-graph forward.
    pub fn evaluate_from(&mut self, r: &mut dyn Representations<B>) -> Result<(LinkMetrics, LinkMetrics)> {
        let b = self.backend.clone();
        let b = &*b;
        let z = r.all_nodes(b, &mut *self.net)?;
        let (want, got) = ((self.n, B::shape(&self.dz).1), B::shape(&z));
        if got != want {
            return Err(Error::Shape(format!("representations of {} x {} for {} nodes of width {}", got.0, got.1, want.0, want.1)));
        }
        score_sets(b, &self.decoder, &mut self.val, &mut self.test, &z)
    }

    /// Trains epochs `done.len()..epochs` (continuing `done`, empty for a new run); `on_epoch`
    /// sees the trainer after each (to keep the best weights) and may stop the run.
    pub fn fit(
        &mut self,
        done: Vec<LinkEpoch>,
        epochs: usize,
        mut on_epoch: impl FnMut(&mut Self, &LinkEpoch) -> Result<Flow>,
    ) -> Result<LinkHistory> {
        let t0 = Instant::now();
        let (mut train_ms, mut eval_ms) = (Vec::new(), Vec::new());
        let mut run = done;
        for e in run.len()..epochs {
            let t = Instant::now();
            let (loss, negatives_dropped) = self.train_epoch(e)?;
            train_ms.push(t.elapsed().as_secs_f64() * 1e3);
            if !loss.is_finite() {
                return Err(Error::Unsupported(format!("the loss became {loss} at epoch {}; try a smaller --lr", e + 1)));
            }
            let t = Instant::now();
            let (val, test) = self.evaluate()?;
            eval_ms.push(t.elapsed().as_secs_f64() * 1e3);
            let rec = LinkEpoch { epoch: e + 1, loss, val, test, negatives_dropped };
            run.push(rec);
            if on_epoch(self, &rec)? == Flow::Stop {
                break;
            }
        }
        Ok(LinkHistory::new(run, self.cfg.best_by, t0.elapsed().as_secs_f64(), train_ms, eval_ms))
    }

    /// Every parameter (encoder's, decoder's, a learnable input's) with Adam's moments and the encoder's
    /// buffers (`param.NAME`, `m.NAME`, `v.NAME`, `buffer.NAME`; downloaded) and the step
    /// counter: what a checkpoint holds.
    pub fn optimizer_state(&mut self) -> Result<(Vec<(String, Matrix)>, u32)> {
        let b = self.backend.clone();
        let mut out = Vec::new();
        for (name, p) in self.net.params().into_iter().chain(self.decoder.params()).chain(self.input.params()) {
            out.push((format!("param.{name}"), b.download(&p.value)?));
            let [m, v] = p.moments();
            out.push((format!("m.{name}"), b.download(m)?));
            out.push((format!("v.{name}"), b.download(v)?));
        }
        for (name, m) in self.net.buffers() {
            out.push((format!("buffer.{name}"), b.download(m)?));
        }
        Ok((out, b.steps()?))
    }

    /// Restores [`LinkTrainer::optimizer_state`]: every tensor by name and shape (a missing or
    /// misshapen one is refused naming it) and the step counter.
    pub fn load_optimizer_state(&mut self, state: &[(String, Matrix)], steps: u32) -> Result<()> {
        let b = self.backend.clone();
        let find = |name: &str, shape: (usize, usize)| -> Result<&Matrix> {
            let m = state
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, m)| m)
                .ok_or_else(|| Error::Unsupported(format!("the checkpoint has no tensor '{name}' (a checkpoint of another model?)")))?;
            if (m.rows, m.cols) != shape {
                return Err(Error::Unsupported(format!(
                    "checkpoint tensor '{name}' is {} x {}, the model's {} x {}",
                    m.rows, m.cols, shape.0, shape.1
                )));
            }
            Ok(m)
        };
        for (name, p) in self.net.params().into_iter().chain(self.decoder.params()).chain(self.input.params()) {
            let shape = B::shape(&p.value);
            p.value = b.upload(find(&format!("param.{name}"), shape)?)?;
            let (m, v) = (b.upload(find(&format!("m.{name}"), shape)?)?, b.upload(find(&format!("v.{name}"), shape)?)?);
            let [pm, pv] = p.moments();
            *pm = m;
            *pv = v;
        }
        for (name, m) in self.net.buffers() {
            let shape = B::shape(m);
            *m = b.upload(find(&format!("buffer.{name}"), shape)?)?;
        }
        b.set_steps(steps)
    }

    /// The encoder's, the decoder's and a learnable input's parameters and the encoder's
    /// buffers by name (downloaded): what a saved model holds.
    pub fn weights(&mut self) -> Result<Vec<(String, Matrix)>> {
        let b = self.backend.clone();
        let mut out: Vec<(String, Matrix)> = self
            .net
            .params()
            .into_iter()
            .chain(self.decoder.params())
            .chain(self.input.params())
            .map(|(name, p)| Ok((name, b.download(&p.value)?)))
            .collect::<Result<_>>()?;
        for (name, m) in self.net.buffers() {
            out.push((name, b.download(m)?));
        }
        Ok(out)
    }

    /// What the sampled loop (`sampled.rs`) trains and draws from.
    pub(crate) fn sampled_parts(&mut self) -> crate::task::link::sampled::TrainerParts<'_, B> {
        crate::task::link::sampled::TrainerParts {
            net: &mut *self.net,
            decoder: &mut self.decoder,
            train_pos: &self.train_pos,
            full: &self.full,
            hyper: &self.hyper,
            cfg: &self.cfg,
        }
    }
}
