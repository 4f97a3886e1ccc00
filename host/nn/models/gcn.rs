//! GCN as PyG's example (`gcn.py`): dropout → GcnConv → ReLU → dropout → … → GcnConv (logits);
//! with `--batch-norm` / `--residual` and any depth as PyG's `BasicGNN` (see [`Stack`]).

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::gcn_conv::{GcnAdjacency, GcnConv};
use crate::nn::models::{ModelConfig, ModelInfo, edge_bytes, hidden_bytes, mat_bytes, param_bytes, widths};
use crate::nn::stack::Stack;
use crate::ops::backend::Ops;
use crate::ops::backend::cuda::EdgeLayout;
use crate::util::rng::SplitMix64;

pub const INFO: ModelInfo = ModelInfo {
    name: "gcn",
    about: "GCN (Kipf & Welling): Â (X W) + b per layer, Â = D^-1/2 (A + I) D^-1/2; default 2 x 16",
    defaults: ModelConfig {
        model: "gcn",
        layers: 2,
        hidden: 16,
        heads: 1,
        dropout: 0.5,
        batch_norm: false,
        residual: false,
        variant: false,
        seed: 0,
    },
    lr: 0.01,
    weight_decay: 5e-4,
    // Â is fixed: keep it in the kernel's layout, no conversion per product.
    edge_layout: EdgeLayout::Kernel,
    estimate_bytes,
};

pub fn build<B: Ops>(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Gcn<B>> {
    super::refuse_options(cfg, true, false)?;
    build_on(b, GcnAdjacency::new(b, graph)?, graph.n_rows(), features, classes, cfg)
}

/// The model over `n` nodes on an adjacency whose values are used as they are (a GraphSAINT
/// batch: the full graph's Â times the aggregation weights, `crate::sample::aggregation`).
pub fn build_on<B: Ops>(b: &B, adj: GcnAdjacency<B>, n: usize, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Gcn<B>> {
    super::refuse_options(cfg, true, false)?;
    let mut rng = SplitMix64::new(cfg.seed);
    let widths = widths(features, cfg.hidden, cfg.layers, classes);
    let convs = widths.windows(2).map(|w| GcnConv::new(b, n, w[0], w[1], &mut rng)).collect::<Result<Vec<_>>>()?;
    Stack::new(b, n, adj, convs, &widths, cfg)
}

fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64 {
    let (n, nnz) = (n as u64, nnz as u64);
    let w = widths(features, cfg.hidden, cfg.layers, classes);
    let per_layer: u64 = w.windows(2).map(|w| {
        let (i, o) = (w[0] as u64, w[1] as u64);
        param_bytes(i, o) + 4 * mat_bytes(n, o) + 2 * mat_bytes(n, i) + n * i
    }).sum();
    per_layer + 2 * edge_bytes(n, nnz) + hidden_bytes(cfg, n, &w)
}

/// GCN: the [`Stack`] over [`GcnConv`]s sharing one Â.
pub type Gcn<B> = Stack<B, GcnConv<B>>;
