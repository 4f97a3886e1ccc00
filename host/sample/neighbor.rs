//! Neighbour sampling (GraphSAGE; PyG's `NeighborLoader`, DGL's `MultiLayerNeighborSampler`):
//! from a batch of target nodes, each hop draws up to `fanout` neighbours of every node so far,
//! without replacement within a row, and yields one bipartite block per layer.
//!
//! Node order: the targets first, then each hop's newly reached nodes in the order they are
//! reached. Every layer's input nodes are therefore a prefix of the outermost input list, and
//! every layer's output nodes are the first `n_dst` of its inputs (the convention PyG's and
//! DGL's blocks use, so a layer's root term reads `x[..n_dst]`).

use std::sync::Arc;

use super::local_ids::LocalIdPool;
use super::shuffle::permuted_index;
use super::stream::Stream;
use crate::error::{Error, Result};
use crate::graph::Csr;

/// One layer's message graph: rows = its output nodes, columns = its input nodes (local ids;
/// input j is `Blocks::input_nodes[j]`, output i is input i). Values 1: the layer normalises.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub graph: Csr,
    /// Each entry's position in the full graph's arrays.
    pub edge_ids: Vec<u32>,
}

impl Block {
    pub fn n_dst(&self) -> usize {
        self.graph.n_rows()
    }
    pub fn n_src(&self) -> usize {
        self.graph.n_cols()
    }
}

/// The blocks of one batch, in the order the model applies them.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocks {
    /// `layers[0]` reads the features of `input_nodes`; the last layer outputs `output_nodes`.
    pub layers: Vec<Block>,
    /// Global ids of the outermost input nodes (the features to gather).
    pub input_nodes: Vec<u32>,
    /// Global ids of the targets (the first `output_nodes.len()` of `input_nodes`).
    pub output_nodes: Vec<u32>,
}

impl Blocks {
    /// Sampled edges over all layers.
    pub fn n_edges(&self) -> usize {
        self.layers.iter().map(|b| b.graph.nnz()).sum()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighborConfig {
    /// Neighbours per node per hop, from the targets outwards (PyG's `num_neighbors`: [15, 10]
    /// draws 15 for the targets, then 10 for every node so far); -1 = all of them.
    pub fanouts: Vec<i32>,
    /// Targets per batch (the last batch of an epoch may hold fewer).
    pub batch_size: usize,
    /// Visit the targets in a new random order every epoch (PyG's `shuffle=True`).
    pub shuffle: bool,
    pub seed: u64,
}

/// A neighbour sampler over one graph and a set of target nodes (e.g. the training nodes).
pub struct NeighborSampler {
    graph: Arc<Csr>,
    targets: Vec<u32>,
    config: NeighborConfig,
    ids: LocalIdPool,
}

impl NeighborSampler {
    pub fn new(graph: Arc<Csr>, targets: Vec<u32>, config: NeighborConfig) -> Result<Self> {
        let bad = |m: String| Err(Error::Unsupported(format!("neighbour sampler: {m}")));
        if graph.n_rows() != graph.n_cols() {
            return bad(format!("the graph must be square (got {} x {})", graph.n_rows(), graph.n_cols()));
        }
        if config.batch_size == 0 {
            return bad("batch size 0".into());
        }
        if let Some(f) = config.fanouts.iter().find(|&&f| f < -1) {
            return bad(format!("fan-out {f} (use a count >= 0, or -1 for all neighbours)"));
        }
        if let Some(t) = targets.iter().find(|&&t| t as usize >= graph.n_rows()) {
            return bad(format!("target node {t} is not in the graph ({} nodes)", graph.n_rows()));
        }
        let mut sorted = targets.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return bad(format!("target node {} is listed twice", w[0]));
        }
        let ids = LocalIdPool::new(graph.n_rows());
        Ok(NeighborSampler { graph, targets, config, ids })
    }

    pub fn config(&self) -> &NeighborConfig {
        &self.config
    }

    pub fn graph(&self) -> &Arc<Csr> {
        &self.graph
    }

    /// The target nodes, in the order an unshuffled epoch visits them.
    pub fn targets(&self) -> &[u32] {
        &self.targets
    }

    /// Batches in one epoch: ceil(targets / batch size).
    pub fn batches_per_epoch(&self) -> usize {
        self.targets.len().div_ceil(self.config.batch_size)
    }

    /// The targets of batch `i` of `epoch` (empty past the end of the epoch).
    pub fn batch_targets(&self, epoch: u32, i: u32) -> Vec<u32> {
        let n = self.targets.len();
        let start = (i as usize).saturating_mul(self.config.batch_size).min(n);
        let end = start.saturating_add(self.config.batch_size).min(n);
        // The epoch's order has its own stream: batch index u32::MAX is never a real batch's.
        let key = Stream::new(self.config.seed, epoch, u32::MAX).bits(0);
        (start..end)
            .map(|p| {
                let q = if self.config.shuffle { permuted_index(key, n as u64, p as u64) as usize } else { p };
                self.targets[q]
            })
            .collect()
    }

    /// Batch `i` of `epoch`: a pure function of (seed, epoch, i).
    pub fn batch(&self, epoch: u32, i: u32) -> Blocks {
        let seeds = self.batch_targets(epoch, i);
        self.sample(&seeds, Stream::new(self.config.seed, epoch, i))
    }

    /// The blocks around `seeds` (global ids; repeats are merged) with the draws of stream `s`:
    /// hop h uses sub-stream h, and row d of that hop counters `d * fanout ..`.
    pub fn sample(&self, seeds: &[u32], s: Stream) -> Blocks {
        let g = &*self.graph;
        let (row_ptr, col) = (g.row_ptr(), g.col_idx());
        self.ids.with(|ids| {
            let mut nodes: Vec<u32> = Vec::with_capacity(seeds.len());
            for &v in seeds {
                if ids.get(v).is_none() {
                    ids.insert(v, nodes.len() as u32);
                    nodes.push(v);
                }
            }
            let output_nodes = nodes.clone();
            let mut layers = Vec::with_capacity(self.config.fanouts.len());
            let mut chosen: Vec<u32> = Vec::new();
            for (h, &fanout) in self.config.fanouts.iter().enumerate() {
                let hop = s.substream(h as u32);
                let n_dst = nodes.len();
                let mut b_ptr = Vec::with_capacity(n_dst + 1);
                b_ptr.push(0u32);
                let (mut b_col, mut b_edge) = (Vec::new(), Vec::new());
                for d in 0..n_dst {
                    let v = nodes[d] as usize;
                    let (start, deg) = (row_ptr[v], row_ptr[v + 1] - row_ptr[v]);
                    chosen.clear();
                    if fanout < 0 || fanout as u32 >= deg {
                        chosen.extend(0..deg);
                    } else {
                        floyd_sample(deg, fanout as u32, hop, d as u64 * fanout as u64, &mut chosen);
                    }
                    let row_start = b_col.len();
                    for &k in &chosen {
                        let e = start + k;
                        let u = col[e as usize];
                        let l = match ids.get(u) {
                            Some(l) => l,
                            None => {
                                let l = nodes.len() as u32;
                                ids.insert(u, l);
                                nodes.push(u);
                                l
                            }
                        };
                        b_col.push(l);
                        b_edge.push(e);
                    }
                    sort_row(&mut b_col[row_start..], &mut b_edge[row_start..]);
                    b_ptr.push(b_col.len() as u32);
                }
                let values = vec![1.0f32; b_col.len()];
                let graph = Csr::new(n_dst, nodes.len(), b_ptr, b_col, values).expect("a block is valid by construction");
                layers.push(Block { graph, edge_ids: b_edge });
            }
            layers.reverse(); // sampled from the targets outwards, applied from the inputs inwards
            Blocks { layers, input_nodes: nodes, output_nodes }
        })
    }
}

/// `k` distinct positions of 0..n (k < n) by Floyd's algorithm, sorted; draw j uses counter
/// `base + j`. Each k-subset is equally likely.
fn floyd_sample(n: u32, k: u32, s: Stream, base: u64, out: &mut Vec<u32>) {
    for (j, i) in (n - k..n).enumerate() {
        let t = s.below(base + j as u64, i as u64 + 1) as u32;
        // k is a fan-out (tens): a linear scan beats a set here.
        out.push(if out.contains(&t) { i } else { t });
    }
    out.sort_unstable();
}

/// Sort one block row by local column, edge ids alongside (sampled rows are short: insertion
/// sort; whole rows of hubs with fan-out -1 go through a pair sort).
fn sort_row(cols: &mut [u32], edges: &mut [u32]) {
    if cols.len() > 32 {
        let mut pairs: Vec<(u32, u32)> = cols.iter().copied().zip(edges.iter().copied()).collect();
        pairs.sort_unstable();
        for (i, (c, e)) in pairs.into_iter().enumerate() {
            (cols[i], edges[i]) = (c, e);
        }
        return;
    }
    for i in 1..cols.len() {
        let mut j = i;
        while j > 0 && cols[j - 1] > cols[j] {
            cols.swap(j - 1, j);
            edges.swap(j - 1, j);
            j -= 1;
        }
    }
}
