//! GraphSAGE as PyG's `GraphSAGE` (`BasicGNN` over `SAGEConv`, mean aggregation with root
//! weight): dropout → SageConv → ReLU → dropout → … → SageConv (logits); `--variant` L2-normalises
//! every conv's output (`SAGEConv(normalize=True)`, which BasicGNN passes to every layer).
//! Default 2 x 64 as PyG's GraphSAGE examples.

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::models::{ModelConfig, ModelInfo, edge_bytes, hidden_bytes, mat_bytes, param_bytes, widths};
use crate::nn::gcn_conv::GcnAdjacency;
use crate::nn::sage_conv::{SageConv, mean_adjacency};
use crate::nn::stack::Stack;
use crate::ops::backend::Ops;
use crate::ops::backend::cuda::EdgeLayout;
use crate::util::rng::SplitMix64;

pub const INFO: ModelInfo = ModelInfo {
    name: "sage",
    about: "GraphSAGE (Hamilton et al.): mean_j(x_j) W_l + b + x_i W_r per layer; --variant L2-normalises; default 2 x 64",
    defaults: ModelConfig {
        model: "sage",
        layers: 2,
        hidden: 64,
        heads: 1,
        dropout: 0.5,
        batch_norm: false,
        residual: false,
        variant: false,
        seed: 0,
    },
    lr: 0.01,
    weight_decay: 5e-4,
    // The mean's values are fixed: keep them in the kernel's layout.
    edge_layout: EdgeLayout::Kernel,
    estimate_bytes,
};

pub type Sage<B> = Stack<B, SageConv<B>>;

pub fn build<B: Ops>(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Sage<B>> {
    build_on(b, mean_adjacency(b, graph)?, graph.n_rows(), features, classes, cfg)
}

/// The model over `n` nodes on an aggregation whose values are used as they are (a GraphSAINT
/// batch: 1 / the full graph's degree times the aggregation weights, `crate::sample::aggregation`).
pub fn build_on<B: Ops>(b: &B, adj: GcnAdjacency<B>, n: usize, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Sage<B>> {
    let mut rng = SplitMix64::new(cfg.seed);
    let widths = widths(features, cfg.hidden, cfg.layers, classes);
    let convs = widths.windows(2).map(|w| SageConv::new(b, n, w[0], w[1], cfg.variant, &mut rng)).collect::<Result<Vec<_>>>()?;
    Stack::new(b, n, adj, convs, &widths, cfg)
}

fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64 {
    let (n, nnz) = (n as u64, nnz as u64);
    let w = widths(features, cfg.hidden, cfg.layers, classes);
    let norm = if cfg.variant { 4 } else { 0 };
    let per_layer: u64 = w
        .windows(2)
        .map(|w| {
            let (i, o) = (w[0] as u64, w[1] as u64);
            2 * param_bytes(i, o) + (6 + norm) * mat_bytes(n, o) + 2 * mat_bytes(n, i) + n * i
        })
        .sum();
    per_layer + 2 * edge_bytes(n, nnz) + hidden_bytes(cfg, n, &w)
}
