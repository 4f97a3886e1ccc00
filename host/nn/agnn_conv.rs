//! `AgnnConv` as PyG's `AGNNConv` (self-loops added, learnable β):
//!
//! forward: n = rownorm(H); cos_ij = n_i · n_j on the edges (SDDMM); α = row softmax of β cos
//! (edge softmax); out = α H (SpMM with the α values).
//!
//! backward, from dout: dα_ij = dout_i · h_j (SDDMM); ds = α ⊙ (dα − rowsum(α ⊙ dα));
//! dβ = Σ ds ⊙ cos; dcos = β ds (the softmax backward gives both); dn = dcos N + dcosᵀ N
//! (SpMM on S and on Sᵀ); dH = αᵀ dout (SpMM on Sᵀ) + the normalisation's backward of dn.
//!
//! [`AgnnConv::new`] runs the SDDMM, softmax and SpMMs as one fused op each way
//! ([`crate::ops::nn::fused_attention`]; the AGNN model's default); [`AgnnConv::new_unfused`]
//! keeps the separate ops (`--variant`), the check the fused op is measured against.

use std::rc::Rc;

use crate::error::Result;
use crate::graph::Csr;
use crate::nn::halo_hook::HaloHook;
use crate::nn::param::Param;
use crate::ops::backend::Side;
use crate::ops::nn::edge_softmax::Softmaxed;
use crate::ops::nn::fused_attention::{GradInputs, Grads, Normalized, Outputs};
use crate::ops::nn::op_set;
use crate::tensor::Matrix;

op_set!(
    /// What an AGNN layer needs: the fused attention (or the edge-wise ops it replaces) and the row norms.
    pub trait AgnnOps:
    crate::nn::linear::LinearOps,
    crate::ops::nn::fused_attention::FusedAttentionOp,
    crate::ops::nn::edge_softmax::EdgeSoftmaxOp,
    crate::ops::nn::row_normalize::RowNormalizeOp,
    crate::ops::nn::add_assign::AddAssignOp,
    crate::ops::nn::sddmm::SddmmOp,
    crate::ops::nn::transpose_edges::TransposeEdgesOp,
);

/// The pattern of A + I, shared by every `AgnnConv` of a model.
pub struct AgnnGraph<B: AgnnOps> {
    pub graph: B::Graph,
    /// On one part of a partitioned graph: the halo exchange of every conv's input (see
    /// [`crate::nn::halo_hook`]); `None` otherwise.
    pub halo: Option<Rc<dyn HaloHook<B>>>,
}

/// The pattern of A + I with unit values (SDDMM multiplies by the graph's values: unit values
/// make it the plain pattern).
pub fn loops_pattern(a: &Csr) -> Result<Csr> {
    let with_loops = crate::graph::ops::add_self_loops(&crate::graph::ops::pattern(a), 1.0)?;
    Ok(crate::graph::ops::pattern(&with_loops))
}

impl<B: AgnnOps> AgnnGraph<B> {
    pub fn new(b: &B, a: &Csr) -> Result<Self> {
        Self::from_pattern(b, loops_pattern(a)?, None)
    }

    /// [`loops_pattern`]'s matrix as it is (whole, or one part's extended rows with its `halo`).
    pub fn from_pattern(b: &B, s: Csr, halo: Option<Rc<dyn HaloHook<B>>>) -> Result<Self> {
        Ok(AgnnGraph { graph: b.graph(s)?, halo })
    }
}

pub struct AgnnConv<B: AgnnOps> {
    pub beta: Param<B>,
    n: B::Mat,
    inv_norm: B::Mat,
    out: B::Mat,
    path: Path<B>,
}

/// How the attention runs: fused (one op each way, per-row softmax statistics only; see
/// [`crate::ops::nn::fused_attention`]) or as the separate SDDMM, edge softmax and SpMMs with
/// their per-edge arrays (kept to check and time the fused op against).
enum Path<B: AgnnOps> {
    Fused {
        /// Softmax (max, sum) per row (rows x 2).
        stats: B::Mat,
        /// What else the forward leaves for the backward (the GPU's f16 copy of n).
        copy: B::AttentionCopy,
        /// Backward scratch: dn's row part and D per row.
        dn: B::Mat,
        d_row: B::Mat,
    },
    Unfused(Box<Unfused<B>>),
}

struct Unfused<B: AgnnOps> {
    cos: B::Edges,
    alpha: B::Edges,
    alpha_t: B::Edges,
    /// dα in the backward pass, then dcos.
    dalpha: B::Edges,
    dcos: B::Edges,
    dcos_t: B::Edges,
    dn: B::Mat,
    dn_t: B::Mat,
}

impl<B: AgnnOps> AgnnConv<B> {
    /// A layer over `rows` nodes of width `dim`, β initialised to 1 (as PyG), on the fused op.
    /// (`_g`: the fused op allocates nothing per edge.)
    pub fn new(b: &B, _g: &AgnnGraph<B>, rows: usize, dim: usize) -> Result<Self> {
        let path = Path::Fused { stats: b.matrix(rows, 2)?, copy: b.attention_copy(), dn: b.matrix(rows, dim)?, d_row: b.matrix(rows, 1)? };
        Self::with_path(b, rows, dim, path)
    }

    /// The same layer on the unfused ops (SDDMM, edge softmax, SpMM and their backward).
    pub fn new_unfused(b: &B, g: &AgnnGraph<B>, rows: usize, dim: usize) -> Result<Self> {
        let fwd = || b.edges(&g.graph, Side::Forward);
        let bwd = || b.edges(&g.graph, Side::Transposed);
        let path = Path::Unfused(Box::new(Unfused {
            cos: fwd()?,
            alpha: fwd()?,
            alpha_t: bwd()?,
            dalpha: fwd()?,
            dcos: fwd()?,
            dcos_t: bwd()?,
            dn: b.matrix(rows, dim)?,
            dn_t: b.matrix(rows, dim)?,
        }));
        Self::with_path(b, rows, dim, path)
    }

    fn with_path(b: &B, rows: usize, dim: usize, path: Path<B>) -> Result<Self> {
        Ok(AgnnConv {
            beta: Param::new(b, &Matrix::from_vec(1, 1, vec![1.0])?)?,
            n: b.matrix(rows, dim)?,
            inv_norm: b.matrix(rows, 1)?,
            out: b.matrix(rows, dim)?,
            path,
        })
    }

    pub fn forward(&mut self, b: &B, g: &AgnnGraph<B>, h: &B::Mat) -> Result<&B::Mat> {
        match &mut self.path {
            // The normalisation is the fused op's (it writes what its kernels gather).
            Path::Fused { stats, copy, .. } => {
                let outputs = Outputs { n: &mut self.n, inv_norm: &mut self.inv_norm, out: &mut self.out, stats };
                b.attention_forward(&g.graph, &self.beta.value, h, outputs, copy)?
            }
            Path::Unfused(u) => {
                b.row_normalize(h, &mut self.n, &mut self.inv_norm)?;
                b.sddmm(&g.graph, &self.n, &self.n, &mut u.cos)?;
                b.edge_softmax(&g.graph, &self.beta.value, &u.cos, &mut u.alpha)?;
                b.spmm(&g.graph, Side::Forward, &u.alpha, h, &mut self.out)?;
            }
        }
        Ok(&self.out)
    }

    pub fn out(&self) -> &B::Mat {
        &self.out
    }
    pub fn out_mut(&mut self) -> &mut B::Mat {
        &mut self.out
    }

    /// Fills β's gradient and writes dH into `dh` (`h` is the forward's input).
    pub fn backward(&mut self, b: &B, g: &AgnnGraph<B>, h: &B::Mat, dout: &B::Mat, dh: &mut B::Mat) -> Result<()> {
        let u = match &mut self.path {
            Path::Fused { stats, copy, dn, d_row } => {
                let x = Normalized { beta: &self.beta.value, h, n: &self.n, inv_norm: &self.inv_norm };
                let inputs = GradInputs { x, stats: &*stats, out: &self.out, dout };
                return b.attention_backward(&g.graph, inputs, copy, Grads { dn, d_row, dh, dbeta: &mut self.beta.grad });
            }
            Path::Unfused(u) => u,
        };
        // Through the aggregation: dH = αᵀ dout, dα = dout Hᵀ on the edges.
        b.transpose_edges(&g.graph, &u.alpha, &mut u.alpha_t)?;
        b.spmm(&g.graph, Side::Transposed, &u.alpha_t, dout, dh)?;
        b.sddmm(&g.graph, dout, h, &mut u.dalpha)?;
        // Through the softmax and β.
        let fwd = Softmaxed { beta: &self.beta.value, cos: &u.cos, alpha: &u.alpha };
        b.edge_softmax_backward(&g.graph, fwd, &u.dalpha, &mut u.dcos, &mut self.beta.grad)?;
        // Through cos_ij = n_i · n_j: both ends of every edge.
        b.spmm(&g.graph, Side::Forward, &u.dcos, &self.n, &mut u.dn)?;
        b.transpose_edges(&g.graph, &u.dcos, &mut u.dcos_t)?;
        b.spmm(&g.graph, Side::Transposed, &u.dcos_t, &self.n, &mut u.dn_t)?;
        b.add_assign(&mut u.dn, &u.dn_t)?;
        // Through the normalisation, accumulated onto the aggregation's part.
        b.row_normalize_backward(&self.n, &self.inv_norm, &u.dn, dh)
    }

    pub fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        vec![("beta", &mut self.beta)]
    }
}
