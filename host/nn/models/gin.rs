//! GIN as PyG's `GIN` (`BasicGNN` over `GINConv`, node classification): dropout → GinConv →
//! ReLU → dropout → … → GinConv (logits). Each conv's MLP is `in -> hidden -> out` (Linear →
//! ReLU → Linear) as `bench/pyg/train.py`'s `gin_mlp` builds it, so the last conv maps
//! hidden → hidden → classes. (BasicGNN's `init_conv` would build `MLP([in, out, out])`,
//! squeezing the last conv through a classes-wide ReLU layer, where a seed-dependent share of
//! the 7 units of cora die; the PyG reference we compare against has the hidden width there.)
//! `--batch-norm` normalises after each hidden conv (BasicGNN's `norms`) and not inside the MLP.
//! `--variant` makes eps learnable (`train_eps=True`). Default 2 x 64.

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::gin_conv::{GinConv, GinWork};
use crate::nn::halo_hook::PartContext;
use crate::nn::models::traffic::{self, Aggregation, StepShape, StepTraffic};
use crate::nn::models::{FixedAggregation, ModelConfig, ModelInfo, adjacency_bytes, hidden_bytes, mat_bytes, param_bytes, widths};
use crate::nn::stack::Stack;
use crate::ops::backend::cuda::EdgeLayout;
use crate::ops::nn::Ops;

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
    aggregation: Some(FixedAggregation::Sum),
    estimate_bytes,
    step_traffic,
    bench_shapes: &[],
};

pub type Gin<B> = Stack<B, GinConv<B>>;

pub fn build<B: Ops>(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Gin<B>> {
    build_on(b, model_graph(graph)?, features, classes, cfg, None)
}

/// The matrix the model multiplies (rows complete on every part, so a part's rows of it are the
/// whole graph's).
pub fn model_graph(a: &Csr) -> Result<Csr> {
    Ok(crate::graph::ops::pattern(a))
}

/// The model on [`model_graph`]'s matrix (whole, or one part's extended rows with `part`).
pub fn build_on<B: Ops>(
    b: &B,
    s: Csr,
    features: usize,
    classes: usize,
    cfg: &ModelConfig,
    part: Option<&PartContext<B>>,
) -> Result<Gin<B>> {
    // One work matrix for every layer's P, dH and dZ (each read only in the call that writes it).
    let work = GinWork::new(b, s.n_rows(), cfg.hidden)?;
    Stack::on_matrix(b, s, features, classes, cfg, part, |_, i, o, rng| GinConv::new(b, &work, i, o, cfg.variant, rng))
}

fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64 {
    let (n, nnz) = (n as u64, nnz as u64);
    let w = widths(features, cfg.hidden, cfg.layers, classes);
    let hid = cfg.hidden as u64;
    let per_layer: u64 = w
        .windows(2)
        .map(|w| {
            let (i, o) = (w[0] as u64, w[1] as u64);
            param_bytes(i, hid) + param_bytes(hid, o) + 4 * mat_bytes(n, hid) + 3 * mat_bytes(n, o) + 2 * mat_bytes(n, i) + n * i
        })
        .sum();
    per_layer + adjacency_bytes(n, nnz) + hidden_bytes(cfg, n, &w)
}

/// Per layer: the sum over neighbours (unit values) of the narrower side with the MLP's first
/// Linear (in x hidden), then its second Linear (hidden x out) as a dense layer.
fn step_traffic(cfg: &ModelConfig, s: &StepShape) -> StepTraffic {
    let w = widths(s.features, cfg.hidden, cfg.layers, s.classes);
    let h = cfg.hidden;
    let layers: StepTraffic = w
        .windows(2)
        .enumerate()
        .map(|(l, w)| {
            let agg = Aggregation { width: w[0].min(h), value_bytes: 0, passes: (1, 1) };
            traffic::layer(s, w[0], h, w[0] * h, agg, l == 0) + traffic::dense(s, h, w[1], false)
        })
        .sum();
    layers + traffic::loss(s)
}
