//! `SageConv` as PyG's `SAGEConv` (mean aggregation, root weight):
//! Y = mean_{j -> i}(x_j) W_l + b + x_i W_r, optionally L2-normalised per row (`normalize`).
//! The mean is a fixed pattern: row i of the adjacency (the nodes i aggregates, as for GCN) with
//! values 1 / deg(i), no self-loops added; a row with no entries aggregates to 0 (PyG's mean of
//! nothing).
//!
//! Initialised as PyG's: `lin_l` and `lin_r` are PyG `Linear`s with their default initialiser
//! (torch's kaiming-uniform with a = sqrt(5): U(±1/sqrt(fan_in))), the bias U(±1/sqrt(fan_in)).
//! Glorot weights (as GCNConv's) start the dot products of link prediction ~2.4x larger and
//! moved cora's test AUC 2.7 points away from PyG's on the same split.
//!
//! Order of the products: PyG aggregates, then applies lin_l. The mean is linear, so
//! mean(X) W_l = mean(X W_l); this layer transforms first and aggregates the `fan_out`-wide
//! result. That is the cheaper order whenever fan_out <= fan_in (every default stack: features →
//! 64 → 64 → classes) and the only one for sparse node features (no SpMM with a sparse right side).
//!
//! Backward, with D = dL/d(pre-normalisation output) (the normalisation's backward when on):
//! db = 1ᵀ D; G = Mᵀ D (the transposed pattern with M's values laid out for it);
//! dW_l = Xᵀ G; dW_r = Xᵀ D; dX = G W_lᵀ + D W_rᵀ.

use crate::error::Result;
use crate::graph::Csr;
use crate::graph::ops::pattern;
use crate::nn::gcn_conv::GcnAdjacency;
use crate::nn::linear::Linear;
use crate::nn::operand::Operand;
use crate::nn::param::{Param, torch_linear_uniform};
use crate::nn::stack::Conv;
use crate::ops::backend::Backend;
use crate::ops::nn::op_set;
use crate::util::rng::SplitMix64;

op_set!(
    /// What a SAGE layer needs.
    pub trait SageOps:
    crate::nn::linear::LinearOps,
    crate::ops::nn::add_assign::AddAssignOp,
    crate::ops::nn::copy::CopyOp,
    crate::ops::nn::row_normalize::RowNormalizeOp,
);

/// The mean-aggregation pattern of adjacency `a`: its entries with values 1 / (entries in the row).
pub fn mean_adjacency<B: crate::nn::gcn_conv::GcnOps>(b: &B, a: &Csr) -> Result<GcnAdjacency<B>> {
    GcnAdjacency::from_normalized(b, mean_matrix(a)?)
}

/// [`mean_adjacency`]'s matrix, before upload.
pub fn mean_matrix(a: &Csr) -> Result<Csr> {
    let p = pattern(a);
    let mut vals = p.values().to_vec();
    for r in 0..p.n_rows() {
        let range = p.row_range(r);
        let inv = 1.0 / range.len().max(1) as f32;
        vals[range].iter_mut().for_each(|v| *v = inv);
    }
    p.with_values(vals)
}

pub struct SageConv<B: Backend> {
    /// W_l (applied before the mean, see the module note); its bias is added after aggregating.
    /// Its product goes to `t` (no output buffer of its own, as `lin_r`).
    pub lin_l: Linear<B>,
    pub bias: Param<B>,
    /// W_r, without bias (as PyG's `lin_r`).
    pub lin_r: Linear<B>,
    /// X W_l until the mean has read it, then X W_r until it is added, then in the backward
    /// Mᵀ D: one buffer for the three, as none is read after the next is written (and the
    /// backward needs neither product: the weight gradients read X and D). Two `rows x
    /// fan_out` buffers fewer than one each (bench/NOTES.md, issue 42 item 4).
    t: B::Mat,
    /// Mean(X W_l) + X W_r + b.
    pre: B::Mat,
    /// With `normalize`: the normalised rows, 1 / their norms, the layer's output (a copy of the
    /// normalised rows the stack's ReLU may overwrite), dL/d(pre) and a zero matrix to reset it.
    norm: Option<Normalize<B>>,
}

struct Normalize<B: Backend> {
    n: B::Mat,
    inv_norm: B::Mat,
    out: B::Mat,
    dpre: B::Mat,
    zeros: B::Mat,
}

impl<B: SageOps> SageConv<B> {
    pub fn new(b: &B, rows: usize, fan_in: usize, fan_out: usize, normalize: bool, rng: &mut SplitMix64) -> Result<Self> {
        let norm = if normalize {
            Some(Normalize {
                n: b.matrix(rows, fan_out)?,
                inv_norm: b.matrix(rows, 1)?,
                out: b.matrix(rows, fan_out)?,
                dpre: b.matrix(rows, fan_out)?,
                zeros: b.matrix(rows, fan_out)?,
            })
        } else {
            None
        };
        Ok(SageConv {
            // No output buffers of their own (0 rows): the products go to `t`.
            lin_l: Linear::torch_default(b, 0, fan_in, fan_out, false, rng)?,
            bias: Param::new(b, &torch_linear_uniform(fan_in, 1, fan_out, rng))?,
            lin_r: Linear::torch_default(b, 0, fan_in, fan_out, false, rng)?,
            t: b.matrix(rows, fan_out)?,
            pre: b.matrix(rows, fan_out)?,
            norm,
        })
    }
}

impl<B: SageOps> SageConv<B> {
    /// Both products and their sum, before the bias.
    fn forward_products(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<()> {
        x.times(b, &self.lin_l.weight.value, &mut self.t)?;
        adj.fill_forward(b, &mut self.t, &mut self.pre)?;
        x.times(b, &self.lin_r.weight.value, &mut self.t)?;
        b.add_assign(&mut self.pre, &self.t)
    }

    /// The layer's forward, with a ReLU fused into the bias add when `relu` (only without the
    /// normalisation, which comes after the bias).
    fn forward_act(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, relu: bool) -> Result<()> {
        self.forward_products(b, adj, x)?;
        if relu {
            b.bias_relu(&mut self.pre, &self.bias.value)?;
        } else {
            b.bias_add(&mut self.pre, &self.bias.value)?;
        }
        if let Some(nm) = &mut self.norm {
            b.row_normalize(&self.pre, &mut nm.n, &mut nm.inv_norm)?;
            b.copy(&nm.n, &mut nm.out)?;
        }
        Ok(())
    }
}

impl<B: SageOps> Conv<B> for SageConv<B> {
    type Adj = GcnAdjacency<B>;

    fn forward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<()> {
        self.forward_act(b, adj, x, false)
    }

    /// Without the normalisation the bias add is the last op: the ReLU fuses into it.
    fn forward_relu(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<bool> {
        let relu = self.norm.is_none();
        self.forward_act(b, adj, x, relu)?;
        Ok(relu)
    }

    /// Without the normalisation the bias add is the last op.
    fn deferred_bias(&self) -> Option<&B::Mat> {
        self.norm.is_none().then_some(&self.bias.value)
    }
    fn out_mut_with_deferred_bias(&mut self) -> Option<(&mut B::Mat, &B::Mat)> {
        self.norm.is_none().then_some((&mut self.pre, &self.bias.value))
    }
    fn forward_pre_bias(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<()> {
        if self.norm.is_some() {
            return Err(crate::error::Error::Unsupported("SAGE with normalisation adds its bias before normalising".into()));
        }
        self.forward_products(b, adj, x)
    }

    fn out(&self) -> &B::Mat {
        self.norm.as_ref().map_or(&self.pre, |nm| &nm.out)
    }
    fn out_mut(&mut self) -> &mut B::Mat {
        match &mut self.norm {
            Some(nm) => &mut nm.out,
            None => &mut self.pre,
        }
    }

    fn backward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, dy: &mut B::Mat, dx: Option<&mut B::Mat>) -> Result<()> {
        let d = match &mut self.norm {
            Some(nm) => {
                b.copy(&nm.zeros, &mut nm.dpre)?;
                b.row_normalize_backward(&nm.n, &nm.inv_norm, dy, &mut nm.dpre)?;
                &nm.dpre
            }
            None => dy,
        };
        b.col_sums(d, &mut self.bias.grad)?;
        adj.transposed_give_back(b, d, &mut self.t)?;
        match dx {
            Some(dx) => {
                self.lin_l.backward(b, x, &self.t, Some(&mut *dx))?;
                self.lin_r.backward(b, x, d, None)?;
                b.gemm(d, false, &self.lin_r.weight.value, true, 1.0, dx)
            }
            None => {
                self.lin_l.backward(b, x, &self.t, None)?;
                self.lin_r.backward(b, x, d, None)
            }
        }
    }

    fn input_layer(adj: &GcnAdjacency<B>, on: bool) {
        adj.set_input_layer(on)
    }
    fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        vec![("lin_l.weight", &mut self.lin_l.weight), ("lin_l.bias", &mut self.bias), ("lin_r.weight", &mut self.lin_r.weight)]
    }
}
