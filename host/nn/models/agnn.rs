//! AGNN as PyG's example (`agnn.py`, TC-GNN's 4 x 32): dropout → Linear → ReLU → L × AgnnConv
//! → dropout → Linear.

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::agnn_conv::{AgnnConv, AgnnGraph, loops_pattern};
use crate::nn::dropout::Dropout;
use crate::nn::grad_ready::{GradReady, NoHook, announce};
use crate::nn::halo_hook::{self, PartContext};
use crate::nn::input::InputFeatures;
use crate::nn::linear::Linear;
use crate::nn::models::traffic::{self, Aggregation, StepShape, StepTraffic};
use crate::nn::models::{Model, ModelConfig, ModelInfo, dropout_seed, edge_bytes, mat_bytes, param_bytes};
use crate::nn::param::Param;
use crate::ops::backend::cuda::EdgeLayout;
use crate::ops::nn::Ops;
use crate::util::rng::SplitMix64;

pub const INFO: ModelInfo = ModelInfo {
    name: "agnn",
    about: "AGNN (Thekumparampil et al.): Linear, L attention layers softmax(β cos) H, Linear; the attention fused (--variant: the separate SDDMM, edge softmax and SpMMs); default 4 x 32",
    defaults: ModelConfig {
        model: "agnn",
        layers: 4,
        hidden: 32,
        heads: 1,
        dropout: 0.5,
        batch_norm: false,
        residual: false,
        variant: false,
        seed: 0,
    },
    lr: 0.01,
    weight_decay: 5e-4,
    // Attention values change every step: compact CSR order for every edge op.
    edge_layout: EdgeLayout::Csr,
    aggregation: None,
    estimate_bytes,
    step_traffic,
    bench_shapes: &[],
};

pub fn build<B: Ops>(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Agnn<B>> {
    build_on(b, model_graph(graph)?, features, classes, cfg, None)
}

/// The pattern the model's edge ops run on: A + I.
pub fn model_graph(a: &Csr) -> Result<Csr> {
    loops_pattern(a)
}

/// The model on [`model_graph`]'s matrix (whole, or one part's extended rows with `part`).
pub fn build_on<B: Ops>(
    b: &B,
    s: Csr,
    features: usize,
    classes: usize,
    cfg: &ModelConfig,
    part: Option<&PartContext<B>>,
) -> Result<Agnn<B>> {
    super::refuse_options(cfg, false, true)?;
    let g = AgnnGraph::from_pattern(b, s, part.map(|p| p.hook.clone()))?;
    let mut m = Agnn::new(b, g, features, classes, cfg)?;
    if let Some(p) = part {
        m.drop_out.set_row_ids(p.row_ids.clone());
    }
    Ok(m)
}

fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64 {
    let (n, nnz, f, c, h) = (n as u64, nnz as u64, features as u64, classes as u64, cfg.hidden as u64);
    let per_conv = if !cfg.variant {
        // The fused attention (n, out, dn; inv_norm, D, softmax stats): nothing per edge.
        3 * mat_bytes(n, h) + 2 * mat_bytes(n, 1) + mat_bytes(n, 2)
    } else {
        4 * mat_bytes(n, h) + mat_bytes(n, 1) + 7 * edge_bytes(n, nnz)
    };
    param_bytes(f, h) + param_bytes(h, c) + 6 * mat_bytes(n, h) + 2 * mat_bytes(n, c) + cfg.layers as u64 * per_conv
}

/// The input Linear, `layers` attention propagations over hidden columns (no weights but β),
/// the output Linear; self-loops added.
fn step_traffic(cfg: &ModelConfig, s: &StepShape) -> StepTraffic {
    let s = StepShape { nnz: s.nnz + s.n, ..*s };
    let h = cfg.hidden;
    let agg = Aggregation { width: h, value_bytes: 0, passes: (1, 2) };
    let props: StepTraffic = (0..cfg.layers).map(|_| traffic::layer(&s, h, h, 1, agg, false)).sum();
    traffic::dense(&s, s.features, h, true) + props + traffic::dense(&s, h, s.classes, false) + traffic::loss(&s)
}

pub struct Agnn<B: Ops> {
    graph: AgnnGraph<B>,
    lin_in: Linear<B>,
    convs: Vec<AgnnConv<B>>,
    drop_out: Dropout<B>,
    lin_out: Linear<B>,
    /// dL/d(input of lin_out), then dL/d(output of the last conv).
    d_top: B::Mat,
    /// dL/d(conv outputs), ping-ponged through the conv stack.
    d_a: B::Mat,
    d_b: B::Mat,
    p: f32,
    input_seed: u64,
}

impl<B: Ops> Agnn<B> {
    pub fn new(b: &B, g: AgnnGraph<B>, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Self> {
        let n = B::graph_shape(&g.graph).0;
        let mut rng = SplitMix64::new(cfg.seed);
        // The fused attention op by default; --variant: the separate ops (SDDMM, edge softmax,
        // SpMMs), kept to check and time the fused one against.
        let conv = |_| if cfg.variant { AgnnConv::new_unfused(b, &g, n, cfg.hidden) } else { AgnnConv::new(b, &g, n, cfg.hidden) };
        let convs = (0..cfg.layers).map(conv).collect::<Result<Vec<_>>>()?;
        Ok(Agnn {
            lin_in: Linear::new(b, n, features, cfg.hidden, &mut rng)?,
            lin_out: Linear::new(b, n, cfg.hidden, classes, &mut rng)?,
            drop_out: Dropout::new(b, n, cfg.hidden, cfg.dropout, dropout_seed(cfg.seed, 1))?,
            graph: g,
            convs,
            d_top: b.matrix(n, cfg.hidden)?,
            d_a: b.matrix(n, cfg.hidden)?,
            d_b: b.matrix(n, cfg.hidden)?,
            p: cfg.dropout,
            input_seed: dropout_seed(cfg.seed, 0),
        })
    }

    /// The input of conv `l`: ReLU(lin_in) for the first, the previous conv's output after.
    fn conv_input<'a>(lin_in: &'a Linear<B>, convs: &'a [AgnnConv<B>], l: usize) -> &'a B::Mat {
        if l == 0 { lin_in.out() } else { convs[l - 1].out() }
    }
}

impl<B: Ops> Agnn<B> {
    /// The backward; `ready` is told lin_out's parameters, each conv's (β), then lin_in's, as
    /// each is done.
    fn backward_with<R: GradReady<B> + ?Sized>(
        &mut self,
        b: &B,
        input: &mut InputFeatures<B>,
        dlogits: &B::Mat,
        ready: &mut R,
    ) -> Result<()> {
        let top = self.convs.last().expect("at least one layer").out();
        self.lin_out.backward(b, &self.drop_out.operand(top, true), dlogits, Some(&mut self.d_top))?;
        announce(ready, b, || self.lin_out.params())?;
        self.drop_out.backward_redrawn(b, &self.d_top, &mut self.d_a)?;
        for l in (0..self.convs.len()).rev() {
            let (done, rest) = self.convs.split_at_mut(l);
            let h = Self::conv_input(&self.lin_in, done, l);
            rest[0].backward(b, &self.graph, h, &self.d_a, &mut self.d_b)?;
            announce(ready, b, || rest[0].params())?;
            halo_hook::give_back(&self.graph.halo, b, &mut self.d_b)?;
            std::mem::swap(&mut self.d_a, &mut self.d_b);
        }
        b.relu_backward(self.lin_in.out(), &mut self.d_a)?;
        // dX only for a learnable input (features need no gradient).
        let (x0, dx0) = input.backward_operand(self.p);
        self.lin_in.backward(b, &x0, &self.d_a, dx0)?;
        announce(ready, b, || self.lin_in.params())
    }
}

impl<B: Ops> Model<B> for Agnn<B> {
    fn forward(&mut self, b: &B, input: &mut InputFeatures<B>, train: bool) -> Result<&B::Mat> {
        {
            let x0 = input.forward(b, train, self.p, self.input_seed)?;
            self.lin_in.forward_relu(b, &x0)?;
        }
        // Each conv reads its input's neighbour rows: on a part, its halo rows are filled first.
        halo_hook::fill(&self.graph.halo, b, self.lin_in.out_mut())?;
        let last = self.convs.len() - 1;
        for l in 0..=last {
            let (done, rest) = self.convs.split_at_mut(l);
            let h = Self::conv_input(&self.lin_in, done, l);
            rest[0].forward(b, &self.graph, h)?;
            if l < last {
                halo_hook::fill(&self.graph.halo, b, rest[0].out_mut())?;
            }
        }
        // The dropout drawn inside lin_out's product (no dropped copy).
        let top = self.convs.last().expect("at least one layer").out();
        self.lin_out.forward(b, &self.drop_out.operand(top, train))
    }

    fn backward(&mut self, b: &B, input: &mut InputFeatures<B>, dlogits: &mut B::Mat) -> Result<()> {
        self.backward_with(b, input, dlogits, &mut NoHook)
    }

    fn backward_by_layer(&mut self, b: &B, input: &mut InputFeatures<B>, dlogits: &mut B::Mat, ready: &mut dyn GradReady<B>) -> Result<()> {
        self.backward_with(b, input, dlogits, ready)
    }

    fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        let mut out: Vec<(String, &mut Param<B>)> = self.lin_in.params().into_iter().map(|(n, p)| (format!("lin_in.{n}"), p)).collect();
        for (l, c) in self.convs.iter_mut().enumerate() {
            out.extend(c.params().into_iter().map(|(n, p)| (format!("convs.{l}.{n}"), p)));
        }
        out.extend(self.lin_out.params().into_iter().map(|(n, p)| (format!("lin_out.{n}"), p)));
        out
    }

    fn embedding(&self, layer: usize) -> Option<&B::Mat> {
        // lin_in's ReLU output, then each conv's output.
        match layer {
            0 => Some(self.lin_in.out()),
            l => self.convs.get(l - 1).map(|c| c.out()),
        }
    }
}
