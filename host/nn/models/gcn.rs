//! GCN as PyG's example (`gcn.py`): dropout → GcnConv → ReLU → dropout → … → GcnConv (logits);
//! with `--batch-norm` / `--residual` and any depth as PyG's `BasicGNN` (see [`Stack`]).

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::gcn_conv::GcnConv;
use crate::nn::halo_hook::PartContext;
use crate::nn::models::traffic::{self, Aggregation, StepShape, StepTraffic};
use crate::nn::models::{FixedAggregation, ModelConfig, ModelInfo, adjacency_bytes, hidden_bytes, mat_bytes, param_bytes, widths};
use crate::nn::stack::Stack;
use crate::ops::backend::cuda::EdgeLayout;
use crate::ops::nn::Ops;

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
    aggregation: Some(FixedAggregation::GcnNorm),
    estimate_bytes,
    step_traffic,
    bench_shapes: &[(2, 128)],
};

pub fn build<B: Ops>(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Gcn<B>> {
    build_on(b, model_graph(graph)?, features, classes, cfg, None)
}

/// The matrix the model multiplies: Â = D^-1/2 (A + I) D^-1/2 (a partitioned run normalises the
/// whole graph, then cuts its rows: halo columns keep their global degrees).
pub fn model_graph(a: &Csr) -> Result<Csr> {
    crate::graph::ops::gcn_normalize(a)
}

/// The model on [`model_graph`]'s matrix (whole, or one part's extended rows with `part`).
pub fn build_on<B: Ops>(
    b: &B,
    s: Csr,
    features: usize,
    classes: usize,
    cfg: &ModelConfig,
    part: Option<&PartContext<B>>,
) -> Result<Gcn<B>> {
    super::refuse_options(cfg, true, false)?;
    Stack::on_matrix(b, s, features, classes, cfg, part, |n, i, o, rng| GcnConv::new(b, n, i, o, rng))
}

fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64 {
    let (n, nnz) = (n as u64, nnz as u64);
    let w = widths(features, cfg.hidden, cfg.layers, classes);
    let per_layer: u64 = w
        .windows(2)
        .map(|w| {
            let (i, o) = (w[0] as u64, w[1] as u64);
            param_bytes(i, o) + 4 * mat_bytes(n, o) + 2 * mat_bytes(n, i) + n * i
        })
        .sum();
    per_layer + adjacency_bytes(n, nnz) + hidden_bytes(cfg, n, &w)
}

/// Per layer: X W (i x o weights) and Â over the narrower side, values stored; self-loops added.
fn step_traffic(cfg: &ModelConfig, s: &StepShape) -> StepTraffic {
    let s = StepShape { nnz: s.nnz + s.n, ..*s };
    let w = widths(s.features, cfg.hidden, cfg.layers, s.classes);
    let layers: StepTraffic = w
        .windows(2)
        .enumerate()
        .map(|(l, w)| {
            let agg = Aggregation { width: w[0].min(w[1]), value_bytes: 4, passes: (1, 1) };
            traffic::layer(&s, w[0], w[1], w[0] * w[1], agg, l == 0)
        })
        .sum();
    layers + traffic::loss(&s)
}

/// GCN: the [`Stack`] over [`GcnConv`]s sharing one Â.
pub type Gcn<B> = Stack<B, GcnConv<B>>;
