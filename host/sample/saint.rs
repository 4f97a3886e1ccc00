//! GraphSAINT sampling (node, edge, random walk): each batch is the subgraph its sampled nodes
//! induce, with the loss and aggregation weights of [`SaintNorm`] when `coverage > 0`.

use std::sync::Arc;

use super::local_ids::LocalIdPool;
use super::saint_edge::EdgeDraws;
use super::saint_norm::SaintNorm;
use super::stream::Stream;
use super::{induced::induced_subgraph, saint_node, saint_rw};
use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::util::rng::SplitMix64;

/// Which GraphSAINT sampler, with its size (as PyG's `batch_size` / `walk_length`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaintKind {
    /// `budget` node draws, P(v) ∝ deg(v).
    Node { budget: usize },
    /// `budget` edge draws, P(u, v) ∝ 1/deg(u) + 1/deg(v); both ends sampled.
    Edge { budget: usize },
    /// `roots` uniform start nodes, `walk_length` steps each.
    RandomWalk { roots: usize, walk_length: usize },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaintConfig {
    pub kind: SaintKind,
    /// Batches per epoch: the size of a pre-sampling round (PyG's `num_steps`).
    pub steps_per_epoch: u32,
    /// Pre-sampling rounds continue until `coverage * N` nodes were sampled (PyG's
    /// `sample_coverage`); 0 = no normalisation (unit weights).
    pub coverage: u32,
    pub seed: u64,
}

/// One GraphSAINT batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// Global ids of the sampled nodes, sorted; local id = position here.
    pub nodes: Vec<u32>,
    /// The induced subgraph on local ids, rows = aggregating nodes; values = the aggregation
    /// weights C_v / C_{v,u} (1 without normalisation). Multiply in the model's own edge
    /// normalisation (e.g. GCN's) on top.
    pub graph: Csr,
    /// Each entry's position in the full graph's arrays (per-edge data, and the weights' source).
    pub edge_ids: Vec<u32>,
    /// Per node: `num_samples / C_v / N` when normalised, with the loss summed
    /// (`Σ_train w_v ℓ_v`, PyG's `(loss * node_norm)[train_mask].sum()`); without normalisation
    /// every weight is 1 and the loss is the mean over the batch's train nodes.
    pub loss_weight: Vec<f32>,
    /// Whether the weights come from pre-sampling (`coverage > 0`).
    pub normalized: bool,
}

impl Batch {
    /// Edges of the sampled subgraph.
    pub fn n_edges(&self) -> usize {
        self.graph.nnz()
    }
}

/// A GraphSAINT sampler over one graph: `batch(epoch, i)` is a pure function of (seed, epoch, i).
pub struct SaintSampler {
    graph: Arc<Csr>,
    config: SaintConfig,
    edges: Option<EdgeDraws>,
    norm: Option<SaintNorm>,
    ids: LocalIdPool,
}

impl SaintSampler {
    /// Checks the graph and sizes, builds the edge distribution (edge sampler) and pre-samples
    /// the normalisation (`coverage > 0`, in parallel on the current rayon pool).
    pub fn new(graph: Arc<Csr>, config: SaintConfig) -> Result<Self> {
        let bad = |m: String| Err(Error::Unsupported(format!("GraphSAINT sampler: {m}")));
        if graph.n_rows() != graph.n_cols() {
            return bad(format!("the graph must be square (got {} x {})", graph.n_rows(), graph.n_cols()));
        }
        if graph.n_rows() == 0 {
            return bad("the graph has no nodes".into());
        }
        match config.kind {
            SaintKind::Node { budget: 0 } | SaintKind::Edge { budget: 0 } => return bad("a batch size of 0 draws nothing".into()),
            SaintKind::RandomWalk { roots: 0, .. } => return bad("0 roots sample nothing".into()),
            SaintKind::Node { .. } | SaintKind::Edge { .. } if graph.nnz() == 0 => {
                return bad("node and edge samplers draw edges, and the graph has none".into());
            }
            _ => {}
        }
        if config.coverage > 0 && config.steps_per_epoch == 0 {
            return bad("pre-sampling (coverage > 0) needs steps per epoch >= 1".into());
        }
        let edges = match config.kind {
            SaintKind::Edge { .. } => Some(EdgeDraws::new(&graph)?),
            _ => None,
        };
        let ids = LocalIdPool::new(graph.n_rows());
        let mut s = SaintSampler { graph, config, edges, norm: None, ids };
        if config.coverage > 0 {
            let norm = SaintNorm::presample(&s.graph, config.steps_per_epoch, config.coverage, |round, i| {
                let b = s.presample_batch(round, i);
                (b.nodes, b.edge_ids)
            })?;
            s.norm = Some(norm);
        }
        Ok(s)
    }

    pub fn config(&self) -> &SaintConfig {
        &self.config
    }

    pub fn graph(&self) -> &Arc<Csr> {
        &self.graph
    }

    /// The pre-sampled weights (`None` when coverage is 0).
    pub fn norm(&self) -> Option<&SaintNorm> {
        self.norm.as_ref()
    }

    /// Batch `i` of `epoch`, normalised when the sampler has weights.
    pub fn batch(&self, epoch: u32, i: u32) -> Batch {
        let mut b = self.sample(Stream::new(self.config.seed, epoch, i));
        if let Some(norm) = &self.norm {
            b.loss_weight = b.nodes.iter().map(|&v| norm.node_norm[v as usize]).collect();
            let values = b.edge_ids.iter().map(|&e| norm.edge_norm[e as usize]).collect();
            b.graph = b.graph.with_values(values).expect("one weight per entry");
            b.normalized = true;
        }
        b
    }

    /// Subgraph `i` of pre-sampling round `round`, unnormalised: its own stream (a seed derived
    /// from the sampler's), so pre-sampling never replays a training batch.
    pub fn presample_batch(&self, round: u32, i: u32) -> Batch {
        let seed = SplitMix64::new(self.config.seed ^ 0x7072_6573_616d_706c).next_u64();
        self.sample(Stream::new(seed, round, i))
    }

    /// The sampled nodes of stream `s` before deduplication (repeats and draw order kept).
    pub fn draw(&self, s: Stream) -> Vec<u32> {
        match self.config.kind {
            SaintKind::Node { budget } => saint_node::draw_nodes(&self.graph, budget, s),
            SaintKind::Edge { budget } => self.edges.as_ref().expect("built for the edge sampler").draw_nodes(&self.graph, budget, s),
            SaintKind::RandomWalk { roots, walk_length } => saint_rw::draw_walks(&self.graph, roots, walk_length, s),
        }
    }

    /// The edge sampler's distribution (`None` for the other kinds).
    pub fn edge_draws(&self) -> Option<&EdgeDraws> {
        self.edges.as_ref()
    }

    fn sample(&self, s: Stream) -> Batch {
        let mut nodes = self.draw(s);
        nodes.sort_unstable();
        nodes.dedup();
        let (graph, edge_ids) = self.ids.with(|ids| induced_subgraph(&self.graph, &nodes, ids));
        let loss_weight = vec![1.0; nodes.len()];
        Batch { nodes, graph, edge_ids, loss_weight, normalized: false }
    }
}
