//! `Linear`: Y = X W (+ b) (PyG's `Linear` / torch's `nn.Linear` with weight stored `in x out`).

use crate::error::Result;
use crate::nn::live_rows::LiveRows;
use crate::nn::operand::Operand;
use crate::nn::param::{Param, glorot, torch_linear_uniform};
use crate::ops::backend::Backend;
use crate::ops::nn::op_set;
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

op_set!(
    /// What a linear layer needs: its products, bias and ReLU passes, and Adam.
    pub trait LinearOps:
    crate::nn::param::ParamOps,
    crate::nn::operand::OperandOps,
    crate::ops::nn::bias_add::BiasAddOp,
    crate::ops::nn::col_sums::ColSumsOp,
    crate::ops::nn::relu::ReluOp,
);

pub struct Linear<B: Backend> {
    pub weight: Param<B>,
    /// None for a layer whose owner adds its bias later (GcnConv adds it after aggregating).
    pub bias: Option<Param<B>>,
    out: B::Mat,
}

impl<B: LinearOps> Linear<B> {
    /// A layer for `rows` nodes, `fan_in -> fan_out`, Glorot weights and zero bias.
    pub fn new(b: &B, rows: usize, fan_in: usize, fan_out: usize, rng: &mut SplitMix64) -> Result<Self> {
        Self::with_bias(b, rows, fan_in, fan_out, true, rng)
    }

    /// The same with or without a bias.
    pub fn with_bias(b: &B, rows: usize, fan_in: usize, fan_out: usize, bias: bool, rng: &mut SplitMix64) -> Result<Self> {
        Ok(Linear {
            weight: Param::new(b, &glorot(fan_in, fan_out, rng))?,
            bias: if bias { Some(Param::new(b, &Matrix::zeros(1, fan_out))?) } else { None },
            out: b.matrix(rows, fan_out)?,
        })
    }

    /// A layer initialised as torch's `nn.Linear` (weight and bias U(±1/sqrt(fan_in))), for
    /// models whose PyG counterpart builds plain `nn.Linear`s (GIN's MLP).
    pub fn torch_default(b: &B, rows: usize, fan_in: usize, fan_out: usize, bias: bool, rng: &mut SplitMix64) -> Result<Self> {
        let weight = torch_linear_uniform(fan_in, fan_in, fan_out, rng);
        let bias = if bias { Some(Param::new(b, &torch_linear_uniform(fan_in, 1, fan_out, rng))?) } else { None };
        Ok(Linear { weight: Param::new(b, &weight)?, bias, out: b.matrix(rows, fan_out)? })
    }

    pub fn forward(&mut self, b: &B, x: &Operand<B>) -> Result<&B::Mat> {
        self.forward_pre_bias(b, x)?;
        if let Some(bias) = &self.bias {
            b.bias_add(&mut self.out, &bias.value)?;
        }
        Ok(&self.out)
    }

    /// `max(x W + bias, 0)`: the bias and a ReLU in one pass after the product.
    pub fn forward_relu(&mut self, b: &B, x: &Operand<B>) -> Result<&B::Mat> {
        self.forward_pre_bias(b, x)?;
        match &self.bias {
            Some(bias) => b.bias_relu(&mut self.out, &bias.value)?,
            None => b.relu(&mut self.out)?,
        }
        Ok(&self.out)
    }

    /// `x W` alone: the output before the bias (for a caller that adds the bias in a pass of
    /// its own, with what follows it).
    pub fn forward_pre_bias(&mut self, b: &B, x: &Operand<B>) -> Result<&B::Mat> {
        x.times(b, &self.weight.value, &mut self.out)?;
        Ok(&self.out)
    }

    /// [`Linear::forward_pre_bias`] on the rows `rows` of a dense `x` (a layer of a part whose
    /// product's halo rows come from the exchange: [`crate::nn::live_rows`]).
    pub fn forward_pre_bias_on(&mut self, b: &B, x: &Operand<B>, rows: &LiveRows) -> Result<&B::Mat> {
        x.times_on(b, &self.weight.value, &mut self.out, rows)?;
        Ok(&self.out)
    }

    pub fn out(&self) -> &B::Mat {
        &self.out
    }
    pub fn out_mut(&mut self) -> &mut B::Mat {
        &mut self.out
    }
    /// The weight and the output buffer at once (a caller that forms the output's rows in
    /// steps, between which it hands the buffer on).
    pub fn weight_and_out_mut(&mut self) -> (&B::Mat, &mut B::Mat) {
        (&self.weight.value, &mut self.out)
    }
    /// The output buffer and the bias (if any) at once (a caller that rewrites the output with
    /// the bias, as a fused tail after [`Linear::forward_pre_bias`]).
    pub fn out_mut_with_bias(&mut self) -> (&mut B::Mat, Option<&B::Mat>) {
        (&mut self.out, self.bias.as_ref().map(|p| &p.value))
    }

    /// Gradients of weight and bias from `dy`, and dX = dY Wᵀ into `dx` when asked (the node
    /// features need none).
    pub fn backward(&mut self, b: &B, x: &Operand<B>, dy: &B::Mat, dx: Option<&mut B::Mat>) -> Result<()> {
        self.backward_on(b, x, dy, dx, &LiveRows::all())
    }

    /// [`Linear::backward`] over the rows `rows` (dY must be zero on the others: a part's
    /// gradient once its halo rows are given back), dX formed on those rows only.
    pub fn backward_on(&mut self, b: &B, x: &Operand<B>, dy: &B::Mat, dx: Option<&mut B::Mat>, rows: &LiveRows) -> Result<()> {
        backward_rows(b, (&mut self.weight, self.bias.as_mut()), x, dy, dx, rows)
    }

    /// [`Linear::backward`] with dY in this layer's own output buffer (an owner that formed dY
    /// there, the output being read by nothing after its forward).
    pub fn backward_from_out(&mut self, b: &B, x: &Operand<B>, dx: Option<&mut B::Mat>) -> Result<()> {
        self.backward_from_out_on(b, x, dx, &LiveRows::all())
    }

    /// [`Linear::backward_from_out`] over the rows `rows`, as [`Linear::backward_on`].
    pub fn backward_from_out_on(&mut self, b: &B, x: &Operand<B>, dx: Option<&mut B::Mat>, rows: &LiveRows) -> Result<()> {
        backward_rows(b, (&mut self.weight, self.bias.as_mut()), x, &self.out, dx, rows)
    }

    pub fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        let mut p = vec![("weight", &mut self.weight)];
        if let Some(bias) = &mut self.bias {
            p.push(("bias", bias));
        }
        p
    }
}

/// A linear layer's backward over the rows `rows` of `dy` (and of X and dX).
fn backward_rows<B: LinearOps>(
    b: &B,
    (weight, bias): (&mut Param<B>, Option<&mut Param<B>>),
    x: &Operand<B>,
    dy: &B::Mat,
    dx: Option<&mut B::Mat>,
    rows: &LiveRows,
) -> Result<()> {
    if let Some(bias) = bias {
        rows.read(b, dy, |dy| b.col_sums(dy, &mut bias.grad))?;
    }
    x.transposed_times_on(b, dy, &mut weight.grad, rows)?;
    match dx {
        Some(dx) => rows.read_write(b, dy, dx, |dy, dx| b.gemm(dy, false, &weight.value, true, 0.0, dx)),
        None => Ok(()),
    }
}
