//! GIN as PyG's `GIN` (`BasicGNN` over `GINConv`, node classification): dropout → GinConv →
//! ReLU → dropout → … → GinConv (logits). Each conv's MLP is `MLP([in, out, out])` as BasicGNN's
//! `init_conv` builds it (Linear → ReLU → Linear), so the last conv maps hidden → classes →
//! classes. BasicGNN passes its `norm` (None by default) into those MLPs too; here
//! `--batch-norm` normalises after each hidden conv (BasicGNN's `norms`) and not inside the MLP.
//! `--variant` makes eps learnable (`train_eps=True`). Default 2 x 64.

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::gcn_conv::GcnAdjacency;
use crate::nn::gin_conv::{GinConv, sum_adjacency};
use crate::nn::models::{ModelConfig, ModelInfo, edge_bytes, hidden_bytes, mat_bytes, param_bytes, widths};
use crate::nn::stack::Stack;
use crate::ops::backend::Ops;
use crate::ops::backend::cuda::EdgeLayout;
use crate::util::rng::SplitMix64;

pub const INFO: ModelInfo = ModelInfo {
    name: "gin",
    about: "GIN (Xu et al.): MLP((1 + eps) x_i + sum_j x_j) per layer, 2-layer MLP; --variant learns eps; default 2 x 64",
    defaults: ModelConfig {
        model: "gin",
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
    // Unit values, fixed: the kernel's layout.
    edge_layout: EdgeLayout::Kernel,
    estimate_bytes,
};

pub type Gin<B> = Stack<B, GinConv<B>>;

pub fn build<B: Ops>(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Gin<B>> {
    build_on(b, sum_adjacency(b, graph)?, graph.n_rows(), features, classes, cfg)
}

/// The model over `n` nodes on a sum whose values are used as they are (a GraphSAINT batch: the
/// aggregation weights, `crate::sample::aggregation`).
pub fn build_on<B: Ops>(b: &B, adj: GcnAdjacency<B>, n: usize, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Gin<B>> {
    let mut rng = SplitMix64::new(cfg.seed);
    let widths = widths(features, cfg.hidden, cfg.layers, classes);
    let convs = widths.windows(2).map(|w| GinConv::new(b, n, w[0], w[1], cfg.variant, &mut rng)).collect::<Result<Vec<_>>>()?;
    Stack::new(b, n, adj, convs, &widths, cfg)
}

fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64 {
    let (n, nnz) = (n as u64, nnz as u64);
    let w = widths(features, cfg.hidden, cfg.layers, classes);
    let per_layer: u64 = w
        .windows(2)
        .map(|w| {
            let (i, o) = (w[0] as u64, w[1] as u64);
            param_bytes(i, o) + param_bytes(o, o) + 7 * mat_bytes(n, o) + 2 * mat_bytes(n, i) + n * i
        })
        .sum();
    per_layer + 2 * edge_bytes(n, nnz) + hidden_bytes(cfg, n, &w)
}
