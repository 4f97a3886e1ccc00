//! Node classification's training loop: one step is forward (train mode), the loss (softmax
//! cross entropy over the train mask), backward and Adam on every parameter; an epoch adds an
//! evaluation forward that counts correct nodes per mask (the metric: accuracy). Reports follow
//! PyG's examples: test accuracy at the epoch of best validation accuracy.

use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::gpu::timing::Timing;
use crate::nn::input::{HostFeatures, InputFeatures};
use crate::nn::kept_state::KeptState;
use crate::nn::models::{self, Model, ModelConfig};
use crate::nn::param::Param;
use crate::ops::backend::{Stats, TEST_BIT, TRAIN_BIT, VAL_BIT};
use crate::ops::nn::{AdamHyper, Ops};
use crate::task::Flow;
use crate::task::node::data::Dataset;
use crate::tensor::Matrix;

/// Optimiser settings of a run (the model's own are in [`ModelConfig`]).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrainConfig {
    pub epochs: usize,
    pub lr: f32,
    pub weight_decay: f32,
}

impl TrainConfig {
    /// What is wrong with the optimiser settings, if anything (the CLI's `--lr` and
    /// `--weight-decay` checks, and a checkpoint's settings: the same rules for both).
    pub fn problem(&self) -> Option<String> {
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Some(format!("learning rate {} must be a finite number > 0", self.lr));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Some(format!("weight decay {} must be a finite number >= 0", self.weight_decay));
        }
        None
    }
}

impl EpochRecord {
    /// What is wrong with a recorded epoch read from a file (its number, a loss that is not a
    /// finite number, an accuracy outside [0, 1]), if anything.
    pub fn problem(&self, expected_epoch: usize) -> Option<String> {
        if self.epoch != expected_epoch {
            return Some(format!("epoch {} recorded where epoch {expected_epoch} belongs", self.epoch));
        }
        if !self.loss.is_finite() || self.loss < 0.0 {
            return Some(format!("epoch {}: loss {} is not a finite number >= 0", self.epoch, self.loss));
        }
        for (what, a) in [("train", self.train_acc), ("validation", self.val_acc), ("test", self.test_acc)] {
            if !(0.0..=1.0).contains(&a) {
                return Some(format!("epoch {}: {what} accuracy {a} is outside [0, 1]", self.epoch));
            }
        }
        None
    }
}

impl Default for TrainConfig {
    /// PyG's Planetoid examples: 200 epochs, lr 0.01, weight decay 5e-4.
    fn default() -> Self {
        TrainConfig { epochs: 200, lr: 0.01, weight_decay: 5e-4 }
    }
}

/// One epoch of a run.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpochRecord {
    pub epoch: usize,
    pub loss: f64,
    pub train_acc: f64,
    pub val_acc: f64,
    pub test_acc: f64,
}

/// Nodes per mask.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct MaskSizes {
    pub train: usize,
    pub val: usize,
    pub test: usize,
}

pub struct Trainer<B: Ops + 'static> {
    backend: Arc<B>,
    net: Box<dyn Model<B>>,
    input: InputFeatures<B>,
    labels: B::Labels,
    dlogits: B::Mat,
    train_stats: B::Stats,
    eval_stats: B::Stats,
    /// Scratch gradient for the evaluation pass (never read).
    eval_dlogits: B::Mat,
    inv_n_train: f32,
    hyper: AdamHyper,
    sizes: MaskSizes,
    step_graph: Option<B::Recording>,
    eval_graph: Option<B::Recording>,
    /// Mini-batch training in place of the full-graph step (see [`EpochSteps`]).
    epoch_steps: Option<Box<dyn EpochSteps<B>>>,
    /// Evaluation in place of the full-graph model's forward (see [`Evaluate`]), with the
    /// correct counts of its last run.
    evaluator: Option<Box<dyn Evaluate<B>>>,
    evaluated: Option<[f64; 3]>,
    /// Seconds spent building the model: translations, uploads, allocations.
    pub setup_seconds: f64,
}

impl<B: Ops + 'static> Trainer<B> {
    pub fn new(backend: Arc<B>, data: &Dataset, model: &ModelConfig, train: &TrainConfig) -> Result<Self> {
        Self::build(backend, data, model, train, |b| InputFeatures::for_model(b, &data.features, model)?.with_half_features(b, model))
    }

    /// [`Trainer::new`] moving the features out of `data` (left as an empty matrix of the same
    /// width): they are held once, by the backend (a GPU run frees the host copy after the
    /// upload; 10M x 500 features are 20 GB).
    pub fn new_taking_features(backend: Arc<B>, data: &mut Dataset, model: &ModelConfig, train: &TrainConfig) -> Result<Self> {
        let width = data.features.cols();
        let features = std::mem::replace(&mut data.features, HostFeatures::Dense(Matrix::zeros(0, width)));
        Self::build(backend, data, model, train, move |b| InputFeatures::from_owned(b, features, model)?.with_half_features(b, model))
    }

    /// A trainer whose model holds only the parameters (and Adam's moments): built on a
    /// one-node graph, it never runs on `data`'s graph. For mini-batch training with an
    /// [`Evaluate`] set ([`Trainer::set_evaluator`]) where the full-graph model does not fit.
    pub fn params_only(backend: Arc<B>, data: &Dataset, model: &ModelConfig, train: &TrainConfig) -> Result<Self> {
        let one = crate::graph::Csr::new(1, 1, vec![0, 0], Vec::new(), Vec::new())?;
        let cols = data.features.cols();
        let x = match &data.features {
            HostFeatures::Dense(_) => HostFeatures::Dense(Matrix::zeros(1, cols)),
            HostFeatures::Sparse(_) => HostFeatures::Sparse(crate::graph::Csr::new(1, cols, vec![0, 0], Vec::new(), Vec::new())?),
        };
        let shape = Shape { graph: &one, features: cols, labels: &[0], mask_bits: &[0] };
        Self::build_on(backend, data, shape, model, train, |b| InputFeatures::for_model(b, &x, model))
    }

    fn build(
        backend: Arc<B>,
        data: &Dataset,
        model: &ModelConfig,
        train: &TrainConfig,
        input: impl FnOnce(&B) -> Result<InputFeatures<B>>,
    ) -> Result<Self> {
        let shape = Shape { graph: &data.graph, features: data.features.cols(), labels: &data.labels, mask_bits: &data.mask_bits };
        Self::build_on(backend, data, shape, model, train, input)
    }

    /// The trainer of `data`'s masks (their sizes) with its model built on `shape`.
    fn build_on(
        backend: Arc<B>,
        data: &Dataset,
        shape: Shape<'_>,
        model: &ModelConfig,
        train: &TrainConfig,
        input: impl FnOnce(&B) -> Result<InputFeatures<B>>,
    ) -> Result<Self> {
        let t0 = Instant::now();
        let b = &*backend;
        let count = |bit: u8| data.mask_bits.iter().filter(|&&m| m & bit != 0).count();
        let sizes = MaskSizes { train: count(TRAIN_BIT), val: count(VAL_BIT), test: count(TEST_BIT) };
        if sizes.train == 0 {
            return Err(Error::Unsupported(format!("{}: the train mask is empty", data.name)));
        }
        let n = shape.graph.n_rows();
        let net = models::build(b, shape.graph, shape.features, data.classes, model)?;
        let input = input(b)?;
        let labels = b.labels(shape.labels, shape.mask_bits)?;
        let hyper = AdamHyper { lr: train.lr, weight_decay: train.weight_decay, ..AdamHyper::default() };
        let trainer = Trainer {
            net,
            input,
            labels,
            dlogits: b.matrix(n, data.classes)?,
            eval_dlogits: b.matrix(n, data.classes)?,
            train_stats: b.stats()?,
            eval_stats: b.stats()?,
            inv_n_train: 1.0 / sizes.train as f32,
            hyper,
            sizes,
            step_graph: None,
            eval_graph: None,
            epoch_steps: None,
            evaluator: None,
            evaluated: None,
            setup_seconds: 0.0,
            backend: backend.clone(),
        };
        backend.synchronize()?;
        Ok(Trainer { setup_seconds: t0.elapsed().as_secs_f64(), ..trainer })
    }

    /// Train every epoch with `steps` (mini-batches) instead of one full-graph step; evaluation,
    /// saving and checkpoints stay the full-graph model's. Do not [`Trainer::record`] after this:
    /// a recording runs a full-graph step.
    pub fn set_epoch_steps(&mut self, steps: Box<dyn EpochSteps<B>>) {
        self.epoch_steps = Some(steps);
    }

    /// Evaluate with `e` instead of the full-graph model's forward (the model may then hold
    /// only the parameters: [`Trainer::params_only`]).
    pub fn set_evaluator(&mut self, e: Box<dyn Evaluate<B>>) {
        self.evaluator = Some(e);
    }

    /// The evaluator set by [`Trainer::set_evaluator`] (its timings).
    pub fn evaluator(&self) -> Option<&dyn Evaluate<B>> {
        self.evaluator.as_deref()
    }

    /// The mini-batch trainer set by [`Trainer::set_epoch_steps`] (its timings).
    pub fn epoch_steps(&self) -> Option<&dyn EpochSteps<B>> {
        self.epoch_steps.as_deref()
    }

    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }
    pub fn mask_sizes(&self) -> MaskSizes {
        self.sizes
    }

    /// Forward in training mode and the loss with its gradient.
    pub fn forward_loss(&mut self) -> Result<()> {
        let b = &*self.backend;
        b.begin_step()?;
        let logits = self.net.forward(b, &mut self.input, true)?;
        b.cross_entropy(logits, &self.labels, self.inv_n_train, &mut self.dlogits, &mut self.train_stats)
    }

    pub fn backward(&mut self) -> Result<()> {
        self.net.backward(&*self.backend, &mut self.input, &mut self.dlogits)
    }

    pub fn optimize(&mut self) -> Result<()> {
        let b = &*self.backend;
        Param::adam_all(b, self.net.params().into_iter().map(|(_, p)| p), &self.hyper)
    }

    /// Enqueues one training step without a recording.
    pub fn step_eager(&mut self) -> Result<()> {
        self.forward_loss()?;
        self.backward()?;
        self.optimize()
    }

    /// One training step: the recorded one when [`Trainer::record`] made one.
    pub fn step(&mut self) -> Result<()> {
        match &self.step_graph {
            Some(g) => self.backend.replay(g),
            None => self.step_eager(),
        }
    }

    fn evaluate_eager(&mut self) -> Result<()> {
        let b = &*self.backend;
        let logits = self.net.forward(b, &mut self.input, false)?;
        b.cross_entropy(logits, &self.labels, self.inv_n_train, &mut self.eval_dlogits, &mut self.eval_stats)
    }

    /// Enqueues the evaluation forward (runs the [`Evaluate`] set, if any).
    pub fn evaluate(&mut self) -> Result<()> {
        if let Some(e) = &mut self.evaluator {
            self.evaluated = Some(e.correct(&self.backend, self.net.as_mut())?);
            return Ok(());
        }
        match &self.eval_graph {
            Some(g) => self.backend.replay(g),
            None => self.evaluate_eager(),
        }
    }

    /// Records the training step and the evaluation pass once (CUDA graphs on the GPU), after
    /// one eager run of each so every lazily built translation and plan exists. That warm-up
    /// does not train: the parameters, Adam's moments, the buffers and the step counter are put
    /// back as they were (copied in place: the recording keeps their addresses), so a recorded
    /// run's first epoch is the eager and the CPU runs' first epoch. Recording runs nothing.
    ///
    /// A step that cannot be captured (a library call that is not capturable) is not an error:
    /// the trainer keeps running eagerly and the reason is returned.
    pub fn record(&mut self) -> Result<Recorded> {
        let kept = KeptState::keep(&*self.backend, self.net.as_mut())?;
        self.step_eager()?;
        self.evaluate_eager()?;
        self.backend.synchronize()?;
        let b = self.backend.clone();
        let captured = b.record(&mut || self.step_eager()).and_then(|step| Ok((step, b.record(&mut || self.evaluate_eager())?)));
        kept.put_back(&*b, self.net.as_mut())?;
        match captured {
            Ok((Some(step), Some(eval))) => {
                self.step_graph = Some(step);
                self.eval_graph = Some(eval);
                Ok(Recorded::Yes)
            }
            Ok(_) => Ok(Recorded::NotSupported),
            Err(e) => {
                self.backend.synchronize()?;
                Ok(Recorded::Failed(e.to_string()))
            }
        }
    }

    /// The loss of the last step and the accuracies of the last evaluation (waits for both).
    pub fn read(&self, epoch: usize) -> Result<EpochRecord> {
        let train: Stats = self.backend.read_stats(&self.train_stats)?;
        let correct = match self.evaluated {
            Some(c) => c,
            None => self.backend.read_stats(&self.eval_stats)?.correct,
        };
        let acc = |i: usize, n: usize| if n == 0 { 0.0 } else { correct[i] / n as f64 };
        Ok(EpochRecord {
            epoch,
            loss: train.loss,
            train_acc: acc(0, self.sizes.train),
            val_acc: acc(1, self.sizes.val),
            test_acc: acc(2, self.sizes.test),
        })
    }

    /// Trains for `epochs` epochs (step + evaluation each), calling `on_epoch` after each.
    pub fn fit(&mut self, epochs: usize, mut on_epoch: impl FnMut(&EpochRecord)) -> Result<History> {
        self.fit_from(Vec::new(), epochs, |_, e| {
            on_epoch(e);
            Ok(Flow::Continue)
        })
    }

    /// Continues a run whose first epochs are `done` (a resumed checkpoint; empty for a new
    /// run) up to `epochs` in all. `on_epoch` sees the trainer after each epoch (to keep the
    /// best weights, write a checkpoint) and may stop the run early.
    pub fn fit_from(
        &mut self,
        done: Vec<EpochRecord>,
        epochs: usize,
        mut on_epoch: impl FnMut(&mut Self, &EpochRecord) -> Result<Flow>,
    ) -> Result<History> {
        let t0 = Instant::now();
        let mut epochs_run = done;
        for e in epochs_run.len()..epochs {
            let batch_loss = match &mut self.epoch_steps {
                Some(steps) => Some(steps.train_epoch(&self.backend, self.net.as_mut(), &self.hyper, e)?),
                None => {
                    self.step()?;
                    None
                }
            };
            self.evaluate()?;
            let mut rec = self.read(e + 1)?;
            if let Some(loss) = batch_loss {
                rec.loss = loss;
            }
            if !rec.loss.is_finite() {
                return Err(Error::Unsupported(format!("the loss became {} at epoch {}; try a smaller --lr", rec.loss, e + 1)));
            }
            epochs_run.push(rec);
            if on_epoch(self, &rec)? == Flow::Stop {
                break;
            }
        }
        Ok(History::new(epochs_run, t0.elapsed().as_secs_f64()))
    }

    /// The parameters' current values and the model's buffers (BatchNorm's running
    /// statistics) by name (downloaded): what a saved model holds.
    pub fn weights(&mut self) -> Result<Vec<(String, Matrix)>> {
        let b = self.backend.clone();
        let mut out: Vec<(String, Matrix)> =
            self.net.params().into_iter().map(|(name, p)| Ok((name, b.download(&p.value)?))).collect::<Result<_>>()?;
        for (name, m) in self.net.buffers() {
            out.push((name, b.download(m)?));
        }
        Ok(out)
    }

    /// Parameters, Adam moments (`m.NAME`, `v.NAME`) and the step counter: what a checkpoint
    /// needs to continue the run exactly.
    pub fn optimizer_state(&mut self) -> Result<(Vec<(String, Matrix)>, u32)> {
        let b = self.backend.clone();
        let mut out = Vec::new();
        for (name, p) in self.net.params() {
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

    /// The names and shapes of the parameters.
    pub fn param_shapes(&mut self) -> Vec<(String, (usize, usize))> {
        self.net.params().into_iter().map(|(name, p)| (name, B::shape(&p.value))).collect()
    }

    /// The names and shapes of the buffers.
    pub fn buffer_shapes(&mut self) -> Vec<(String, (usize, usize))> {
        self.net.buffers().into_iter().map(|(name, m)| (name, B::shape(m))).collect()
    }

    /// Sets every parameter from `weights` (by name; shapes checked by the caller against
    /// [`Trainer::param_shapes`]). Before [`Trainer::record`]: a recording keeps addresses.
    pub fn load_weights(&mut self, weights: &[(String, Matrix)]) -> Result<()> {
        let b = self.backend.clone();
        for (name, p) in self.net.params() {
            let w = find(weights, &name)?;
            p.value = b.upload(w)?;
        }
        for (name, m) in self.net.buffers() {
            *m = b.upload(find(weights, &name)?)?;
        }
        Ok(())
    }

    /// Restores [`Trainer::optimizer_state`]'s parameters, moments and step counter.
    pub fn load_optimizer_state(&mut self, state: &[(String, Matrix)], steps: u32) -> Result<()> {
        let b = self.backend.clone();
        for (name, p) in self.net.params() {
            p.value = b.upload(find(state, &format!("param.{name}"))?)?;
            let m = b.upload(find(state, &format!("m.{name}"))?)?;
            let v = b.upload(find(state, &format!("v.{name}"))?)?;
            let [pm, pv] = p.moments();
            *pm = m;
            *pv = v;
        }
        for (name, m) in self.net.buffers() {
            *m = b.upload(find(state, &format!("buffer.{name}"))?)?;
        }
        b.set_steps(steps)
    }

    /// Medians of each phase over `reps` runs after `warmup`: forward + loss, backward,
    /// optimiser, a whole eager step, a recorded step (when recorded) and the evaluation pass.
    pub fn profile(&mut self, warmup: usize, reps: usize) -> Result<PhaseTimes> {
        let b = self.backend.clone();
        let forward = b.time(warmup, reps, &mut || self.forward_loss())?;
        let backward = b.time(warmup, reps, &mut || self.backward())?;
        let optimizer = b.time(warmup, reps, &mut || self.optimize())?;
        let step_eager = b.time(warmup, reps, &mut || self.step_eager())?;
        let evaluate = b.time(warmup, reps, &mut || self.evaluate())?;
        let step_recorded = match self.step_graph.is_some() {
            true => Some(b.time(warmup, reps, &mut || self.step())?),
            false => None,
        };
        Ok(PhaseTimes { forward, backward, optimizer, step_eager, step_recorded, evaluate })
    }
}

impl<B: Ops + 'static> Trainer<B> {
    /// Per-op time of `steps` eager training steps (ms per step, calls per step), slowest first.
    pub fn op_profile(&mut self, steps: usize) -> Result<Vec<(String, f64, f64)>> {
        let b = self.backend.clone();
        let totals = b.time_ops(&mut || {
            for _ in 0..steps {
                self.step_eager()?;
            }
            Ok(())
        })?;
        let n = steps.max(1) as f64;
        Ok(totals.into_iter().map(|(name, ms, calls)| (name, ms / n, calls as f64 / n)).collect())
    }
}

/// One epoch of mini-batch training on the parameters of the trainer's full-graph model `net`
/// (`crate::sample::train`): each batch builds its own model, borrows `net`'s parameters (and
/// buffers) for its step and hands them back.
pub trait EpochSteps<B: Ops> {
    /// Trains epoch `epoch` (0-based; the batches are a function of it); returns the mean
    /// training loss over its batches.
    fn train_epoch(&mut self, b: &Arc<B>, net: &mut dyn Model<B>, hyper: &AdamHyper, epoch: usize) -> Result<f64>;
    /// A one-line account of where the epochs' time went (for the CLI's summary).
    fn summary(&self) -> String;
    /// The implementation, for reports that know its type (`bench sample`).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// An evaluation of the trainer's parameters other than its model's full-graph forward
/// (`crate::sample::layerwise`: layer by layer, in node batches).
pub trait Evaluate<B: Ops> {
    /// Correct predictions among the train, validation and test nodes with `net`'s parameters.
    fn correct(&mut self, b: &B, net: &mut dyn Model<B>) -> Result<[f64; 3]>;
    /// A one-line account of the evaluations so far (for the CLI's summary).
    fn summary(&self) -> String;
}

/// What a trainer's model is built on: a graph, its feature width, labels and masks.
struct Shape<'a> {
    graph: &'a crate::graph::Csr,
    features: usize,
    labels: &'a [i32],
    mask_bits: &'a [u8],
}

fn find<'a>(tensors: &'a [(String, Matrix)], name: &str) -> Result<&'a Matrix> {
    tensors.iter().find(|(n, _)| n == name).map(|(_, m)| m).ok_or_else(|| Error::Unsupported(format!("no tensor '{name}' to load")))
}

/// What [`Trainer::record`] achieved.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub enum Recorded {
    Yes,
    /// The backend has nothing to record (the CPU).
    NotSupported,
    /// Capture failed (the reason); steps run eagerly.
    Failed(String),
}

/// Event-timed phases of a training step (milliseconds, medians in [`Timing`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct PhaseTimes {
    pub forward: Timing,
    pub backward: Timing,
    pub optimizer: Timing,
    pub step_eager: Timing,
    pub step_recorded: Option<Timing>,
    pub evaluate: Timing,
}

impl PhaseTimes {
    /// The step time a user gets: the recorded step where there is one.
    pub fn step_ms(&self) -> f64 {
        self.step_recorded.as_ref().unwrap_or(&self.step_eager).median_ms
    }
}

/// A finished run: every epoch and the PyG-style summary.
#[derive(Clone, Debug, serde::Serialize)]
pub struct History {
    pub epochs: Vec<EpochRecord>,
    /// The first epoch with the highest validation accuracy.
    pub best_epoch: usize,
    pub best_val_acc: f64,
    /// Test accuracy at `best_epoch`.
    pub test_acc: f64,
    pub seconds: f64,
}

impl History {
    pub fn new(epochs: Vec<EpochRecord>, seconds: f64) -> Self {
        let best = epochs.iter().fold(None::<&EpochRecord>, |best, e| match best {
            Some(b) if b.val_acc >= e.val_acc => Some(b),
            _ => Some(e),
        });
        let (best_epoch, best_val_acc, test_acc) = best.map_or((0, 0.0, 0.0), |b| (b.epoch, b.val_acc, b.test_acc));
        History { epochs, best_epoch, best_val_acc, test_acc, seconds }
    }
}
