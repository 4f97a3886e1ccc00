//! `BatchNorm` as torch's `BatchNorm1d` over the nodes: a learnable scale (init 1) and shift
//! (init 0) per column, batch statistics in training (the running mean and variance follow with
//! momentum 0.1), the running statistics in evaluation. The running statistics are buffers, not
//! parameters: Adam never sees them, a saved model does ([`BatchNorm::buffers`]).
//!
//! A BatchNorm built at a capacity for batches padded to it (graph classification) is given a
//! count of live rows ([`BatchNorm::set_live_rows`], rewritten per batch in device memory, so a
//! recorded step reads each batch's): the statistics are the live rows' alone, and the padded
//! rows' outputs and input gradients are 0.

use crate::error::Result;
use crate::nn::param::Param;
use crate::ops::backend::Backend;
use crate::ops::nn::batch_norm::BatchNormHyper;
use crate::ops::nn::op_set;
use crate::tensor::Matrix;

op_set!(
    /// What BatchNorm needs.
    pub trait BatchNormOps:
    crate::nn::param::ParamOps,
    crate::ops::nn::batch_norm::BatchNormOp,
    crate::ops::backend::bind::BindOps,
);

pub struct BatchNorm<B: Backend> {
    pub weight: Param<B>,
    pub bias: Param<B>,
    pub running_mean: B::Mat,
    pub running_var: B::Mat,
    /// Mean and 1 / sqrt(var + eps) of the last forward, for the backward.
    mean: B::Mat,
    inv_std: B::Mat,
    out: B::Mat,
    dx: B::Mat,
    /// The count of live rows (`None`: every row is live).
    live: Option<B::Ids>,
}

impl<B: BatchNormOps> BatchNorm<B> {
    pub fn new(b: &B, rows: usize, cols: usize) -> Result<Self> {
        let ones = Matrix { rows: 1, cols, data: vec![1.0; cols] };
        Ok(BatchNorm {
            weight: Param::new(b, &ones)?,
            bias: Param::new(b, &Matrix::zeros(1, cols))?,
            running_mean: b.matrix(1, cols)?,
            running_var: b.upload(&ones)?,
            mean: b.matrix(1, cols)?,
            inv_std: b.matrix(1, cols)?,
            out: b.matrix(rows, cols)?,
            dx: b.matrix(rows, cols)?,
            live: None,
        })
    }

    /// Only the leading `rows` rows are the batch from now on (see the module note): the count
    /// is made once and rewritten in place after.
    pub fn set_live_rows(&mut self, b: &B, rows: usize) -> Result<()> {
        let n = [u32::try_from(rows).map_err(|_| crate::error::Error::Shape(format!("{rows} live rows (at most 2^32 - 1)")))?];
        match &mut self.live {
            Some(ids) => b.bind_ids(ids, &n),
            None => {
                self.live = Some(b.ids(&n)?);
                Ok(())
            }
        }
    }

    /// `BN(x)` into [`BatchNorm::out`]; training also moves the running statistics.
    pub fn forward(&mut self, b: &B, x: &B::Mat, train: bool) -> Result<()> {
        b.batch_norm(
            (x, self.live.as_ref()),
            (&self.weight.value, &self.bias.value),
            (&mut self.running_mean, &mut self.running_var),
            BatchNormHyper::torch(train),
            &mut self.out,
            (&mut self.mean, &mut self.inv_std),
        )
    }

    pub fn out(&self) -> &B::Mat {
        &self.out
    }
    pub fn out_mut(&mut self) -> &mut B::Mat {
        &mut self.out
    }

    /// The weight and bias gradients and dL/dx (in [`BatchNorm::dx`]) after a training forward
    /// of `x`.
    pub fn backward(&mut self, b: &B, x: &B::Mat, dy: &B::Mat) -> Result<()> {
        b.batch_norm_backward(
            (x, self.live.as_ref()),
            dy,
            &self.weight.value,
            (&self.mean, &self.inv_std),
            &mut self.dx,
            (&mut self.weight.grad, &mut self.bias.grad),
        )
    }

    pub fn dx(&self) -> &B::Mat {
        &self.dx
    }

    /// dL/dx, for a caller that hands it on as writable (a conv's backward may fill its rows
    /// outside the loss: [`crate::nn::stack::Conv::backward`]).
    pub fn dx_mut(&mut self) -> &mut B::Mat {
        &mut self.dx
    }

    pub fn params(&mut self) -> Vec<(&'static str, &mut Param<B>)> {
        vec![("weight", &mut self.weight), ("bias", &mut self.bias)]
    }

    pub fn buffers(&mut self) -> Vec<(&'static str, &mut B::Mat)> {
        vec![("running_mean", &mut self.running_mean), ("running_var", &mut self.running_var)]
    }
}
