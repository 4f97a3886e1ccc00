//! `GcnConv` as PyG's `GCNConv`: Y = Â (X W) + b with Â = D^-1/2 (A + I) D^-1/2.
//!
//! Backward: db = 1ᵀ dY; G = Âᵀ dY; dW = Xᵀ G; dX = G Wᵀ. Âᵀ is a product with the transposed
//! pattern and Â's values laid out for it, both built once: a directed graph has Âᵀ ≠ Â.

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::backend::{Backend, Side};
use crate::nn::operand::Operand;
use crate::nn::param::{Param, glorot};
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

/// Â of a graph, translated and uploaded once and shared by every `GcnConv` of a model.
pub struct GcnAdjacency<B: Backend> {
    pub graph: B::Graph,
    values: B::Edges,
    values_t: B::Edges,
}

impl<B: Backend> GcnAdjacency<B> {
    /// Â from the raw adjacency `a` (self-loops added where missing, symmetric normalisation by
    /// the degrees of A + I, as PyG's `gcn_norm`).
    pub fn new(b: &B, a: &Csr) -> Result<Self> {
        let graph = b.graph(crate::graph::ops::gcn_normalize(a)?)?;
        let values = b.graph_values(&graph, Side::Forward)?;
        let values_t = b.graph_values(&graph, Side::Transposed)?;
        Ok(GcnAdjacency { graph, values, values_t })
    }
}

pub struct GcnConv<B: Backend> {
    pub weight: Param<B>,
    pub bias: Param<B>,
    /// X W, then Âᵀ dY in the backward pass (same shape, never needed together).
    xw: B::Mat,
    out: B::Mat,
}

impl<B: Backend> GcnConv<B> {
    pub fn new(b: &B, rows: usize, fan_in: usize, fan_out: usize, rng: &mut SplitMix64) -> Result<Self> {
        Ok(GcnConv {
            weight: Param::new(b, &glorot(fan_in, fan_out, rng))?,
            bias: Param::new(b, &Matrix::zeros(1, fan_out))?,
            xw: b.matrix(rows, fan_out)?,
            out: b.matrix(rows, fan_out)?,
        })
    }

    pub fn forward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<&B::Mat> {
        x.times(b, &self.weight.value, &mut self.xw)?;
        b.spmm(&adj.graph, Side::Forward, &adj.values, &self.xw, &mut self.out)?;
        b.bias_add(&mut self.out, &self.bias.value)?;
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
        let g = &mut self.xw;
        b.spmm(&adj.graph, Side::Transposed, &adj.values_t, dy, g)?;
        x.transposed_times(b, g, &mut self.weight.grad)?;
        match dx {
            Some(dx) => b.gemm(g, false, &self.weight.value, true, 0.0, dx),
            None => Ok(()),
        }
    }

    pub fn params(&mut self) -> [&mut Param<B>; 2] {
        [&mut self.weight, &mut self.bias]
    }
}
