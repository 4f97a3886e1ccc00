//! `tcgnn train GRAPH --task link --sampler neighbor`: wires link-neighbour sampling, the
//! sample layer's blocks around given seeds (`tcgnn::sample::seed_blocks`) into the link task's
//! sampled loop (`tcgnn::task::link::sampled`), which may not import each other.

use std::sync::Arc;

use tcgnn::nn::ModelConfig;
use tcgnn::nn::input::HostFeatures;
use tcgnn::sample::PrefetchConfig;
use tcgnn::sample::seed_blocks::NeighborSeedBlocks;
use tcgnn::task::link::sampled::SampledLink;
use tcgnn::task::link::split::LinkSplit;
use tcgnn::{Error, Result};

use crate::cli::sample_args::{FeaturesOn, SampleOn, SamplerKind};
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
        ("--inference layerwise", s.inference == Some(crate::cli::sample_args::Inference::Layerwise)),
        ("--inference-batch-edges", s.inference_batch_edges.is_some()),
        ("--sample-on gpu", s.sample_on == SampleOn::Gpu),
        ("--features-on", s.features_on != FeaturesOn::Auto),
        ("--eager-steps", s.eager_steps),
    ];
    if let Some((flag, _)) = unused.iter().find(|u| u.1) {
        return Err(Error::Unsupported(format!(
            "{flag} does not apply to --task link --sampler neighbor (batches made by the CPU workers, a model per batch, evaluation on the full graph)"
        )));
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

fn fanouts(a: &TrainArgs, cfg: &ModelConfig) -> Vec<i32> {
    a.sample.fanout.clone().unwrap_or_else(|| vec![DEFAULT_FANOUT; cfg.layers])
}

/// The sampled run's settings in words (the table's second line).
pub fn describe(a: &TrainArgs, cfg: &ModelConfig) -> String {
    let f: Vec<String> = fanouts(a, cfg).iter().map(|k| k.to_string()).collect();
    format!(
        "link-neighbour sampled: {} seed edges a batch, fan-out {}, per-layer blocks with the full graph's normalisation",
        a.sample.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
        f.join(",")
    )
}
