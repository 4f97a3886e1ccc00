//! GCN as PyG's example (`gcn.py`): dropout → GcnConv → ReLU → dropout → … → GcnConv (logits).

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::dropout::Dropout;
use crate::nn::gcn_conv::{GcnAdjacency, GcnConv};
use crate::nn::input::InputFeatures;
use crate::nn::models::{Model, ModelConfig, ModelInfo, dropout_seed, edge_bytes, mat_bytes, param_bytes, widths};
use crate::nn::operand::Operand;
use crate::nn::param::Param;
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
    Gcn::new(b, graph, features, classes, cfg)
}

fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64 {
    let (n, nnz) = (n as u64, nnz as u64);
    let w = widths(features, cfg.hidden, cfg.layers, classes);
    let per_layer: u64 = w.windows(2).map(|w| {
        let (i, o) = (w[0] as u64, w[1] as u64);
        param_bytes(i, o) + 4 * mat_bytes(n, o) + 2 * mat_bytes(n, i) + n * i
    }).sum();
    per_layer + 2 * edge_bytes(n, nnz)
}

pub struct Gcn<B: Ops> {
    adj: GcnAdjacency<B>,
    convs: Vec<GcnConv<B>>,
    /// The dropout after each hidden ReLU.
    drops: Vec<Dropout<B>>,
    /// dL/d(pre-activation output of conv l) for the hidden layers (the last one's is dlogits).
    grads: Vec<B::Mat>,
    /// dL/d(input of conv l) for l >= 1.
    dins: Vec<B::Mat>,
    p: f32,
    input_seed: u64,
}

impl<B: Ops> Gcn<B> {
    pub fn new(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Self> {
        let n = graph.n_rows();
        let mut rng = SplitMix64::new(cfg.seed);
        let widths = widths(features, cfg.hidden, cfg.layers, classes);
        let mut convs = Vec::new();
        let mut grads = Vec::new();
        let mut dins = Vec::new();
        let mut drops = Vec::new();
        for l in 0..cfg.layers {
            convs.push(GcnConv::new(b, n, widths[l], widths[l + 1], &mut rng)?);
            if l + 1 < cfg.layers {
                grads.push(b.matrix(n, widths[l + 1])?);
            }
            if l > 0 {
                dins.push(b.matrix(n, widths[l])?);
                drops.push(Dropout::new(b, n, widths[l], cfg.dropout, dropout_seed(cfg.seed, l as u64))?);
            }
        }
        Ok(Gcn { adj: GcnAdjacency::new(b, graph)?, convs, drops, grads, dins, p: cfg.dropout, input_seed: dropout_seed(cfg.seed, 0) })
    }

}

impl<B: Ops> Model<B> for Gcn<B> {
    fn forward(&mut self, b: &B, input: &mut InputFeatures<B>, train: bool) -> Result<&B::Mat> {
        {
            let x0 = input.forward(b, train, self.p, self.input_seed)?;
            self.convs[0].forward(b, &self.adj, &x0)?;
        }
        for l in 1..self.convs.len() {
            let (done, rest) = self.convs.split_at_mut(l);
            let prev = &mut done[l - 1];
            b.relu(prev.out_mut())?;
            self.drops[l - 1].forward(b, prev.out(), train)?;
            let h = self.drops[l - 1].output(prev.out(), train);
            rest[0].forward(b, &self.adj, &Operand::Dense(h))?;
        }
        Ok(self.convs.last().expect("at least one layer").out())
    }

    fn backward(&mut self, b: &B, input: &InputFeatures<B>, dlogits: &B::Mat) -> Result<()> {
        let last = self.convs.len() - 1;
        for l in (1..=last).rev() {
            let (done, rest) = self.convs.split_at_mut(l);
            let prev = &done[l - 1];
            let h = self.drops[l - 1].output(prev.out(), true);
            let (g_lo, g_hi) = self.grads.split_at_mut(l);
            let dy = if l == last { dlogits } else { &g_hi[0] };
            rest[0].backward(b, &self.adj, &Operand::Dense(h), dy, Some(&mut self.dins[l - 1]))?;
            self.drops[l - 1].backward(b, &self.dins[l - 1], &mut g_lo[l - 1])?;
            b.relu_backward(prev.out(), &mut g_lo[l - 1])?;
        }
        let x0 = input.operand(true, self.p);
        let dy0 = if last == 0 { dlogits } else { &self.grads[0] };
        self.convs[0].backward(b, &self.adj, &x0, dy0, None)
    }

    fn params(&mut self) -> Vec<(String, &mut Param<B>)> {
        let mut out = Vec::new();
        for (l, c) in self.convs.iter_mut().enumerate() {
            out.extend(c.params().into_iter().map(|(name, p)| (format!("convs.{l}.{name}"), p)));
        }
        out
    }

    fn embedding(&self, layer: usize) -> Option<&B::Mat> {
        // The hidden layers' outputs after ReLU (the next layer's input before dropout).
        self.convs.get(layer).filter(|_| layer + 1 < self.convs.len()).map(|c| c.out())
    }
}

