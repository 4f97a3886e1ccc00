//! k-fold cross-validation of a [`GraphModel`] on a [`GraphSet`]: per fold a fresh model
//! (seeded per fold) trained on the other folds' graphs, in shuffled mini-batches assembled on
//! worker threads ahead of the step, with the held-out fold's accuracy measured after every
//! epoch. Adam, lr halved every `lr_halve_every` epochs (the GIN paper: 0.01, halved every 50).
//!
//! The epoch rule (the GIN paper's): the reported accuracy is, for the one epoch whose mean
//! held-out accuracy over the folds is highest, the mean ± standard deviation of the folds'
//! accuracies at that epoch. The last epoch's mean ± std is reported beside it (no selection).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::ops::nn::{AdamHyper, Ops};
use crate::util::prefetch::{Prefetch, PrefetchConfig};
use crate::util::rng::SplitMix64;

use super::batch::GraphBatch;
use super::bound::{self, BoundGraphNet, GraphCapacity, PaddedGraphBatch};
use super::dataset::GraphSet;
use super::folds::Folds;
use super::net::{GraphModel, GraphNet};

#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct GraphTrainConfig {
    pub model: GraphModel,
    pub batch_size: usize,
    pub epochs: usize,
    pub lr: f32,
    /// Halve the learning rate every this many epochs (0: never).
    pub lr_halve_every: usize,
    pub weight_decay: f32,
    /// Threads assembling batches ahead of the step.
    pub workers: usize,
    /// One net per fold rebound to every batch where the model and backend allow it
    /// ([`bound::can_bind`]); else a net per batch.
    pub rebind: bool,
    /// Replay a recording of the rebound net's step (GPU); else every step eagerly.
    pub record: bool,
}

/// One epoch of one fold.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct EpochLog {
    pub fold: usize,
    pub epoch: usize,
    /// Mean over the batches of each batch's mean loss.
    pub train_loss: f64,
    /// Training graphs classified correctly during the epoch's steps (dropout on).
    pub train_acc: f64,
    /// The held-out fold's accuracy after the epoch.
    pub test_acc: f64,
    /// Wall time of the epoch's training steps (batch models, steps; no evaluation).
    pub train_s: f64,
    /// Of which building the batches' nets (allocations, the batch graph's translation and
    /// upload, features, labels; on the GPU also any wait for the queued steps these calls
    /// imply), or with one bound net per fold binding the batches into it (copies queued).
    pub build_s: f64,
    /// Of which waiting for the workers' next batch.
    pub wait_s: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct FoldResult {
    pub fold: usize,
    pub train_graphs: usize,
    pub test_graphs: usize,
    pub epochs: Vec<EpochLog>,
    /// With one rebound net for the fold: its capacity and whether its step was replayed.
    pub bound: Option<BoundReport>,
}

/// How a fold's rebound net ran.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BoundReport {
    pub capacity: GraphCapacity,
    /// Times the step was recorded (0: every step eager; 1 more per learning-rate change).
    pub recordings: usize,
    /// Why recording failed, if it did.
    pub record_error: Option<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct CvSummary {
    /// The epoch (1-based) of the best mean held-out accuracy over the folds.
    pub best_epoch: usize,
    pub best_mean: f64,
    pub best_std: f64,
    pub last_mean: f64,
    pub last_std: f64,
    /// Median training time of an epoch over all folds' epochs but each fold's first.
    pub epoch_s_median: f64,
}

/// Mean and (population, as numpy's default `std` in the GIN paper's code) standard deviation.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n).sqrt())
}

/// The summary of the folds that ran (all with the same number of epochs).
pub fn summarize(folds: &[FoldResult]) -> Result<CvSummary> {
    let epochs = folds.first().map_or(0, |f| f.epochs.len());
    if epochs == 0 || folds.iter().any(|f| f.epochs.len() != epochs) {
        return Err(Error::Unsupported("no complete folds to summarise".into()));
    }
    let at = |e: usize| folds.iter().map(|f| f.epochs[e].test_acc).collect::<Vec<_>>();
    let best = (0..epochs).max_by(|&a, &b| mean_std(&at(a)).0.total_cmp(&mean_std(&at(b)).0).then(b.cmp(&a))).expect("epochs > 0");
    let (best_mean, best_std) = mean_std(&at(best));
    let (last_mean, last_std) = mean_std(&at(epochs - 1));
    let mut times: Vec<f64> = folds.iter().flat_map(|f| f.epochs.iter().skip(1).map(|e| e.train_s)).collect();
    times.sort_by(f64::total_cmp);
    let epoch_s_median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    Ok(CvSummary { best_epoch: best + 1, best_mean, best_std, last_mean, last_std, epoch_s_median })
}

/// The order of the training graphs in `epoch` (seeded per fold and epoch).
fn shuffled(train: &[u32], seed: u64, epoch: usize) -> Vec<u32> {
    let mut v = train.to_vec();
    let mut rng = SplitMix64::new(seed ^ 0x5EED_0000 ^ ((epoch as u64) << 20));
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
    v
}

/// The training batches of one fold, epoch after epoch, made on worker threads (`make` turns
/// each into what the step copies).
fn batch_stream<T: Send + 'static>(
    set: &Arc<GraphSet>,
    train: Vec<u32>,
    cfg: &GraphTrainConfig,
    seed: u64,
    make: impl Fn(GraphBatch) -> Result<T> + Send + Sync + 'static,
) -> Result<Prefetch<Result<T>>> {
    let steps = train.len().div_ceil(cfg.batch_size);
    let (set, bs) = (Arc::clone(set), cfg.batch_size);
    // One shuffle per epoch, shared by the workers.
    let order: Mutex<Option<(usize, Arc<Vec<u32>>)>> = Mutex::new(None);
    let workers = PrefetchConfig { workers: cfg.workers.max(1), ahead: 2 };
    Prefetch::new(cfg.epochs * steps, workers, move |k| {
        let (epoch, i) = (k / steps, k % steps);
        let ids = {
            let mut o = order.lock().expect("order lock poisoned");
            if o.as_ref().is_none_or(|(e, _)| *e != epoch) {
                *o = Some((epoch, Arc::new(shuffled(&train, seed, epoch))));
            }
            Arc::clone(&o.as_ref().expect("set above").1)
        };
        make(GraphBatch::new(&set, &ids[i * bs..((i + 1) * bs).min(ids.len())])?)
    })
}

/// Adam's settings for epoch `epoch` (0-based): the learning rate halved every
/// `lr_halve_every` epochs (the GIN paper's schedule; never with 0).
fn epoch_hyper(cfg: &GraphTrainConfig, epoch: usize) -> AdamHyper {
    let halvings = epoch.checked_div(cfg.lr_halve_every).unwrap_or(0);
    AdamHyper { lr: cfg.lr * 0.5f32.powi(halvings as i32), weight_decay: cfg.weight_decay, ..AdamHyper::default() }
}

/// What both fold loops count in an epoch: the sum of the batches' mean losses over `steps`
/// batches, training graphs classified correctly, held-out graphs classified correctly, and
/// the times of [`EpochLog`].
struct EpochCounts {
    loss: f64,
    steps: usize,
    correct: f64,
    right: f64,
    train_s: f64,
    build_s: f64,
    wait_s: f64,
}

impl FoldResult {
    /// Logs epoch `epoch` (0-based) of this fold from its counts, shows the log to `on_epoch`
    /// and keeps it.
    fn push_epoch(&mut self, epoch: usize, c: EpochCounts, on_epoch: &mut dyn FnMut(&EpochLog)) {
        let log = EpochLog {
            fold: self.fold,
            epoch: epoch + 1,
            train_loss: c.loss / c.steps as f64,
            train_acc: c.correct / self.train_graphs as f64,
            test_acc: c.right / self.test_graphs as f64,
            train_s: c.train_s,
            build_s: c.build_s,
            wait_s: c.wait_s,
        };
        on_epoch(&log);
        self.epochs.push(log);
    }
}

/// Trains fold `fold` of `folds` and measures its held-out accuracy after every epoch;
/// `on_epoch` sees each epoch's log as it ends.
pub fn train_fold<B: Ops + 'static>(
    b: &B,
    set: &Arc<GraphSet>,
    folds: &Folds,
    fold: usize,
    cfg: &GraphTrainConfig,
    on_epoch: &mut dyn FnMut(&EpochLog),
) -> Result<FoldResult> {
    if cfg.batch_size == 0 {
        return Err(Error::Unsupported("--batch-size must be at least 1".into()));
    }
    if cfg.rebind && bound::can_bind(b, &cfg.model) {
        return train_fold_bound(b, set, folds, fold, cfg, on_epoch);
    }
    let train = folds.train(fold);
    let test = folds.test[fold].clone();
    let mut model = cfg.model;
    model.encoder.seed = cfg.model.encoder.seed.wrapping_add(fold as u64);
    let seed = model.encoder.seed;
    // Adam's bias correction and the dropout masks count steps from this fold's start.
    b.set_steps(0)?;
    // The evaluation batches are fixed: their nets are built once.
    let mut eval: Vec<(GraphNet<B>, usize)> = test
        .chunks(cfg.batch_size)
        .map(|ids| Ok((GraphNet::new(b, &GraphBatch::new(set, ids)?, &model)?, ids.len())))
        .collect::<Result<_>>()?;
    let steps = train.len().div_ceil(cfg.batch_size);
    let mut stream = batch_stream(set, train.clone(), cfg, seed, Ok)?;
    let mut trained: Option<GraphNet<B>> = None;
    let mut out =
        FoldResult { fold, train_graphs: train.len(), test_graphs: test.len(), epochs: Vec::with_capacity(cfg.epochs), bound: None };
    for epoch in 0..cfg.epochs {
        let hyper = epoch_hyper(cfg, epoch);
        let t0 = Instant::now();
        let waited = stream.waited();
        let mut build_s = 0.0;
        let mut stats = Vec::with_capacity(steps);
        for _ in 0..steps {
            let batch = stream.next().ok_or_else(|| Error::Unsupported("the batch stream ended early".into()))??;
            let tb = Instant::now();
            let mut net = GraphNet::new(b, &batch, &model)?;
            build_s += tb.elapsed().as_secs_f64();
            // The first batch's net becomes the trained one (its initial weights are the
            // model's); each later batch's net borrows its state for the step.
            let trained = match &mut trained {
                Some(t) => t,
                None => trained.insert(GraphNet::new(b, &batch, &model)?),
            };
            let mut s = b.stats()?;
            net.with_state(trained, |n| n.step(b, &hyper, &mut s))?;
            stats.push(s);
        }
        let (mut loss, mut correct) = (0.0, 0.0);
        for s in &stats {
            let s = b.read_stats(s)?;
            loss += s.loss;
            correct += s.correct[0];
        }
        let train_s = t0.elapsed().as_secs_f64();
        let trained = trained.as_mut().expect("at least one step");
        let mut right = 0.0;
        for (net, _) in &mut eval {
            right += net.with_state(trained, |n| n.correct(b))?;
        }
        let wait_s = (stream.waited() - waited).as_secs_f64();
        out.push_epoch(epoch, EpochCounts { loss, steps, correct, right, train_s, build_s, wait_s }, on_epoch);
    }
    Ok(out)
}

/// [`train_fold`] with one net per fold ([`BoundGraphNet`]): built at the capacity of the fold's
/// batches (every epoch's shuffle and the held-out batches, planned ahead), each batch padded
/// to it on the workers and copied in, the step recorded once and replayed.
fn train_fold_bound<B: Ops + 'static>(
    b: &B,
    set: &Arc<GraphSet>,
    folds: &Folds,
    fold: usize,
    cfg: &GraphTrainConfig,
    on_epoch: &mut dyn FnMut(&EpochLog),
) -> Result<FoldResult> {
    let train = folds.train(fold);
    let test = folds.test[fold].clone();
    let mut model = cfg.model;
    model.encoder.seed = cfg.model.encoder.seed.wrapping_add(fold as u64);
    let seed = model.encoder.seed;
    let name = model.encoder.model;
    let nnz = bound::model_nnz(set, name)?;
    let bs = cfg.batch_size;
    // Every batch the fold will see: each epoch's shuffle (a pure function of seed and epoch,
    // as the workers draw it) and the held-out batches.
    let mut capacity = GraphCapacity::plan(set, &nnz, test.chunks(bs));
    for e in 0..cfg.epochs {
        shuffled(&train, seed, e).chunks(bs).for_each(|ids| capacity.hold(set, &nnz, ids));
    }
    b.set_steps(0)?;
    let mut net = BoundGraphNet::new(b, capacity, &model)?;
    net.record = cfg.record;
    let eval: Vec<PaddedGraphBatch> = test.chunks(bs).map(|ids| PaddedGraphBatch::of(set, ids, name, capacity)).collect::<Result<_>>()?;
    let steps = train.len().div_ceil(bs);
    let mut stream = batch_stream(set, train.clone(), cfg, seed, move |batch| PaddedGraphBatch::new(batch, name, capacity))?;
    // One statistics buffer per step, reused every epoch (read at its end).
    let mut stats: Vec<B::Stats> = (0..steps).map(|_| b.stats()).collect::<Result<_>>()?;
    let mut graphs = vec![0usize; steps];
    let mut out =
        FoldResult { fold, train_graphs: train.len(), test_graphs: test.len(), epochs: Vec::with_capacity(cfg.epochs), bound: None };
    for epoch in 0..cfg.epochs {
        let hyper = epoch_hyper(cfg, epoch);
        let t0 = Instant::now();
        let waited = stream.waited();
        let mut build_s = 0.0;
        for (s, g) in stats.iter_mut().zip(graphs.iter_mut()) {
            let batch = stream.next().ok_or_else(|| Error::Unsupported("the batch stream ended early".into()))??;
            let tb = Instant::now();
            net.bind(b, &batch)?;
            build_s += tb.elapsed().as_secs_f64();
            *g = batch.graphs;
            net.step(b, &hyper, s)?;
        }
        let (mut loss, mut correct) = (0.0, 0.0);
        for (s, &g) in stats.iter().zip(&graphs) {
            let s = b.read_stats(s)?;
            // The step's loss is the batch's sum: its mean, as a per-batch net reports.
            loss += s.loss / g.max(1) as f64;
            correct += s.correct[0];
        }
        let train_s = t0.elapsed().as_secs_f64();
        let mut right = 0.0;
        for p in &eval {
            net.bind(b, p)?;
            right += net.correct(b)?;
        }
        let wait_s = (stream.waited() - waited).as_secs_f64();
        out.push_epoch(epoch, EpochCounts { loss, steps, correct, right, train_s, build_s, wait_s }, on_epoch);
    }
    out.bound = Some(BoundReport { capacity, recordings: net.recordings, record_error: net.record_error.clone() });
    Ok(out)
}
