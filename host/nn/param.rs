//! A trainable tensor: its value, its gradient and Adam's two moments, all allocated once.

use crate::error::Result;
use crate::ops::backend::Backend;
use crate::ops::nn::adam::AdamTensors;
use crate::ops::nn::{AdamHyper, op_set};
use crate::tensor::Matrix;
use crate::util::rng::SplitMix64;

op_set!(
    /// What a parameter needs: memory and Adam.
    pub trait ParamOps:
    Backend,
    crate::ops::nn::adam::AdamOp,
);

pub struct Param<B: Backend> {
    pub value: B::Mat,
    pub grad: B::Mat,
    m: B::Mat,
    v: B::Mat,
}

impl<B: ParamOps> Param<B> {
    pub fn new(b: &B, init: &Matrix) -> Result<Self> {
        Ok(Param {
            value: b.upload(init)?,
            grad: b.matrix(init.rows, init.cols)?,
            m: b.matrix(init.rows, init.cols)?,
            v: b.matrix(init.rows, init.cols)?,
        })
    }

    /// Adam's first and second moments (saved in a checkpoint).
    pub fn moments(&mut self) -> [&mut B::Mat; 2] {
        [&mut self.m, &mut self.v]
    }

    /// One Adam update from the gradient the last backward pass left.
    pub fn adam(&mut self, b: &B, hyper: &AdamHyper) -> Result<()> {
        b.adam(&mut self.value, &self.grad, &mut self.m, &mut self.v, hyper)
    }

    /// One Adam update of every parameter of `params` (a model's), in one launch on the GPU.
    pub fn adam_all<'a>(b: &B, params: impl IntoIterator<Item = &'a mut Param<B>>, hyper: &AdamHyper) -> Result<()>
    where
        B: 'a,
    {
        let mut tensors: Vec<AdamTensors<'_, B::Mat>> =
            params.into_iter().map(|p| AdamTensors { param: &mut p.value, grad: &p.grad, m: &mut p.m, v: &mut p.v }).collect();
        b.adam_many(&mut tensors, hyper)
    }
}

/// torch's default for `nn.Linear` (kaiming-uniform with a = sqrt(5)), for its weight and its
/// bias alike: U(-a, a) with a = 1 / sqrt(fan_in), a `rows x cols` matrix.
pub fn torch_linear_uniform(fan_in: usize, rows: usize, cols: usize, rng: &mut SplitMix64) -> Matrix {
    let a = (1.0 / (fan_in.max(1) as f64).sqrt()) as f32;
    let data = (0..rows * cols).map(|_| rng.uniform(-a, a)).collect();
    Matrix { rows, cols, data }
}

/// Glorot (Xavier) uniform: U(-a, a) with a = sqrt(6 / (fan_in + fan_out)), as PyG's `glorot`.
pub fn glorot(fan_in: usize, fan_out: usize, rng: &mut SplitMix64) -> Matrix {
    let a = (6.0 / (fan_in + fan_out) as f64).sqrt() as f32;
    let data = (0..fan_in * fan_out).map(|_| rng.uniform(-a, a)).collect();
    Matrix { rows: fan_in, cols: fan_out, data }
}
