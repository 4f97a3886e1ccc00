//! Neighbour sampling around given seed nodes (PyG's `LinkNeighborLoader` samples around the
//! end points of its seed edges this way): the blocks [`NeighborSampler::sample`] draws from the
//! seeds outwards, one per layer, each made into its layer's matrix with the full graph's
//! normalisation ([`Aggregation::block_matrix`], as node sampling's per-layer blocks), and the
//! features of the batch's nodes gathered. Generic: the caller chooses the seeds (a task's
//! [`SeedBlockSampler`] user, e.g. the link task's sampled loop).

use std::sync::Arc;

use super::aggregation::Aggregation;
use super::batch::gather_rows;
use super::neighbor::{Blocks, NeighborConfig, NeighborSampler};
use super::stream::Stream;
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::input::HostFeatures;
use crate::nn::seed_blocks::{SeedBlockSampler, SeedBlocks};

/// Per-layer neighbour blocks around given seeds, with the full graph's normalisation.
pub struct NeighborSeedBlocks {
    sampler: NeighborSampler,
    aggregation: Aggregation,
    features: Arc<HostFeatures>,
    seed: u64,
}

impl NeighborSeedBlocks {
    /// Blocks on `graph` (the graph the model aggregates over) for `model` (one with a fixed
    /// aggregation: GCN, SAGE, GIN), one per fan-out (from the seeds outwards; -1 = every
    /// neighbour), with `features` (one row per node); draws seeded by `seed`.
    pub fn new(graph: Arc<Csr>, features: Arc<HostFeatures>, model: &str, fanouts: Vec<i32>, seed: u64) -> Result<Self> {
        if features.rows() != graph.n_rows() {
            return Err(Error::Shape(format!("neighbour blocks: {} feature rows for {} nodes", features.rows(), graph.n_rows())));
        }
        if fanouts.is_empty() {
            return Err(Error::Unsupported("neighbour blocks: at least one fan-out (one per layer)".into()));
        }
        let aggregation = Aggregation::for_model(model, &graph)?.ok_or_else(|| {
            Error::Unsupported(format!(
                "neighbour blocks with the full graph's normalisation need a model with a fixed aggregation (gcn, sage, gin); {model} renormalises over the edges it sees"
            ))
        })?;
        // The sampler's own targets are not used: every batch names its seeds.
        let config = NeighborConfig { fanouts, batch_size: 1, shuffle: false, seed };
        let sampler = NeighborSampler::new(graph, Vec::new(), config)?;
        Ok(NeighborSeedBlocks { sampler, aggregation, features, seed })
    }

    /// The raw blocks around `seeds` for batch `batch` of `epoch` (what [`SeedBlockSampler::around`]
    /// turns into matrices): the stream node sampling's batch `batch` of `epoch` uses.
    pub fn blocks(&self, seeds: &[u32], epoch: u32, batch: u32) -> Blocks {
        self.sampler.sample(seeds, Stream::new(self.seed, epoch, batch))
    }
}

impl SeedBlockSampler for NeighborSeedBlocks {
    fn around(&self, seeds: &[u32], epoch: u32, batch: u32) -> Result<SeedBlocks> {
        let n_all = self.sampler.graph().n_rows();
        if let Some(&s) = seeds.iter().find(|&&s| s as usize >= n_all) {
            return Err(Error::Unsupported(format!("seed node {s} is not in the graph ({n_all} nodes)")));
        }
        let b = self.blocks(seeds, epoch, batch);
        let n = b.input_nodes.len();
        let full = self.sampler.graph();
        let matrices = b
            .layers
            .iter()
            .map(|block| self.aggregation.block_matrix(full, &block.graph, &block.edge_ids, &b.input_nodes, n))
            .collect::<Result<Vec<_>>>()?;
        Ok(SeedBlocks {
            features: gather_rows(&self.features, &b.input_nodes)?,
            seeds: b.output_nodes.len(),
            sampled_edges: b.n_edges(),
            matrices,
            nodes: b.input_nodes,
        })
    }

    fn layers(&self) -> usize {
        self.sampler.config().fanouts.len()
    }
}
