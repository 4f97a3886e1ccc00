//! `GcnConv` as PyG's `GCNConv`: Y = Â (X W) + b with Â = D^-1/2 (A + I) D^-1/2; `X W` is a
//! bias-free [`Linear`], the bias is added after aggregation (as PyG's).
//!
//! Backward: db = 1ᵀ dY; G = Âᵀ dY; then the Linear's backward of G: dW = Xᵀ G, dX = G Wᵀ. Âᵀ is
//! a product with the transposed pattern and Â's values laid out for it, both built once: a
//! directed graph has Âᵀ ≠ Â.

use std::rc::Rc;

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::halo_hook::{self, HaloHook};
use crate::nn::linear::Linear;
use crate::nn::operand::Operand;
use crate::nn::param::Param;
use crate::ops::backend::{Side, op_set};
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

op_set!(
    /// What a GCN layer needs: the linear part and the fixed matrix's SpMM.
    pub trait GcnOps:
    crate::nn::linear::LinearOps,
);

/// Â of a graph, translated and uploaded once and shared by every `GcnConv` of a model.
pub struct GcnAdjacency<B: GcnOps> {
    pub graph: B::Graph,
    values: B::Edges,
    values_t: B::Edges,
    /// Both sides' values prepared once for products that leave them unchanged (an f16 backend's
    /// f16 copies); dropped for good once the values are handed out to be rewritten
    /// ([`GcnAdjacency::parts_mut`]), after which each product prepares its own.
    fixed: Option<[B::Fixed; 2]>,
    /// On one part of a partitioned graph: the halo exchange around every product (see
    /// [`crate::nn::halo_hook`]); `None` otherwise.
    pub halo: Option<Rc<dyn HaloHook<B>>>,
}

impl<B: GcnOps> GcnAdjacency<B> {
    /// Â from the raw adjacency `a` (self-loops added where missing, symmetric normalisation by
    /// the degrees of A + I, as PyG's `gcn_norm`).
    pub fn new(b: &B, a: &Csr) -> Result<Self> {
        Self::from_normalized(b, crate::graph::ops::gcn_normalize(a)?)
    }

    /// A pattern with values used as they are (a sampled block with its own normalisation).
    pub fn from_normalized(b: &B, s: Csr) -> Result<Self> {
        let graph = b.graph(s)?;
        let values = b.graph_values(&graph, Side::Forward)?;
        let values_t = b.graph_values(&graph, Side::Transposed)?;
        let fixed = Some([b.fix(&graph, Side::Forward, &values)?, b.fix(&graph, Side::Transposed, &values_t)?]);
        Ok(GcnAdjacency { graph, values, values_t, fixed, halo: None })
    }

    /// The same adjacency on one part of a partitioned graph, exchanging halo rows through `hook`.
    pub fn with_halo(self, hook: Option<Rc<dyn HaloHook<B>>>) -> Self {
        GcnAdjacency { halo: hook, ..self }
    }

    /// Before a product reads `x`'s neighbour rows: its halo rows := their owners' (no-op
    /// unpartitioned).
    pub fn fill(&self, b: &B, x: &mut B::Mat) -> Result<()> {
        halo_hook::fill(&self.halo, b, x)
    }

    /// After a transposed product wrote `g`: its halo rows go to their owners (no-op
    /// unpartitioned).
    pub fn give_back(&self, b: &B, g: &mut B::Mat) -> Result<()> {
        halo_hook::give_back(&self.halo, b, g)
    }

    /// The pattern and both value layouts, to be rewritten in place by a model rebound per
    /// sampled batch (same shape and nonzero count: see `sample::bound`). The values prepared
    /// once are dropped: from here on every product reads the values as they are then.
    pub fn parts_mut(&mut self) -> (&mut B::Graph, &mut B::Edges, &mut B::Edges) {
        self.fixed = None;
        (&mut self.graph, &mut self.values, &mut self.values_t)
    }

    /// `y = Â x`.
    pub fn forward(&self, b: &B, x: &B::Mat, y: &mut B::Mat) -> Result<()> {
        match &self.fixed {
            Some([f, _]) => b.spmm_fixed(&self.graph, Side::Forward, &self.values, f, x, y),
            None => b.spmm(&self.graph, Side::Forward, &self.values, x, y),
        }
    }

    /// `y = Âᵀ x`.
    pub fn transposed(&self, b: &B, x: &B::Mat, y: &mut B::Mat) -> Result<()> {
        match &self.fixed {
            Some([_, f]) => b.spmm_fixed(&self.graph, Side::Transposed, &self.values_t, f, x, y),
            None => b.spmm(&self.graph, Side::Transposed, &self.values_t, x, y),
        }
    }
}

pub struct GcnConv<B: GcnOps> {
    pub lin: Linear<B>,
    pub bias: Param<B>,
    /// Âᵀ dY in the backward pass.
    g: B::Mat,
    out: B::Mat,
}

impl<B: GcnOps> GcnConv<B> {
    pub fn new(b: &B, rows: usize, fan_in: usize, fan_out: usize, rng: &mut SplitMix64) -> Result<Self> {
        Ok(GcnConv {
            lin: Linear::with_bias(b, rows, fan_in, fan_out, false, rng)?,
            bias: Param::new(b, &Matrix::zeros(1, fan_out))?,
            g: b.matrix(rows, fan_out)?,
            out: b.matrix(rows, fan_out)?,
        })
    }

    pub fn forward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<&B::Mat> {
        self.forward_act(b, adj, x, false)
    }

    /// `forward`, then a ReLU fused into the bias add when `relu`.
    pub fn forward_act(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, relu: bool) -> Result<&B::Mat> {
        crate::nn::stack::Conv::forward_pre_bias(self, b, adj, x)?;
        if relu {
            b.bias_relu(&mut self.out, &self.bias.value)?;
        } else {
            b.bias_add(&mut self.out, &self.bias.value)?;
        }
        Ok(&self.out)
    }

    pub fn out(&self) -> &B::Mat {
        &self.out
    }
    pub fn out_mut(&mut self) -> &mut B::Mat {
        &mut self.out
    }

    /// Fills the weight and bias gradients, and dX into `dx` when asked.
    pub fn backward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, dy: &B::Mat, dx: Option<&mut B::Mat>) -> Result<()> {
        b.col_sums(dy, &mut self.bias.grad)?;
        adj.transposed(b, dy, &mut self.g)?;
        adj.give_back(b, &mut self.g)?;
        self.lin.backward(b, x, &self.g, dx)
    }

    pub fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        vec![("weight", &mut self.lin.weight), ("bias", &mut self.bias)]
    }
}

impl<B: GcnOps> crate::nn::stack::Conv<B> for GcnConv<B> {
    type Adj = GcnAdjacency<B>;
    fn forward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<()> {
        GcnConv::forward(self, b, adj, x).map(|_| ())
    }
    fn forward_relu(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<bool> {
        self.forward_act(b, adj, x, true).map(|_| true)
    }
    fn deferred_bias(&self) -> Option<&B::Mat> {
        Some(&self.bias.value)
    }
    fn forward_pre_bias(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<()> {
        self.lin.forward(b, x)?;
        adj.fill(b, self.lin.out_mut())?;
        adj.forward(b, self.lin.out(), &mut self.out)
    }
    fn out(&self) -> &B::Mat {
        &self.out
    }
    fn out_mut(&mut self) -> &mut B::Mat {
        &mut self.out
    }
    fn backward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, dy: &B::Mat, dx: Option<&mut B::Mat>) -> Result<()> {
        GcnConv::backward(self, b, adj, x, dy, dx)
    }
    fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        GcnConv::params(self)
    }
}
