//! The two models of the papers, written as PyG's examples write them:
//!
//! GCN (`gcn.py`): dropout → GcnConv → ReLU → dropout → … → GcnConv (logits).
//! AGNN (`agnn.py`, TC-GNN's 4 x 32): dropout → Linear → ReLU → L × AgnnConv → dropout → Linear.
//!
//! A model owns every buffer of its forward and backward passes, allocated once here, so a
//! training step allocates nothing (and the GPU backend can capture it as a CUDA graph).

use crate::error::{Error, Result};
use crate::graph::Csr;
use crate::nn::agnn_conv::{AgnnConv, AgnnGraph};
use crate::nn::backend::Backend;
use crate::nn::dropout::Dropout;
use crate::nn::gcn_conv::{GcnAdjacency, GcnConv};
use crate::nn::input::{HostFeatures, InputFeatures};
use crate::nn::linear::Linear;
use crate::nn::operand::Operand;
use crate::nn::param::Param;
use crate::util::rng::SplitMix64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
pub enum ModelKind {
    Gcn,
    Agnn,
}

/// Shape and regularisation of a model.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct ModelConfig {
    pub kind: ModelKind,
    /// GcnConv layers (GCN) or AgnnConv layers (AGNN).
    pub layers: usize,
    pub hidden: usize,
    pub dropout: f32,
    /// Seeds the weights and the dropout masks.
    pub seed: u64,
}

impl ModelConfig {
    /// PyG's defaults: GCN 2 x 16, AGNN 4 x 32 (TC-GNN), dropout 0.5.
    pub fn default_for(kind: ModelKind) -> Self {
        match kind {
            ModelKind::Gcn => ModelConfig { kind, layers: 2, hidden: 16, dropout: 0.5, seed: 0 },
            ModelKind::Agnn => ModelConfig { kind, layers: 4, hidden: 32, dropout: 0.5, seed: 0 },
        }
    }

    pub fn check(&self) -> Result<()> {
        if self.layers == 0 || self.hidden == 0 {
            return Err(Error::Unsupported(format!("a model needs >= 1 layer and hidden width >= 1 (got {} x {})", self.layers, self.hidden)));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(Error::Unsupported(format!("dropout must be in [0, 1), got {}", self.dropout)));
        }
        Ok(())
    }
}

/// Seeds of the dropout layers: distinct per layer, all derived from the model seed.
fn dropout_seed(model_seed: u64, layer: u64) -> u64 {
    SplitMix64::new(model_seed ^ 0xD80F_0000 ^ (layer << 32)).next_u64()
}

pub struct Gcn<B: Backend> {
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

impl<B: Backend> Gcn<B> {
    pub fn new(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Self> {
        let n = graph.n_rows();
        let mut rng = SplitMix64::new(cfg.seed);
        let widths: Vec<usize> =
            std::iter::once(features).chain(std::iter::repeat_n(cfg.hidden, cfg.layers - 1)).chain([classes]).collect();
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

    pub fn forward(&mut self, b: &B, input: &mut InputFeatures<B>, train: bool) -> Result<&B::Mat> {
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

    /// Backward from dL/dlogits (after a training `forward`): every parameter's gradient.
    pub fn backward(&mut self, b: &B, input: &InputFeatures<B>, dlogits: &B::Mat) -> Result<()> {
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

    pub fn params(&mut self) -> Vec<&mut Param<B>> {
        self.convs.iter_mut().flat_map(|c| c.params()).collect()
    }
}

pub struct Agnn<B: Backend> {
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

impl<B: Backend> Agnn<B> {
    pub fn new(b: &B, graph: &Csr, features: usize, classes: usize, cfg: &ModelConfig) -> Result<Self> {
        let n = graph.n_rows();
        let mut rng = SplitMix64::new(cfg.seed);
        let g = AgnnGraph::new(b, graph)?;
        let convs = (0..cfg.layers).map(|_| AgnnConv::new(b, &g, n, cfg.hidden)).collect::<Result<Vec<_>>>()?;
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

    pub fn forward(&mut self, b: &B, input: &mut InputFeatures<B>, train: bool) -> Result<&B::Mat> {
        {
            let x0 = input.forward(b, train, self.p, self.input_seed)?;
            self.lin_in.forward(b, &x0)?;
        }
        b.relu(self.lin_in.out_mut())?;
        for l in 0..self.convs.len() {
            let (done, rest) = self.convs.split_at_mut(l);
            let h = Self::conv_input(&self.lin_in, done, l);
            rest[0].forward(b, &self.graph, h)?;
        }
        let top = self.convs.last().expect("at least one layer").out();
        self.drop_out.forward(b, top, train)?;
        let h = self.drop_out.output(top, train);
        self.lin_out.forward(b, &Operand::Dense(h))
    }

    pub fn backward(&mut self, b: &B, input: &InputFeatures<B>, dlogits: &B::Mat) -> Result<()> {
        let top = self.convs.last().expect("at least one layer").out();
        let h = self.drop_out.output(top, true);
        self.lin_out.backward(b, &Operand::Dense(h), dlogits, Some(&mut self.d_top))?;
        self.drop_out.backward(b, &self.d_top, &mut self.d_a)?;
        for l in (0..self.convs.len()).rev() {
            let (done, rest) = self.convs.split_at_mut(l);
            let h = Self::conv_input(&self.lin_in, done, l);
            rest[0].backward(b, &self.graph, h, &self.d_a, &mut self.d_b)?;
            std::mem::swap(&mut self.d_a, &mut self.d_b);
        }
        b.relu_backward(self.lin_in.out(), &mut self.d_a)?;
        let x0 = input.operand(true, self.p);
        self.lin_in.backward(b, &x0, &self.d_a, None)
    }

    pub fn params(&mut self) -> Vec<&mut Param<B>> {
        let mut p: Vec<&mut Param<B>> = self.lin_in.params().into_iter().collect();
        p.extend(self.convs.iter_mut().flat_map(|c| c.params()));
        p.extend(self.lin_out.params());
        p
    }
}

/// Either model behind one interface.
pub enum Net<B: Backend> {
    Gcn(Gcn<B>),
    Agnn(Agnn<B>),
}

impl<B: Backend> Net<B> {
    pub fn new(b: &B, graph: &Csr, features: &HostFeatures, classes: usize, cfg: &ModelConfig) -> Result<Self> {
        cfg.check()?;
        Ok(match cfg.kind {
            ModelKind::Gcn => Net::Gcn(Gcn::new(b, graph, features.cols(), classes, cfg)?),
            ModelKind::Agnn => Net::Agnn(Agnn::new(b, graph, features.cols(), classes, cfg)?),
        })
    }
    pub fn forward(&mut self, b: &B, input: &mut InputFeatures<B>, train: bool) -> Result<&B::Mat> {
        match self {
            Net::Gcn(m) => m.forward(b, input, train),
            Net::Agnn(m) => m.forward(b, input, train),
        }
    }
    pub fn backward(&mut self, b: &B, input: &InputFeatures<B>, dlogits: &B::Mat) -> Result<()> {
        match self {
            Net::Gcn(m) => m.backward(b, input, dlogits),
            Net::Agnn(m) => m.backward(b, input, dlogits),
        }
    }
    pub fn params(&mut self) -> Vec<&mut Param<B>> {
        match self {
            Net::Gcn(m) => m.params(),
            Net::Agnn(m) => m.params(),
        }
    }
}

/// Device bytes a model's buffers take (parameters with gradient and moments, activations,
/// gradients, masks, edge buffers), to refuse a model that cannot fit before allocating it.
/// An upper estimate: edge buffers are counted at twice the edges (ME-BCRS pads vectors).
pub fn estimate_bytes(cfg: &ModelConfig, n: usize, nnz: usize, features: usize, classes: usize) -> u64 {
    let (n, nnz, f, c, h) = (n as u64, nnz as u64, features as u64, classes as u64, cfg.hidden as u64);
    let edges = 2 * (nnz + n) * 4;
    let mat = |cols: u64| n * cols.div_ceil(8) * 8 * 4;
    let params = |fan_in: u64, fan_out: u64| 4 * fan_in * fan_out * 4;
    let layers = cfg.layers as u64;
    match cfg.kind {
        ModelKind::Gcn => {
            let widths: Vec<u64> = std::iter::once(f).chain(std::iter::repeat_n(h, cfg.layers - 1)).chain([c]).collect();
            let per_layer: u64 = widths.windows(2).map(|w| params(w[0], w[1]) + 3 * mat(w[1]) + 2 * mat(w[0]) + n * w[0]).sum();
            per_layer + 2 * edges
        }
        ModelKind::Agnn => {
            let per_conv = 4 * mat(h) + mat(1) + 7 * edges;
            params(f, h) + params(h, c) + 6 * mat(h) + 2 * mat(c) + layers * per_conv
        }
    }
}
