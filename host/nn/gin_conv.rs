//! `GinConv` as PyG's `GINConv` with a two-layer MLP `fan_in -> hidden -> fan_out` (Linear →
//! ReLU → Linear, as `bench/pyg/train.py`'s `gin_mlp`): Y = MLP((1 + eps) x_i + Σ_{j -> i} x_j),
//! the sum over row i of the adjacency (unit values, no self-loops added), eps fixed at 0 or
//! learnable (a 1 x 1 parameter, initialised to 0 as PyG's). Both Linears are initialised as
//! torch's `nn.Linear` (weight and bias U(±1/sqrt(fan_in))), which `GINConv.reset_parameters`
//! keeps (the reference's init, not Glorot with zero bias; accuracy before/after in
//! bench/NOTES.md).
//!
//! Order of the products: the MLP's first Linear is linear, so
//! ((1 + eps) X + A X) W_1 = (1 + eps) P + A P with P = X W_1: this layer transforms first and
//! aggregates the narrower `fan_out`-wide P (cheaper when fan_out <= fan_in, and the only order
//! for sparse node features); b_1 is added after the sum.
//!
//! Backward, with H = relu(Z), Z = A P + (1 + eps) P + b_1, out = H W_2 + b_2:
//! dW_2 = Hᵀ dY, db_2 = 1ᵀ dY, dH = dY W_2ᵀ; dZ = dH ⊙ (H > 0); db_1 = 1ᵀ dZ;
//! d eps = Σ dZ ⊙ P; dP = Aᵀ dZ + (1 + eps) dZ; dW_1 = Xᵀ dP, dX = dP W_1ᵀ.
//!
//! Buffers (bench/NOTES.md, issue 42 item 4): H is the one `rows x hidden` matrix a layer keeps
//! from its forward to its backward (Z, then H in place; in the backward dP once dW_2 and the
//! ReLU's backward have read H). P, and in the backward dH then dZ, live in a `rows x hidden`
//! work matrix that every layer of a model shares ([`GinWork`]): each is read only within the
//! call that writes it. With a learnable eps the backward reads P (for d eps): the layer then
//! keeps P in `lin1`'s own output.

use std::cell::RefCell;
use std::rc::Rc;

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
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

op_set!(
    /// What a GIN layer needs.
    pub trait GinOps:
    crate::nn::linear::LinearOps,
    crate::nn::batch_norm::BatchNormOps,
    crate::ops::nn::add_assign::AddAssignOp,
    crate::ops::nn::dot::DotOp,
    crate::ops::nn::scaled_add::ScaledAddOp,
);

/// The sum-aggregation pattern of adjacency `a`: its entries with value 1.
pub fn sum_adjacency<B: crate::nn::gcn_conv::GcnOps>(b: &B, a: &Csr) -> Result<GcnAdjacency<B>> {
    GcnAdjacency::from_normalized(b, pattern(a))
}

/// The `rows x hidden` work matrix the GIN layers of one model share: P in a layer's forward,
/// dH then dZ in its backward (never read outside the call that wrote it).
pub struct GinWork<B: Backend>(Rc<RefCell<B::Mat>>);

impl<B: Backend> Clone for GinWork<B> {
    fn clone(&self) -> Self {
        GinWork(self.0.clone())
    }
}

impl<B: Backend> GinWork<B> {
    pub fn new(b: &B, rows: usize, hidden: usize) -> Result<Self> {
        Ok(GinWork(Rc::new(RefCell::new(b.matrix(rows, hidden)?))))
    }
}

pub struct GinConv<B: Backend> {
    /// The MLP's first Linear, applied before the sum; its bias is added after it. Its own
    /// output (P) only with a learnable eps (0 rows otherwise: P goes to `work`).
    pub lin1: Linear<B>,
    pub bias1: Param<B>,
    pub lin2: Linear<B>,
    /// Learnable eps (`None`: fixed 0).
    pub eps: Option<Param<B>>,
    /// Z, then relu(Z) in place (the second Linear's input); in the backward dP.
    h: B::Mat,
    /// P with eps fixed; dH, then dZ in place (shared with the model's other layers).
    work: GinWork<B>,
}

impl<B: GinOps> GinConv<B> {
    /// A layer over `work`'s rows, MLP `fan_in -> hidden -> fan_out` (`hidden`: `work`'s
    /// columns).
    pub fn new(b: &B, work: &GinWork<B>, fan_in: usize, fan_out: usize, train_eps: bool, rng: &mut SplitMix64) -> Result<Self> {
        let (rows, hidden) = B::shape(&work.0.borrow());
        let lin1 = Linear::torch_default(b, if train_eps { rows } else { 0 }, fan_in, hidden, false, rng)?;
        let bias1 = Param::new(b, &torch_linear_uniform(fan_in, 1, hidden, rng))?;
        Ok(GinConv {
            lin1,
            bias1,
            lin2: Linear::torch_default(b, rows, hidden, fan_out, true, rng)?,
            eps: if train_eps { Some(Param::new(b, &Matrix::zeros(1, 1))?) } else { None },
            h: b.matrix(rows, hidden)?,
            work: work.clone(),
        })
    }
}

impl<B: GinOps> GinConv<B> {
    /// The layer up to the MLP's second product, which gets its bias when `bias`.
    fn forward_mlp(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, bias: bool) -> Result<()> {
        let mut work = self.work.0.borrow_mut();
        let p = match self.eps {
            Some(_) => {
                self.lin1.forward_pre_bias(b, x)?;
                self.lin1.out_mut()
            }
            None => {
                x.times(b, &self.lin1.weight.value, &mut work)?;
                &mut *work
            }
        };
        adj.fill_forward(b, p, &mut self.h)?;
        b.sum_bias_relu(&mut self.h, p, self.eps.as_ref().map(|e| &e.value), &self.bias1.value)?;
        drop(work);
        let h = Operand::Dense(&self.h);
        if bias {
            self.lin2.forward(b, &h)?;
        } else {
            self.lin2.forward_pre_bias(b, &h)?;
        }
        Ok(())
    }
}

impl<B: GinOps> Conv<B> for GinConv<B> {
    type Adj = GcnAdjacency<B>;

    fn forward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<()> {
        self.forward_mlp(b, adj, x, true)
    }

    /// The MLP's last bias: the stack adds it with the hidden layer's ReLU and dropout in one
    /// pass (its gradient is still the column sums of dy, in `lin2`'s backward).
    fn deferred_bias(&self) -> Option<&B::Mat> {
        self.lin2.bias.as_ref().map(|p| &p.value)
    }
    fn forward_pre_bias(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>) -> Result<()> {
        self.forward_mlp(b, adj, x, false)
    }

    fn out(&self) -> &B::Mat {
        self.lin2.out()
    }
    fn out_mut(&mut self) -> &mut B::Mat {
        self.lin2.out_mut()
    }
    fn out_mut_with_deferred_bias(&mut self) -> Option<(&mut B::Mat, &B::Mat)> {
        match self.lin2.out_mut_with_bias() {
            (out, Some(bias)) => Some((out, bias)),
            (_, None) => None,
        }
    }

    /// dP is formed over H (read by nothing once dW_2 and the ReLU's backward are done), dH
    /// and dZ in the shared work matrix.
    fn backward(&mut self, b: &B, adj: &GcnAdjacency<B>, x: &Operand<B>, dy: &mut B::Mat, dx: Option<&mut B::Mat>) -> Result<()> {
        let mut work = self.work.0.borrow_mut();
        let dz = &mut *work;
        self.lin2.backward(b, &Operand::Dense(&self.h), dy, Some(&mut *dz))?;
        b.relu_backward(&self.h, dz)?;
        b.col_sums(dz, &mut self.bias1.grad)?;
        let dp = &mut self.h;
        adj.transposed_give_back(b, dz, dp)?;
        match &mut self.eps {
            Some(eps) => {
                b.dot(dz, self.lin1.out(), &mut eps.grad)?;
                b.scaled_add(dp, dz, &eps.value, 1.0)?;
            }
            None => b.add_assign(dp, dz)?,
        }
        drop(work);
        self.lin1.backward(b, x, &self.h, dx)
    }

    fn input_layer(adj: &GcnAdjacency<B>, on: bool) {
        adj.set_input_layer(on)
    }
    fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        let mut p = vec![
            ("nn.lins.0.weight", &mut self.lin1.weight),
            ("nn.lins.0.bias", &mut self.bias1),
            ("nn.lins.1.weight", &mut self.lin2.weight),
        ];
        if let Some(bias) = &mut self.lin2.bias {
            p.push(("nn.lins.1.bias", bias));
        }
        if let Some(eps) = &mut self.eps {
            p.push(("eps", eps));
        }
        p
    }
}
