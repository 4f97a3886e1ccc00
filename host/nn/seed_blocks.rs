//! Blocks around a set of seed nodes, as a model on per-layer matrices takes them: what a task
//! that trains on sampled neighbourhoods of its own seeds (link prediction's seed edges' end
//! points) asks a sampler for. The type and the trait live here, below the samplers
//! (`sample/`) that make them and the tasks (`task/`) that train on them, which may not import
//! each other.

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::input::HostFeatures;

/// The sampled neighbourhood of some seed nodes.
pub struct SeedBlocks {
    /// Global ids of the batch's nodes; local id = position. The distinct seeds come first, in
    /// the order they were first given.
    pub nodes: Vec<u32>,
    /// The distinct seeds (the first `seeds` of `nodes`): the rows whose outputs are exact
    /// estimates of the full graph's; the rows past them are not aggregated into by the last
    /// layer and must not be read.
    pub seeds: usize,
    /// One n x n matrix per layer, in the order the model applies them (layer 0 first), each
    /// with the full graph's normalisation (what `nn::models::build_on_matrices` takes).
    pub matrices: Vec<Csr>,
    /// The node features of `nodes`, in that order.
    pub features: HostFeatures,
    /// Sampled edges over all layers.
    pub sampled_edges: usize,
}

/// A sampler of blocks around given seed nodes: a pure function of (seeds, epoch, batch) and
/// the sampler's own seed, callable from worker threads.
pub trait SeedBlockSampler: Send + Sync {
    /// The blocks around `seeds` (global ids; repeats merged) for batch `batch` of `epoch`.
    fn around(&self, seeds: &[u32], epoch: u32, batch: u32) -> Result<SeedBlocks>;
    /// Layers the blocks are made for (the matrices per batch).
    fn layers(&self) -> usize;
}
