//! `tcgnn train GRAPH --task link --sampler neighbor`: wires link-neighbour sampling, the
//! sample layer's blocks around given seeds (`tcgnn::sample::seed_blocks`) into the link task's
//! sampled loop (`tcgnn::task::link::sampled`), which may not import each other.

use std::sync::Arc;

use tcgnn::nn::input::HostFeatures;
use tcgnn::nn::models::Model;
use tcgnn::nn::{ModelConfig, Ops};
use tcgnn::sample::PrefetchConfig;
use tcgnn::sample::layerwise::LayerwiseInference;
use tcgnn::sample::seed_blocks::NeighborSeedBlocks;
use tcgnn::task::link::sampled::SampledLink;
use tcgnn::task::link::split::LinkSplit;
use tcgnn::task::link::train::Representations;
use tcgnn::{Error, Result};

use crate::cli::sample_args::{FeaturesOn, Inference, SampleOn, SamplerKind};
use crate::cli::train_cmd::TrainArgs;

/// Seed edges per batch without --batch-size.
pub const DEFAULT_BATCH_SIZE: usize = 512;
/// Neighbours per node per hop without --fanout (PyG's link examples' `num_neighbors=[10, 10]`).
pub const DEFAULT_FANOUT: i32 = 10;

/// Refuses the sampler options `--task link` does not use, before anything is loaded.
pub fn check(a: &TrainArgs) -> Result<()> {
    let s = &a.sample;
    s.check_used()?;
    let Some(kind) = s.sampler else {
        return Ok(());
    };
    if kind != SamplerKind::Neighbor {
        return Err(Error::Unsupported(format!(
            "--task link samples seed edges with their neighbourhoods: --sampler neighbor (not {})",
            clap::ValueEnum::to_possible_value(&kind).map_or_else(|| format!("{kind:?}"), |v| v.get_name().to_string())
        )));
    }
    let unused = [
        ("--neighbor-union", s.neighbor_union),
        ("--steps-per-epoch", s.steps_per_epoch.is_some()),
        ("--sample-on gpu", s.sample_on == SampleOn::Gpu),
        ("--features-on", s.features_on != FeaturesOn::Auto),
        ("--eager-steps", s.eager_steps),
    ];
    if let Some((flag, _)) = unused.iter().find(|u| u.1) {
        return Err(Error::Unsupported(format!(
            "{flag} does not apply to --task link --sampler neighbor (batches made by the CPU workers, a model per batch)"
        )));
    }
    if s.inference_batch_edges.is_some() && !layerwise(a) {
        return Err(Error::Unsupported("--inference-batch-edges sizes --inference layerwise's batches: add --inference layerwise".into()));
    }
    if s.batch_size == Some(0) {
        return Err(Error::Unsupported("--batch-size must be at least 1".into()));
    }
    if let Some(f) = &s.fanout
        && (f.is_empty() || f.iter().any(|&k| k == 0 || k < -1))
    {
        return Err(Error::Unsupported(format!("--fanout {f:?}: each hop takes >= 1 neighbours, or -1 for all")));
    }
    Ok(())
}

/// The sampled loop for `cfg`'s encoder on `split`'s message-passing graph, or `None` without
/// --sampler; `seed` seeds the blocks (the batches' edges and negatives follow the run's seed).
pub fn sampled(a: &TrainArgs, split: &LinkSplit, features: &HostFeatures, cfg: &ModelConfig, seed: u64) -> Result<Option<SampledLink>> {
    if a.sample.sampler.is_none() {
        return Ok(None);
    }
    let fanouts = fanouts(a, cfg);
    if fanouts.len() != cfg.layers {
        return Err(Error::Unsupported(format!("--fanout gives {} hops for {} layers: one per layer", fanouts.len(), cfg.layers)));
    }
    let graph = Arc::new(split.message_passing_graph()?);
    // The workers gather each batch's rows from their own copy (the trainer keeps the dataset's).
    let blocks = NeighborSeedBlocks::new(graph, Arc::new(features.clone()), cfg.model, fanouts, seed)?;
    let prefetch = PrefetchConfig { workers: a.sample.workers(), ahead: 1 };
    let batch = a.sample.batch_size.unwrap_or(DEFAULT_BATCH_SIZE);
    Ok(Some(SampledLink::new(Arc::new(blocks), cfg, a.link.embedding, batch, prefetch)?))
}

/// Whether the sampled run evaluates layer by layer (`--inference layerwise`; the default is the
/// full-graph forward, which needs the whole model on the graph).
pub fn layerwise(a: &TrainArgs) -> bool {
    a.sample.sampler.is_some() && a.sample.inference == Some(Inference::Layerwise)
}

/// Layer-wise inference as the link task's [`Representations`]: every node's output of the
/// encoder's parameters, one layer at a time over node batches of the message-passing graph.
pub struct LayerwiseRepresentations<B: Ops>(LayerwiseInference<B>);

impl<B: Ops + 'static> Representations<B> for LayerwiseRepresentations<B> {
    fn all_nodes(&mut self, b: &B, net: &mut dyn Model<B>) -> Result<B::Mat> {
        self.0.outputs(b, net)
    }
}

/// The layer-wise evaluation of `cfg`'s encoder (`embedding` wide) on `split`'s
/// message-passing graph, or `None` without `--inference layerwise`.
pub fn representations<B: Ops + 'static>(
    a: &TrainArgs,
    b: &B,
    split: &LinkSplit,
    features: &HostFeatures,
    cfg: &ModelConfig,
) -> Result<Option<LayerwiseRepresentations<B>>> {
    if !layerwise(a) {
        return Ok(None);
    }
    if !tcgnn::sample::layerwise::supports(cfg) {
        return Err(Error::Unsupported(format!("--inference layerwise runs GCN, SAGE and GIN without --batch-norm, not {}", cfg.model)));
    }
    if !b.can_bind() {
        return Err(Error::Unsupported(
            "--inference layerwise rebinds batches into one model: use --precision f32 (the HP kernels)".into(),
        ));
    }
    let dense;
    let x = match features {
        HostFeatures::Dense(x) => x,
        sparse => {
            tcgnn::util::memory::check_host_alloc(
                4 * sparse.rows() as u64 * sparse.cols() as u64,
                "a dense copy of the sparse features for layer-wise inference",
            )?;
            dense = sparse.to_dense();
            &dense
        }
    };
    let graph = split.message_passing_graph()?;
    let e = LayerwiseInference::representations(b, &graph, x, a.link.embedding, cfg, a.sample.inference_batch_edges())?;
    Ok(Some(LayerwiseRepresentations(e)))
}

fn fanouts(a: &TrainArgs, cfg: &ModelConfig) -> Vec<i32> {
    a.sample.fanout.clone().unwrap_or_else(|| vec![DEFAULT_FANOUT; cfg.layers])
}

/// The sampled run's settings in words (the table's second line).
pub fn describe(a: &TrainArgs, cfg: &ModelConfig) -> String {
    let f: Vec<String> = fanouts(a, cfg).iter().map(|k| k.to_string()).collect();
    format!(
        "link-neighbour sampled: {} seed edges a batch, fan-out {}, per-layer blocks with the full graph's normalisation; evaluated {}",
        a.sample.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
        f.join(","),
        if layerwise(a) { "layer by layer" } else { "on the full graph" }
    )
}
