//! GraphSAGE as PyG's `GraphSAGE` (`BasicGNN` over `SAGEConv`, mean aggregation with root
//! weight): dropout → SageConv → ReLU → dropout → … → SageConv (logits); `--variant` L2-normalises
//! every conv's output (`SAGEConv(normalize=True)`, which BasicGNN passes to every layer).
//! Default 2 x 64 as PyG's GraphSAGE examples.

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::halo_hook::PartContext;
use crate::nn::models::traffic::{self, Aggregation, StepShape, StepTraffic};
use crate::nn::models::{FixedAggregation, ModelConfig, ModelInfo, adjacency_bytes, hidden_bytes, mat_bytes, param_bytes, widths};
use crate::nn::sage_conv::SageConv;
use crate::nn::stack::Stack;
use crate::ops::backend::cuda::EdgeLayout;
use crate::ops::nn::Ops;

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
    aggregation: Some(FixedAggregation::Mean),
    estimate_bytes,
    step_traffic,
    bench_shapes: &[],
};

pub type Sage<B> = Stack<B, SageConv<B>>;

pub fn build<B: Ops>(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Sage<B>> {
    build_on(b, model_graph(graph)?, features, classes, cfg, None)
}

/// The matrix the model multiplies (rows complete on every part, so a part's rows of it are the
/// whole graph's).
pub fn model_graph(a: &Csr) -> Result<Csr> {
    crate::nn::sage_conv::mean_matrix(a)
}

/// The model on [`model_graph`]'s matrix (whole, or one part's extended rows with `part`).
pub fn build_on<B: Ops>(
    b: &B,
    s: Csr,
    features: usize,
    classes: usize,
    cfg: &ModelConfig,
    part: Option<&PartContext<B>>,
) -> Result<Sage<B>> {
    Stack::on_matrix(b, s, features, classes, cfg, part, |n, i, o, rng| SageConv::new(b, n, i, o, cfg.variant, rng))
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
    per_layer + adjacency_bytes(n, nnz) + hidden_bytes(cfg, n, &w)
}

/// Per layer: mean over neighbours (no stored values) of the narrower side, `lin_l` and `lin_r`.
fn step_traffic(cfg: &ModelConfig, s: &StepShape) -> StepTraffic {
    let w = widths(s.features, cfg.hidden, cfg.layers, s.classes);
    let layers: StepTraffic = w
        .windows(2)
        .enumerate()
        .map(|(l, w)| {
            let agg = Aggregation { width: w[0].min(w[1]), value_bytes: 0, passes: (1, 1) };
            traffic::layer(s, w[0], w[1], 2 * w[0] * w[1], agg, l == 0)
        })
        .sum();
    layers + traffic::loss(s)
}
