//! Link-neighbour sampled training, as PyG's `LinkNeighborLoader` with binary negatives: an
//! epoch visits the training edges in a new order (a permutation that is a function of (seed,
//! epoch)), `batch_size` seed edges a batch; each batch takes its share of the epoch's training
//! negatives, the end points of its positives and negatives are the seed nodes of neighbour
//! blocks (one per layer, with the full graph's normalisation: a [`SeedBlockSampler`], e.g.
//! `sample::seed_blocks`), the encoder runs on the blocks, the decoder scores the seed pairs on
//! their block-local rows, binary cross entropy (mean over the batch's pairs), one Adam step.
//! Evaluation is the full-graph trainer's ([`LinkTrainer::evaluate`]), or, for graphs whose
//! full-graph model does not fit, layer by layer from the parameters alone
//! ([`LinkTrainer::params_only`], [`LinkTrainer::evaluate_from`]; the CLI's `--inference
//! layerwise` hands `sample::layerwise` in as the [`Representations`]).
//!
//! The negatives: the epoch draws the very slots the full-graph path draws
//! (`negative_stream_key(seed, epoch)`, `round(neg_ratio * train edges)` slots); batch i takes the
//! slots of its share of the positives, `[round(i B r), round((i + 1) B r))` (B the batch size,
//! r the ratio), empty slots and pairs repeated within the batch left out. So the epoch's
//! negatives are the full-graph path's, spread over the batches, and with one batch holding
//! every training edge and fan-out -1 a step is the full-graph step (`tests/it/link_sampled.rs`).
//!
//! Parameters persist in the [`LinkTrainer`] (encoder and decoder): each batch builds a model
//! on its matrices and a decoder for its rows and swaps the parameters in for its step and
//! back, as node sampling does. Batches are sampled on worker threads ahead of the step.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::nn::input::InputFeatures;
use crate::nn::models::{self, Model, ModelConfig, swap_state};
use crate::nn::param::Param;
use crate::nn::seed_blocks::{SeedBlockSampler, SeedBlocks};
use crate::ops::backend::Side;
use crate::ops::nn::negative_sample::EMPTY;
use crate::ops::nn::{AdamHyper, Ops};
use crate::shared::rng::{negative_stream_key, sample_permuted_index, sample_stream_key, sample_substream};
use crate::task::Flow;
use crate::task::link::decoder::Decoder;
use crate::task::link::pairs::PairSet;
use crate::task::link::split::Pair;
use crate::task::link::train::{LinkConfig, LinkEpoch, LinkHistory, LinkTrainer, Representations};
use crate::util::prefetch::{Prefetch, PrefetchConfig};

/// The part of a [`LinkTrainer`] the sampled loop reads and trains.
pub(crate) struct TrainerParts<'a, B: Ops + 'static> {
    pub net: &'a mut dyn Model<B>,
    pub decoder: &'a mut Decoder<B>,
    pub train_pos: &'a [Pair],
    pub full: &'a B::Graph,
    pub hyper: &'a AdamHyper,
    pub cfg: &'a LinkConfig,
}

/// The lane of the epoch's edge order (distinct from the hops' lanes 0.. and the negatives').
const ORDER_LANE: u32 = 0x4C4E_4F52;

/// The seed pairs of one batch, on global ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchPairs {
    pub pos: Vec<Pair>,
    pub neg: Vec<Pair>,
    /// Negative slots of this batch left out (empty, or a pair repeated within the batch).
    pub dropped: usize,
}

impl BatchPairs {
    /// The seed nodes: every pair's end points, first occurrences in pair order.
    pub fn seeds(&self) -> Vec<u32> {
        let mut seen = std::collections::HashSet::new();
        self.pos.iter().chain(&self.neg).flat_map(|p| [p[0], p[1]]).filter(|&v| seen.insert(v)).collect()
    }
}

/// Training negative slots of an epoch over `train` positives (the full-graph path's count).
pub fn negative_slots(train: usize, neg_ratio: f64) -> usize {
    ((train as f64 * neg_ratio).round() as usize).max(1)
}

/// The batches' seed pairs of `epoch`: `train_pos` in the epoch's order (a function of (seed,
/// epoch)), `batch_size` a batch, each with its slots of `slots` (the epoch's negative draws,
/// [`negative_slots`] of them, [`EMPTY`] where a slot found no non-edge) as the module doc says.
pub fn epoch_batches(train_pos: &[Pair], slots: &[Pair], batch_size: usize, neg_ratio: f64, seed: u64, epoch: u32) -> Vec<BatchPairs> {
    let p = train_pos.len();
    let batches = p.div_ceil(batch_size.max(1));
    let key = sample_substream(sample_stream_key(seed, epoch, u32::MAX), ORDER_LANE);
    let slot_start = |i: usize| {
        if i >= batches { slots.len() } else { ((i * batch_size) as f64 * neg_ratio).round().min(slots.len() as f64) as usize }
    };
    (0..batches)
        .map(|i| {
            let range = i * batch_size..((i + 1) * batch_size).min(p);
            let pos = range.map(|k| train_pos[sample_permuted_index(key, p as u64, k as u64) as usize]).collect();
            let mine = &slots[slot_start(i)..slot_start(i + 1).max(slot_start(i))];
            let mut seen = std::collections::HashSet::new();
            let neg: Vec<Pair> = mine.iter().copied().filter(|q| q[0] != EMPTY && seen.insert(*q)).collect();
            BatchPairs { dropped: mine.len() - neg.len(), pos, neg }
        })
        .collect()
}

/// A batch ready for its step: the blocks around its seed nodes and its pairs on their rows.
pub struct LinkBatch {
    pub blocks: SeedBlocks,
    /// The pairs on block-local rows (< `blocks.seeds`).
    pub pos: Vec<Pair>,
    pub neg: Vec<Pair>,
    pub dropped: usize,
}

impl LinkBatch {
    /// The blocks around `pairs`' end points (batch `i` of `epoch` of `sampler`), the pairs
    /// relabelled to the blocks' local rows.
    pub fn make(sampler: &dyn SeedBlockSampler, pairs: &BatchPairs, epoch: u32, i: u32) -> Result<Self> {
        let blocks = sampler.around(&pairs.seeds(), epoch, i)?;
        let local: HashMap<u32, u32> = blocks.nodes[..blocks.seeds].iter().enumerate().map(|(l, &v)| (v, l as u32)).collect();
        let relabel = |list: &[Pair]| -> Result<Vec<Pair>> {
            list.iter()
                .map(|q| match (local.get(&q[0]), local.get(&q[1])) {
                    (Some(&u), Some(&v)) => Ok([u, v]),
                    _ => Err(Error::Unsupported(format!("the sampler left seed pair ({}, {}) out of its seeds", q[0], q[1]))),
                })
                .collect()
        };
        Ok(LinkBatch { pos: relabel(&pairs.pos)?, neg: relabel(&pairs.neg)?, dropped: pairs.dropped, blocks })
    }
}

/// Totals of the sampled epochs so far.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct LinkSampleTimes {
    pub epochs: usize,
    pub batches: usize,
    pub batch_nodes: u64,
    pub sampled_edges: u64,
    /// Seconds the step loop waited for the workers.
    pub wait_s: f64,
    /// Seconds of building batch models and steps.
    pub step_s: f64,
}

/// The sampled loop: what it needs besides the [`LinkTrainer`] that holds the parameters.
pub struct SampledLink {
    sampler: Arc<dyn SeedBlockSampler>,
    model: ModelConfig,
    embedding: usize,
    batch_size: usize,
    prefetch: PrefetchConfig,
    pub times: LinkSampleTimes,
}

impl SampledLink {
    /// Batches of `batch_size` training edges with blocks from `sampler` (one per layer of
    /// `model`, a model with a fixed aggregation and no BatchNorm), for an encoder of output
    /// width `embedding`; batches made on `prefetch`'s workers.
    pub fn new(
        sampler: Arc<dyn SeedBlockSampler>,
        model: &ModelConfig,
        embedding: usize,
        batch_size: usize,
        prefetch: PrefetchConfig,
    ) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::Unsupported("--batch-size must be at least 1".into()));
        }
        if models::model_info(model.model)?.aggregation.is_none() {
            return Err(Error::Unsupported(format!(
                "link-neighbour sampling runs the encoder on per-layer blocks with the full graph's normalisation: {} renormalises over the edges it sees (use gcn, sage or gin)",
                model.model
            )));
        }
        if model.batch_norm {
            return Err(Error::Unsupported(
                "link-neighbour sampling: --batch-norm would take rows a layer does not aggregate into its statistics".into(),
            ));
        }
        if sampler.layers() != model.layers {
            return Err(Error::Unsupported(format!(
                "link-neighbour sampling: --fanout gives {} hops for {} layers (one per layer)",
                sampler.layers(),
                model.layers
            )));
        }
        Ok(SampledLink { sampler, model: *model, embedding, batch_size, prefetch, times: LinkSampleTimes::default() })
    }

    /// Batches per epoch for `t`'s training edges.
    pub fn batches_per_epoch<B: Ops + 'static>(&self, t: &mut LinkTrainer<B>) -> usize {
        t.sampled_parts().train_pos.len().div_ceil(self.batch_size)
    }

    /// The seed pairs of every batch of `epoch` (the negatives drawn on `t`'s backend).
    pub fn epoch_pairs<B: Ops + 'static>(&self, t: &mut LinkTrainer<B>, epoch: usize) -> Result<Vec<BatchPairs>> {
        let epoch = u32::try_from(epoch).map_err(|_| Error::Unsupported(format!("epoch {epoch} is past 2^32")))?;
        let b = t.backend().clone();
        let p = t.sampled_parts();
        let count = negative_slots(p.train_pos.len(), p.cfg.neg_ratio);
        let slots = b.negative_pairs(p.full, negative_stream_key(p.cfg.seed, epoch), count)?;
        Ok(epoch_batches(p.train_pos, &slots, self.batch_size, p.cfg.neg_ratio, p.cfg.seed, epoch))
    }

    /// One step on `batch` with `t`'s parameters; returns the batch's statistics (read later).
    pub fn step<B: Ops + 'static>(&mut self, t: &mut LinkTrainer<B>, batch: LinkBatch) -> Result<B::Stats> {
        let b = t.backend().clone();
        let b = &*b;
        let p = t.sampled_parts();
        let n = batch.blocks.nodes.len();
        let d = self.embedding;
        let features = &batch.blocks.features;
        let mut model = models::build_on_matrices(b, batch.blocks.matrices, features.cols(), d, &self.model)?;
        let mut input = InputFeatures::for_model(b, features, &self.model)?.with_half_features(b, &self.model)?;
        let mut decoder = Decoder::new(b, p.decoder.kind(), n, d, self.model.seed)?;
        let mut set = PairSet::new(b, n, &batch.pos, &batch.neg)?;
        let mut grad = b.edges(&set.graph, Side::Forward)?;
        let mut grad_t = b.edges(&set.graph, Side::Transposed)?;
        let mut dz = b.matrix(n, d)?;
        let mut stats = b.stats()?;
        swap_state(p.net, model.model())?;
        swap_params(p.decoder, &mut decoder)?;
        let stepped = (|| -> Result<()> {
            b.begin_step()?;
            let z = model.forward(b, &mut input, true)?;
            decoder.score(b, &mut set, z)?;
            b.bce_logits(&set.scores, &set.targets, 1.0 / set.len() as f32, &mut grad, &mut stats)?;
            decoder.backward(b, &mut set, z, &grad, &mut grad_t, &mut dz)?;
            model.backward(b, &mut input, &mut dz)?;
            let params = model.params().into_iter().chain(decoder.params()).map(|(_, p)| p);
            Param::adam_all(b, params, p.hyper)
        })();
        // Back even if the step failed: the trainer must not keep the batch's.
        swap_state(p.net, model.model())?;
        swap_params(p.decoder, &mut decoder)?;
        stepped?;
        self.times.batches += 1;
        self.times.batch_nodes += n as u64;
        self.times.sampled_edges += batch.blocks.sampled_edges as u64;
        Ok(stats)
    }

    /// One epoch: its batches made on the workers, a step each; returns the mean of the
    /// batches' losses and the negatives left out.
    pub fn train_epoch<B: Ops + 'static>(&mut self, t: &mut LinkTrainer<B>, epoch: usize) -> Result<(f64, usize)> {
        let pairs = Arc::new(self.epoch_pairs(t, epoch)?);
        let dropped = pairs.iter().map(|p| p.dropped).sum();
        let (sampler, list, e) = (Arc::clone(&self.sampler), Arc::clone(&pairs), epoch as u32);
        let mut batches = Prefetch::new(pairs.len(), self.prefetch, move |i| LinkBatch::make(&*sampler, &list[i], e, i as u32))?;
        let mut stats = Vec::with_capacity(pairs.len());
        for _ in 0..pairs.len() {
            let batch = batches.next().expect("one batch per index")?;
            let t0 = Instant::now();
            stats.push(self.step(t, batch)?);
            self.times.step_s += t0.elapsed().as_secs_f64();
        }
        self.times.wait_s += batches.waited().as_secs_f64();
        self.times.epochs += 1;
        let b = t.backend().clone();
        let mut loss = 0.0;
        for s in &stats {
            loss += b.read_stats(s)?.loss;
        }
        Ok((loss / stats.len().max(1) as f64, dropped))
    }

    /// [`LinkTrainer::fit`] with sampled epochs: trains epochs `0..epochs`, evaluating after
    /// each on the full graph, or from the representations `eval` computes (layer by layer);
    /// `on_epoch` sees the trainer after each and may stop the run.
    pub fn fit<B: Ops + 'static>(
        &mut self,
        t: &mut LinkTrainer<B>,
        epochs: usize,
        mut eval: Option<&mut dyn Representations<B>>,
        mut on_epoch: impl FnMut(&mut LinkTrainer<B>, &LinkEpoch) -> Result<Flow>,
    ) -> Result<LinkHistory> {
        let t0 = Instant::now();
        let (mut train_ms, mut eval_ms) = (Vec::new(), Vec::new());
        let mut run = Vec::new();
        for e in 0..epochs {
            let t1 = Instant::now();
            let (loss, negatives_dropped) = self.train_epoch(t, e)?;
            train_ms.push(t1.elapsed().as_secs_f64() * 1e3);
            if !loss.is_finite() {
                return Err(Error::Unsupported(format!("the loss became {loss} at epoch {}; try a smaller --lr", e + 1)));
            }
            let t1 = Instant::now();
            let (val, test) = match eval.as_deref_mut() {
                Some(r) => t.evaluate_from(r)?,
                None => t.evaluate()?,
            };
            eval_ms.push(t1.elapsed().as_secs_f64() * 1e3);
            let rec = LinkEpoch { epoch: e + 1, loss, val, test, negatives_dropped };
            run.push(rec);
            if on_epoch(t, &rec)? == Flow::Stop {
                break;
            }
        }
        let by = t.sampled_parts().cfg.best_by;
        Ok(LinkHistory::new(run, by, t0.elapsed().as_secs_f64(), train_ms, eval_ms))
    }

    /// One line on the epochs so far.
    pub fn summary(&self) -> String {
        let s = &self.times;
        let per = s.batches.max(1) as f64;
        format!(
            "link-neighbour sampling: {} batches an epoch, {:.0} nodes and {:.0} sampled edges per batch; step {:.1} ms, waiting for the sampler {:.1} ms per epoch",
            s.batches / s.epochs.max(1),
            s.batch_nodes as f64 / per,
            s.sampled_edges as f64 / per,
            1e3 * s.step_s / s.epochs.max(1) as f64,
            1e3 * s.wait_s / s.epochs.max(1) as f64
        )
    }
}

/// Swaps the decoders' parameters (names checked).
fn swap_params<B: Ops + 'static>(a: &mut Decoder<B>, b: &mut Decoder<B>) -> Result<()> {
    let (mut pa, mut pb) = (a.params(), b.params());
    if pa.len() != pb.len() || pa.iter().zip(&pb).any(|(x, y)| x.0 != y.0) {
        return Err(Error::Unsupported("a batch's decoder has other parameters than the trained one".into()));
    }
    for ((_, x), (_, y)) in pa.iter_mut().zip(pb.iter_mut()) {
        std::mem::swap(&mut **x, &mut **y);
    }
    Ok(())
}
