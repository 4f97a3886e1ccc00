//! Inverted dropout on a hidden activation, its mask kept for the backward pass. The mask is
//! drawn on the device from (seed, step counter), so a replayed CUDA graph draws a fresh one.

use crate::error::Result;
use crate::ops::backend::Ops;

pub struct Dropout<B: Ops> {
    p: f32,
    seed: u64,
    out: B::Mat,
    mask: B::Mask,
}

impl<B: Ops> Dropout<B> {
    pub fn new(b: &B, rows: usize, cols: usize, p: f32, seed: u64) -> Result<Self> {
        Ok(Dropout { p, seed, out: b.matrix(rows, cols)?, mask: b.mask(rows, cols)? })
    }

    fn active(&self, train: bool) -> bool {
        train && self.p > 0.0
    }

    pub fn forward(&mut self, b: &B, x: &B::Mat, train: bool) -> Result<()> {
        if self.active(train) {
            b.dropout(x, &mut self.out, &mut self.mask, self.p, self.seed)?;
        }
        Ok(())
    }

    /// What the last `forward` of `x` produced: `x` itself when inactive (no copy).
    pub fn output<'a>(&'a self, x: &'a B::Mat, train: bool) -> &'a B::Mat {
        if self.active(train) { &self.out } else { x }
    }

    /// dx = dropout'(dy) (a copy when p = 0).
    pub fn backward(&self, b: &B, dy: &B::Mat, dx: &mut B::Mat) -> Result<()> {
        if self.p == 0.0 {
            return b.copy(dy, dx);
        }
        b.dropout_backward(dy, &self.mask, self.p, dx)
    }
}
