//! GAT as PyG's example (`examples/gat.py`): dropout → GatConv (8 heads x 8, concatenated) →
//! ELU → dropout → GatConv (1 head, `concat=False`), dropout 0.6 on the features and on the
//! attention of both convs, Adam lr 0.005, weight decay 5e-4. More layers repeat the hidden one
//! (dropout → GatConv H x F concat → ELU); `heads` is the hidden layers' head count (the output
//! layer has one head, as the example on cora and citeseer).

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::dropout::Dropout;
use crate::nn::gat_conv::{GatConv, GatGraph, GatShape};
use crate::nn::grad_ready::{GradReady, NoHook, announce};
use crate::nn::halo_hook::PartContext;
use crate::nn::input::InputFeatures;
use crate::nn::models::traffic::{self, Aggregation, StepShape, StepTraffic};
use crate::nn::models::{Model, ModelConfig, ModelInfo, dropout_seed, edge_bytes, mat_bytes, param_bytes};
use crate::nn::operand::Operand;
use crate::nn::param::Param;
use crate::ops::backend::cuda::EdgeLayout;
use crate::ops::nn::Ops;
use crate::ops::nn::gat_attention::GatAttention;
use crate::ops::nn::row_split::max_segments;
use crate::util::rng::SplitMix64;

pub const INFO: ModelInfo = ModelInfo {
    name: "gat",
    about: "GAT (Veličković et al.) as PyG's GATConv: attention heads concatenated, ELU, 1-head mean output; fused attention (--variant: the unfused per-head ops); default 2 x 8 heads x 8",
    defaults: ModelConfig {
        model: "gat",
        layers: 2,
        hidden: 8,
        heads: 8,
        dropout: 0.6,
        batch_norm: false,
        residual: false,
        variant: false,
        seed: 0,
    },
    lr: 0.005,
    weight_decay: 5e-4,
    // Attention values change every step: compact CSR order for every edge op.
    edge_layout: EdgeLayout::Csr,
    aggregation: None,
    estimate_bytes,
    step_traffic,
    bench_shapes: &[],
};

pub fn build<B: Ops>(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Gat<B>> {
    build_on(b, model_graph(graph)?, features, classes, cfg, None)
}

/// The pattern the model's edge ops run on: A + I.
pub fn model_graph(a: &Csr) -> Result<Csr> {
    crate::nn::agnn_conv::loops_pattern(a)
}

/// The model on [`model_graph`]'s matrix (whole, or one part's extended rows with `part`).
pub fn build_on<B: Ops>(
    b: &B,
    s: Csr,
    features: usize,
    classes: usize,
    cfg: &ModelConfig,
    part: Option<&PartContext<B>>,
) -> Result<Gat<B>> {
    let mut m = Gat::new(b, GatGraph::from_pattern(b, s, part)?, features, classes, cfg)?;
    if let Some(p) = part {
        m.drops.iter_mut().for_each(|d| d.set_row_ids(p.row_ids.clone()));
    }
    Ok(m)
}

/// Bytes of one GatConv over `n` nodes and `nnz` edges (self-loops included by `edge_bytes`'s
/// `+ n`), `fan_in -> heads x dim`, fused (`GatConv::fuses`) or on the unfused per-head ops.
fn conv_bytes(n: u64, nnz: u64, fan_in: u64, heads: u64, dim: u64, fused: bool) -> u64 {
    let width = heads * dim;
    let edges = edge_bytes(n, nnz);
    // Params: W, a_src, a_dst, bias. Matrices: Wh, dWh, out (n x H F), 4 score matrices (n x H).
    let common = param_bytes(fan_in, width) + 3 * param_bytes(1, width) + 3 * mat_bytes(n, width) + 4 * mat_bytes(n, heads);
    if fused {
        // The softmax statistics (n x 2H) and D (n x H); Sᵀ's columns and its map to S (two
        // u32 per edge) for the column pass. Rows of ROW_LONG_MIN or more entries are cut into
        // segments of at most ROW_SEGMENT (`ops::nn::row_split`), at most `max_segments` of them;
        // each keeps H max(dim + 2, 3) floats of partial state and at most 5 u32 of description
        // (3 a segment, a long row and its first segment).
        let segments = max_segments(n, nnz);
        let partials = segments * (4 * heads * (dim + 2).max(3) + 20);
        common + mat_bytes(n, 2 * heads) + mat_bytes(n, heads) + 2 * edges + partials
    } else {
        // The heads' Wh blocks (n x H F in all), agg / dout_h / dWh_h (n x F). Edges: 3 per head
        // (logits, α, α') + 6 scratch, and one mask byte per edge and head.
        common + mat_bytes(n, width) + 3 * mat_bytes(n, dim) + (3 * heads + 6) * edges + heads * (nnz + n)
    }
}

fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64 {
    let (n, nnz, f, c) = (n as u64, nnz as u64, features as u64, classes as u64);
    let (h, heads) = (cfg.hidden as u64, cfg.heads as u64);
    let hidden_width = h * heads;
    let fused =
        |heads: u64, dim: u64, concat: bool| !cfg.variant && GatAttention::fits(heads as usize, dim as usize) && (concat || heads == 1);
    let hidden_convs: u64 = (0..cfg.layers as u64 - 1)
        .map(|l| conv_bytes(n, nnz, if l == 0 { f } else { hidden_width }, heads, h, fused(heads, h, true)))
        .sum();
    let in_last = if cfg.layers == 1 { f } else { hidden_width };
    // Two backward buffers (the hidden dropouts are drawn inside the products: no buffers),
    // and each hidden conv's f16 output where the backend keeps one (at most half a matrix).
    let half_outs = (cfg.layers as u64 - 1) * mat_bytes(n, hidden_width) / 2;
    hidden_convs + conv_bytes(n, nnz, in_last, 1, c, fused(1, c, false)) + 2 * mat_bytes(n, hidden_width) + half_outs
}

/// Per layer: W (in x heads·dim), attention over heads·dim gathered columns (the per-node
/// scores are n x heads, negligible), self-loops added; the output layer has one head.
fn step_traffic(cfg: &ModelConfig, s: &StepShape) -> StepTraffic {
    let s = StepShape { nnz: s.nnz + s.n, ..*s };
    let hidden = cfg.heads * cfg.hidden;
    (0..cfg.layers)
        .map(|l| {
            let input = if l == 0 { s.features } else { hidden };
            let output = if l + 1 == cfg.layers { s.classes } else { hidden };
            let agg = Aggregation { width: output, value_bytes: 0, passes: (1, 2) };
            traffic::layer(&s, input, output, input * output, agg, l == 0)
        })
        .sum::<StepTraffic>()
        + traffic::loss(&s)
}

pub struct Gat<B: Ops> {
    graph: GatGraph<B>,
    /// Whether the last forward left conv l's ELU to conv l + 1's products (`elu_in[l]`:
    /// conv l's `out` then holds the ELU's input; else it holds its output, applied in place).
    elu_in: Vec<bool>,
    convs: Vec<GatConv<B>>,
    /// Dropout before conv l + 1 (on conv l's ELU output).
    drops: Vec<Dropout<B>>,
    /// dL/d(input of a conv) and dL/d(output of the conv below), ping-ponged down the stack.
    d_x: B::Mat,
    d_h: B::Mat,
    p: f32,
    input_seed: u64,
}

impl<B: Ops> Gat<B> {
    pub fn new(b: &B, g: GatGraph<B>, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Self> {
        let n = B::graph_shape(&g.graph).0;
        let mut rng = SplitMix64::new(cfg.seed);
        let hidden_width = cfg.hidden * cfg.heads;
        let mut convs = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let fan_in = if l == 0 { features } else { hidden_width };
            let last = l + 1 == cfg.layers;
            let (heads, dim, concat) = if last { (1, classes, false) } else { (cfg.heads, cfg.hidden, true) };
            let seed = dropout_seed(cfg.seed, 100 + l as u64);
            // --variant: the unfused per-head ops (kept to check and time the fused op against).
            let conv = if cfg.variant { GatConv::new_unfused } else { GatConv::new };
            convs.push(conv(b, &g, GatShape { rows: n, fan_in, heads, dim, concat }, cfg.dropout, seed, &mut rng)?);
        }
        // Each drawn inside the next conv's products and again in the ELU's backward: no buffers.
        let drops = (1..cfg.layers)
            .map(|l| Dropout::redrawn_only(b, hidden_width, cfg.dropout, dropout_seed(cfg.seed, l as u64)))
            .collect::<Result<Vec<_>>>()?;
        // A hidden conv whose output the next reads only through ELU-on-load products keeps it
        // in f16 where the backend does (f16 precision): half the bytes written and read thrice.
        for l in 1..cfg.layers {
            let next_width = B::shape(convs[l].weight()).1;
            if cfg.dropout > 0.0 && b.takes_elu_input(hidden_width, next_width) {
                convs[l - 1].keep_half_output(b, next_width)?;
            }
        }
        Ok(Gat {
            elu_in: vec![false; cfg.layers],
            graph: g,
            convs,
            drops,
            d_x: b.matrix(n, hidden_width)?,
            d_h: b.matrix(n, hidden_width)?,
            p: cfg.dropout,
            input_seed: dropout_seed(cfg.seed, 0),
        })
    }
}

impl<B: Ops> Gat<B> {
    /// The backward; `ready` is told conv l's parameters as soon as conv l's backward is done
    /// (conv l's bias gradient, where it is summed inside conv l + 1's dropout backward, is
    /// final by then too).
    fn backward_with<R: GradReady<B> + ?Sized>(
        &mut self,
        b: &B,
        input: &mut InputFeatures<B>,
        dlogits: &B::Mat,
        ready: &mut R,
    ) -> Result<()> {
        let last = self.convs.len() - 1;
        // Whether d_h's column sums (conv l - 1's bias gradient) were summed as it was formed.
        let mut d_h_summed = false;
        for l in (1..=last).rev() {
            let (below, rest) = self.convs.split_at_mut(l);
            let dout = if l == last { dlogits } else { &self.d_h };
            let drop = &self.drops[l - 1];
            let summed = l < last && d_h_summed;
            if drop.is_active(true) {
                // dX = dWh Wᵀ formed inside the dropout's and ELU's backward (conv l - 1's
                // `out` is the ELU's output, or its input), not written; conv l - 1's bias
                // gradient summed there.
                let in_product = self.elu_in[l - 1];
                let (h, h16) = (below[l - 1].out(), below[l - 1].out_half());
                let x = if in_product { drop.elu_operand(h, h16) } else { drop.operand(h, true) };
                rest[0].backward(b, &self.graph, &x, dout, None, summed)?;
                announce(ready, b, || rest[0].params())?;
                let (h, h16, bias_grad) = below[l - 1].out_and_bias_grad();
                // dz on the rows conv l formed dWh on (a part's owned rows: the halo rows'
                // were given back).
                let rows = self.graph.part.product_rows();
                let gw = (rest[0].d_wh(), rest[0].weight());
                drop.backward_elu_product(b, gw, ((h, in_product), h16), &mut self.d_h, Some(bias_grad), &rows)?;
                d_h_summed = true;
            } else {
                let h = below[l - 1].out();
                rest[0].backward(b, &self.graph, &Operand::Dense(h), dout, Some(&mut self.d_x), summed)?;
                announce(ready, b, || rest[0].params())?;
                b.copy(&self.d_x, &mut self.d_h)?;
                b.elu_backward(h, &mut self.d_h)?;
                d_h_summed = false;
            }
        }
        let dout = if last == 0 { dlogits } else { &self.d_h };
        // dX only for a learnable input (features need no gradient).
        let (x0, dx0) = input.backward_operand(self.p);
        self.graph.part.set_input_layer(true);
        let done = self.convs[0].backward(b, &self.graph, &x0, dout, dx0, last > 0 && d_h_summed);
        self.graph.part.set_input_layer(false);
        done?;
        announce(ready, b, || self.convs[0].params())
    }
}

impl<B: Ops> Model<B> for Gat<B> {
    fn forward(&mut self, b: &B, input: &mut InputFeatures<B>, train: bool) -> Result<&B::Mat> {
        let last = self.convs.len() - 1;
        // Training: the ELU and the dropout applied inside conv l's products where the backend
        // takes it (conv l - 1's `out` keeps the ELU's input, or only its f16 values), else the
        // ELU in place and the dropout inside the products. No ELU or dropped copy is written
        // either way. (Fused into the attention forward's write instead, the ELU slowed that
        // kernel's main loop by a quarter: NOTES.)
        for l in 1..=last {
            let h = B::shape(self.convs[l - 1].out()).1;
            self.elu_in[l - 1] = self.drops[l - 1].is_active(train) && b.takes_elu_input(h, B::shape(self.convs[l].weight()).1);
        }
        {
            let x0 = input.forward(b, train, self.p, self.input_seed)?;
            // A part whose input holds its halo rows exchanges nothing in the input layer.
            self.graph.part.set_input_layer(true);
            let done = self.convs[0].forward_half(b, &self.graph, &x0, train, last > 0 && self.elu_in[0]);
            self.graph.part.set_input_layer(false);
            done?;
        }
        for l in 1..=last {
            let (below, rest) = self.convs.split_at_mut(l);
            let drop = &self.drops[l - 1];
            let x = if self.elu_in[l - 1] {
                drop.elu_operand(below[l - 1].out(), below[l - 1].out_half())
            } else {
                let h = below[l - 1].out_mut();
                b.elu(h)?;
                drop.operand(h, train)
            };
            rest[0].forward_half(b, &self.graph, &x, train, l < last && self.elu_in[l])?;
        }
        Ok(self.convs[last].out())
    }

    fn backward(&mut self, b: &B, input: &mut InputFeatures<B>, dlogits: &mut B::Mat) -> Result<()> {
        self.backward_with(b, input, dlogits, &mut NoHook)
    }

    fn backward_by_layer(&mut self, b: &B, input: &mut InputFeatures<B>, dlogits: &mut B::Mat, ready: &mut dyn GradReady<B>) -> Result<()> {
        self.backward_with(b, input, dlogits, ready)
    }

    fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        let mut out = Vec::new();
        for (l, c) in self.convs.iter_mut().enumerate() {
            out.extend(c.params().into_iter().map(|(n, p)| (format!("convs.{l}.{n}"), p)));
        }
        out
    }

    fn embedding(&self, layer: usize) -> Option<&B::Mat> {
        // Each hidden conv's output after its ELU (an evaluation forward applies it in place;
        // only a training forward may leave its input there, or leave it as it was, having
        // written only its f16 values: `elu_in`).
        if layer + 1 < self.convs.len() { Some(self.convs[layer].out()) } else { None }
    }
}
