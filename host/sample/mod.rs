//! Graph sampling for mini-batch training: GraphSAINT (node, edge, random-walk subgraphs with
//! their pre-sampled normalisation) and neighbour sampling (one bipartite block per layer), with
//! counter-based randomness (a batch is a pure function of seed, epoch and batch index) and
//! worker threads that make batches ahead of the training step.
//!
//! Depends only on [`crate::graph`], [`crate::util`] and the shared RNG hash
//! (`kernels-gpu/src/rng.rs`), so a GPU sampler can draw the very same batches.
//!
//! ```no_run
//! use std::sync::Arc;
//! use tcgnn::sample::{Prefetch, PrefetchConfig, SaintConfig, SaintKind, SaintSampler};
//! let g = Arc::new(tcgnn::graph::source::load("cora")?);
//! let kind = SaintKind::RandomWalk { roots: 300, walk_length: 2 };
//! let sampler = Arc::new(SaintSampler::new(g, SaintConfig { kind, steps_per_epoch: 10, coverage: 100, seed: 0 })?);
//! let s = Arc::clone(&sampler);
//! for batch in Prefetch::new(10, PrefetchConfig::default(), move |i| s.batch(0, i as u32))? {
//!     // batch.nodes (global ids), batch.graph (local CSR, aggregation weights), batch.loss_weight
//! }
//! # Ok::<(), tcgnn::Error>(())
//! ```

pub mod aggregation;
pub mod alias;
pub mod batch;
pub mod bound;
pub mod device_batch;
pub mod device_features;
pub mod device_neighbor;
pub mod device_saint;
pub mod induced;
pub mod layerwise;
pub mod local_ids;
pub mod neighbor;
// The workers moved to util (the graph task uses them too); the old path stays.
pub use crate::util::prefetch;
pub mod prepared;
pub mod saint;
pub mod saint_edge;
pub mod saint_node;
pub mod saint_norm;
pub mod saint_rw;
pub mod seed_blocks;
pub mod shuffle;
pub mod stream;
pub mod train;

pub use neighbor::{Block, Blocks, NeighborConfig, NeighborSampler};
pub use prefetch::{Prefetch, PrefetchConfig};
pub use saint::{Batch, SaintConfig, SaintKind, SaintSampler};
pub use saint_norm::SaintNorm;
pub use stream::Stream;
pub use train::{SampleTimes, SampledTraining};
